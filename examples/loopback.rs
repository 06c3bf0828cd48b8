//! Send test frames on one port and receive them on another, both driven by
//! pollnic: the testbed's main job (`cargo xtask demo`), and the same on real
//! igb NICs wired back to back:
//!
//! ```text
//! loopback --tx 0000:00:08.0 --rx 0000:00:0a.0 --seconds 10 --frame-size 64
//! loopback --tx ... --rx ... --flows 256 --queues 2 --cores 0,1   # RSS, one queue per pinned core
//! ```
//!
//! Prints a live line each second and a summary: frames sent and received,
//! lost, packets/s, payload and L1 Mbit/s, each RX queue's share, and latency
//! percentiles from the send timestamp carried in each frame. Ctrl-C stops it
//! cleanly.

use clap::Parser;
use pollnic::run_pinned;
use pollnic::stats::DeviceCounters;
use pollnic::{Device, DeviceConfig, Packet, Queue};
use pollnic_tools::args::Usage;
use pollnic_tools::frame::{self, Flow};
use pollnic_tools::metrics::{Latency, PollGaps, Throughput, TxAccount};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    about = "Send frames on one pollnic port, receive them on another, report rates, queue shares and latency"
)]
struct Args {
    /// PCI address of the sending port (bound to vfio-pci), e.g. 0000:03:00.0.
    #[arg(long, value_name = "ADDR")]
    tx: pollnic::pci::PciAddress,
    /// PCI address of the receiving port (bound to vfio-pci).
    #[arg(long, value_name = "ADDR")]
    rx: pollnic::pci::PciAddress,
    /// How long to send, in seconds (0 = until Ctrl-C or --count, as fwd's 0). [range: 0..=31536000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=31536000), long, default_value_t = 10)]
    seconds: u64,
    /// Stop after this many frames (0 = no limit). [range: 0..=18446744073709551615]
    #[arg(value_parser = clap::value_parser!(u64).range(0..), long, default_value_t = 0)]
    count: u64,
    /// Frame size on the wire in bytes including the FCS (frame check
    /// sequence: the 4-byte CRC that ends every frame; 64..=1518, up to 9018
    /// with --mtu 9000); 0 = mixed sizes (64..=1518). [range: 0..=9018]
    #[arg(value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=9018), long, default_value_t = 64)]
    frame_size: usize,
    /// MTU of both ports in bytes (L3 payload, as Linux; 1500..=9000): frames
    /// up to MTU + 18 bytes on the wire; 9000 takes 9018-byte frames. [range: 1500..=9000]
    #[arg(value_parser = clap::value_parser!(u32).range(1500..=9000), long, default_value_t = 1500)]
    mtu: u32,
    /// Distinct flows (source address and port vary), for RSS (receive-side
    /// scaling: the receiving NIC spreads flows over its RX queues by a hash
    /// of their addresses and ports). [range: 1..=65536]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=65536), long, default_value_t = 1)]
    flows: u32,
    /// RX queues on the receiving port, spread by RSS. [range: 1..=16]
    #[arg(value_parser = clap::value_parser!(u16).range(1..=16), long, default_value_t = 1)]
    queues: u16,
    /// Cores for the RX queue threads, e.g. `0,1` (queue i runs on the i-th, wrapping).
    #[arg(long, default_value = "0")]
    cores: String,
    /// Use the symmetric RSS key instead of the default one.
    #[arg(long)]
    symmetric: bool,
    /// Frames per burst (1..=512). [range: 1..=512]
    #[arg(value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=512), long, default_value_t = 32)]
    batch: usize,
    /// Offered rate in packets/s (0 = as fast as possible). [range: 0..=1000000000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=1000000000), long, default_value_t = 0)]
    rate: u64,
    /// Descriptors per RX and TX ring (a power of two, 32..=4096); the mempool is sized to fit. [range: 32..=4096]
    #[arg(value_parser = clap::value_parser!(u32).range(32..=4096), long, default_value_t = 512)]
    ring_size: u32,
    /// At exit, print every hardware counter of both ports as `ethtool -S` does.
    #[arg(long)]
    stats: bool,
    /// One JSON object per second and a summary object (one per line), instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    wait: pollnic_tools::args::RxModeArgs,
    #[command(flatten)]
    dma: pollnic_tools::args::DmaArgs,
}

/// What one RX queue saw.
#[derive(Default)]
struct QueueReport {
    lat: Latency,
    received: u64,
    bytes: u64,
    out_of_order: u64,
    bad: u64,
    /// Frames the NIC found with a bad IPv4 or UDP checksum (RX checksum
    /// status is on for the receiving port).
    bad_checksum: u64,
    first_last: Option<(Instant, Instant)>,
    gaps: PollGaps,
    /// Frames still handed up after a signal stopped the run: drained, not
    /// timed or checked, and not lost.
    after_stop: u64,
}

fn main() {
    let result = run(pollnic_tools::args::parse("loopback"));
    // The devices are closed by now; a panicked thread wins over any error.
    pollnic_tools::signal::exit_if_panicked("loopback");
    if let Err(e) = result {
        pollnic_tools::args::exit_with("loopback", &*e);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    pollnic_tools::gen::check_mtu(args.mtu).map_err(Usage)?;
    if args.frame_size != 0 {
        if args.frame_size < 64 {
            return Err(Usage(format!(
                "--frame-size {} is below 64 bytes, the smallest Ethernet frame (0 = mixed sizes)",
                args.frame_size
            ))
            .into());
        }
        pollnic_tools::gen::check_frame_size(args.frame_size, args.mtu, false).map_err(Usage)?;
    }
    let cores = pollnic_tools::args::cores("--cores", &args.cores)?;
    if args.tx == args.rx {
        return Err(Usage(
            "--tx and --rx are the same port: loopback needs two ports cabled back to back".into(),
        )
        .into());
    }
    pollnic_tools::check_ring_size_arg(args.ring_size).map_err(Usage)?;
    let batch = args.batch;
    let stop = pollnic_tools::signal::stop_flag()?;
    // Enough buffers for a full RX ring, a full TX ring and bursts in flight.
    let mempool_size = (2 * args.ring_size + 2048).max(4096);
    let base = args
        .dma
        .apply("loopback", DeviceConfig::default())
        .with_rx_ring_size(args.ring_size)
        .with_tx_ring_size(args.ring_size)
        .with_mempool_size(mempool_size)
        .with_mtu(args.mtu);
    let txd = Device::open(args.tx.to_string(), &base)?;
    // The receiving port reports each frame's checksum status where it
    // offers it (not virtio-net, which refuses the field), and every one
    // must be good (the test frames carry an IPv4 header checksum and no
    // UDP checksum, so the NIC checks the IPv4 one).
    let rx_cfg = base
        .with_rx_checksum(pollnic_tools::offers_rx_checksum(args.rx))
        .with_queues(args.queues)
        .with_moderation(args.wait.moderation())
        .with_rss_key(if args.symmetric {
            pollnic_hw::rss::SYMMETRIC_KEY
        } else {
            pollnic_hw::rss::MICROSOFT_KEY
        });
    let mut rxd = Device::open(args.rx.to_string(), &rx_cfg)?;
    pollnic_tools::signal::stop_on_removal(&txd)?;
    pollnic_tools::signal::stop_on_removal(&rxd)?;
    if args.json {
        pollnic_tools::jsonout::emit(&serde_json::json!({
            "type": "start", "tx_port": txd.addr().to_string(), "rx_port": rxd.addr().to_string(),
            "seconds": args.seconds, "count": args.count, "frame_size": args.frame_size,
            "mtu": args.mtu, "flows": args.flows, "queues": args.queues, "cores": cores, "rate_pps": args.rate,
        }));
    } else {
        println!(
        "pollnic loopback: {} ({}) -> {} ({}), {}, {}{}, {} flow(s), {} RX queue(s) on cores {:?}",
        txd.addr(),
        txd.mac_string(),
        rxd.addr(),
        rxd.mac_string(),
        match (args.seconds, args.count) {
            (0, 0) => "until Ctrl-C".to_string(),
            (0, n) => format!("{n} frames"),
            (s, 0) => format!("{s} s"),
            (s, n) => format!("{n} frames or {s} s, whichever comes first"),
        },
        if args.frame_size == 0 {
            "mixed 64..1518-byte frames".to_string()
        } else {
            format!("{}-byte frames", args.frame_size)
        },
        if args.mtu == 1500 {
            String::new()
        } else {
            format!(" at MTU {}", args.mtu)
        },
        args.flows,
        args.queues,
        cores
    );
    }

    let tx_live = Arc::new(AtomicU64::new(0));
    let tx_done = Arc::new(AtomicBool::new(false));
    // Receive threads that have polled once: the sender waits for all of
    // them, so the first frames do not meet a ring nobody polls yet (under
    // QEMU/TCG a receive thread's first poll came up to ~135 ms late).
    let rx_polled = Arc::new(AtomicUsize::new(0));
    let flows: Vec<Flow> = (0..args.flows)
        .map(|i| Flow::nth(txd.mac(), rxd.mac(), i))
        .collect();
    let sender = {
        let (tx_live, tx_done, stop) = (tx_live.clone(), tx_done.clone(), stop.clone());
        let (seconds, count, frame_size, rate) =
            (args.seconds, args.count, args.frame_size, args.rate);
        let (rx_polled, queues) = (rx_polled.clone(), args.queues as usize);
        std::thread::spawn(move || {
            // The receivers and the reporter wait for this flag: set it even
            // if the sender panics.
            struct Done(Arc<AtomicBool>);
            impl Drop for Done {
                fn drop(&mut self) {
                    self.0.store(true, Relaxed);
                }
            }
            let _done = Done(tx_done.clone());
            while rx_polled.load(Relaxed) < queues && !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_micros(200));
            }
            let r = send(
                txd,
                &flows,
                // --seconds counts from here, once the receivers poll.
                Instant::now(),
                seconds,
                count,
                frame_size,
                rate,
                batch,
                &tx_live,
                &stop,
            );
            tx_done.store(true, Relaxed);
            r
        })
    };

    let counters = rxd.counters();
    let reports = run_pinned(
        &mut rxd,
        &cores,
        args.wait.mode(),
        |q| receive(q, &stop, &tx_done, &rx_polled, batch),
        || report_every_second(&tx_live, &counters, &tx_done, &stop, args.json),
    )?;
    let (txd, sent, tx_elapsed) = sender.join().map_err(|_| "sender thread panicked")??;

    let tx_hw = txd.stats().get("tx_packets").unwrap_or(0);
    let rx_stats = rxd.stats();
    let rx_hw = rx_stats.get("rx_packets").unwrap_or(0);
    // `None`: the port's family has no overrun bit (virtio-net).
    let rx_overrun_counted = rx_stats.rx_overrun_reads();
    let rx_overrun = rx_overrun_counted.is_some_and(|n| n > 0);
    // The receiving port's nonzero drop and error counters, named.
    let refused = pollnic_tools::refused::refused(|n| rx_stats.get(n));
    // The drops it cannot count (virtio-net; QEMU's igb for oversize frames).
    let uncounted = pollnic_tools::refused::uncounted(
        |n| rx_stats.get(n),
        pollnic_tools::refused::emulated_by_qemu(&rxd.addr().to_string()),
    );
    let received: u64 = reports.iter().map(|r| r.received).sum();
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let first = reports
        .iter()
        .filter_map(|r| r.first_last.map(|f| f.0))
        .min();
    let last = reports
        .iter()
        .filter_map(|r| r.first_last.map(|f| f.1))
        .max();
    let rx_span = first.zip(last).map(|(a, b)| b - a).unwrap_or_default();
    let mut lat = Latency::default();
    for r in &reports {
        lat.merge(&r.lat);
    }
    let after_stop: u64 = reports.iter().map(|r| r.after_stop).sum();
    let lost = sent.saturating_sub(received + after_stop);
    let account = TxAccount {
        handed: sent,
        tx_packets: tx_hw,
        received: Some(received + after_stop),
    };
    if args.json {
        let mut gaps = PollGaps::default();
        for r in &reports {
            gaps.merge(&r.gaps);
        }
        let per_queue: Vec<u64> = reports.iter().map(|r| r.received).collect();
        let shares = pollnic_tools::jsonout::shares(&per_queue);
        let queues: Vec<_> = reports
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let s = counters[i].snapshot();
                serde_json::json!({
                    "queue": i, "frames": r.received, "share": shares[i],
                    "rx_bursts": s.rx_bursts, "rx_empty_polls": s.rx_empty_polls,
                    "rx_nombuf": s.rx_nombuf, "rx_errors": s.rx_errors,
                    "max_poll_gap_ns": r.gaps.max_ns,
                })
            })
            .collect();
        pollnic_tools::jsonout::emit(&serde_json::json!({
            "type": "summary",
            "interrupted": stop.load(Relaxed),
            "sent": sent,
            "tx_seconds": tx_elapsed.as_secs_f64(),
            "offered_pps": sent as f64 / tx_elapsed.as_secs_f64().max(1e-9),
            "tx_packets_counter": tx_hw,
            "received": received,
            "rx_packets_counter": rx_hw,
            "after_stop": after_stop,
            "lost": lost,
            "not_transmitted": account.not_transmitted(),
            "not_received": account.not_received(),
            "out_of_order": reports.iter().map(|r| r.out_of_order).sum::<u64>(),
            "not_test_frames": reports.iter().map(|r| r.bad).sum::<u64>(),
            "bad_checksums": reports.iter().map(|r| r.bad_checksum).sum::<u64>(),
            "rx_overrun_seen": rx_overrun_counted.map(|n| n > 0),
            "refused": refused
                .iter()
                .map(|r| (r.counter.to_string(), serde_json::Value::from(r.count)))
                .collect::<serde_json::Map<_, _>>(),
            "uncounted": uncounted.iter().map(|u| u.what).collect::<Vec<_>>(),
            "rx": pollnic_tools::jsonout::throughput(&Throughput { packets: received, bytes, elapsed: rx_span }),
            "queues": queues,
            "max_poll_gap_ns": gaps.max_ns,
            "latency": pollnic_tools::jsonout::latency(&lat),
            "tx_port_counters": txd.stats().iter().collect::<std::collections::BTreeMap<_, _>>(),
            "rx_port_counters": rxd.stats().iter().collect::<std::collections::BTreeMap<_, _>>(),
        }));
        pollnic_tools::signal::close_removed_first(vec![txd, rxd])?;
        if received == 0 {
            return Err("no frame arrived: check link (`pollnic status`) and cabling".into());
        }
        return Ok(());
    }
    if let Some(line) = pollnic_tools::signal::interrupted_line("the device was") {
        println!("{line}");
    }
    println!(
        "--- summary (under QEMU/TCG, QEMU's CPU emulation in software, these numbers include \
         emulation cost) ---"
    );
    println!(
        "sent       {sent} frames in {:.3} s, {} (tx_packets counter: {tx_hw})",
        tx_elapsed.as_secs_f64(),
        if sent >= 2 && !tx_elapsed.is_zero() {
            format!("{:.0} pps offered", sent as f64 / tx_elapsed.as_secs_f64())
        } else {
            "no offered rate (fewer than two frames)".to_string()
        }
    );
    println!("received   {received} frames (rx_packets counter: {rx_hw})");
    if after_stop > 0 {
        println!(
            "after stop {after_stop} frames arrived after the stop: drained, not timed, not lost"
        );
    }
    if let Some(line) = account.shortfall_line() {
        println!("{line}");
    }
    // What the loss is, as far as the NICs tell.
    let cause = match (account.not_received(), rx_overrun) {
        (0, _) => String::new(),
        (_, _) if rxd.family() == pollnic::NicFamily::VirtioNet => " -- not received: a virtio-net port counts \
             no drops; with no free RX buffer QEMU stops taking frames for it, and what the \
             sender then sends is held in QEMU (hub backend) or dropped by the host's tap queue \
             (tap backend, the testbed's): pace with --rate (see `stalls`)"
            .to_owned(),
        (_, true) if args.rate > 0 => format!(
            " -- not received: the receiving NIC found its RX ring full (ICR.RXO set: the \
             interrupt cause register's receive-overrun bit, raised when a frame finds no free \
             descriptor), which \
             QEMU's igb drops without counting: the receiving thread stalled longer than {} \
             descriptors hold at {} pps ({:.0} ms; see `stalls`); raise --ring-size (up to 4096) \
             or lower --rate",
            args.ring_size,
            args.rate,
            args.ring_size as f64 * 1e3 / args.rate as f64
        ),
        (_, true) => " -- not received: the receiving NIC found its RX ring full (ICR.RXO set: the \
             interrupt cause register's receive-overrun bit), which QEMU's igb drops without \
             counting; pace with --rate (see `stalls`)"
            .to_owned(),
        (_, false) => " -- not received, and the NIC never found its RX ring full (no ICR.RXO): see `stalls` and the port counters (--stats)"
            .to_owned(),
    };
    println!(
        "lost       {lost} ({:.3} %: not transmitted by the sending port {}, not received {}); \
         out of order {}, not test frames {}, bad checksums {}; RX ring overrun seen (ICR.RXO, a frame found no free descriptor): {}{cause}",
        if sent > 0 {
            lost as f64 * 100.0 / sent as f64
        } else {
            0.0
        },
        account.not_transmitted(),
        account.not_received(),
        reports.iter().map(|r| r.out_of_order).sum::<u64>(),
        reports.iter().map(|r| r.bad).sum::<u64>(),
        reports.iter().map(|r| r.bad_checksum).sum::<u64>(),
        match rx_overrun_counted {
            None => "not counted by this port's family",
            Some(n) if n > 0 => "yes",
            Some(_) => "no",
        }
    );
    for r in &refused {
        println!("refused    {} {}: {}", r.count, r.counter, r.meaning);
    }
    if account.not_received() > 0 {
        for u in &uncounted {
            println!("uncounted  {}: {}", u.what, u.meaning);
        }
    }
    // Why frames are lost: a receive loop that stops polling for longer than
    // its free descriptors last at its queue's arrival rate overruns the
    // ring. The queue where that was worst: its own share of the offered rate
    // (RSS rarely splits flows evenly) over its own longest gap.
    let offered_pps = sent as f64 / tx_elapsed.as_secs_f64().max(1e-9);
    let free = args.ring_size - 1;
    let worst = reports
        .iter()
        .map(|r| {
            let share = if received > 0 {
                r.received as f64 / received as f64
            } else {
                1.0 / reports.len().max(1) as f64
            };
            (r.gaps, offered_pps * share)
        })
        .max_by_key(|(g, rate)| g.frames_in_max_gap(*rate));
    let mut gaps = PollGaps::default();
    for r in &reports {
        gaps.merge(&r.gaps);
    }
    if let Some((g, rate)) = worst {
        let mut line = g.describe(rate, free);
        if rx_overrun && g.frames_in_max_gap(rate) <= free as u64 {
            line += "; the ring overran without a poll gap that long: frames arrived in \
                     bursts (QEMU holds frames back and delivers them together) or faster \
                     than this loop receives";
        }
        println!("stalls     {line}");
        if reports.len() > 1 {
            println!(
                "           all queues: gaps >= 1 ms: {}, >= 10 ms: {}",
                gaps.over_1ms, gaps.over_10ms
            );
        }
    }
    println!(
        "rx rate    {}",
        Throughput {
            packets: received,
            bytes,
            elapsed: rx_span
        }
        .summary()
    );
    for (i, r) in reports.iter().enumerate() {
        let s = counters[i].snapshot();
        println!(
            "  queue {i}  {:>10} frames ({:5.1} %), {:.0} pps; bursts {}, empty polls {}, rx_nombuf {}, rx_errors {}, max poll gap {:.1} ms",
            r.received,
            if received > 0 { r.received as f64 * 100.0 / received as f64 } else { 0.0 },
            r.received as f64 / rx_span.as_secs_f64().max(1e-9),
            s.rx_bursts,
            s.rx_empty_polls,
            s.rx_nombuf,
            s.rx_errors,
            r.gaps.max_ns as f64 / 1e6
        );
    }
    println!("latency    {lat}");
    if args.stats {
        println!("--- {} (sending port) ---", txd.addr());
        print!("{}", txd.stats().ethtool_text());
        println!("--- {} (receiving port) ---", rxd.addr());
        print!("{}", rxd.stats().ethtool_text());
    }
    // The kernel asked for a port back: close it first (its unbind or remove
    // waits for that), then the other, and exit REMOVED_EXIT.
    pollnic_tools::signal::close_removed_first(vec![txd, rxd])?;
    if received == 0 {
        return Err("no frame arrived: check link (`pollnic status`) and cabling".into());
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn send(
    mut txd: Device,
    flows: &[Flow],
    epoch: Instant,
    seconds: u64,
    count: u64,
    frame_size: usize,
    rate: u64,
    batch: usize,
    live: &AtomicU64,
    stop: &AtomicBool,
) -> Result<(Device, u64, Duration), String> {
    // --seconds 0: no time limit (Ctrl-C or --count ends the run).
    let deadline = (seconds > 0)
        .then(|| epoch.checked_add(Duration::from_secs(seconds)))
        .flatten();
    let mut seq = 0u64;
    let mut pending: Vec<Packet> = Vec::with_capacity(batch);
    let t0 = Instant::now();
    pollnic_tools::signal::inject_panic("loopback-sender");
    // With --count, go on until every counted frame has been handed to the NIC.
    while !stop.load(Relaxed)
        && deadline.is_none_or(|d| Instant::now() < d)
        && (count == 0 || seq < count || !pending.is_empty())
    {
        // With --rate, release frames one by one on schedule (never a whole burst early).
        let due = match 1_000_000_000u64.checked_div(rate) {
            Some(gap_ns) => t0.elapsed().as_nanos() as u64 / gap_ns + 1,
            None => u64::MAX,
        };
        let limit = if count == 0 { due } else { due.min(count) };
        let len_of = |s: u64| {
            if frame_size == 0 {
                frame::mixed_len(s)
            } else {
                frame_size - 4
            }
        };
        frame::fill_burst(
            txd.mempool(),
            &mut pending,
            batch,
            flows,
            &mut seq,
            limit,
            len_of,
        );
        if pending.is_empty() {
            std::hint::spin_loop();
            continue;
        }
        let n = txd.queue(0).tx_burst(&mut pending);
        live.fetch_add(n as u64, Relaxed);
    }
    // Frames still pending were never offered: not counted as sent.
    let sent = seq - pending.len() as u64;
    drop(pending);
    let elapsed = t0.elapsed();
    txd.queue(0).flush_tx(Duration::from_secs(2));
    Ok((txd, sent, elapsed))
}

fn receive(
    q: &mut Queue,
    stop: &AtomicBool,
    tx_done: &AtomicBool,
    polled: &AtomicUsize,
    batch: usize,
) -> QueueReport {
    let mut r = QueueReport::default();
    let mut last_seq: Option<u64> = None;
    let mut buf: Vec<Packet> = Vec::with_capacity(batch);
    let mut first = true;
    let mut idle_since = Instant::now();
    loop {
        let got = q.rx_burst(&mut buf, batch);
        if first {
            polled.fetch_add(1, Relaxed);
            first = false;
        }
        let now_ns = r.gaps.poll(got);
        if got == 0 {
            // After the sender is done, drain until the wire is quiet for 1 s.
            if stop.load(Relaxed) {
                // Take what the NIC still hands up (until 200 ms of quiet,
                // at most 2 s), so that every frame it counted is accounted.
                // Not when the kernel wants the port back: its unbind
                // waits for the close.
                let (start, mut quiet) = (Instant::now(), Instant::now());
                while !q.is_removed()
                    && quiet.elapsed() < Duration::from_millis(200)
                    && start.elapsed() < Duration::from_secs(2)
                {
                    let n = q.rx_burst(&mut buf, batch);
                    if n > 0 {
                        r.after_stop += n as u64;
                        q.free_bulk(&mut buf);
                        quiet = Instant::now();
                    }
                }
                return r;
            }
            if tx_done.load(Relaxed) && idle_since.elapsed() > Duration::from_secs(1) {
                return r;
            }
            if !q.wait_rx(0) {
                std::hint::spin_loop();
            }
            continue;
        }
        q.wait_rx(got);
        let now_ns = now_ns.unwrap_or_else(pollnic::clock::monotonic_ns);
        let now = Instant::now();
        idle_since = now;
        r.first_last = Some((r.first_last.map_or(now, |(a, _)| a), now));
        for p in &buf {
            if !p.rx_checksum().none_bad() {
                r.bad_checksum += 1;
            }
            let Some(info) = frame::parse(p.data()) else {
                r.bad += 1;
                continue;
            };
            r.lat.record(now_ns.saturating_sub(info.tx_ns));
            if last_seq.is_some_and(|l| info.seq <= l) {
                r.out_of_order += 1;
            }
            last_seq = Some(info.seq);
            r.received += 1;
            r.bytes += p.len() as u64;
        }
        q.free_bulk(&mut buf); // back to the queue's cache, no atomic operation
    }
}

fn report_every_second(
    tx: &AtomicU64,
    counters: &DeviceCounters,
    tx_done: &AtomicBool,
    stop: &AtomicBool,
    json: bool,
) {
    // Ends when the sender is done, or on a signal or a panic anywhere.
    let over = || tx_done.load(Relaxed) || stop.load(Relaxed);
    let start = Instant::now();
    let mut last_tx = 0;
    let mut last: Vec<(u64, u64)> = vec![(0, 0); counters.len()];
    for tick in 1.. {
        let due = start + Duration::from_secs(tick);
        while Instant::now() < due && !over() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if over() {
            return;
        }
        let now_tx = tx.load(Relaxed);
        let snaps: Vec<_> = counters.iter().map(|c| c.snapshot()).collect();
        let d: Vec<(u64, u64)> = snaps
            .iter()
            .zip(&last)
            .map(|(s, l)| (s.rx_packets - l.0, s.rx_bytes - l.1))
            .collect();
        let total = Throughput {
            packets: d.iter().map(|x| x.0).sum(),
            bytes: d.iter().map(|x| x.1).sum(),
            elapsed: Duration::from_secs(1),
        };
        let shares: Vec<String> = d
            .iter()
            .enumerate()
            .map(|(i, x)| {
                format!(
                    "q{i} {} ({:.0} %)",
                    x.0,
                    if total.packets > 0 {
                        x.0 as f64 * 100.0 / total.packets as f64
                    } else {
                        0.0
                    }
                )
            })
            .collect();
        if json {
            let per_queue: Vec<u64> = d.iter().map(|x| x.0).collect();
            pollnic_tools::jsonout::emit(&serde_json::json!({
                "type": "second", "second": tick, "tx_pps": now_tx - last_tx,
                "rx": pollnic_tools::jsonout::throughput(&total),
                "queue_pps": per_queue, "queue_shares": pollnic_tools::jsonout::shares(&per_queue),
            }));
        } else {
            println!(
                "[{tick:>3} s] tx {:>8} pps | rx {total} | {}",
                now_tx - last_tx,
                shares.join(" ")
            );
        }
        last_tx = now_tx;
        last = snaps.iter().map(|s| (s.rx_packets, s.rx_bytes)).collect();
    }
}
