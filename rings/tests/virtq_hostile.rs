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

#[test]
fn event_idx_seeds_kick_as_the_device_asks() {
    // The two event-index seeds, in event-index mode only, with the
    // harness's exact kick oracle.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/virtq");
    for name in ["event-idx-sleep-then-wake", "event-idx-hostile-avail-event"] {
        let data = std::fs::read(dir.join(name)).expect("committed seed");
        virtq_hostile::run_with(&data, false, true);
    }
}

/// The TX queue with event indices against a device that names
/// `avail_event` by hand: a kick exactly when a burst's new avail indices
/// cross it (Linux `vring_need_event`), whatever else it holds.
#[test]
fn event_idx_kicks_exactly_when_avail_event_is_crossed() {
    use pollnic_rings::virtq::device::DeviceView;
    use pollnic_rings::{IdentityMapper, Mempool, PageSize, VirtqTx};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let pool = Mempool::new(64, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    let mut cache = pollnic_rings::PoolCache::new(pool.clone(), 8);
    let kicks = Arc::new(AtomicU64::new(0));
    let mut tx = VirtqTx::new(
        32,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        virtq_hostile::Bell(kicks.clone()),
    )
    .unwrap();
    tx.use_event_idx();
    // SAFETY: identity-mapped queue, alive for the whole test.
    let dev = unsafe { DeviceView::new(tx.addrs()) };
    let mut send = |n: usize| {
        let before = kicks.load(Ordering::Relaxed);
        let mut burst: Vec<_> = (0..n)
            .map(|_| {
                let mut p = pool.alloc().unwrap();
                p.set_len(60).unwrap();
                p
            })
            .collect();
        assert_eq!(tx.tx_burst(&mut burst, &mut cache), n);
        kicks.load(Ordering::Relaxed) - before
    };
    // avail 0 -> 2, the device asks at 0: crossed.
    dev.set_avail_event(0);
    assert_eq!(send(2), 1);
    // avail 2 -> 4, the device still at 1 (busy with the first two): no kick.
    dev.set_avail_event(1);
    assert_eq!(send(2), 0);
    // avail 4 -> 5, the device asks at 4 (it read everything, sleeps): kick.
    dev.set_avail_event(4);
    assert_eq!(send(1), 1);
    // avail 5 -> 6, the device asks at 6: it has read the new entry
    // already (believable), so none.
    dev.set_avail_event(6);
    assert_eq!(send(1), 0);
    // avail 6 -> 7, the device asks at 8 (beyond what was published):
    // not crossed yet, none; avail 7 -> 9 crosses it: a kick.
    dev.set_avail_event(8);
    assert_eq!(send(1), 0);
    assert_eq!(send(2), 1);
    // avail 9 -> 10 with avail_event 0x9000, far away (stale, as QEMU
    // leaves it while busy): none.
    dev.set_avail_event(0x9000);
    assert_eq!(send(1), 0);
    // avail 10 -> 11 with avail_event 3 (behind, stale): none.
    dev.set_avail_event(3);
    assert_eq!(send(1), 0);
    // avail 11 -> 13 with avail_event 12: crossed, a kick.
    dev.set_avail_event(12);
    assert_eq!(send(2), 1);
    let vq = tx.virtq_stats();
    assert_eq!((vq.kicks, vq.kicks_suppressed), (4, 5));
    assert!(vq.event_idx);
    assert_eq!(dev.avail_flags(), 0);
}

/// A device that rewrites the avail ring from its own thread while the
/// driver's bursts run (here: 0xffff, no chain, into every slot, over and
/// over): the driver keeps the ids it re-posts in its own memory, so no
/// burst panics, no chain is marked wrongly and the queue never stops.
/// Before the fix, `repost` read each id back from the avail ring and
/// indexed its chain table with it: this test panicked with an index out
/// of bounds.
#[test]
fn a_device_rewriting_the_avail_ring_during_bursts_changes_nothing() {
    use pollnic_rings::virtq::device::DeviceView;
    use pollnic_rings::{IdentityMapper, Mempool, PageSize, VirtqRx, VIRTIO_NET_HDR_LEN};
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    const SIZE: u16 = 256; // 128 chains
    let pool = Mempool::new(1024, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    let mut rx = VirtqRx::new(
        SIZE,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        &pool,
        virtq_hostile::Bell(Arc::new(AtomicU64::new(0))),
    )
    .unwrap();
    rx.start();
    // SAFETY: identity-mapped queue, alive until the end of the test (the
    // scribbler is joined before `rx` drops).
    let dev = unsafe { DeviceView::new(rx.addrs()) };
    // The device's own record of the chains it holds, read once before it
    // turns hostile; the driver re-posts each chain it takes, in order.
    let mut held: VecDeque<u16> = (0..dev.avail_idx()).map(|s| dev.avail_entry(s)).collect();
    assert_eq!(held.len(), SIZE as usize / 2);
    let stop = Arc::new(AtomicBool::new(false));
    let scribbler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut passes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for slot in 0..SIZE {
                    dev.set_avail_entry(slot, 0xffff);
                }
                passes += 1;
            }
            passes
        })
    };
    let (mut used, mut got) = (0u16, 0u64);
    let mut out = Vec::new();
    // A panic in a burst must stop the scribbler before the queue's memory
    // goes, so it is caught, and raised again after the join.
    let bursts = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for round in 0..20_000u32 {
            let n = 1 + round % 32;
            for _ in 0..n {
                let id = held.pop_front().expect("the device holds chains");
                dev.put_used(used, id as u32, VIRTIO_NET_HDR_LEN + 60);
                used = used.wrapping_add(1);
                held.push_back(id);
            }
            dev.set_used_idx(used);
            let mut left = n as usize;
            while left > 0 {
                let k = rx.rx_burst(&mut out, 32);
                assert!(k > 0 && !rx.virtq_stats().stopped, "round {round}: stopped");
                left -= k;
                got += k as u64;
            }
            out.clear();
        }
    }));
    stop.store(true, Ordering::Relaxed);
    let passes = scribbler.join().unwrap();
    if let Err(p) = bursts {
        std::panic::resume_unwind(p);
    }
    assert!(passes > 0, "the device rewrote the ring during the bursts");
    assert_eq!(rx.virtq_stats().device_errors, 0);
    assert_eq!(rx.stats().packets, got);
}
