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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn stat_parsing() {
        let line = "1234 (my prog) R 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_stat_cpu_ns(line), Some(300 * 10_000_000));
        let _ = thread_cpu_ns();
        let _ = softirq_ns();
    }
}
