//! Errors of the PCI sysfs layer. Every message says what went wrong and
//! what to run to fix it, so the CLI can print it as is.

use std::io;
use std::path::PathBuf;

use super::address::{ParseAddressError, PciAddress};

/// What can go wrong while inspecting or (re)binding a PCI device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A string is not a PCI address.
    #[error(transparent)]
    Address(#[from] ParseAddressError),

    /// `/sys/bus/pci/devices/<addr>` does not exist.
    #[error("{addr}: no such PCI device (run `pollnic status` to list the supported NICs)")]
    NoSuchDevice {
        /// The address asked for.
        addr: PciAddress,
    },

    /// The device is not one pollnic drives; binding it would only take it
    /// away from its kernel driver.
    #[error(
        "{addr}: {vendor:04x}:{device:04x} is not a NIC pollnic supports (Intel 82576, I350, 82599/X520; modern virtio-net 1af4:1041); \
         refusing to touch it (run `pollnic status` to list supported NICs)"
    )]
    Unsupported {
        /// The device's address.
        addr: PciAddress,
        /// PCI vendor ID.
        vendor: u16,
        /// PCI device ID.
        device: u16,
    },

    /// The device has no `iommu_group` link: the IOMMU is off or absent, so
    /// vfio-pci cannot put it behind one. The message names the fix (an
    /// IOMMU) and the two no-IOMMU routes with their cost.
    #[error(
        "{addr}: no IOMMU group, so VFIO cannot put it behind an IOMMU. Best: turn the IOMMU on \
         (add `intel_iommu=on iommu=pt`, or `amd_iommu=on` on AMD, to the kernel command line and \
         reboot; in a VM, have the hypervisor give it a virtual IOMMU, e.g. QEMU's q35 machine \
         with `-device intel-iommu,intremap=on,caching-mode=on`); check with \
         `dmesg | grep -i -e DMAR -e IOMMU`. Without an IOMMU there are two routes, both giving \
         the NIC physical addresses, so that it can reach all of RAM (a fault or a hostile device \
         can overwrite any memory): `sudo pollnic bind --driver uio_pci_generic {addr}`, or \
         `sudo pollnic bind --no-iommu {addr}` (VFIO no-IOMMU, which taints the kernel and needs \
         a kernel built with CONFIG_VFIO_NOIOMMU); then run the tools with --no-iommu. \
         `pollnic doctor` says which of them this kernel offers"
    )]
    NoIommuGroup {
        /// The device's address.
        addr: PciAddress,
    },

    /// A no-IOMMU route was asked ([`super::mode::BindMode::VfioNoIommu`], or
    /// [`super::mode::BindMode::Uio`] behind a translating IOMMU) for a port that
    /// is behind a real IOMMU: its DMA is translated, so physical addresses
    /// would not reach memory, and vfio-pci is the way.
    #[error(
        "{addr}: refusing to bind it {}: it is in IOMMU group {group}{}, so an IOMMU \
         translates its DMA and physical addresses would not reach memory; bind it to vfio-pci \
         behind the IOMMU instead (`sudo pollnic bind {addr}`, without --no-iommu or --driver) \
         and run the tools without --no-iommu",
        asked.how(),
        group_type.as_deref().map(|t| format!(" (type {t})")).unwrap_or_default()
    )]
    IommuPresent {
        /// The device's address.
        addr: PciAddress,
        /// The IOMMU group it is in.
        group: u32,
        /// The group's `type` (`DMA`, `DMA-FQ`, `identity`), when known.
        group_type: Option<String>,
        /// The way in that was asked.
        asked: super::mode::BindMode,
    },

    /// VFIO's no-IOMMU mode was asked, but the `vfio` module has no
    /// `enable_unsafe_noiommu_mode` parameter: the kernel was built without
    /// `CONFIG_VFIO_NOIOMMU` (as Debian's are).
    #[error(
        "VFIO no-IOMMU mode is not available: {} does not exist with vfio loaded, so this \
         kernel was built without CONFIG_VFIO_NOIOMMU; use uio_pci_generic instead: \
         `sudo pollnic bind --driver uio_pci_generic ADDR`, then run the tools with --no-iommu",
        param.display()
    )]
    NoIommuModeUnavailable {
        /// The module parameter that is missing.
        param: PathBuf,
    },

    /// The port is already bound to pollnic another way (vfio-pci when
    /// `uio_pci_generic` is asked, or the other way round); `bind` does not
    /// move it between them.
    #[error(
        "{addr}: already bound {}; give it back first (`sudo pollnic unbind {addr}`), \
         then bind it again {}",
        now.how(),
        asked.how()
    )]
    BoundOtherWay {
        /// The device's address.
        addr: PciAddress,
        /// How it is bound now.
        now: super::mode::BindMode,
        /// How it was asked to be bound.
        asked: super::mode::BindMode,
    },

    /// A virtio-net port lacks a feature `Device::open` requires of a port
    /// bound as `asked` (read from sysfs while the kernel's virtio-pci holds
    /// it, `pci::virtio_features`): `VIRTIO_F_VERSION_1` on every
    /// route, `VIRTIO_F_ACCESS_PLATFORM` behind an IOMMU
    /// ([`super::mode::BindMode::Vfio`]). The message says what each missing bit
    /// means and what gives it (the hypervisor's options, or the no-IOMMU
    /// route with its risk).
    #[error(
        "{addr}: refusing to bind it {}: the virtio-net device does not offer {}, as read \
         from {}, so `Device::open` would refuse the port; fix: {}",
        asked.how(),
        missing_text(missing),
        path.display(),
        super::features::fix_text(*addr, missing)
    )]
    VirtioFeaturesMissing {
        /// The device's address.
        addr: PciAddress,
        /// The required features it lacks, in the order `Device::open`
        /// checks them (never empty).
        missing: Vec<super::features::VirtioFeature>,
        /// The way in that was asked.
        asked: super::mode::BindMode,
        /// The `features` file they were read from.
        path: PathBuf,
    },

    /// A virtio function's `features` file is not as the kernel writes it
    /// (`features_show`, `drivers/virtio/virtio.c`).
    #[error(
        "{}: not a feature list as the kernel writes it: {problem}; is sysfs mounted at /sys?",
        path.display()
    )]
    VirtioFeaturesUnreadable {
        /// The file.
        path: PathBuf,
        /// What is wrong with its text.
        problem: super::ParseVirtioFeaturesError,
    },

    /// A sysfs or state file could not be read or written for lack of rights.
    #[error("permission denied {action} {path}: run as root (e.g. `sudo pollnic ...`)")]
    PermissionDenied {
        /// `reading`, `writing to`, ...
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// Any other I/O failure on a sysfs, device or state file.
    #[error("{action} {path} failed: {cause}; {hint}")]
    Io {
        /// `reading`, `writing "vfio-pci" to`, ...
        action: String,
        /// The file.
        path: PathBuf,
        /// What to run or check next.
        hint: &'static str,
        /// The underlying error.
        cause: io::Error,
    },

    /// `modprobe <module>` failed or did not register the driver.
    #[error(
        "loading kernel module {module} failed ({detail}); run `modprobe {module}` by hand and \
         check `dmesg | tail` (is the module built for this kernel? see `modinfo {module}`)"
    )]
    Modprobe {
        /// Module name, e.g. `vfio-pci`.
        module: String,
        /// Exit status / stderr of `modprobe`, or why the driver is still missing.
        detail: String,
    },

    /// After the bind sequence the device is not on the expected driver.
    #[error(
        "{addr}: expected driver {expected} after binding, but it is {actual}; \
         check `dmesg | tail` for the kernel's reason"
    )]
    WrongDriver {
        /// The device's address.
        addr: PciAddress,
        /// The driver that should have bound.
        expected: String,
        /// What the `driver` link says (`none` when unbound).
        actual: String,
    },

    /// `/dev/vfio/<group>` did not appear after binding to vfio-pci.
    #[error(
        "{addr}: {path} did not appear within {waited_ms} ms after binding to vfio-pci; \
         check that udev/devtmpfs is running and `dmesg | grep -i vfio`"
    )]
    NoVfioNode {
        /// The device's address.
        addr: PciAddress,
        /// The missing node.
        path: PathBuf,
        /// How long we waited, in milliseconds.
        waited_ms: u64,
    },

    /// `<device>/uio/uio<N>` or `/dev/uio<N>` did not appear after binding
    /// to `uio_pci_generic`.
    #[error(
        "{addr}: {path} did not appear within {waited_ms} ms after binding to uio_pci_generic; \
         check that udev/devtmpfs is running and `dmesg | grep -i uio`"
    )]
    NoUioNode {
        /// The device's address.
        addr: PciAddress,
        /// The missing entry or node.
        path: PathBuf,
        /// How long we waited, in milliseconds.
        waited_ms: u64,
    },

    /// The same address was named twice in one multi-port `bind`/`unbind`.
    #[error("{addr} is named more than once; name each port once")]
    DuplicateAddress {
        /// The repeated address (as parsed, so `01:00.0` and `0000:01:00.0` are one).
        addr: PciAddress,
    },

    /// The checks of a multi-port `bind`/`unbind` ([`super::bind_vfio_all`],
    /// [`super::unbind_vfio_all`]) failed for one or more ports, so no port
    /// was changed; `errors` holds each failure, which says what to run.
    #[error("{}; nothing was changed", join(errors))]
    Refused {
        /// Every failed check, in the order of the addresses given.
        errors: Vec<Error>,
    },

    /// A step of `bind`/`unbind` failed; what was done about it (rollback of
    /// the changes so far, or a fallback) is in `recovery`.
    #[error("{cause}; {recovery}")]
    StepFailed {
        /// The failure that stopped the sequence.
        #[source]
        cause: Box<Error>,
        /// What was restored, and what to run if restoring was incomplete.
        recovery: String,
    },
}

/// `VIRTIO_F_ACCESS_PLATFORM (bit 33: what it gives) and ...`.
fn missing_text(missing: &[super::features::VirtioFeature]) -> String {
    let texts: Vec<String> = missing
        .iter()
        .map(|f| format!("{} (bit {}: {})", f.name(), f.bit(), f.gives()))
        .collect();
    texts.join(" and ")
}

fn join(errors: &[Error]) -> String {
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// Shorthand for results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Maps an I/O error on `path` to [`Error::PermissionDenied`] or
    /// [`Error::Io`] (with `hint` saying what to check).
    pub(crate) fn io(
        action: &str,
        path: impl Into<PathBuf>,
        hint: &'static str,
        e: io::Error,
    ) -> Self {
        let path = path.into();
        if e.kind() == io::ErrorKind::PermissionDenied {
            let action = if action.starts_with("reading") {
                "reading"
            } else {
                "writing to"
            };
            return Error::PermissionDenied {
                action,
                path,
                source: e,
            };
        }
        Error::Io {
            action: action.to_owned(),
            path,
            hint,
            cause: e,
        }
    }

    /// `true` when the failure was a missing root privilege.
    pub fn is_permission_denied(&self) -> bool {
        match self {
            Error::PermissionDenied { .. } => true,
            Error::StepFailed { cause, .. } => cause.is_permission_denied(),
            Error::Refused { errors } => errors.iter().any(Error::is_permission_denied),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_say_run_as_root_and_keep_source() {
        let e = Error::io(
            "writing \"vfio-pci\" to",
            "/sys/x/driver_override",
            "check `dmesg | tail`",
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert!(e.is_permission_denied());
        let msg = e.to_string();
        assert!(
            msg.contains("/sys/x/driver_override") && msg.contains("run as root"),
            "{msg}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn other_io_errors_carry_the_hint() {
        let e = Error::io(
            "reading",
            "/sys/x/vendor",
            "is sysfs mounted?",
            io::Error::from_raw_os_error(libc::EIO),
        );
        let msg = e.to_string();
        assert!(msg.starts_with("reading /sys/x/vendor failed"), "{msg}");
        assert!(msg.ends_with("is sysfs mounted?"), "{msg}");
    }

    #[test]
    fn messages_name_the_fix() {
        let addr: PciAddress = "0000:00:09.0".parse().unwrap();
        assert_eq!(
            Error::NoSuchDevice { addr }.to_string(),
            "0000:00:09.0: no such PCI device (run `pollnic status` to list the supported NICs)"
        );
        let msg = Error::NoIommuGroup { addr }.to_string();
        assert!(
            msg.contains("intel_iommu=on iommu=pt") && msg.contains("amd_iommu=on"),
            "{msg}"
        );
        assert!(msg.contains("dmesg | grep -i -e DMAR -e IOMMU"), "{msg}");
    }
}
