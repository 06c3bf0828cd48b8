//! A forwarder in the manner of DPDK testpmd's `io` and `macswap` modes:
//! frames received on a port's queue `i` leave by queue `i` of the same port
//! (one port) or of the other port (two ports, both directions served by the
//! same pinned thread, as testpmd does with two ports).
//!
//! ```text
//! fwd --ports 0000:03:00.0 --mode macswap                 # bounce frames back where they came from
//! fwd --ports 0000:03:00.0,0000:03:00.1 --queues 2 --cores 2,3 --seconds 30
//! ```
//!
//! Prints a line per direction each second and a summary: frames received,
//! forwarded and dropped, rates, per-queue shares, ring and NIC counters.
//! Ctrl-C stops it cleanly.

mod json;
mod lane;
mod report;

use clap::Parser;
use lane::Mode;
use pollnic::pci::PciAddress;
use pollnic::{Device, DeviceConfig};
use pollnic_tools::args::Usage;
use pollnic_tools::cores::pin_current_thread;
use report::Dir;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

#[derive(Parser, Debug)]
#[command(
    about = "Forward frames between pollnic ports like testpmd's io and macswap modes; report rates, drops and counters"
)]
struct Args {
    /// One port (RX queue i -> TX queue i of that port) or two, comma-separated
    /// (port A queue i <-> port B queue i, both directions); bound to vfio-pci.
    #[arg(long)]
    ports: String,
    /// io: forward untouched; macswap: swap destination and source MAC first.
    #[arg(long, value_enum, default_value_t = Mode::Io)]
    mode: Mode,
    /// Queues per port, spread by RSS (receive-side scaling: the NIC spreads
    /// flows over its RX queues by a hash of their addresses and ports); one
    /// thread per queue index. [range: 1..=16]
    #[arg(value_parser = clap::value_parser!(u16).range(1..=16), long, default_value_t = 1)]
    queues: u16,
    /// Cores for the queue threads, e.g. `0,1` or `0-3` (queue i runs on the i-th, wrapping).
    #[arg(long, default_value = "0")]
    cores: String,
    /// Frames per burst (1..=512). [range: 1..=512]
    #[arg(value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=512), long, default_value_t = 32)]
    batch: usize,
    /// Descriptors per RX and TX ring (a power of two, 32..=4096); the mempools are sized to fit. [range: 32..=4096]
    #[arg(value_parser = clap::value_parser!(u32).range(32..=4096), long, default_value_t = 512)]
    ring_size: u32,
    /// How long to forward, in seconds (0 = until Ctrl-C). [range: 0..=31536000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=31536000), long, default_value_t = 0)]
    seconds: u64,
    /// Accept every destination MAC (the default, as testpmd); kept for explicitness.
    #[arg(long, conflicts_with = "no_promisc")]
    promisc: bool,
    /// Accept only frames for the port's own MAC, broadcast and multicast.
    #[arg(long)]
    no_promisc: bool,
    /// At exit, print every hardware counter of each port as `ethtool -S` does.
    #[arg(long)]
    stats: bool,
    /// One JSON object per second and direction and a summary object (one per line), instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    dma: pollnic_tools::args::DmaArgs,
}

fn main() {
    let result = run(pollnic_tools::args::parse("fwd"));
    // The devices are closed by now; a panicked thread wins over any error.
    pollnic_tools::signal::exit_if_panicked("fwd");
    if let Err(e) = result {
        pollnic_tools::args::exit_with("fwd", &*e);
    }
}

/// Parse `--ports`: one or two distinct PCI addresses.
fn parse_ports(s: &str) -> Result<Vec<PciAddress>, String> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.is_empty() || items.len() > 2 || items.iter().any(|i| i.is_empty()) {
        return Err(format!(
            "--ports `{s}`: give one PCI address or two separated by a comma"
        ));
    }
    let ports = items
        .iter()
        .map(|i| i.parse::<PciAddress>().map_err(|e| format!("--ports: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if ports.len() == 2 && ports[0] == ports[1] {
        return Err(format!(
            "--ports names {} twice: give it once to forward back out of the same port",
            ports[0]
        ));
    }
    Ok(ports)
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let addrs = parse_ports(&args.ports).map_err(Usage)?;
    let cores = pollnic_tools::args::cores("--cores", &args.cores)?;
    pollnic_tools::check_ring_size_arg(args.ring_size).map_err(Usage)?;
    let promisc = !args.no_promisc;
    let stop = pollnic_tools::signal::stop_flag()?;
    // Enough buffers for a full RX ring, a full TX ring and bursts in flight.
    let cfg = args
        .dma
        .apply("fwd", DeviceConfig::default())
        .with_rx_ring_size(args.ring_size)
        .with_tx_ring_size(args.ring_size)
        .with_mempool_size((2 * args.ring_size + 2048).max(4096))
        .with_queues(args.queues)
        .with_promisc(promisc);
    cfg.validate()?;
    // Both ports in one VFIO container, so frames cross between them as
    // they are (zero copy).
    let mut devs = Device::open_many(addrs.iter().copied(), &cfg)?;
    if let [a, b] = &devs[..] {
        a.check_shares_dma_with(b)?;
    }
    for d in &devs {
        pollnic_tools::signal::stop_on_removal(d)?;
    }
    let ports: Vec<(PciAddress, String)> =
        devs.iter().map(|d| (d.addr(), d.mac_string())).collect();
    let dirs: Vec<Dir> = if devs.len() == 1 {
        vec![Dir { rx: 0, tx: 0 }]
    } else {
        vec![Dir { rx: 0, tx: 1 }, Dir { rx: 1, tx: 0 }]
    };
    let counters: Vec<_> = devs.iter().map(|d| d.counters()).collect();
    if args.json {
        pollnic_tools::jsonout::emit(&serde_json::json!({
            "type": "start",
            "ports": ports.iter().map(|p| p.0.to_string()).collect::<Vec<_>>(),
            "queues": args.queues, "cores": cores, "seconds": args.seconds,
        }));
    } else {
        println!(
        "pollnic fwd: mode {}, {}, {} queue(s) per port on cores {cores:?}, burst {}, ring {}, promiscuous {}, {}",
        match args.mode {
            Mode::Io => "io",
            Mode::Macswap => "macswap",
        },
        ports
            .iter()
            .map(|(a, m)| format!("{a} ({m})"))
            .collect::<Vec<_>>()
            .join(" <-> "),
        args.queues,
        args.batch,
        args.ring_size,
        if promisc { "on" } else { "off" },
        if args.seconds == 0 {
            "until Ctrl-C".to_string()
        } else {
            format!("{} s", args.seconds)
        }
    );
    }

    let done = AtomicBool::new(false);
    let running = || !stop.load(Relaxed) && !done.load(Relaxed);
    let (mode, batch) = (args.mode, args.batch);
    let per_queue = std::thread::scope(|s| {
        let (first, rest) = devs.split_at_mut(1);
        let a = first[0].queues_mut().iter_mut();
        let pairs: Vec<_> = match rest.first_mut() {
            None => a.map(|qa| (qa, None)).collect(),
            Some(b) => a.zip(b.queues_mut().iter_mut().map(Some)).collect(),
        };
        let handles: Vec<_> = pairs
            .into_iter()
            .enumerate()
            .map(|(i, (qa, qb))| {
                let core = cores[i % cores.len()];
                std::thread::Builder::new()
                    .name(format!("fwd-q{i}"))
                    .spawn_scoped(s, move || {
                        if !pin_current_thread(core) {
                            eprintln!(
                                "fwd: queue {i}: could not pin to core {core}; running unpinned"
                            );
                        }
                        lane::run_queue(qa, qb, mode, batch, running)
                    })
                    .expect("spawn queue thread")
            })
            .collect();
        let addrs: Vec<PciAddress> = ports.iter().map(|p| p.0).collect();
        report::live(&addrs, &dirs, &counters, args.seconds, &stop, args.json);
        done.store(true, Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a queue thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })?;

    let hw: Vec<Vec<_>> = devs.iter().map(|d| d.stats().iter().collect()).collect();
    if args.json {
        json::summary(&ports, &dirs, mode, &per_queue, &hw, stop.load(Relaxed));
        return Ok(pollnic_tools::signal::close_removed_first(devs)?);
    }
    if let Some(line) = pollnic_tools::signal::interrupted_line("the devices were") {
        println!("{line}");
    }
    report::summary(&ports, &dirs, mode, &per_queue, &hw, args.ring_size);
    if args.stats {
        for d in &devs {
            println!("--- {} ---", d.addr());
            print!("{}", d.stats().ethtool_text());
        }
    }
    // The kernel asked for a port back: close it first (its unbind or remove
    // waits for that), then the other, and exit REMOVED_EXIT.
    Ok(pollnic_tools::signal::close_removed_first(devs)?)
}
