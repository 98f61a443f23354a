//! Tests: explore.
