//! The igb back end on the software 82576 (`pollnic_model::igb`): the same
//! `Device` code that drives QEMU's igb in the guest tests, run over the
//! model's BAR and IOMMU on the host (no NIC, no VM, no hugepages).

use pollnic::{Device, DeviceConfig, Error, Packet};
use pollnic_hw::igb::{bits::*, regs::*};
use pollnic_hw::rss::{queue_for, Reta};
use pollnic_model::igb::{Event, ModelConfig, RxOutcome, Soft82576, MODEL_ADDR};
use pollnic_tools::frame::{self, Flow};
use std::time::{Duration, Instant};

fn small(queues: u16) -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(32)
        .with_tx_ring_size(32)
        .with_mempool_size(512)
        .with_queues(queues)
        .with_link_timeout(Duration::from_secs(2))
}

fn model(mac_last: u8) -> Soft82576 {
    Soft82576::new(ModelConfig {
        mac: [0x52, 0x54, 0x00, 0x12, 0x34, mac_last],
        ..Default::default()
    })
}

#[test]
fn device_opens_on_the_model_with_the_igb_back_end() {
    let m = model(1);
    let dev = m.open(&small(1)).expect("bring-up on the model");
    assert_eq!(dev.family(), pollnic::NicFamily::Igb);
    assert_eq!(dev.mac(), [0x52, 0x54, 0x00, 0x12, 0x34, 1]);
    let link = dev.link();
    assert!(
        link.up && link.speed_mbps == 1000 && link.full_duplex,
        "{link:?}"
    );
    assert_eq!(dev.addr().to_string(), MODEL_ADDR);
    assert_eq!(m.peek(MRQC) & MRQC_MODE_MASK, MRQC_MODE_RSS);
    assert_ne!(m.peek(RCTL) & RCTL_SECRC, 0);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// Send 200 frames one at a time from `tx` over the wire to `rx`; each must
/// arrive byte-identical. Returns the bytes sent (no FCS).
fn one_way(tx: &mut Device, txm: &Soft82576, rx: &mut Device, rxm: &Soft82576) -> u64 {
    let flow = Flow::between(tx.mac(), rx.mac());
    let mut got: Vec<Packet> = Vec::new();
    let mut bytes = 0;
    for seq in 0..200u64 {
        let len = frame::mixed_len(seq);
        let mut p = tx.mempool().alloc().unwrap();
        p.set_len(len).unwrap();
        assert!(frame::write(p.data_mut(), &flow, seq, seq));
        bytes += len as u64;
        let mut burst = vec![p];
        assert_eq!(tx.queue(0).tx_burst(&mut burst), 1);
        for f in txm.take_tx_frames() {
            assert!(matches!(
                rxm.receive(&f),
                RxOutcome::Delivered { queue: 0, .. }
            ));
        }
        assert_eq!(rx.queue(0).rx_burst(&mut got, 8), 1, "frame {seq}");
        let p = got.pop().unwrap();
        assert!(
            p.data() == &frame::expected(len, &flow, seq, seq)[..],
            "frame {seq}"
        );
    }
    assert!(tx.queue(0).flush_tx(Duration::from_secs(1)));
    bytes
}

#[test]
fn traffic_both_ways_is_byte_identical_and_counters_agree() {
    let (a, b) = (model(1), model(2));
    let mut da = a.open(&small(1)).unwrap();
    let mut db = b.open(&small(1)).unwrap();
    let ab = one_way(&mut da, &a, &mut db, &b);
    let ba = one_way(&mut db, &b, &mut da, &a);
    for (dev, sent, recv) in [(&mut da, ab, ba), (&mut db, ba, ab)] {
        let s = dev.stats();
        assert_eq!(s.get("tx_packets"), Some(200));
        assert_eq!(s.get("rx_packets"), Some(200));
        // The octet pairs clear both halves when the high half is read, in
        // the model as in QEMU (`igb_mac_read_clr8`): bytes counted between
        // the refresher thread's low and high reads, if its 1 s tick falls
        // inside the traffic, are lost (README, "Counters never lose
        // counts"). Never more than sent; short by at most a few frames.
        for (name, want) in [("tx_bytes", sent + 200 * 4), ("rx_bytes", recv + 200 * 4)] {
            let got = s.get(name).unwrap();
            assert!(
                got <= want && got * 100 >= want * 97,
                "{name}: {got} of {want}"
            );
        }
    }
    assert!(a.violations().is_empty() && b.violations().is_empty());
}

#[test]
fn rss_follows_toeplitz_and_reta_and_set_reta_moves_flows() {
    let m = model(1);
    let mut dev = m.open(&small(4)).unwrap();
    let hasher = dev.rss_hasher();
    let flows: Vec<Flow> = (0..64)
        .map(|i| Flow::nth([2, 0, 0, 0, 0, 9], dev.mac(), i))
        .collect();
    let mut got: Vec<Packet> = Vec::new();
    for (round, reta) in [
        dev.reta().clone(),
        Reta(std::array::from_fn(|i| ((i + 1) % 4) as u8)),
    ]
    .into_iter()
    .enumerate()
    {
        dev.set_reta(reta.clone()).unwrap();
        let mut per_queue = [0usize; 4];
        for (i, flow) in flows.iter().enumerate() {
            let (hash, q) = queue_for(&hasher, &reta, &flow.rss_key());
            let f = frame::expected(60, flow, i as u64, round as u64);
            assert_eq!(m.receive(&f), RxOutcome::Delivered { queue: q, hash });
            assert_eq!(dev.queue(q).rx_burst(&mut got, 8), 1);
            assert_eq!(got.pop().unwrap().rss_hash(), hash);
            per_queue[q as usize] += 1;
        }
        assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
    }
    assert!(m.violations().is_empty());
}

#[test]
fn shutdown_stops_dma_and_resets_before_memory_is_freed() {
    let m = model(1);
    let dev = m.open(&small(2)).unwrap();
    let before = m.events().len();
    drop(dev);
    assert!(m.mappings().is_empty());
    let ev = m.events()[before..].to_vec();
    let first_unmap = ev
        .iter()
        .position(|e| matches!(e, Event::Unmap { .. }))
        .unwrap();
    for e in [
        Event::RxEnable(false),
        Event::RxQueue(1, false),
        Event::TxQueue(1, false),
        Event::TxDmaEnable(false),
        Event::Reset,
        Event::BusMasterOff,
    ] {
        assert!(
            ev[..first_unmap].contains(&e),
            "{e:?} before the first unmap: {ev:?}"
        );
    }
    assert!(m.violations().is_empty());
}

#[test]
fn a_device_that_never_finishes_reset_gives_the_timeout_error() {
    let m = Soft82576::new(ModelConfig {
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
    assert!(e.to_string().contains(MODEL_ADDR));
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn the_model_rejects_the_82599_rss_mode_and_late_tails() {
    use pollnic::lowlevel::io::Regs;
    let m = Soft82576::new(ModelConfig {
        strict: false,
        ..Default::default()
    });
    let r = m.regs();
    r.write32(MRQC, 0x1);
    assert!(m.violations().last().unwrap().contains("MRQC mode 0x1"));
    r.write32(rdt(0), 3);
    assert!(m
        .violations()
        .last()
        .unwrap()
        .contains("before the queue's enable latched"));
    r.write32(STATUS, 0);
    assert!(m.violations().last().unwrap().contains("read-only"));
}

/// `Device::dma_mappings` against the model's IOMMU: the same (IOVA, length)
/// set, one mempool and two rings per queue; all gone after close.
#[test]
fn dma_mappings_match_the_iommu_and_are_the_rings_and_mempools() {
    use pollnic::dma::DmaPurpose;
    let m = model(1);
    let dev = m.open(&small(2)).unwrap();
    let listed = dev.dma_mappings();
    let mut purposes: Vec<String> = listed.iter().map(|x| format!("{:?}", x.purpose)).collect();
    purposes.sort();
    let mut want: Vec<String> = (0..2u16)
        .flat_map(|q| {
            [
                DmaPurpose::Mempool(q),
                DmaPurpose::RxRing(q),
                DmaPurpose::TxRing(q),
            ]
        })
        .map(|p| format!("{p:?}"))
        .collect();
    want.sort();
    assert_eq!(purposes, want);
    let mut ours: Vec<(u64, usize)> = listed.iter().map(|x| (x.iova, x.len)).collect();
    let mut iommu = m.mappings();
    ours.sort_unstable();
    iommu.sort_unstable();
    assert_eq!(ours, iommu, "the list is what the IOMMU holds");
    drop(dev);
    assert!(m.mappings().is_empty());
}

/// The receive filter: broadcast always, multicast only with `allmulti` or
/// `promisc`, a foreign unicast only with `promisc`.
#[test]
fn multicast_needs_allmulti_and_foreign_unicast_needs_promisc() {
    let frame = |dst: [u8; 6]| {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0x12, 0x34, 9]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f
    };
    let bcast = frame([0xff; 6]);
    let mcast = frame([0x01, 0, 0x5e, 0, 0, 0xfb]);
    let foreign = frame([0x52, 0x54, 0, 0x99, 0x99, 0x99]);
    for (allmulti, promisc, m_in, f_in) in [
        (false, false, false, false),
        (true, false, true, false),
        (false, true, true, true),
    ] {
        let m = model(1);
        let _dev = m
            .open(&small(1).with_allmulti(allmulti).with_promisc(promisc))
            .unwrap();
        let delivered = |f: &[u8]| matches!(m.receive(f), RxOutcome::Delivered { .. });
        assert!(delivered(&bcast));
        assert_eq!(
            delivered(&mcast),
            m_in,
            "allmulti {allmulti} promisc {promisc}"
        );
        assert_eq!(
            delivered(&foreign),
            f_in,
            "allmulti {allmulti} promisc {promisc}"
        );
        assert!(m.violations().is_empty(), "{:?}", m.violations());
    }
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

#[test]
fn jumbo_frames_at_mtu_9000_and_oversized_frames_are_dropped_and_counted() {
    let (a, b) = (model(1), model(2));
    let cfg = small(1).with_mtu(9000);
    let mut tx = a.open(&cfg).unwrap();
    let mut rx = b.open(&cfg).unwrap();
    assert_eq!(rx.mtu(), 9000);
    // 82576: LPE with RLPML = 9018, 9 KiB buffers (one descriptor per frame).
    assert_ne!(b.peek(RCTL) & RCTL_LPE, 0);
    assert_eq!(b.peek(RLPML), 9018);
    assert_eq!(b.peek(srrctl(0)) & SRRCTL_BSIZEPKT_MASK, 9);
    assert_eq!(rx.mempool().buf_size(), 9216);
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
    // One byte over: dropped by the NIC, never seen, counted as Linux igb does.
    let mut over = sized_frame(&flow, 9, 9018, false);
    over.push(0);
    assert_eq!(b.receive(&over), RxOutcome::Oversized, "9019 untagged");
    // A tagged 9022-byte frame fits (the 82576 allows 4 bytes per VLAN tag).
    let tagged = sized_frame(&flow, 10, 9022, true);
    assert!(matches!(b.receive(&tagged), RxOutcome::Delivered { .. }));
    let mut over = tagged.clone();
    over.push(0);
    assert_eq!(b.receive(&over), RxOutcome::Oversized, "9023 tagged");
    assert_eq!(rx.queue(0).rx_burst(&mut got, 8), 1);
    assert!(got.pop().unwrap().data() == &tagged[..]);
    let st = rx.stats();
    assert_eq!(st.get("rx_long_length_errors"), Some(2));
    assert_eq!(st.get("rx_length_errors"), Some(2));
    assert_eq!(st.get("rx_packets"), Some(4));
    assert!(b.violations().is_empty(), "{:?}", b.violations());
}

#[test]
fn at_mtu_1500_a_1519_byte_frame_is_dropped_and_counted_and_a_tagged_1522_arrives() {
    let (a, b) = (model(1), model(2));
    let mut rx = b.open(&small(1)).unwrap();
    let _ = a;
    assert_eq!(b.peek(RCTL) & RCTL_LPE, 0, "the MAC's own 1518/1522 limit");
    assert_eq!(rx.mempool().buf_size(), 2048);
    let flow = Flow::between([2, 0, 0, 0, 0, 9], rx.mac());
    assert_eq!(
        b.receive(&sized_frame(&flow, 0, 1519, false)),
        RxOutcome::Oversized
    );
    let tagged = sized_frame(&flow, 1, 1522, true);
    assert!(matches!(b.receive(&tagged), RxOutcome::Delivered { .. }));
    let mut got = Vec::new();
    assert_eq!(rx.queue(0).rx_burst(&mut got, 8), 1);
    assert!(got[0].data() == &tagged[..]);
    assert_eq!(rx.stats().get("rx_length_errors"), Some(1));
    // Out of range: a clear error before the device is touched.
    let e = b.open(&small(1).with_mtu(9001)).err().unwrap();
    assert!(
        matches!(
            e,
            pollnic::Error::Config(pollnic::ConfigError::InvalidMtu { mtu: 9001 })
        ),
        "{e}"
    );
    let e = e.to_string();
    assert!(
        e.contains("MTU 9001 (DeviceConfig::mtu) is out of range") && e.contains("1500 to 9000"),
        "{e}"
    );
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

/// The kernel's request for the device back (as VFIO relays an unbind or a
/// remove): the flag turns true for the device and its queue threads, the
/// callback runs once (also one registered late), `check_removed` gives
/// `Error::DeviceRemoved` saying what to run, the queue threads that check
/// the flag leave `run_pinned`, and the drop then shuts the device down in
/// order with every mapping gone and no violation.
#[test]
fn a_release_request_stops_the_queue_threads_and_the_device_closes_in_order() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    let m = model(1);
    let mut dev = m.open(&small(2)).unwrap();
    assert!(dev.watches_removal());
    assert!(!dev.is_removed());
    dev.check_removed().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    dev.on_removal(move |addr| {
        assert_eq!(addr.to_string(), MODEL_ADDR);
        c.fetch_add(1, SeqCst);
    });
    let cores = [core_affinity::get_core_ids().unwrap()[0].id];
    let polls = pollnic::run_pinned(
        &mut dev,
        &cores,
        pollnic::RxMode::BusyPoll,
        |q| {
            let mut burst = Vec::with_capacity(32);
            let (t0, mut n) = (Instant::now(), 0u64);
            // Bounded, so that a flag that never turns true fails, not hangs.
            while !q.is_removed() && t0.elapsed() < Duration::from_secs(5) {
                q.rx_burst(&mut burst, 32);
                q.free_bulk(&mut burst);
                n += 1;
            }
            (n, q.is_removed())
        },
        || {
            std::thread::sleep(Duration::from_millis(20));
            m.request_release();
            m.request_release(); // the kernel's repeat, 10 s later
        },
    )
    .expect("queue threads");
    assert_eq!(polls.len(), 2);
    assert!(
        polls.iter().all(|&(n, removed)| n > 0 && removed),
        "each queue thread polls, then leaves on the request: {polls:?}"
    );
    assert_eq!(calls.load(SeqCst), 1, "the callback runs once");
    let late = Arc::new(AtomicUsize::new(0));
    let l = Arc::clone(&late);
    dev.on_removal(move |_| {
        l.fetch_add(1, SeqCst);
    });
    assert_eq!(
        late.load(SeqCst),
        1,
        "registered after the request: runs at once"
    );
    assert!(dev.is_removed());
    let e = dev.check_removed().unwrap_err();
    assert!(matches!(e, Error::DeviceRemoved { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(MODEL_ADDR)
            && msg.contains(&format!("pollnic bind {MODEL_ADDR}"))
            && msg.contains("/sys/bus/pci/rescan"),
        "{msg}"
    );
    drop(dev);
    let ev = m.events();
    let off = ev
        .iter()
        .position(|e| matches!(e, Event::BusMasterOff))
        .expect("bus mastering turned off");
    let first_unmap = ev
        .iter()
        .position(|e| matches!(e, Event::Unmap { .. }))
        .expect("memory unmapped");
    assert!(off < first_unmap, "memory freed before DMA stopped: {ev:?}");
    assert!(m.mappings().is_empty(), "left mapped: {:?}", m.mappings());
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// CTRL_EXT.DRV_LOAD (Linux `igb_get_hw_control` / `igb_release_hw_control`):
/// set while the driver holds the port, clear once it is closed; and a port
/// that moves traffic with it clear (the driver's sequence before it was
/// set) is a violation of the model.
#[test]
fn drv_load_is_held_while_open_and_traffic_without_it_is_refused() {
    use pollnic::lowlevel::io::Regs;
    let m = Soft82576::new(ModelConfig {
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

/// The stop before every reset (Linux `igb_reset_hw_82575`): PCIe master
/// disable, then RCTL and TCTL off, then CTRL.RST. Open and close run it (the
/// strict model panics at a reset without it); a bare CTRL.RST on a running
/// port, pollnic's sequence before, is refused and names what was missing.
#[test]
fn every_reset_is_preceded_by_the_stop_linux_does() {
    use pollnic::lowlevel::io::Regs;
    let m = Soft82576::new(ModelConfig::default());
    let dev = m.open(&small(1)).unwrap();
    drop(dev);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    let resets = m
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Reset))
        .count();
    assert!(resets >= 2, "a reset at open and at close: {resets}");

    let m = Soft82576::new(ModelConfig {
        strict: false,
        ..Default::default()
    });
    let r = m.regs();
    assert_ne!(r.read32(STATUS) & STATUS_GIO_MASTER_ENABLE, 0);
    r.write32(RCTL, RCTL_EN);
    r.write32(CTRL, CTRL_RST);
    let v = m.violations();
    let last = v.last().expect("a violation");
    assert!(
        last.contains("CTRL.GIO_MASTER_DISABLE") && last.contains("RCTL.EN"),
        "{v:?}"
    );
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
        let m = Soft82576::new(ModelConfig::default());
        let dev = m.open(&small(1).with_flow_control(mode)).unwrap();
        assert_eq!(dev.flow_control(), mode);
        check_flow_registers(&m, mode);
        assert!(m.violations().is_empty(), "{mode}: {:?}", m.violations());
    }
    // None asked: the family's default, Linux's (full).
    assert_eq!(DeviceConfig::default().flow_control, None);
    let m = Soft82576::new(ModelConfig::default());
    let dev = m.open(&small(1)).unwrap();
    assert_eq!(dev.flow_control(), FlowControl::Full, "Linux's default");
    check_flow_registers(&m, FlowControl::Full);
}

fn check_flow_registers(m: &Soft82576, mode: pollnic::config::FlowControl) {
    let ctrl = m.peek(CTRL);
    assert_eq!(
        ctrl & CTRL_RFCE != 0,
        mode.receives_pause(),
        "{mode}: CTRL {ctrl:#x}"
    );
    assert_eq!(
        ctrl & CTRL_TFCE != 0,
        mode.sends_pause(),
        "{mode}: CTRL {ctrl:#x}"
    );
    assert_eq!(
        (m.peek(FCAL), m.peek(FCAH), m.peek(FCT)),
        (0x00C2_8001, 0x100, 0x8808)
    );
    assert_eq!(m.peek(FCTTV), 0xFFFF);
    if mode.sends_pause() {
        // igb_reset on a 64 KB buffer at MTU 1500: 58,976 and 16 below it.
        assert_eq!(m.peek(FCRTH), 58_976, "{mode}");
        assert_eq!(m.peek(FCRTL), 58_960 | FCRTL_XONE, "{mode}");
    } else {
        assert_eq!((m.peek(FCRTH), m.peek(FCRTL)), (0, 0), "{mode}");
    }
}

/// The model's EEPROM turns both PAUSE directions on at reset, as common
/// boards' NVM does: a driver that leaves flow control alone (pollnic before
/// it programmed it) enables the receiver with TFCE set and no water mark,
/// and the model refuses it.
#[test]
fn a_receiver_enabled_with_pause_on_and_no_water_marks_is_refused() {
    use pollnic::lowlevel::io::Regs;
    let m = Soft82576::new(ModelConfig {
        strict: false,
        ..Default::default()
    });
    let r = m.regs();
    r.write32(CTRL, CTRL_RST);
    while r.read32(CTRL) & CTRL_RST != 0 {}
    r.write32(RCTL, RCTL_EN);
    let v = m.violations();
    assert!(
        v.iter().any(|v| v.contains("CTRL.TFCE set but FCRTH 0x0")),
        "{v:?}"
    );
}

/// The I350 encodes RXPBS as an index into a table of sizes (Linux
/// `igb_rxpbs_adjust_82580`): the software I350's field 0 is 36 KB, so the
/// water marks are igb_reset's for 36 KB, where reading the field as the
/// 82576's size (what pollnic did before) gave the 64 KB marks, above the
/// buffer, and the model refuses them. The 82576 keeps its 64 KB marks.
#[test]
fn the_i350s_water_marks_follow_its_rxpbs_encoding() {
    use pollnic_hw::flow::igb_water_marks;
    let i350 = Soft82576::with_device(ModelConfig::default(), 0x1521);
    let dev = i350.open(&small(1)).unwrap();
    let (high, low) = igb_water_marks(36, 1522);
    assert_eq!(
        (high, low),
        (33_168, 33_152),
        "90 % of 36 KB, rounded to 16"
    );
    assert_eq!(i350.peek(FCRTH), high);
    assert_eq!(i350.peek(FCRTL), low | FCRTL_XONE);
    drop(dev);
    assert!(i350.violations().is_empty(), "{:?}", i350.violations());
    let m82576 = Soft82576::new(ModelConfig::default());
    let _dev = m82576.open(&small(1)).unwrap();
    assert_eq!(m82576.peek(FCRTH), 58_976);
}

/// Energy Efficient Ethernet and DMA coalescing on the I350: off by default
/// (the model's NVM turns EEE on, and refuses a receiver enabled before
/// EEER was written, as pollnic did before it set EEE), on when
/// `DeviceConfig::power_saving` asks, as Linux `igb_set_eee_i350` and
/// `igb_init_dmac` program them, and read back by `Device::power_saving`.
/// The 82576 has neither register (the model refuses any access to them
/// there), and asking for either is refused at open naming the field.
#[test]
fn i350_eee_and_dma_coalescing_are_off_by_default_and_configurable() {
    use pollnic::config::PowerSaving;
    let m = Soft82576::with_device(ModelConfig::default(), 0x1521);
    assert!(m.ident().name.starts_with("I350"));
    assert_eq!(m.peek(EEER) & EEER_LPI_MASK, EEER_LPI_MASK, "the NVM's EEE");
    let dev = m.open(&small(1)).unwrap();
    assert_eq!(dev.power_saving(), PowerSaving::OFF);
    assert_eq!(m.peek(EEER) & EEER_LPI_MASK, 0);
    assert_eq!(m.peek(IPCNFG) & (IPCNFG_EEE_1G_AN | IPCNFG_EEE_100M_AN), 0);
    assert_eq!(m.peek(DMACR) & DMACR_DMAC_EN, 0);
    drop(dev);
    assert!(m.violations().is_empty(), "{:?}", m.violations());

    let m = Soft82576::with_device(ModelConfig::default(), 0x1521);
    let dev = m
        .open(&small(1).with_power_saving(PowerSaving::LINUX))
        .unwrap();
    assert_eq!(dev.power_saving(), PowerSaving::LINUX);
    assert_eq!(m.peek(EEER) & EEER_LPI_MASK, EEER_LPI_MASK);
    assert_eq!(
        m.peek(IPCNFG) & (IPCNFG_EEE_1G_AN | IPCNFG_EEE_100M_AN),
        IPCNFG_EEE_1G_AN | IPCNFG_EEE_100M_AN
    );
    // igb_init_dmac for a 36 KB buffer at MTU 1500: threshold 26 KB, the
    // 1 ms watchdog in 32 µs units, both Lx states; FCRTC 64 x 30.
    let dmacr = m.peek(DMACR);
    assert_eq!(
        dmacr,
        DMACR_DMAC_EN | DMACR_DMAC_LX_MASK | 26 << DMACR_DMACTHR_SHIFT | 31,
        "{dmacr:#x}"
    );
    assert_eq!(m.peek(FCRTC), (64 * 30) << FCRTC_RTH_COAL_SHIFT);
    assert_eq!(m.peek(DMCTXTH), (20_408 - 4096 - 1522) >> 6);
    assert_eq!(m.peek(DMCTLX), 0x8000_0004);
    assert_ne!(m.peek(PCIEMISC) & PCIEMISC_LX_DECISION, 0);
    drop(dev);
    assert!(m.violations().is_empty(), "{:?}", m.violations());

    let only_eee = Soft82576::with_device(ModelConfig::default(), 0x1523);
    let dev = only_eee
        .open(&small(1).with_power_saving(PowerSaving::OFF.with_eee(true)))
        .unwrap();
    assert_eq!(dev.power_saving(), PowerSaving::OFF.with_eee(true));
    drop(dev);

    // The 82576: refused by field, no EEE or DMA coalescing register
    // touched (the strict model would panic); OFF opens, nothing to read
    // back.
    let m = Soft82576::new(ModelConfig::default());
    for ps in [
        PowerSaving::LINUX,
        PowerSaving::OFF.with_eee(true),
        PowerSaving::OFF.with_dma_coalescing(true),
    ] {
        let err = m
            .open(&small(1).with_power_saving(ps))
            .err()
            .expect("power saving on the 82576: refused");
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                Error::ConfigUnsupported {
                    family: "igb",
                    field: "power_saving",
                    ..
                }
            ),
            "{msg}"
        );
        assert!(
            msg.contains("DeviceConfig::power_saving") && msg.contains("82576"),
            "{msg}"
        );
    }
    let dev = m.open(&small(1)).unwrap();
    assert_eq!(dev.power_saving(), PowerSaving::OFF);
    drop(dev);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// `DeviceConfig::virtq_layout` chooses a virtio-net port's ring layout;
/// an igb port has descriptor rings and refuses it by name, with either
/// layout, before a register is touched.
#[test]
fn a_virtqueue_layout_is_refused_on_igb() {
    use pollnic::VirtqLayout;
    let m = model(1);
    for layout in [VirtqLayout::Split, VirtqLayout::Packed] {
        let err = m
            .open(&small(1).with_virtq_layout(layout))
            .err()
            .expect("a virtqueue layout on igb: refused");
        assert!(
            matches!(
                err,
                Error::ConfigUnsupported {
                    family: "igb",
                    field: "virtq_layout",
                    ..
                }
            ),
            "{err}"
        );
    }
    assert!(m.open(&small(1)).is_ok(), "the default opens");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn capabilities_say_what_an_igb_port_does() {
    use pollnic::offload::TxOffload;
    use pollnic::{Counter, NicFamily};
    let m = model(1);
    let dev = m.open(&small(2)).unwrap();
    let c = dev.capabilities();
    assert_eq!(c.family, NicFamily::Igb);
    assert_eq!((c.max_queues, c.queues, c.max_mtu), (16, 2, 9000));
    assert!(c.rx_checksum && c.vlan_strip && c.interrupts);
    assert!(c.tx.ipv4_checksum && c.tx.l4_checksum && c.tx.vlan_insert && c.tx.tso);
    assert_eq!(c.rss.map(|r| (r.table_len, r.key_len)), Some((128, 40)));
    assert!(
        c.counters.contains(&Counter::RxMissedErrors),
        "{:?}",
        c.counters
    );
    assert_eq!(c.counters.len(), Counter::ALL.len(), "{:?}", c.counters);
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    let f = frame::expected(60, &flow, 0, 0);
    assert_eq!(
        c.check_tx(&TxOffload::NONE.with_ipv4_checksum().with_l4_checksum(), &f),
        Ok(())
    );
}
