//! Processes that die, in the QEMU igb testbed (`cargo xtask test`): a
//! process killed with SIGKILL during traffic, a second process on a port in
//! use, and Ctrl-C during TX followed by `pollnic unbind`. Each runs a child
//! process (this test executable again, with `POLLNIC_DIE_CHILD` set) that
//! owns the ports.

use pollnic::pci::{PciAddress, Sysfs};
use pollnic::{Device, Error};
use pollnic_tests::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Run by the tests below as a child process. `POLLNIC_DIE_CHILD=traffic`:
/// verified traffic from port 0 to port 1 in rounds of 32 frames, printing
/// `rounds N` every 10 rounds; `=tx`: port 0 sends as fast as it can. Both
/// print `traffic running` first and stop cleanly on SIGINT.
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn child_until_signalled() {
    let Ok(mode) = std::env::var("POLLNIC_DIE_CHILD") else {
        return; // only meaningful when spawned by a test below
    };
    let stop = pollnic_tools::signal::stop_flag().unwrap();
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rounds = 0u64;
    if mode == "traffic" {
        let mut rx = Device::open(port(1), &small_config()).unwrap();
        println!("traffic running");
        while !stop.load(Relaxed) {
            transfer_and_verify(&mut tx, &mut rx, 32, |_| 60);
            rounds += 1;
            if rounds % 10 == 0 {
                println!("rounds {rounds}");
            }
        }
    } else {
        let mut burst = Vec::with_capacity(32);
        println!("traffic running");
        while !stop.load(Relaxed) {
            while burst.len() < 32 {
                let Some(mut p) = tx.mempool().alloc() else {
                    break;
                };
                p.set_len(60).unwrap();
                burst.push(p);
            }
            tx.queue(0).tx_burst(&mut burst);
            rounds += 1;
        }
    }
    println!("stopped cleanly after {rounds} rounds");
}

/// This executable as a child in `mode`, once it printed `traffic running`.
fn spawn_child(mode: &str) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_until_signalled",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("POLLNIC_DIE_CHILD", mode)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains("traffic running") {
        line.clear();
    }
    assert!(
        line.contains("traffic running"),
        "{mode} child never started traffic"
    );
    (child, out)
}

fn signal(child: &Child, sig: &str) {
    let rc = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(rc.success(), "kill {sig} failed");
}

/// The next `rounds N` line of a traffic child (None at its end).
fn next_rounds(out: &mut BufReader<ChildStdout>) -> Option<u64> {
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 {
        if let Some(n) = line.trim().strip_prefix("rounds ") {
            return n.parse().ok();
        }
        line.clear();
    }
    None
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn kill_9_during_traffic_then_a_new_process_moves_traffic() {
    let (mut child, mut out) = spawn_child("traffic");
    assert!(
        next_rounds(&mut out).is_some(),
        "no traffic before the kill"
    );
    signal(&child, "-KILL");
    let status = child.wait().unwrap();
    assert!(!status.success(), "SIGKILL: {status}");
    // The killed process left DMA running and nothing shut down; the kernel
    // closed its VFIO files. A new process (this one) opens both ports and
    // moves verified traffic.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut tx = loop {
        match Device::open(port(0), &small_config()) {
            Ok(d) => break d,
            // The kernel may still be releasing the dead process's group.
            Err(Error::DeviceBusy { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => panic!("re-open after kill -9: {e}"),
        }
    };
    let mut rx = Device::open(port(1), &small_config()).unwrap();
    transfer_and_verify(&mut tx, &mut rx, 2000, pollnic_tools::frame::mixed_len);
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn a_second_process_gets_in_use_and_the_first_runs_undisturbed() {
    let (mut child, mut out) = spawn_child("traffic");
    let before = next_rounds(&mut out).expect("the child moves traffic");
    for p in [0, 1] {
        let e = Device::open(port(p), &small_config())
            .err()
            .expect("a port in use must not open twice");
        let msg = e.to_string();
        assert!(matches!(e, Error::DeviceBusy { .. }), "port {p}: {msg}");
        assert!(
            msg.contains("in use by another process") && msg.contains("fuser /dev/vfio"),
            "port {p}: {msg}"
        );
    }
    // The child keeps verifying every frame, byte for byte, in order: any
    // disturbance (a reset, a ring taken over) fails it.
    let mut after = before;
    for _ in 0..3 {
        after = next_rounds(&mut out).expect("the child stopped moving traffic");
    }
    assert!(after > before);
    signal(&child, "-INT");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the first process failed: {status} {rest}"
    );
    assert!(rest.contains("stopped cleanly"), "{rest}");
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn ctrl_c_during_tx_then_unbind_gives_the_kernel_interface_back() {
    let (mut child, mut out) = spawn_child("tx");
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "-INT");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "Ctrl-C: {status} {rest}");
    assert!(rest.contains("stopped cleanly"), "{rest}");

    // `pollnic unbind` (the CLI, as a user runs it) gives port 0 back to igb.
    let addr: PciAddress = port(0).parse().unwrap();
    let cli = pollnic_cli();
    let out = Command::new(&cli)
        .args(["unbind", &port(0)])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pollnic unbind: {text}");
    let dir = Sysfs::default().device_dir(addr);
    let driver = std::fs::read_link(dir.join("driver")).ok();
    let ifaces: Vec<String> = std::fs::read_dir(dir.join("net"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    // The interface is there for `ip` too (before it goes away again).
    let link = ifaces.first().map(|i| {
        Command::new("ip")
            .args(["link", "show", i])
            .output()
            .unwrap()
    });
    // Give it back to vfio-pci before asserting, so the testbed stays usable.
    let rebind = Command::new(&cli)
        .args(["bind", &port(0)])
        .output()
        .unwrap();
    assert!(
        driver.as_ref().is_some_and(|d| d.ends_with("igb")),
        "after unbind port 0 is on {driver:?}: {text}"
    );
    assert_eq!(
        ifaces.len(),
        1,
        "kernel interface of port 0: {ifaces:?} ({text})"
    );
    let link = link.unwrap();
    assert!(
        link.status.success() && String::from_utf8_lossy(&link.stdout).contains(&ifaces[0]),
        "ip link show {}: {}",
        ifaces[0],
        String::from_utf8_lossy(&link.stderr)
    );
    assert!(
        rebind.status.success(),
        "pollnic bind: {}",
        String::from_utf8_lossy(&rebind.stderr)
    );
    // And pollnic drives it again.
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &small_config()).unwrap();
    transfer_and_verify(&mut tx, &mut rx, 200, |_| 60);
}

/// The debug `pollnic` CLI (xtask builds it before the guest tests):
/// target/debug/deps/<test> -> target/debug/pollnic.
fn pollnic_cli() -> std::path::PathBuf {
    let me = std::env::current_exe().unwrap();
    let cli = me
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("pollnic");
    assert!(
        cli.is_file(),
        "{} not built (`cargo build -p pollnic --bin pollnic`)",
        cli.display()
    );
    cli
}

/// `loopback` with `--seconds 0` (until a signal), started so that its
/// receive thread polls and its reporter prints; `env` added to its
/// environment. Its stdout and stderr are piped.
fn loopback(env: &[(&str, &str)]) -> Child {
    let mut c = Command::new(example_exe("loopback"));
    c.args([
        "--tx",
        &port(0),
        "--rx",
        &port(1),
        "--seconds",
        "0",
        "--rate",
        "2000",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("start loopback")
}

/// Wait up to `limit` for `child` to exit; kills it and fails when it does not.
fn exits_within(mut child: Child, limit: Duration, what: &str) -> std::process::Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {limit:?} (killed); stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// A panic in loopback's sender thread used to leave the reporter printing
/// `tx 0 pps | rx 0 pps` forever, deaf to SIGINT. Now every loop stops, the
/// devices are shut down, and the process exits 101 with the panic message;
/// both ports open again at once.
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn a_panic_in_a_worker_thread_ends_the_process_cleanly() {
    let child = loopback(&[("POLLNIC_INJECT_PANIC", "loopback-sender")]);
    let out = exits_within(
        child,
        Duration::from_secs(60),
        "loopback with a panicking sender",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(101), "stderr:\n{err}");
    assert!(err.contains("injected panic in loopback-sender"), "{err}");
    assert!(err.contains("the devices were shut down cleanly"), "{err}");
    for i in [0, 1] {
        Device::open(port(i), &small_config())
            .unwrap_or_else(|e| panic!("port {i} after the panic: {e}"));
    }
}

/// Two SIGINTs within 1 s (as GNU `timeout` forwards a Ctrl-C) count as one:
/// the summary comes, naming Ctrl-C; SIGTERM is named as itself.
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn two_quick_sigints_give_a_summary_and_sigterm_is_named() {
    for (signals, name) in [
        (&["-INT", "-INT"][..], "Ctrl-C (SIGINT)"),
        (&["-TERM"][..], "SIGTERM"),
    ] {
        let mut child = loopback(&[]);
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        // Wait for the first live line: the receive thread polls, traffic runs.
        let mut line = String::new();
        while stdout.read_line(&mut line).unwrap() > 0 && !line.contains("[  1 s]") {
            line.clear();
        }
        for s in signals {
            signal(&child, s);
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        let out = exits_within(child, Duration::from_secs(60), "loopback after a signal");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{signals:?}: stderr:\n{err}\nstdout:\n{rest}"
        );
        assert!(
            rest.contains(&format!(
                "(interrupted by {name}: the device was shut down cleanly)"
            )),
            "{signals:?}:\n{rest}"
        );
        assert!(
            rest.contains("--- summary"),
            "{signals:?}: no summary:\n{rest}"
        );
    }
}
