//! Tests: plans and observation.
