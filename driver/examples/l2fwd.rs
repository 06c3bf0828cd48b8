//! Forward every frame between two ports, both ways, with no copy: what
//! arrives on port A's queue 0 leaves from port B's queue 0 in the same DMA
//! buffer, and back. One thread polls both, as DPDK's `l2fwd` does with one
//! lcore and `--no-mac-updating` (frames leave unchanged, so the next hop
//! must accept their destination MAC, e.g. be promiscuous).
//!
//! ```sh
//! cargo build --release -p pollnic --example l2fwd
//! sudo target/release/examples/l2fwd 0000:03:00.0 0000:03:00.1 10   # port A, port B, seconds
//! ```
//!
//! Both ports are opened together (`Device::open_many`): one VFIO container,
//! so each port's NIC can reach the other's buffers. It prints `ready` once
//! both links are up, then per direction the frames forwarded and those
//! dropped because the other port's TX ring was full. Exit status: 0, 1 when
//! a port cannot be opened (the message says why and what to run), 2 for a
//! bad command line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use pollnic::{Device, DeviceConfig, Packet, Queue};

const USAGE: &str = "usage: l2fwd <PCI address A> <PCI address B> <seconds> [--no-iommu], e.g. l2fwd 0000:03:00.0 0000:03:00.1 10";
const BURST: usize = 32;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // `--no-iommu`, anywhere: physical addresses on a port without an IOMMU
    // (docs/no-iommu.md), said loudly.
    let no_iommu = args.iter().any(|a| a == "--no-iommu");
    args.retain(|a| a != "--no-iommu");
    if no_iommu {
        eprintln!("l2fwd: WARNING --no-iommu: DMA with physical addresses and no IOMMU; the NIC can read and write all of this machine's RAM");
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let [a, b, secs] = &args[..] else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let secs = match secs.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => s,
        _ => {
            eprintln!("l2fwd: seconds must be a number above 0; {USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(a, b, Duration::from_secs_f64(secs), no_iommu) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("l2fwd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Frames forwarded and dropped in one direction.
#[derive(Default)]
struct Tally {
    forwarded: u64,
    dropped: u64,
}

/// One burst from `rx` out of `tx`. What the TX ring cannot take is dropped
/// (the `Packet`s go back to their mempool), so a slow port never stalls the
/// other direction.
fn forward(rx: &mut Queue, tx: &mut Queue, burst: &mut Vec<Packet>, tally: &mut Tally) {
    if rx.rx_burst(burst, BURST) == 0 {
        return;
    }
    tally.forwarded += tx.tx_burst(burst) as u64;
    tally.dropped += burst.len() as u64;
    burst.clear();
}

fn run(a: &str, b: &str, time: Duration, no_iommu: bool) -> pollnic::Result<()> {
    let mut cfg = DeviceConfig::default().with_promisc(true);
    if no_iommu {
        cfg = cfg.with_unsafe_no_iommu();
    }
    let mut ports = Device::open_many([a, b], &cfg)?;
    let (pa, pb) = ports.split_at_mut(1);
    let (qa, qb) = (pa[0].queue(0), pb[0].queue(0));
    println!("ready: {a} <-> {b} for {:.1} s", time.as_secs_f64());
    let (mut burst, mut ab, mut ba) = (
        Vec::with_capacity(BURST),
        Tally::default(),
        Tally::default(),
    );
    let until = Instant::now() + time;
    while Instant::now() < until {
        forward(qa, qb, &mut burst, &mut ab);
        forward(qb, qa, &mut burst, &mut ba);
    }
    qa.flush_tx(Duration::from_secs(1));
    qb.flush_tx(Duration::from_secs(1));
    println!(
        "{a} -> {b}: {} forwarded {} dropped",
        ab.forwarded, ab.dropped
    );
    println!(
        "{b} -> {a}: {} forwarded {} dropped",
        ba.forwarded, ba.dropped
    );
    Ok(())
}
