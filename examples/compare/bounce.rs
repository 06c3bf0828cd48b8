//! Forwarding rows (`--forward`): the generator on port 0 sends to port 1,
//! where the path under test forwards every frame back out of port 1 (one
//! port, RX queue 0 -> TX queue 0, like testpmd with `--port-topology=loop`),
//! and port 0 receives it again in the generator's own pinned thread. Loss
//! and latency are round trip: port 0 -> port 1 -> forwarder -> port 1 -> port 0.
//!
//! Why this works on the testbed's wiring: ports 0 and 1 are the only two
//! ports of QEMU hub 0, and a hub delivers a frame to every port but the one
//! it came from (QEMU `net/hub.c`, `net_hub_receive`). So what port 0 sends
//! reaches only port 1, and what port 1 sends back reaches only port 0: no
//! frame is seen twice and nothing loops, as long as port 0 itself forwards
//! nothing (it only counts). Port 0 is opened promiscuous, because in `io`
//! mode the frames come back still addressed to port 1's MAC; in `macswap`
//! mode they come back addressed to port 0. Every returned frame's MACs are
//! checked against what the mode must make of them.

use crate::gen::round_trip;
use crate::paths::{Load, Measured, DRAIN};
use crate::testpmd::Testpmd;
use pollnic::pci::{self, PciAddress, Sysfs};
use pollnic_tools::cputime::process_cpu_ns;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The forwarding modes, as testpmd and pollnic's `fwd` name them.
pub const MODES: [&str; 2] = ["io", "macswap"];

/// The (destination, source) MACs a returned frame carries after `mode`:
/// io leaves the generator's frame as it was; macswap swaps the two.
pub fn expected_macs(mode: &str, gen_mac: [u8; 6], port1_mac: [u8; 6]) -> ([u8; 6], [u8; 6]) {
    if mode == "macswap" {
        (gen_mac, port1_mac)
    } else {
        (port1_mac, gen_mac)
    }
}

/// Run the generator with round-trip receive against an already forwarding
/// peer; CPU is the forwarder process's over the window.
fn bounce(
    load: Load<'_>,
    expect: ([u8; 6], [u8; 6]),
    pid: u32,
) -> (crate::gen::Offered, crate::gen::Returned, u64) {
    let cpu0 = process_cpu_ns(pid);
    let (mut offered, back) = round_trip(
        load.gen, load.flows, load.size, load.rate, load.secs, load.stop, DRAIN, expect,
    );
    // Counted: every forwarder here busy-polls in a process of its own whose
    // loop is not marked, so its empty polls cannot be told from its work;
    // the row keeps all its instructions, MMIO and interrupts per packet
    // (exact) and has no work figure.
    if let Some(w) = offered.window.as_mut() {
        w.external = Some(Err(
            "the forwarder busy-polls in its own process, unmarked: its empty polls cannot be taken out \
             (instructions_per_packet holds them)"
                .into(),
        ));
    }
    (offered, back, process_cpu_ns(pid).saturating_sub(cpu0))
}

fn finish(
    offered: crate::gen::Offered,
    back: crate::gen::Returned,
    cpu_ns: u64,
    mode: &str,
    (received, sent): (u64, u64),
    fwd_note: String,
) -> Measured {
    let wrong_macs = back.wrong_macs;
    let mut tally = back.tally;
    tally.cpu_ns = cpu_ns;
    Measured {
        wakeups: None,
        irq_state: None,
        virtio_rx_path: None,
        fwd: Some(crate::paths::FwdCounts {
            received,
            sent,
            wrong_macs,
        }),
        offered,
        tally,
        note: format!(
            "{fwd_note}; returned with wrong MACs for {mode}: {}; port 0 (the generator's receive loop):",
            back.wrong_macs
        ),
        mode: mode.to_string(),
    }
}

/// pollnic's `fwd` example (built next to `compare`) on `port1`, one queue
/// on `core`, 512-descriptor rings, stopped with one SIGINT.
pub fn pollnic_fwd(
    load: Load<'_>,
    port1: PciAddress,
    mode: &str,
    core: usize,
    expect: ([u8; 6], [u8; 6]),
) -> Result<Measured, String> {
    let me = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let exe = me.with_file_name("fwd");
    if !exe.is_file() {
        return Err(format!(
            "{} is not built: run `cargo build --release --examples` (`cargo xtask compare` builds it)",
            exe.display()
        ));
    }
    pci::bind_vfio(&Sysfs::default(), port1).map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(&exe)
        .args(["--ports", &port1.to_string(), "--mode", mode])
        .args(["--cores", &core.to_string()])
        .args(["--ring-size", &crate::paths::RX_RING.to_string()])
        .args(["--seconds", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout from fwd")?;
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // fwd prints its banner once the port is open and the link is up.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match lines.recv_timeout(Duration::from_millis(200)) {
            Ok(l) if l.starts_with("pollnic fwd:") => break,
            Ok(_) => {}
            Err(e) => {
                let gone = matches!(e, std::sync::mpsc::RecvTimeoutError::Disconnected);
                if gone || Instant::now() > deadline {
                    stop_child(&mut child);
                    let mut err = String::new();
                    use std::io::Read;
                    child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                    return Err(format!(
                        "fwd {}: {}",
                        if gone {
                            "exited before forwarding"
                        } else {
                            "did not start within 60 s"
                        },
                        err.trim()
                    ));
                }
            }
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let (offered, back, cpu) = bounce(load, expect, child.id());
    stop_child(&mut child);
    let out = reader.join().unwrap_or_default();
    // "  received   N frames, forwarded M, tx_dropped ..." and "... max poll gap X ms"
    let num_after = |key: &str| {
        out.rfind(key)
            .and_then(|i| out[i + key.len()..].split_whitespace().next())
            .map(|w| w.trim_end_matches(','))
            .and_then(|w| w.parse::<f64>().ok())
    };
    let (Some(rx), Some(fwd)) = (num_after("received "), num_after("forwarded ")) else {
        return Err(format!(
            "could not read fwd's summary:\n{}",
            out.lines().rev().take(12).collect::<Vec<_>>().join("\n")
        ));
    };
    let gap = num_after("max poll gap ")
        .map_or(String::new(), |g| format!(", its max poll gap {g:.1} ms"));
    let note = format!("fwd on port 1 (core {core}): received {rx:.0}, forwarded {fwd:.0}{gap}");
    Ok(finish(
        offered,
        back,
        cpu,
        mode,
        (rx as u64, fwd as u64),
        note,
    ))
}

/// One SIGINT (fwd's clean stop), then wait; kill if it does not exit in 10 s.
fn stop_child(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `dpdk-testpmd --forward-mode=<mode> --port-topology=loop` on `port1`.
pub fn testpmd_fwd(
    load: Load<'_>,
    port1: PciAddress,
    mode: &str,
    core: usize,
    expect: ([u8; 6], [u8; 6]),
) -> Result<Measured, String> {
    let tp = Testpmd::start(port1, core, mode)?;
    let (offered, back, _) = bounce(load, expect, tp.pid());
    let c = tp.stop()?;
    let note = format!(
        "testpmd on port 1 (core {core}): RX-packets {}, TX-packets {}",
        c.rx, c.tx
    );
    Ok(finish(offered, back, c.cpu_ns, mode, (c.rx, c.tx), note))
}
