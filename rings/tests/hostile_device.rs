//! The fuzz harness's hostile device (`fuzz/hostile.rs`) on the stable
//! toolchain: the committed seed corpus and a few thousand pseudo-random
//! inputs replay clean on both burst loops (scalar and vector), and the
//! harness's accounting does catch a lost buffer. The cargo-fuzz target (`cargo xtask fuzz`) runs the same code
//! under libFuzzer and AddressSanitizer.

#[path = "../../fuzz/hostile.rs"]
mod hostile;

use pollnic_rings::DataPath;
use std::path::Path;

#[test]
fn seed_corpus_replays_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/rings");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/rings is committed") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        eprintln!("seed {}", path.display());
        hostile::run_on(&data, DataPath::Scalar);
        hostile::run_on(&data, DataPath::Vector);
        n += 1;
    }
    assert!(
        n >= 5,
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
    for case in 0..400 {
        let len = (next() % 600) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        for path in [DataPath::Scalar, DataPath::Vector] {
            let r = std::panic::catch_unwind(|| hostile::run_on(&data, path));
            assert!(
                r.is_ok(),
                "case {case} on {path:?} failed: input {data:02x?}"
            );
        }
    }
}

#[test]
fn the_accounting_catches_a_lost_buffer() {
    let r = std::panic::catch_unwind(hostile::lose_one_buffer);
    let msg = r.expect_err("a forgotten packet must fail the accounting");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("lost"), "unexpected failure: {msg}");
}
