//! pktgen: send test frames from one pollnic port, nothing else.
//!
//! ```text
//! pktgen --port 0000:00:08.0 --rate 100000 --seconds 10 --frame-size imix --flows 64
//! pktgen --port 0000:00:08.0 --count 1000 --frame-size 0 --write sent.pcap   # and keep a copy of each frame
//! ```
//!
//! Frames are pollnic's test frames (Ethernet/IPv4/UDP with a sequence
//! number, a CLOCK_MONOTONIC send time and a byte pattern; see
//! `pollnic_tools::frame`), optionally 802.1Q-tagged. Prints a line per second and
//! a summary (or, with `--json`, one JSON object per second and a summary
//! object). `--write FILE` records every frame the NIC accepted, as sent, in
//! a pcap with nanosecond timestamps. Ctrl-C stops it cleanly.
//!
//! `--tso MSS` sends TCP/IPv4 frames of `--tso-payload` bytes of payload
//! (default 65,495, the most one IPv4 datagram carries) instead, which the
//! NIC cuts into segments of at most MSS bytes (TCP segmentation offload:
//! the segmentation is done in hardware, pollnic hands over one frame).

mod report;

use clap::Parser;
use pollnic::{Device, DeviceConfig, Packet};
use pollnic_tools::args::Usage;
use pollnic_tools::frame::Flow;
use pollnic_tools::gen::{self, FrameSize};
use pollnic_tools::pcapout::{Format, PcapOut};
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime};

#[derive(Parser, Debug)]
#[command(
    about = "Send test frames from one pollnic port (rate, count, sizes, flows, VLAN); live line per second"
)]
struct Args {
    /// PCI address of the sending port (bound to vfio-pci).
    #[arg(long, value_name = "ADDR")]
    port: pollnic::pci::PciAddress,
    /// Offered rate in packets/s (0 = as fast as the port takes them). [range: 0..=1000000000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=1000000000), long, default_value_t = 0)]
    rate: u64,
    /// Stop after this many frames (0 = no limit). [range: 0..=18446744073709551615]
    #[arg(value_parser = clap::value_parser!(u64).range(0..), long, default_value_t = 0)]
    count: u64,
    /// Stop after this many seconds (0 = until --count or Ctrl-C). [range: 0..=31536000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=31536000), long, default_value_t = 10)]
    seconds: u64,
    /// Frame size on the wire incl. the FCS (frame check sequence: the 4-byte CRC ending every frame; 64..=1518; up to 9018 with --mtu 9000), 0 for mixed sizes, or imix (7:4:1 of 64/594/1518). [range: 0..=9022]
    #[arg(long, default_value = "64")]
    frame_size: FrameSize,
    /// MTU of the port in bytes (L3 payload, as Linux; 1500..=9000): frames up
    /// to MTU + 18 bytes on the wire (4 more with --vlan). [range: 1500..=9000]
    #[arg(value_parser = clap::value_parser!(u32).range(1500..=9000), long, default_value_t = 1500)]
    mtu: u32,
    /// Distinct flows (source address and UDP port vary), for RSS on the receiver (receive-side scaling: its NIC spreads flows over its RX queues by a hash). [range: 1..=65536]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=65536), long, default_value_t = 1)]
    flows: u32,
    /// Tag every frame with this 802.1Q VLAN ID (1..=4094; the frame grows by 4 bytes). [range: 1..=4094]
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=4094))]
    vlan: Option<u16>,
    /// With --vlan: have the NIC insert the tag (TX VLAN offload: the
    /// descriptor's DCMD.VLE bit asks the NIC to add it) instead of writing it
    /// into each frame; the wire carries the same frame.
    #[arg(long, requires = "vlan")]
    hw_vlan: bool,
    /// Have the NIC insert the IPv4 header and UDP checksums (TX checksum
    /// offload) instead of sending the test frames' software IPv4 checksum
    /// and no UDP checksum.
    #[arg(long)]
    tx_checksum: bool,
    /// Send TCP/IPv4 frames that the NIC cuts into segments of at most
    /// this many bytes of payload (TCP segmentation offload, done in
    /// hardware); at most the MTU less 40. [range: 1..=9216]
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=9216), conflicts_with_all = ["frame_size", "write"])]
    tso: Option<u16>,
    /// With --tso: TCP payload bytes per frame (default 65495: the most one
    /// IPv4 datagram carries; up to 262143, the most the descriptor's 18-bit
    /// payload length field, PAYLEN, holds). [range: 1..=262143]
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=262143))]
    tso_payload: Option<usize>,
    /// Destination MAC (default: broadcast ff:ff:ff:ff:ff:ff).
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff")]
    dst: String,
    /// Frames per burst (1..=512). [range: 1..=512]
    #[arg(value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=512), long, default_value_t = 32)]
    batch: usize,
    /// Descriptors in the TX ring (a power of two, 32..=4096). [range: 32..=4096]
    #[arg(value_parser = clap::value_parser!(u32).range(32..=4096), long, default_value_t = 512)]
    ring_size: u32,
    /// Also write every frame the NIC accepted to this pcap (.pcapng: pcapng), nanosecond timestamps.
    #[arg(long)]
    write: Option<std::path::PathBuf>,
    /// One JSON object per second and a summary object, instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    dma: pollnic_tools::args::DmaArgs,
}

fn main() {
    let result = run(pollnic_tools::args::parse("pktgen"));
    // The device is closed by now; a panicked thread wins over any error.
    pollnic_tools::signal::exit_if_panicked("pktgen");
    if let Err(e) = result {
        pollnic_tools::args::exit_with("pktgen", &*e);
    }
}

/// `aa:bb:cc:dd:ee:ff` to bytes.
fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("--dst {s}: expected a MAC like 52:54:00:12:34:02"));
    }
    for (b, p) in mac.iter_mut().zip(&parts) {
        *b = u8::from_str_radix(p, 16)
            .map_err(|_| format!("--dst {s}: expected a MAC like 52:54:00:12:34:02"))?;
    }
    Ok(mac)
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let vlan = args.vlan.map(gen::check_vlan).transpose().map_err(Usage)?;
    gen::check_mtu(args.mtu).map_err(Usage)?;
    gen::check_frame_size(args.frame_size.max_wire_len(), args.mtu, vlan.is_some())
        .map_err(Usage)?;
    let dst = parse_mac(&args.dst).map_err(Usage)?;
    let tso = args
        .tso
        .map(|mss| gen::check_tso_mss(mss, args.mtu))
        .transpose()
        .map_err(Usage)?;
    if let (None, Some(n)) = (tso, args.tso_payload) {
        return Err(Usage(format!(
            "--tso-payload {n} needs --tso MSS (e.g. --tso 1448)"
        ))
        .into());
    }
    let tso_payload = args.tso_payload.unwrap_or(65495);
    pollnic_tools::check_ring_size_arg(args.ring_size).map_err(Usage)?;
    // The output file first: an unwritable path fails before the NIC is touched.
    let mut out = match &args.write {
        Some(p) => Some(PcapOut::create(p, Format::for_path(p), 65535)?),
        None => None,
    };
    let stop = pollnic_tools::signal::stop_flag()?;
    let cfg = args
        .dma
        .apply("pktgen", DeviceConfig::default())
        .with_rx_ring_size(32)
        .with_tx_ring_size(args.ring_size)
        .with_mempool_size((args.ring_size * 2 + 2048).max(4096))
        .with_mtu(args.mtu);
    let mut dev = Device::open(args.port.to_string(), &cfg)?;
    pollnic_tools::signal::stop_on_removal(&dev)?;
    let flows: Vec<Flow> = (0..args.flows)
        .map(|i| Flow::nth(dev.mac(), dst, i))
        .collect();
    let mut rep = report::Reporter::new(args.json);
    // Frames over what a port at the default MTU takes (1518 bytes on the
    // wire, 1522 with an 802.1Q tag): the summary says the receiver needs
    // the same --mtu.
    let max_wire = args.frame_size.max_wire_len();
    if max_wire > if vlan.is_some() { 1522 } else { 1518 } {
        rep.jumbo = Some((max_wire, args.mtu));
    }
    // What the NIC does to every frame (none of it without the flags).
    let mut offload = pollnic::offload::TxOffload::NONE;
    if args.tx_checksum {
        offload = offload.with_ipv4_checksum().with_l4_checksum();
    }
    if let (true, Some(v)) = (args.hw_vlan, vlan) {
        offload = offload.with_vlan(v & 0x0fff);
    }
    // With --tso, frames come from a pool of buffers large enough for one
    // whole TSO frame (the queue's own are 2 KiB).
    let tso_pool = match tso {
        Some(mss) => {
            offload = offload.with_tso(mss);
            let len = gen::TSO_HEADERS + gen::VLAN_TAG_LEN + tso_payload;
            Some(dev.create_mempool(64 + args.batch as u32, len)?)
        }
        None => None,
    };
    // A port that cannot do what the flags ask would refuse every frame:
    // say so before sending anything, rather than count refused frames as
    // sent (virtio-net does the TCP/UDP checksum alone, with
    // VIRTIO_NET_F_CSUM; --tx-checksum asks the IPv4 one too).
    match dev.queue(0).tx_capabilities().check(&offload) {
        Ok(()) => {}
        Err(pollnic::offload::TxRefusal::NoTxOffloads) => {
            return Err(format!(
                "{} ({}) does no transmit offloads (checksums, VLAN insertion, TSO are done by \
                 igb and ixgbe ports): run without --tx-checksum, --hw-vlan and --tso",
                dev.addr(),
                dev.family()
            )
            .into())
        }
        Err(why) => {
            return Err(format!(
                "{} ({}) cannot do what --tx-checksum, --hw-vlan or --tso ask: {why}",
                dev.addr(),
                dev.family()
            )
            .into())
        }
    }
    let segments = tso.map(|mss| (tso_payload as u64).div_ceil(mss as u64));
    rep.start(
        &dev,
        &args.frame_size,
        vlan,
        (args.hw_vlan, args.tx_checksum),
        tso.map(|mss| (mss, tso_payload)),
        args.flows,
        args.rate,
        args.count,
        args.seconds,
    );

    let deadline = (args.seconds > 0)
        .then(|| Instant::now().checked_add(Duration::from_secs(args.seconds)))
        .flatten();
    let mut pending: Vec<Packet> = Vec::with_capacity(args.batch);
    // Copies of the pending frames, oldest first, when --write records them.
    let mut copies: VecDeque<Vec<u8>> = VecDeque::new();
    let (mut seq, mut sent, mut bytes) = (0u64, 0u64, 0u64);
    let t0 = Instant::now();
    let mut next_tick = t0 + Duration::from_secs(1);
    let (mut tick_sent, mut tick_bytes) = (0u64, 0u64);
    let mut full_events = 0u64;
    // First and last burst that sent anything: the rate's span.
    let mut first_last: Option<(Instant, Instant)> = None;
    while !stop.load(Relaxed)
        && deadline.is_none_or(|d| Instant::now() < d)
        && (args.count == 0 || sent < args.count)
    {
        let now = Instant::now();
        if now >= next_tick {
            rep.second(&dev, sent - tick_sent, bytes - tick_bytes);
            (tick_sent, tick_bytes) = (sent, bytes);
            next_tick += Duration::from_secs(1);
        }
        // With --rate, release frames one by one on schedule.
        let due = match 1_000_000_000u64.checked_div(args.rate) {
            Some(gap) => now.duration_since(t0).as_nanos() as u64 / gap + 1,
            None => u64::MAX,
        };
        let limit = if args.count == 0 {
            due
        } else {
            due.min(args.count)
        };
        while pending.len() < args.batch && seq < limit {
            if let Some(pool) = &tso_pool {
                let Some(mut p) = pool.alloc() else {
                    break;
                };
                let sw_vlan = if args.hw_vlan { None } else { vlan };
                let len = gen::TSO_HEADERS
                    + if sw_vlan.is_some() {
                        gen::VLAN_TAG_LEN
                    } else {
                        0
                    }
                    + tso_payload;
                let tcp_seq = (seq as u32).wrapping_mul(tso_payload as u32);
                if p.set_len(len).is_err()
                    || !gen::write_tso(
                        p.data_mut(),
                        &flows[(seq % flows.len() as u64) as usize],
                        seq,
                        tcp_seq,
                        sw_vlan,
                    )
                {
                    return Err(format!("TSO frame {seq}: {len} bytes do not fit a buffer").into());
                }
                pending.push(p);
                seq += 1;
                continue;
            }
            let Some(mut p) = dev.mempool().alloc() else {
                break;
            };
            // A tag the NIC inserts is not in the frame handed to it.
            let (len, sw_vlan) = match (args.hw_vlan, vlan) {
                (true, Some(_)) => (args.frame_size.len(seq, vlan) - gen::VLAN_TAG_LEN, None),
                _ => (args.frame_size.len(seq, vlan), vlan),
            };
            if p.set_len(len).is_err()
                || !gen::write(
                    p.data_mut(),
                    &flows[(seq % flows.len() as u64) as usize],
                    seq,
                    pollnic::clock::monotonic_ns(),
                    sw_vlan,
                )
            {
                return Err(format!("frame {seq}: {len} bytes do not fit a buffer").into());
            }
            if out.is_some() {
                copies.push_back(p.data().to_vec());
            }
            pending.push(p);
            seq += 1;
        }
        if pending.is_empty() {
            std::hint::spin_loop();
            continue;
        }
        let before: u64 = pending.iter().map(|p| p.len() as u64).sum();
        let n = if offload.is_none() {
            dev.queue(0).tx_burst(&mut pending) as u64
        } else {
            dev.queue(0).tx_burst_offload(&mut pending, &offload) as u64
        };
        let after: u64 = pending.iter().map(|p| p.len() as u64).sum();
        if !pending.is_empty() {
            full_events += 1;
        }
        sent += n;
        bytes += before - after;
        if n > 0 {
            first_last = Some((first_last.map_or(now, |f| f.0), now));
        }
        if let Some(o) = out.as_mut() {
            let ts = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            for f in copies.drain(..n as usize) {
                o.write(ts, &f)?;
            }
        }
    }
    // Frames still pending were never offered to the NIC: not sent.
    drop(pending);
    let elapsed = t0.elapsed();
    dev.queue(0).flush_tx(Duration::from_secs(2));
    let written = match out {
        Some(o) => {
            let n = o.frames();
            Some((o.finish()?, n))
        }
        None => None,
    };
    let span = first_last.map_or(Duration::ZERO, |(a, b)| b - a);
    rep.summary(
        &mut dev,
        segments,
        sent,
        bytes,
        elapsed,
        span,
        full_events,
        stop.load(Relaxed),
        written,
    );
    // The kernel asked for the port back: exit REMOVED_EXIT, closing the
    // device on the way out (which lets the unbind or remove finish).
    dev.check_removed()?;
    Ok(())
}
