//! Tests: instrument.
