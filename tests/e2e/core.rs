//! Tests: core.
