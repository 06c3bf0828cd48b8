//! The library's two examples (driver/examples) against the testbed, run as
//! a user runs them: `rx_count` on port 1 with 2 RSS queues counts every
//! frame port 0 sends, on both queues; `l2fwd` between ports 1 and 2 carries
//! frames from port 0 (hub A) to port 3 (hub B) and back, unchanged. Run
//! inside the guest by `cargo xtask test`.

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
