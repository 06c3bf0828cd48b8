//! Measure, in one run, the same offered traffic from the same generator
//! (pollnic on port 0) received on port 1 by: pollnic with 1 and 2 RSS queues,
//! the kernel igb driver with an AF_PACKET TPACKET_V3 ring and with recvmmsg
//! on UDP, and DPDK testpmd in rxonly mode (when installed). Frame sizes 64
//! and 1518 by default.
//!
//! ```text
//! cargo xtask compare                       # in the QEMU testbed
//! compare --tx 0000:03:00.0 --rx 0000:03:00.1 --seconds 5 --rate 100000   # real NICs
//! ```
//!
//! Prints a table and writes compare.json, compare.csv and compare.svg to
//! `--out`. Under emulation the numbers include the emulator's cost: compare
//! rows of one run only.

mod gen;
mod paths;
mod report;
mod sock;
mod tally;

use clap::Parser;
use paths::{Load, Measured};
use pollnic::frame::Flow;
use pollnic::metrics::Throughput;
use pollnic::pci::{self, PciAddress, Sysfs};
use pollnic::runner::parse_cores;
use pollnic::{Device, DeviceConfig};
use report::Row;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(about = "Compare receive paths on one NIC port under the same offered traffic")]
struct Args {
    /// Sending port (pollnic generator), bound to vfio-pci.
    #[arg(long, required_unless_present = "replot")]
    tx: Option<PciAddress>,
    /// Receiving port: rebound between vfio-pci and igb as the rows need.
    #[arg(long, required_unless_present = "replot")]
    rx: Option<PciAddress>,
    /// Only re-draw the chart and table from `--out`'s compare.json (no traffic).
    #[arg(long)]
    replot: bool,
    /// Seconds of traffic per row.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Offered packets/s.
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Wire frame sizes (incl. FCS), comma-separated.
    #[arg(long, default_value = "64,1518", value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Distinct flows (so RSS has something to spread).
    #[arg(long, default_value_t = 64)]
    flows: u32,
    /// Paths to run, comma-separated.
    #[arg(
        long,
        default_value = "pollnic-1q,pollnic-2q,kernel-afpacket,kernel-recvmmsg,dpdk-testpmd",
        value_delimiter = ','
    )]
    paths: Vec<String>,
    /// Cores for receive threads (pollnic queues, testpmd uses the last).
    #[arg(long, default_value = "0,1")]
    cores: String,
    /// Folder for compare.json / compare.csv / compare.svg.
    #[arg(long, default_value = "results/compare")]
    out: PathBuf,
    /// Chart title suffix (where and when it was measured).
    #[arg(long, default_value = "")]
    label: String,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("compare: {e}");
        std::process::exit(1);
    }
}

fn row(path: &str, size: usize, rate: u64, m: Result<Measured, String>) -> Row {
    let missing = |note: String| Row {
        path: path.into(),
        frame_size: size,
        offered_pps: rate as f64,
        sent: 0,
        received: 0,
        lost: 0,
        rx_pps: 0.0,
        payload_mbps: 0.0,
        l1_mbps: 0.0,
        cpu_ns_per_pkt: None,
        p50_us: None,
        p99_us: None,
        p999_us: None,
        max_us: None,
        max_poll_gap_ms: None,
        note,
        valid: false,
    };
    let m = match m {
        Ok(m) => m,
        Err(e) => return missing(e),
    };
    let t = &m.tally;
    if t.received == 0 {
        // Honesty check: never print rates for a receiver that saw nothing.
        return missing(format!(
            "receiver saw no traffic (generator sent {}); {}",
            m.offered.sent, m.note
        ));
    }
    // Rate over the receive window, or the send window when only a count exists.
    let span = t
        .first_last
        .map(|(a, b)| Duration::from_nanos(b - a))
        .filter(|d| !d.is_zero())
        .unwrap_or(m.offered.elapsed);
    let tp = Throughput {
        packets: t.received,
        bytes: t.bytes,
        elapsed: span,
    };
    let has_lat = t.lat.count() > 0;
    let us = |q: f64| has_lat.then(|| t.lat.quantile_ns(q) as f64 / 1000.0);
    Row {
        path: path.into(),
        frame_size: size,
        offered_pps: m.offered.sent as f64 / m.offered.elapsed.as_secs_f64().max(1e-9),
        sent: m.offered.sent,
        received: t.received,
        lost: m.offered.sent as i64 - t.received as i64,
        rx_pps: tp.pps(),
        payload_mbps: tp.payload_mbps(),
        l1_mbps: tp.l1_mbps(),
        cpu_ns_per_pkt: (t.cpu_ns > 0).then(|| t.cpu_ns as f64 / t.received as f64),
        p50_us: us(0.5),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: has_lat.then(|| t.lat.max_ns() as f64 / 1000.0),
        max_poll_gap_ms: t.gaps.map(|g| g.max_ns as f64 / 1e6),
        note: match t.gaps {
            // Loss explained: frames arriving during the longest stall
            // against the ring's free descriptors (DeviceConfig default 512).
            Some(g) => {
                let rate = m.offered.sent as f64 / m.offered.elapsed.as_secs_f64().max(1e-9);
                let per_queue = rate / path_queues(path) as f64;
                let gaps = g.describe(per_queue, 511);
                if m.note.is_empty() {
                    gaps
                } else {
                    format!("{}; {gaps}", m.note)
                }
            }
            None => m.note,
        },
        valid: true,
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let title = format!(
        "pollnic compare: same generator, receive paths side by side {}",
        args.label
    );
    if args.replot {
        return Ok(report::replot(&args.out, title.trim())?);
    }
    let (tx, rx) = (
        args.tx.expect("required by clap"),
        args.rx.expect("required by clap"),
    );
    let cores = parse_cores(&args.cores)?;
    if let Some(bad) = args.sizes.iter().find(|s| !(64..=1518).contains(*s)) {
        return Err(format!("frame size {bad} outside 64..=1518").into());
    }
    let stop = pollnic::signal::stop_flag()?;
    let mut gen = Device::open(&tx.to_string(), &DeviceConfig::default())?;
    let sysfs = Sysfs::default();
    // The receiver's MAC, read by pollnic (binding the port to vfio-pci if needed).
    pci::bind_vfio(&sysfs, rx)?;
    let dst_mac = Device::open(&rx.to_string(), &DeviceConfig::default())?.mac();
    let flows: Vec<Flow> = (0..args.flows.max(1))
        .map(|i| Flow::nth(gen.mac(), dst_mac, i))
        .collect();
    println!(
        "compare: {} -> {}, {} flows, {} pps offered, {} s per row, sizes {:?}",
        tx,
        rx,
        flows.len(),
        args.rate,
        args.seconds,
        args.sizes
    );
    let mut rows = Vec::new();
    for &size in &args.sizes {
        for path in &args.paths {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let load = Load {
                gen: &mut gen,
                flows: &flows,
                size,
                rate: args.rate,
                secs: args.seconds,
                stop: &stop,
            };
            let m = match path.as_str() {
                "pollnic-1q" => paths::pollnic_rx(load, rx, 1, &cores),
                "pollnic-2q" => paths::pollnic_rx(load, rx, 2, &cores),
                "kernel-afpacket" => paths::afpacket_rx(load, rx),
                "kernel-recvmmsg" => paths::recvmmsg_rx(load, rx),
                "dpdk-testpmd" => paths::dpdk_rx(load, rx, *cores.last().unwrap_or(&0)),
                other => Err(format!("unknown path `{other}`")),
            };
            let r = row(path, size, args.rate, m);
            println!(
                "  {:<16} {:>4} B: sent {:>8}  received {:>8}{}",
                r.path,
                size,
                r.sent,
                r.received,
                if r.valid {
                    String::new()
                } else {
                    format!("  ({})", r.note)
                }
            );
            rows.push(r);
        }
    }
    // Leave the receiving port as we found it for pollnic: on vfio-pci.
    let _ = pci::bind_vfio(&sysfs, rx);
    println!("--- results (under QEMU/TCG these include emulation cost; compare rows of one run only) ---");
    print!("{}", report::table(&rows));
    report::write_all(&args.out, &rows, title.trim())?;
    println!("wrote {}/compare.{{json,csv,svg}}", args.out.display());
    if rows
        .iter()
        .filter(|r| r.path.starts_with("pollnic"))
        .any(|r| !r.valid)
    {
        return Err("a pollnic row has no result".into());
    }
    Ok(())
}

/// RX queues a path receives on (the offered rate spreads over them).
fn path_queues(path: &str) -> u32 {
    if path == "pollnic-2q" {
        2
    } else {
        1
    }
}
