//! DPDK's `dpdk-testpmd` as a peer: started on the port under test (bound to
//! vfio-pci; `net_e1000_igb`, or `net_virtio` on a virtio-net port), pinned,
//! in rxonly, io or macswap forwarding; stopped with Enter, its accumulated
//! counters read from its output.

use crate::paths::RX_RING;
use pollnic::pci::PciAddress;
use pollnic_tools::cputime::process_cpu_ns;
use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running testpmd, forwarding.
pub struct Testpmd {
    child: Child,
    reader: std::thread::JoinHandle<String>,
    err_reader: std::thread::JoinHandle<String>,
    cpu0: u64,
}

/// What testpmd counted, and its CPU time while forwarding.
pub struct Counts {
    /// Accumulated RX-packets over its ports.
    pub rx: u64,
    /// Accumulated TX-packets.
    pub tx: u64,
    /// CPU time of the whole process from [`Testpmd::start`]'s return to the stop, ns.
    pub cpu_ns: u64,
    /// RX bursts of its forwarding stream, empty ones included
    /// (`--record-burst-stats`: the "RX-bursts : N" of its stream's stats).
    pub rx_bursts: Option<u64>,
    /// On a virtio-net port: the receive path DPDK's virtio PMD chose, as
    /// its `set_rxtx_funcs` says it ("packed ring mergeable buffer Rx
    /// path", "mergeable buffer Rx path", ...); `None` elsewhere.
    pub virtio_rx_path: Option<String>,
}

/// The virtio PMD's "virtio: using <what> on port N" line for its receive
/// path (DPDK 22.11 `set_rxtx_funcs`, at INFO in `pmd.net.virtio.init`):
/// `<what>`, e.g. "packed ring mergeable buffer Rx path".
fn virtio_rx_path(out: &str) -> Option<String> {
    out.lines()
        .filter_map(|l| l.split_once("virtio: using ").map(|(_, r)| r))
        .find(|r| r.contains("Rx path"))
        .map(|r| r.split(" on port").next().unwrap_or(r).trim().to_string())
}

/// Whether the virtio PMD's receive path runs a packed virtqueue (its name
/// says "packed ring"; the split ring's paths do not).
pub fn is_packed_path(rx_path: &str) -> bool {
    rx_path.contains("packed ring")
}

/// The first "RX-bursts : N [...]" of testpmd's stop output (its one
/// forwarding stream's), as DPDK's `pkt_burst_stats_display` prints it.
fn rx_bursts(out: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix("RX-bursts : "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

fn last(lines: &[String], n: usize) -> String {
    lines
        .iter()
        .rev()
        .take(n)
        .cloned()
        .collect::<Vec<_>>()
        .join(" | ")
}

impl Testpmd {
    /// Start `dpdk-testpmd --forward-mode=<mode>` on `port` (one port,
    /// `--port-topology=loop`: what it receives leaves by the same port),
    /// forwarding on `core`, with `--rxd`/`--txd` [`RX_RING`]; returns once it
    /// says it is forwarding ("Press enter to exit"), which under TCG can take
    /// many seconds.
    ///
    /// # Errors
    /// testpmd missing (with what to install), exiting early, or not
    /// forwarding within 90 s, with its last output lines.
    pub fn start(port: PciAddress, core: usize, mode: &str) -> Result<Testpmd, String> {
        let bin = ["/usr/bin/dpdk-testpmd", "/usr/local/bin/dpdk-testpmd"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .ok_or("dpdk-testpmd is not installed (Debian: apt-get install dpdk-dev librte-net-e1000-23 librte-net-virtio23 librte-mempool-ring23, or run via `cargo xtask compare`)")?;
        pollnic::pci::bind_vfio(&pollnic::pci::Sysfs::default(), port)
            .map_err(|e| e.to_string())?;
        // testpmd forwards on `core`; its main lcore (which only supervises) is the other.
        let other = if core == 0 { 1 } else { 0 };
        // testpmd's stdout is a pipe here, which libc buffers by blocks:
        // "Press enter to exit" can sit in the buffer while it forwards
        // (seen on the virtio PMD, whose start-up says less). coreutils'
        // `stdbuf -oL` makes it line-buffered.
        let stdbuf = std::path::Path::new("/usr/bin/stdbuf").exists();
        let mut cmd = if stdbuf {
            let mut c = std::process::Command::new("/usr/bin/stdbuf");
            c.args(["-oL", bin]);
            c
        } else {
            std::process::Command::new(bin)
        };
        // On a virtio-net port the PMD says which ring and receive path it
        // took (an INFO line of its init log type).
        if crate::paths::is_virtio(port) {
            cmd.arg("--log-level=pmd.net.virtio.init:info");
        }
        let mut child = cmd
            .args([
                "-l",
                &format!("{other},{core}"),
                "--main-lcore",
                &other.to_string(),
                "-n",
                "1",
                "-a",
                &port.to_string(),
                // No files in hugetlbfs or /var/run/dpdk: DPDK's EAL maps its
                // hugepages from memfds that go away with the process
                // (without this, rtemap files were left in /dev/hugepages
                // after every run, holding their pages).
                "--in-memory",
                "--file-prefix",
                "pollnic-compare",
                "--",
                &format!("--forward-mode={mode}"),
                "--port-topology=loop",
                "--total-num-mbufs=16384",
                &format!("--rxd={RX_RING}"),
                &format!("--txd={RX_RING}"),
                // Every RX burst counted, empty ones too: the work figure of
                // the counting guest subtracts the empty ones (crate::cost).
                "--record-burst-stats",
                "--auto-start",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {bin}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout from testpmd")?;
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut all = String::new();
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut seen = Vec::new();
        // Its log (the EAL's and the PMDs' lines) goes to stderr: read
        // whole by a thread, quoted on a failure and searched at the stop.
        let stderr = child.stderr.take().ok_or("no stderr from testpmd")?;
        let err_reader = std::thread::spawn(move || {
            let mut err = String::new();
            let _ = std::io::BufReader::new(stderr).read_to_string(&mut err);
            err
        });
        let stderr_tail = |child: &mut Child, r: std::thread::JoinHandle<String>| {
            let _ = child.kill();
            let _ = child.wait();
            let err = r.join().unwrap_or_default();
            err.lines().rev().take(4).collect::<Vec<_>>().join(" | ")
        };
        loop {
            match lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.contains("Press enter to exit") => break,
                Ok(line) => seen.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "dpdk-testpmd exited before forwarding: {} | {}",
                        last(&seen, 3),
                        stderr_tail(&mut child, err_reader)
                    ));
                }
                Err(_) if Instant::now() > deadline => {
                    return Err(format!(
                        "dpdk-testpmd did not start forwarding within 90 s: {} | {}",
                        last(&seen, 4),
                        stderr_tail(&mut child, err_reader)
                    ));
                }
                Err(_) => {}
            }
        }
        let cpu0 = process_cpu_ns(child.id());
        crate::cost::profile_pid(child.id());
        Ok(Testpmd {
            child,
            reader,
            err_reader,
            cpu0,
        })
    }

    /// The process id (for its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stop forwarding (Enter), wait for the exit, read the accumulated
    /// RX-packets and TX-packets.
    ///
    /// # Errors
    /// The counters are not in its output (its last lines are quoted).
    pub fn stop(mut self) -> Result<Counts, String> {
        crate::cost::forget_pid(self.child.id());
        let cpu_ns = process_cpu_ns(self.child.id()).saturating_sub(self.cpu0);
        let _ = self.child.stdin.take().map(|mut i| i.write_all(b"\n"));
        let _ = self.child.wait();
        let out = self.reader.join().unwrap_or_default();
        let log = self.err_reader.join().unwrap_or_default();
        // "Accumulated forward statistics for all ports" ... "RX-packets: N" ... "TX-packets: N"
        let acc = out
            .rfind("Accumulated forward statistics")
            .map(|i| &out[i..])
            .unwrap_or(&out);
        let field = |name: &str| {
            acc.split(name)
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| {
                    format!(
                        "could not read {name} from testpmd's output:\n{}",
                        out.lines().rev().take(15).collect::<Vec<_>>().join("\n")
                    )
                })
        };
        Ok(Counts {
            rx: field("RX-packets:")?,
            tx: field("TX-packets:")?,
            cpu_ns,
            rx_bursts: rx_bursts(&out),
            virtio_rx_path: virtio_rx_path(&log).or_else(|| virtio_rx_path(&out)),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stream_rx_bursts_are_read_from_the_stop_output() {
        let out = "  ---------------------- Forward statistics for port 0  ----------------------\n\
                   RX-packets: 40200          RX-dropped: 0             RX-total: 40200\n\
                   \n  ------- Forward Stats for RX Port= 0/Queue= 0 -> TX Port= 0/Queue= 0 -------\n\
                   RX-packets: 40200          TX-packets: 0             TX-dropped: 0\n\
                   RX-bursts : 9812345 [99% of 0 pkts + 0% of 1 pkts + 1% of other]\n";
        assert_eq!(super::rx_bursts(out), Some(9_812_345));
        assert_eq!(super::rx_bursts("RX-packets: 5\n"), None);
    }

    #[test]
    fn the_virtio_pmds_receive_path_is_read_from_its_init_log() {
        let out = "set_rxtx_funcs(): virtio: using packed ring standard Tx path on port 0\n\
                   set_rxtx_funcs(): virtio: using packed ring mergeable buffer Rx path on port 0\n";
        let p = super::virtio_rx_path(out).expect("a receive path");
        assert_eq!(p, "packed ring mergeable buffer Rx path");
        assert!(super::is_packed_path(&p));
        let split = "set_rxtx_funcs(): virtio: using mergeable buffer Rx path on port 0\n";
        let p = super::virtio_rx_path(split).expect("a receive path");
        assert_eq!(p, "mergeable buffer Rx path");
        assert!(!super::is_packed_path(&p));
        assert_eq!(super::virtio_rx_path("Port 0 is up\n"), None);
    }
}
