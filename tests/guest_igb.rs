//! End-to-end tests on QEMU's emulated igb (82576) over real VFIO with a
//! virtual IOMMU. They run inside the guest via `cargo xtask test`; on the host
//! they are listed as ignored.

use pollnic::pci::{self, PciAddress, Sysfs};
use pollnic::{DataPath, DataPathChoice, Device, DeviceConfig, Error};
use pollnic_tests::*;
use pollnic_tools::frame;
use std::time::Duration;

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn link_comes_up_and_mac_matches_qemu_command_line() {
    for i in 0..2 {
        let dev = Device::open(port(i), &DeviceConfig::default()).expect("open");
        let link = dev.link();
        assert!(link.up, "port {i}: link down");
        assert_eq!(
            dev.mac_string(),
            env(&format!("POLLNIC_PORT{i}_MAC")).to_lowercase(),
            "port {i}: MAC"
        );
        assert_eq!(link.speed_mbps, 1000);
    }
}

/// Each flow control mode, programmed on QEMU's igb and read back from
/// its registers (CTRL.RFCE/TFCE); frames still flow in every mode. QEMU
/// sets RFCE and TFCE when its autonegotiation completes, so this fails if
/// the mode is not forced again after link up. What the thresholds do is
/// only checked on the software 82576 (`tests/host_igb_model.rs`).
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn each_flow_control_mode_reads_back_and_traffic_flows() {
    use pollnic::config::FlowControl;
    for mode in [
        FlowControl::None,
        FlowControl::Rx,
        FlowControl::Tx,
        FlowControl::Full,
    ] {
        let cfg = small_config().with_flow_control(mode);
        let mut tx = Device::open(port(0), &cfg).expect("open port 0");
        let mut rx = Device::open(port(1), &cfg).expect("open port 1");
        assert_eq!((tx.flow_control(), rx.flow_control()), (mode, mode));
        transfer_and_verify(&mut tx, &mut rx, 200, |_| 60);
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn ten_thousand_mixed_frames_arrive_identical_in_order_and_counters_agree() {
    let mut tx = Device::open(port(0), &small_config()).expect("open port 0");
    let mut rx = Device::open(port(1), &small_config()).expect("open port 1");
    let n = 10_000;
    let bytes = transfer_and_verify(&mut tx, &mut rx, n, frame::mixed_len);
    let (txs, rxs) = (tx.stats().clone(), rx.stats().clone());
    assert_eq!(txs.get("tx_packets"), Some(n), "sender tx_packets (GPTC)");
    assert_eq!(rxs.get("rx_packets"), Some(n), "receiver rx_packets (GPRC)");
    // GORC/GOTC count destination address through CRC: 4 FCS bytes per frame.
    assert_eq!(
        rxs.get("rx_bytes"),
        Some(bytes + 4 * n),
        "receiver rx_bytes (GORC)"
    );
    assert_eq!(
        txs.get("tx_bytes"),
        Some(bytes + 4 * n),
        "sender tx_bytes (GOTC)"
    );
    assert_eq!(rx.queues()[0].rx_stats().packets, n);
    assert_eq!(rx.queues()[0].rx_stats().rx_errors, 0);
    assert_eq!(tx.queues()[0].tx_stats().packets, n);
}

/// The rest of the suite runs the default (`DataPathChoice::Auto`: the
/// vector burst loops on x86-64); this one forces the scalar loops on both
/// ports, so CI covers both paths on QEMU's igb without running the suite
/// twice.
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn frames_arrive_identical_on_the_forced_scalar_path_too() {
    let scalar = small_config().with_data_path(DataPathChoice::Scalar);
    let mut tx = Device::open(port(0), &scalar).expect("open port 0");
    let mut rx = Device::open(port(1), &scalar).expect("open port 1");
    assert_eq!(tx.queue(0).data_path(), DataPath::Scalar);
    assert_eq!(rx.queue(0).data_path(), DataPath::Scalar);
    let n = 3_000;
    transfer_and_verify(&mut tx, &mut rx, n, frame::mixed_len);
    assert_eq!(rx.queues()[0].rx_stats().packets, n);
    assert_eq!(rx.queues()[0].rx_stats().rx_errors, 0);
    assert_eq!(tx.queues()[0].tx_stats().packets, n);
    drop((tx, rx));
    // And the default picks the vector loops on this (x86-64) guest.
    let mut d = Device::open(port(0), &small_config()).expect("open port 0");
    assert_eq!(d.queue(0).data_path(), DataPath::detect());
    assert_eq!(d.queue(0).data_path(), DataPath::Vector);
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn bad_inputs_give_clear_errors_and_leave_the_device_usable() {
    let cfg = DeviceConfig::default();
    // A PCI address that does not exist, and one that is not an address.
    let e = Device::open("0000:00:1f.6", &cfg)
        .err()
        .expect("no such device");
    assert!(e.to_string().contains("no such PCI device"), "{e}");
    let e = Device::open("not-an-address", &cfg)
        .err()
        .expect("bad address");
    assert!(matches!(e, Error::Pci(_)), "{e}");

    // Invalid ring sizes are refused before the device is touched.
    for size in [7, 100, 16, 520, 8192] {
        let c = DeviceConfig::default().with_rx_ring_size(size);
        let e = Device::open(port(0), &c).err().expect("bad ring size");
        assert!(
            matches!(
                e,
                Error::Config(pollnic::ConfigError::InvalidRingSize { .. })
            ),
            "{size}: {e}"
        );
        assert!(
            e.to_string().contains("power of two between 32 and 4096"),
            "{e}"
        );
    }

    // A device still bound to the kernel igb driver.
    let sysfs = Sysfs::default();
    let addr: PciAddress = port(1).parse().unwrap();
    let back = pci::unbind_vfio(&sysfs, addr).expect("give port 1 back to igb");
    let e = Device::open(port(1), &cfg).err().expect("bound to igb");
    pci::bind_vfio(&sysfs, addr).expect("rebind port 1 to vfio-pci");
    let msg = e.to_string();
    assert!(matches!(e, Error::NotBoundToVfio { .. }), "{msg}");
    assert!(
        msg.contains("igb") && msg.contains("pollnic bind"),
        "{msg} (unbind said: {back:?})"
    );

    // No hugepages reserved.
    let nr = pollnic_rings::dma::NR_HUGEPAGES;
    let before = std::fs::read_to_string(nr).unwrap();
    std::fs::write(nr, "0").unwrap();
    let r = Device::open(port(0), &cfg);
    std::fs::write(nr, before.trim()).unwrap();
    let e = r.err().expect("no hugepages");
    assert!(
        matches!(e, Error::Dma(pollnic_rings::DmaError::NoHugepages { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("nr_hugepages"), "{e}");

    // After all that, both ports still work.
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &small_config()).unwrap();
    transfer_and_verify(&mut tx, &mut rx, 200, |_| 60);
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn up_traffic_down_twice_in_one_process() {
    for round in 0..2 {
        let mut tx =
            Device::open(port(0), &small_config()).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let mut rx = Device::open(port(1), &small_config()).unwrap();
        transfer_and_verify(&mut tx, &mut rx, 1000, |s| frame::mixed_len(s + round));
        // A packet held past the device's shutdown stays valid memory.
        let mut keep = Vec::new();
        let mut p = tx.mempool().alloc().unwrap();
        p.set_len(60).unwrap();
        keep.push(p);
        drop(tx);
        drop(rx);
        assert_eq!(keep[0].len(), 60);
    }
}

/// Run by `up_traffic_down_in_two_processes` as a child process.
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn child_one_cycle() {
    if std::env::var("POLLNIC_CHILD").is_err() {
        return; // only meaningful when spawned by the parent test
    }
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &small_config()).unwrap();
    transfer_and_verify(&mut tx, &mut rx, 500, |_| 1514);
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn up_traffic_down_in_two_processes() {
    for round in 0..2 {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "child_one_cycle", "--nocapture"])
            .env("POLLNIC_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child {round} failed:\n{text}");
        assert!(
            text.contains("1 passed"),
            "child {round} ran no test:\n{text}"
        );
    }
    // The device was left quiescent and reusable.
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &small_config()).unwrap();
    transfer_and_verify(&mut tx, &mut rx, 100, |_| 60);
}

/// Run by `ctrl_c_and_panic_shut_the_device_down_in_order` as a child
/// process: traffic until SIGINT (POLLNIC_CHILD=sigint) or a panic mid-traffic
/// (POLLNIC_CHILD=panic).
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn child_traffic_until_stopped() {
    let Ok(mode) = std::env::var("POLLNIC_CHILD") else {
        return;
    };
    let stop = pollnic_tools::signal::stop_flag().unwrap();
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &small_config()).unwrap();
    println!("child: traffic running");
    let mut rounds = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        transfer_and_verify(&mut tx, &mut rx, 32, |_| 60);
        rounds += 1;
        if mode == "panic" && rounds == 20 {
            panic!("deliberate panic with traffic in flight");
        }
    }
    println!("child: stopped cleanly after {rounds} rounds");
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn ctrl_c_and_panic_shut_the_device_down_in_order() {
    use std::io::{BufRead, BufReader};
    for mode in ["sigint", "panic"] {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "child_traffic_until_stopped",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("POLLNIC_CHILD", mode)
            .env("RUST_BACKTRACE", "0")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 && !line.contains("traffic running") {
            line.clear();
        }
        assert!(
            line.contains("traffic running"),
            "{mode}: child never started traffic"
        );
        if mode == "sigint" {
            std::thread::sleep(Duration::from_millis(500));
            let rc = std::process::Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(rc.success());
        }
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        let status = child.wait().unwrap();
        match mode {
            "sigint" => {
                assert!(status.success(), "SIGINT: child failed: {rest}");
                assert!(rest.contains("stopped cleanly"), "SIGINT: {rest}");
            }
            _ => {
                assert!(!status.success(), "panic: child should fail");
                assert!(
                    err.contains("deliberate panic with traffic in flight"),
                    "panic: {err}"
                );
            }
        }
        // Either way the ports are quiescent and immediately reusable.
        let mut tx = Device::open(port(0), &small_config()).unwrap();
        let mut rx = Device::open(port(1), &small_config()).unwrap();
        transfer_and_verify(&mut tx, &mut rx, 100, |_| 60);
    }
}
