//! Tests: strategies and the comparison harness.
