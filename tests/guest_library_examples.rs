//! The library's three examples (driver/examples) against the testbed, run as
//! a user runs them: `rx_count` on port 1 with 2 RSS queues counts every
//! frame port 0 sends, on both queues; `l2fwd` between ports 1 and 2 carries
//! frames from port 0 (hub A) to port 3 (hub B) and back, unchanged;
//! `udp_reply` on virtio port 1 with 2 RSS queues answers what virtio port
//! 0 sends, its checksums summed in software. Run inside the guest by
//! `cargo xtask test`.

use pollnic::{Device, Packet};
use pollnic_tests::*;
use pollnic_tools::frame::{self, Flow};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts driver example `name` with `args` and waits for its `ready` line.
fn start(name: &str, args: &[&str]) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(example_exe(name))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("ready"),
        "{name} printed {line:?} instead of ready"
    );
    (child, out)
}

/// Waits for the example to exit 0 and returns the rest of what it printed.
fn finish(name: &str, mut child: Child, mut out: BufReader<ChildStdout>) -> String {
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{name} exited with {status}; it printed:\n{text}"
    );
    text
}

/// Sends `n` 60-byte test frames (seq 0..n) from `tx` over `flows` in turn,
/// 16 per burst with a pause between bursts: a rate the testbed's receivers
/// keep up with, so a full ring (which QEMU's igb drops silently) cannot
/// explain a missing frame.
fn send(tx: &mut Device, flows: &[Flow], n: u64) {
    let q = tx.queue(0);
    let mut pending: Vec<Packet> = Vec::with_capacity(16);
    for seq in 0..n {
        let mut p = q.mempool().alloc().expect("a TX buffer");
        p.set_len(60).unwrap();
        assert!(frame::write(
            p.data_mut(),
            &flows[seq as usize % flows.len()],
            seq,
            0
        ));
        pending.push(p);
        if pending.len() == 16 || seq + 1 == n {
            while !pending.is_empty() {
                q.tx_burst(&mut pending);
            }
            std::thread::sleep(Duration::from_millis(4));
        }
    }
    assert!(q.flush_tx(Duration::from_secs(5)), "TX did not drain");
}

/// The number in `line` after `key`, e.g. `field(l, "queue 0:")`.
fn number_after(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no line {key:?} in:\n{text}"));
    line[key.len()..]
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number after {key:?} in {line:?}"))
}

#[test]
#[ignore = "runs inside the QEMU guest: cargo xtask test"]
fn rx_count_counts_every_frame_on_both_rss_queues() {
    const N: u64 = 2000;
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let flows: Vec<Flow> = (0..64)
        .map(|i| Flow::nth(tx.mac(), port_mac(1), i))
        .collect();
    let (child, out) = start("rx_count", &[&port(1), "2", "12"]);
    send(&mut tx, &flows, N);
    let text = finish("rx_count", child, out);
    let (q0, q1) = (
        number_after(&text, "queue 0:"),
        number_after(&text, "queue 1:"),
    );
    assert!(
        q0 > 0 && q1 > 0,
        "64 flows over 2 RSS queues reached only one:\n{text}"
    );
    assert_eq!(number_after(&text, "total:"), N, "{text}");
    assert_eq!(q0 + q1, N, "{text}");
    assert!(number_after(&text, "rx_packets:") >= N, "{text}");
}

/// Takes what `rx` holds now into `seen`, checking that each is the frame
/// `flow` carried, unchanged, and that none arrives twice.
fn drain(rx: &mut Device, flow: &Flow, seen: &mut HashSet<u64>) {
    let (q, mut got) = (rx.queue(0), Vec::with_capacity(32));
    while q.rx_burst(&mut got, 32) > 0 {
        for p in got.drain(..) {
            let Some(info) = frame::parse(p.data()) else {
                continue;
            };
            assert_eq!(
                p.data(),
                &frame::expected(p.len(), flow, info.seq, 0)[..],
                "frame {} changed on the way",
                info.seq
            );
            assert!(seen.insert(info.seq), "frame {} arrived twice", info.seq);
        }
    }
}

/// Sends `n` frames of `flow` from `tx` as [`send`] does, taking what
/// reaches `rx` between bursts (its ring is small), then waits up to 20 s
/// for the rest. Returns the sequence numbers that arrived.
fn send_through(tx: &mut Device, rx: &mut Device, flow: &Flow, n: u64) -> HashSet<u64> {
    let mut seen = HashSet::new();
    for start in (0..n).step_by(16) {
        let q = tx.queue(0);
        let mut pending: Vec<Packet> = (start..n.min(start + 16))
            .map(|seq| {
                let mut p = q.mempool().alloc().expect("a TX buffer");
                p.set_len(60).unwrap();
                assert!(frame::write(p.data_mut(), flow, seq, 0));
                p
            })
            .collect();
        while !pending.is_empty() {
            q.tx_burst(&mut pending);
        }
        let pause = Instant::now() + Duration::from_millis(4);
        while Instant::now() < pause {
            drain(rx, flow, &mut seen);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while (seen.len() as u64) < n && Instant::now() < deadline {
        drain(rx, flow, &mut seen);
    }
    seen
}

#[test]
#[ignore = "runs inside the QEMU guest: cargo xtask test"]
fn l2fwd_carries_frames_both_ways_unchanged() {
    const N: u64 = 1000;
    let promisc = small_config().with_promisc(true);
    let mut a = Device::open(port(0), &promisc).unwrap();
    let mut b = Device::open(port(3), &promisc).unwrap();
    let (child, out) = start("l2fwd", &[&port(1), &port(2), "14"]);
    // Port 0 -> hub A -> port 1 -> l2fwd -> port 2 -> hub B -> port 3, and back.
    let there = Flow::between(a.mac(), port_mac(1));
    let arrived = send_through(&mut a, &mut b, &there, N);
    assert_eq!(
        arrived.len() as u64,
        N,
        "port 3 got {} of {N}",
        arrived.len()
    );
    let back = Flow::between(b.mac(), port_mac(2));
    let arrived = send_through(&mut b, &mut a, &back, N);
    assert_eq!(
        arrived.len() as u64,
        N,
        "port 0 got {} of {N}",
        arrived.len()
    );
    let text = finish("l2fwd", child, out);
    let (p1, p2) = (port(1), port(2));
    assert_eq!(number_after(&text, &format!("{p1} -> {p2}:")), N, "{text}");
    assert_eq!(number_after(&text, &format!("{p2} -> {p1}:")), N, "{text}");
}

/// Whether a reply is UDP/IPv4 from `from` to `to` with both checksums
/// right (each sums to 0xffff with its field: RFC 1071), and whose
/// destination port is one of the 64 flows' source ports.
fn reply_ok(data: &[u8], from: [u8; 6], to: [u8; 6]) -> Result<(), String> {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use pollnic_hw::offload::{fold, ones_sum};
    let s = SlicedPacket::from_ethernet(data).map_err(|e| format!("not parsed: {e}"))?;
    let (Some(NetSlice::Ipv4(v4)), Some(TransportSlice::Udp(udp))) = (&s.net, &s.transport) else {
        return Err("not UDP/IPv4".into());
    };
    if data[0..6] != to || data[6..12] != from {
        return Err(format!(
            "MACs {:02x?} -> {:02x?}",
            &data[6..12],
            &data[0..6]
        ));
    }
    let ip = v4.header().slice();
    if fold(ones_sum(ip, 0)) != 0xffff {
        return Err("IPv4 header checksum wrong".into());
    }
    let seg = udp.slice();
    let pseudo = ones_sum(&ip[12..20], 17 + seg.len() as u64);
    if fold(ones_sum(seg, pseudo)) != 0xffff || udp.checksum() == 0 {
        return Err(format!("UDP checksum {:#06x} wrong", udp.checksum()));
    }
    if !(10_000..10_064).contains(&udp.destination_port()) {
        return Err(format!("destination port {}", udp.destination_port()));
    }
    Ok(())
}

/// The library's third example, written from docs/library.md: `udp_reply`
/// on port `rx` with 2 RSS queues answers each UDP frame port `tx` sends
/// over 64 flows, on both queues, and every reply comes back with its
/// addresses and ports swapped and both checksums right. Returns what
/// `udp_reply` printed.
fn udp_reply_round(tx: String, rx: String, rx_mac: [u8; 6]) -> String {
    const N: u64 = 400;
    let mut dev = Device::open(tx.as_str(), &small_config()).unwrap();
    let (mine, theirs) = (dev.mac(), rx_mac);
    let flows: Vec<Flow> = (0..64).map(|i| Flow::nth(mine, theirs, i)).collect();
    let (child, out) = start("udp_reply", &[&rx, "2", "12"]);
    let q = dev.queue(0);
    let (mut replies, mut bad, mut got) = (0u64, Vec::new(), Vec::<Packet>::new());
    let mut take = |q: &mut pollnic::Queue, replies: &mut u64, bad: &mut Vec<String>| {
        q.rx_burst(&mut got, 32);
        for p in got.drain(..) {
            match reply_ok(p.data(), theirs, mine) {
                Ok(()) => *replies += 1,
                Err(e) => bad.push(e),
            }
        }
    };
    for seq in 0..N {
        let mut p = q.mempool().alloc().expect("a TX buffer");
        p.set_len(60).unwrap();
        assert!(frame::write(
            p.data_mut(),
            &flows[seq as usize % 64],
            seq,
            0
        ));
        let mut burst = vec![p];
        let deadline = Instant::now() + Duration::from_secs(5);
        while q.tx_burst(&mut burst) == 0 {
            assert!(Instant::now() < deadline, "{tx} took no frame for 5 s");
            take(q, &mut replies, &mut bad);
        }
        if seq % 16 == 15 {
            std::thread::sleep(Duration::from_millis(2));
        }
        take(q, &mut replies, &mut bad);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while replies < N && Instant::now() < deadline {
        take(q, &mut replies, &mut bad);
    }
    let text = finish("udp_reply", child, out);
    assert!(
        bad.is_empty(),
        "bad replies: {:?}\n{text}",
        &bad[..bad.len().min(5)]
    );
    assert_eq!(replies, N, "replies received\n{text}");
    let (q0, q1) = (
        number_after(&text, "queue 0: received"),
        number_after(&text, "queue 1: received"),
    );
    assert!(
        q0 > 0 && q1 > 0,
        "64 flows over 2 RSS queues reached only one:\n{text}"
    );
    assert_eq!(number_after(&text, "total:"), N, "{text}");
    text
}

/// `udp_reply` on virtio-net: the port does no transmit offloads, so it
/// sums the checksums in software (`offload::checksum_in_software`).
#[test]
#[ignore = "runs inside the QEMU guest: cargo xtask test"]
fn udp_reply_answers_on_both_rss_queues_with_software_checksums_on_virtio() {
    let text = udp_reply_round(vport(0), vport(1), vport_mac(1));
    assert_eq!(text.matches("(checksums in software)").count(), 2, "{text}");
}

/// `udp_reply` on igb: the port offers transmit offloads
/// (`Queue::offers_tx_offloads`), so the NIC inserts both checksums
/// (`tx_burst_offload`), and the replies still come back with both right.
#[test]
#[ignore = "runs inside the QEMU guest: cargo xtask test"]
fn udp_reply_answers_on_both_rss_queues_with_nic_checksums_on_igb() {
    let text = udp_reply_round(port(0), port(1), port_mac(1));
    assert_eq!(text.matches("(checksums by the NIC)").count(), 2, "{text}");
}
