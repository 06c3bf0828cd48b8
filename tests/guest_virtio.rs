//! The virtio-net family on the testbed's two virtio-net ports
//! (`POLLNIC_VIRTIO_PORT0/1`: modern virtio 1.x, `iommu_platform=on`, behind
//! the guest's vIOMMU, bound to vfio-pci, wired back to back through two
//! multi-queue taps on a private bridge, `$POLLNIC_VIRTIO_QUEUE_PAIRS` queue
//! pairs each, RSS and hash reports offered), and the two devices it must refuse (`POLLNIC_VIRTIO_NOPLATFORM`,
//! `POLLNIC_VIRTIO_TRANSITIONAL`). Run by `cargo xtask test` in the guest.

#[path = "common/relay.rs"]
mod relay;

use pollnic::{Counter, Device, DeviceConfig, Error, VirtqPairStats};
use pollnic_tests::*;
use pollnic_tools::frame::{self, Flow};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// 256-descriptor rings: 128 buffers each, inside both of QEMU's queue sizes.
fn config() -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(256)
        .with_tx_ring_size(256)
        .with_mempool_size(2048)
}

#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn status_lists_the_virtio_ports_with_family_virtio_net() {
    let out = Command::new(pollnic_exe()).arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "pollnic status failed:\n{text}");
    for i in 0..2 {
        let addr = vport(i);
        let line = text
            .lines()
            .find(|l| l.contains(&addr))
            .unwrap_or_else(|| panic!("{addr} missing from pollnic status:\n{text}"));
        let cols: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cols[..4],
            [
                addr.as_str(),
                "Virtio 1.0 network device",
                "virtio-net",
                "vfio-pci"
            ],
            "{line}"
        );
    }
}

#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn link_is_up_and_the_mac_is_qemus() {
    for i in 0..2 {
        let mut dev = Device::open(vport(i), &config()).expect("open a virtio-net port");
        assert_eq!(dev.family(), pollnic::NicFamily::VirtioNet);
        assert_eq!(
            dev.mac(),
            vport_mac(i),
            "MAC from the device config (VIRTIO_NET_F_MAC)"
        );
        assert!(dev.link().up);
        assert_eq!(dev.queue_count(), 1);
        dev.check_device().expect("no DEVICE_NEEDS_RESET");
        // QEMU offers VIRTIO_F_EVENT_IDX (its `event_idx` property, on by
        // default) and pollnic takes it: both queues notify by index.
        let VirtqPairStats {
            rx: vrx, tx: vtx, ..
        } = dev.queue(0).virtq_stats().expect("a virtqueue");
        assert!(
            vrx.event_idx && vtx.event_idx,
            "VIRTIO_F_EVENT_IDX negotiated"
        );
    }
}

/// The kicks and suppressed kicks of a port's queue: (RX, TX).
fn kicks(dev: &mut Device) -> ((u64, u64), (u64, u64)) {
    let VirtqPairStats { rx: r, tx: t, .. } = dev.queue(0).virtq_stats().expect("a virtqueue");
    ((r.kicks, r.kicks_suppressed), (t.kicks, t.kicks_suppressed))
}

/// Send `n` frames of `len` bytes (no FCS) from `tx` to `rx` with
/// `transfer_and_verify` and print the kicks they cost: the sender's TX
/// queue and the receiver's RX queue, sent and suppressed.
fn transfer_counting_kicks(tx: &mut Device, rx: &mut Device, n: u64, len: usize) -> u64 {
    let (_, t0) = kicks(tx);
    let (r0, _) = kicks(rx);
    let bytes = transfer_and_verify(tx, rx, n, |_| len);
    let (_, t1) = kicks(tx);
    let (r1, _) = kicks(rx);
    let VirtqPairStats { rx: _, tx: vtx, .. } = tx.queue(0).virtq_stats().unwrap();
    let VirtqPairStats { rx: vrx, tx: _, .. } = rx.queue(0).virtq_stats().unwrap();
    eprintln!(
        "kicks for {n} frames of {len} B (event_idx TX {} RX {}): TX {} suppressed {}; RX {} \
         suppressed {}",
        vtx.event_idx,
        vrx.event_idx,
        t1.0 - t0.0,
        t1.1 - t0.1,
        r1.0 - r0.0,
        r1.1 - r0.1
    );
    bytes
}

/// Loopback of 20,000 frames of 64 B and of 1518 B on the wire (60 and
/// 1514 without FCS, which virtio never carries): every frame arrives,
/// byte-identical and in order, and the driver's counters agree on both
/// ports.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn loopback_20000_frames_at_64_and_1518_bytes_and_counters_agree() {
    let cfg = config();
    let mut ports = Device::open_many([vport(0), vport(1)], &cfg).expect("open both");
    let (a, b) = ports.split_at_mut(1);
    let (tx, rx) = (&mut a[0], &mut b[0]);
    let mut bytes = 0;
    for len in [60usize, 1514] {
        bytes += transfer_counting_kicks(tx, rx, 20_000, len);
    }
    let (ts, rs) = (tx.stats(), rx.stats());
    assert_eq!(ts.counter(Counter::TxPackets), Some(40_000));
    assert_eq!(rs.counter(Counter::RxPackets), Some(40_000));
    assert_eq!(ts.counter(Counter::TxBytes), Some(bytes));
    assert_eq!(rs.counter(Counter::RxBytes), Some(bytes));
    assert_eq!(rs.get("rx_errors"), Some(0));
    let q = rx.queue(0);
    assert_eq!(q.rx_stats().packets, 40_000);
    let VirtqPairStats { rx: vrx, tx: _, .. } = q.virtq_stats().expect("a virtqueue");
    assert_eq!(vrx.device_errors, 0);
    assert!(!vrx.stopped);
    let VirtqPairStats { rx: _, tx: vtx, .. } = tx.queue(0).virtq_stats().unwrap();
    // The ports' counters carry the queues' kicks (one queue pair each).
    assert_eq!(
        ts.get("tx_kicks"),
        Some(vtx.kicks),
        "tx_kicks in Device::stats"
    );
    assert_eq!(
        rs.get("rx_kicks"),
        Some(vrx.kicks),
        "rx_kicks in Device::stats"
    );
    assert!(
        vtx.kicks > 0 && vrx.kicks > 0,
        "the RX queue kicks once at start, TX per burst"
    );
    // Poll mode: QEMU suppresses kicks while it works on a queue
    // (VRING_USED_F_NO_NOTIFY); at most one kick per burst.
    assert!(vtx.kicks + vtx.kicks_suppressed <= tx.queue(0).tx_stats().bursts);
    eprintln!(
        "TX kicks {} suppressed {}; RX kicks {} suppressed {}",
        vtx.kicks, vtx.kicks_suppressed, vrx.kicks, vrx.kicks_suppressed
    );
}

/// At MTU 9000 (the testbed gives both ports `host_mtu=9000`, so they
/// offer `VIRTIO_NET_F_MTU` = 9000): 20,000 frames of 9014 bytes (an IP
/// MTU of 9000 plus the 14-byte Ethernet header; 9018 on a wire with the
/// FCS, which virtio never carries) from port 0 to port 1, each in one
/// 9,216-byte receive buffer behind its header (no mergeable buffers):
/// every frame arrives byte-identical and in order, and sent = received =
/// the counters. An MTU above 9000 is refused before the device is touched.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn loopback_20000_frames_of_9014_bytes_at_mtu_9000_and_counters_agree() {
    let err = Device::open(vport(0), &config().with_mtu(9001))
        .err()
        .expect("MTU 9001 is refused");
    assert!(
        matches!(
            err,
            Error::Config(pollnic::ConfigError::InvalidMtu { mtu: 9001 })
        ),
        "{err}"
    );
    let cfg = config().with_mtu(9000);
    let mut ports = Device::open_many([vport(0), vport(1)], &cfg).expect("open both at MTU 9000");
    let (a, b) = ports.split_at_mut(1);
    let (tx, rx) = (&mut a[0], &mut b[0]);
    let bytes = transfer_counting_kicks(tx, rx, 20_000, 9014);
    assert_eq!(bytes, 20_000 * 9014);
    let (ts, rs) = (tx.stats(), rx.stats());
    assert_eq!(ts.counter(Counter::TxPackets), Some(20_000));
    assert_eq!(rs.counter(Counter::RxPackets), Some(20_000));
    assert_eq!(ts.counter(Counter::TxBytes), Some(bytes));
    assert_eq!(rs.counter(Counter::RxBytes), Some(bytes));
    assert_eq!(rs.get("rx_errors"), Some(0));
    assert_eq!(rs.get("rx_nombuf"), Some(0));
    let VirtqPairStats { rx: vrx, tx: _, .. } = rx.queue(0).virtq_stats().unwrap();
    assert_eq!(vrx.device_errors, 0);
}

/// Virtio 1.2 §5.1.4.2: with `VIRTIO_NET_F_MTU` negotiated the driver MUST
/// post buffers that take a frame of the device's MTU. The testbed's ports
/// report 9000, so a port opened at the default MTU (1500) still gets
/// 9,216-byte buffers and takes 9014-byte frames whole; before, its 2 KiB
/// buffers made QEMU drop them, counted nowhere. The stopped-queue counters
/// stay 0, and `check_device` is `Ok`.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn a_port_at_the_default_mtu_takes_frames_of_the_devices_mtu() {
    let mut tx = Device::open(vport(0), &config().with_mtu(9000)).expect("port 0 at MTU 9000");
    let mut rx = Device::open(vport(1), &config()).expect("port 1 at the default MTU");
    let buf = rx.queue(0).mempool().buf_size();
    assert!(
        buf >= 9014,
        "receive buffers of {buf} bytes at the default MTU"
    );
    let bytes = transfer_and_verify(&mut tx, &mut rx, 200, |_| 9014);
    assert_eq!(bytes, 200 * 9014);
    let rs = rx.stats();
    assert_eq!(rs.get("device_errors"), Some(0));
    assert_eq!(rs.get("virtqueues_stopped"), Some(0));
    rx.check_device().expect("no queue stopped");
}

/// A port that cannot do what `pktgen --tx-checksum` asks says so: QEMU's
/// virtio-net offers `VIRTIO_NET_F_CSUM` (TCP/UDP checksums only), so the
/// library answers `tx_capabilities()` with `l4_checksum` alone, and
/// `pktgen --tx-checksum` (which asks the IPv4 header checksum too) refuses
/// before it sends anything, naming the flags (before, it counted every
/// refused frame as sent and printed "checksums inserted by the NIC").
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn a_port_without_tx_offloads_says_so_before_sending() {
    {
        let mut dev = Device::open(vport(0), &config()).unwrap();
        let t = dev.queue(0).tx_capabilities();
        // CSUM and HOST_TSO4/6 (QEMU offers them on a tap); no IPv4
        // header checksum or tag insertion.
        assert!(t.l4_checksum && t.tso && !t.ipv4_checksum && !t.vlan_insert);
    }
    let out = Command::new(example_exe("pktgen"))
        .args(["--port", &vport(0), "--count", "10", "--tx-checksum"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("IPv4 header checksum") && err.contains("--tx-checksum"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("sent"),
        "nothing sent"
    );
}

/// Send `n` 60-byte frames from `tx` to destination `dst` (EtherType
/// 0x88b5) and wait until the device has taken them.
fn send_to(tx: &mut Device, dst: [u8; 6], n: usize) {
    let src = tx.mac();
    let q = tx.queue(0);
    let t0 = Instant::now();
    let mut pending = Vec::with_capacity(32);
    let mut made = 0;
    while made < n || !pending.is_empty() {
        while pending.len() < 32 && made < n {
            let mut p = q.mempool().alloc().expect("a buffer");
            p.set_len(60).unwrap();
            let d = p.data_mut();
            d[..6].copy_from_slice(&dst);
            d[6..12].copy_from_slice(&src);
            d[12..14].copy_from_slice(&[0x88, 0xb5]);
            pending.push(p);
            made += 1;
        }
        q.tx_burst(&mut pending);
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the TX ring took nothing for 10 s"
        );
    }
    assert!(q.flush_tx(Duration::from_secs(2)), "sent within 2 s");
}

/// Frames `rx` receives within `d`, by destination: (to its own MAC, to
/// any other).
fn receive_for(rx: &mut Device, d: Duration) -> (usize, usize) {
    let own = rx.mac();
    let q = rx.queue(0);
    let (mut mine, mut other, t0) = (0, 0, Instant::now());
    let mut got = Vec::with_capacity(32);
    while t0.elapsed() < d {
        q.rx_burst(&mut got, 32);
        for p in got.drain(..) {
            if p.data()[..6] == own {
                mine += 1;
            } else {
                other += 1;
            }
        }
    }
    (mine, other)
}

/// `DeviceConfig::promisc` on virtio-net goes to the device as
/// `VIRTIO_NET_CTRL_RX_PROMISC`: off (the default), the device drops
/// frames for another unicast address and passes those for the port's own;
/// on, both arrive. (Before, nothing was sent and QEMU's device stayed
/// promiscuous whatever the configuration said.)
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn promiscuous_mode_is_set_on_the_device() {
    let stranger = [0x02, 0x00, 0x5e, 0x10, 0x20, 0x30];
    for promisc in [false, true] {
        let mut tx = Device::open(vport(0), &config()).unwrap();
        let mut rx = Device::open(vport(1), &config().with_promisc(promisc)).unwrap();
        let own = rx.mac();
        send_to(&mut tx, stranger, 50);
        send_to(&mut tx, own, 50);
        let (mine, other) = receive_for(&mut rx, Duration::from_secs(2));
        assert_eq!(mine, 50, "promisc {promisc}: frames for the port's own MAC");
        assert_eq!(
            other,
            if promisc { 50 } else { 0 },
            "promisc {promisc}: frames for another MAC"
        );
    }
}

/// Frames received on port 1 are sent out of port 0 as they are (zero
/// copy: buffers of port 1's mempool on port 0's TX virtqueue, the two
/// ports opened in one VFIO container) and arrive back on port 1 intact.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn forwarding_between_the_virtio_ports_copies_nothing() {
    let mut ports = Device::open_many([vport(0), vport(1)], &config()).expect("open both");
    assert!(ports[0].shares_dma_with(&ports[1]));
    let flow = Flow::between(ports[0].mac(), ports[1].mac());
    let n = 2_048u64; // 64 rounds of 32
    let mut got = Vec::with_capacity(64);
    let mut pending = Vec::with_capacity(32);
    let mut forwarded = 0u64;
    let mut back = 0u64;
    for round in 0..n / 32 {
        let (a, b) = ports.split_at_mut(1);
        let (p0, p1) = (a[0].queue(0), b[0].queue(0));
        for k in 0..32 {
            let seq = round * 32 + k;
            let mut p = p0.mempool().alloc().expect("a buffer");
            p.set_len(60).unwrap();
            assert!(frame::write(p.data_mut(), &flow, seq, seq));
            pending.push(p);
        }
        while !pending.is_empty() {
            p0.tx_burst(&mut pending);
        }
        // Receive all 32 on 1, then forward them out of 0 untouched.
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < 32 {
            assert!(Instant::now() < deadline, "round {round}: frames missing");
            let room = 32 - got.len();
            p1.rx_burst(&mut got, room);
        }
        forwarded += got.len() as u64;
        while !got.is_empty() {
            p0.tx_burst(&mut got);
        }
        // They come back to 1, intact.
        let mut seen = 0;
        while seen < 32 {
            assert!(
                Instant::now() < deadline,
                "round {round}: forwarded frames missing"
            );
            p1.rx_burst(&mut got, 32);
            for p in got.drain(..) {
                let seq = round * 32 + seen as u64;
                assert!(
                    p.data() == &frame::expected(60, &flow, seq, seq)[..],
                    "frame {seq}"
                );
                seen += 1;
            }
        }
        back += seen as u64;
    }
    assert_eq!((forwarded, back), (n, n));
    let q0 = ports[0].queue(0);
    assert_eq!(
        q0.tx_stats().foreign,
        n,
        "every forwarded frame left in its own buffer"
    );
    assert_eq!(q0.tx_stats().tx_errors, 0);
}

/// Run by the kill test as a child: verified traffic until killed.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn child_traffic_until_killed() {
    if std::env::var_os("POLLNIC_VIRTIO_CHILD").is_none() {
        return;
    }
    let mut ports = Device::open_many([vport(0), vport(1)], &config()).unwrap();
    let (a, b) = ports.split_at_mut(1);
    println!("traffic running");
    loop {
        transfer_and_verify(&mut a[0], &mut b[0], 32, |_| 60);
    }
}

#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn killed_with_sigkill_during_traffic_then_reopened() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_traffic_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("POLLNIC_VIRTIO_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains("traffic running") {
        line.clear();
    }
    assert!(line.contains("traffic running"), "child never started");
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    // The ports open again at once and carry traffic: the open resets the
    // device, whatever the dead process left in its virtqueues.
    let mut ports = Device::open_many([vport(0), vport(1)], &config()).expect("reopen");
    let (a, b) = ports.split_at_mut(1);
    transfer_and_verify(&mut a[0], &mut b[0], 2_000, |s| 60 + (s as usize % 1455));
}

/// QMP `set_link` on the QEMU device: the device config's
/// `VIRTIO_NET_S_LINK_UP` follows, and `Device::link` with it.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn link_status_follows_the_cable() {
    let dev = Device::open(vport(0), &config()).unwrap();
    assert!(dev.link().up);
    let wait = |up: bool| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while dev.link().up != up {
            assert!(Instant::now() < deadline, "link never went {up}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    relay::set_link_of("pollnic_virtio0", false);
    wait(false);
    relay::set_link_of("pollnic_virtio0", true);
    wait(true);
    // Opening waits for the link: with the cable out it says so.
    relay::set_link_of("pollnic_virtio0", false);
    drop(dev);
    let cfg = config().with_link_timeout(Duration::from_millis(300));
    let err = Device::open(vport(0), &cfg).err().expect("link is down");
    assert!(matches!(err, Error::LinkDown { .. }), "{err}");
    relay::set_link_of("pollnic_virtio0", true);
    Device::open(vport(0), &config()).expect("up again");
}

/// The refusals: a device without VIRTIO_F_ACCESS_PLATFORM (it would bypass
/// the vIOMMU) and a transitional one, each with a message naming what is
/// missing and how to get it.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn devices_pollnic_cannot_drive_safely_are_refused_by_name() {
    let err = Device::open(env("POLLNIC_VIRTIO_NOPLATFORM"), &config())
        .err()
        .expect("no ACCESS_PLATFORM: refused");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::VirtioFeatureMissing {
                feature: "VIRTIO_F_ACCESS_PLATFORM",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("iommu_platform=on"), "{msg}");
    // It names the other way, physical addresses, and what that costs.
    assert!(
        msg.contains("--no-iommu") && msg.contains("all of RAM"),
        "{msg}"
    );
    // Physical addresses asked for a port behind the vIOMMU: refused
    // (decision: the IOMMU mode carries the same frames and keeps RAM out
    // of the device's reach, so nothing is gained by giving that up).
    for p in [vport(0), port(0), env("POLLNIC_VIRTIO_NOPLATFORM")] {
        let err = Device::open(p.as_str(), &config().with_unsafe_no_iommu())
            .err()
            .expect("physical addresses behind an IOMMU: refused");
        let msg = err.to_string();
        assert!(matches!(err, Error::NoIommuNotNeeded { .. }), "{p}: {msg}");
        assert!(
            msg.contains("IOMMU group") && msg.contains("without `--no-iommu`"),
            "{msg}"
        );
    }
    let err = Device::open(env("POLLNIC_VIRTIO_TRANSITIONAL"), &config())
        .err()
        .expect("a transitional device: refused");
    let msg = err.to_string();
    assert!(matches!(err, Error::NotImplemented { .. }), "{msg}");
    assert!(msg.contains("disable-legacy=on"), "{msg}");
    // The refused device was reset and left FAILED, the good ports still work.
    let mut ports = Device::open_many([vport(0), vport(1)], &config()).unwrap();
    let (a, b) = ports.split_at_mut(1);
    transfer_and_verify(&mut a[0], &mut b[0], 200, |_| 60);
}

/// The `loopback` tool, unchanged, on the two virtio ports: 20,000 frames
/// offered at 2,000 frames/s, every one received, and the summary's port
/// counters (the driver's own on virtio) agree.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn the_loopback_tool_runs_on_virtio_unchanged() {
    let out = Command::new(example_exe("loopback"))
        .args([
            "--tx",
            &vport(0),
            "--rx",
            &vport(1),
            "--count",
            "20000",
            "--rate",
            "2000",
            "--seconds",
            "60",
            "--ring-size",
            "1024",
            "--json",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "loopback failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a summary line")).unwrap();
    assert_eq!(s["type"], "summary", "{s}");
    assert_eq!(s["sent"], 20_000, "{s}");
    assert_eq!(s["received"], 20_000, "{s}");
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["rx_port_counters"]["rx_packets"], 20_000, "{s}");
    assert_eq!(s["tx_port_counters"]["tx_packets"], 20_000, "{s}");
}

/// `pktgen` on port 0 and `capture` on port 1, both unchanged: every frame
/// sent is written to the pcap file.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn pktgen_and_capture_run_on_virtio_unchanged() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rx.pcap");
    let mut capture = Command::new(example_exe("capture"))
        .args([
            "--port",
            &vport(1),
            "--count",
            "1000",
            "--seconds",
            "120",
            "--out",
        ])
        .arg(&file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(capture.stdout.take().unwrap()).lines();
    let first = lines.next().expect("capture's start line").unwrap();
    assert!(first.ends_with("; capturing"), "{first}");
    let gen = Command::new(example_exe("pktgen"))
        .args([
            "--port",
            &vport(0),
            "--count",
            "1000",
            "--rate",
            "2000",
            "--frame-size",
            "0",
            "--seconds",
            "0",
            "--dst",
            &env("POLLNIC_VIRTIO_PORT1_MAC"),
        ])
        .output()
        .unwrap();
    let gen_out = String::from_utf8_lossy(&gen.stdout);
    assert!(gen.status.success(), "pktgen failed: {gen_out}");
    assert!(gen_out.contains("sent       1000 frames"), "{gen_out}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = capture.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            capture.kill().unwrap();
            panic!("capture did not stop after 1000 frames within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(status.success(), "capture failed: {}", rest.join("\n"));
    assert!(
        rest.iter()
            .any(|l| l == &format!("written    1000 frames to {}", file.display())),
        "{}",
        rest.join("\n")
    );
    // The file holds the 1000 frames, each of pktgen's frame size or more.
    let mut reader =
        pcap_file::pcap::PcapReader::new(std::fs::File::open(&file).unwrap()).expect("a pcap file");
    let mut frames = 0;
    while let Some(p) = reader.next_packet() {
        let p = p.expect("a whole record");
        assert!(p.data.len() >= 60, "a frame of {} bytes", p.data.len());
        frames += 1;
    }
    assert_eq!(frames, 1000);
}

/// Interrupt-driven receive on virtio: MSI-X vector 0 on the RX queue,
/// armed by writing `used_event` (`VIRTIO_F_EVENT_IDX`, which the testbed's
/// QEMU offers). Frames sent every 5 ms all arrive, the receiver sleeps
/// between them and most sleeps end with an interrupt, not the timeout
/// (QEMU's first notification after a reset is sent whatever `used_event`
/// says, so one interrupt proves nothing); virtio has no throttle, so a
/// non-zero `rx_usecs` is refused with the family's range.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn interrupt_mode_sleeps_and_is_woken_by_the_virtqueue() {
    use pollnic::RxMode;
    for mode in [RxMode::interrupt(), RxMode::adaptive()] {
        let cfg = config().with_rx_mode(mode);
        let mut ports = Device::open_many([vport(0), vport(1)], &cfg).expect("MSI-X on virtio");
        let flow = Flow::between(ports[0].mac(), ports[1].mac());
        let (a, b) = ports.split_at_mut(1);
        let (tx, rx) = (a[0].queue(0), b[0].queue(0));
        let n = 200u64;
        let got = std::thread::scope(|s| {
            s.spawn(move || {
                for seq in 0..n {
                    let mut p = tx.mempool().alloc().expect("a buffer");
                    p.set_len(60).unwrap();
                    assert!(frame::write(p.data_mut(), &flow, seq, seq));
                    let mut one = vec![p];
                    while !one.is_empty() {
                        tx.tx_burst(&mut one);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
            let mut got = 0u64;
            let mut burst = Vec::with_capacity(32);
            let deadline = Instant::now() + Duration::from_secs(60);
            while got < n && Instant::now() < deadline {
                let k = rx.rx_burst(&mut burst, 32);
                for p in burst.drain(..) {
                    assert!(
                        p.data() == &frame::expected(60, &flow, got, got)[..],
                        "frame {got}"
                    );
                    got += 1;
                }
                rx.wait_rx(k);
            }
            got
        });
        assert_eq!(got, n, "{mode:?}");
        let st = b[0].queue(0).irq_stats();
        eprintln!("{mode:?}: {st:?}");
        assert!(st.sleeps > 0, "{mode:?}: never slept: {st:?}");
        assert!(
            st.interrupts * 2 > st.sleeps,
            "{mode:?}: most sleeps not ended by an interrupt: {st:?}"
        );
    }
    let err = Device::open(
        vport(0),
        &config().with_rx_mode(RxMode::interrupt()).with_rx_usecs(50),
    )
    .err()
    .expect("virtio has no throttle");
    assert!(
        matches!(err, Error::RxUsecsTooLarge { max: 0, .. }),
        "{err}"
    );
}

/// smoltcp on the two virtio ports (`pollnic::smoltcp::QueueDevice`, as
/// `smol-echo` and `smol-http` use it): a 1 MiB TCP stream from one stack
/// to the other, its TCP checksums left to the device, arrives whole, and
/// every buffer of both pools comes home.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn smoltcp_moves_a_tcp_stream_between_the_virtio_ports() {
    use pollnic::smoltcp::QueueDevice;
    use smoltcp::iface::{Config, Interface, SocketSet};
    use smoltcp::socket::tcp;
    use smoltcp::time::Instant as SmolInstant;
    use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

    let (ip_a, ip_b) = (IpAddress::v4(10, 0, 0, 1), IpAddress::v4(10, 0, 0, 2));
    let mut ports = Device::open_many([vport(0), vport(1)], &config()).unwrap();
    let pools = [ports[0].mempool().clone(), ports[1].mempool().clone()];
    let (a, b) = ports.split_at_mut(1);
    let (mac_a, mac_b) = (a[0].mac(), b[0].mac());
    let mut pa = QueueDevice::new(&mut a[0], 0);
    let mut pb = QueueDevice::new(&mut b[0], 0);
    // QEMU's virtio-net offers VIRTIO_NET_F_CSUM: smoltcp leaves the TCP
    // checksums to the device (NEEDS_CSUM) and sums IPv4's; the receiving
    // stack, without GUEST_CSUM, checks every sum in software, so the
    // stream arrives only if the device's sums are right.
    assert!(pa.checksum_offload() && pb.checksum_offload());
    let iface = |dev: &mut QueueDevice<'_>, mac: [u8; 6], ip: IpAddress| {
        let conf = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        let mut i = Interface::new(conf, dev, SmolInstant::now());
        i.update_ip_addrs(|x| x.push(IpCidr::new(ip, 24)).unwrap());
        i
    };
    let (mut ia, mut ib) = (iface(&mut pa, mac_a, ip_a), iface(&mut pb, mac_b, ip_b));
    let (mut sa, mut sb) = (SocketSet::new(vec![]), SocketSet::new(vec![]));
    let tcp_socket = || {
        tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; 65536]),
            tcp::SocketBuffer::new(vec![0; 65536]),
        )
    };
    let server = sa.add(tcp_socket());
    sa.get_mut::<tcp::Socket>(server).listen(80).unwrap();
    let client = sb.add(tcp_socket());
    sb.get_mut::<tcp::Socket>(client)
        .connect(ib.context(), (ip_a, 80), 49152)
        .unwrap();
    let len = 1 << 20;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let (mut off, mut got) = (0, Vec::with_capacity(len));
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let now = SmolInstant::now();
        pa.poll(&mut ia, &mut sa, now);
        pb.poll(&mut ib, &mut sb, now);
        let s = sa.get_mut::<tcp::Socket>(server);
        if s.may_send() && off < len {
            off += s.send_slice(&data[off..]).unwrap();
            if off == len {
                s.close();
            }
        }
        let c = sb.get_mut::<tcp::Socket>(client);
        while c.can_recv() {
            c.recv(|x| {
                got.extend_from_slice(x);
                (x.len(), ())
            })
            .unwrap();
        }
        if got.len() == len && !c.may_recv() {
            break;
        }
    }
    assert!(
        got.len() == len && got == data,
        "got {} of {len} bytes, or they differ",
        got.len()
    );
    drop((pa, pb));
    drop(ports);
    for p in &pools {
        assert_eq!(p.free_count(), p.capacity() as usize, "buffers missing");
    }
}

/// `pollnic unbind` gives a virtio port back to `virtio-pci` (the driver
/// `bind` recorded), and `pollnic bind` takes it again; it then works.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn unbind_returns_a_virtio_port_to_virtio_pci_and_bind_takes_it_back() {
    let addr = vport(1);
    let driver = || {
        std::fs::read_link(format!("/sys/bus/pci/devices/{addr}/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let run = |what: &str| {
        let out = Command::new(pollnic_exe())
            .args([what, &addr])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "pollnic {what} {addr}: {text}");
        text
    };
    let text = run("unbind");
    assert_eq!(driver().as_deref(), Some("virtio-pci"), "{text}");
    let text = run("bind");
    assert_eq!(driver().as_deref(), Some("vfio-pci"), "{text}");
    let mut ports = Device::open_many([vport(0), vport(1)], &config()).unwrap();
    let (a, b) = ports.split_at_mut(1);
    transfer_and_verify(&mut a[0], &mut b[0], 200, |_| 60);
}

/// Queue pairs the testbed gives each virtio port (its tap's `queues=`).
fn queue_pairs() -> u16 {
    env("POLLNIC_VIRTIO_QUEUE_PAIRS")
        .parse()
        .expect("a number of queue pairs")
}

/// A received frame: which RX queue, its flow and sequence number, and the
/// hash the device reported in its `virtio_net_hdr_v1_hash`.
struct Seen {
    queue: u16,
    flow: Flow,
    seq: u64,
    hash: u32,
}

/// Send one 60-byte frame per entry of `flows` (seq = index), chunks of 32
/// alternating over `tx`'s queues, and collect them from every RX queue of
/// `rx`; then check that nothing more arrives.
fn send_and_collect(tx: &mut Device, rx: &mut Device, flows: &[Flow]) -> Vec<Seen> {
    let mut seen = Vec::new();
    let mut got = Vec::with_capacity(64);
    for (c, chunk_start) in (0..flows.len()).step_by(32).enumerate() {
        let chunk = &flows[chunk_start..flows.len().min(chunk_start + 32)];
        let txq = (c % tx.queue_count() as usize) as u16;
        let mut pending: Vec<pollnic::Packet> = chunk
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let mut p = tx.queue(txq).mempool().alloc().expect("buffer");
                p.set_len(60).unwrap();
                assert!(frame::write(p.data_mut(), f, (chunk_start + k) as u64, 0));
                p
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pending.is_empty() {
            tx.queue(txq).tx_burst(&mut pending);
            assert!(
                Instant::now() < deadline,
                "TX queue {txq}: {} frames not taken in 20 s ({:?})",
                pending.len(),
                tx.queue(txq).virtq_stats()
            );
        }
        let want = chunk_start + chunk.len();
        while seen.len() < want {
            assert!(
                Instant::now() < deadline,
                "only {} of {want} frames arrived",
                seen.len()
            );
            for q in 0..rx.queue_count() {
                rx.queue(q).rx_burst(&mut got, 64);
                for p in got.drain(..) {
                    let info = frame::parse(p.data()).expect("a test frame");
                    seen.push(Seen {
                        queue: q,
                        flow: info.flow,
                        seq: info.seq,
                        hash: p.rss_hash(),
                    });
                }
            }
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    for q in 0..rx.queue_count() {
        assert_eq!(
            rx.queue(q).rx_burst(&mut got, 64),
            0,
            "extra frames on queue {q}"
        );
    }
    seen
}

/// Every frame once, each on the queue pollnic-hw's Toeplitz hash and the
/// device's redirection table predict, with that hash reported; returns the
/// frames per queue.
fn check_predictions(rx: &Device, flows: &[Flow], seen: &[Seen]) -> Vec<usize> {
    let hasher = rx.rss_hasher();
    let mut per_queue = vec![0usize; rx.queue_count() as usize];
    let mut count = std::collections::HashMap::<u64, usize>::new();
    for s in seen {
        *count.entry(s.seq).or_default() += 1;
        assert_eq!(s.flow, flows[s.seq as usize], "frame {}: wrong flow", s.seq);
        let (hash, queue) = pollnic_hw::rss::queue_for(&hasher, rx.reta(), &s.flow.rss_key());
        assert_eq!(
            s.hash, hash,
            "frame {}: reported hash (VIRTIO_NET_F_HASH_REPORT) vs pollnic-hw's Toeplitz",
            s.seq
        );
        assert_eq!(
            s.queue, queue,
            "frame {} (hash {hash:#010x}) on queue {} but the table says {queue}",
            s.seq, s.queue
        );
        per_queue[s.queue as usize] += 1;
    }
    assert_eq!(count.len(), flows.len(), "lost frames");
    assert!(count.values().all(|&c| c == 1), "duplicated frames");
    per_queue
}

/// RSS on virtio-net (VIRTIO_NET_F_RSS through the control queue): many UDP
/// flows from port 0 (both of its TX queues) to port 1 with one queue per
/// pair: every queue gets traffic, each frame lands where pollnic-hw's
/// Toeplitz hash with the device's key and redirection table says, and the
/// hash the device reports (VIRTIO_NET_F_HASH_REPORT) is that hash. Then a
/// new redirection table (every entry moved to the other queue), sent again
/// over the control queue, moves every flow.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn rss_spreads_flows_as_toeplitz_and_the_table_say_with_the_hash_reported() {
    let pairs = queue_pairs();
    assert!(
        pairs >= 2,
        "the testbed gives the virtio ports {pairs} queue pairs"
    );
    let cfg = config()
        .with_queues(pairs)
        .with_rss_key(pollnic_hw::rss::MICROSOFT_KEY);
    let mut ports = Device::open_many([vport(0), vport(1)], &cfg).expect("open both, RSS on");
    let (a, b) = ports.split_at_mut(1);
    let (tx, rx) = (&mut a[0], &mut b[0]);
    assert_eq!(rx.queue_count(), pairs);
    let base: Vec<Flow> = (0..128).map(|i| Flow::nth(tx.mac(), rx.mac(), i)).collect();
    let all: Vec<Flow> = base.iter().chain(base.iter()).copied().collect();
    let seen = send_and_collect(tx, rx, &all);
    let per_queue = check_predictions(rx, &all, &seen);
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "every queue must get traffic: {per_queue:?}"
    );
    eprintln!("frames per queue, round-robin table: {per_queue:?}");

    let mut moved = rx.reta().clone();
    for e in moved.0.iter_mut() {
        *e = ((u16::from(*e) + 1) % pairs) as u8;
    }
    rx.set_reta(moved)
        .expect("a new table over the control queue");
    let seen2 = send_and_collect(tx, rx, &base);
    let after = check_predictions(rx, &base, &seen2);
    let before: std::collections::HashMap<u64, u16> =
        seen.iter().map(|s| (s.seq, s.queue)).collect();
    for s in &seen2 {
        assert_ne!(before[&s.seq], s.queue, "frame {} did not move", s.seq);
    }
    eprintln!("frames per queue, moved table: {after:?}");
    for q in 0..rx.queue_count() {
        let VirtqPairStats { rx: v, tx: _, .. } = rx.queue(q).virtq_stats().unwrap();
        assert_eq!((v.device_errors, v.stopped), (0, false), "queue {q}");
    }
}

/// More queues than the device's `max_virtqueue_pairs` are refused by name,
/// with the device's limit, and the port still opens afterwards.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn queues_above_max_virtqueue_pairs_are_refused() {
    let pairs = queue_pairs();
    let err = Device::open(vport(1), &config().with_queues(pairs + 1))
        .err()
        .expect("one queue pair too many");
    let msg = err.to_string();
    assert!(
        matches!(err, Error::TooManyQueues { queues, max, .. } if queues == pairs + 1 && max == pairs),
        "{msg}"
    );
    assert!(msg.contains("max_virtqueue_pairs"), "{msg}");
    let dev = Device::open(vport(1), &config().with_queues(pairs)).expect("then it opens");
    assert_eq!(dev.queue_count(), pairs);
}

/// Per-queue MSI-X vectors with several queue pairs: vector `q` on
/// receiveq`q+1`. A flow that RSS steers to the last queue, sent every 5 ms,
/// arrives there whole, and that queue's receiver sleeps and is woken by
/// its own interrupt.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn each_queue_pair_has_its_own_interrupt() {
    use pollnic::RxMode;
    let pairs = queue_pairs();
    let last = pairs - 1;
    let rx_cfg = config()
        .with_queues(pairs)
        .with_rx_mode(RxMode::interrupt());
    let mut tx = Device::open(vport(0), &config()).expect("open port 0");
    let mut rx = Device::open(vport(1), &rx_cfg).expect("MSI-X on every queue");
    let hasher = rx.rss_hasher();
    let flow = (0..)
        .map(|i| Flow::nth(tx.mac(), rx.mac(), i))
        .find(|f| pollnic_hw::rss::queue_for(&hasher, rx.reta(), &f.rss_key()).1 == last)
        .expect("a flow for the last queue");
    let n = 100u64;
    let txq = tx.queue(0);
    let rxq = rx.queue(last);
    let got = std::thread::scope(|s| {
        s.spawn(move || {
            for seq in 0..n {
                let mut p = txq.mempool().alloc().expect("a buffer");
                p.set_len(60).unwrap();
                assert!(frame::write(p.data_mut(), &flow, seq, seq));
                let mut one = vec![p];
                while !one.is_empty() {
                    txq.tx_burst(&mut one);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let mut got = 0u64;
        let mut burst = Vec::with_capacity(32);
        let deadline = Instant::now() + Duration::from_secs(60);
        while got < n && Instant::now() < deadline {
            let k = rxq.rx_burst(&mut burst, 32);
            got += burst.drain(..).count() as u64;
            rxq.wait_rx(k);
        }
        got
    });
    assert_eq!(got, n, "frames on queue {last}");
    let st = rx.queue(last).irq_stats();
    eprintln!("queue {last}: {st:?}");
    assert!(st.sleeps > 0, "never slept: {st:?}");
    assert!(st.interrupts > 0, "never woken by its interrupt: {st:?}");
    assert_eq!(rx.queue(0).rx_stats().packets, 0, "nothing for queue 0");
}

/// Issue 45 item 3 through QEMU: TCP and UDP over IPv4 and IPv6 sent on
/// port 0 with the L4 checksum left to the device (`VIRTIO_NET_F_CSUM`:
/// the header's NEEDS_CSUM, the field holding the pseudo-header's sum)
/// reach port 1, opened with `rx_checksum` (`VIRTIO_NET_F_GUEST_CSUM`),
/// each with a checksum that verifies and reported L4 Good: QEMU's taps
/// carry the partial checksum across, and port 1 completes it (NEEDS_CSUM)
/// or is told it is valid (DATA_VALID). The frames are otherwise byte for
/// byte what was sent, and nothing is counted as an error.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn l4_checksums_left_to_the_device_arrive_correct_and_checked_good() {
    use pollnic::offload::{ChecksumStatus, TxOffload};
    use pollnic_tests::l4::*;
    let mut tx = Device::open(vport(0), &config()).unwrap();
    let mut rx = Device::open(vport(1), &config().with_rx_checksum(true)).unwrap();
    assert!(rx.capabilities().rx_checksum);
    assert!(tx.queue(0).tx_capabilities().l4_checksum);
    let (dst, src) = (rx.mac(), tx.mac());
    let mut want = Vec::new();
    for (v6, proto) in [(false, 17), (false, 6), (true, 17), (true, 6)] {
        for len in [1usize, 57, 1000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 13 + 7 + want.len()) as u8).collect();
            want.push(l4_frame(dst, src, v6, proto, &payload));
        }
    }
    let ol = TxOffload::NONE.with_l4_checksum();
    let q = tx.queue(0);
    for f in &want {
        let mut p = q.mempool().alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(f);
        assert_eq!(q.tx_burst_offload(&mut vec![p], &ol), 1);
    }
    assert!(q.flush_tx(Duration::from_secs(2)), "sent within 2 s");
    assert_eq!(q.tx_stats().tx_offload_errors, 0);
    let mut got = Vec::new();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    while got.len() < want.len() && t0.elapsed() < Duration::from_secs(10) {
        rx.queue(0).rx_burst(&mut buf, 32);
        for p in buf.drain(..) {
            // Only the test's frames (the taps carry nothing else: IPv6 is off).
            if p.data().get(6..12) == Some(&src[..]) {
                got.push((p.data().to_vec(), p.rx_checksum().l4));
            }
        }
    }
    assert_eq!(got.len(), want.len(), "every frame arrived");
    for (f, l4) in &got {
        assert!(l4_checksum_ok(f), "checksum does not verify: {f:02x?}");
        assert_eq!(*l4, ChecksumStatus::Good, "{f:02x?}");
        let sent = want
            .iter()
            .find(|w| w.len() == f.len() && w[l4_at(w).1 + 2..] == f[l4_at(f).1 + 2..])
            .expect("a frame that was sent");
        assert_eq!(sent[..l4_at(sent).1], f[..l4_at(f).1]);
    }
    assert_eq!(rx.stats().get("rx_errors").unwrap_or(0), 0);
    rx.check_device().expect("no queue stopped");
}

/// TCP segmentation left to QEMU's virtio-net (`VIRTIO_NET_F_HOST_TSO4`
/// and `HOST_TSO6`, virtio 1.2 §5.1.6.2), each way between the split port
/// and the packed one: QEMU hands the frame and its header to the tap, the
/// host's GSO cuts it on the way to the other tap (whose port takes no
/// large receives), and the other port receives `ceil(payload / mss)`
/// segments with every length and checksum right, consecutive sequence
/// numbers and IPv4 IDs, and the payload whole. Nothing is refused and
/// every big buffer comes back.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn tso_frames_sent_through_the_header_arrive_as_mss_segments() {
    use pollnic::offload::TxOffload;
    use pollnic_tests::tso::{check_segments, receive_tcp, tso_frame};
    let payload: Vec<u8> = (0..65536usize).map(|i| (i * 7 + i / 251) as u8).collect();
    for (from, to) in [(0, 1), (1, 0)] {
        let mut tx = Device::open(vport(from), &config()).unwrap();
        let mut rx = Device::open(vport(to), &config().with_rx_checksum(true)).unwrap();
        assert!(tx.capabilities().tx.tso, "QEMU offers HOST_TSO4/6 on a tap");
        let layout = tx.capabilities().virtq_layout;
        let big = tx.create_mempool(8, 72 * 1024).expect("72 KiB buffers");
        let (src, dst) = (tx.mac(), rx.mac());
        // IPv4: the largest payload (65,535 − 20 − 20 bytes) at MSS 1448,
        // 45 full segments and one of 335 bytes; IPv6: 20,000 at 1440.
        for (v6, len, mss) in [(false, 65495, 1448u16), (true, 20000, 1440)] {
            let what = format!(
                "port {from} ({layout:?}) to {to}, IPv{} {len} B at MSS {mss}",
                if v6 { 6 } else { 4 }
            );
            let pl = &payload[..len];
            let f = tso_frame(src, dst, v6, 0xfff0, 0xffff_f000, pl);
            let mut p = big.alloc().expect("a big buffer");
            p.set_len(f.len()).unwrap();
            p.data_mut().copy_from_slice(&f);
            let ol = TxOffload::NONE.with_tso(mss);
            assert_eq!(tx.queue(0).tx_burst_offload(&mut vec![p], &ol), 1);
            assert_eq!(tx.queue(0).last_tx_refusal(), None, "{what}");
            let n = len.div_ceil(mss as usize);
            let got = receive_tcp(&mut rx, n, Duration::from_secs(10));
            let segs = check_segments(&got, pl, mss as usize, 0xffff_f000, 0xfff0, &what);
            assert!(
                segs.last().unwrap().psh,
                "{what}: Linux keeps PSH on the last"
            );
        }
        let q = tx.queue(0);
        assert!(q.flush_tx(Duration::from_secs(2)), "the TX ring drained");
        let s = q.tx_stats();
        assert_eq!((s.packets, s.tx_offload_errors), (2, 0));
        assert_eq!(big.free_count(), 8, "every big buffer back in its pool");
        rx.check_device().expect("no queue stopped");
        tx.check_device().expect("no queue stopped");
    }
}

/// `pktgen --tso 1448` on virtio port 0, unchanged: its first line says the
/// virtio-net device segments, and pollnic on port 1 receives 46 segments
/// of each frame (65,495 bytes of payload), every one a TCP/IPv4 frame of
/// at most 1514 bytes whose checksums verify, the payloads adding up.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn pktgen_tso_runs_on_virtio_and_its_frames_arrive_as_segments() {
    let mut rx = Device::open(vport(1), &config()).expect("open virtio port 1");
    let dst_s = rx.mac().map(|b| format!("{b:02x}")).join(":");
    let frames = 3usize;
    let gen = Command::new(example_exe("pktgen"))
        .args([
            "--port",
            &vport(0),
            "--count",
            &frames.to_string(),
            "--rate",
            "20",
        ])
        .args(["--tso", "1448", "--dst", &dst_s])
        .output()
        .expect("run pktgen");
    let out = String::from_utf8_lossy(&gen.stdout);
    assert!(
        gen.status.success(),
        "pktgen: {out} {}",
        String::from_utf8_lossy(&gen.stderr)
    );
    assert!(
        out.contains("cut by the virtio-net device into 46 segments"),
        "pktgen's first line says the device cuts the frames: {out}"
    );
    let t0 = Instant::now();
    let (mut segs, mut payload) = (0usize, 0usize);
    let mut burst = Vec::new();
    while segs < 46 * frames && t0.elapsed() < Duration::from_secs(10) {
        rx.queue(0).rx_burst(&mut burst, 64);
        for p in burst.drain(..) {
            let h = match etherparse::PacketHeaders::from_ethernet_slice(p.data()) {
                Ok(h) => h,
                Err(_) => continue,
            };
            let (
                Some(etherparse::NetHeaders::Ipv4(ip, _)),
                Some(etherparse::TransportHeader::Tcp(tcp)),
            ) = (&h.net, &h.transport)
            else {
                continue;
            };
            if tcp.destination_port != 9001 {
                continue;
            }
            let body = h.payload.slice();
            assert!(
                p.data().len() <= 1514,
                "a segment of {} bytes",
                p.data().len()
            );
            assert_eq!(
                ip.header_checksum,
                ip.calc_header_checksum(),
                "IPv4 checksum"
            );
            assert_eq!(
                tcp.checksum,
                tcp.calc_checksum_ipv4(ip, body).unwrap(),
                "TCP checksum"
            );
            segs += 1;
            payload += body.len();
        }
    }
    assert_eq!(
        segs,
        46 * frames,
        "every segment of every frame arrived: {out}"
    );
    assert_eq!(payload, 65495 * frames, "the payloads add up");
    rx.check_device().expect("no queue stopped");
}

/// The testbed's `$POLLNIC_VIRTIO_PACKED_PORT` (QEMU's `packed=on`): the
/// one virtio port whose device offers `VIRTIO_F_RING_PACKED`.
fn packed_port() -> usize {
    env("POLLNIC_VIRTIO_PACKED_PORT")
        .parse()
        .expect("POLLNIC_VIRTIO_PACKED_PORT is 0 or 1")
}

/// Packed virtqueues (virtio 1.2 §2.8) against QEMU's virtio-net: the port
/// that offers them runs them by default, the other stays on the split
/// ring, and asking it for packed rings is refused by name. 5,000 frames
/// of 64 and of 1518 B each way arrive byte-identical and in order, with
/// exact counters, between a packed ring and a split one, and again with
/// the packed port held to the split ring (`DeviceConfig::with_virtq_layout`).
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn the_port_offering_packed_rings_runs_them_and_split_on_request() {
    use pollnic::VirtqLayout::{Packed, Split};
    let p = packed_port();
    let s = 1 - p;
    {
        let dev = Device::open(vport(s), &config().with_virtq_layout(Packed));
        match dev {
            Err(Error::ConfigUnsupported { field, .. }) => assert_eq!(field, "virtq_layout"),
            Err(e) => panic!("packed rings on the split-only port: wrong refusal {e}"),
            Ok(_) => panic!("packed rings on a port that does not offer them were accepted"),
        }
    }
    for (packed_cfg, want) in [
        (config(), Packed),
        (config().with_virtq_layout(Split), Split),
    ] {
        let mut pp = Device::open(vport(p), &packed_cfg).expect("open the packed port");
        let mut sp = Device::open(vport(s), &config()).expect("open the split port");
        assert_eq!(pp.capabilities().virtq_layout, Some(want));
        assert_eq!(sp.capabilities().virtq_layout, Some(Split));
        exchange_5000_each_way_and_check(&mut pp, &mut sp, &format!("{want:?}"));
    }
}

/// 5,000 frames of 64 and of 1518 B from `a` to `b` and back (60 and 1514
/// without FCS), counting kicks: on both ports the counters are exact, no
/// frame had an error, and neither virtqueue saw a device error or
/// stopped. `what` names the case in a failure.
fn exchange_5000_each_way_and_check(a: &mut Device, b: &mut Device, what: &str) {
    let mut bytes = [0u64; 2];
    for len in [60usize, 1514] {
        bytes[0] += transfer_counting_kicks(a, b, 5_000, len);
        bytes[1] += transfer_counting_kicks(b, a, 5_000, len);
    }
    for (dev, sent) in [(a, bytes), (b, [bytes[1], bytes[0]])] {
        let st = dev.stats();
        assert_eq!(st.counter(Counter::TxPackets), Some(10_000), "{what}");
        assert_eq!(st.counter(Counter::RxPackets), Some(10_000), "{what}");
        assert_eq!(st.counter(Counter::TxBytes), Some(sent[0]), "{what}");
        assert_eq!(st.counter(Counter::RxBytes), Some(sent[1]), "{what}");
        assert_eq!(st.get("rx_errors"), Some(0), "{what}");
        let VirtqPairStats { rx, tx, .. } = dev.queue(0).virtq_stats().unwrap();
        assert_eq!((rx.device_errors, tx.device_errors), (0, 0), "{what}");
        assert!(!rx.stopped && !tx.stopped, "{what}");
    }
}

/// `VIRTIO_F_IN_ORDER` against QEMU's virtio-net (`in_order=on` on the
/// packed port, QEMU's `virtqueue_ordered_flush`): that port runs it by
/// default on both layouts and leaves it on request
/// (`DeviceConfig::with_virtq_in_order(false)`); the other port does not
/// offer it, and asking it for in-order completion is refused by name.
/// 5,000 frames of 64 and of 1518 B each way arrive byte-identical and in
/// order with exact counters, and no queue sees a used entry out of order
/// (the control queue, which sent the RSS table at open, included).
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn the_port_offering_in_order_runs_it_on_both_layouts_and_off_on_request() {
    use pollnic::VirtqLayout::{Packed, Split};
    let p = packed_port();
    let s = 1 - p;
    match Device::open(vport(s), &config().with_virtq_in_order(true)) {
        Err(Error::ConfigUnsupported { field, .. }) => assert_eq!(field, "virtq_in_order"),
        Err(e) => panic!("in-order on the port without it: wrong refusal {e}"),
        Ok(_) => panic!("in-order completion on a port that does not offer it was accepted"),
    }
    for (cfg, layout, in_order) in [
        (config(), Packed, true),
        (config().with_virtq_layout(Split), Split, true),
        (config().with_virtq_in_order(false), Packed, false),
    ] {
        let mut pp = Device::open(vport(p), &cfg).expect("open the in-order port");
        let mut sp = Device::open(vport(s), &config()).expect("open the other port");
        let caps = pp.capabilities();
        assert_eq!(
            (caps.virtq_layout, caps.virtq_in_order),
            (Some(layout), Some(in_order))
        );
        assert_eq!(sp.capabilities().virtq_in_order, Some(false));
        exchange_5000_each_way_and_check(&mut pp, &mut sp, &format!("{layout:?} {in_order}"));
        pp.check_device()
            .expect("no queue stopped, the control queue included");
    }
}
