//! The order of `pollnic bind`'s checks. Everything that would make the
//! bind fail (the port exists and is supported, its IOMMU fits the way in
//! asked for, the driver's module loads, VFIO offers its no-IOMMU mode) is
//! checked first, by the library ([`pollnic::pci::check_bind_all`]); only
//! then the guard ([`crate::guard`]), whose advice costs the user something
//! (take an interface down, unbind another device). So no one is told to
//! take down the interface they are logged in through for a bind that would
//! fail anyway.

use pollnic::pci::{self, BindMode};

use crate::guard::Refusal;

/// What to do after the checks: the lines to print (to stderr, in order),
/// and whether to go on and bind.
#[derive(Debug, PartialEq, Eq)]
pub struct Gate {
    /// Failures, refusals or (with `--force`) warnings, one per line.
    pub lines: Vec<String>,
    /// `true` when the ports are to be bound.
    pub go: bool,
}

/// Runs `preflight` (the library's checks), then, only if they pass,
/// `guard` (the CLI's refusals of a port in use), and says whether to bind.
/// With `force`, the guard's refusals are warnings.
pub fn gate(
    preflight: impl FnOnce() -> Result<(), pci::Error>,
    guard: impl FnOnce() -> Vec<Refusal>,
    force: bool,
) -> Gate {
    if let Err(e) = preflight() {
        let mut lines: Vec<String> = match e {
            pci::Error::Refused { errors } => errors.iter().map(ToString::to_string).collect(),
            e => vec![e.to_string()],
        };
        lines.push("nothing was bound".into());
        return Gate { lines, go: false };
    }
    let refusals = guard();
    if force {
        return Gate {
            lines: refusals
                .iter()
                .map(|r| format!("warning (--force): {r}"))
                .collect(),
            go: true,
        };
    }
    let mut lines: Vec<String> = refusals.iter().map(ToString::to_string).collect();
    let go = lines.is_empty();
    if !go {
        lines.push("nothing was bound".into());
    }
    Gate { lines, go }
}

/// The way in that `--driver` and `--no-iommu` ask for.
pub fn mode(driver: DriverArg, no_iommu: bool) -> BindMode {
    match (driver, no_iommu) {
        (DriverArg::VfioPci, false) => BindMode::Vfio,
        (DriverArg::VfioPci, true) => BindMode::VfioNoIommu,
        // uio_pci_generic is a no-IOMMU route whether or not --no-iommu says so.
        (DriverArg::UioPciGeneric, _) => BindMode::Uio,
    }
}

/// `--driver`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DriverArg {
    /// vfio-pci (behind an IOMMU; with --no-iommu, VFIO's no-IOMMU mode).
    #[value(name = "vfio-pci")]
    VfioPci,
    /// uio_pci_generic (no IOMMU: physical addresses).
    #[value(name = "uio_pci_generic")]
    UioPciGeneric,
}

/// Why `--user`/`--group` are refused with a no-IOMMU route.
pub const NO_USER_FOR_PHYSICAL: &str = "--user/--group: refused with --driver uio_pci_generic \
or --no-iommu. Without an IOMMU the NIC is given physical addresses and can read and write all \
of RAM, so whoever may program it holds root's power; and opening such a port needs root \
anyway (CAP_SYS_ADMIN, to read the buffers' physical addresses from /proc/self/pagemap). Bind \
without --user/--group and run the tools as root";

/// The loud line printed before a no-IOMMU bind changes anything.
pub fn physical_warning(mode: BindMode) -> Option<String> {
    let what = match mode {
        BindMode::VfioNoIommu => {
            "VFIO no-IOMMU mode (turns on the vfio module's enable_unsafe_noiommu_mode; \
             the kernel is tainted)"
        }
        BindMode::Uio => "uio_pci_generic",
        _ => return None,
    };
    Some(format!(
        "warning: binding to {what}: no IOMMU, so the NIC is given physical addresses and can \
         reach all of RAM (a fault in the NIC or in the program can overwrite any memory); the \
         tools open these ports only with --no-iommu"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pollnic::pci::{PciAddress, Sysfs};
    use std::cell::Cell;
    use std::fs;

    fn addr() -> PciAddress {
        "0000:00:08.0".parse().unwrap()
    }

    fn refusal() -> Refusal {
        Refusal::ActiveInterface {
            addr: addr(),
            name: "eth0".into(),
            addresses: vec!["10.0.0.1/24".into()],
            routes: vec![],
        }
    }

    #[test]
    fn the_guard_is_not_consulted_when_the_bind_would_fail() {
        let asked = Cell::new(false);
        let g = gate(
            || Err(pci::Error::NoIommuGroup { addr: addr() }),
            || {
                asked.set(true);
                vec![refusal()]
            },
            false,
        );
        assert!(!asked.get(), "the guard ran before a failing check");
        assert!(!g.go);
        assert_eq!(g.lines.len(), 2, "{:?}", g.lines);
        assert!(g.lines[0].contains("no IOMMU group"), "{}", g.lines[0]);
        assert!(!g.lines.iter().any(|l| l.contains("ip link set")));
        assert_eq!(g.lines[1], "nothing was bound");
    }

    #[test]
    fn the_guard_refuses_after_the_checks_pass_and_force_makes_it_warn() {
        let g = gate(|| Ok(()), || vec![refusal()], false);
        assert!(!g.go);
        assert!(g.lines[0].contains("sudo ip link set eth0 down"), "{g:?}");
        assert_eq!(g.lines.last().unwrap(), "nothing was bound");
        let g = gate(|| Ok(()), || vec![refusal()], true);
        assert!(g.go);
        assert!(g.lines[0].starts_with("warning (--force): "), "{g:?}");
        let g = gate(|| Ok(()), Vec::new, false);
        assert_eq!(
            g,
            Gate {
                lines: vec![],
                go: true
            }
        );
    }

    /// The library's real checks on a made-up sysfs: a port with an up
    /// interface but no IOMMU group fails them (before any module is
    /// loaded), so the guard never runs; each failed check is a line.
    #[test]
    fn on_a_host_without_an_iommu_the_checks_fail_before_the_guard() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("bus/pci/devices/0000:00:08.0");
        fs::create_dir_all(dev.join("net/eth0")).unwrap();
        fs::write(dev.join("vendor"), "0x8086\n").unwrap();
        fs::write(dev.join("device"), "0x10c9\n").unwrap();
        fs::write(dev.join("class"), "0x020000\n").unwrap();
        let sysfs = Sysfs::new(tmp.path());
        let asked = Cell::new(false);
        let g = gate(
            || pci::check_bind_all(&sysfs, &[addr(), addr()], BindMode::Vfio),
            || {
                asked.set(true);
                crate::guard::refusals(&sysfs, &[addr()])
            },
            false,
        );
        assert!(!asked.get());
        assert!(!g.go);
        assert_eq!(g.lines.len(), 3, "{:?}", g.lines);
        assert!(g.lines[0].contains("named more than once"), "{:?}", g.lines);
        assert!(
            g.lines[1].contains("--driver uio_pci_generic 0000:00:08.0"),
            "{:?}",
            g.lines
        );
    }

    /// The guard's verdict on the recorded VM's port: its interface eth0,
    /// up, with the routes of the machine's `/proc/net/route` (the default
    /// one among them).
    fn recorded_guard(roots: &crate::doctor::Roots) -> Vec<Refusal> {
        let table = fs::read_to_string(roots.proc.join("net/route")).unwrap();
        let routes = crate::guard::parse_ipv4_routes(&table)
            .into_iter()
            .filter(|(i, _)| i == "eth0")
            .map(|(_, r)| r)
            .collect();
        let facts = crate::guard::BindFacts {
            addr: crate::fixture::port(),
            interfaces: vec![crate::guard::InterfaceFacts {
                name: "eth0".into(),
                up: true,
                addresses: vec![],
                routes,
            }],
            group: None,
            members: vec![],
        };
        crate::guard::check(&facts, &[crate::fixture::port()])
    }

    /// The recorded VM of issue 46 (no IOMMU, the virtio-net port carrying
    /// the default route, no ACCESS_PLATFORM): `pollnic bind` to vfio-pci
    /// says the port has no IOMMU group and that the device lacks
    /// ACCESS_PLATFORM, and stops there: the guard, whose advice is to take
    /// eth0 down, is never asked. Had the checks passed, the guard would
    /// have said just that.
    #[test]
    fn on_the_recorded_vm_access_platform_is_refused_before_the_guard_speaks() {
        let tmp = tempfile::tempdir().unwrap();
        let roots = crate::fixture::vm_without_iommu(tmp.path());
        let port = crate::fixture::port();
        let asked = Cell::new(false);
        let g = gate(
            || pci::check_bind_all(&roots.sysfs, &[port], BindMode::Vfio),
            || {
                asked.set(true);
                recorded_guard(&roots)
            },
            false,
        );
        assert!(!asked.get(), "the guard ran before a failing check");
        assert!(!g.go);
        assert_eq!(g.lines.len(), 3, "{:#?}", g.lines);
        assert!(g.lines[0].contains("no IOMMU group"), "{}", g.lines[0]);
        for want in [
            "0000:00:03.0: refusing to bind it to vfio-pci behind an IOMMU",
            "does not offer VIRTIO_F_ACCESS_PLATFORM (bit 33: the device's DMA goes through the IOMMU",
            "virtio2/features",
            "iommu_platform=on",
            "sudo pollnic bind --driver uio_pci_generic 0000:00:03.0",
        ] {
            assert!(g.lines[1].contains(want), "{want:?} missing: {}", g.lines[1]);
        }
        assert_eq!(g.lines[2], "nothing was bound");
        assert!(
            !g.lines
                .iter()
                .any(|l| l.contains("ip link set eth0 down") || l.contains("--force")),
            "{:#?}",
            g.lines
        );
        // The control: past the checks, the guard refuses eth0 with its advice.
        let g = gate(|| Ok(()), || recorded_guard(&roots), false);
        assert!(!g.go);
        assert!(
            g.lines[0].contains("route default") && g.lines[0].contains("ip link set eth0 down"),
            "{:#?}",
            g.lines
        );
    }

    #[test]
    fn driver_and_no_iommu_pick_the_way_in() {
        assert_eq!(mode(DriverArg::VfioPci, false), BindMode::Vfio);
        assert_eq!(mode(DriverArg::VfioPci, true), BindMode::VfioNoIommu);
        assert_eq!(mode(DriverArg::UioPciGeneric, false), BindMode::Uio);
        assert_eq!(mode(DriverArg::UioPciGeneric, true), BindMode::Uio);
        assert!(physical_warning(BindMode::Vfio).is_none());
        let w = physical_warning(BindMode::VfioNoIommu).unwrap();
        assert!(w.contains("all of RAM") && w.contains("tainted"), "{w}");
        assert!(NO_USER_FOR_PHYSICAL.contains("pagemap"));
    }
}
