//! Failure reports people and machines can read (`heddle show`).
