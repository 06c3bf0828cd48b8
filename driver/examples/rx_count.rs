//! Count what each RSS queue of one port receives, one thread per queue,
//! each pinned to its own core (queue i on core i), for a set time; the
//! threads busy-poll, or wait as an optional fourth word says (`poll`, `irq`,
//! `adaptive`: [`pollnic::RxMode`]):
//!
//! ```sh
//! cargo build --release -p pollnic --example rx_count
//! sudo target/release/examples/rx_count 0000:03:00.0 2 10   # port, queues, seconds
//! sudo target/release/examples/rx_count 0000:03:00.0 1 10 adaptive
//! sudo target/release/examples/rx_count 0000:00:04.0 1 10 --no-iommu   # no IOMMU: docs/no-iommu.md
//! ```
//!
//! It prints `ready` once the link is up and every queue thread runs, one
//! line per queue (packets, bytes), then the port's own counters under their
//! `ethtool -S` names. The port must be bound to vfio-pci (`pollnic bind`)
//! with 2 MiB hugepages reserved. Exit status: 0, 1 when the port cannot be
//! opened or run (the message says why and what to run), 2 for a bad
//! command line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use pollnic::{run_pinned, Counter, Device, DeviceConfig, RxMode};

const USAGE: &str =
    "usage: rx_count <PCI address> <queues> <seconds> [poll|irq|adaptive] [--no-iommu], e.g. rx_count 0000:03:00.0 2 10";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // `--no-iommu`, anywhere: physical addresses on a port without an IOMMU
    // (docs/no-iommu.md), said loudly.
    let no_iommu = args.iter().any(|a| a == "--no-iommu");
    args.retain(|a| a != "--no-iommu");
    if no_iommu {
        eprintln!("rx_count: WARNING --no-iommu: DMA with physical addresses and no IOMMU; the NIC can read and write all of this machine's RAM");
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (addr, queues, secs, mode) = match &args[..] {
        [a, q, s] => (a, q, s, Ok(RxMode::BusyPoll)),
        [a, q, s, m] => (a, q, s, m.parse::<RxMode>()),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mode = match mode {
        Ok(m) => m,
        Err(e) => {
            eprintln!("rx_count: {e}; {USAGE}");
            return ExitCode::from(2);
        }
    };
    let (Ok(queues @ 1..), Ok(secs)) = (queues.parse::<u16>(), secs.parse::<f64>()) else {
        eprintln!("rx_count: queues must be a whole number from 1 and seconds a number; {USAGE}");
        return ExitCode::from(2);
    };
    if !(secs.is_finite() && secs > 0.0) {
        eprintln!("rx_count: seconds must be above 0; {USAGE}");
        return ExitCode::from(2);
    }
    let mut cfg = DeviceConfig::default().with_queues(queues);
    if no_iommu {
        cfg = cfg.with_unsafe_no_iommu();
    }
    match run(addr, &cfg, Duration::from_secs_f64(secs), mode) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rx_count: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(addr: &str, cfg: &DeviceConfig, time: Duration, mode: RxMode) -> pollnic::Result<()> {
    let queues = cfg.queues;
    let mut dev = Device::open(addr, cfg)?;
    let cores: Vec<usize> = (0..usize::from(queues)).collect();
    let until = Instant::now() + time;
    // One thread per queue; each returns its (packets, bytes).
    let per_queue = run_pinned(
        &mut dev,
        &cores,
        mode,
        |q| {
            let (mut burst, mut packets, mut bytes) = (Vec::with_capacity(32), 0u64, 0u64);
            while Instant::now() < until {
                let n = q.rx_burst(&mut burst, 32);
                packets += n as u64;
                bytes += burst.iter().map(|p| p.len() as u64).sum::<u64>();
                q.free_bulk(&mut burst); // the buffers go back to the queue's cache
                q.wait_rx(n); // busy-poll: returns at once
            }
            (packets, bytes)
        },
        || {
            println!(
                "ready: {queues} queue(s) on {addr} for {:.1} s",
                time.as_secs_f64()
            )
        },
    )?;
    for (i, (packets, bytes)) in per_queue.iter().enumerate() {
        println!("queue {i}: {packets} packets {bytes} bytes");
    }
    let total: u64 = per_queue.iter().map(|(p, _)| p).sum();
    println!("total: {total} packets");
    let stats = dev.stats();
    for c in [
        Counter::RxPackets,
        Counter::RxMissedErrors,
        Counter::RxNoBufferCount,
    ] {
        // A counter the port's family does not keep (virtio-net has no
        // rx_missed_errors) is said to be absent, not printed as 0.
        match stats.counter(c) {
            Some(n) => println!("{}: {n}", c.name()),
            None => println!("{}: not counted by this port", c.name()),
        }
    }
    Ok(())
}
