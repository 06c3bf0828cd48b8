//! cargo-fuzz target: the rings against a hostile device (see `../hostile.rs`).
//! Run it with `cargo xtask fuzz --seconds N`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../hostile.rs"]
mod hostile;

fuzz_target!(|data: &[u8]| hostile::run(data));
