//! Isolation and safe tooling (issue 11, part 7), in the QEMU guest:
//!
//! - the VFIO DMA mappings a `Device` made are exactly its rings and
//!   mempools, as `Device::dma_mappings` lists them, and the kernel agrees:
//!   VFIO's type1 IOMMU driver accounts every page it pins in the process's
//!   `locked_vm` (`VmLck` in `/proc/self/status`; `vfio_lock_acct` in
//!   `drivers/vfio/vfio_iommu_type1.c`), so the pinned bytes must equal the
//!   listed bytes, and drop back to where they were when the device closes.
//!   (The guest kernel has no `CONFIG_IOMMU_DEBUGFS`, so the intel-iommu
//!   page tables cannot be read from debugfs here.)
//! - `pollnic bind` refuses a port whose kernel interface is up with an
//!   address and a route, names them and what to run, changes nothing, and
//!   binds once the address is gone. (The IOMMU-group half of the guard is in
//!   `guest_doctor`, which owns the testbed's shared group.)

use pollnic::dma::DmaPurpose;
use pollnic::{Device, DeviceConfig};
use pollnic_tests::*;
use std::process::Command;
use std::time::{Duration, Instant};

static POLLNIC: std::sync::LazyLock<String> = std::sync::LazyLock::new(pollnic_tests::pollnic_exe);
const HUGEPAGE: usize = 2 << 20;

/// `VmLck` of this process, in KiB.
fn vm_lck_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmLck in /proc/self/status")
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn dma_mappings_are_exactly_the_rings_and_mempools() {
    let before = vm_lck_kib();
    let cfg = DeviceConfig::default().with_queues(2);
    let dev = Device::open(port(0), &cfg).expect("open port 0 with 2 queues");
    let maps = dev.dma_mappings();
    for m in &maps {
        println!("{m}");
    }
    // Exactly one mempool and two descriptor rings per queue, nothing else.
    let (pool_pages, _) = cfg.hugepages_per_queue();
    let mut want = Vec::new();
    for q in 0..cfg.queues {
        want.push((DmaPurpose::Mempool(q), pool_pages * HUGEPAGE));
        want.push((DmaPurpose::RxRing(q), HUGEPAGE));
        want.push((DmaPurpose::TxRing(q), HUGEPAGE));
    }
    let mut have: Vec<(DmaPurpose, usize)> = maps.iter().map(|m| (m.purpose, m.len)).collect();
    let key = |p: &(DmaPurpose, usize)| format!("{:?}", p.0);
    have.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(have, want, "the mappings are the rings and mempools");
    // Disjoint IOVA ranges.
    for w in maps.windows(2) {
        assert!(
            w[0].iova + w[0].len as u64 <= w[1].iova,
            "overlap: {} / {}",
            w[0],
            w[1]
        );
    }
    // The kernel pinned exactly the listed bytes.
    let listed: usize = maps.iter().map(|m| m.len).sum();
    let pinned = (vm_lck_kib() - before) * 1024;
    println!(
        "listed {listed} bytes in {} mappings; VmLck grew by {pinned} bytes",
        maps.len()
    );
    assert_eq!(
        pinned, listed as u64,
        "VFIO pinned (VmLck) other than what the device lists"
    );
    drop(dev);
    assert_eq!(
        vm_lck_kib(),
        before,
        "every mapping is gone once the device is closed"
    );
}

fn pollnic(args: &[&str]) -> (bool, String) {
    let out = Command::new(&*POLLNIC)
        .args(args)
        .output()
        .expect("run pollnic");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("$ pollnic {}\n{text}", args.join(" "));
    (out.status.success(), text)
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {}", args.join(" "));
}

fn driver_of(addr: &str) -> Option<String> {
    std::fs::read_link(format!("/sys/bus/pci/devices/{addr}/driver"))
        .ok()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
}

/// Puts the port back on vfio-pci (forced, addresses flushed) when dropped,
/// also when the test fails.
struct Rebind<'a>(&'a str, Option<String>);

impl Drop for Rebind<'_> {
    fn drop(&mut self) {
        if let Some(ifname) = &self.1 {
            let _ = Command::new("ip")
                .args(["addr", "flush", "dev", ifname])
                .status();
        }
        if driver_of(self.0).as_deref() != Some("vfio-pci") {
            let _ = Command::new(&*POLLNIC)
                .args(["bind", "--force", self.0])
                .status();
        }
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn bind_refuses_a_port_whose_interface_is_up_with_an_address() {
    let p = port(3);
    let (ok, text) = pollnic(&["unbind", &p]);
    assert!(ok, "{text}");
    let mut restore = Rebind(&p, None);
    let deadline = Instant::now() + Duration::from_secs(5);
    let ifname = loop {
        if let Some(name) = std::fs::read_dir(format!("/sys/bus/pci/devices/{p}/net"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
        {
            break name.file_name().to_string_lossy().into_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{p} has no kernel interface on igb"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    restore.1 = Some(ifname.clone());
    ip(&["link", "set", &ifname, "up"]);
    ip(&["addr", "add", "10.250.3.1/24", "dev", &ifname]);

    let (ok, text) = pollnic(&["bind", &p]);
    assert!(!ok, "bind must refuse an interface in use:\n{text}");
    assert!(
        text.contains(&format!(
            "{p}: refusing to bind: its kernel interface {ifname} is up with address 10.250.3.1/24"
        )),
        "{text}"
    );
    assert!(text.contains("route 10.250.3.0/24"), "{text}");
    assert!(
        text.contains(&format!("sudo ip addr flush dev {ifname}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("pollnic bind --force {p}")),
        "{text}"
    );
    assert!(text.contains("nothing was bound"), "{text}");
    assert_eq!(driver_of(&p).as_deref(), Some("igb"), "nothing changed");

    // Up but without an address (the kernel's own link-local and multicast
    // routes remain): nothing to cut, so bind goes ahead.
    ip(&["addr", "flush", "dev", &ifname]);
    let (ok, text) = pollnic(&["bind", &p]);
    assert!(ok, "{text}");
    assert!(!text.contains("refusing"), "{text}");
    assert_eq!(driver_of(&p).as_deref(), Some("vfio-pci"));
}
