//! The receive paths compared: pollnic (1 and 2 queues), the kernel igb
//! driver with an AF_PACKET TPACKET_V3 ring or recvmmsg on UDP, and DPDK's
//! testpmd in rxonly mode. Each runs the shared generator on the calling
//! thread while it receives.

use crate::gen::{generate, warm_up, Offered};
use crate::knobs::Knobs;
use crate::sock::{PacketRing, UdpBatch};
use crate::tally::Tally;
use pollnic::clock::monotonic_ns;
use pollnic::pci::{self, PciAddress, PciDevice, Sysfs};
use pollnic::run_pinned;
use pollnic::{Device, DeviceConfig, Packet};
use pollnic_tools::cputime::{net_rx_softirqs, rx_kernel_ns, softirq_ns_on, thread_cpu_ns};
use pollnic_tools::frame::{self, Flow};
use pollnic_tools::marker;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// The traffic of one row.
pub struct Load<'a> {
    /// The sending device (pollnic, port 0).
    pub gen: &'a mut Device,
    /// Flows to cycle through.
    pub flows: &'a [Flow],
    /// Wire frame size, bytes.
    pub size: usize,
    /// Offered packets/s.
    pub rate: u64,
    /// Seconds of traffic.
    pub secs: f64,
    /// Ctrl-C.
    pub stop: &'a AtomicBool,
}

/// A row's raw result.
pub struct Measured {
    /// The generator's count.
    pub offered: Offered,
    /// The receiver's count.
    pub tally: Tally,
    /// Anything the reader should know (e.g. kernel-reported drops).
    pub note: String,
    /// How the path receives (e.g. `busy-poll`, `irq/NAPI`, `xdp-drv copy`).
    pub mode: String,
    /// Forwarding rows: what the forwarder counted.
    pub fwd: Option<FwdCounts>,
    /// Wake-ups (pollnic: sleeps on the queue's interrupt; the kernel's
    /// rows: NET_RX softirqs on every CPU) and the frames received over the
    /// same span (warm-up included).
    pub wakeups: Option<(u64, u64)>,
    /// pollnic's interrupt modes at the end of the row.
    pub irq_state: Option<IrqState>,
    /// testpmd on a virtio-net port: the receive path its virtio PMD chose
    /// (which names the ring: see [`crate::testpmd::is_packed_path`]).
    pub virtio_rx_path: Option<String>,
}

/// pollnic's interrupt modes at the end of a row, over its queues.
#[derive(Clone, Copy, Debug)]
pub struct IrqState {
    /// The adaptive spin budget, ns (largest over the queues).
    pub spin_budget_ns: u64,
    /// The vector's EITR, µs (largest over the queues).
    pub itr_usecs: u32,
    /// Sleeps and interrupts taken in them (warm-up included).
    pub sleeps: u64,
    pub interrupts: u64,
    /// Whether this CPU offers WAITPKG (UMONITOR/UMWAIT); no mode uses it.
    pub waitpkg: bool,
}

/// A forwarding row's counts at the forwarder and of the frames returned.
#[derive(Clone, Copy, Debug, Default)]
pub struct FwdCounts {
    /// Frames the forwarder received on port 1.
    pub received: u64,
    /// Frames it sent back out of port 1.
    pub sent: u64,
    /// Returned frames whose MACs the mode should not have produced.
    pub wrong_macs: u64,
}

pub const DRAIN: Duration = Duration::from_millis(1500);

/// `FamilyInfo::name` of the virtio-net family.
pub const VIRTIO_FAMILY: &str = "virtio-net";

/// Whether the port at `addr` is a virtio-net device.
pub fn is_virtio(addr: PciAddress) -> bool {
    PciDevice::read(&Sysfs::default(), addr)
        .ok()
        .and_then(|d| d.family())
        .is_some_and(|f| f.name() == VIRTIO_FAMILY)
}

pub(crate) fn ensure_vfio(addr: PciAddress) -> Result<(), String> {
    if NO_IOMMU.get() == Some(&true) {
        // The port stays on its no-IOMMU driver (`pollnic bind --driver
        // uio_pci_generic`, or `--no-iommu`): the library says if it is not.
        return Ok(());
    }
    pci::bind_vfio(&Sysfs::default(), addr)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `--no-iommu`: pollnic's rows open their ports with physical addresses.
/// Set once by `main`.
pub static NO_IOMMU: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// The configuration every pollnic row starts from: the default, with
/// physical addresses under `--no-iommu`.
pub fn base_config() -> DeviceConfig {
    if NO_IOMMU.get() == Some(&true) {
        DeviceConfig::default().with_unsafe_no_iommu()
    } else {
        DeviceConfig::default()
    }
}

/// Whether the row being measured runs pollnic on packed virtqueues
/// (`pollnic-packed-*`); pollnic's other rows on a virtio-net receiver run
/// the split ring. Set by `main` before each row.
pub static PACKED: AtomicBool = AtomicBool::new(false);

/// Whether the row being measured runs pollnic with in-order completion
/// (`pollnic-[packed-]inorder-*`, `VIRTIO_F_IN_ORDER`); pollnic's other
/// rows on a virtio-net receiver run without it. Set by `main` before each
/// row.
pub static IN_ORDER: AtomicBool = AtomicBool::new(false);

/// The interrupt rows' moderation and adaptive mode's longest spin
/// (`--max-latency-us`, `--max-spin-us`), set once by `main`.
pub static IRQ_TUNING: std::sync::OnceLock<(pollnic::Moderation, Duration)> =
    std::sync::OnceLock::new();

/// pollnic-1q in an interrupt `mode` with its vector throttled as
/// `moderation` says.
pub fn pollnic_irq_rx(
    load: Load<'_>,
    rx: PciAddress,
    cores: &[usize],
    mode: pollnic::RxMode,
    moderation: pollnic::Moderation,
) -> Result<Measured, String> {
    pollnic_rx_with(load, rx, 1, cores, true, mode, moderation)
}

/// pollnic with `queues` RSS queues on `cores`. `timed`: read the clock once
/// per poll (poll gaps) and parse every frame for its send timestamp
/// (latency histogram); otherwise only count frames and bytes and free them,
/// the work testpmd's rxonly mode does (the `pollnic-1q-rxonly` row).
pub fn pollnic_rx(
    load: Load<'_>,
    rx: PciAddress,
    queues: u16,
    cores: &[usize],
    timed: bool,
    mode: pollnic::RxMode,
) -> Result<Measured, String> {
    let moderation = IRQ_TUNING.get().map_or_else(Default::default, |t| t.0);
    pollnic_rx_with(load, rx, queues, cores, timed, mode, moderation)
}

fn pollnic_rx_with(
    load: Load<'_>,
    rx: PciAddress,
    queues: u16,
    cores: &[usize],
    timed: bool,
    mode: pollnic::RxMode,
    moderation: pollnic::Moderation,
) -> Result<Measured, String> {
    ensure_vfio(rx)?;
    // virtio-net has no interrupt throttle: its only moderation is none.
    let moderation = if is_virtio(rx) {
        pollnic::Moderation::Fixed { usecs: 0 }
    } else {
        moderation
    };
    let mut cfg = base_config()
        .with_queues(queues)
        .with_rx_ring_size(RX_RING)
        .with_moderation(moderation);
    if is_virtio(rx) {
        use pollnic::VirtqLayout::{Packed, Split};
        cfg = cfg
            .with_virtq_layout(if PACKED.load(Relaxed) { Packed } else { Split })
            .with_virtq_in_order(IN_ORDER.load(Relaxed));
    }
    let mut dev = Device::open(rx, &cfg).map_err(|e| e.to_string())?;
    let done = AtomicBool::new(false);
    // Queue threads that have polled once; whether the trial (after the
    // warm-up) has begun, for the count-only loop that cannot tell warm-up
    // frames by their payload.
    let (polled_once, measuring) = (AtomicUsize::new(0), AtomicBool::new(false));
    let mut offered = None;
    let mut warm = 0;
    let rx_cores: Vec<usize> = cores.iter().copied().take(queues as usize).collect();
    let kern0 = rx_kernel_ns(Some(&rx_cores));
    // Busy polling: the queue threads report their empty polls, whose cost
    // the work figure subtracts (crate::cost); slots by thread.
    let busy = matches!(mode, pollnic::RxMode::BusyPoll);
    if busy {
        crate::cost::start_reporting();
    }
    let slots = AtomicUsize::new(0);
    let tallies = run_pinned(
        &mut dev,
        cores,
        mode,
        |q| {
            let cpu0 = thread_cpu_ns();
            let slot = slots.fetch_add(1, Relaxed);
            let mut empty = 0u64;
            let mut t = Tally::default();
            let mut gaps = pollnic_tools::metrics::PollGaps::default();
            let mut buf: Vec<Packet> = Vec::with_capacity(32);
            q.rx_burst(&mut buf, 32);
            q.free_bulk(&mut buf);
            polled_once.fetch_add(1, Relaxed);
            while !timed && !done.load(Relaxed) {
                crate::gen::hold();
                marker::begin();
                let n = q.rx_burst(&mut buf, 32);
                q.wait_rx(n);
                if n == 0 {
                    marker::discard();
                    empty += 1;
                    crate::cost::report_empty(slot, empty);
                    continue;
                }
                if !measuring.load(Relaxed) {
                    q.free_bulk(&mut buf);
                    continue;
                }
                t.received += buf.len() as u64;
                t.bytes += buf.iter().map(|p| p.len() as u64).sum::<u64>();
                q.free_bulk(&mut buf);
                commit(n);
            }
            while timed && !done.load(Relaxed) {
                crate::gen::hold();
                // Marked for the counter: a burst with packets, from the
                // poll to the packets freed (empty polls discarded).
                marker::begin();
                let polled = q.rx_burst(&mut buf, 32);
                q.wait_rx(polled);
                if polled == 0 {
                    marker::discard();
                    empty += 1;
                    crate::cost::report_empty(slot, empty);
                }
                let Some(now) = gaps.poll(polled) else {
                    continue;
                };
                if polled == 0 {
                    continue;
                }
                for p in &buf {
                    if let Some(info) = frame::parse(p.data()) {
                        t.frame(p.len(), info.tx_ns, now);
                    }
                }
                q.free_bulk(&mut buf);
                commit(polled);
            }
            t.cpu_ns = thread_cpu_ns() - cpu0;
            t.gaps = timed.then_some(gaps);
            t
        },
        || {
            while polled_once.load(Relaxed) < queues as usize {
                std::thread::sleep(Duration::from_micros(200));
            }
            warm = warm_up(load.gen, load.flows, load.size, load.stop);
            measuring.store(true, Relaxed);
            offered = Some(crate::gen::trial(
                load.gen, load.flows, load.size, load.rate, load.secs, load.stop,
            ));
            std::thread::sleep(DRAIN);
            done.store(true, Relaxed);
        },
    )
    .map_err(|e| e.to_string())?;
    crate::cost::stop_reporting();
    let mut tally = Tally::default();
    for t in tallies {
        tally.merge(t);
    }
    // The same sum as the kernel rows: softirq and receive kthreads on the
    // receiving cores (next to nothing here: no interrupts are raised).
    let kern = rx_kernel_ns(Some(&rx_cores)) - kern0;
    tally.cpu_ns += kern;
    let rs: Vec<String> = (0..queues)
        .map(|i| format!("q{i} {}", dev.counters()[i as usize].snapshot().rx_packets))
        .collect();
    // Where a lost frame went: the NIC's own count (GPRC) against what the
    // queues handed up, descriptors the driver dropped as bad, and whether
    // the NIC saw its ring overrun (ICR.RXO, the only trace QEMU leaves).
    let bad: u64 = (0..queues as usize)
        .map(|i| dev.counters()[i].snapshot().rx_errors)
        .sum();
    let st = dev.stats();
    // A virtio-net device keeps no counters: its rx_packets is the sum of
    // the queues' own (virtio 1.x has no statistics registers).
    let rx_count = if is_virtio(rx) {
        "rx_packets (pollnic's count: a virtio-net device keeps none)"
    } else {
        "NIC rx_packets (GPRC)"
    };
    let nic = format!(
        "{rx_count} {}, rx_missed_errors {}, rx_no_buffer_count {}, icr_rxo_events {}, bad descriptors {bad}",
        shown(st.get("rx_packets")),
        shown(st.get("rx_missed_errors")),
        shown(st.get("rx_no_buffer_count")),
        shown(st.rx_overrun_reads())
    );
    let stats: Vec<pollnic::stats::IrqStats> = dev.queues().iter().map(|q| q.irq_stats()).collect();
    let sum = |f: fn(&pollnic::stats::IrqStats) -> u64| stats.iter().map(f).sum::<u64>();
    let frames: u64 = (0..queues as usize)
        .map(|i| dev.counters()[i].snapshot().rx_packets)
        .sum();
    let budget = stats.iter().map(|s| s.spin_budget_ns).max().unwrap_or(0);
    let itr = stats.iter().map(|s| s.itr_usecs).max().unwrap_or(0);
    let wakeups = mode
        .uses_interrupts()
        .then_some((sum(|s| s.sleeps), frames));
    let irq = if mode.uses_interrupts() {
        format!(
            "; sleeps {} ({:.3} per frame), interrupts {}, stale signals {}, raced arms {}, spins paid {}, spin budget {:.1} µs, EITR {itr} µs ({:?}); WAITPKG {} (not used)",
            sum(|s| s.sleeps),
            sum(|s| s.sleeps) as f64 / frames.max(1) as f64,
            sum(|s| s.interrupts),
            sum(|s| s.stale),
            sum(|s| s.raced),
            sum(|s| s.spins_paid),
            budget as f64 / 1000.0,
            dev.queues()[0].moderation(),
            if pollnic::irq::Waitpkg::detect(&Sysfs::default()).usable() {
                "usable"
            } else {
                "not offered"
            },
        )
    } else {
        String::new()
    };
    Ok(Measured {
        offered: offered.expect("generator ran"),
        tally,
        note: format!(
            "after {warm} warm-up frames; per queue (trial and warm-up): {}; {nic}{irq}; CPU: queue threads + irq/softirq/kthreads {:.0} ms on cores {rx_cores:?}",
            rs.join(", "),
            kern as f64 / 1e6
        ),
        mode: match mode {
            pollnic::RxMode::BusyPoll => "busy-poll",
            pollnic::RxMode::Interrupt { .. } => "irq (MSI-X)",
            pollnic::RxMode::Adaptive { .. } => "adaptive",
            _ => mode.name(),
        }
        .into(),
        fwd: None,
        wakeups,
        irq_state: mode.uses_interrupts().then_some(IrqState {
            spin_budget_ns: budget,
            itr_usecs: itr,
            sleeps: sum(|s| s.sleeps),
            interrupts: sum(|s| s.interrupts),
            waitpkg: pollnic::irq::Waitpkg::detect(&Sysfs::default()).usable(),
        }),
        virtio_rx_path: None,
    })
}

/// End a marked burst of `n` packets ([`marker`]): a burst of one is also
/// counted apart, the cost of a packet alone in its burst.
#[inline(always)]
fn commit(n: usize) {
    if n == 1 {
        marker::commit_one();
    } else {
        marker::commit();
    }
}

/// RX descriptors per ring on every path: pollnic's `DeviceConfig` default,
/// testpmd's `--rxd`, and the kernel's ring set like `ethtool -G rx`.
pub const RX_RING: u32 = 512;

/// Hand `rx` to its kernel driver (igb; virtio-pci and `virtio_net` for a
/// virtio-net port) and configure its interface: up,
/// 198.19.0.1/15 (the flows' destination), carrier awaited.
pub(crate) fn kernel_iface(rx: PciAddress) -> Result<(String, u32), String> {
    let sysfs = Sysfs::default();
    pci::unbind_vfio(&sysfs, rx).map_err(|e| e.to_string())?;
    let mut ifname = None;
    for _ in 0..100 {
        if let Ok(d) = PciDevice::read(&sysfs, rx) {
            if let Some(i) = d.interfaces.first() {
                ifname = Some(i.clone());
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let ifname =
        ifname.ok_or_else(|| format!("{rx}: the kernel driver (igb, or virtio_net on a virtio-net port) created no interface"))?;
    let run = |args: &[&str]| -> Result<(), String> {
        let st = std::process::Command::new("ip")
            .args(args)
            .status()
            .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("`ip {}` failed", args.join(" ")))
        }
    };
    // The same RX ring size as pollnic's and testpmd's rows (igb's default is 256).
    let ring = crate::sock::set_rx_ring(&ifname, RX_RING)
        .map_err(|e| format!("{ifname}: setting the RX ring to {RX_RING} (ethtool -G): {e}"))?;
    if ring != RX_RING {
        return Err(format!(
            "{ifname}: RX ring is {ring} descriptors, wanted {RX_RING}"
        ));
    }
    // Every row runs at MTU 1500. virtio_net starts at the device's MTU
    // (VIRTIO_NET_F_MTU: the testbed's virtio ports offer 9000), where its
    // native XDP attach failed with EINVAL (seen; at 1500 it binds).
    run(&["link", "set", "dev", &ifname, "mtu", "1500"])?;
    run(&["addr", "flush", "dev", &ifname])?;
    run(&["addr", "add", "198.19.0.1/15", "dev", &ifname])?;
    run(&["link", "set", "dev", &ifname, "up"])?;
    wait_carrier(&ifname, Duration::from_secs(10))?;
    let idx = std::fs::read_to_string(format!("/sys/class/net/{ifname}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or("no ifindex")?;
    Ok((ifname, idx))
}

/// Wait until `ifname` reports carrier; returns how long that took.
pub(crate) fn wait_carrier(ifname: &str, timeout: Duration) -> Result<Duration, String> {
    let carrier = format!("/sys/class/net/{ifname}/carrier");
    let t0 = std::time::Instant::now();
    while t0.elapsed() < timeout {
        if std::fs::read_to_string(&carrier)
            .map(|s| s.trim() == "1")
            .unwrap_or(false)
        {
            return Ok(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{ifname}: no carrier after {} s",
        timeout.as_secs()
    ))
}

/// Run `recv` in a thread until the generator is done and drained; CPU is
/// the thread's plus the receive work outside it: softirq and the receive
/// kthreads (`rx_kernel_ns`) on every CPU, since the kernel's default rows
/// pin nothing.
fn kernel_row(
    load: Load<'_>,
    recv: impl FnMut(&mut Tally, &AtomicBool) + Send,
) -> Result<Measured, String> {
    let (m, _) = kernel_rows(load, vec![(None, recv)], None, |recv, t, done| {
        recv(t, done)
    })?;
    Ok(m)
}

/// Run one receiving thread per entry of `receivers` (pinned to its core if
/// given, owning its state `R`) until the generator is done and drained.
/// CPU per row: the threads' own time plus `rx_kernel_ns` on `account`'s
/// cores (every CPU if `None`), the same sum the pollnic rows report.
/// Returns the receivers' states for their socket statistics.
pub(crate) fn kernel_rows<R: Send>(
    load: Load<'_>,
    receivers: Vec<(Option<usize>, R)>,
    account: Option<&[usize]>,
    recv: impl Fn(&mut R, &mut Tally, &AtomicBool) + Sync,
) -> Result<(Measured, Vec<R>), String> {
    let done = AtomicBool::new(false);
    let (kern0, nrx0, soft0) = (
        rx_kernel_ns(account),
        net_rx_softirqs(),
        softirq_ns_on(account),
    );
    let ((offered, warm), results) = std::thread::scope(|s| {
        let handles: Vec<_> = receivers
            .into_iter()
            .map(|(core, mut state)| {
                let (recv, done) = (&recv, &done);
                s.spawn(move || {
                    if let Some(c) = core {
                        pollnic_tools::cores::pin_current_thread(c);
                    }
                    let cpu0 = thread_cpu_ns();
                    let mut t = Tally::default();
                    recv(&mut state, &mut t, done);
                    t.cpu_ns = thread_cpu_ns() - cpu0;
                    (t, state)
                })
            })
            .collect();
        let warm = warm_up(load.gen, load.flows, load.size, load.stop);
        let offered = crate::gen::trial(
            load.gen, load.flows, load.size, load.rate, load.secs, load.stop,
        );
        std::thread::sleep(DRAIN);
        done.store(true, Relaxed);
        (
            (offered, warm),
            handles.into_iter().map(|h| h.join()).collect::<Vec<_>>(),
        )
    });
    let mut tally = Tally::default();
    let mut states = Vec::new();
    for r in results {
        let (t, state) = r.map_err(|_| "receiver thread panicked".to_string())?;
        tally.merge(t);
        states.push(state);
    }
    let kern = rx_kernel_ns(account) - kern0;
    let soft = softirq_ns_on(account) - soft0;
    tally.cpu_ns += kern;
    let softirqs = net_rx_softirqs() - nrx0;
    let frames = tally.received + warm;
    let note = format!(
        "CPU: receiving threads + softirq {:.0} ms + hard IRQ and ksoftirqd/napi threads {:.0} ms on {}; {} NET_RX softirqs",
        soft as f64 / 1e6,
        kern.saturating_sub(soft) as f64 / 1e6,
        match account {
            Some(c) => format!("cores {c:?}"),
            None => "all cores".into(),
        },
        softirqs
    );
    Ok((
        Measured {
            offered,
            tally,
            note,
            mode: "irq/NAPI".into(),
            fwd: None,
            wakeups: Some((softirqs, frames)),
            irq_state: None,
            virtio_rx_path: None,
        },
        states,
    ))
}

/// The interface's `rx_packets` (`/sys/class/net/<if>/statistics`): what the
/// driver received, XDP_DROP's frames included (igb and `virtio_net` count
/// a frame before its XDP verdict).
fn iface_rx_packets(ifname: &str) -> Result<u64, String> {
    let p = format!("/sys/class/net/{ifname}/statistics/rx_packets");
    std::fs::read_to_string(&p)
        .map_err(|e| format!("{p}: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("{p}: {e}"))
}

/// The kernel's driver with an XDP program that drops every frame in the
/// driver (`XDP_DROP`, native mode), no socket: the kernel's floor
/// (`crate::xdpdrop`). Nothing reaches user space, so "received" is the
/// interface's `rx_packets` over the trial (the warm-up's frames taken
/// off) and the row has no latency; its CPU is the kernel's receive work.
pub fn xdp_drop_rx(load: Load<'_>, rx: PciAddress) -> Result<Measured, String> {
    let (ifname, ifindex) = kernel_iface(rx)?;
    wait_carrier(&ifname, Duration::from_secs(10))?;
    let prog = crate::xdpdrop::XdpDrop::attach(ifindex).map_err(|e| format!("{ifname}: {e}"))?;
    // The attach resets the queue (igb takes the link down and up).
    let link_back = wait_carrier(&ifname, Duration::from_secs(15))?;
    let probe_t0 = std::time::Instant::now();
    let before = iface_rx_packets(&ifname)?;
    let mut ready = false;
    while !ready && probe_t0.elapsed() < Duration::from_secs(15) && !load.stop.load(Relaxed) {
        generate(load.gen, load.flows, load.size, 2000, 0.02, load.stop);
        std::thread::sleep(Duration::from_millis(300));
        ready = iface_rx_packets(&ifname)? > before;
    }
    if !ready {
        return Err(format!(
            "{ifname}: rx_packets did not move within 15 s of the XDP_DROP attach"
        ));
    }
    std::thread::sleep(Duration::from_millis(200));
    let ready_after = probe_t0.elapsed() + link_back;
    let frame_bytes = load.size.saturating_sub(4) as u64;
    let r0 = iface_rx_packets(&ifname)?;
    // No receiver: its thread returns at once. (It used to sleep in 5 ms
    // steps until the trial ended; on the counted vCPU those wake-ups were
    // most of the row's drain figure, about 6,500 instructions per frame.)
    let mut m = kernel_row(load, |_t, _done| {})?;
    let r1 = iface_rx_packets(&ifname)?;
    drop(prog);
    let (softirqs, warm) = m.wakeups.unwrap_or((0, 0));
    let received = (r1 - r0).saturating_sub(warm);
    m.tally.received = received;
    m.tally.bytes = received * frame_bytes;
    m.wakeups = Some((softirqs, r1 - r0));
    m.mode = "xdp-drv drop".into();
    m.note = format!(
        "{ifname}, XDP_DROP in the driver (2 eBPF instructions, no socket); received = rx_packets over the trial less the {warm} warm-up frames; frames flowed {:.1} s after the attach; {}",
        ready_after.as_secs_f64(),
        m.note
    );
    Ok(m)
}

/// Kernel igb + AF_PACKET socket with a TPACKET_V3 mmap ring.
pub fn afpacket_rx(load: Load<'_>, rx: PciAddress) -> Result<Measured, String> {
    let (ifname, ifindex) = kernel_iface(rx)?;
    let mut ring = PacketRing::open(ifindex).map_err(|e| format!("{ifname}: {e}"))?;
    let mut m = kernel_row(load, |t, done| read_blocks(&mut ring, t, done))?;
    m.note = format!("{ifname}; ring drops {}; {}", ring.drops(), m.note);
    Ok(m)
}

/// Kernel igb + UDP socket read with recvmmsg.
pub fn recvmmsg_rx(load: Load<'_>, rx: PciAddress) -> Result<Measured, String> {
    let (ifname, _) = kernel_iface(rx)?;
    let port = load.flows[0].dst_port;
    let mut sock = UdpBatch::bind(port).map_err(|e| format!("UDP port {port}: {e}"))?;
    let mut m = kernel_row(load, |t, done| {
        while !done.load(Relaxed) {
            crate::gen::hold();
            // recvmmsg blocks until a datagram arrives: take the time after it returns.
            let mut now = None;
            let before = t.received;
            sock.recv_batch(|p| {
                let now = *now.get_or_insert_with(monotonic_ns);
                if let Some((_, tx_ns)) = frame::parse_udp_payload(p) {
                    // L2 length: 42 header bytes + UDP payload.
                    t.frame(p.len() + frame::HEADERS_LEN, tx_ns, now);
                }
            });
            crate::gen::received(t.received - before);
        }
    })?;
    m.note = format!("{ifname}; {}", m.note);
    Ok(m)
}

/// Kernel igb + an AF_XDP socket (libxdp) on queue 0, the port set to one
/// queue pair (`ethtool -L combined 1`, restored after) so that every flow
/// reaches the socket, as every flow reaches pollnic-1q's one queue. The
/// socket asks for zero-copy first; the mode column says what it got and,
/// if copy, why.
///
/// `busy_poll`: preferred busy polling as `Documentation/networking/napi.rst`
/// describes it: the device's `napi_defer_hard_irqs` 2 and
/// `gro_flush_timeout` 200 µs, the socket's busy-poll options
/// ([`crate::xsk::XskOpts`]), the queue's IRQ and the receiving thread on
/// pollnic-1q's core; every knob restored after the row.
///
/// Attaching (and detaching) the XDP program makes igb close and reopen the
/// port: the link drops for 1.5–5 s in the testbed. So the row waits for
/// carrier, then sends probe frames until one arrives, and counts only
/// frames stamped after the probes.
pub fn afxdp_rx(
    load: Load<'_>,
    rx: PciAddress,
    cores: &[usize],
    busy_poll: bool,
) -> Result<Measured, String> {
    use crate::xsk::{ensure_bpffs, XskOpts, XskRx, XSK_RX_RING};
    let (ifname, _) = kernel_iface(rx)?;
    let mounted = ensure_bpffs()?;
    let mut knobs = Knobs::default();
    knobs.combined(&ifname, 1)?;
    wait_carrier(&ifname, Duration::from_secs(10))?;
    let core = busy_poll.then(|| cores.first().copied().unwrap_or(0));
    if let Some(c) = core {
        let irqs = crate::knobs::queue_irqs(&ifname)?;
        knobs.irq_affinity(irqs[0], &format!("{ifname} queue 0"), &c.to_string())?;
        knobs.netdev(&ifname, "napi_defer_hard_irqs", "2")?;
        knobs.netdev(&ifname, "gro_flush_timeout", "200000")?;
    }
    let mut xsk =
        XskRx::open(&ifname, 0, XskOpts { busy_poll }).map_err(|e| format!("{ifname}: {e}"))?;
    let mode = xsk.mode();
    let link_back = wait_carrier(&ifname, Duration::from_secs(15))?;
    // Carrier can come back before frames flow: probe with a few frames.
    let probe_t0 = std::time::Instant::now();
    let mut ready = false;
    while !ready && probe_t0.elapsed() < Duration::from_secs(15) && !load.stop.load(Relaxed) {
        generate(load.gen, load.flows, load.size, 2000, 0.02, load.stop);
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(300) {
            if xsk.recv(50, |_| {}) > 0 {
                ready = true;
            }
        }
    }
    if !ready {
        return Err(format!(
            "{ifname}: the AF_XDP socket ({mode}) received none of the probe frames within 15 s of the XDP attach"
        ));
    }
    // Let the probes' stragglers arrive, then count only later frames.
    let mut quiet = std::time::Instant::now();
    while quiet.elapsed() < Duration::from_millis(200) {
        if xsk.recv(20, |_| {}) > 0 {
            quiet = std::time::Instant::now();
        }
    }
    let ready_after = probe_t0.elapsed() + link_back;
    let t0 = monotonic_ns();
    let account: Option<Vec<usize>> = core.map(|c| vec![c]);
    // Busy polling: an empty recv (one busy-poll syscall that found nothing)
    // is this path's empty poll (crate::cost).
    if busy_poll {
        crate::cost::start_reporting();
    }
    let rows = kernel_rows(
        load,
        vec![(core, &mut xsk)],
        account.as_deref(),
        move |xsk, t, done| {
            let mut empty = 0u64;
            while !done.load(Relaxed) {
                crate::gen::hold();
                // The time the application has the frames: once per batch.
                let mut now = None;
                let before = t.received;
                marker::begin();
                let n = xsk.recv(100, |f| {
                    let now = *now.get_or_insert_with(monotonic_ns);
                    if let Some(info) = frame::parse(f) {
                        if info.tx_ns >= t0 {
                            t.frame(f.len(), info.tx_ns, now);
                        }
                    }
                });
                if n == 0 {
                    marker::discard();
                    if busy_poll {
                        empty += 1;
                        crate::cost::report_empty(0, empty);
                    }
                } else {
                    commit(n);
                }
                crate::gen::received(t.received - before);
            }
        },
    );
    crate::cost::stop_reporting();
    let (mut m, _) = rows?;
    let st = xsk.stats();
    drop(xsk);
    let set = knobs.describe();
    let restored = knobs.restore()?;
    m.note = format!(
        "{ifname} queue 0 of 1, {mode}, NIC RX ring {RX_RING}, socket RX ring {XSK_RX_RING}{}; knobs: {set}; {restored}; frames flowed {:.1} s after the XDP attach{}; socket drops: rx_dropped {}, rx_ring_full {}, fill_ring_empty {}; {}",
        if busy_poll {
            format!(
                ", SO_PREFER_BUSY_POLL 1, SO_BUSY_POLL {} us, SO_BUSY_POLL_BUDGET {}",
                crate::xsk::BUSY_POLL_USECS,
                crate::xsk::BUSY_POLL_BUDGET
            )
        } else {
            String::new()
        },
        ready_after.as_secs_f64(),
        if mounted { " (mounted bpffs on /sys/fs/bpf)" } else { "" },
        st.rx_dropped,
        st.rx_ring_full,
        st.rx_fill_ring_empty_descs,
        m.note
    );
    m.mode = mode;
    Ok(m)
}

/// One AF_PACKET ring per core of `cores`, each read by a thread pinned
/// there, in the PACKET_FANOUT_CPU group `fanout` if given; returns the row
/// and the rings' drops.
fn packet_rings_rx(
    load: Load<'_>,
    ifname: &str,
    ifindex: u32,
    cores: &[usize],
    fanout: Option<u16>,
) -> Result<(Measured, u64), String> {
    let mut receivers = Vec::new();
    for &core in cores {
        let ring = PacketRing::open(ifindex).map_err(|e| format!("{ifname}: {e}"))?;
        if let Some(group) = fanout {
            ring.fanout_cpu(group)
                .map_err(|e| format!("{ifname}: {e}"))?;
        }
        receivers.push((Some(core), ring));
    }
    let (m, rings) = kernel_rows(load, receivers, Some(cores), read_blocks)?;
    Ok((m, rings.iter().map(|r| r.drops()).sum()))
}

/// Read `ring`'s blocks into `t` until `done`. The time a frame reaches the
/// application is taken when its block is handed over.
fn read_blocks(ring: &mut PacketRing, t: &mut Tally, done: &AtomicBool) {
    while !done.load(Relaxed) {
        crate::gen::hold();
        let mut now = None;
        let before = t.received;
        ring.next_block(100, |f| {
            let now = *now.get_or_insert_with(monotonic_ns);
            if let Some(info) = frame::parse(f) {
                t.frame(f.len(), info.tx_ns, now);
            }
        });
        crate::gen::received(t.received - before);
    }
}

/// The kernel's software RSS: one RX queue (its IRQ on the first of
/// `cores`), RPS spreading its packets over the first `n` cores by flow hash
/// (`queues/rx-0/rps_cpus`, Documentation/networking/scaling.rst), and a
/// PACKET_FANOUT_CPU socket pinned to each of them, so each core's softirq
/// and its reader stay together. RFS is not a row: it steers by the CPU
/// where a flow's socket was last read (`sock_rps_record_flow`, inet sockets
/// only), and an AF_PACKET socket records none.
pub fn afpacket_rps_rx(
    load: Load<'_>,
    rx: PciAddress,
    cores: &[usize],
    n: usize,
) -> Result<Measured, String> {
    let (ifname, ifindex) = kernel_iface(rx)?;
    if cores.len() < n {
        return Err(format!(
            "RPS over {n} cores needs {n} --cores, got {cores:?}"
        ));
    }
    let cores = &cores[..n];
    let mut knobs = Knobs::default();
    knobs.combined(&ifname, 1)?;
    wait_carrier(&ifname, Duration::from_secs(10))?;
    let irqs = crate::knobs::queue_irqs(&ifname)?;
    knobs.irq_affinity(irqs[0], &format!("{ifname} queue 0"), &cores[0].to_string())?;
    let mask: u64 = cores.iter().map(|c| 1u64 << c).sum();
    knobs.netdev(&ifname, "queues/rx-0/rps_cpus", &format!("{mask:x}"))?;
    knobs.sysctl("net.core.netdev_budget", TUNED_NETDEV_BUDGET)?;
    let group = (std::process::id() & 0xffff) as u16 ^ 0x5a5a;
    let (mut m, drops) = packet_rings_rx(load, &ifname, ifindex, cores, Some(group))?;
    let set = knobs.describe();
    let restored = knobs.restore()?;
    m.mode = format!("irq/NAPI + RPS over {n} cores");
    m.note = format!(
        "{ifname}, 1 queue, RPS to cores {cores:?}, PACKET_FANOUT_CPU, NIC RX ring {RX_RING}; knobs: {set}; {restored}; ring drops {drops}; {}",
        m.note
    );
    Ok(m)
}

/// The coalescing of the tuned AF_PACKET rows: `ethtool -C rx-usecs`.
pub const TUNED_RX_USECS: [u32; 2] = [0, 100];
/// `net.core.netdev_budget` in the tuned rows (default 300): packets per
/// NET_RX softirq over all NAPI instances; igb's per-NAPI weight stays 64.
pub const TUNED_NETDEV_BUDGET: &str = "600";

/// Kernel igb + AF_PACKET TPACKET_V3 with the knobs a careful engineer sets
/// (Linux `Documentation/networking/scaling.rst`): `queues` queue pairs
/// (`ethtool -L combined`), the RX ring at pollnic's size, queue n's IRQ
/// pinned to `cores[n]` with its receiving thread, `rx-usecs` coalescing,
/// the NAPI budget raised; with 2 queues one socket per core in a
/// `PACKET_FANOUT_CPU` group. Every knob is restored and read back after
/// the row; a knob that does not come back fails the row.
pub fn afpacket_tuned_rx(
    load: Load<'_>,
    rx: PciAddress,
    cores: &[usize],
    queues: u32,
    rx_usecs: u32,
) -> Result<Measured, String> {
    let (ifname, ifindex) = kernel_iface(rx)?;
    if cores.len() < queues as usize {
        return Err(format!(
            "{queues} queues need {queues} --cores, got {cores:?}"
        ));
    }
    let cores = &cores[..queues as usize];
    let mut knobs = Knobs::default();
    knobs.combined(&ifname, queues)?;
    wait_carrier(&ifname, Duration::from_secs(10))?;
    let irqs = crate::knobs::queue_irqs(&ifname)?;
    if irqs.len() != queues as usize {
        return Err(format!(
            "{ifname}: {} queue IRQs in /proc/interrupts for {queues} queues",
            irqs.len()
        ));
    }
    for (q, (&irq, &core)) in irqs.iter().zip(cores).enumerate() {
        knobs.irq_affinity(irq, &format!("{ifname} queue {q}"), &core.to_string())?;
    }
    knobs.rx_usecs(&ifname, rx_usecs)?;
    knobs.sysctl("net.core.netdev_budget", TUNED_NETDEV_BUDGET)?;
    let group = (queues > 1).then_some((std::process::id() & 0xffff) as u16);
    let (mut m, drops) = packet_rings_rx(load, &ifname, ifindex, cores, group)?;
    let set = knobs.describe();
    let restored = knobs.restore()?;
    m.mode = format!("irq/NAPI tuned, rx-usecs {rx_usecs}");
    // netdev_budget_usecs is left as it is (2 jiffies by default: 8000 µs at
    // HZ 250) and stated.
    let budget_usecs = std::fs::read_to_string("/proc/sys/net/core/netdev_budget_usecs")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into());
    m.note = format!(
        "{ifname}, {queues} queue(s){}, NIC RX ring {RX_RING}, igb NAPI weight 64, netdev_budget_usecs {budget_usecs} (unchanged); knobs: {set}; {restored}; ring drops {drops}; {}",
        if queues > 1 { ", PACKET_FANOUT_CPU" } else { "" },
        m.note
    );
    Ok(m)
}

/// DPDK `dpdk-testpmd --forward-mode=rxonly` on `rx` (bound to vfio-pci), pinned
/// to `core`. testpmd reports only a count: no latency, CPU from /proc.
pub fn dpdk_rx(load: Load<'_>, rx: PciAddress, core: usize) -> Result<Measured, String> {
    use crate::testpmd::Testpmd;
    // In a counting guest, once per run: what an empty RX burst costs testpmd.
    let empty = crate::cost::Meter::new().and_then(|_| {
        crate::cost::testpmd_empty_cost(|span, between| {
            let tp = Testpmd::start(rx, core, "rxonly").ok()?;
            between()?;
            std::thread::sleep(span);
            between()?;
            tp.stop().ok()?.rx_bursts
        })
    });
    let tp = Testpmd::start(rx, core, "rxonly")?;
    let life0 = empty.and_then(|_| crate::cost::snapshot());
    let warm = warm_up(load.gen, load.flows, load.size, load.stop);
    let mut offered = generate(
        load.gen, load.flows, load.size, load.rate, load.secs, load.stop,
    );
    std::thread::sleep(DRAIN);
    let life1 = life0.as_ref().and_then(|_| crate::cost::snapshot());
    let c = tp.stop()?;
    // testpmd's loop is not ours to mark: its work comes from its burst count
    // over its whole forwarding span (crate::cost::testpmd_work).
    // Without it the row has no work figure (its busy loop's empty polls
    // would be counted as work).
    if let Some(w) = offered.window.as_mut() {
        w.external = Some(match (&life0, &life1, empty, c.rx_bursts) {
            (Some(a), Some(b), Some(e), Some(bursts)) => {
                crate::cost::testpmd_work(a, b, bursts, c.rx, e)
            }
            (_, _, None, _) => {
                Err("the cost of testpmd's empty bursts could not be calibrated".into())
            }
            (_, _, _, None) => {
                Err("testpmd reported no RX burst count (--record-burst-stats)".into())
            }
            _ => Err("the counter could not be read around testpmd's forwarding span".into()),
        });
    }
    // testpmd counts the warm-up too: take off what was sent of it.
    let received = c.rx.saturating_sub(warm);
    let tally = Tally {
        received,
        bytes: received * (load.size as u64 - 4),
        cpu_ns: c.cpu_ns,
        ..Default::default()
    };
    Ok(Measured {
        offered,
        tally,
        note: format!(
            "testpmd counts only: no latency; rate over the send window; its count less {warm} warm-up frames sent{}",
            c.virtio_rx_path
                .as_deref()
                .map(|p| format!("; its virtio PMD's receive path: {p}"))
                .unwrap_or_default()
        ),
        mode: "busy-poll".into(),
        fwd: None,
        wakeups: None,
        irq_state: None,
        virtio_rx_path: c.virtio_rx_path,
    })
}

/// A port counter for a row's note: its value, or "not counted" where the
/// port's family does not keep it (virtio-net), never a made-up 0.
fn shown(v: Option<u64>) -> String {
    v.map_or_else(|| "not counted".to_owned(), |n| n.to_string())
}
