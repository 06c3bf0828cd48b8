//! RX/TX ring bookkeeping against the software device model: wraparound, full
//! and empty rings, bursts larger than the ring, hostile write-backs, and the
//! invariant that every buffer comes back to its pool.

use pollnic_hw::desc::{RxCompletion, RXD_ERR_RXE, RXD_STAT_DD, RXD_STAT_EOP};
use pollnic_model::ring::{SoftDoorbell, SoftNic, TxSink};
use pollnic_rings::{
    DescRing, IdentityMapper, Mempool, Packet, PageSize, PoolCache, RxRing, TxRing,
    RX_UNFINISHED_POLLS,
};
use std::sync::Arc;

fn pool(n: u32) -> Mempool {
    Mempool::new(n, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap()
}

fn rx_setup(nic: &SoftNic, ring: u16, pool: &Mempool) -> RxRing<SoftDoorbell> {
    let desc = DescRing::new(ring, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    // SAFETY: the pool outlives every use of the model in this test.
    unsafe { nic.add_region(pool.region()) };
    // SAFETY: the ring's memory moves into the returned RxRing, which each
    // test keeps until it no longer uses the model.
    let db = unsafe { nic.attach_rx(&desc, pool.buf_size()) };
    let mut rx = RxRing::new(desc, pool, db).unwrap();
    rx.start();
    rx
}

fn tx_setup(nic: &SoftNic, ring: u16, pool: &Mempool) -> TxRing<SoftDoorbell> {
    let desc = DescRing::new(ring, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    // SAFETY: as in `rx_setup`, with the returned TxRing.
    let db = unsafe { nic.attach_tx(&desc) };
    TxRing::new(desc, pool, db)
}

/// A frame whose bytes encode its sequence number.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize * 7 + i) as u8).collect()
}

#[test]
fn empty_ring_polls_empty() {
    let nic = SoftNic::default();
    let p = pool(64);
    let mut rx = rx_setup(&nic, 32, &p);
    let mut out = Vec::new();
    assert_eq!(rx.rx_burst(&mut out, 32), 0);
    assert_eq!(rx.stats().empty_polls, 1);
    assert_eq!(nic.rx_free_descriptors(), 31, "one descriptor held back");
}

#[test]
fn full_ring_backpressures_and_resumes() {
    let nic = SoftNic::default();
    let p = pool(64);
    let mut rx = rx_setup(&nic, 32, &p);
    let mut delivered = 0;
    while nic.receive(&frame(delivered, 60), delivered) {
        delivered += 1;
    }
    assert_eq!(delivered, 31);
    assert_eq!(nic.stats().rnbc, 1);
    let mut out = Vec::new();
    // A burst larger than the ring returns what is there.
    assert_eq!(rx.rx_burst(&mut out, 1000), 31);
    for (i, pkt) in out.iter().enumerate() {
        assert_eq!(pkt.data(), &frame(i as u32, 60)[..]);
        assert_eq!(pkt.rss_hash(), i as u32);
    }
    assert_eq!(
        nic.rx_free_descriptors(),
        31,
        "all re-armed with one tail write"
    );
    assert!(nic.receive(&frame(99, 60), 0));
}

#[test]
fn rx_wraparound_many_times_in_order() {
    let nic = SoftNic::default();
    let p = pool(96);
    let mut rx = rx_setup(&nic, 32, &p);
    let mut next_rx = 0u32;
    let mut out = Vec::with_capacity(64);
    for seq in 0..5000u32 {
        let len = 60 + (seq as usize * 37) % 1455;
        if !nic.receive(&frame(seq, len), seq) {
            panic!("ring unexpectedly full at {seq}");
        }
        if seq % 13 == 12 {
            rx.rx_burst(&mut out, 64);
            for pkt in out.drain(..) {
                let l = 60 + (next_rx as usize * 37) % 1455;
                assert_eq!(pkt.data(), &frame(next_rx, l)[..], "frame {next_rx}");
                next_rx += 1;
            }
        }
    }
    rx.rx_burst(&mut out, 64);
    next_rx += out.len() as u32;
    out.clear();
    assert_eq!(next_rx, 5000);
    assert_eq!(rx.stats().packets, 5000);
    drop(rx);
    assert_eq!(p.free_count(), 96, "every buffer back in the pool");
}

#[test]
fn empty_pool_stops_burst_and_counts_nombuf_without_loss() {
    let nic = SoftNic::default();
    let p = pool(40); // 32 armed + 8 spare
    let mut rx = rx_setup(&nic, 32, &p);
    for seq in 0..31 {
        assert!(nic.receive(&frame(seq, 100), 0));
    }
    let mut held = Vec::new();
    assert_eq!(rx.rx_burst(&mut held, 64), 8);
    assert_eq!(rx.stats().rx_nombuf, 1);
    assert_eq!(rx.rx_burst(&mut held, 64), 0);
    assert_eq!(rx.stats().rx_nombuf, 2);
    // Each time the application frees what it holds, the ring can go on:
    // 8 buffers circulate, no frame is lost or reordered.
    let mut seen: Vec<Vec<u8>> = held.iter().map(|p| p.data().to_vec()).collect();
    drop(held);
    let mut rest = Vec::new();
    while seen.len() < 31 {
        let n = rx.rx_burst(&mut rest, 64);
        assert!(n > 0 && n <= 8, "burst of {n}");
        seen.extend(rest.drain(..).map(|p| p.data().to_vec()));
    }
    for (i, d) in seen.iter().enumerate() {
        assert_eq!(d, &frame(i as u32, 100));
    }
    drop(rx);
    assert_eq!(p.free_count(), 40);
}

/// A finished-looking write-back (DD and EOP) of `len` bytes, hash 7.
fn wb(len: u16) -> RxCompletion {
    RxCompletion {
        len,
        status_error: RXD_STAT_DD | RXD_STAT_EOP,
        rss_hash: 7,
        pkt_info: 0,
        vlan: 0,
    }
}

#[test]
fn a_writeback_seen_before_its_length_lands_is_waited_for() {
    let nic = SoftNic::default();
    let p = pool(64);
    let mut rx = rx_setup(&nic, 32, &p);
    // What the guest saw under QEMU/TCG: DD set, the length not yet.
    assert!(nic.receive(&frame(1, 60), 7));
    nic.rewrite_rx_writeback(0, wb(0));
    let mut out = Vec::new();
    assert_eq!(rx.rx_burst(&mut out, 32), 0, "not handed up yet");
    assert_eq!(rx.stats().rx_errors, 0, "not dropped either");
    // The rest of the write-back lands: the frame arrives whole.
    nic.rewrite_rx_writeback(0, wb(60));
    assert!(nic.receive(&frame(2, 60), 8));
    assert_eq!(rx.rx_burst(&mut out, 32), 2);
    assert_eq!(out[0].data(), &frame(1, 60)[..]);
    assert_eq!(out[1].data(), &frame(2, 60)[..]);
    assert_eq!(rx.stats().rx_errors, 0);
    out.clear();
    // One that never completes is dropped after RX_UNFINISHED_POLLS polls,
    // so a device that writes DD with length 0 cannot stop the queue.
    assert!(nic.inject_rx_writeback(wb(0)));
    assert!(nic.receive(&frame(3, 60), 9));
    for _ in 0..RX_UNFINISHED_POLLS {
        assert_eq!(rx.rx_burst(&mut out, 32), 0);
    }
    assert_eq!(rx.rx_burst(&mut out, 32), 1);
    assert_eq!(out[0].data(), &frame(3, 60)[..]);
    assert_eq!(rx.stats().rx_errors, 1);
}

#[test]
fn each_unfinished_writeback_gets_its_own_polls() {
    let nic = SoftNic::default();
    let p = pool(64);
    let mut rx = rx_setup(&nic, 32, &p);
    let mut out = Vec::new();
    assert!(nic.receive(&frame(0, 60), 7));
    nic.rewrite_rx_writeback(0, wb(0));
    assert_eq!(rx.rx_burst(&mut out, 32), 0);
    // Every poll the previous write-back has landed and a new one shows DD
    // before its length: none has waited RX_UNFINISHED_POLLS polls, so none
    // is dropped, however many polls in a row stop at one.
    for i in 1..=2 * RX_UNFINISHED_POLLS as u16 {
        nic.rewrite_rx_writeback(i - 1, wb(60));
        assert!(nic.receive(&frame(i as u32, 60), 7));
        nic.rewrite_rx_writeback(i, wb(0));
        assert_eq!(rx.rx_burst(&mut out, 32), 1, "poll {i}");
        assert_eq!(rx.stats().rx_errors, 0, "poll {i}");
    }
    for (k, pk) in out.iter().enumerate() {
        assert_eq!(pk.data(), &frame(k as u32, 60)[..]);
    }
}

#[test]
fn hostile_writebacks_are_dropped_and_buffers_recycled() {
    let nic = SoftNic::default();
    let p = pool(64);
    let mut rx = rx_setup(&nic, 32, &p);
    let ok = RXD_STAT_DD | RXD_STAT_EOP;
    let bad = [
        RxCompletion {
            len: 4000,
            status_error: ok,
            rss_hash: 0,
            pkt_info: 0,
            vlan: 0,
        },
        RxCompletion {
            len: 0,
            status_error: ok,
            rss_hash: 0,
            pkt_info: 0,
            vlan: 0,
        },
        RxCompletion {
            len: 60,
            status_error: ok | RXD_ERR_RXE,
            rss_hash: 0,
            pkt_info: 0,
            vlan: 0,
        },
        // A frame spanning two descriptors: both pieces are dropped.
        RxCompletion {
            len: 2048,
            status_error: RXD_STAT_DD,
            rss_hash: 0,
            pkt_info: 0,
            vlan: 0,
        },
        RxCompletion {
            len: 10,
            status_error: ok,
            rss_hash: 0,
            pkt_info: 0,
            vlan: 0,
        },
    ];
    for wb in bad {
        assert!(nic.inject_rx_writeback(wb));
    }
    assert!(nic.receive(&frame(1, 64), 0));
    // A real frame too long for one buffer, split by the model like the 82576.
    assert!(nic.receive(&frame(2, 3000), 0));
    assert!(nic.receive(&frame(3, 64), 0));
    let mut out = Vec::new();
    // The zero-length write-back holds the ring for RX_UNFINISHED_POLLS polls
    // (it may still be landing), then is dropped like the others.
    for _ in 0..RX_UNFINISHED_POLLS {
        assert_eq!(rx.rx_burst(&mut out, 64), 0);
    }
    assert_eq!(rx.rx_burst(&mut out, 64), 2);
    assert_eq!(out[0].data(), &frame(1, 64)[..]);
    assert_eq!(out[1].data(), &frame(3, 64)[..]);
    assert_eq!(rx.stats().rx_errors, 7);
    drop(out);
    drop(rx);
    assert_eq!(p.free_count(), 64);
}

fn make(p: &Mempool, seq: u32, len: usize) -> Packet {
    let mut pkt = p.alloc().unwrap();
    pkt.set_len(len).unwrap();
    pkt.data_mut().copy_from_slice(&frame(seq, len));
    pkt
}

#[test]
fn tx_burst_larger_than_ring_takes_what_fits_and_keeps_the_rest() {
    let nic = SoftNic::new(TxSink::Collect);
    let p = pool(128);
    // SAFETY: the pool outlives every use of the model in this test.
    unsafe { nic.add_region(p.region()) };
    let mut tx = tx_setup(&nic, 32, &p);
    let mut cache = PoolCache::new(p.clone(), 64);
    let mut pkts: Vec<Packet> = (0..100).map(|s| make(&p, s, 60 + s as usize)).collect();
    // The model completes synchronously, so each burst reclaims the last.
    let mut sent = 0;
    while !pkts.is_empty() {
        let n = tx.tx_burst(&mut pkts, &mut cache);
        assert!(n <= 31);
        sent += n;
    }
    assert_eq!(sent, 100);
    let frames = nic.take_tx_frames();
    assert_eq!(frames.len(), 100);
    for (s, f) in frames.iter().enumerate() {
        assert_eq!(f, &frame(s as u32, 60 + s));
    }
    tx.reclaim(&mut cache);
    assert_eq!(tx.in_flight(), 0);
    assert_eq!(p.free_count() + cache.len(), 128);
    drop(cache);
    assert_eq!(p.free_count(), 128);
}

#[test]
fn tx_ring_full_when_device_is_slow() {
    let nic = SoftNic::new(TxSink::Collect);
    let p = pool(128);
    // SAFETY: the pool outlives every use of the model in this test.
    unsafe { nic.add_region(p.region()) };
    // A ring whose doorbell never reaches the model: nothing completes.
    struct Mute;
    impl pollnic_rings::Doorbell for Mute {
        fn ring(&mut self, _t: u16) {}
    }
    let desc = DescRing::new(32, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    let mut tx = TxRing::new(desc, &p, Mute);
    let mut cache = PoolCache::new(p.clone(), 64);
    let mut pkts: Vec<Packet> = (0..40).map(|s| make(&p, s, 60)).collect();
    assert_eq!(tx.tx_burst(&mut pkts, &mut cache), 31);
    assert_eq!(pkts.len(), 9, "the rest stay with the caller, in order");
    assert_eq!(pkts[0].data(), &frame(31, 60)[..]);
    assert_eq!(tx.tx_burst(&mut pkts, &mut cache), 0);
    assert_eq!(tx.stats().ring_full, 2);
    drop(pkts);
    drop(tx);
    drop(cache);
    assert_eq!(
        p.free_count(),
        128,
        "in-flight buffers return when the ring is dropped"
    );
}

#[test]
fn forward_rx_to_tx_zero_copy_many_wraps() {
    let rx_nic = SoftNic::default();
    let tx_nic = SoftNic::new(TxSink::Collect);
    let p = pool(256);
    // SAFETY: the pool outlives every use of the model in this test.
    unsafe { tx_nic.add_region(p.region()) };
    let mut rx = rx_setup(&rx_nic, 64, &p);
    let mut tx = tx_setup(&tx_nic, 64, &p);
    let mut buf = Vec::with_capacity(32);
    let mut total = 0;
    for round in 0..200u32 {
        for k in 0..20 {
            assert!(rx_nic.receive(&frame(round * 20 + k, 64 + k as usize), 0));
        }
        rx.rx_burst(&mut buf, 32);
        while !buf.is_empty() {
            total += tx.tx_burst(&mut buf, rx.cache_mut());
        }
    }
    assert_eq!(total, 4000);
    let frames = tx_nic.take_tx_frames();
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f, &frame(i as u32, 64 + i % 20));
    }
    tx.reclaim(rx.cache_mut());
    assert_eq!(tx.in_flight(), 0);
    drop(rx);
    drop(tx);
    assert_eq!(p.free_count(), 256);
}

/// A mapper with its own IO address space, like a second device's VFIO container.
#[derive(Debug)]
struct OtherContainer;
// SAFETY: IOVA = VA, as `IdentityMapper`, for memory no real device sees;
// the default `address_space` (its `Arc`'s address) sets it apart from the
// identity mappers, as a second VFIO container would be.
unsafe impl pollnic_rings::DmaMapper for OtherContainer {
    unsafe fn map(&self, va: *mut u8, _len: usize) -> Result<u64, pollnic_rings::DmaError> {
        Ok(va as u64)
    }
    fn unmap(&self, _iova: u64, _len: usize) {}
}

#[test]
fn tx_refuses_buffers_the_device_cannot_reach() {
    let nic = SoftNic::new(TxSink::Collect);
    let p = pool(64);
    let foreign = Mempool::new(8, 2048, PageSize::Small4K, Arc::new(OtherContainer)).unwrap();
    // SAFETY: the pool outlives every use of the model in this test.
    unsafe { nic.add_region(p.region()) };
    let mut tx = tx_setup(&nic, 32, &p);
    let mut cache = PoolCache::new(p.clone(), 64);
    let mut pkts = vec![make(&p, 1, 60), make(&foreign, 2, 60), make(&p, 3, 60)];
    assert_eq!(tx.tx_burst(&mut pkts, &mut cache), 3, "all three taken");
    assert_eq!(
        tx.stats().tx_errors,
        1,
        "the other container's buffer is refused"
    );
    assert_eq!(tx.stats().packets, 2);
    let frames = nic.take_tx_frames();
    assert_eq!(frames, vec![frame(1, 60), frame(3, 60)]);
    assert_eq!(
        foreign.free_count(),
        8,
        "the refused buffer went back to its pool"
    );
    tx.reclaim(&mut cache);
    drop(cache);
    assert_eq!(p.free_count(), 64);
}

#[test]
#[should_panic(expected = "PoolCache was replaced")]
fn rx_refuses_a_cache_of_another_pool() {
    let nic = SoftNic::default();
    let a = pool(64);
    let b = pool(64);
    let mut rx = rx_setup(&nic, 32, &a);
    assert!(nic.receive(&frame(1, 60), 0));
    // Safe code can swap the cache out; the ring must notice before it hands
    // up an index of pool `a` as a packet of pool `b`.
    *rx.cache_mut() = PoolCache::new(b.clone(), 64);
    let mut out = Vec::new();
    rx.rx_burst(&mut out, 32);
}

/// A sending port whose RX ring is idle: TX reclaim fills the RX ring's cache,
/// which nothing empties; the generator allocates from the shared list. The
/// cache must spill back long before the pool runs dry (found by review: with
/// a cache of 2 x ring and ring 2048 or 4096 the sender stopped for good).
#[test]
fn tx_reclaim_into_an_idle_rx_cache_never_starves_the_shared_list() {
    for ring in [512u16, 2048, 4096] {
        let rx_nic = SoftNic::default();
        let tx_nic = SoftNic::new(TxSink::Discard);
        let size = 2 * ring as u32 + 2048; // what the examples give a port
        let p = Mempool::new(size, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
        // SAFETY: the pool outlives every use of the model in this test.
        unsafe { tx_nic.add_region(p.region()) };
        let mut rx = rx_setup(&rx_nic, ring, &p);
        let mut tx = tx_setup(&tx_nic, ring, &p);
        let mut sent = 0u64;
        let mut burst = Vec::with_capacity(32);
        while sent < 20 * size as u64 {
            while burst.len() < 32 {
                let mut pkt = p.alloc().unwrap_or_else(|| {
                    panic!("ring {ring}: shared list empty after {sent} frames")
                });
                pkt.set_len(60).unwrap();
                burst.push(pkt);
            }
            sent += tx.tx_burst(&mut burst, rx.cache_mut()) as u64;
        }
        drop(burst);
        tx.reclaim(rx.cache_mut());
        drop(tx);
        drop(rx);
        assert_eq!(
            p.free_count(),
            size as usize,
            "ring {ring}: every buffer back"
        );
    }
}

/// Which write-back error bits drop a frame is the family's: igb's RXE is
/// bit 31, where the 82599 reports an IPv4 checksum error (IPE), a frame to
/// hand up; the 82599's frame errors (CE, LE, PE, OSE, USE) are bits 24..=29.
#[test]
fn rx_error_bits_are_per_family() {
    use pollnic_hw::ixgbe::bits::{RXDADV_ERR_CE, RXDADV_ERR_FRAME_ERR_MASK, RXDADV_ERR_IPE};
    // The hash field tells the two frames apart.
    let wb = |err: u32, tag: u32| RxCompletion {
        len: 60,
        status_error: RXD_STAT_DD | RXD_STAT_EOP | err,
        rss_hash: tag,
        pkt_info: 0,
        vlan: 0,
    };
    for (mask, kept) in [
        (None, 24),                            // igb (the default): RXE drops
        (Some(RXDADV_ERR_FRAME_ERR_MASK), 31), // 82599: IPE kept, CE drops
    ] {
        let nic = SoftNic::default();
        let p = pool(64);
        let mut rx = rx_setup(&nic, 32, &p);
        if let Some(m) = mask {
            rx.set_error_mask(m).unwrap();
        }
        assert!(nic.inject_rx_writeback(wb(RXDADV_ERR_IPE, 31)));
        assert!(nic.inject_rx_writeback(wb(RXDADV_ERR_CE, 24)));
        let mut out = Vec::new();
        assert_eq!(rx.rx_burst(&mut out, 8), 1, "mask {mask:x?}");
        assert_eq!(out[0].rss_hash(), kept, "mask {mask:x?}");
        assert_eq!(rx.stats().rx_errors, 1);
        assert_eq!(RXDADV_ERR_IPE, RXD_ERR_RXE, "the same bit, two meanings");
    }
}

/// An error mask holding DD or EOP is refused, and the mask in use stays:
/// with it the scalar loop (one compare of the kept bits against EOP alone)
/// would drop every good frame, while the vector loop, which tests DD and
/// EOP apart from the error bits, would take them.
#[test]
fn rx_error_mask_with_dd_or_eop_is_refused_on_both_paths() {
    use pollnic_rings::{DataPath, RingError};
    let mut paths = vec![DataPath::Scalar];
    if DataPath::vector_supported() {
        paths.push(DataPath::Vector);
    }
    for path in paths {
        let nic = SoftNic::default();
        let p = pool(64);
        let mut rx = rx_setup(&nic, 32, &p);
        rx.set_data_path(path);
        for bad in [RXD_STAT_DD, RXD_STAT_EOP, RXD_STAT_EOP | RXD_ERR_RXE] {
            match rx.set_error_mask(bad) {
                Err(RingError::ErrorMaskHasStatus { mask }) => assert_eq!(mask, bad),
                other => panic!("{path:?}: mask {bad:#x} gave {other:?}"),
            }
        }
        // The default mask (igb's RXE) still applies: four good frames
        // arrive on either loop (four, so the vector loop takes a step).
        for k in 0..4 {
            assert!(nic.receive(&frame(k, 60), 0));
        }
        let mut out = Vec::new();
        assert_eq!(rx.rx_burst(&mut out, 8), 4, "{path:?}");
        assert_eq!(rx.stats().rx_errors, 0, "{path:?}");
    }
}

/// RDT is written once per `rx_free_thresh` re-armed descriptors, and never
/// past the newest re-armed one: after every burst, of random sizes against
/// random arrivals, every descriptor the device owns is in read format (the
/// model also refuses to receive into one that still holds a write-back),
/// fewer than `rx_free_thresh` re-armed descriptors wait behind the tail,
/// and every frame arrives once, in order.
#[test]
fn rx_tail_lags_by_less_than_free_thresh_and_never_passes_the_rearmed() {
    use pollnic_rings::rx_free_thresh;
    for (ring, rounds) in [(32u16, 2000), (64, 1000), (512, 150)] {
        let nic = SoftNic::default();
        let p = pool(ring as u32 * 3);
        let mut rx = rx_setup(&nic, ring, &p);
        let thresh = rx_free_thresh(ring);
        assert_eq!(thresh, (ring / 4).min(32));
        let mask = ring - 1;
        let mut s: u64 = 0x2545_f491_4f6c_dd1d ^ ring as u64;
        let mut rnd = |n: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % n
        };
        let (mut sent, mut got) = (0u32, 0u32);
        let mut out = Vec::with_capacity(2 * ring as usize);
        let mut tail_moves = 0;
        for round in 0..rounds {
            for _ in 0..rnd(2 * ring as u64 / 3) {
                if !nic.receive(&frame(sent, 60), sent) {
                    break;
                }
                sent += 1;
            }
            let tail_before = rx.tail_index();
            rx.rx_burst(&mut out, 1 + rnd(ring as u64 + 8) as usize);
            for pkt in out.drain(..) {
                assert_eq!(pkt.rss_hash(), got, "frame order, round {round}");
                got += 1;
            }
            if rx.tail_index() != tail_before {
                tail_moves += 1;
            }
            assert_eq!(nic.rx_owned_unarmed(), None, "ring {ring}, round {round}");
            let waiting = rx
                .next_index()
                .wrapping_sub(1)
                .wrapping_sub(rx.tail_index())
                & mask;
            assert!(
                waiting < thresh,
                "ring {ring}: {waiting} re-armed wait behind the tail"
            );
            assert!(nic.rx_free_descriptors() + (waiting as usize) < ring as usize);
        }
        // Drain: what was delivered all arrives.
        while rx.rx_burst(&mut out, 64) > 0 {
            got += out.len() as u32;
            out.clear();
        }
        assert_eq!(got, sent);
        assert!(
            sent > rounds * ring as u32 / 4,
            "ring {ring}: only {sent} frames"
        );
        assert!(
            tail_moves < rounds && tail_moves <= sent / thresh as u32 + 1,
            "ring {ring}: {tail_moves} tail writes for {sent} frames"
        );
        drop(rx);
        assert_eq!(p.free_count(), 3 * ring as usize);
    }
}

/// Small bursts behind a ring the device keeps nearly full: the device's
/// head runs just behind the written-back descriptors software has not yet
/// looked at, so a tail moved one descriptor too far (or by a count instead
/// of to the newest re-armed descriptor) hands it a write-back at once.
#[test]
fn rx_tail_stays_behind_writebacks_not_yet_looked_at() {
    let nic = SoftNic::default();
    let p = pool(192);
    let mut rx = rx_setup(&nic, 64, &p);
    let (mut sent, mut got) = (0u32, 0u32);
    let mut out = Vec::new();
    for round in 0..300 {
        while nic.receive(&frame(sent, 60), sent) {
            sent += 1;
        }
        rx.rx_burst(&mut out, 1 + round % 7);
        for pkt in out.drain(..) {
            assert_eq!(pkt.rss_hash(), got);
            got += 1;
        }
        assert_eq!(nic.rx_owned_unarmed(), None, "round {round}");
    }
    assert!(got > 1000, "{got} frames");
}
