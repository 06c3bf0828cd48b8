//! cargo-fuzz target: the packed virtqueue (RX and TX, virtio 1.2 §2.8)
//! against a hostile virtio device (see `../virtq_packed_hostile.rs`). Run
//! with `cargo xtask fuzz --seconds N`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../virtq_packed_hostile.rs"]
mod virtq_packed_hostile;

fuzz_target!(|data: &[u8]| virtq_packed_hostile::run(data));
