//! End-to-end tests: C programs in, verdicts and replay files out.
//!
//! One test binary (each links wasmtime, so one link instead of many). The
//! toolchain is installed on first use, idempotently; compiled targets and
//! modules are shared through heddle's cache.

mod campaign;
mod common;
mod compat;
mod core;
mod deploy;
mod diagnose;
mod docs;
mod exceptions;
mod explore;
mod instrument;
mod library;
mod long_report;
mod many;
mod memcheck;
mod pipes;
mod plans;
mod portable;
mod projects;
mod races;
mod report;
mod runs_to_bug;
mod rust;
mod rust_sync;
mod signals;
mod site_table;
mod strategies;
mod suites;
mod toolchain;
