//! Running a module under plain wasmtime, without heddle's scheduler: the
//! baseline for differential tests and benchmarks.
