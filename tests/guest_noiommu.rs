//! pollnic on a guest that looks like a plain cloud VM: no virtual IOMMU
//! (`cargo xtask vm --no-iommu`), the igb ports (`POLLNIC_PORT0..3`) and
//! the virtio-net ports (`POLLNIC_VIRTIO_PORT0/1`, no
//! `VIRTIO_F_ACCESS_PLATFORM`) bound to `uio_pci_generic`, DMA with
//! physical addresses (docs/no-iommu.md). Run by `cargo xtask test` in its
//! third guest.

use pollnic::{Counter, Device, DeviceConfig, DmaAddressing, Error, Packet};
use pollnic_tests::*;
use pollnic_tools::frame::{self, Flow};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The two ports of each family that are wired back to back.
fn pairs() -> [(String, String); 2] {
    [(port(0), port(1)), (vport(0), vport(1))]
}

/// The two ways in without an IOMMU.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    /// `uio_pci_generic` (how the guest binds its ports).
    Uio,
    /// vfio-pci in VFIO's no-IOMMU mode (`pollnic bind --no-iommu`).
    VfioNoIommu,
}

/// `pollnic` with `args`, which must succeed.
fn pollnic(args: &[&str]) {
    let out = Command::new(pollnic_exe()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "pollnic {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Bind `ports` the `way` asked for (from wherever they are).
fn bind(way: Way, ports: &[&str]) {
    let driver = |p: &str| {
        std::fs::read_link(format!("/sys/bus/pci/devices/{p}/driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let want = match way {
        Way::Uio => "uio_pci_generic",
        Way::VfioNoIommu => "vfio-pci",
    };
    for p in ports {
        if driver(p).as_deref().is_some_and(|d| d != want) {
            pollnic(&["unbind", p]);
        }
    }
    let mut args = vec!["bind", "--force"];
    args.extend(match way {
        Way::Uio => ["--driver", "uio_pci_generic"].as_slice(),
        Way::VfioNoIommu => ["--no-iommu"].as_slice(),
    });
    args.extend(ports);
    pollnic(&args);
    for p in ports {
        assert_eq!(driver(p).as_deref(), Some(want), "{p}");
    }
}

/// Each way in, on each family's pair, with the pair bound that way.
fn cases() -> Vec<(Way, String, String)> {
    let mut v = Vec::new();
    for way in [Way::Uio, Way::VfioNoIommu] {
        for (a, b) in pairs() {
            v.push((way, a, b));
        }
    }
    v
}

/// Physical addresses, 256-descriptor rings (inside QEMU's virtio queue sizes).
fn config() -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(256)
        .with_tx_ring_size(256)
        .with_mempool_size(2048)
        .with_unsafe_no_iommu()
}

/// The physical address of the byte at `va`, from this process's pagemap
/// (the tests run as root), read here independently of the library.
fn phys(va: usize) -> u64 {
    let f = File::open("/proc/self/pagemap").unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (va / 4096 * 8) as u64).unwrap();
    let e = u64::from_ne_bytes(b);
    assert!(e >> 63 == 1, "page of {va:#x} not present: {e:#x}");
    (e & ((1 << 55) - 1)) * 4096 + (va % 4096) as u64
}

/// The PCI command register's bus-master bit, from sysfs `config`.
fn bus_master(addr: &str) -> bool {
    let f = File::open(format!("/sys/bus/pci/devices/{addr}/config")).unwrap();
    let mut b = [0u8; 2];
    f.read_exact_at(&mut b, 4).unwrap();
    u16::from_le_bytes(b) & 0x4 != 0
}

#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn at_start_the_guest_has_no_iommu_and_the_ports_are_on_uio_pci_generic() {
    assert_eq!(env("POLLNIC_NO_IOMMU"), "1");
    // Only the groups VFIO's no-IOMMU mode makes, if any test made one.
    for g in std::fs::read_dir("/sys/kernel/iommu_groups")
        .unwrap()
        .flatten()
    {
        let name = std::fs::read_to_string(g.path().join("name")).unwrap_or_default();
        assert_eq!(
            name.trim(),
            "vfio-noiommu",
            "{:?}: an IOMMU group: this guest has an IOMMU",
            g.path()
        );
    }
    for (a, b) in pairs() {
        for p in [a, b] {
            let driver = std::fs::read_link(format!("/sys/bus/pci/devices/{p}/driver")).unwrap();
            assert!(driver.ends_with("uio_pci_generic"), "{p}: {driver:?}");
        }
    }
}

/// Both families: 20,000 frames of 64 B and 20,000 of 1518 B on the wire
/// (60 and 1514 without the FCS), byte-identical and in order, sent =
/// received = the counters; every buffer address the NIC was given is the
/// physical address of that buffer, as pagemap tells this test.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn loopback_20000_frames_at_64_and_1518_bytes_with_physical_addresses() {
    for (way, a, b) in cases() {
        bind(way, &[&a, &b]);
        eprintln!("{way:?}: {a} {b}");
        let mut ports = Device::open_many([a.as_str(), b.as_str()], &config())
            .unwrap_or_else(|e| panic!("open {a} {b}: {e}"));
        let (x, y) = ports.split_at_mut(1);
        let (tx, rx) = (&mut x[0], &mut y[0]);
        let mut bytes = 0;
        for len in [60usize, 1514] {
            bytes += transfer_and_verify(tx, rx, 20_000, |_| len);
        }
        let (ts, rs) = (tx.stats(), rx.stats());
        assert_eq!(ts.counter(Counter::TxPackets), Some(40_000), "{a}");
        assert_eq!(rs.counter(Counter::RxPackets), Some(40_000), "{b}");
        // igb counts the FCS in its byte counters, virtio-net has none.
        let fcs = if rx.family() == pollnic::NicFamily::VirtioNet {
            0
        } else {
            4 * 40_000
        };
        assert_eq!(rs.counter(Counter::RxBytes), Some(bytes + fcs), "{b}");
        assert_eq!(ts.counter(Counter::TxBytes), Some(bytes + fcs), "{a}");
        // A buffer's device address is its physical address.
        let p = tx.mempool().alloc().unwrap();
        let off = phys(p.data().as_ptr() as usize).wrapping_sub(p.iova());
        assert!(
            off < 4096,
            "{a}: buffer at physical {:#x}, given to the NIC as {:#x}",
            phys(p.data().as_ptr() as usize),
            p.iova()
        );
        for m in tx.dma_mappings() {
            assert!(m.iova != 0 && m.len > 0, "{a}: {m}");
        }
        // No legacy interrupt left free to fire (INTx disabled at open):
        // the kernel disables a shared line nobody claims.
        let log = Command::new("dmesg").output().unwrap();
        let log = String::from_utf8_lossy(&log.stdout);
        assert!(
            !log.contains("nobody cared"),
            "{way:?} {a}: an unclaimed interrupt:\n{log}"
        );
    }
}

/// RSS over 2 queues on each family, with the `loopback` tool unchanged
/// but for `--no-iommu`: 64 flows, every frame received, both queues used.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn rss_over_two_queues_with_the_loopback_tool() {
    for (way, a, b) in cases() {
        bind(way, &[&a, &b]);
        eprintln!("{way:?}: {a} {b}");
        let out = Command::new(example_exe("loopback"))
            .args(["--tx", &a, "--rx", &b, "--queues", "2", "--cores", "0,1"])
            .args(["--flows", "64", "--count", "20000", "--rate", "2000"])
            .args([
                "--seconds",
                "60",
                "--ring-size",
                "1024",
                "--json",
                "--no-iommu",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "loopback {a} -> {b} failed:\n{text}{err}"
        );
        assert!(
            err.contains("WARNING --no-iommu"),
            "no loud line on stderr:\n{err}"
        );
        let s: serde_json::Value =
            serde_json::from_str(text.lines().last().expect("a summary line")).unwrap();
        assert_eq!(s["sent"], 20_000, "{s}");
        assert_eq!(s["received"], 20_000, "{s}");
        let queues = s["queues"].as_array().expect("queues");
        assert_eq!(queues.len(), 2, "{s}");
        for q in queues {
            assert!(
                q["frames"].as_u64().unwrap() > 1000,
                "a queue got few frames: {s}"
            );
        }
    }
}

/// Zero copy between two ports opened apart: with physical addresses every
/// port shares one address space, so port 1's received buffers go out of
/// port 0 as they are and arrive on port 1 again, byte-identical.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn buffers_cross_between_ports_with_no_copy() {
    const N: u64 = 500;
    for (way, a, b) in cases() {
        bind(way, &[&a, &b]);
        eprintln!("{way:?}: {a} {b}");
        let mut tx = Device::open(a.as_str(), &config()).unwrap();
        let mut rx = Device::open(b.as_str(), &config()).unwrap();
        assert!(tx.shares_dma_with(&rx), "{a} {b}");
        let flow = Flow::between(tx.mac(), rx.mac());
        transfer_and_verify(&mut tx, &mut rx, N, |_| 128);
        // Send N more, receive them on `rx`, and send those very buffers
        // back out of `tx`'s TX ring.
        let (tq, rq) = (tx.queue(0), rx.queue(0));
        let mut got: Vec<Packet> = Vec::new();
        let mut sent = 0u64;
        let deadline = Instant::now() + Duration::from_secs(30);
        while (got.len() as u64) < N {
            assert!(
                Instant::now() < deadline,
                "{a}: {} of {N} arrived",
                got.len()
            );
            if sent < N {
                let mut p = tq.mempool().alloc().unwrap();
                p.set_len(128).unwrap();
                assert!(frame::write(p.data_mut(), &flow, sent, sent));
                let mut one = vec![p];
                if tq.tx_burst(&mut one) == 1 {
                    sent += 1;
                }
            }
            rq.rx_burst(&mut got, 32);
        }
        let addrs: Vec<u64> = got.iter().map(Packet::iova).collect();
        let before = rq.mempool().free_count();
        // In bursts of up to 32, the receiver polled between them: QEMU's
        // igb drops what finds its RX ring full.
        let mut out = std::mem::take(&mut got);
        out.reverse();
        let mut back: Vec<Packet> = Vec::new();
        while (back.len() as u64) < N {
            assert!(
                Instant::now() < deadline,
                "{b}: {} of {N} came back",
                back.len()
            );
            let mut burst: Vec<Packet> = (0..32).map_while(|_| out.pop()).collect();
            tq.tx_burst(&mut burst);
            while let Some(p) = burst.pop() {
                out.push(p);
            }
            rq.rx_burst(&mut back, 32);
        }
        for (i, p) in back.iter().enumerate() {
            let want = frame::expected(128, &flow, i as u64, i as u64);
            assert!(p.data() == &want[..], "{b}: frame {i} differs");
        }
        drop(back);
        assert!(tq.flush_tx(Duration::from_secs(5)));
        let ts = tq.tx_stats();
        assert_eq!(ts.tx_errors, 0, "{a}: buffers of the other port refused");
        assert!(
            ts.foreign >= N,
            "{a}: {} buffers of another pool sent",
            ts.foreign
        );
        // The buffers that crossed came home to their own pool.
        assert!(rq.mempool().free_count() >= before, "{b}: buffers lost");
        assert_eq!(addrs.len() as u64, N);
    }
}

/// The files of the hugetlbfs mount at `/dev/hugepages` that hold the DMA
/// memory of process `pid`.
fn dma_files(pid: u32) -> usize {
    std::fs::read_dir("/dev/hugepages")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("pollnic-dma-{pid}-"))
        })
        .count()
}

/// SIGKILL during traffic. Without an IOMMU nothing else would stop a
/// stray DMA, so the order is: the dead process's DMA memory stays
/// allocated (it lives in hugetlbfs files, not in the process), the kernel
/// closes its `/dev/uio<N>`, on which `uio_pci_generic` clears bus
/// mastering, and only the next open (here) removes the files and gives
/// the hugepages back. Then the ports carry frames again.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn kill_9_during_traffic_frees_nothing_the_nic_could_still_reach() {
    for (way, a, b) in cases() {
        bind(way, &[&a, &b]);
        eprintln!("{way:?}: {a} {b}");
        let mut child = Command::new(example_exe("loopback"))
            .args(["--tx", &a, "--rx", &b, "--seconds", "60", "--rate", "5000"])
            .arg("--no-iommu")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Until frames flow: both ports then have bus mastering on.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !(bus_master(&a) && bus_master(&b)) {
            assert!(Instant::now() < deadline, "{a} {b}: never bus master");
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(3));
        let pid = child.id();
        let held = dma_files(pid);
        assert!(held >= 4, "{a}: {held} DMA files of the running process");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!bus_master(&a), "{a}: still bus master after SIGKILL");
        assert!(!bus_master(&b), "{b}: still bus master after SIGKILL");
        assert_eq!(
            dma_files(pid),
            held,
            "{a}: the dead process's DMA memory was freed"
        );
        let mut ports = Device::open_many([a.as_str(), b.as_str()], &config()).unwrap();
        assert_eq!(
            dma_files(pid),
            0,
            "the next open removes the dead process's files"
        );
        let (x, y) = ports.split_at_mut(1);
        transfer_and_verify(&mut x[0], &mut y[0], 1000, |_| 60);
        let mine = dma_files(std::process::id());
        assert!(mine >= 4, "{mine} DMA files of this process");
        drop(ports);
        assert_eq!(
            dma_files(std::process::id()),
            0,
            "a clean close removes its files"
        );
        assert!(!bus_master(&a), "{a}: bus master after a clean close");
    }
}

/// The refusals, each with its message.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn what_is_refused_and_what_it_says() {
    for (way, a, b) in cases() {
        bind(way, &[&a, &b]);
        // Physical addresses not asked for.
        let cfg = DeviceConfig::default();
        assert_eq!(cfg.dma, DmaAddressing::Iommu);
        match Device::open(a.as_str(), &cfg) {
            Err(e @ Error::NoIommuNotAsked { .. }) => {
                let m = e.to_string();
                assert!(
                    m.contains("--no-iommu") && m.contains("anywhere in RAM"),
                    "{m}"
                );
            }
            other => panic!("{a}: {:?}", other.map(|d| d.addr())),
        }
        let irq = config().with_rx_mode(pollnic::RxMode::Interrupt {
            timeout: Duration::from_millis(10),
        });
        match way {
            // uio_pci_generic has INTx only: refused.
            Way::Uio => {
                let e = Device::open(a.as_str(), &irq)
                    .err()
                    .expect("interrupt mode refused");
                assert!(format!("{e:#}").contains("INTx"), "{e:#}");
                // And the port says so before anyone asks.
                let dev = Device::open(a.as_str(), &config()).unwrap();
                assert!(!dev.capabilities().interrupts, "{a}: uio has no MSI-X");
            }
            // VFIO's no-IOMMU mode has MSI-X: interrupt mode works.
            Way::VfioNoIommu => {
                let mut tx = Device::open(a.as_str(), &config()).unwrap();
                assert!(tx.capabilities().interrupts, "{a}: VFIO no-IOMMU has MSI-X");
                let mut rx = Device::open(b.as_str(), &irq).unwrap();
                transfer_and_verify(&mut tx, &mut rx, 2000, |_| 60);
            }
        }
        // Without CAP_SYS_ADMIN the kernel hides physical addresses: the
        // tool says which capability, and no frame is sent.
        let out = Command::new("setpriv")
            .args(["--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--"])
            .arg(example_exe("pktgen"))
            .args(["--port", &a, "--count", "10", "--no-iommu"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{a}: pktgen ran without CAP_SYS_ADMIN:\n{err}"
        );
        assert!(err.contains("CAP_SYS_ADMIN"), "{a}: {err}");
    }
    // The virtio-net port offers no ACCESS_PLATFORM: accepted only with
    // physical addresses (above), and the IOMMU mode's refusal on a
    // vfio-pci port is covered in the vIOMMU guest (guest_virtio).
}

/// `pollnic doctor` in a VM with no IOMMU names the three ways, says this
/// is a VM (so the IOMMU is the hypervisor's to give), and that this
/// kernel offers `uio_pci_generic` (loaded) but not VFIO's no-IOMMU mode
/// (Debian's kernel is built without it); it warns, not fails.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn doctor_names_the_three_ways_on_a_vm_without_an_iommu() {
    let out = Command::new(pollnic_exe())
        .args(["doctor", &port(0), "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("doctor --json: {e}:\n{text}"));
    let findings = v["findings"].as_array().or(v.as_array()).expect("findings");
    let iommu = findings
        .iter()
        .find(|f| f["area"] == "iommu")
        .unwrap_or_else(|| panic!("no iommu finding:\n{text}"));
    assert_eq!(iommu["status"], "warn", "{iommu}");
    let detail = iommu["detail"].as_str().unwrap();
    assert!(detail.contains("this is a VM"), "{detail}");
    assert!(detail.contains("virtual IOMMU"), "{detail}");
    assert!(detail.contains("(b) VFIO no-IOMMU"), "{detail}");
    assert!(
        detail.contains("uio_pci_generic") && detail.contains("this kernel offers it (loaded)"),
        "{detail}"
    );
    let fix = iommu["fix"].as_str().unwrap();
    assert!(
        fix.contains("pollnic bind --driver uio_pci_generic") && fix.contains("--no-iommu"),
        "{fix}"
    );
}

/// `pollnic bind` to vfio-pci (the IOMMU mode) where there is no IOMMU:
/// refused before anything changes, naming the no-IOMMU ways; `pollnic
/// unbind` gives a uio port back to the kernel's driver, and the kernel
/// driver brings its interface up.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn bind_without_an_iommu_is_refused_and_unbind_gives_the_port_back() {
    let p = port(3);
    let out = Command::new(pollnic_exe())
        .args(["unbind", &p])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "unbind: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let driver = || {
        std::fs::read_link(format!("/sys/bus/pci/devices/{p}/driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    assert_eq!(
        driver().as_deref(),
        Some("igb"),
        "{p} back on the kernel's driver"
    );
    let net = std::fs::read_dir(format!("/sys/bus/pci/devices/{p}/net")).map_or(0, |d| d.count());
    assert_eq!(net, 1, "{p}: the kernel made its interface");
    let out = Command::new(pollnic_exe())
        .args(["bind", &p])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "bind to vfio-pci with no IOMMU succeeded"
    );
    assert!(
        err.contains("uio_pci_generic") && err.contains("doctor"),
        "{err}"
    );
    assert_eq!(
        driver().as_deref(),
        Some("igb"),
        "a refused bind changed nothing"
    );
    let out = Command::new(pollnic_exe())
        .args(["bind", "--force", "--driver", "uio_pci_generic", &p])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(driver().as_deref(), Some("uio_pci_generic"));
}

/// The library's own example, `rx_count`, takes `--no-iommu` too: refused
/// without it on a uio port, and with it it opens the port, runs and
/// prints the port's counters.
#[test]
#[ignore = "needs the QEMU testbed with no IOMMU: run `cargo xtask test`"]
fn the_library_example_rx_count_runs_with_no_iommu() {
    bind(Way::Uio, &[&port(0)]);
    let run = |extra: &[&str]| {
        Command::new(example_exe("rx_count"))
            .args([port(0).as_str(), "1", "1"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--no-iommu"), "{err}");
    let out = run(&["--no-iommu"]);
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{text}{err}");
    assert!(err.contains("WARNING --no-iommu"), "{err}");
    assert!(
        text.contains("ready") && text.contains("rx_packets"),
        "{text}"
    );
}
