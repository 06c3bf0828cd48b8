//! The packed virtqueue against a hostile device
//! (`fuzz/virtq_packed_hostile.rs`) on the stable toolchain: the committed
//! seeds and a few thousand pseudo-random inputs replay clean. The
//! cargo-fuzz target `virtq_packed` (`cargo xtask fuzz`) runs the same code
//! under libFuzzer and AddressSanitizer.

#[path = "../../fuzz/virtq_packed_hostile.rs"]
mod virtq_packed_hostile;

use std::path::Path;

#[test]
fn seed_corpus_replays_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/virtq_packed");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/virtq_packed is committed") {
        let path = entry.unwrap().path();
        eprintln!("seed {}", path.display());
        virtq_packed_hostile::run(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(
        n >= 6,
        "expected the committed seed corpus, found {n} inputs"
    );
}

#[test]
fn pseudo_random_inputs_replay_clean() {
    // xorshift64*: deterministic, so a failure names its input number.
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for case in 0..4000 {
        let len = (next() % 400) as usize;
        // Half the cases lean to honest traffic (no raw used descriptor,
        // no bogus TX id), so long good runs and their exact checks happen.
        let tame = case % 2 == 0;
        let data: Vec<u8> = (0..len)
            .map(|i| {
                let b = next() as u8;
                if tame && i % 3 == 0 {
                    [0u8, 0, 1, 1, 3, 4, 5, 6][(b % 8) as usize]
                } else if tame {
                    b & 0xfe
                } else {
                    b
                }
            })
            .collect();
        // The first byte's top bit picks the RX chains: half the cases of
        // each kind.
        let mut data = data;
        if let Some(b) = data.first_mut() {
            // ... its next bit the header mode, in half of each, and bit 5
            // the header's length in that mode, in half again, and bit 4
            // the in-order mode, in half of all of them.
            *b = (*b & 0x0f)
                | if case % 4 < 2 { 0x80 } else { 0 }
                | if case % 8 < 4 { 0x40 } else { 0 }
                | if case % 16 < 8 { 0x20 } else { 0 }
                | if case % 32 < 16 { 0x10 } else { 0 };
        }
        let r = std::panic::catch_unwind(|| virtq_packed_hostile::run(&data));
        assert!(r.is_ok(), "case {case} failed: input {data:02x?}");
    }
}
