//! junit (in progress).
