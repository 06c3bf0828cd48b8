//! capture: receive on one pollnic port, from every RX queue, into a pcap
//! (or pcapng) file with nanosecond timestamps that tcpdump and Wireshark read.
//!
//! ```text
//! capture --port 0000:00:0a.0 --out rx.pcap --count 1000
//! capture --port 0000:00:0a.0 --out rx.pcapng --seconds 10 --queues 2 --cores 0,1 --snaplen 128
//! ```
//!
//! The port is opened promiscuous (RCTL.UPE | RCTL.MPE). Each queue runs on
//! its own pinned core and hands copies of its frames (at most `--snaplen`
//! bytes, stamped with CLOCK_REALTIME when its burst was read) to the writer,
//! which is the main thread. The file appears under its name only once it is
//! complete (see `pollnic_tools::pcapout`); on an error nothing is left behind.

use clap::Parser;
use pollnic::run_pinned;
use pollnic::{Device, DeviceConfig, Packet, Queue};
use pollnic_tools::args::Usage;
use pollnic_tools::pcapout::{Format, PcapOut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

#[derive(Parser, Debug)]
#[command(
    about = "Receive on one pollnic port (every queue) into a pcap/pcapng file with nanosecond timestamps"
)]
struct Args {
    /// PCI address of the port (bound to vfio-pci).
    #[arg(long, value_name = "ADDR")]
    port: pollnic::pci::PciAddress,
    /// Output file: pcap (nanosecond), or pcapng when the name ends in .pcapng.
    #[arg(long)]
    out: std::path::PathBuf,
    /// Stop after this many frames (0 = no limit). [range: 0..=18446744073709551615]
    #[arg(value_parser = clap::value_parser!(u64).range(0..), long, default_value_t = 0)]
    count: u64,
    /// Stop after this many seconds (0 = until --count or Ctrl-C). [range: 0..=31536000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=31536000), long, default_value_t = 0)]
    seconds: u64,
    /// Bytes kept of each frame (1..=262144); the full length is recorded too. [range: 1..=262144]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=262144), long, default_value_t = 65535)]
    snaplen: u32,
    /// RX queues, spread by RSS (receive-side scaling: the NIC spreads flows
    /// over its RX queues by a hash of their addresses and ports). [range: 1..=16]
    #[arg(value_parser = clap::value_parser!(u16).range(1..=16), long, default_value_t = 1)]
    queues: u16,
    /// Cores for the queue threads, e.g. `0,1` (queue i on the i-th, wrapping).
    #[arg(long, default_value = "0")]
    cores: String,
    /// Descriptors in each RX ring (a power of two, 32..=4096). [range: 32..=4096]
    #[arg(value_parser = clap::value_parser!(u32).range(32..=4096), long, default_value_t = 1024)]
    ring_size: u32,
    /// MTU of the port in bytes (L3 payload, as Linux; 1500..=9000): frames
    /// longer than MTU + 18 bytes (4 more with a VLAN tag) are dropped by the NIC. [range: 1500..=9000]
    #[arg(value_parser = clap::value_parser!(u32).range(1500..=9000), long, default_value_t = 1500)]
    mtu: u32,
    /// One JSON object per second and a summary object, instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    dma: pollnic_tools::args::DmaArgs,
}

/// One received frame on its way to the file.
struct Frame {
    ts: Duration,
    data: Vec<u8>,
    len: usize,
    /// What the NIC reported (checksum status, stripped tag), as the
    /// pcapng packet comment.
    status: String,
}

/// The NIC's RX status of `p` as a pcapng comment:
/// `checksum ip=good l4=not-checked` and, when it stripped one, `vlan=100`.
fn status_comment(p: &Packet) -> String {
    use pollnic::offload::ChecksumStatus;
    let word = |c: ChecksumStatus| match c {
        ChecksumStatus::Good => "good",
        ChecksumStatus::Bad => "bad",
        _ => "not-checked",
    };
    let c = p.rx_checksum();
    let mut s = format!("pollnic: checksum ip={} l4={}", word(c.ip), word(c.l4));
    if let Some(tci) = p.vlan() {
        s.push_str(&format!(" vlan={} (stripped)", tci & 0x0fff));
    }
    s
}

/// What one queue saw.
#[derive(Default, Clone, Copy)]
struct QueueReport {
    frames: u64,
    bytes: u64,
    /// Frames received but not written: past `--count`, or drained after
    /// the stop (Ctrl-C, `--seconds`, `--count` reached).
    after: u64,
    /// When the first and the last written frame arrived.
    first_last: Option<(Instant, Instant)>,
}

fn main() {
    let result = run(pollnic_tools::args::parse("capture"));
    // The devices are closed by now; a panicked thread wins over any error.
    pollnic_tools::signal::exit_if_panicked("capture");
    if let Err(e) = result {
        pollnic_tools::args::exit_with("capture", &*e);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let cores = pollnic_tools::args::cores("--cores", &args.cores)?;
    pollnic_tools::check_ring_size_arg(args.ring_size).map_err(Usage)?;
    pollnic_tools::gen::check_mtu(args.mtu).map_err(Usage)?;
    // The file first: an unwritable path fails before the NIC is touched.
    let mut out = PcapOut::create(&args.out, Format::for_path(&args.out), args.snaplen)?;
    let stop = pollnic_tools::signal::stop_flag()?;
    let cfg = args
        .dma
        .apply("capture", DeviceConfig::default())
        .with_rx_ring_size(args.ring_size)
        .with_tx_ring_size(32)
        .with_mempool_size((args.ring_size * 3 + 2048).max(4096))
        .with_queues(args.queues)
        .with_promisc(true)
        // Checksum status where the port offers it (virtio-net refuses it).
        .with_rx_checksum(pollnic_tools::offers_rx_checksum(args.port))
        .with_mtu(args.mtu);
    let mut dev = Device::open(args.port.to_string(), &cfg)?;
    pollnic_tools::signal::stop_on_removal(&dev)?;
    if !args.json {
        println!(
            "pollnic capture: {} ({}), {} queue(s) on cores {:?}, to {} ({}), {}, {}, snaplen {}; capturing",
            dev.addr(),
            dev.mac_string(),
            args.queues,
            cores,
            args.out.display(),
            match Format::for_path(&args.out) {
                Format::Pcap => "pcap, ns timestamps",
                Format::PcapNg => "pcapng, ns timestamps",
            },
            if args.count == 0 { "no count limit".to_string() } else { format!("{} frames", args.count) },
            if args.seconds == 0 { "no time limit".to_string() } else { format!("{} s", args.seconds) },
            args.snaplen
        );
    } else {
        println!(
            "{}",
            serde_json::json!({"type": "start", "port": dev.addr().to_string(), "queues": args.queues, "out": args.out.display().to_string()})
        );
    }
    let t0 = Instant::now();
    let deadline = (args.seconds > 0)
        .then(|| t0.checked_add(Duration::from_secs(args.seconds)))
        .flatten();
    let claimed = AtomicU64::new(0); // frames taken towards --count
    let done = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(u16, Frame)>();
    let snap = args.snaplen as usize;
    let counters = dev.counters();
    let mut write_err = None;
    let mut per_queue = vec![QueueReport::default(); args.queues as usize];
    let stopping = AtomicBool::new(false);
    let results = run_pinned(
        &mut dev,
        &cores,
        pollnic::RxMode::BusyPoll,
        |q| {
            let r = receive(
                q, &tx, snap, args.count, &claimed, deadline, &stop, &stopping,
            );
            done.fetch_add(1, Relaxed);
            r
        },
        || {
            // The writer: drain frames into the file, a line per second.
            let mut next = t0 + Duration::from_secs(1);
            let mut last: Vec<u64> = vec![0; counters.len()];
            let mut last_written = 0u64;
            let mut tick = 0u64;
            loop {
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok((q, f)) => {
                        if write_err.is_none() {
                            if let Err(e) = out.write_commented(f.ts, &f.data, Some(&f.status)) {
                                write_err = Some(e);
                                stopping.store(true, Relaxed);
                            }
                        }
                        let r = &mut per_queue[q as usize];
                        r.frames += 1;
                        r.bytes += f.len as u64;
                    }
                    Err(_) if done.load(Relaxed) == counters.len() => {
                        // Every queue has returned; take what is still queued.
                        while let Ok((q, f)) = rx.try_recv() {
                            if write_err.is_none() {
                                if let Err(e) = out.write_commented(f.ts, &f.data, Some(&f.status))
                                {
                                    write_err = Some(e);
                                }
                            }
                            per_queue[q as usize].frames += 1;
                            per_queue[q as usize].bytes += f.len as u64;
                        }
                        return;
                    }
                    Err(_) => {}
                }
                if Instant::now() >= next {
                    tick += 1;
                    next += Duration::from_secs(1);
                    let snaps: Vec<u64> =
                        counters.iter().map(|c| c.snapshot().rx_packets).collect();
                    let d: Vec<u64> = snaps.iter().zip(&last).map(|(a, b)| a - b).collect();
                    let total: u64 = d.iter().sum();
                    let written = out.frames() - last_written;
                    last_written = out.frames();
                    if args.json {
                        println!(
                            "{}",
                            serde_json::json!({"type": "second", "second": tick, "rx_pps": total, "written": written, "per_queue_pps": d})
                        );
                    } else {
                        let shares: Vec<String> = d
                            .iter()
                            .enumerate()
                            .map(|(i, x)| {
                                format!(
                                    "q{i} {x} ({:.0} %)",
                                    if total > 0 {
                                        *x as f64 * 100.0 / total as f64
                                    } else {
                                        0.0
                                    }
                                )
                            })
                            .collect();
                        println!(
                            "[{tick:>3} s] rx {total} pps, written {written} | {}",
                            shares.join(" ")
                        );
                    }
                    last = snaps;
                }
            }
        },
    )?;
    let elapsed = t0.elapsed();
    let after: u64 = results.iter().map(|r| r.after).sum();
    let first = results
        .iter()
        .filter_map(|r| r.first_last.map(|f| f.0))
        .min();
    let last = results
        .iter()
        .filter_map(|r| r.first_last.map(|f| f.1))
        .max();
    let span = first.zip(last).map_or(Duration::ZERO, |(a, b)| b - a);
    drop(results);
    let stats = dev.stats().clone();
    // Every queue's: each ring counts its own.
    let rx_nombuf: u64 = dev.queues().iter().map(|q| q.rx_stats().rx_nombuf).sum();
    if let Some(e) = write_err {
        // `out` is dropped unfinished: its temporary file is removed.
        return Err(e.into());
    }
    let frames = out.frames();
    let path = out.finish()?;
    let total: u64 = per_queue.iter().map(|q| q.frames).sum();
    let bytes: u64 = per_queue.iter().map(|q| q.bytes).sum();
    let t = pollnic_tools::metrics::Throughput {
        packets: total,
        bytes,
        elapsed: span,
    };
    let rx_hw = stats.get("rx_packets").unwrap_or(0);
    let refused = pollnic_tools::refused::refused(|n| stats.get(n));
    // Drops this port cannot count (virtio-net; QEMU's igb for frames over
    // the MTU): named, so that refused frames do not vanish without a word.
    let uncounted = pollnic_tools::refused::uncounted(
        |n| stats.get(n),
        pollnic_tools::refused::emulated_by_qemu(&dev.addr().to_string()),
    );
    if args.json {
        let refused: serde_json::Map<String, serde_json::Value> = refused
            .iter()
            .map(|r| (r.counter.to_string(), r.count.into()))
            .collect();
        let queues: Vec<_> = per_queue
            .iter()
            .enumerate()
            .map(|(i, q)| serde_json::json!({"queue": i, "frames": q.frames, "share": if total > 0 { q.frames as f64 / total as f64 } else { 0.0 }}))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "type": "summary", "port": dev.addr().to_string(), "file": path.display().to_string(),
                "frames": frames, "bytes": bytes, "seconds": elapsed.as_secs_f64(),
                "rx_pps": t.measurable().then(|| t.pps()), "rx_mbps_l2": t.measurable().then(|| t.payload_mbps()),
                "rx_mbps_l1": t.measurable().then(|| t.l1_mbps()), "rate_seconds": span.as_secs_f64(),
                "after_stop": after,
                "rx_packets_counter": rx_hw, "rx_nombuf": rx_nombuf,
                "icr_rxo_events": stats.rx_overrun_reads(), "queues": queues,
                "refused": refused,
                "uncounted": uncounted.iter().map(|u| u.what).collect::<Vec<_>>(),
                "interrupted": stop.load(Relaxed),
            })
        );
    } else {
        if let Some(line) = pollnic_tools::signal::interrupted_line("the device was") {
            println!("{line}");
        }
        println!("--- summary ---");
        println!("written    {frames} frames to {}", path.display());
        println!(
            "received   {total} frames, {bytes} bytes in a run of {:.2} s; rate {} (rx_packets counter: {rx_hw})",
            elapsed.as_secs_f64(),
            t.summary()
        );
        println!("after stop {after} frames arrived after the stop or beyond --count, not written");
        if total + after != rx_hw {
            println!(
                "           written + after the stop = {}, the port's rx_packets = {rx_hw}: {}",
                total + after,
                if rx_hw > total + after {
                    "frames still arriving when the drain ended (traffic went on), or dropped in the ring"
                } else {
                    "the counter missed frames (it is read every second)"
                }
            );
        }
        for (i, q) in per_queue.iter().enumerate() {
            println!(
                "  queue {i:<3} {:>10} frames ({:.1} %)",
                q.frames,
                if total > 0 {
                    q.frames as f64 * 100.0 / total as f64
                } else {
                    0.0
                }
            );
        }
        println!(
            "drops      rx_nombuf {} (no free buffer in the mempool), RX ring overrun seen \
             (ICR.RXO, a frame found no free descriptor): {}",
            rx_nombuf,
            match stats.rx_overrun_reads() {
                None => "not counted by this port's family",
                Some(n) if n > 0 => "yes",
                Some(_) => "no",
            }
        );
        for r in &refused {
            println!("refused    {} {}: {}", r.count, r.counter, r.meaning);
        }
        for u in &uncounted {
            println!("uncounted  {}: {}", u.what, u.meaning);
        }
    }
    // The kernel asked for the port back: exit REMOVED_EXIT (the device
    // closes on the way out, and the unbind or remove finishes).
    dev.check_removed()?;
    Ok(())
}

/// One queue's loop: copy each frame (up to `snap` bytes) to the writer
/// until `--count` frames are claimed across all queues, the deadline, Ctrl-C,
/// or a write error.
#[allow(clippy::too_many_arguments)]
fn receive(
    q: &mut Queue,
    tx: &mpsc::Sender<(u16, Frame)>,
    snap: usize,
    count: u64,
    claimed: &AtomicU64,
    deadline: Option<Instant>,
    stop: &AtomicBool,
    stopping: &AtomicBool,
) -> QueueReport {
    let tx = tx.clone();
    let id = q.id();
    let mut r = QueueReport::default();
    let mut buf: Vec<Packet> = Vec::with_capacity(32);
    let mut polls = 0u32;
    loop {
        if stop.load(Relaxed)
            || stopping.load(Relaxed)
            || (count > 0 && claimed.load(Relaxed) >= count)
        {
            break;
        }
        polls = polls.wrapping_add(1);
        if polls % 1024 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if q.rx_burst(&mut buf, 32) == 0 {
            std::hint::spin_loop();
            continue;
        }
        let now = Instant::now();
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        for p in &buf {
            if count > 0 && claimed.fetch_add(1, Relaxed) >= count {
                r.after += 1; // past --count: received, not written
                continue;
            }
            let data = p.data();
            r.frames += 1;
            r.bytes += data.len() as u64;
            r.first_last = Some((r.first_last.map_or(now, |f| f.0), now));
            let _ = tx.send((
                id,
                Frame {
                    ts,
                    data: data[..data.len().min(snap)].to_vec(),
                    len: data.len(),
                    status: status_comment(p),
                },
            ));
        }
        q.free_bulk(&mut buf);
    }
    // What the NIC still hands up after the stop is counted, not written, so
    // that written + after the stop adds up to what the port received: drain
    // until the queue has been quiet for 200 ms (at most 2 s). Not when the
    // kernel wants the device back: its unbind waits for the close.
    let (start, mut quiet) = (Instant::now(), Instant::now());
    while !q.is_removed()
        && quiet.elapsed() < Duration::from_millis(200)
        && start.elapsed() < Duration::from_secs(2)
    {
        let n = q.rx_burst(&mut buf, 32);
        if n > 0 {
            r.after += n as u64;
            q.free_bulk(&mut buf);
            quiet = Instant::now();
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    r
}
