//! A machine of the kind pollnic was first tried on (issue 46), recorded
//! on 2026-12-03 and rebuilt as a fake `/sys`, `/proc` tree for host tests:
//! a VM (kernel 6.18.44, the CPU's `hypervisor` flag, no DMI table) with no
//! IOMMU (no `/sys/kernel/iommu_groups` entry, no `/sys/class/iommu`), no
//! VFIO and no UIO (no `/sys/module/vfio`, no `/lib/modules`: the kernel
//! boots with `nomodule`), no 2 MiB hugepages reserved, and one NIC: the
//! modern virtio-net function 0000:00:03.0 (1af4:1041) on the kernel's
//! virtio-pci, its `virtio2` bound to virtio_net as `eth0`, up, carrying
//! the default route; the features the kernel shows for it lack
//! `VIRTIO_F_ACCESS_PLATFORM` (bit 33). Every value below is what the
//! machine's files held.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use pollnic::pci::{PciAddress, Sysfs};

use crate::doctor::Roots;

/// The virtio-net port.
pub const PORT: &str = "0000:00:03.0";

/// `/sys/bus/pci/devices/0000:00:03.0/virtio2/features` as read (128
/// characters, kernel 6.18): bits 0, 1, 5, 7, 8, 10, 11, 12, 14, 15, 29
/// (EVENT_IDX) and 32 (VERSION_1); no ACCESS_PLATFORM, STATUS, CTRL_VQ,
/// MQ, MTU or RSS.
pub const FEATURES: &str = "11000101101110110000000000000100100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\n";

/// The PCI functions: address, vendor, device, class, driver.
const FUNCTIONS: &[(&str, u16, u16, u32, Option<&str>)] = &[
    ("0000:00:00.0", 0x8086, 0x0d57, 0x060000, None),
    ("0000:00:01.0", 0x1af4, 0x1045, 0xffff00, Some("virtio-pci")),
    ("0000:00:02.0", 0x1af4, 0x1042, 0x018000, Some("virtio-pci")),
    (PORT, 0x1af4, 0x1041, 0x020000, Some("virtio-pci")),
    ("0000:00:04.0", 0x1af4, 0x1053, 0xffff00, Some("virtio-pci")),
    ("0000:00:05.0", 0x1af4, 0x1044, 0xffff00, Some("virtio-pci")),
];

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// Builds the machine under `root` (`sys/`, `proc/`, `dev/`; no
/// `lib/modules`, no `boot`) and returns where doctor reads it.
pub fn vm_without_iommu(root: &Path) -> Roots {
    let sys = root.join("sys");
    for &(addr, vendor, device, class, driver) in FUNCTIONS {
        let d = format!("bus/pci/devices/{addr}");
        write(&sys, &format!("{d}/vendor"), &format!("0x{vendor:04x}\n"));
        write(&sys, &format!("{d}/device"), &format!("0x{device:04x}\n"));
        write(&sys, &format!("{d}/class"), &format!("0x{class:06x}\n"));
        write(&sys, &format!("{d}/numa_node"), "-1\n");
        write(&sys, &format!("{d}/driver_override"), "(null)\n");
        if let Some(drv) = driver {
            fs::create_dir_all(sys.join("bus/pci/drivers").join(drv)).unwrap();
            symlink(
                format!("../../../bus/pci/drivers/{drv}"),
                sys.join(&d).join("driver"),
            )
            .unwrap();
        }
    }
    for drv in [
        "8250_lpss",
        "8250_mid",
        "8250_pericom",
        "exar_serial",
        "mei_me",
        "serial",
    ] {
        fs::create_dir_all(sys.join("bus/pci/drivers").join(drv)).unwrap();
    }
    let virtio = format!("bus/pci/devices/{PORT}/virtio2");
    write(&sys, &format!("{virtio}/features"), FEATURES);
    write(&sys, &format!("{virtio}/status"), "0x0000000f\n");
    fs::create_dir_all(sys.join(&virtio).join("net/eth0")).unwrap();
    symlink(
        "../../../../bus/virtio/drivers/virtio_net",
        sys.join(&virtio).join("driver"),
    )
    .unwrap();
    write(&sys, "class/net/eth0/flags", "0x1003\n");
    write(&sys, "class/net/eth0/carrier", "1\n");
    write(&sys, "class/net/eth0/speed", "-1\n");
    write(&sys, "class/net/eth0/operstate", "up\n");
    for size in ["2048kB", "1048576kB"] {
        write(
            &sys,
            &format!("kernel/mm/hugepages/hugepages-{size}/nr_hugepages"),
            "0\n",
        );
        write(
            &sys,
            &format!("kernel/mm/hugepages/hugepages-{size}/free_hugepages"),
            "0\n",
        );
    }
    write(&sys, "devices/system/node/node0/cpulist", "0-1\n");
    fs::create_dir_all(sys.join("kernel/iommu_groups")).unwrap();

    let proc = root.join("proc");
    write(&proc, "sys/kernel/osrelease", "6.18.44-fc-v1147\n");
    write(
        &proc,
        "cmdline",
        "mitigations=auto,no_guest_host,no_guest_guest console=ttyS0 quiet reboot=k panic=1 \
         nomodule random.trust_cpu=1 swiotlb=noforce psi=1\n",
    );
    write(
        &proc,
        "cpuinfo",
        "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov \
         pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc \
         rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 \
         pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm\n",
    );
    write(
        &proc,
        "net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
         eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
         eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
    );
    fs::create_dir_all(root.join("dev")).unwrap();
    Roots {
        sysfs: Sysfs::new(sys),
        proc,
        dev: root.join("dev"),
        modules: root.join("lib/modules"),
        boot: root.join("boot"),
    }
}

/// [`PORT`] parsed.
pub fn port() -> PciAddress {
    PORT.parse().unwrap()
}
