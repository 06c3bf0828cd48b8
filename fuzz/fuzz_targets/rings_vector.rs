//! cargo-fuzz target: the rings on the vector burst loops against a hostile
//! device (see `../hostile.rs`; `rings` is the same on the scalar loops).
//! Run both with `cargo xtask fuzz --seconds N`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../hostile.rs"]
mod hostile;

fuzz_target!(|data: &[u8]| hostile::run_on(data, pollnic_rings::DataPath::Vector));
