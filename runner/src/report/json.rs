//! json (in progress).
