//! The `fwd` example (testpmd-style io/macswap forwarder) in the QEMU testbed,
//! run as a child process while this test generates traffic with the library:
//!
//! - one port, macswap: port 0 sends to fwd on port 1, which swaps the MACs
//!   and sends the frames back out of port 1 to port 0;
//! - two ports, io, both directions at once: port 0 → fwd port 1 → fwd port 2
//!   → port 3, and port 3 → fwd port 2 → fwd port 1 → port 0 (ports 0/1 share
//!   one QEMU hub, 2/3 another).
//!
//! Every frame that comes back must be byte-identical to what was sent (MACs
//! swapped in macswap mode), none twice; fwd's summary must agree with what was
//! sent and with the NICs' counters. Run inside the guest by `cargo xtask test`.
//!
//! The generator runs in this test, not in the `loopback` example: loopback
//! opens its TX and RX ports as two devices, and one VFIO device cannot be
//! opened twice, so it cannot send and receive on port 0 at once.

use pollnic::{Device, DeviceConfig, Packet};
use pollnic_tests::*;
use pollnic_tools::frame::{self, Flow};
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// Frames per stream, offered at up to `RATE` packets/s each: modest, so that
/// the debug build of fwd keeps up under TCG (this debug-built generator
/// itself reaches only about 3000 packets/s there).
const FRAMES: u64 = 2000;
const RATE: u64 = 10_000;

/// Allowed loss in percent. QEMU's igb drops silently (no counter moves) when
/// the receiving ring is full and the hub's queue overflows, and under TCG a
/// descheduled vCPU can let that happen even at this rate; anything beyond a
/// few percent is a real failure, and nothing forwarded fails outright.
const MAX_LOSS_PERCENT: u64 = 3;

/// A running `fwd` with its stdout lines arriving on a channel.
struct Fwd {
    child: Child,
    lines: Receiver<String>,
    out: Vec<String>,
}

impl Fwd {
    /// Start fwd with `args` and wait until it forwards (its first line).
    fn start(args: &[&str]) -> Fwd {
        let mut child = Command::new(example_exe("fwd"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fwd");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                println!("fwd| {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut fwd = Fwd {
            child,
            lines,
            out: Vec::new(),
        };
        let first = fwd
            .lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("fwd {args:?} did not start within 60 s"));
        assert!(first.starts_with("pollnic fwd: "), "fwd said: {first}");
        fwd.out.push(first);
        fwd
    }

    /// Wait up to `limit` for fwd to exit (it must succeed); returns all its output.
    fn finish(mut self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("fwd did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.out.push(l);
        }
        let text = self.out.join("\n");
        assert!(status.success(), "fwd failed ({status}):\n{text}");
        text
    }

    fn interrupt(&self) {
        let rc = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(rc.success());
    }
}

/// One stream of test frames: sent by device `tx`, expected back on device `rx`.
struct Stream {
    tx: usize,
    rx: usize,
    flow: Flow,
    seq: u64,
    pending: Vec<Packet>,
    got: Vec<Vec<u8>>,
}

impl Stream {
    fn new(tx: usize, rx: usize, flow: Flow) -> Stream {
        Stream {
            tx,
            rx,
            flow,
            seq: 0,
            pending: Vec::with_capacity(32),
            got: Vec::new(),
        }
    }
}

/// Send `FRAMES` frames of every stream at `RATE` each (mixed lengths) while
/// collecting what arrives on each stream's receiving device, until all is
/// sent and nothing has arrived for 1.5 s. Each stream needs its own `rx`.
fn run_streams(devs: &mut [Device], streams: &mut [Stream]) {
    let gap_ns = 1_000_000_000 / RATE;
    let t0 = Instant::now();
    let mut last_rx = Instant::now();
    let mut buf: Vec<Packet> = Vec::with_capacity(64);
    loop {
        let due = (t0.elapsed().as_nanos() as u64 / gap_ns + 1).min(FRAMES);
        for s in streams.iter_mut() {
            let dev = &mut devs[s.tx];
            let flows = [s.flow];
            frame::fill_burst(
                dev.mempool(),
                &mut s.pending,
                32,
                &flows,
                &mut s.seq,
                due,
                frame::mixed_len,
            );
            dev.queue(0).tx_burst(&mut s.pending);
        }
        for s in streams.iter_mut() {
            if devs[s.rx].queue(0).rx_burst(&mut buf, 64) > 0 {
                last_rx = Instant::now();
                s.got.extend(buf.drain(..).map(|p| p.data().to_vec()));
            }
        }
        let all_sent = streams
            .iter()
            .all(|s| s.seq == FRAMES && s.pending.is_empty());
        if all_sent && last_rx.elapsed() > Duration::from_millis(1500) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "generator stuck");
    }
    for d in devs.iter_mut() {
        assert!(
            d.queue(0).flush_tx(Duration::from_secs(5)),
            "TX ring did not drain"
        );
    }
}

/// Check every frame `s` got back: a test frame of this stream, sent once,
/// byte-identical to what was sent (destination and source MAC swapped when
/// `swapped`). Returns how many distinct frames came back.
fn verify(s: &Stream, swapped: bool) -> u64 {
    let mut seen = HashSet::new();
    for f in &s.got {
        let info = frame::parse(f).unwrap_or_else(|| panic!("not a test frame: {f:02x?}"));
        assert!(
            info.seq < FRAMES,
            "frame {}: unknown sequence number",
            info.seq
        );
        assert!(seen.insert(info.seq), "frame {} arrived twice", info.seq);
        let mut want = frame::expected(frame::mixed_len(info.seq), &s.flow, info.seq, info.tx_ns);
        if swapped {
            let (dst, src) = want[..12].split_at_mut(6);
            dst.swap_with_slice(src);
        }
        assert_eq!(f.len(), want.len(), "frame {}: length", info.seq);
        assert!(
            f == &want,
            "frame {}: bytes differ (swapped MACs expected: {swapped})\n got {:02x?}\nwant {:02x?}",
            info.seq,
            &f[..f.len().min(48)],
            &want[..want.len().min(48)]
        );
    }
    seen.len() as u64
}

/// The number after `key ` in `line`.
fn num_after(line: &str, key: &str) -> u64 {
    let at = line
        .find(&format!("{key} "))
        .unwrap_or_else(|| panic!("no `{key}` in: {line}"));
    line[at + key.len() + 1..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after `{key}` in: {line}"))
}

/// fwd's summary for direction `rx -> tx`: (received, forwarded, tx_dropped).
fn direction(out: &str, rx: &str, tx: &str) -> (u64, u64, u64) {
    let mut lines = out.lines();
    let head = format!("{rx} -> {tx} (");
    lines
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no summary for {rx} -> {tx} in:\n{out}"));
    let l = lines.next().unwrap();
    (
        num_after(l, "received"),
        num_after(l, "forwarded"),
        num_after(l, "tx_dropped"),
    )
}

/// fwd's hardware counter `name` for port `addr`.
fn hw(out: &str, addr: &str, name: &str) -> u64 {
    let head = format!("port {addr} (");
    let l = out
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no counters for port {addr} in:\n{out}"));
    num_after(l, name)
}

/// Checks one direction of fwd against the generator: `back` distinct frames
/// came back out of `FRAMES` sent.
fn check_direction(out: &str, rx: &str, tx: &str, back: u64) {
    let what = format!("{rx} -> {tx}: ");
    let lost = FRAMES - back;
    assert!(
        lost * 100 <= MAX_LOSS_PERCENT * FRAMES,
        "{what}only {back} of {FRAMES} frames came back through fwd:\n{out}"
    );
    let (received, forwarded, dropped) = direction(out, rx, tx);
    assert!(
        received <= FRAMES && received >= back,
        "{what}fwd received {received}; sent {FRAMES}, came back {back}"
    );
    assert_eq!(dropped, 0, "{what}fwd dropped frames");
    assert_eq!(forwarded, received, "{what}forwarded vs received");
    // Each port receives only this direction's frames and sends only its output.
    assert_eq!(
        hw(out, rx, "rx_packets"),
        received,
        "{what}rx_packets of {rx}"
    );
    assert_eq!(
        hw(out, tx, "tx_packets"),
        forwarded,
        "{what}tx_packets of {tx}"
    );
}

fn open(i: usize, promisc: bool) -> Device {
    let cfg = DeviceConfig::default()
        .with_rx_ring_size(256)
        .with_tx_ring_size(256)
        .with_mempool_size(2048)
        .with_promisc(promisc);
    Device::open(port(i), &cfg).unwrap_or_else(|e| panic!("open port {i}: {e}"))
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn one_port_macswap_bounces_every_frame_back_with_swapped_macs() {
    let mut devs = vec![open(0, false)];
    let p1 = port(1);
    let fwd = Fwd::start(&[
        "--ports",
        &p1,
        "--mode",
        "macswap",
        "--seconds",
        "6",
        "--cores",
        "1",
    ]);
    let p1_mac = port_mac(1);
    let mut streams = [Stream::new(0, 0, Flow::between(devs[0].mac(), p1_mac))];
    run_streams(&mut devs, &mut streams);
    let sent_hw = devs[0].stats().get("tx_packets").unwrap();
    assert_eq!(sent_hw, FRAMES, "port 0 tx_packets");
    // Frames to port 0's own MAC: port 0 is not promiscuous, so a frame whose
    // MACs were not swapped would not even be accepted.
    let back = verify(&streams[0], true);
    let out = fwd.finish(Duration::from_secs(30));
    check_direction(&out, &p1, &p1, back);
    assert!(out.contains("[  1 s] "), "no live line:\n{out}");
    assert!(!out.contains("interrupted"), "{out}");
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn two_ports_io_forwards_both_directions_untouched_until_ctrl_c() {
    // Promiscuous receivers: in io mode the frames keep the MAC of the port
    // they were first sent to (port 1 or 2), not the receiver's.
    let mut devs = vec![open(0, true), open(3, true)];
    let (p1, p2) = (port(1), port(2));
    let ports = format!("{p1},{p2}");
    let fwd = Fwd::start(&["--ports", &ports, "--mode", "io", "--cores", "1"]);
    let mac = port_mac;
    let mut streams = [
        Stream::new(0, 1, Flow::between(devs[0].mac(), mac(1))),
        Stream::new(1, 0, Flow::nth(devs[1].mac(), mac(2), 7)),
    ];
    run_streams(&mut devs, &mut streams);
    let back: Vec<u64> = streams.iter().map(|s| verify(s, false)).collect();
    fwd.interrupt();
    let out = fwd.finish(Duration::from_secs(30));
    assert!(out.contains("interrupted by Ctrl-C"), "{out}");
    check_direction(&out, &p1, &p2, back[0]);
    check_direction(&out, &p2, &p1, back[1]);
    // Zero copy between the two ports: fwd copied nothing, and every frame
    // it forwarded left from the other port's mempool as it was.
    for (rx, tx) in [(&p1, &p2), (&p2, &p1)] {
        let (_, forwarded, _) = direction(&out, rx, tx);
        let (copies, crossed) = copies(&out, rx, tx);
        assert_eq!(copies, 0, "{rx} -> {tx}: fwd copied frames:\n{out}");
        assert_eq!(
            crossed, forwarded,
            "{rx} -> {tx}: every forwarded frame left from the other port's mempool:\n{out}"
        );
    }
}

/// fwd's `copies` line for direction `rx -> tx`: (copies, frames sent from
/// the other port's mempool).
fn copies(out: &str, rx: &str, tx: &str) -> (u64, u64) {
    let head = format!("{rx} -> {tx} (");
    let l = out
        .lines()
        .skip_while(|l| !l.starts_with(&head))
        .find(|l| l.trim_start().starts_with("copies"))
        .unwrap_or_else(|| panic!("no copies line for {rx} -> {tx} in:\n{out}"));
    (num_after(l, "copies"), num_after(l, "as they are:"))
}

/// The library without fwd: ports opened together share one VFIO container,
/// so port 1's received buffers go back out of port 0 as they are, arrive
/// on port 1 again byte-identical, and every buffer is back in port 1's
/// mempool once both ports are closed. A port opened alone refuses them.
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn ports_opened_together_send_each_others_buffers_and_every_buffer_comes_home() {
    const N: u64 = 500;
    let cfg = DeviceConfig::default()
        .with_rx_ring_size(256)
        .with_tx_ring_size(256)
        .with_mempool_size(2048);
    let mut devs =
        Device::open_many([port(0), port(1)], &cfg).expect("open ports 0 and 1 together");
    assert!(devs[0].shares_dma_with(&devs[1]));
    let pool1 = devs[1].mempool().clone();
    let flow = Flow::between(devs[0].mac(), devs[1].mac());
    let (r1_iova, r1_len) = (pool1.region().iova(), pool1.region().len() as u64);
    let in_pool1 = |p: &Packet| (r1_iova..r1_iova + r1_len).contains(&p.iova());
    // What port 1 received the first time, by sequence number, and how many
    // came back the second time byte-identical.
    let mut first: std::collections::HashMap<u64, Vec<u8>> = Default::default();
    let (mut seq, mut second) = (0u64, 0u64);
    let mut pending: Vec<Packet> = Vec::new();
    let mut got: Vec<Packet> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while second < N {
        assert!(Instant::now() < deadline, "only {second} of {N} came back");
        // Port 0 sends new frames from its own pool ...
        let due = (seq + 16).min(N);
        frame::fill_burst(
            devs[0].mempool(),
            &mut pending,
            16,
            &[flow],
            &mut seq,
            due,
            frame::mixed_len,
        );
        while !pending.is_empty() {
            devs[0].queue(0).tx_burst(&mut pending);
        }
        // ... port 1 receives them, and its own buffers go back out of port 0.
        devs[1].queue(0).rx_burst(&mut got, 64);
        for p in got.drain(..) {
            assert!(
                in_pool1(&p),
                "port 1 received into a buffer of its own pool"
            );
            let info = frame::parse(p.data()).expect("a test frame");
            match first.get(&info.seq) {
                Some(was) => {
                    assert!(
                        was[..] == *p.data(),
                        "frame {} changed on its way back",
                        info.seq
                    );
                    second += 1;
                }
                None => {
                    first.insert(info.seq, p.data().to_vec());
                    pending.push(p);
                }
            }
        }
        while !pending.is_empty() {
            devs[0].queue(0).tx_burst(&mut pending);
        }
    }
    assert!(devs[0].queue(0).flush_tx(Duration::from_secs(5)));
    let tx0 = devs[0].queues()[0].tx_stats();
    assert_eq!(
        tx0.foreign, N,
        "port 0 sent port 1's buffers as they were: {tx0:?}"
    );
    assert_eq!(tx0.tx_errors, 0, "{tx0:?}");
    assert_eq!(
        first.len() as u64,
        N,
        "every frame arrived once, then once more"
    );
    // A port opened alone is another container: it must refuse them.
    let mut alone = Device::open(port(2), &cfg).expect("open port 2");
    assert!(matches!(
        devs[1].check_shares_dma_with(&alone),
        Err(pollnic::Error::DifferentContainers { .. })
    ));
    let mut p = pool1.alloc().expect("a buffer of port 1's pool");
    p.set_len(60).unwrap();
    let before = alone.queues()[0].tx_stats().tx_errors;
    assert_eq!(alone.queue(0).tx_burst(&mut vec![p]), 1);
    assert_eq!(
        alone.queues()[0].tx_stats().tx_errors,
        before + 1,
        "refused, not sent with a foreign IOVA"
    );
    drop(alone);
    drop(devs);
    assert_eq!(
        pool1.free_count() as u32,
        pool1.capacity(),
        "every buffer of port 1's pool is back on its free list"
    );
    assert_eq!(
        pool1.references(),
        1,
        "only this handle still refers to the pool"
    );
}
