//! The ixgbe back end on the software 82599 (`pollnic_model::ixgbe`): the
//! same `Device` code that drives a real NIC over VFIO, run over the model's
//! BAR and IOMMU. Host tests: no NIC, no VM, no hugepages.

use pollnic::{Device, DeviceConfig, Error, Packet};
use pollnic_hw::ixgbe::{bits::*, regs::*};
use pollnic_hw::rss::{queue_for, Reta};
use pollnic_model::ixgbe::{Event, ModelConfig, RxOutcome, Soft82599, MODEL_ADDR};
use pollnic_tools::frame::{self, Flow};
use std::time::{Duration, Instant};

fn small(queues: u16) -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(512)
        .with_queues(queues)
        .with_link_timeout(Duration::from_secs(2))
}

fn model(mac_last: u8) -> Soft82599 {
    Soft82599::new(ModelConfig {
        mac: [0x00, 0x1b, 0x21, 0x0a, 0x0b, mac_last],
        ..Default::default()
    })
}

/// Send `n` test frames from `tx` (on model `a`) over a wire to model `b`
/// and receive them on `rx`, in bursts of up to 32; every frame must arrive
/// byte-identical and in order. Returns the bytes sent (no FCS).
fn send_over_wire(tx: &mut Device, a: &Soft82599, rx: &mut Device, b: &Soft82599, n: u64) -> u64 {
    let flow = Flow::between(tx.mac(), rx.mac());
    let len_of = |seq: u64| frame::mixed_len(seq);
    let (mut seq, mut next_rx, mut bytes) = (0u64, 0u64, 0u64);
    let mut pending: Vec<Packet> = Vec::new();
    let mut got: Vec<Packet> = Vec::new();
    while next_rx < n {
        while pending.len() < 32 && seq < n {
            let mut p = tx.mempool().alloc().expect("tx mempool has buffers");
            p.set_len(len_of(seq)).unwrap();
            assert!(frame::write(p.data_mut(), &flow, seq, seq));
            bytes += len_of(seq) as u64;
            pending.push(p);
            seq += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !pending.is_empty() {
            tx.queue(0).tx_burst(&mut pending);
            assert!(Instant::now() < deadline, "TX ring stuck");
        }
        for f in a.take_tx_frames() {
            let out = b.receive(&f);
            assert!(
                matches!(out, RxOutcome::Delivered { queue: 0, .. }),
                "{out:?}"
            );
        }
        while next_rx < seq {
            assert!(Instant::now() < deadline, "frame {next_rx} never arrived");
            rx.queue(0).rx_burst(&mut got, 64);
            for p in got.drain(..) {
                let want = frame::expected(len_of(next_rx), &flow, next_rx, next_rx);
                assert!(p.data() == &want[..], "frame {next_rx}: bytes differ");
                next_rx += 1;
            }
        }
    }
    assert!(
        tx.queue(0).flush_tx(Duration::from_secs(1)),
        "TX ring did not drain"
    );
    assert_eq!(
        rx.queue(0).rx_burst(&mut got, 64),
        0,
        "unexpected extra frames"
    );
    bytes
}

#[test]
fn device_opens_on_the_model_with_the_ixgbe_back_end() {
    let m = model(1);
    let dev = m.open(&small(1)).expect("bring-up on the model");
    assert_eq!(dev.family(), pollnic::NicFamily::Ixgbe);
    assert_eq!(dev.mac(), [0x00, 0x1b, 0x21, 0x0a, 0x0b, 1]);
    let link = dev.link();
    assert!(link.up && link.speed_mbps == 10_000, "{link:?}");
    assert_eq!(dev.addr().to_string(), MODEL_ADDR);
    // The §4.6 order as the device saw it.
    let ev = m.events();
    let at = |e: &Event| {
        ev.iter()
            .position(|x| x == e)
            .unwrap_or_else(|| panic!("{e:?} in {ev:?}"))
    };
    assert_eq!(ev[0], Event::Reset);
    assert!(at(&Event::RxQueue(0, true)) < at(&Event::RxEnable(true)));
    assert!(at(&Event::TxDmaEnable(true)) < at(&Event::TxQueue(0, true)));
    // RSS and CRC strip as the 82599 wants them.
    assert_eq!(m.peek(MRQC) & MRQC_MRQE_MASK, MRQC_MRQE_RSS);
    assert_ne!(m.peek(RXCSUM) & RXCSUM_PCSD, 0);
    assert_ne!(m.peek(HLREG0) & HLREG0_RXCRCSTRP, 0);
    assert_ne!(m.peek(RDRXCTL) & RDRXCTL_CRCSTRIP, 0);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn traffic_both_ways_is_byte_identical_and_counters_agree() {
    let (a, b) = (model(1), model(2));
    let mut da = a.open(&small(1)).unwrap();
    let mut db = b.open(&small(1)).unwrap();
    // 300 frames each way: the 64-descriptor rings wrap several times.
    let ab = send_over_wire(&mut da, &a, &mut db, &b, 300);
    let ba = send_over_wire(&mut db, &b, &mut da, &a, 300);
    let (sa, sb) = (da.stats().clone(), db.stats().clone());
    // Octet counters include the 4-byte FCS (GORC/GOTC).
    for (s, sent, recv) in [(&sa, ab, ba), (&sb, ba, ab)] {
        assert_eq!(s.get("tx_packets"), Some(300));
        assert_eq!(s.get("tx_bytes"), Some(sent + 300 * 4));
        assert_eq!(s.get("rx_packets"), Some(300));
        assert_eq!(s.get("rx_bytes"), Some(recv + 300 * 4));
        // Linux ixgbe's names for the same registers, and its sums.
        assert_eq!(s.get("rx_pkts_nic"), Some(300));
        assert_eq!(s.get("tx_bytes_nic"), Some(sent + 300 * 4));
        assert_eq!(s.get("rx_missed_errors"), Some(0));
        assert_eq!(s.get("rx_no_dma_resources"), Some(0));
    }
    assert_eq!(da.queues()[0].rx_stats().packets, 300);
    assert!(a.violations().is_empty() && b.violations().is_empty());
}

#[test]
fn a_full_ring_counts_rx_no_dma_resources_or_rx_missed_errors() {
    // Two queues: DROP_EN, drops in QPRDC. Nobody polls, so the 63 armed
    // descriptors of the queue fill and the rest are dropped.
    let m = model(1);
    let mut dev = m.open(&small(2)).unwrap();
    let reta = Reta([0; 128]);
    dev.set_reta(reta).unwrap();
    let flow = Flow::between([2, 0, 0, 0, 0, 1], dev.mac());
    let frame = frame::expected(60, &flow, 0, 0);
    let outs: Vec<RxOutcome> = (0..100).map(|_| m.receive(&frame)).collect();
    assert_eq!(
        outs.iter()
            .filter(|o| matches!(o, RxOutcome::Delivered { .. }))
            .count(),
        63
    );
    assert_eq!(dev.stats().get("rx_no_dma_resources"), Some(37));
    assert_eq!(dev.stats().get("rx_no_dma_resources_q0"), Some(37));
    assert_eq!(dev.stats().get("rx_packets"), Some(63));
    drop(dev);
    // One queue: no DROP_EN, the packet buffer overflows: MPC.
    let m = model(1);
    let dev = m.open(&small(1)).unwrap();
    for _ in 0..70 {
        m.receive(&frame);
    }
    assert_eq!(dev.stats().get("rx_missed_errors"), Some(7));
    assert!(m.violations().is_empty());
}

#[test]
fn rss_spreads_flows_as_toeplitz_and_reta_predict_and_set_reta_moves_them() {
    let m = model(1);
    let mut dev = m.open(&small(4)).unwrap();
    let hasher = dev.rss_hasher();
    let flows: Vec<Flow> = (0..96)
        .map(|i| Flow::nth([2, 0, 0, 0, 0, 9], dev.mac(), i))
        .collect();
    let mut got: Vec<Packet> = Vec::new();
    let mut check = |dev: &mut Device, reta: &Reta, seq0: u64| {
        let mut per_queue = [0usize; 4];
        for (i, flow) in flows.iter().enumerate() {
            let (hash, want_q) = queue_for(&hasher, reta, &flow.rss_key());
            let seq = seq0 + i as u64;
            let f = frame::expected(60, flow, seq, seq);
            assert_eq!(
                m.receive(&f),
                RxOutcome::Delivered {
                    queue: want_q,
                    hash
                }
            );
            assert_eq!(
                dev.queue(want_q).rx_burst(&mut got, 8),
                1,
                "flow {i} on queue {want_q}"
            );
            let p = got.pop().unwrap();
            assert_eq!(p.rss_hash(), hash, "flow {i}: descriptor hash");
            assert!(p.data() == &f[..]);
            per_queue[want_q as usize] += 1;
        }
        per_queue
    };
    let rr = dev.reta().clone();
    let spread = check(&mut dev, &rr, 0);
    assert!(
        spread.iter().all(|&n| n > 0),
        "every queue gets flows: {spread:?}"
    );
    // Reverse the table at runtime: each flow moves to queue 3 - q.
    let mut rev = rr.clone();
    for e in rev.0.iter_mut() {
        *e = 3 - *e;
    }
    dev.set_reta(rev.clone()).unwrap();
    let moved = check(&mut dev, &rev, 1000);
    assert_eq!(moved, [spread[3], spread[2], spread[1], spread[0]]);
    assert!(m.violations().is_empty());
}

#[test]
fn shutdown_stops_dma_and_resets_before_memory_is_freed() {
    let m = model(1);
    let dev = m.open(&small(2)).unwrap();
    assert!(!m.mappings().is_empty());
    let before = m.events().len();
    drop(dev);
    assert!(m.mappings().is_empty(), "every DMA mapping removed");
    let ev = m.events()[before..].to_vec();
    let first_unmap = ev
        .iter()
        .position(|e| matches!(e, Event::Unmap { .. }))
        .expect("memory unmapped");
    let before_unmap = &ev[..first_unmap];
    for e in [
        Event::RxEnable(false),
        Event::RxQueue(0, false),
        Event::RxQueue(1, false),
        Event::TxQueue(0, false),
        Event::TxQueue(1, false),
        Event::Reset,
        Event::BusMasterOff,
    ] {
        assert!(
            before_unmap.contains(&e),
            "{e:?} before the first unmap: {ev:?}"
        );
    }
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn a_device_that_never_finishes_reset_gives_the_timeout_error() {
    // Not strict: the shutdown after the failure writes to the wedged device.
    let m = Soft82599::new(ModelConfig {
        reset_time: None,
        strict: false,
        ..Default::default()
    });
    let t = Instant::now();
    let e = m.open(&small(1)).err().expect("must time out");
    assert!(
        matches!(
            e,
            Error::Timeout {
                what: "device reset (CTRL.RST)",
                ..
            }
        ),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(MODEL_ADDR) && msg.contains("did not complete within"),
        "{msg}"
    );
    assert!(msg.contains("pollnic bind"), "says what to run: {msg}");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(m.mappings().is_empty(), "nothing left mapped");
}

#[test]
fn a_link_that_never_comes_up_gives_link_down() {
    let m = Soft82599::new(ModelConfig {
        link_time: None,
        ..Default::default()
    });
    let cfg = small(1).with_link_timeout(Duration::from_millis(200));
    let e = m.open(&cfg).err().expect("link stays down");
    assert!(matches!(e, Error::LinkDown { waited_ms: 200, .. }), "{e}");
    assert!(m.mappings().is_empty(), "nothing left mapped");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn igb_sized_rings_are_refused_with_the_82599_minimum() {
    let m = model(1);
    let cfg = small(1).with_rx_ring_size(32);
    let e = m
        .open(&cfg)
        .err()
        .expect("32 descriptors is below the 82599's 64");
    assert!(e.to_string().contains("below the 64 descriptors"), "{e}");
    assert!(m.events().is_empty(), "the device was not touched");
}

/// The 82599 has neither Energy Efficient Ethernet nor DMA coalescing:
/// `DeviceConfig::power_saving` other than OFF is refused at open with the
/// typed error naming the field, before the device is touched.
#[test]
fn power_saving_is_refused_on_the_82599_naming_the_field() {
    use pollnic::config::PowerSaving;
    let m = model(1);
    let err = m
        .open(&small(1).with_power_saving(PowerSaving::LINUX))
        .err()
        .expect("power saving on the 82599: refused");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::ConfigUnsupported {
                family: "ixgbe",
                field: "power_saving",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("DeviceConfig::power_saving"), "{msg}");
    assert!(m.events().is_empty(), "the device was not touched");
    let dev = m.open(&small(1)).expect("PowerSaving::OFF opens");
    drop(dev);
}

/// The model catches a driver that breaks the §4.6 rules: every rule below
/// is one a wrong driver would break.
#[test]
fn the_model_reports_out_of_order_and_rejected_writes() {
    use pollnic::lowlevel::io::Regs;
    let m = Soft82599::new(ModelConfig {
        strict: false,
        ..Default::default()
    });
    let r = m.regs();
    let expect = |what: &str| {
        let v = m.violations();
        assert!(
            v.last().is_some_and(|l| l.contains(what)),
            "want {what:?}, got {v:?}"
        );
    };
    r.write32(CTRL, CTRL_RST);
    r.write32(FCTRL, FCTRL_BAM);
    expect("while the device is in reset");
    std::thread::sleep(Duration::from_millis(10));
    r.write32(RXCTRL, RXCTRL_RXEN);
    expect("still hold the undefined values reset left");
    r.write32(RXCTRL, 0);
    // A disabled queue's ring may be set up with the receiver on (§4.6.7.1).
    r.write32(rdlen(0), 1024);
    r.write32(RXCTRL, RXCTRL_RXEN);
    let before = m.violations().len();
    r.write32(rdlen(0), 2048);
    assert_eq!(m.violations().len(), before, "{:?}", m.violations());
    r.write32(RXCTRL, 0);
    r.write32(tdlen(0), 1024);
    r.write32(txdctl(0), XDCTL_ENABLE);
    expect("TXDCTL(0).ENABLE set before DMATXCTL.TE");
    r.write32(MRQC, 0x2);
    expect("MRQC.MRQE = 0x2");
    r.write32(reta(0), 0x10);
    expect("reserved");
    r.write32(MTQC, 0);
    expect("TX arbiter");
    r.write32(LINKS, 0);
    expect("read-only");
    r.write32(0x1234, 0);
    expect("does not implement");
    r.write32(rdt(1), 5);
    expect("before the queue's enable latched");
}

#[test]
#[should_panic(expected = "to read-only register 0x42a4")]
fn a_strict_model_panics_at_the_culprit() {
    use pollnic::lowlevel::io::Regs;
    let m = Soft82599::default();
    let r = m.regs();
    r.write32(LINKS, 0);
}

/// Queues on their own threads (the pinned-core runner), the model fed from
/// the calling thread: each queue gets exactly the flows RSS sends it and
/// sends them back out on its own TX queue.
#[test]
fn queues_run_on_pinned_threads_over_the_model() {
    let m = model(1);
    let mut dev = m.open(&small(4)).unwrap();
    let flows: Vec<Flow> = (0..64)
        .map(|i| Flow::nth([2, 0, 0, 0, 0, 9], dev.mac(), i))
        .collect();
    let hasher = dev.rss_hasher();
    let mut want = [0usize; 4];
    for f in &flows {
        want[queue_for(&hasher, dev.reta(), &f.rss_key()).1 as usize] += 1;
    }
    let core = core_affinity::get_core_ids().unwrap()[0].id;
    let feeder = m.clone();
    let got = pollnic::run_pinned(
        &mut dev,
        &[core],
        pollnic::RxMode::BusyPoll,
        |q| {
            let mut burst = Vec::new();
            let mut n = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            while n < want[q.id() as usize] && Instant::now() < deadline {
                n += q.rx_burst(&mut burst, 32);
                q.tx_burst(&mut burst);
            }
            assert!(burst.is_empty(), "TX ring took every frame");
            assert!(q.flush_tx(Duration::from_secs(1)));
            n
        },
        || {
            for (i, f) in flows.iter().enumerate() {
                let out = feeder.receive(&frame::expected(60, f, i as u64, 0));
                assert!(matches!(out, RxOutcome::Delivered { .. }), "{out:?}");
            }
        },
    )
    .unwrap();
    assert_eq!(got, want.to_vec());
    assert_eq!(m.take_tx_frames().len(), 64);
    assert_eq!(dev.stats().get("tx_packets"), Some(64));
}

/// A test frame of `wire` bytes on the wire (FCS included, so `wire - 4` in
/// the buffer), with an 802.1Q tag when `vlan`.
fn sized_frame(flow: &Flow, seq: u64, wire: usize, vlan: bool) -> Vec<u8> {
    let mut f = vec![0u8; wire - 4];
    assert!(pollnic_tools::gen::write(
        &mut f,
        flow,
        seq,
        0,
        vlan.then_some(7)
    ));
    f
}

/// Jumbo frames on the 82599 back end. Tested on the software 82599 only
/// (QEMU has no 82599): HLREG0.JUMBOEN and MAXFRS.MFS as Linux ixgbe sets
/// them, 9 KiB SRRCTL buffers, and the model's size check as the datasheet
/// describes it (MFS, 4 more bytes with a VLAN tag, ROC and RLEC counted).
#[test]
fn model_only_jumbo_frames_at_mtu_9000_and_oversized_frames_are_dropped_and_counted() {
    let (a, b) = (model(1), model(2));
    let cfg = small(1).with_mtu(9000);
    let mut tx = a.open(&cfg).unwrap();
    let mut rx = b.open(&cfg).unwrap();
    assert_ne!(b.peek(HLREG0) & HLREG0_JUMBOEN, 0);
    assert_eq!(b.peek(MAXFRS) >> MAXFRS_MFS_SHIFT, 9018);
    assert_eq!(b.peek(srrctl(0)) & SRRCTL_BSIZEPKT_MASK, 9);
    let flow = Flow::between(tx.mac(), rx.mac());
    let mut got: Vec<Packet> = Vec::new();
    for (seq, wire) in [1519usize, 4000, 9018].into_iter().enumerate() {
        let f = sized_frame(&flow, seq as u64, wire, false);
        let mut p = tx.mempool().alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(&f);
        assert_eq!(tx.queue(0).tx_burst(&mut vec![p]), 1);
        for w in a.take_tx_frames() {
            assert!(
                matches!(b.receive(&w), RxOutcome::Delivered { .. }),
                "{wire}"
            );
        }
        assert_eq!(rx.queue(0).rx_burst(&mut got, 8), 1, "{wire}-byte frame");
        assert!(
            got.pop().unwrap().data() == &f[..],
            "{wire} bytes identical"
        );
    }
    let mut over = sized_frame(&flow, 9, 9018, false);
    over.push(0);
    assert_eq!(b.receive(&over), RxOutcome::Oversized, "9019 untagged");
    let tagged = sized_frame(&flow, 10, 9022, true);
    assert!(matches!(b.receive(&tagged), RxOutcome::Delivered { .. }));
    assert_eq!(rx.queue(0).rx_burst(&mut got, 8), 1);
    assert!(got.pop().unwrap().data() == &tagged[..]);
    let st = rx.stats();
    assert_eq!(st.get("rx_long_length_errors"), Some(1));
    assert_eq!(st.get("rx_length_errors"), Some(1));
    assert!(b.violations().is_empty(), "{:?}", b.violations());

    // At the default MTU, MFS is 1518: 1519 untagged is dropped, 1522 tagged arrives.
    drop((tx, rx));
    let (c, d) = (model(3), model(4));
    let _tx = c.open(&small(1)).unwrap();
    let mut rx = d.open(&small(1)).unwrap();
    assert_eq!(d.peek(MAXFRS) >> MAXFRS_MFS_SHIFT, 1518);
    let flow = Flow::between([2, 0, 0, 0, 0, 9], rx.mac());
    assert_eq!(
        d.receive(&sized_frame(&flow, 0, 1519, false)),
        RxOutcome::Oversized
    );
    let tagged = sized_frame(&flow, 1, 1522, true);
    assert!(matches!(d.receive(&tagged), RxOutcome::Delivered { .. }));
    assert_eq!(rx.queue(0).rx_burst(&mut got, 8), 1);
    assert!(got[0].data() == &tagged[..]);
    assert_eq!(rx.stats().get("rx_length_errors"), Some(1));
}

/// At MTU 9000 every buffer of both pools carries whole 9018-byte frames,
/// through the model's IOMMU, which faults on a DMA across a 2 MiB page
/// (as QEMU's igb drops such a TX frame): 4 × 512 frames cycle every buffer
/// of the 512-buffer pools, where 2 of each pool's 9 KiB buffers straddled a
/// page before buffers were kept inside pages.
#[test]
fn at_mtu_9000_every_buffer_carries_whole_frames_without_crossing_a_page() {
    let (a, b) = (model(7), model(8));
    let cfg = small(1).with_mtu(9000);
    let mut tx = a.open(&cfg).unwrap();
    let mut rx = b.open(&cfg).unwrap();
    let flow = Flow::between(tx.mac(), rx.mac());
    let n = 4 * cfg.mempool_size as u64;
    let (mut seq, mut next) = (0u64, 0u64);
    let mut burst: Vec<Packet> = Vec::new();
    let mut got: Vec<Packet> = Vec::new();
    while seq < n {
        for _ in 0..16 {
            let f = sized_frame(&flow, seq, 9018, false);
            let mut p = tx.mempool().alloc().expect("tx buffer");
            p.set_len(f.len()).unwrap();
            p.data_mut().copy_from_slice(&f);
            burst.push(p);
            seq += 1;
        }
        while !burst.is_empty() {
            tx.queue(0).tx_burst(&mut burst);
        }
        for w in a.take_tx_frames() {
            let out = b.receive(&w);
            assert!(matches!(out, RxOutcome::Delivered { .. }), "{out:?}");
        }
        while next < seq {
            assert!(
                rx.queue(0).rx_burst(&mut got, 32) > 0,
                "frame {next} never arrived"
            );
            for p in got.drain(..) {
                assert!(
                    p.data() == &sized_frame(&flow, next, 9018, false)[..],
                    "frame {next}"
                );
                next += 1;
            }
        }
    }
    assert!(tx.queue(0).flush_tx(Duration::from_secs(1)));
    assert_eq!(tx.stats().get("tx_packets"), Some(n));
    assert_eq!(rx.stats().get("rx_packets"), Some(n));
    assert!(a.violations().is_empty(), "{:?}", a.violations());
    assert!(b.violations().is_empty(), "{:?}", b.violations());
}

// ---- The 82599 as silicon has it: laser, link mode, undefined registers -------

/// A model that records violations instead of panicking.
fn lenient() -> Soft82599 {
    Soft82599::new(ModelConfig {
        strict: false,
        ..Default::default()
    })
}

fn expect_violation(m: &Soft82599, what: &str) {
    let v = m.violations();
    assert!(
        v.iter().any(|l| l.contains(what)),
        "want {what:?}, got {v:?}"
    );
}

/// Poll LINKS by hand for up to `wall` of wall-clock time; the model time at
/// which it read up, if it did.
fn link_up_by(m: &Soft82599, wall: Duration) -> Option<Duration> {
    use pollnic::lowlevel::io::Regs;
    let end = Instant::now() + wall;
    while Instant::now() < end {
        if m.regs().read32(LINKS) & LINKS_UP != 0 {
            return Some(m.model_time());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

#[test]
fn an_sfp_port_comes_up_with_laser_on_10g_serial_empty_filters_and_no_relaxed_ordering() {
    let m = model(1);
    let dev = m.open(&small(2)).unwrap();
    assert_eq!(m.peek(ESDP) & ESDP_SDP3, 0, "laser on (SDP3 low)");
    assert_eq!(m.peek(AUTOC) & AUTOC_LMS_MASK, AUTOC_LMS_10G_SERIAL);
    for n in 1..128 {
        assert_eq!((m.peek(ral(n)), m.peek(rah(n))), (0, 0), "RAR {n}");
    }
    for n in 0..128 {
        assert_eq!(m.peek(mta(n)), 0, "MTA({n})");
        assert_eq!(m.peek(vfta(n)), 0, "VFTA({n})");
    }
    for q in 0..128 {
        assert_eq!(
            m.peek(dca_rxctrl(q)) & DCA_RXCTRL_CLEAR,
            0,
            "DCA_RXCTRL({q})"
        );
        assert_eq!(m.peek(dca_txctrl(q)) & DCA_TXCTRL_DESC_WRO_EN, 0);
    }
    assert_eq!(
        (m.peek(txdctl(0)) >> TXDCTL_WTHRESH_SHIFT) & 0x7F,
        0,
        "WTHRESH 0"
    );
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    drop(dev);
    assert_ne!(m.peek(ESDP) & ESDP_SDP3, 0, "laser off again after close");
}

/// The rule a driver without the laser step breaks: with SDP3 high the link
/// never comes up; once it is low the link trains in 1–2 s of model time.
#[test]
fn the_link_needs_the_laser_and_trains_in_1_to_2_s_of_model_time() {
    use pollnic::lowlevel::io::Regs;
    let m = model(1);
    let r = m.regs();
    r.write32(AUTOC, m.peek(AUTOC) | AUTOC_AN_RESTART);
    assert_eq!(
        link_up_by(&m, Duration::from_millis(50)),
        None,
        "no link with the laser off (5 s of model time)"
    );
    r.write32(ESDP, m.peek(ESDP) & !ESDP_SDP3);
    let on = m.model_time();
    let up = link_up_by(&m, Duration::from_secs(2)).expect("link with the laser on");
    let took = up - on;
    assert!(
        took >= Duration::from_secs(1) && took <= Duration::from_millis(2100),
        "{took:?}"
    );
    // Laser off again: the link drops.
    r.write32(ESDP, m.peek(ESDP) | ESDP_SDP3);
    assert_eq!(r.read32(LINKS) & LINKS_UP, 0);
}

#[test]
fn an_empty_sfp_cage_is_link_down() {
    let m = model(1);
    m.set_module_present(false);
    let e = m
        .open(&small(1).with_link_timeout(Duration::from_millis(100)))
        .err()
        .expect("no module, no link");
    assert!(matches!(e, Error::LinkDown { .. }), "{e}");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// An SFI board whose EEPROM left AUTOC in a 1 Gb/s mode links at 1 Gb/s
/// when only AN_RESTART is written (the old driver); the driver sets 10G
/// serial with the pipeline reset and links at 10 Gb/s.
#[test]
fn an_sfi_board_left_in_1g_mode_links_at_1g_unless_the_driver_sets_10g_serial() {
    use pollnic::lowlevel::io::Regs;
    let m = model(1);
    m.set_eeprom_link_mode(AUTOC_LMS_1G_AN);
    let r = m.regs();
    r.write32(ESDP, m.peek(ESDP) & !ESDP_SDP3);
    r.write32(AUTOC, m.peek(AUTOC) | AUTOC_AN_RESTART);
    link_up_by(&m, Duration::from_secs(2)).expect("link");
    assert_eq!(links_speed_mbps(r.read32(LINKS)), 1000);

    let m = model(2);
    m.set_eeprom_link_mode(AUTOC_LMS_1G_AN);
    let dev = m.open(&small(1)).unwrap();
    assert_eq!(dev.link().speed_mbps, 10_000);
    assert_eq!(m.peek(AUTOC) & AUTOC_LMS_MASK, AUTOC_LMS_10G_SERIAL);
}

/// A driver that turns the receiver on without clearing what reset left
/// undefined (MTA, RAR 1..127, VFTA) is caught.
#[test]
fn rxen_with_reset_garbage_in_the_filters_is_a_violation() {
    use pollnic::lowlevel::io::Regs;
    let m = lenient();
    let r = m.regs();
    assert_ne!(m.peek(mta(0)), 0, "garbage after power-on");
    assert_ne!(m.peek(rah(5)) & RAH_AV, 0, "a stale RAR entry looks valid");
    for n in 0..128 {
        r.write32(mta(n), 0);
    }
    r.write32(RXCTRL, RXCTRL_RXEN);
    expect_violation(&m, "still hold the undefined values reset left");
}

/// A driver that enables queues with relaxed ordering on is caught.
#[test]
fn a_queue_enabled_with_relaxed_ordering_on_is_a_violation() {
    use pollnic::lowlevel::io::Regs;
    let m = lenient();
    let r = m.regs();
    r.write32(rxdctl(0), XDCTL_ENABLE);
    expect_violation(&m, "relaxed ordering on in DCA_RXCTRL(0)");
    r.write32(DMATXCTL, DMATXCTL_TE);
    r.write32(txdctl(0), XDCTL_ENABLE);
    expect_violation(&m, "DCA_TXCTRL(0).DESC_WRO_EN on");
}

/// Master requests that never complete: one reset is not enough (a driver
/// that resets once is caught); the driver resets twice and comes up clean.
#[test]
fn a_stuck_master_disable_needs_the_double_reset() {
    use pollnic::lowlevel::io::Regs;
    let m = lenient();
    m.set_master_stuck();
    let r = m.regs();
    r.write32(CTRL, CTRL_GIO_DIS);
    assert_ne!(r.read32(STATUS) & STATUS_GIO, 0, "GIO stays set");
    r.write32(CTRL, CTRL_GIO_DIS | CTRL_RST);
    std::thread::sleep(Duration::from_millis(5));
    r.write32(DMATXCTL, DMATXCTL_TE);
    expect_violation(&m, "two resets in a row");

    let m = model(1);
    m.set_master_stuck();
    let dev = m.open(&small(1)).expect("bring-up with the double reset");
    let resets = m.events().iter().filter(|e| **e == Event::Reset).count();
    assert_eq!(resets, 2, "{:?}", m.events());
    assert_ne!(m.peek(HLREG0) & HLREG0_TXCRCEN, 0);
    drop(dev);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// A frame under 17 bytes wedges an 82599 TX queue. A TX ring driven
/// without the driver's padding (the rings alone, on queue 1) wedges and
/// the model reports it; the same frame through `Device` is padded to 17
/// bytes and leaves as a 60-byte frame.
#[test]
fn a_frame_under_17_bytes_wedges_its_tx_queue_and_the_driver_pads_it() {
    use pollnic::lowlevel::io::{DeviceBar, Regs};
    use pollnic_rings::{DescRing, Mempool, PageSize, PoolCache, TxRing};
    use std::sync::Arc;
    let m = lenient();
    let mut dev = m.open(&small(1)).unwrap();
    // Through the driver: padded.
    let mut p = dev.mempool().alloc().unwrap();
    p.set_len(10).unwrap();
    p.data_mut().copy_from_slice(&[0xAB; 10]);
    assert_eq!(dev.queue(0).tx_burst(&mut vec![p]), 1);
    let sent = m.take_tx_frames();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].len(), 60);
    assert!(sent[0][..10].iter().all(|&b| b == 0xAB) && sent[0][10..].iter().all(|&b| b == 0));
    assert!(m.violations().is_empty(), "{:?}", m.violations());

    // Without it, on queue 1 set up by hand.
    let io = m.io();
    let dma = io.dma();
    let desc = DescRing::new(64, PageSize::Emulated2M, dma.clone()).unwrap();
    let pool = Mempool::new(64, 2048, PageSize::Emulated2M, dma).unwrap();
    let r = m.regs();
    r.write32(tdbal(1), desc.iova() as u32);
    r.write32(tdbah(1), (desc.iova() >> 32) as u32);
    r.write32(tdlen(1), desc.len_bytes());
    r.write32(txdctl(1), XDCTL_ENABLE);
    while r.read32(txdctl(1)) & XDCTL_ENABLE == 0 {}
    let bar = Arc::new(m.regs());
    let mut tx = TxRing::new(desc, &pool, bar.doorbell(tdt(1)));
    let mut cache = PoolCache::new(pool.clone(), 8);
    let mut burst = Vec::new();
    for len in [10usize, 60] {
        let mut p = pool.alloc().unwrap();
        p.set_len(len).unwrap();
        burst.push(p);
    }
    assert_eq!(tx.tx_burst(&mut burst, &mut cache), 2);
    expect_violation(&m, "TX queue 1 wedged at descriptor 0: a 10-byte frame");
    assert!(
        m.take_tx_frames().is_empty(),
        "nothing leaves a wedged queue"
    );
    assert_ne!(r.read32(tdh(1)), r.read32(tdt(1)), "the head is stuck");
    drop(dev);
    drop(tx);
}

/// 0x151C (external PHY) and 0x1558 (shared QSFP+ I2C) are refused by
/// `open` with what is missing, before the device is touched.
#[test]
fn ids_whose_board_setup_is_missing_are_refused_by_open() {
    use pollnic::DeviceIdent;
    for (id, what) in [(0x151Cu16, "10GBASE-T PHY"), (0x1558, "SDP0/SDP1")] {
        let m = model(1);
        let base = m.ident();
        let ident = DeviceIdent::new(base.addr, base.vendor, id, base.name);
        let e = Device::open_on(m.io(), ident, &small(1))
            .err()
            .expect("refused");
        assert!(matches!(e, Error::NotImplemented { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(what) && msg.contains("pollnic unbind"),
            "{msg}"
        );
        assert!(m.events().is_empty(), "the device was not touched");
    }
}

/// `pollnic doctor --selfcheck` on the model: the registers as found (laser
/// off, reset garbage in MTA/RAR) and after bring-up (laser on, tables
/// empty), with no write of its own.
#[test]
fn selfcheck_reads_the_registers_before_and_after_bring_up() {
    let m = model(1);
    let sc = pollnic::lowlevel::selfcheck::selfcheck_on(m.io(), m.ident(), &small(1)).unwrap();
    let get = |n: &str| sc.registers.iter().find(|r| r.name == n).unwrap().clone();
    assert_ne!(get("ESDP").before & ESDP_SDP3, 0);
    assert_eq!(get("ESDP").after & ESDP_SDP3, 0);
    assert_ne!(get("MTA(7)").before, 0);
    assert_eq!(get("MTA(7)").after, 0);
    assert_ne!(get("RAH(9)").before & RAH_AV, 0);
    assert_eq!(get("RAH(9)").after, 0);
    assert_eq!(get("RAH(0)").after & RAH_AV, RAH_AV);
    assert!(sc.link.up && sc.link.speed_mbps == 10_000);
    assert_eq!(
        m.events()[0],
        Event::Reset,
        "nothing written before the reset"
    );
    assert!(m.mappings().is_empty(), "shut down again");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// With TXDCTL.WTHRESH > 0 the 82599 writes back every descriptor, RS or
/// not; with the driver's WTHRESH 0 only those with RS (every 32nd and the
/// burst's last).
#[test]
fn with_wthresh_above_0_every_tx_descriptor_is_written_back() {
    use pollnic::lowlevel::io::{DeviceBar, Regs};
    use pollnic_rings::{DescRing, Mempool, PageSize, PoolCache, TxRing};
    use std::sync::Arc;
    let m = model(1);
    let mut dev = m.open(&small(1)).unwrap();
    // The driver's queue 0: 3 frames, RS on the last only: 1 write-back.
    let before = m.tx_writebacks();
    let mut burst: Vec<Packet> = (0..3)
        .map(|_| {
            let mut p = dev.mempool().alloc().unwrap();
            p.set_len(60).unwrap();
            p
        })
        .collect();
    assert_eq!(dev.queue(0).tx_burst(&mut burst), 3);
    assert_eq!(m.tx_writebacks() - before, 1);
    // Queue 1 by hand with WTHRESH 8: all 3 written back.
    let io = m.io();
    let dma = io.dma();
    let desc = DescRing::new(64, PageSize::Emulated2M, dma.clone()).unwrap();
    let pool = Mempool::new(64, 2048, PageSize::Emulated2M, dma).unwrap();
    let r = m.regs();
    r.write32(tdbal(1), desc.iova() as u32);
    r.write32(tdbah(1), (desc.iova() >> 32) as u32);
    r.write32(tdlen(1), desc.len_bytes());
    r.write32(txdctl(1), XDCTL_ENABLE | (8 << TXDCTL_WTHRESH_SHIFT));
    while r.read32(txdctl(1)) & XDCTL_ENABLE == 0 {}
    let bar = Arc::new(m.regs());
    let mut tx = TxRing::new(desc, &pool, bar.doorbell(tdt(1)));
    let mut cache = PoolCache::new(pool.clone(), 8);
    let mut burst: Vec<Packet> = (0..3)
        .map(|_| {
            let mut p = pool.alloc().unwrap();
            p.set_len(60).unwrap();
            p
        })
        .collect();
    let before = m.tx_writebacks();
    assert_eq!(tx.tx_burst(&mut burst, &mut cache), 3);
    assert_eq!(m.tx_writebacks() - before, 3);
    drop(dev);
    drop(tx);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// CTRL_EXT.DRV_LOAD (Linux `ixgbe_get_hw_control` / `ixgbe_release_hw_control`):
/// set while the driver holds the port, clear once it is closed; and a port
/// that moves traffic with it clear (the driver's sequence before it was
/// set) is a violation of the model.
#[test]
fn drv_load_is_held_while_open_and_traffic_without_it_is_refused() {
    use pollnic::lowlevel::io::Regs;
    let m = Soft82599::new(ModelConfig {
        strict: false,
        ..Default::default()
    });
    let mut dev = m.open(&small(1)).unwrap();
    assert_ne!(
        m.peek(CTRL_EXT) & CTRL_EXT_DRV_LOAD,
        0,
        "DRV_LOAD set at open"
    );
    let flow = Flow::between([0x02, 0, 0, 0, 0, 9], dev.mac());
    let send_one = |dev: &mut Device, seq: u64| {
        let mut p = dev.mempool().alloc().unwrap();
        p.set_len(60).unwrap();
        assert!(frame::write(p.data_mut(), &flow, seq, 0));
        let mut burst = vec![p];
        assert_eq!(dev.queue(0).tx_burst(&mut burst), 1);
        m.take_tx_frames();
        m.receive(&frame::expected(60, &flow.reversed(), seq, 0));
    };
    send_one(&mut dev, 0);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    // The old sequence never set it: clear it behind the driver's back.
    let r = m.regs();
    r.write32(CTRL_EXT, r.read32(CTRL_EXT) & !CTRL_EXT_DRV_LOAD);
    send_one(&mut dev, 1);
    let v = m.violations();
    assert!(
        v.iter()
            .any(|v| v.contains("sent a frame while CTRL_EXT.DRV_LOAD is clear")),
        "{v:?}"
    );
    drop(dev);
    assert_eq!(
        m.peek(CTRL_EXT) & CTRL_EXT_DRV_LOAD,
        0,
        "DRV_LOAD cleared at close"
    );
}

/// A port left running by its last user (here: a `Device` leaked without its
/// shutdown, as a killed program whose port was not reset leaves it) is
/// stopped before pollnic resets it, as Linux `ixgbe_stop_adapter` does:
/// the strict model panics on a global reset with RXEN or a queue enabled.
#[test]
fn a_port_left_running_is_stopped_before_its_reset() {
    let m = model(1);
    let left = m.open(&small(2)).unwrap();
    assert_ne!(m.peek(RXCTRL) & RXCTRL_RXEN, 0);
    std::mem::forget(left);
    let dev = m
        .open(&small(1))
        .expect("opens again over the running port");
    assert!(dev.link().up);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// Flow control: every mode is programmed as Linux programs it and reads
/// back as set; the water marks are Linux's for the part's packet buffer.
#[test]
fn flow_control_modes_are_programmed_and_read_back() {
    use pollnic::config::FlowControl;
    for mode in [
        FlowControl::None,
        FlowControl::Rx,
        FlowControl::Tx,
        FlowControl::Full,
    ] {
        let m = Soft82599::new(ModelConfig::default());
        let dev = m.open(&small(1).with_flow_control(mode)).unwrap();
        assert_eq!(dev.flow_control(), mode);
        check_flow_registers(&m, mode);
        assert!(m.violations().is_empty(), "{mode}: {:?}", m.violations());
    }
    // None asked: the family's default, Linux's (full).
    assert_eq!(DeviceConfig::default().flow_control, None);
    let m = Soft82599::new(ModelConfig::default());
    let dev = m.open(&small(1)).unwrap();
    assert_eq!(dev.flow_control(), FlowControl::Full, "Linux's default");
    check_flow_registers(&m, FlowControl::Full);
}

fn check_flow_registers(m: &Soft82599, mode: pollnic::config::FlowControl) {
    assert_eq!(
        m.peek(MFLCN) & MFLCN_RFCE != 0,
        mode.receives_pause(),
        "{mode}"
    );
    assert_ne!(
        m.peek(MFLCN) & MFLCN_DPF,
        0,
        "{mode}: PAUSE frames consumed"
    );
    assert_eq!(
        m.peek(FCCFG) & FCCFG_TFCE_802_3X != 0,
        mode.sends_pause(),
        "{mode}"
    );
    if mode.sends_pause() {
        // ixgbe_hpbthresh/ixgbe_lpbthresh for 512 KiB at MTU 1500: 497 and 10 KB.
        assert_eq!(m.peek(fcrth(0)), (497 << 10) | FCRTH_FCEN, "{mode}");
        assert_eq!(m.peek(fcrtl(0)), (10 << 10) | FCRTL_XONE, "{mode}");
    } else {
        assert_eq!(m.peek(fcrth(0)), 0x80000 - 0x6000, "{mode}");
        assert_eq!(m.peek(fcrtl(0)), 0, "{mode}");
    }
    assert_eq!(
        (m.peek(fcrth(1)), m.peek(fcrtl(1))),
        (0, 0),
        "{mode}: an unsized buffer"
    );
    assert_eq!(m.peek(fcttv(0)), 0xFFFF_FFFF);
    assert_eq!(m.peek(FCRTV), 0x7FFF);
}

/// Every 82599 board pollnic brings up links on the model with its own
/// rules: SFP+ boards through the laser and 10G serial; backplane (KX4/KX/
/// KR), XAUI, CX4 and LS boards, whose EEPROM here disables the link in
/// AUTOC2, only through the pipeline reset (a bare AN_RESTART, what pollnic
/// did before, leaves them down), with the EEPROM's link mode kept and the
/// laser pin untouched, and AUTOC2's upper half kept across the shutdown's
/// reset. The external-PHY and QSFP+ boards are refused.
#[test]
fn every_82599_board_links_through_its_own_start() {
    use pollnic_hw::ixgbe::*;
    let sfp = [
        DEV_ID_82599_SFP,
        DEV_ID_82599_SFP_FCOE,
        DEV_ID_82599_SFP_EM,
        DEV_ID_82599_SFP_SF2,
        DEV_ID_82599_SFP_SF_QP,
        DEV_ID_82599EN_SFP,
    ];
    let no_laser = [
        (DEV_ID_82599_KX4, AUTOC_LMS_KX4_KX_KR),
        (DEV_ID_82599_KX4_MEZZ, AUTOC_LMS_KX4_KX_KR),
        (DEV_ID_82599_COMBO_BACKPLANE, AUTOC_LMS_KX4_KX_KR),
        (DEV_ID_82599_KR, AUTOC_LMS_KX4_KX_KR),
        (DEV_ID_82599_BACKPLANE_FCOE, AUTOC_LMS_KX4_KX_KR),
        (DEV_ID_82599_XAUI_LOM, AUTOC_LMS_10G_LINK_NO_AN),
        (DEV_ID_82599_CX4, AUTOC_LMS_KX4_KX_KR),
        (DEV_ID_82599_LS, AUTOC_LMS_10G_SERIAL),
    ];
    for id in sfp {
        let m = Soft82599::with_device(ModelConfig::default(), id);
        let dev = m
            .open(&small(1))
            .unwrap_or_else(|e| panic!("{id:#06x}: {e}"));
        assert!(
            dev.link().up && dev.link().speed_mbps == 10_000,
            "{id:#06x}"
        );
        assert_eq!(m.peek(ESDP) & ESDP_SDP3, 0, "{id:#06x}: laser on");
        assert!(m.violations().is_empty(), "{id:#06x}: {:?}", m.violations());
    }
    for (id, lms) in no_laser {
        let m = Soft82599::with_device(ModelConfig::default(), id);
        let esdp = m.peek(ESDP);
        let dev = m
            .open(&small(1))
            .unwrap_or_else(|e| panic!("{id:#06x}: {e}"));
        assert!(
            dev.link().up && dev.link().speed_mbps == 10_000,
            "{id:#06x}"
        );
        assert_eq!(
            m.peek(AUTOC) & AUTOC_LMS_MASK,
            lms,
            "{id:#06x}: the EEPROM's mode kept"
        );
        assert_eq!(
            m.peek(AUTOC2) & AUTOC2_LINK_DISABLE_MASK,
            0,
            "{id:#06x}: link enabled"
        );
        assert_eq!(m.peek(ESDP), esdp, "{id:#06x}: no laser pin touched");
        assert!(m.violations().is_empty(), "{id:#06x}: {:?}", m.violations());
        // The shutdown's reset reloads the EEPROM's AUTOC2 (link disabled);
        // the port is given back with the upper half it ran with, as Linux
        // `ixgbe_reset_hw_82599` restores `orig_autoc2` (the model refuses
        // DRV_LOAD cleared otherwise).
        let running = m.peek(AUTOC2);
        drop(dev);
        assert_eq!(m.peek(CTRL_EXT) & CTRL_EXT_DRV_LOAD, 0, "{id:#06x}");
        assert_eq!(
            m.peek(AUTOC2) & AUTOC2_UPPER_MASK,
            running & AUTOC2_UPPER_MASK,
            "{id:#06x}: AUTOC2 kept across the shutdown's reset"
        );
        assert!(m.violations().is_empty(), "{id:#06x}: {:?}", m.violations());
    }
    for id in [DEV_ID_82599_T3_LOM, DEV_ID_82599_QSFP_SF_QP] {
        let m = Soft82599::with_device(ModelConfig::default(), id);
        assert!(m.open(&small(1)).is_err(), "{id:#06x} is not brought up");
    }
}
