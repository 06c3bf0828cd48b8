//! cargo-fuzz target: the split virtqueue (RX and TX) against a hostile
//! virtio device (see `../virtq_hostile.rs`). Run with `cargo xtask fuzz --seconds N`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../virtq_hostile.rs"]
mod virtq_hostile;

fuzz_target!(|data: &[u8]| virtq_hostile::run(data));
