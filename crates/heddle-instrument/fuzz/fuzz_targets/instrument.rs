//! The instrumenter never panics, and a module it returns validates
//! (`heddle_instrument::fuzzing::check_one`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = heddle_instrument::fuzzing::check_one(data) {
        panic!("{e}");
    }
});
