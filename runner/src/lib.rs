#![warn(missing_docs)]
//! heddle: a deterministic-simulation test runner for concurrent C/C++.
//!
//! A target is compiled to `wasm32-wasip1-threads` ([`cc`]), rewritten so that
//! every instruction that can communicate between threads calls into the host
//! first ([`instrument`]), and run inside wasmtime with exactly one guest
//! thread running at a time ([`runtime`]); which thread runs next is decided
//! by a [`sched::Strategy`]. A run is a pure function of (module, config,
//! seed): its [`trace`] is a small replay file that reproduces it anywhere.
//!
//! Data flows one way:
//! `source → module → instrumented module + sites → runs → traces → verdicts → reports`.

pub mod campaign;
pub mod cargo;
pub mod cc;
pub mod cli;
pub mod compare;
pub mod error;
pub mod explore;
pub mod fuzz;
pub mod hunt;
pub mod instrument;
pub(crate) mod interrupt;
pub mod manifest;
pub mod model;
pub use heddle_instrument::modinfo;
pub mod observe;
pub mod paths;
pub mod plan;
pub mod plan_run;
pub(crate) mod pool;
pub mod report;
pub mod reproduce;
pub mod runtime;
pub mod sched;
pub mod suite;
pub mod target;
pub(crate) mod text;
pub mod trace;
pub mod verdict;

#[cfg(test)]
mod layering;
