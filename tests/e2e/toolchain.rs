//! Tests: toolchain.
