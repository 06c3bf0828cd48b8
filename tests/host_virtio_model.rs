//! The virtio-net back end on the strict software virtio-net device
//! (`pollnic_model::virtio`): the same `Device` code that drives QEMU's
//! virtio-net-pci in the guest tests, run on the host against a device that
//! records every virtio 1.2 MUST the driver breaks, and that can turn
//! hostile. Every test ends with no violation recorded.

use pollnic::{Device, DeviceConfig, Error, Packet, RxMode, VirtioError};
use pollnic_hw::rss::{queue_for, Reta};
use pollnic_model::virtio::{
    feature, Hostile, SoftVirtioNet, VirtioModelConfig, VirtioRx, MODEL_ADDR,
};
use pollnic_tools::frame::{self, Flow};
use std::time::Duration;

fn small(queues: u16) -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(512)
        .with_queues(queues)
        .with_link_timeout(Duration::from_secs(2))
}

fn model() -> SoftVirtioNet {
    SoftVirtioNet::new(VirtioModelConfig::default())
}

fn clean(m: &SoftVirtioNet) {
    assert!(m.violations().is_empty(), "{:#?}", m.violations());
}

#[test]
fn device_opens_on_the_model_with_every_feature_it_offers_and_no_violation() {
    let m = model();
    let dev = m.open(&small(2)).expect("bring-up on the model");
    assert_eq!(dev.family(), pollnic::NicFamily::VirtioNet);
    assert_eq!(dev.mac(), [0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    assert!(dev.link().up);
    assert_eq!(dev.addr().to_string(), MODEL_ADDR);
    let f = m.features();
    for (bit, name) in [
        (feature::VERSION_1, "VERSION_1"),
        (feature::ACCESS_PLATFORM, "ACCESS_PLATFORM"),
        (feature::EVENT_IDX, "EVENT_IDX"),
        (feature::NET_RSS, "RSS"),
        (feature::NET_CTRL_RX, "CTRL_RX"),
        (feature::NET_MTU, "MTU"),
    ] {
        assert_ne!(f & bit, 0, "{name} not negotiated");
    }
    // Every receive virtqueue got its vector before it was enabled (the
    // model refuses it after); the transmit ones none.
    assert_eq!(m.queue_vector(0), Some(0));
    assert_eq!(m.queue_vector(2), Some(1));
    assert_eq!(m.queue_vector(1), Some(0xffff));
    drop(dev);
    assert!(m.mappings().is_empty(), "every mapping removed at drop");
    assert_eq!(m.status(), 0, "reset at drop");
    clean(&m);
}

/// Frames from the wire to `rx_burst`, and from `tx_burst` to the wire,
/// byte for byte, `n` each way.
fn both_ways(m: &SoftVirtioNet, dev: &mut Device, n: u64) {
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    let mut got: Vec<Packet> = Vec::new();
    for seq in 0..n {
        let len = frame::mixed_len(seq);
        let f = frame::expected(len, &flow, seq, seq);
        assert!(
            matches!(m.receive(&f), VirtioRx::Delivered { queue: 0, .. }),
            "frame {seq}"
        );
        assert_eq!(dev.queue(0).rx_burst(&mut got, 8), 1, "frame {seq}");
        let p = got.pop().unwrap();
        assert_eq!(p.data(), &f[..], "frame {seq}");
    }
    let back = Flow::between(dev.mac(), [2, 0, 0, 0, 0, 9]);
    for seq in 0..n {
        let len = frame::mixed_len(seq);
        let mut p = dev.mempool().alloc().unwrap();
        p.set_len(len).unwrap();
        assert!(frame::write(p.data_mut(), &back, seq, seq));
        let mut burst = vec![p];
        assert_eq!(dev.queue(0).tx_burst(&mut burst), 1, "frame {seq}");
        let sent = m.take_tx_frames();
        assert_eq!(sent.len(), 1, "frame {seq}");
        assert_eq!(
            sent[0],
            frame::expected(len, &back, seq, seq),
            "frame {seq}"
        );
    }
}

#[test]
fn frames_cross_both_ways_byte_for_byte() {
    let m = model();
    let mut dev = m.open(&small(1)).unwrap();
    // 600 each way: more than the 64-entry virtqueues hold, so every chain
    // is re-posted and every used index wraps its ring several times.
    both_ways(&m, &mut dev, 600);
    assert!(dev.queue(0).check().is_ok());
    clean(&m);
}

#[test]
fn rss_follows_the_table_the_driver_sent_and_the_hash_is_reported() {
    let m = model();
    let mut dev = m.open(&small(4)).unwrap();
    let rss = m.rss().expect("an RSS configuration was sent");
    assert_eq!(rss.table.len(), 128);
    assert_eq!(rss.key, dev.rss_hasher().key().to_vec());
    let hasher = dev.rss_hasher();
    let reta: Reta = dev.reta().clone();
    let mut per_queue = [0usize; 4];
    let mut got: Vec<Packet> = Vec::new();
    for i in 0..64u64 {
        let flow = Flow::nth([2, 0, 0, 0, 0, 9], dev.mac(), i as u32);
        let (hash, q) = queue_for(&hasher, &reta, &flow.rss_key());
        let f = frame::expected(60, &flow, i, i);
        assert_eq!(m.receive(&f), VirtioRx::Delivered { queue: q, hash });
        assert_eq!(dev.queue(q).rx_burst(&mut got, 8), 1);
        assert_eq!(got.pop().unwrap().rss_hash(), hash);
        per_queue[q as usize] += 1;
    }
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
    clean(&m);
}

#[test]
fn a_device_with_a_jumbo_mtu_gets_buffers_that_take_its_frames() {
    let m = SoftVirtioNet::new(VirtioModelConfig {
        mtu: 9000,
        ..Default::default()
    });
    // A default configuration (MTU 1500): the buffers must still take a
    // frame of the device's MTU (§5.1.4.2); the model checks every chain.
    let mut dev = m.open(&small(1)).unwrap();
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    let f = frame::expected(9014, &flow, 1, 1);
    assert!(matches!(m.receive(&f), VirtioRx::Delivered { .. }));
    let mut got: Vec<Packet> = Vec::new();
    assert_eq!(dev.queue(0).rx_burst(&mut got, 8), 1);
    assert_eq!(got[0].data().len(), 9014);
    clean(&m);
}

#[test]
fn promiscuous_mode_off_is_sent_and_the_device_filters() {
    let m = model();
    let mut dev = m.open(&small(1).with_promisc(false)).unwrap();
    assert_eq!(m.rx_modes(), (false, false));
    let other = Flow::between([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 7]);
    assert_eq!(
        m.receive(&frame::expected(60, &other, 0, 0)),
        VirtioRx::Filtered
    );
    let mine = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    assert!(matches!(
        m.receive(&frame::expected(60, &mine, 0, 0)),
        VirtioRx::Delivered { .. }
    ));
    let mut got: Vec<Packet> = Vec::new();
    assert_eq!(dev.queue(0).rx_burst(&mut got, 8), 1);
    clean(&m);
}

#[test]
fn interrupt_mode_wakes_on_the_queues_vector() {
    let m = model();
    let mode = RxMode::Interrupt {
        timeout: Duration::from_secs(2),
    };
    let mut dev = m.open(&small(1).with_rx_mode(mode)).unwrap();
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    let f = frame::expected(60, &flow, 0, 0);
    let sender = {
        let m = m.clone();
        std::thread::spawn(move || {
            // The frame comes once the driver armed the queue, so the
            // device must fire (before that it must not).
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !m.armed(0) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            m.receive(&f)
        })
    };
    let mut got: Vec<Packet> = Vec::new();
    // An empty poll, then the sleep arms the receive virtqueue's
    // notifications (used_event); the frame then fires vector 0, and the
    // sleep ends with it.
    assert_eq!(dev.queue(0).rx_burst(&mut got, 8), 0);
    dev.queue(0).wait_rx(0);
    assert!(matches!(sender.join().unwrap(), VirtioRx::Delivered { .. }));
    assert_eq!(dev.queue(0).rx_burst(&mut got, 8), 1);
    assert!(
        m.msix_fired().first().is_some_and(|&n| n >= 1),
        "{:?}",
        m.msix_fired()
    );
    clean(&m);
}

// ---- the hostile device -----------------------------------------------------

fn hostile(h: Hostile) -> SoftVirtioNet {
    let m = model();
    m.set_hostile(Some(h));
    m
}

#[test]
fn a_capability_beyond_its_bar_is_a_typed_error() {
    let m = hostile(Hostile::CapabilityBeyondBar);
    match m.open(&small(1)) {
        Err(Error::Virtio {
            problem: VirtioError::StructureOutsideBar { .. },
            ..
        }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn a_capability_at_the_end_of_configuration_space_is_a_typed_error() {
    let m = hostile(Hostile::CapabilityAtConfigEnd);
    match m.open(&small(1)) {
        Err(Error::Virtio {
            problem: VirtioError::MissingStructure { .. },
            ..
        }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn features_ok_refused_is_a_typed_error() {
    let m = hostile(Hostile::RefuseFeaturesOk);
    assert!(matches!(
        m.open(&small(1)),
        Err(Error::VirtioFeaturesRefused { .. })
    ));
}

#[test]
fn device_needs_reset_during_traffic_is_reported() {
    let m = model();
    let mut dev = m.open(&small(1)).unwrap();
    m.set_hostile(Some(Hostile::NeedsResetAfter(5)));
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    for i in 0..8 {
        let _ = m.receive(&frame::expected(60, &flow, i, i));
    }
    let mut got: Vec<Packet> = Vec::new();
    assert_eq!(dev.queue(0).rx_burst(&mut got, 32), 5);
    assert!(matches!(
        dev.check_device(),
        Err(Error::VirtioNeedsReset { .. })
    ));
    assert!(!dev.link().up);
    clean(&m);
}

/// A lying used entry stops the queue, counted, with a typed error; no
/// panic, no packet outside the driver's buffers.
fn lying(h: Hostile) {
    let m = model();
    let mut dev = m.open(&small(1)).unwrap();
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    let mut got: Vec<Packet> = Vec::new();
    assert!(matches!(
        m.receive(&frame::expected(60, &flow, 0, 0)),
        VirtioRx::Delivered { .. }
    ));
    assert_eq!(dev.queue(0).rx_burst(&mut got, 8), 1);
    m.set_hostile(Some(h));
    for i in 1..4 {
        let _ = m.receive(&frame::expected(60, &flow, i, i));
    }
    let _ = dev.queue(0).rx_burst(&mut got, 8);
    let _ = dev.queue(0).rx_burst(&mut got, 8);
    for p in &got {
        assert_eq!(p.data().len(), 60, "{h:?}: a packet outside its frame");
    }
    match dev.queue(0).check() {
        Err(Error::QueueStopped {
            rx: true,
            device_errors,
            ..
        }) => assert!(device_errors >= 1, "{h:?}"),
        other => panic!("{h:?}: {other:?}"),
    }
    clean(&m);
}

#[test]
fn a_used_id_past_the_ring_stops_the_queue() {
    lying(Hostile::UsedIdOutOfRange);
}

#[test]
fn a_used_length_past_the_buffer_drops_the_frame_counted_and_traffic_goes_on() {
    let m = model();
    let mut dev = m.open(&small(1)).unwrap();
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    let mut got: Vec<Packet> = Vec::new();
    m.set_hostile(Some(Hostile::UsedLenTooLong));
    for i in 0..3 {
        let _ = m.receive(&frame::expected(60, &flow, i, i));
    }
    assert_eq!(
        dev.queue(0).rx_burst(&mut got, 8),
        0,
        "no frame of a lying length"
    );
    assert_eq!(dev.queue(0).rx_stats().rx_errors, 3);
    m.set_hostile(None);
    both_ways(&m, &mut dev, 100);
    assert!(dev.queue(0).check().is_ok());
    clean(&m);
}

#[test]
fn a_chain_completed_twice_stops_the_queue() {
    lying(Hostile::UsedIdTwice);
}

#[test]
fn a_device_rewriting_the_avail_ring_and_descriptors_changes_nothing() {
    let m = model();
    let mut dev = m.open(&small(1)).unwrap();
    m.set_hostile(Some(Hostile::RewriteRings));
    // The driver never reads back what it gave the device: every chain it
    // re-posts comes from its own memory, every buffer it frees from its
    // own record.
    both_ways(&m, &mut dev, 300);
    assert!(dev.queue(0).check().is_ok());
    drop(dev);
    assert!(m.mappings().is_empty(), "every buffer came home");
    clean(&m);
}

/// RX checksum status, which a virtio-net port does not report
/// (`Capabilities::rx_checksum` false), is refused at open with the typed
/// error naming the field, before the device is touched; the same
/// configuration without it opens.
#[test]
fn rx_checksum_is_refused_at_open_naming_the_field() {
    let m = model();
    let err = m
        .open(&small(1).with_rx_checksum(true))
        .err()
        .expect("rx_checksum(true) on virtio-net: refused");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::ConfigUnsupported {
                family: "virtio-net",
                field: "rx_checksum",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("DeviceConfig::rx_checksum"), "{msg}");
    assert_eq!(m.status(), 0, "the device was not touched");
    let dev = m.open(&small(1)).expect("the same, without rx_checksum");
    assert!(!dev.capabilities().rx_checksum);
    drop(dev);
    clean(&m);
}

#[test]
fn capabilities_say_what_a_virtio_port_does_and_does_not() {
    use pollnic::offload::{TxOffload, TxRefusal};
    use pollnic::{Counter, NicFamily};
    let m = SoftVirtioNet::new(VirtioModelConfig {
        mtu: 9000,
        ..Default::default()
    });
    let dev = m.open(&small(2)).unwrap();
    let c = dev.capabilities();
    assert_eq!(c.family, NicFamily::VirtioNet);
    assert_eq!((c.max_queues, c.queues, c.max_mtu), (4, 2, 9000));
    assert!(!c.rx_checksum && !c.vlan_strip);
    assert_eq!(c.tx, pollnic::TxCapabilities::default(), "no TX offloads");
    assert_eq!(c.rss.map(|r| (r.table_len, r.key_len)), Some((128, 40)));
    assert!(c.interrupts);
    assert_eq!(
        c.counters,
        [
            Counter::RxPackets,
            Counter::TxPackets,
            Counter::RxBytes,
            Counter::TxBytes
        ]
    );
    let flow = Flow::between([2, 0, 0, 0, 0, 9], dev.mac());
    let f = frame::expected(60, &flow, 0, 0);
    assert_eq!(
        c.check_tx(&TxOffload::NONE.with_l4_checksum(), &f),
        Err(TxRefusal::NoTxOffloads)
    );
    assert_eq!(c.check_tx(&TxOffload::NONE, &f), Ok(()));
    drop(dev);
    // Without RSS offered the device spreads its own way: no RSS to drive.
    let m = SoftVirtioNet::new(VirtioModelConfig {
        features: feature::ALL & !feature::NET_RSS & !feature::NET_HASH_REPORT,
        ..Default::default()
    });
    assert_eq!(m.open(&small(1)).unwrap().capabilities().rss, None);
    clean(&m);
}
