//! The split virtqueue against a hostile device (`fuzz/virtq_hostile.rs`) on
//! the stable toolchain: the committed seeds and a few thousand
//! pseudo-random inputs replay clean, and the harness's accounting does
//! catch a lost buffer. The cargo-fuzz target `virtq` (`cargo xtask fuzz`)
//! runs the same code under libFuzzer and AddressSanitizer.

#[path = "../../fuzz/virtq_hostile.rs"]
mod virtq_hostile;

use std::path::Path;

#[test]
fn seed_corpus_replays_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/virtq");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/virtq is committed") {
        let path = entry.unwrap().path();
        eprintln!("seed {}", path.display());
        virtq_hostile::run(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(
        n >= 4,
        "expected the committed seed corpus, found {n} inputs"
    );
}

#[test]
fn pseudo_random_inputs_replay_clean() {
    // xorshift64*: deterministic, so a failure names its input number.
    let mut s: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for case in 0..3000 {
        let len = (next() % 400) as usize;
        // Bias the opcodes towards well-behaved traffic in half the cases,
        // so long runs of good frames (and their exact checks) happen too.
        let tame = case % 2 == 0;
        let data: Vec<u8> = (0..len)
            .map(|i| {
                let b = next() as u8;
                if tame && i % 3 == 0 {
                    [0u8, 3, 5, 6, 8, 4, 0, 3][(b % 8) as usize]
                } else {
                    b
                }
            })
            .collect();
        let r = std::panic::catch_unwind(|| virtq_hostile::run(&data));
        assert!(r.is_ok(), "case {case} failed: input {data:02x?}");
    }
}

#[test]
fn the_accounting_catches_a_lost_buffer() {
    let r = std::panic::catch_unwind(virtq_hostile::lose_one_buffer);
    let msg = r.expect_err("a forgotten packet must fail the accounting");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("lost"), "unexpected failure: {msg}");
}

#[test]
fn a_repeated_id_and_a_jump_stop_the_queue() {
    // A good frame on chain 0, then chain 0 again in the next used entry
    // (op 1 with id 0x108, which the harness folds to 0x108 % 24 = 0)
    // before the driver has re-posted it, then a drain: the repeated id
    // must stop the queue.
    virtq_hostile::run(&[0, 0, 60, 0, 1, 0x08, 1, 0, 0, 64, 0, 0, 0, 3, 39]);
    // A used-index jump of 1000 with nothing completed, then a drain.
    virtq_hostile::run(&[2, 0xe8, 0x03, 3, 39]);
}
