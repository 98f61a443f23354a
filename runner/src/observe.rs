//! Shared-access observation (`heddle observe`).
