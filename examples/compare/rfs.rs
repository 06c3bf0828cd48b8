//! The RFS rows (`kernel-recvmmsg-rfs-2q`, `-3q`): the kernel's receive flow
//! steering (Linux `Documentation/networking/scaling.rst`, "RFS") on one
//! NIC queue. RPS spreads the queue's packets over the receiving cores; RFS
//! sends each flow's protocol processing to the core where the flow's
//! socket was last read. The kernel records that core only for inet sockets
//! that carry a flow hash, which a UDP socket does once connected
//! ([`crate::sock::UdpBatch::connected`]), so the row opens one connected
//! UDP socket per flow (all bound to the flows' destination port), gives the
//! flows to the cores in turn (flow i to core i mod n) and reads each core's
//! sockets (one epoll set) with `recvmmsg` from a thread pinned there.

use crate::knobs::Knobs;
use crate::paths::{
    kernel_iface, kernel_rows, wait_carrier, Load, Measured, RX_RING, TUNED_NETDEV_BUDGET,
};
use crate::sock::UdpBatch;
use crate::tally::Tally;
use pollnic::clock::monotonic_ns;
use pollnic::pci::PciAddress;
use pollnic_tools::frame;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// The RFS rows (`--paths`, never by default).
pub const RFS_PATHS: [&str; 2] = ["kernel-recvmmsg-rfs-2q", "kernel-recvmmsg-rfs-3q"];

/// `net.core.rps_sock_flow_entries` and the queue's `rps_flow_cnt`
/// (scaling.rst suggests 32768 for a moderately loaded server).
pub const RFS_ENTRIES: &str = "32768";

/// Per CPU, /proc/net/softnet_stat's `processed` (packets through
/// `__netif_receive_skb`, counted on the CPU that processed them: with RPS
/// and RFS the CPU a packet was steered to), `dropped` (its backlog was
/// over `net.core.netdev_max_backlog`) and `received_rps` (IPIs to process
/// a remote backlog). Index = CPU.
fn softnet() -> Vec<(u64, u64, u64)> {
    let text = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .map(|x| u64::from_str_radix(x, 16).unwrap_or(0))
                .collect();
            let at = |i: usize| f.get(i).copied().unwrap_or(0);
            (at(0), at(1), at(9))
        })
        .collect()
}

/// A core's connected sockets and the datagrams it read.
type Group = (Vec<UdpBatch>, u64);

/// /proc/net/snmp's UDP `RcvbufErrors` and `InErrors` (datagrams dropped
/// because a socket's receive buffer was full, and all UDP input errors).
fn udp_errors() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return (0, 0);
    };
    let field = |name: &str| {
        names
            .split_whitespace()
            .position(|n| n == name)
            .and_then(|i| values.split_whitespace().nth(i))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("RcvbufErrors"), field("InErrors"))
}

/// One queue (its IRQ on the first of `cores`), RPS over the first `n`
/// cores, RFS on, and connected UDP sockets read on the core of their flow.
pub fn recvmmsg_rfs_rx(
    load: Load<'_>,
    rx: PciAddress,
    cores: &[usize],
    n: usize,
) -> Result<Measured, String> {
    let (ifname, _) = kernel_iface(rx)?;
    if cores.len() < n {
        return Err(format!(
            "RFS over {n} cores needs {n} --cores, got {cores:?}"
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
    knobs.sysctl("net.core.rps_sock_flow_entries", RFS_ENTRIES)?;
    knobs.netdev(&ifname, "queues/rx-0/rps_flow_cnt", RFS_ENTRIES)?;
    knobs.sysctl("net.core.netdev_budget", TUNED_NETDEV_BUDGET)?;
    let mut groups: Vec<(Option<usize>, Group)> =
        cores.iter().map(|&c| (Some(c), (Vec::new(), 0))).collect();
    for (i, f) in load.flows.iter().enumerate() {
        let peer = std::net::SocketAddrV4::new(f.src_ip.into(), f.src_port);
        let s = UdpBatch::connected(f.dst_port, peer)
            .map_err(|e| format!("UDP port {} connected to {peer}: {e}", f.dst_port))?;
        groups[i % n].1 .0.push(s);
    }
    let flows = load.flows.len();
    let (before, udp0) = (softnet(), udp_errors());
    let rows = kernel_rows(load, groups, Some(cores), read_sockets);
    let (after, udp1) = (softnet(), udp_errors());
    let (mut m, states) = rows?;
    let set = knobs.describe();
    let restored = knobs.restore()?;
    let per_core: Vec<String> = cores
        .iter()
        .zip(&states)
        .map(|(c, (_, got))| format!("core {c} read {got}"))
        .collect();
    let steered: Vec<String> = after
        .iter()
        .zip(before.iter().chain(std::iter::repeat(&(0, 0, 0))))
        .enumerate()
        .map(|(cpu, (a, b))| {
            format!(
                "cpu{cpu} {} ({} backlog drops, {} RPS IPIs)",
                a.0.saturating_sub(b.0),
                a.1.saturating_sub(b.1),
                a.2.saturating_sub(b.2)
            )
        })
        .collect();
    m.mode = format!("irq/NAPI + RPS/RFS over {n} cores");
    m.note = format!(
        "{ifname}, 1 queue, RPS + RFS to cores {cores:?}, {flows} connected UDP sockets (flow i read on core i mod {n}), NIC RX ring {RX_RING}; knobs: {set}; {restored}; datagrams read per core: {}; packets processed per CPU (softnet_stat): {}; UDP RcvbufErrors {}, InErrors {}; {}",
        per_core.join(", "),
        steered.join(", "),
        udp1.0.saturating_sub(udp0.0),
        udp1.1.saturating_sub(udp0.1),
        m.note
    );
    Ok(m)
}

/// Read every socket of a core's group until `done`: one epoll set over
/// them (an epoll wait costs per ready socket, not per socket, as poll(2)
/// over all of them would), waiting up to 100 ms, then `recvmmsg` on each
/// ready socket until it has nothing.
fn read_sockets(state: &mut Group, t: &mut Tally, done: &AtomicBool) {
    let (socks, got) = state;
    // SAFETY: plain epoll_create1(2); the fd is owned at once below.
    let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if raw < 0 {
        eprintln!(
            "compare: epoll_create1: {}",
            std::io::Error::last_os_error()
        );
        return;
    }
    // SAFETY: `raw` is a fresh fd nobody else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(raw) };
    for (i, s) in socks.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: a live epoll fd, a live socket fd and a valid event.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, s.raw_fd(), &mut ev) } < 0
        {
            eprintln!("compare: epoll_ctl: {}", std::io::Error::last_os_error());
            return;
        }
    }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; socks.len().max(1)];
    while !done.load(Relaxed) {
        crate::gen::hold();
        // SAFETY: `events` is a live array of the length passed.
        let ready = unsafe {
            libc::epoll_wait(
                ep.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                100,
            )
        };
        let before = t.received;
        for ev in events.iter().take(ready.max(0) as usize) {
            let Some(s) = socks.get_mut(ev.u64 as usize) else {
                continue;
            };
            loop {
                let mut now = None;
                let n = s.recv_batch(|p| {
                    let now = *now.get_or_insert_with(monotonic_ns);
                    if let Some((_, tx_ns)) = frame::parse_udp_payload(p) {
                        t.frame(p.len() + frame::HEADERS_LEN, tx_ns, now);
                        *got += 1;
                    }
                });
                if n == 0 {
                    break;
                }
            }
        }
        crate::gen::received(t.received - before);
    }
}
