//! CPU time from procfs, per thread, process and softirq, for the cost per
//! packet the comparison reports.

/// Clock ticks per second for procfs CPU times (USER_HZ, 100 on Linux).
const USER_HZ: u64 = 100;

/// utime + stime of a `/proc/.../stat` line, in ns (10 ms resolution).
pub fn parse_stat_cpu_ns(stat: &str) -> Option<u64> {
    // The command name may hold spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state(0) ppid(1) ... utime is field 14 overall = index 11 here.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) * 1_000_000_000 / USER_HZ)
}

/// CPU time (user + system) of the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| parse_stat_cpu_ns(&s))
        .unwrap_or(0)
}

/// CPU time of process `pid` (all its threads), in ns.
pub fn process_cpu_ns(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat_cpu_ns(&s))
        .unwrap_or(0)
}

/// Time all CPUs spent in softirq since boot (the `softirq` column of the
/// `cpu` line of /proc/stat), in ns.
pub fn softirq_ns() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    s.lines()
        .find(|l| l.starts_with("cpu "))
        .and_then(|l| l.split_whitespace().nth(7))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |t| t * 1_000_000_000 / USER_HZ)
}

/// NET_RX softirqs raised since boot, summed over CPUs (/proc/softirqs).
pub fn net_rx_softirqs() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/softirqs") else {
        return 0;
    };
    s.lines()
        .find(|l| l.trim_start().starts_with("NET_RX:"))
        .map_or(0, |l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
}

/// Softirq time of the CPUs `cores` since boot (their `cpuN` lines of
/// /proc/stat), in ns. `None` = every CPU.
pub fn softirq_ns_on(cores: Option<&[usize]>) -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    parse_softirq_ticks(&s, cores) * 1_000_000_000 / USER_HZ
}

/// Hard-interrupt time of the CPUs `cores` since boot (the `irq` column of
/// their `cpuN` lines of /proc/stat; zero unless the kernel accounts IRQ
/// time), in ns. `None` = every CPU.
pub fn hardirq_ns_on(cores: Option<&[usize]>) -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    parse_cpu_column(&s, cores, 5) * 1_000_000_000 / USER_HZ
}

/// The softirq ticks of /proc/stat's `cpuN` lines for `cores` (all if `None`).
pub fn parse_softirq_ticks(stat: &str, cores: Option<&[usize]>) -> u64 {
    parse_cpu_column(stat, cores, 6)
}

/// Column `col` (0 = user, 5 = irq, 6 = softirq) of /proc/stat's `cpuN`
/// lines for `cores` (all if `None`), summed, in ticks.
fn parse_cpu_column(stat: &str, cores: Option<&[usize]>, col: usize) -> u64 {
    stat.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu: usize = w.next()?.strip_prefix("cpu")?.parse().ok()?;
            if cores.is_some_and(|c| !c.contains(&cpu)) {
                return None;
            }
            w.nth(col)?.parse::<u64>().ok()
        })
        .sum()
}

/// CPU time of the kernel threads that do receive work outside softirq
/// context: `ksoftirqd/N` for N in `cores` (all if `None`; softirqs deferred
/// there are charged to the thread, not to /proc/stat's softirq column) and
/// every threaded-NAPI thread (`napi/<if>-<id>`, `echo 1 > threaded`). In ns.
pub fn rx_kthreads_ns(cores: Option<&[usize]>) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| is_rx_kthread(stat, cores))
        .filter_map(|stat| parse_stat_cpu_ns(&stat))
        .sum()
}

/// Whether a /proc/<pid>/stat line is `ksoftirqd/N` (N in `cores`) or `napi/...`.
pub fn is_rx_kthread(stat: &str, cores: Option<&[usize]>) -> bool {
    let (Some(a), Some(b)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let comm = &stat[a + 1..b];
    if comm.starts_with("napi/") {
        return true;
    }
    comm.strip_prefix("ksoftirqd/")
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| cores.is_none_or(|c| c.contains(&n)))
}

/// Receive CPU time outside the receiving threads, on `cores` (all if
/// `None`): hard IRQ, softirq and [`rx_kthreads_ns`]. Read before and after a row;
/// the difference is added to the threads' own time, the same sum for every
/// path.
pub fn rx_kernel_ns(cores: Option<&[usize]>) -> u64 {
    hardirq_ns_on(cores) + softirq_ns_on(cores) + rx_kthreads_ns(cores)
}

/// Interrupts taken so far, summed over every CPU, by the vectors of the PCI
/// function `bdf` (`0000:00:06.0`), from the text of /proc/interrupts: the
/// lines whose chip or name holds the address. An MSI or MSI-X vector's chip
/// is named after its function (`PCI-MSIX-0000:00:06.0`, `IR-PCI-MSIX-...`
/// behind interrupt remapping), whichever driver owns it (igb,
/// virtio-pci, vfio-pci, whose names are `vfio-msix[n](0000:00:06.0)`); a
/// legacy INTx line is shared and named after the IOAPIC, and is not counted.
pub fn port_interrupts(text: &str, bdf: &str) -> u64 {
    let cpus = text
        .lines()
        .next()
        .map_or(0, |h| h.split_whitespace().count());
    text.lines()
        .skip(1)
        .filter(|l| l.contains(bdf))
        .filter_map(|l| l.split_once(':'))
        .map(|(_, rest)| {
            rest.split_whitespace()
                .take(cpus)
                .map_while(|x| x.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// The IRQ of each RX queue of `ifname`, from the text of /proc/interrupts:
/// igb names an MSI-X vector that serves RX queue n `<if>-TxRx-<n>` when it
/// pairs RX and TX queues on one vector and `<if>-rx-<n>` when it gives each
/// its own (`igb_request_msix`; QEMU's igb offers enough vectors for the
/// latter); with MSI or INTx the port has one IRQ named after the interface.
/// virtio-net's vectors are named after the virtio device, not the interface:
/// pass `virtio<N>` (the interface's `device` link) and RX queue n is
/// `virtio<N>-input.<n>` (`virtnet_find_vqs` names the virtqueue `input.<n>`,
/// `vp_find_vqs_msix` prefixes the device name).
/// Index = queue.
pub fn parse_queue_irqs(text: &str, ifname: &str) -> Option<Vec<u32>> {
    let mut queues: Vec<(u32, u32)> = Vec::new();
    let mut single = None;
    let prefixes = [
        format!("{ifname}-TxRx-"),
        format!("{ifname}-rx-"),
        format!("{ifname}-input."),
    ];
    for line in text.lines() {
        let Some((irq, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = irq.parse::<u32>() else {
            continue;
        };
        let Some(name) = rest.split_whitespace().last() else {
            continue;
        };
        if let Some(q) = prefixes
            .iter()
            .find_map(|p| name.strip_prefix(p.as_str()))
            .and_then(|q| q.parse().ok())
        {
            queues.push((q, irq));
        } else if name == ifname {
            single = Some(irq);
        }
    }
    queues.sort();
    if queues.is_empty() {
        single.map(|i| vec![i])
    } else {
        Some(queues.into_iter().map(|(_, irq)| irq).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ports_interrupts_are_summed_over_its_vectors_and_cpus() {
        let text = "           CPU0       CPU1\n\
             24:          7          0  IR-PCI-MSIX-0000:00:06.0    0-edge      eth1\n\
             25:       1200          3  IR-PCI-MSIX-0000:00:06.0    1-edge      eth1-TxRx-0\n\
             26:          5          1  IR-PCI-MSIX-0000:00:07.0    1-edge      virtio2-input.0\n\
             40:         10         20  vfio-msix[0](0000:00:08.0)\n\
             11:        900          0  IO-APIC   11-fasteoi   uhci_hcd\n\
            LOC:      50000      40000   Local timer interrupts\n";
        assert_eq!(port_interrupts(text, "0000:00:06.0"), 1210);
        assert_eq!(port_interrupts(text, "0000:00:07.0"), 6);
        assert_eq!(port_interrupts(text, "0000:00:08.0"), 30);
        assert_eq!(port_interrupts(text, "0000:00:09.0"), 0);
    }

    #[test]
    fn msix_queue_vectors_are_found_by_name_and_ordered_by_queue() {
        let text = "           CPU0       CPU1\n\
             24:          0          0  IR-PCI-MSIX-0000:00:06.0    0-edge      eth1\n\
             26:        900         10  IR-PCI-MSIX-0000:00:06.0    2-edge      eth1-TxRx-1\n\
             25:       1200          3  IR-PCI-MSIX-0000:00:06.0    1-edge      eth1-TxRx-0\n\
             27:          5          0  IR-PCI-MSIX-0000:00:08.0    1-edge      eth10-TxRx-0\n\
            NMI:          0          0   Non-maskable interrupts\n";
        assert_eq!(parse_queue_irqs(text, "eth1"), Some(vec![25, 26]));
        assert_eq!(parse_queue_irqs(text, "eth10"), Some(vec![27]));
        let split = " 46:  1  0  IR-PCI-MSIX-0000:00:0c.0  0-edge  eth3\n\
                      47:  0  0  IR-PCI-MSIX-0000:00:0c.0  1-edge  eth3-rx-0\n\
                      48:  0  0  IR-PCI-MSIX-0000:00:0c.0  2-edge  eth3-rx-1\n\
                      49:  0  5  IR-PCI-MSIX-0000:00:0c.0  3-edge  eth3-tx-0\n";
        assert_eq!(parse_queue_irqs(split, "eth3"), Some(vec![47, 48]));
        let virtio = " 40:  0  0  IR-PCI-MSIX-0000:00:10.0  0-edge  virtio4-config\n\
                       41:  7  0  IR-PCI-MSIX-0000:00:10.0  1-edge  virtio4-input.0\n\
                       42:  3  0  IR-PCI-MSIX-0000:00:10.0  2-edge  virtio4-output.0\n";
        assert_eq!(parse_queue_irqs(virtio, "virtio4"), Some(vec![41]));
        assert_eq!(parse_queue_irqs(virtio, "virtio40"), None);
        let msi = " 30:  5  0  IR-PCI-MSI-0000:00:06.0  0-edge  eth2\n";
        assert_eq!(parse_queue_irqs(msi, "eth2"), Some(vec![30]));
        assert_eq!(parse_queue_irqs(msi, "eth3"), None);
    }

    #[test]
    fn softirq_per_cpu_and_receive_kthreads() {
        let stat = "cpu  10 0 20 300 0 5 70 0 0 0\n\
                    cpu0 5 0 10 150 0 2 30 0 0 0\n\
                    cpu1 5 0 10 150 0 3 40 0 0 0\n\
                    intr 123\n";
        assert_eq!(parse_softirq_ticks(stat, None), 70);
        assert_eq!(parse_softirq_ticks(stat, Some(&[1])), 40);
        assert_eq!(parse_softirq_ticks(stat, Some(&[0, 1])), 70);
        assert_eq!(parse_cpu_column(stat, Some(&[1]), 5), 3);
        let k = |comm: &str| {
            format!("15 ({comm}) S 2 0 0 0 -1 69238848 0 0 0 0 7 9 0 0 20 0 1 0 5 0 0")
        };
        assert!(is_rx_kthread(&k("ksoftirqd/1"), Some(&[1])));
        assert!(!is_rx_kthread(&k("ksoftirqd/0"), Some(&[1])));
        assert!(is_rx_kthread(&k("ksoftirqd/0"), None));
        assert!(is_rx_kthread(&k("napi/eth1-8193"), Some(&[0])));
        assert!(!is_rx_kthread(&k("kworker/0:1"), None));
        assert_eq!(
            parse_stat_cpu_ns(&k("napi/eth1-8193")),
            Some(16 * 10_000_000)
        );
    }
    #[test]
    fn stat_parsing() {
        let line = "1234 (my prog) R 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_stat_cpu_ns(line), Some(300 * 10_000_000));
        let _ = thread_cpu_ns();
        let _ = softirq_ns();
    }
}
