//! Systematic exploration of schedules (`heddle explore`).
