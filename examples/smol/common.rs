//! What `smol-echo` and `smol-http` share: the command-line options of the
//! port and its address, and the loop that runs a smoltcp stack on a pollnic
//! queue until a deadline, a signal or the application is done, then closes
//! the port and reports where every buffer is.

use pollnic::smoltcp::{QueueDevice, SmolStats};
use pollnic::{Device, DeviceConfig};
use pollnic_tools::args::Usage;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct NetArgs {
    /// The port, bound to vfio-pci (`pollnic bind`), e.g. 0000:03:00.0.
    #[arg(long)]
    pub port: String,
    /// The stack's IPv4 address and prefix length on that port, e.g. 10.0.0.2/24.
    #[arg(long)]
    pub ip: String,
    /// How long to serve, in seconds (0 = until Ctrl-C or SIGTERM). [range: 0..=31536000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=31536000), long, default_value_t = 0)]
    pub seconds: u64,
    /// Descriptors per RX and TX ring (a power of two, 32..=4096). [range: 32..=4096]
    #[arg(value_parser = clap::value_parser!(u32).range(32..=4096), long, default_value_t = 512)]
    pub ring_size: u32,
    /// Compute every IPv4, TCP and UDP checksum in software, as smoltcp does
    /// alone, instead of leaving them to the NIC (TX checksum offload, RX
    /// checksum status); for comparisons.
    #[arg(long)]
    pub no_checksum_offload: bool,
    #[command(flatten)]
    pub dma: pollnic_tools::args::DmaArgs,
}

/// What the run ended with, for the summary.
pub struct Outcome {
    pub stats: SmolStats,
    pub free: usize,
    pub capacity: u32,
    pub elapsed: Duration,
}

/// Open `net.port`, put a smoltcp interface with `net.ip` on its queue 0,
/// and call `step` after every poll until it returns true, the deadline
/// passes or a signal arrives. `setup` adds the sockets. Prints one line
/// when the stack is up (`TOOL: up: ...`).
pub fn serve<S>(
    tool: &str,
    net: &NetArgs,
    what: &str,
    setup: impl FnOnce(&mut SocketSet<'static>) -> S,
    mut step: impl FnMut(&mut S, &mut SocketSet<'static>, &mut Interface) -> bool,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let (addr, prefix) = pollnic_tools::smol::parse_ip_cidr(&net.ip).map_err(Usage)?;
    pollnic_tools::check_ring_size_arg(net.ring_size).map_err(Usage)?;
    let stop = pollnic_tools::signal::stop_flag()?;
    let cfg = net
        .dma
        .apply(tool, DeviceConfig::default())
        .with_rx_ring_size(net.ring_size)
        .with_tx_ring_size(net.ring_size)
        .with_mempool_size((2 * net.ring_size + 2048).max(4096))
        // RX checksum status where the port offers it (virtio-net refuses
        // the field); an address that does not parse is refused by the open.
        .with_rx_checksum(
            !net.no_checksum_offload
                && net
                    .port
                    .parse()
                    .ok()
                    .is_none_or(pollnic_tools::offers_rx_checksum),
        );
    cfg.validate()?;
    let mut dev = Device::open(net.port.as_str(), &cfg)?;
    let pool = dev.mempool().clone();
    let (mac, mac_s, pci) = (dev.mac(), dev.mac_string(), dev.addr());
    let deadline = (net.seconds > 0).then(|| Instant::now() + Duration::from_secs(net.seconds));
    let start = Instant::now();
    let stats = {
        let mut phy = QueueDevice::new(&mut dev, 0);
        phy.set_checksum_offload(!net.no_checksum_offload);
        let conf = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        let mut iface = Interface::new(conf, &mut phy, smoltcp::time::Instant::now());
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(addr), prefix))
                .expect("one address fits")
        });
        let mut sockets = SocketSet::new(vec![]);
        let mut app = setup(&mut sockets);
        let sums = if phy.checksum_offload() && phy.queue().tx_capabilities().ipv4_checksum {
            "checksums offloaded (IPv4, TCP, UDP)"
        } else if phy.checksum_offload() {
            // virtio-net with VIRTIO_NET_F_CSUM: the device does TCP and UDP.
            "checksums offloaded (TCP, UDP; IPv4 in software)"
        } else if net.no_checksum_offload {
            "checksums in software"
        } else {
            "checksums in software (this port offers no checksum offload)"
        };
        println!("{tool}: up: {addr}/{prefix} on {pci} ({mac_s}), {what}, {sums}");
        let mut n = 0u32;
        loop {
            phy.poll(&mut iface, &mut sockets, smoltcp::time::Instant::now());
            if step(&mut app, &mut sockets, &mut iface) {
                // Send what the last step queued (and its FIN) before closing.
                let until = Instant::now() + Duration::from_millis(200);
                while Instant::now() < until {
                    phy.poll(&mut iface, &mut sockets, smoltcp::time::Instant::now());
                }
                break;
            }
            n = n.wrapping_add(1);
            if n % 1024 == 0
                && (stop.load(Relaxed) || deadline.is_some_and(|d| Instant::now() >= d))
            {
                break;
            }
        }
        phy.stats()
    };
    let elapsed = start.elapsed();
    drop(dev);
    Ok(Outcome {
        stats,
        free: pool.free_count(),
        capacity: pool.capacity(),
        elapsed,
    })
}

/// The summary lines every smoltcp example ends with.
///
/// # Errors
/// When a buffer is missing from the pool after the port was closed.
pub fn print_summary(tool: &str, o: &Outcome) -> Result<(), String> {
    let s = &o.stats;
    if let Some(line) = pollnic_tools::signal::interrupted_line("the port was") {
        println!("{line}");
    }
    println!(
        "{tool}: device: rx_frames {} rx_malformed {} rx_bad_checksum {} rx_fragments {} tx_frames {} tx_nobuf {} tx_ring_full {} in {:.3} s",
        s.rx_frames,
        s.rx_malformed,
        s.rx_bad_checksum,
        s.rx_fragments,
        s.tx_frames,
        s.tx_nobuf,
        s.tx_ring_full,
        o.elapsed.as_secs_f64()
    );
    println!(
        "{tool}: pool: {} of {} buffers free after close{}",
        o.free,
        o.capacity,
        if o.free == o.capacity as usize {
            " (every buffer back)"
        } else {
            " (BUFFERS MISSING)"
        }
    );
    if o.free != o.capacity as usize {
        return Err(format!(
            "{} buffers did not come back to the pool",
            o.capacity as usize - o.free
        ));
    }
    Ok(())
}
