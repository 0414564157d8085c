//! Fuzz target `model`: arbitrary bytes through `checks::model` (what it asserts
//! is written there, shared with the corpus replay test).
#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code)] // each target uses one check
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::model(data);
});
