//! The transmit rows (`tx-*`): the path under test sends on port 1 (the
//! port the receive rows rebind between vfio-pci and igb) from a thread or
//! kernel thread pinned to the first of `--cores`, a counted vCPU, at the
//! asked rate; pollnic on port 0 (the generator's port, on `--gen-core`,
//! left out of the counts) receives and counts what arrived. The counts are
//! then per **sent** packet (docs/design/counting.md, "Transmit rows").
//!
//! - `tx-pollnic`: pollnic's generator loop (the one every receive row is fed
//!   by) on port 1; on a virtio-net port with in-order completion off, and
//!   `tx-pollnic-inorder` with it on (`VIRTIO_F_IN_ORDER`);
//! - `tx-kernel-pktgen`: the kernel's `pktgen` module, its per-CPU thread
//!   `kpktgend_N` on the sending core, paced by its own `ratep`;
//! - `tx-kernel-afpacket`: an AF_PACKET raw socket, `sendmmsg(2)` of up to
//!   32 frames per call (no TX ring), paced in user space;
//! - `tx-kernel-afxdp`: an AF_XDP socket's TX ring (libxdp, zero-copy when
//!   the kernel's igb gives it), paced in user space.
//!
//! The kernel rows set port 1 to one queue pair and pin the interface's IRQs
//! to the sending core (restored after), so the TX completions run on the
//! counted vCPU that sent.

use crate::gen::{Offered, GEN_CORE, MAX_LAG};
use crate::knobs::Knobs;
use crate::paths::{kernel_iface, wait_carrier, Load, Measured, DRAIN};
use crate::tally::Tally;
use pollnic::clock::monotonic_ns;
use pollnic::pci::PciAddress;
use pollnic::{Device, Packet};
use pollnic_tools::frame::{self, Flow};
use pollnic_tools::marker;
use pollnic_tools::metrics::PollGaps;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The transmit rows (`--paths`, never by default).
pub const TX_PATHS: [&str; 5] = [
    "tx-pollnic",
    "tx-pollnic-inorder",
    "tx-kernel-pktgen",
    "tx-kernel-afpacket",
    "tx-kernel-afxdp",
];

/// A transmit row's fields as a transmit row reads them: the left-out
/// vCPU is the receiver's, so the `gen_*` figures are not given; nothing
/// polls, so there are no empty polls; the marked regions are sending turns.
pub fn adjust(r: &mut crate::report::Row) {
    r.gen_instructions_per_sent = None;
    r.gen_work_instructions_per_sent = None;
    r.empty_polls_per_packet = None;
    r.bursts_per_packet = None;
    if let Some(rest) = r.work_method.strip_prefix("marked: ") {
        let turns = rest.split_whitespace().next().unwrap_or("?");
        r.work_method = format!(
            "marked: {turns} sending turns (frames written and the send call, with the kernel work it does before returning), pacing loop left out; per sent packet"
        );
    } else if !r.work_method.is_empty() {
        r.work_method = format!("{}; per sent packet", r.work_method);
    }
}

/// `pktgen`'s payload magic (`PKTGEN_MAGIC`, net/core/pktgen.c), first in its UDP payload.
const PKTGEN_MAGIC: u32 = 0xbe9b_e955;

/// What a sender did.
struct Sent {
    sent: u64,
    elapsed: Duration,
    skipped: u64,
    /// The sending port's own TX count over the row, when it has one.
    tx_packets: Option<u64>,
    note: String,
}

/// One transmit row: `path`, sent from `cores[0]`.
pub fn measure(
    path: &str,
    load: Load<'_>,
    port1: PciAddress,
    cores: &[usize],
) -> Result<Measured, String> {
    let core = *cores.first().unwrap_or(&0);
    match path {
        "tx-pollnic" => pollnic_tx(load, port1, core, false),
        "tx-pollnic-inorder" => pollnic_tx(load, port1, core, true),
        "tx-kernel-pktgen" => pktgen_tx(load, port1, core),
        "tx-kernel-afpacket" => afpacket_tx(load, port1, core),
        "tx-kernel-afxdp" => afxdp_tx(load, port1, core),
        other => Err(format!("unknown transmit path `{other}`")),
    }
}

/// The flows of the receive rows turned around: from port 1's MAC to port 0's.
fn back_flows(flows: &[Flow]) -> Vec<Flow> {
    flows
        .iter()
        .map(|f| Flow {
            src_mac: f.dst_mac,
            dst_mac: f.src_mac,
            ..*f
        })
        .collect()
}

/// Whether `data` is a frame of the kernel's pktgen: IPv4/UDP whose payload
/// starts with [`PKTGEN_MAGIC`].
fn is_pktgen(data: &[u8]) -> bool {
    if data.len() < 14 + 20 + 8 + 4 || data[12..14] != [0x08, 0x00] || data[14 + 9] != 17 {
        return false;
    }
    let ihl = (data[14] & 0x0f) as usize * 4;
    let p = 14 + ihl + 8;
    data.len() >= p + 4
        && u32::from_be_bytes([data[p], data[p + 1], data[p + 2], data[p + 3]]) == PKTGEN_MAGIC
}

/// Run `f` on a thread pinned to `core` and return its result.
fn on_core<R: Send>(core: usize, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        s.spawn(|| {
            if core != usize::MAX && !pollnic_tools::cores::pin_current_thread(core) {
                eprintln!("compare: could not pin a thread to core {core}");
            }
            f()
        })
        .join()
        .expect("pinned thread panicked")
    })
}

/// The harness of every transmit row: port 0 (`load.gen`, pollnic) receives
/// on the generator's core from before the window until [`DRAIN`] after it;
/// the counted window runs from just before `send` (on `core`) starts to
/// [`crate::cost::TAIL`] after it returns. Frames counted: port 1's test
/// frames stamped from now on (with latency), or pktgen's frames.
/// `marked`: the sender marks its sending turns (then its work figure is
/// those turns, [`crate::cost`]).
fn tx_row(
    load: Load<'_>,
    core: usize,
    marked: bool,
    mode: String,
    send: impl FnOnce() -> Result<Sent, String> + Send,
) -> Result<Measured, String> {
    let gen_core = GEN_CORE.load(Relaxed);
    let port0: &mut Device = load.gen;
    let port1_mac = load.flows[0].dst_mac;
    let (ready, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let t0 = monotonic_ns();
    let (sent, window, tally, other) = std::thread::scope(|s| {
        let rx = s.spawn(|| {
            if gen_core != usize::MAX {
                pollnic_tools::cores::pin_current_thread(gen_core);
            }
            let mut t = Tally::default();
            let mut other = 0u64;
            let mut gaps = PollGaps::default();
            let mut buf: Vec<Packet> = Vec::with_capacity(32);
            // Whatever an earlier row left in the ring is not this row's.
            while port0.queue(0).rx_burst(&mut buf, 32) > 0 {
                port0.queue(0).free_bulk(&mut buf);
            }
            ready.store(true, Relaxed);
            while !done.load(Relaxed) {
                let n = port0.queue(0).rx_burst(&mut buf, 32);
                let Some(now) = gaps.poll(n) else { continue };
                if n == 0 {
                    continue;
                }
                for p in &buf {
                    let d = p.data();
                    match frame::parse(d) {
                        Some(i) if i.flow.src_mac == port1_mac && i.tx_ns >= t0 => {
                            t.frame(p.len(), i.tx_ns, now)
                        }
                        Some(_) => other += 1,
                        None if d.len() >= 12 && d[6..12] == port1_mac && is_pktgen(d) => {
                            t.received += 1;
                            t.bytes += p.len() as u64;
                            t.first_last = Some(match t.first_last {
                                Some((a, _)) => (a, now),
                                None => (now, now),
                            });
                        }
                        None => other += 1,
                    }
                }
                port0.queue(0).free_bulk(&mut buf);
            }
            t.gaps = Some(gaps);
            (t, other)
        });
        while !ready.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if marked {
            crate::cost::start_reporting();
        }
        let meter = on_core(gen_core, || {
            crate::cost::Meter::new().map(|mut m| {
                m.begin();
                m
            })
        });
        let sent = on_core(core, send);
        std::thread::sleep(crate::cost::TAIL);
        let window = on_core(gen_core, || {
            meter.and_then(|m| m.end((gen_core != usize::MAX).then_some(gen_core)))
        });
        crate::cost::stop_reporting();
        std::thread::sleep(DRAIN);
        done.store(true, Relaxed);
        let (tally, other) = rx.join().expect("receiver thread panicked");
        (sent, window, tally, other)
    });
    let sent = sent?;
    let mut tally = tally;
    // The receiver's CPU is not the path's: leave the CPU column empty.
    tally.cpu_ns = 0;
    Ok(Measured {
        offered: Offered {
            sent: sent.sent,
            elapsed: sent.elapsed,
            skipped: sent.skipped,
            tx_packets: sent.tx_packets.unwrap_or(sent.sent),
            window,
            pmu: None,
            window_frames: None,
            fill_work: Vec::new(),
        },
        tally,
        note: format!(
            "sent from core {core}, received by pollnic on port 0 (core {gen_core}, not counted); {}{}",
            sent.note,
            if other > 0 {
                format!("; {other} other frames on port 0 not counted")
            } else {
                String::new()
            }
        ),
        mode,
        fwd: None,
        wakeups: None,
        irq_state: None,
        virtio_rx_path: None,
    })
}

/// The pacing of the user-space senders, the schedule of the generator
/// (`gen.rs`): frame `k` is due at `origin + k × gap`; a turn sends what is
/// due, at most 32; a sender more than [`MAX_LAG`] behind restarts the
/// schedule and counts the skipped slots. Each turn that sends is marked
/// for the counter (`marker`); `turn(n)` sends up to `n` frames and returns
/// how many the path took. Returns (sent, elapsed, skipped, turns refused).
fn paced(
    rate: u64,
    secs: f64,
    stop: &AtomicBool,
    mut turn: impl FnMut(usize) -> usize,
) -> (u64, Duration, u64, u64) {
    let gap = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let (mut origin, mut origin_seq, mut skipped, mut seq, mut refused) =
        (t0, 0u64, 0u64, 0u64, 0u64);
    loop {
        let now = Instant::now();
        if now >= end || stop.load(Relaxed) {
            break;
        }
        let mut due = origin_seq
            + (now.saturating_duration_since(origin).as_nanos() / gap.as_nanos().max(1)) as u64
            + 1;
        if due > seq + MAX_LAG {
            skipped += due - seq - 1;
            (origin, origin_seq) = (now, seq);
            due = seq + 1;
        }
        let want = due.saturating_sub(seq).min(32) as usize;
        if want == 0 {
            std::hint::spin_loop();
            continue;
        }
        marker::begin();
        let n = turn(want);
        if n == 0 {
            marker::discard();
            refused += 1;
            continue;
        }
        marker::commit();
        seq += n as u64;
    }
    (seq, t0.elapsed(), skipped, refused)
}

/// `/sys/class/net/<if>/statistics/tx_packets`.
fn if_tx_packets(ifname: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/statistics/tx_packets"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Port 1 for a kernel transmit row: the kernel's igb, one queue pair, every
/// IRQ of the interface on `core`. Returns the interface, its index and the knobs.
fn kernel_tx_port(port1: PciAddress, core: usize) -> Result<(String, u32, Knobs), String> {
    let (ifname, ifindex) = kernel_iface(port1)?;
    let mut knobs = Knobs::default();
    knobs.combined(&ifname, 1)?;
    wait_carrier(&ifname, Duration::from_secs(10))?;
    for (irq, name) in iface_irqs(&ifname)? {
        knobs.irq_affinity(irq, &name, &core.to_string())?;
    }
    Ok((ifname, ifindex, knobs))
}

/// Every IRQ of `ifname` in /proc/interrupts (`<if>`, `<if>-tx-0`,
/// `<if>-rx-0`, `<if>-TxRx-0`, ...): (number, name).
fn iface_irqs(ifname: &str) -> Result<Vec<(u32, String)>, String> {
    let text = std::fs::read_to_string("/proc/interrupts")
        .map_err(|e| format!("reading /proc/interrupts: {e}"))?;
    let irqs: Vec<(u32, String)> = text
        .lines()
        .filter_map(|l| {
            let (num, _) = l.trim_start().split_once(':')?;
            let num: u32 = num.trim().parse().ok()?;
            let name = l.split_whitespace().last()?;
            (name == ifname || name.starts_with(&format!("{ifname}-")))
                .then(|| (num, name.to_owned()))
        })
        .collect();
    if irqs.is_empty() {
        return Err(format!("{ifname}: no IRQ of it in /proc/interrupts"));
    }
    Ok(irqs)
}

/// Put the knobs back and say so (a knob that did not come back is in the note).
fn finish_knobs(knobs: Knobs) -> String {
    let set = knobs.describe();
    let restored = knobs.restore().unwrap_or_else(|e| e);
    format!("knobs: {set}; {restored}")
}

/// pollnic's generator loop on port 1 (vfio-pci): the same code that feeds
/// every receive row, marked by its sending turns. On a virtio-net port,
/// `in_order` turns `VIRTIO_F_IN_ORDER` on (`tx-pollnic-inorder`; the
/// transmit queue then frees a run of chains from one used entry) or off
/// (`tx-pollnic`, as before the feature); on igb only `tx-pollnic` runs.
fn pollnic_tx(
    load: Load<'_>,
    port1: PciAddress,
    core: usize,
    in_order: bool,
) -> Result<Measured, String> {
    let mut cfg = crate::paths::base_config();
    if crate::paths::is_virtio(port1) {
        cfg = cfg.with_virtq_in_order(in_order);
    } else if in_order {
        return Err(format!(
            "tx-pollnic-inorder needs a virtio-net sender (in-order completion is virtio's; {port1} has descriptor rings): pass --family virtio to cargo xtask compare"
        ));
    }
    crate::paths::ensure_vfio(port1)?;
    let mut dev = Device::open(port1, &cfg).map_err(|e| e.to_string())?;
    let flows = back_flows(load.flows);
    let (size, rate, secs, stop) = (load.size, load.rate, load.secs, load.stop);
    let dev_ref = &mut dev;
    tx_row(load, core, true, "busy-poll TX".into(), move || {
        let o = crate::gen::send(
            dev_ref,
            &flows,
            size,
            rate,
            secs,
            stop,
            crate::gen::Limit::Time,
            |_| {},
        );
        Ok(Sent {
            sent: o.sent,
            elapsed: o.elapsed,
            skipped: o.skipped,
            tx_packets: Some(o.tx_packets),
            note: "pollnic generator loop, bursts of up to 32, TX ring 512".into(),
        })
    })
}

/// The kernel igb and an AF_PACKET raw socket: `sendmmsg(2)` of the frames
/// due, up to 32 per call, through the qdisc.
fn afpacket_tx(load: Load<'_>, port1: PciAddress, core: usize) -> Result<Measured, String> {
    let (ifname, ifindex, knobs) = kernel_tx_port(port1, core)?;
    let sock = crate::sock::RawTx::open(ifindex).map_err(|e| format!("{ifname}: {e}"))?;
    let flows = back_flows(load.flows);
    let (size, rate, secs, stop) = (load.size, load.rate, load.secs, load.stop);
    let tx0 = if_tx_packets(&ifname);
    let name = ifname.clone();
    let m = tx_row(load, core, true, "sendmmsg, qdisc".into(), move || {
        let mut bufs: Vec<Vec<u8>> = (0..32).map(|_| vec![0u8; size - 4]).collect();
        let mut seq = 0u64;
        let (sent, elapsed, skipped, refused) = paced(rate, secs, stop, |n| {
            let now = monotonic_ns();
            for (k, b) in bufs[..n].iter_mut().enumerate() {
                let s = seq + k as u64;
                frame::write(b, &flows[(s % flows.len() as u64) as usize], s, now);
            }
            let took = sock.send_batch(&mut bufs[..n]);
            seq += took as u64;
            took
        });
        std::thread::sleep(Duration::from_millis(100));
        Ok(Sent {
            sent,
            elapsed,
            skipped,
            tx_packets: Some(if_tx_packets(&name) - tx0),
            note: format!(
                "AF_PACKET SOCK_RAW, sendmmsg of up to 32 frames per call through the qdisc (no TX ring), paced in user space; {refused} calls took no frame"
            ),
        })
    });
    let knobs = finish_knobs(knobs);
    let mut m = m?;
    m.note = format!("{ifname}, 1 queue pair; {knobs}; {}", m.note);
    Ok(m)
}

/// The kernel igb and an AF_XDP socket's TX ring on queue 0, zero-copy if
/// the kernel gives it and frames then complete, else copy mode (the note
/// says why).
fn afxdp_tx(load: Load<'_>, port1: PciAddress, core: usize) -> Result<Measured, String> {
    use crate::xsk::XskTx;
    let (ifname, _, knobs) = kernel_tx_port(port1, core)?;
    let mounted = crate::xsk::ensure_bpffs()?;
    let flows = back_flows(load.flows);
    let len = load.size - 4;
    // A probe of 8 frames (payload magic cleared: not test frames) must
    // complete within 3 s of the link coming back after the XDP attach.
    let probe = |xsk: &mut XskTx| -> Result<Duration, String> {
        let t = Instant::now();
        wait_carrier(&ifname, Duration::from_secs(15))?;
        xsk.send(8, len, |f, k| {
            frame::write(f, &flows[k % flows.len()], k as u64, 0);
            f[frame::HEADERS_LEN..frame::HEADERS_LEN + 2].fill(0);
        });
        let left = xsk.flush(Duration::from_secs(3));
        if left > 0 {
            return Err(format!("{left} of 8 probe frames never completed"));
        }
        Ok(t.elapsed())
    };
    let mut why_copy = None;
    let (mut xsk, ready) = match XskTx::open(&ifname, 0, true).and_then(|mut x| {
        let r = probe(&mut x)?;
        Ok((x, r))
    }) {
        Ok(x) => x,
        Err(e) => {
            why_copy = Some(format!("zero-copy: {e}"));
            let mut x = XskTx::open(&ifname, 0, false)?;
            let r = probe(&mut x).map_err(|e| format!("{ifname}: AF_XDP copy mode: {e}"))?;
            (x, r)
        }
    };
    let mode = xsk.mode();
    let (c0, k0) = (xsk.completed, xsk.kicks);
    let (size, rate, secs, stop) = (load.size, load.rate, load.secs, load.stop);
    let tx0 = if_tx_packets(&ifname);
    let name = ifname.clone();
    let xr = &mut xsk;
    let m = tx_row(load, core, true, mode.clone(), move || {
        let mut seq = 0u64;
        let (sent, elapsed, skipped, refused) = paced(rate, secs, stop, |n| {
            let now = monotonic_ns();
            let s0 = seq;
            let took = xr.send(n, size - 4, |f, k| {
                let s = s0 + k as u64;
                frame::write(f, &flows[(s % flows.len() as u64) as usize], s, now);
            });
            seq += took as u64;
            took
        });
        let left = xr.flush(Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(100));
        Ok(Sent {
            sent,
            elapsed,
            skipped,
            tx_packets: Some(if_tx_packets(&name) - tx0),
            note: format!(
                "AF_XDP TX ring {}, frames written into UMEM chunks and kicked with sendto(MSG_DONTWAIT) every turn, paced in user space; {refused} turns found no free chunk or slot; {left} frames not completed after 2 s",
                crate::xsk::XSK_TX_RING
            ),
        })
    });
    let done = (xsk.completed - c0, xsk.kicks.0 - k0.0, xsk.kicks.1 - k0.1);
    drop(xsk);
    let knobs = finish_knobs(knobs);
    let mut m = m?;
    m.note = format!(
        "{ifname} queue 0 of 1, {mode}{}; TX frames completed {}, kicks {} ({} refused); first frames completed {:.1} s after the attach{}; {knobs}; {}",
        why_copy.map_or(String::new(), |w| format!(" ({w})")),
        done.0,
        done.1,
        done.2,
        ready.as_secs_f64(),
        if mounted { " (mounted bpffs on /sys/fs/bpf)" } else { "" },
        m.note
    );
    Ok(m)
}

/// The unpacked guest kernel's `pktgen.ko*`: under the testbed's kernel
/// tree next to this executable (`target/testbed/kernel/<k>/<release>/lib/modules/<release>`).
fn pktgen_module() -> Result<std::path::PathBuf, String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_err(|e| format!("/proc/sys/kernel/osrelease: {e}"))?;
    let release = release.trim();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/release/examples/compare -> target
    let target = exe
        .ancestors()
        .nth(3)
        .ok_or("no target directory above the executable")?;
    let mut tried = Vec::new();
    for k in ["current", "lts"] {
        let dir = target
            .join("testbed/kernel")
            .join(k)
            .join(release)
            .join("lib/modules")
            .join(release)
            .join("kernel/net/core");
        for f in ["pktgen.ko", "pktgen.ko.xz", "pktgen.ko.zst"] {
            let p = dir.join(f);
            if p.is_file() {
                return Ok(p);
            }
            tried.push(p.display().to_string());
        }
    }
    Err(format!(
        "no pktgen module for kernel {release} (tried {})",
        tried.join(", ")
    ))
}

fn pg_write(file: &str, cmd: &str) -> Result<(), String> {
    std::fs::write(format!("/proc/net/pktgen/{file}"), format!("{cmd}\n"))
        .map_err(|e| format!("echo '{cmd}' > /proc/net/pktgen/{file}: {e}"))
}

/// A `name: value` number from pktgen's device file.
fn pg_field(text: &str, name: &str) -> Option<u64> {
    let at = text.find(name)? + name.len();
    text[at..]
        .trim_start_matches([':', ' '])
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The kernel's pktgen on port 1: `kpktgend_<core>` sends `rate × secs`
/// frames of `size - 4` bytes to port 0's MAC at `ratep <rate>`, one flow,
/// `clone_skb 0` (a new skb per frame, pktgen's default) and `burst 1`.
fn pktgen_tx(load: Load<'_>, port1: PciAddress, core: usize) -> Result<Measured, String> {
    let (ifname, _, knobs) = kernel_tx_port(port1, core)?;
    let mut loaded = String::from("pktgen was loaded");
    if !std::path::Path::new("/proc/net/pktgen/pgctrl").exists() {
        let ko = pktgen_module()?;
        let out = std::process::Command::new("insmod")
            .arg(&ko)
            .output()
            .map_err(|e| format!("insmod {}: {e}", ko.display()))?;
        if !out.status.success() {
            return Err(format!(
                "insmod {}: {}",
                ko.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        loaded = format!("insmod {} (removed after)", ko.display());
    }
    let thread = format!("kpktgend_{core}");
    let (size, rate, secs) = (load.size, load.rate, load.secs);
    let count = ((rate as f64 * secs).round() as u64).max(1);
    let dst_mac = load.flows[0].src_mac;
    let mac = dst_mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    let setup = || -> Result<(), String> {
        pg_write(&thread, "rem_device_all")?;
        pg_write(&thread, &format!("add_device {ifname}"))?;
        for cmd in [
            format!("count {count}"),
            "clone_skb 0".into(),
            "burst 1".into(),
            format!("pkt_size {}", size - 4),
            format!("ratep {rate}"),
            format!("dst_mac {mac}"),
            "dst 198.18.0.1".into(),
            "src_min 198.19.0.1".into(),
            "src_max 198.19.0.1".into(),
            "udp_src_min 9001".into(),
            "udp_src_max 9001".into(),
            "udp_dst_min 9000".into(),
            "udp_dst_max 9000".into(),
        ] {
            pg_write(&ifname, &cmd)?;
        }
        Ok(())
    };
    let m = setup().and_then(|()| {
        let tx0 = if_tx_packets(&ifname);
        let name = ifname.clone();
        tx_row(load, core, false, format!("kernel thread {thread}, ratep"), move || {
            let t = Instant::now();
            // Blocks until every pktgen thread is done.
            pg_write("pgctrl", "start")?;
            let elapsed = t.elapsed();
            let text = std::fs::read_to_string(format!("/proc/net/pktgen/{name}"))
                .map_err(|e| format!("/proc/net/pktgen/{name}: {e}"))?;
            let sofar = pg_field(&text, "pkts-sofar").ok_or("no pkts-sofar in pktgen's file")?;
            let errors = pg_field(&text, "errors").unwrap_or(0);
            let result = text
                .lines()
                .find(|l| l.starts_with("Result:"))
                .unwrap_or("")
                .trim()
                .to_owned();
            std::thread::sleep(Duration::from_millis(100));
            Ok(Sent {
                sent: sofar,
                elapsed,
                skipped: 0,
                tx_packets: Some(if_tx_packets(&name) - tx0),
                note: format!(
                    "pktgen count {count}, ratep {rate}, clone_skb 0, burst 1, one flow; its errors {errors}; {result}"
                ),
            })
        })
    });
    let _ = pg_write(&thread, "rem_device_all");
    let removed = if loaded.starts_with("insmod") {
        match std::process::Command::new("rmmod").arg("pktgen").status() {
            Ok(s) if s.success() => String::new(),
            _ => "; rmmod pktgen FAILED".into(),
        }
    } else {
        String::new()
    };
    let knobs = finish_knobs(knobs);
    let mut m = m?;
    m.note = format!(
        "{ifname}, 1 queue pair; {loaded}{removed}; {knobs}; {}",
        m.note
    );
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pktgen_frames_are_told_apart_by_their_magic() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[42..46].copy_from_slice(&PKTGEN_MAGIC.to_be_bytes());
        assert!(is_pktgen(&f));
        f[42] = 0;
        assert!(!is_pktgen(&f));
        assert!(!is_pktgen(&f[..40]));
    }

    #[test]
    fn pktgen_fields_are_read_from_its_device_file() {
        let text = "Current:\n     pkts-sofar: 40000  errors: 3\n     started: 1us\n";
        assert_eq!(pg_field(text, "pkts-sofar"), Some(40000));
        assert_eq!(pg_field(text, "errors"), Some(3));
        assert_eq!(pg_field(text, "nothing"), None);
    }
}
