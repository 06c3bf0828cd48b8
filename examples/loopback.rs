//! Send test frames on one port and receive them on another, both driven by
//! pollnic: the testbed's main job (`cargo xtask demo`), and the same on real
//! igb NICs wired back to back:
//!
//! ```text
//! loopback --tx 0000:00:08.0 --rx 0000:00:0a.0 --seconds 10 --frame-size 64
//! ```
//!
//! Prints a live line each second and a summary: frames sent and received,
//! lost, packets/s, payload and L1 Mbit/s, and latency percentiles from the
//! send timestamp carried in each frame. Ctrl-C stops it cleanly.

use clap::Parser;
use pollnic::frame::{self, Flow};
use pollnic::metrics::{Latency, Throughput};
use pollnic::{Device, DeviceConfig, Packet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "Send frames on one pollnic port, receive them on another, report rates and latency")]
struct Args {
    /// PCI address of the sending port (bound to vfio-pci).
    #[arg(long)]
    tx: String,
    /// PCI address of the receiving port (bound to vfio-pci).
    #[arg(long)]
    rx: String,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Stop after this many frames (0 = no limit).
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// Frame size on the wire in bytes including FCS (64..=1518); 0 = mixed sizes.
    #[arg(long, default_value_t = 64)]
    frame_size: usize,
    /// Frames per burst.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Offered rate in packets/s (0 = as fast as possible).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Descriptors per RX and TX ring (multiple of 8, 32..=4096).
    #[arg(long, default_value_t = 512)]
    ring_size: u32,
}

#[derive(Default)]
struct Live {
    tx: AtomicU64,
    rx: AtomicU64,
    rx_bytes: AtomicU64,
}

struct RxReport {
    dev: Device,
    lat: Latency,
    received: u64,
    bytes: u64,
    gaps: u64,
    out_of_order: u64,
    bad: u64,
    first_last: Option<(Instant, Instant)>,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("loopback: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.frame_size != 0 && !(64..=1518).contains(&args.frame_size) {
        return Err(format!("--frame-size {} is outside 64..=1518 (0 = mixed)", args.frame_size).into());
    }
    let batch = args.batch.clamp(1, 512);
    let stop = pollnic::signal::stop_flag()?;
    let cfg = DeviceConfig { rx_ring_size: args.ring_size, tx_ring_size: args.ring_size, ..Default::default() };
    let mut txd = Device::open(&args.tx, &cfg)?;
    let rxd = Device::open(&args.rx, &cfg)?;
    let flow = Flow::between(txd.mac(), rxd.mac());
    println!(
        "pollnic loopback: {} ({}) -> {} ({}), {} s, {}",
        txd.address(),
        txd.mac_string(),
        rxd.address(),
        rxd.mac_string(),
        args.seconds,
        if args.frame_size == 0 { "mixed 64..1518-byte frames".to_string() } else { format!("{}-byte frames", args.frame_size) }
    );

    let epoch = Instant::now();
    let live = Arc::new(Live::default());
    let tx_done = Arc::new(AtomicBool::new(false));
    let rx_thread = {
        let (live, stop, tx_done) = (live.clone(), stop.clone(), tx_done.clone());
        std::thread::spawn(move || receive(rxd, epoch, &live, &stop, &tx_done, batch))
    };
    let reporter = {
        let (live, tx_done) = (live.clone(), tx_done.clone());
        std::thread::spawn(move || report_every_second(&live, &tx_done))
    };

    // Transmit.
    let deadline = epoch + Duration::from_secs(args.seconds);
    let mut seq = 0u64;
    let mut pending: Vec<Packet> = Vec::with_capacity(batch);
    let t0 = Instant::now();
    while !stop.load(Relaxed) && Instant::now() < deadline && (args.count == 0 || seq < args.count) {
        if let Some(gap_ns) = 1_000_000_000u64.checked_div(args.rate) {
            let due = t0 + Duration::from_nanos(seq * gap_ns);
            if Instant::now() < due {
                std::hint::spin_loop();
                continue;
            }
        }
        while pending.len() < batch && (args.count == 0 || seq < args.count) {
            let Some(mut p) = txd.mempool().alloc() else { break };
            let len = if args.frame_size == 0 { frame::mixed_len(seq) } else { args.frame_size - 4 };
            p.set_len(len)?;
            frame::write(p.data_mut(), &flow, seq, epoch.elapsed().as_nanos() as u64);
            pending.push(p);
            seq += 1;
        }
        let n = txd.tx_burst(&mut pending);
        live.tx.fetch_add(n as u64, Relaxed);
    }
    // Whatever is still pending was never offered: not counted as sent.
    let unsent = pending.len() as u64;
    drop(pending);
    let sent = seq - unsent;
    let tx_elapsed = t0.elapsed();
    txd.flush_tx(Duration::from_secs(2));
    tx_done.store(true, Relaxed);
    let mut rep = rx_thread.join().map_err(|_| "receive thread panicked")?;
    reporter.join().ok();

    let tx_hw = txd.stats().get("tx_packets").unwrap_or(0);
    let rx_hw = rep.dev.stats().get("rx_packets").unwrap_or(0);
    let rx_span = rep.first_last.map(|(a, b)| b - a).unwrap_or_default();
    let txt = Throughput { packets: sent, bytes: 0, elapsed: tx_elapsed };
    let rxt = Throughput { packets: rep.received, bytes: rep.bytes, elapsed: rx_span };
    let lost = sent.saturating_sub(rep.received);
    println!("--- summary (under QEMU/TCG these numbers include emulation cost) ---");
    println!("sent       {sent} frames in {:.2} s, {:.0} pps offered (tx_packets counter: {tx_hw})", tx_elapsed.as_secs_f64(), txt.pps());
    println!("received   {} frames (rx_packets counter: {rx_hw})", rep.received);
    println!(
        "lost       {lost} ({:.3} %); sequence gaps {}, out of order {}, not test frames {}",
        if sent > 0 { lost as f64 * 100.0 / sent as f64 } else { 0.0 },
        rep.gaps,
        rep.out_of_order,
        rep.bad
    );
    println!("rx rate    {rxt}");
    println!("latency    {}", rep.lat);
    let rs = rep.dev.rx_stats();
    println!("rx queue   bursts {}, empty polls {}, rx_nombuf {}, rx_errors {}", rs.bursts, rs.empty_polls, rs.rx_nombuf, rs.rx_errors);
    if rep.received == 0 {
        return Err("no frame arrived: check link (`pollnic status`) and cabling".into());
    }
    Ok(())
}

fn receive(mut dev: Device, epoch: Instant, live: &Live, stop: &AtomicBool, tx_done: &AtomicBool, batch: usize) -> RxReport {
    let mut lat = Latency::default();
    let (mut received, mut bytes, mut gaps, mut out_of_order, mut bad) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut next_seq = 0u64;
    let mut first_last: Option<(Instant, Instant)> = None;
    let mut buf: Vec<Packet> = Vec::with_capacity(batch);
    let mut idle_since = Instant::now();
    loop {
        let n = dev.rx_burst(&mut buf, batch);
        if n == 0 {
            // After the sender is done, drain until the wire is quiet for 1 s.
            if stop.load(Relaxed) || (tx_done.load(Relaxed) && idle_since.elapsed() > Duration::from_secs(1)) {
                break;
            }
            std::hint::spin_loop();
            continue;
        }
        let now = Instant::now();
        idle_since = now;
        let now_ns = (now - epoch).as_nanos() as u64;
        first_last = Some((first_last.map_or(now, |(a, _)| a), now));
        for p in buf.drain(..) {
            let Some(info) = frame::parse(p.data()) else {
                bad += 1;
                continue;
            };
            lat.record(now_ns.saturating_sub(info.tx_ns));
            if info.seq > next_seq {
                gaps += info.seq - next_seq;
            } else if info.seq < next_seq {
                out_of_order += 1;
            }
            next_seq = next_seq.max(info.seq + 1);
            received += 1;
            bytes += p.len() as u64;
        }
        live.rx.store(received, Relaxed);
        live.rx_bytes.store(bytes, Relaxed);
    }
    RxReport { dev, lat, received, bytes, gaps, out_of_order, bad, first_last }
}

fn report_every_second(live: &Live, tx_done: &AtomicBool) {
    let start = Instant::now();
    let (mut last_tx, mut last_rx, mut last_bytes) = (0, 0, 0);
    let mut tick = 1;
    while !tx_done.load(Relaxed) {
        let due = start + Duration::from_secs(tick);
        while Instant::now() < due && !tx_done.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if tx_done.load(Relaxed) {
            break;
        }
        let (tx, rx, bytes) = (live.tx.load(Relaxed), live.rx.load(Relaxed), live.rx_bytes.load(Relaxed));
        let t = Throughput { packets: rx - last_rx, bytes: bytes - last_bytes, elapsed: Duration::from_secs(1) };
        println!("[{tick:>3} s] tx {:>8} pps | rx {t} | behind {}", tx - last_tx, tx.saturating_sub(rx));
        (last_tx, last_rx, last_bytes) = (tx, rx, bytes);
        tick += 1;
    }
}
