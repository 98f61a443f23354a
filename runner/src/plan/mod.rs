//! Schedule plans (REINS-style): ordering and state constraints over events.
