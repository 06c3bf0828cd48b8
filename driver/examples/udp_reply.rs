//! Answer UDP on every RSS queue of one port: each queue's thread, pinned
//! to its own core (queue i on core i), turns every UDP/IPv4 frame it
//! receives into its reply (MAC addresses, IP addresses and ports swapped)
//! and sends it back on the same queue, for a set time. The reply's IPv4
//! and UDP checksums are the NIC's work where the port inserts both
//! (`Queue::tx_capabilities`: igb, ixgbe), and summed in software where it
//! does not (`offload::checksum_in_software`: a virtio-net port, which
//! inserts TCP/UDP checksums only):
//!
//! ```sh
//! cargo build --release -p pollnic --example udp_reply
//! sudo target/release/examples/udp_reply 0000:00:04.0 2 10   # port, queues, seconds
//! ```
//!
//! It prints `ready` once the link is up and every queue thread runs, then
//! one line per queue (frames received, replies sent, who summed them,
//! frames that were not UDP/IPv4), and the port's packet counters. The port
//! must be bound to vfio-pci (`pollnic bind`) with 2 MiB hugepages
//! reserved. Exit status: 0, 1 when the port cannot be opened or run (the
//! message says why and what to run), 2 for a bad command line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pollnic::offload::{checksum_in_software, TxOffload};
use pollnic::{run_pinned, Counter, Device, DeviceConfig, Packet, RxMode};

const USAGE: &str =
    "usage: udp_reply <PCI address> <queues> <seconds> [--no-iommu], e.g. udp_reply 0000:03:00.0 2 10";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let no_iommu = args.iter().any(|a| a == "--no-iommu");
    args.retain(|a| a != "--no-iommu");
    if no_iommu {
        eprintln!("udp_reply: WARNING --no-iommu: DMA with physical addresses and no IOMMU; the NIC can read and write all of this machine's RAM");
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let [addr, queues, secs] = &args[..] else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (Ok(queues @ 1..), Ok(secs)) = (queues.parse::<u16>(), secs.parse::<f64>()) else {
        eprintln!("udp_reply: queues must be a whole number from 1 and seconds a number; {USAGE}");
        return ExitCode::from(2);
    };
    if !(secs.is_finite() && secs > 0.0) {
        eprintln!("udp_reply: seconds must be above 0; {USAGE}");
        return ExitCode::from(2);
    }
    let mut cfg = DeviceConfig::default().with_queues(queues);
    if no_iommu {
        cfg = cfg.with_unsafe_no_iommu();
    }
    match run(addr, &cfg, Duration::from_secs_f64(secs)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("udp_reply: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What one queue did.
#[derive(Default)]
struct Tally {
    received: u64,
    replied: u64,
    other: u64,
    by_nic: bool,
}

fn run(addr: &str, cfg: &DeviceConfig, time: Duration) -> pollnic::Result<()> {
    let queues = cfg.queues;
    let mut dev = Device::open(addr, cfg)?;
    let cores: Vec<usize> = (0..usize::from(queues)).collect();
    let until = Instant::now() + time;
    let sums = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
    let tallies = run_pinned(
        &mut dev,
        &cores,
        RxMode::BusyPoll,
        |q| {
            // Asked once: whether this port's NIC inserts both checksums.
            let mut t = Tally {
                by_nic: q.tx_capabilities().check(&sums).is_ok(),
                ..Tally::default()
            };
            let (mut burst, mut out): (Vec<Packet>, Vec<Packet>) =
                (Vec::with_capacity(32), Vec::with_capacity(64));
            while Instant::now() < until {
                let n = q.rx_burst(&mut burst, 32);
                t.received += n as u64;
                for mut p in burst.drain(..) {
                    let ok = into_reply(&mut p)
                        && (t.by_nic || checksum_in_software(p.data_mut(), &sums).is_ok());
                    if ok {
                        out.push(p);
                    } else {
                        t.other += 1; // dropped here: its buffer goes back to the pool
                    }
                }
                // What the TX ring cannot take now stays in `out` for the
                // next round.
                let sent = if t.by_nic {
                    q.tx_burst_offload(&mut out, &sums)
                } else {
                    q.tx_burst(&mut out)
                };
                t.replied += sent as u64;
            }
            q.free_bulk(&mut out);
            t
        },
        || {
            println!(
                "ready: {queues} queue(s) on {addr} for {:.1} s",
                time.as_secs_f64()
            )
        },
    )?;
    for (i, t) in tallies.iter().enumerate() {
        println!(
            "queue {i}: received {} replied {} (checksums {}) other {}",
            t.received,
            t.replied,
            if t.by_nic {
                "by the NIC"
            } else {
                "in software"
            },
            t.other
        );
    }
    let replied: u64 = tallies.iter().map(|t| t.replied).sum();
    println!("total: {replied} replies");
    let stats = dev.stats();
    for c in [Counter::RxPackets, Counter::TxPackets] {
        match stats.counter(c) {
            Some(n) => println!("{}: {n}", c.name()),
            None => println!("{}: not counted by this port", c.name()),
        }
    }
    Ok(())
}

/// Turn a UDP/IPv4 frame (no VLAN tag) into its reply in place: MACs, IP
/// addresses and ports swapped, the frame cut to the datagram (padding
/// dropped; the NIC pads again), both checksums zeroed for whoever sums
/// them. False for any other frame.
fn into_reply(p: &mut Packet) -> bool {
    let (ip, l4, end) = {
        let Ok(s) = SlicedPacket::from_ethernet(p.data()) else {
            return false;
        };
        let (Some(NetSlice::Ipv4(v4)), Some(TransportSlice::Udp(_))) = (&s.net, &s.transport)
        else {
            return false;
        };
        if !s.link_exts.is_empty() {
            return false;
        }
        let ip = 14;
        let ihl = v4.header().slice().len();
        (ip, ip + ihl, ip + usize::from(v4.header().total_len()))
    };
    if p.set_len(end).is_err() {
        return false;
    }
    let f = p.data_mut();
    for (a, b, n) in [(0, 6, 6), (ip + 12, ip + 16, 4), (l4, l4 + 2, 2)] {
        for i in 0..n {
            f.swap(a + i, b + i);
        }
    }
    f[ip + 10..ip + 12].fill(0);
    f[l4 + 6..l4 + 8].fill(0);
    true
}
