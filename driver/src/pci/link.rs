//! Link state for `pollnic status`, without disturbing the device.
//!
//! With a kernel network driver bound, the kernel's view is read from
//! `/sys/class/net/<if>/carrier` and `speed`
//! (`Documentation/ABI/testing/sysfs-class-net`). Otherwise (vfio-pci or no
//! driver) the MAC's link register is read through BAR 0, read-only, and only
//! when the PCI command register has memory decode enabled and the device is
//! in D0. Which register and how to decode it is the family's
//! ([`Family::link_register`], [`Family::decode_link_register`]): igb `STATUS`
//! (0x0008; 82576/I350 datasheets §8.2.2), ixgbe `LINKS` (0x042A4; 82599
//! datasheet §8.2.3.22.20).

use std::io;

use crate::family::Family;

use super::config::ConfigHeader;
use super::device::{PciDevice, VFIO_PCI};
use super::sysfs::{self, Sysfs};
use crate::sys::pcilink as mmio;

pub use crate::family::LinkState;

/// The link state of `dev`: from its kernel interface if it has one, else from
/// the MAC's link register (read-only BAR 0 mapping; needs root). Never fails:
/// problems come back as [`LinkState::Unknown`] with the reason.
pub fn link_state(sysfs: &Sysfs, dev: &PciDevice) -> LinkState {
    if let Some(ifname) = dev.interfaces.first() {
        return kernel_link(sysfs, ifname);
    }
    let Some(family) = dev.family() else {
        return LinkState::Unknown("not supported by pollnic".into());
    };
    match dev.driver.as_deref() {
        None | Some(VFIO_PCI) => register_link(sysfs, dev, family.0),
        Some(other) => LinkState::Unknown(format!("driver {other} has no network interface")),
    }
}

fn kernel_link(sysfs: &Sysfs, ifname: &str) -> LinkState {
    let dir = sysfs.net_dir(ifname);
    match sysfs::read_trimmed(&dir.join("carrier")).as_deref() {
        Ok("1") => {
            let speed = sysfs::read_trimmed(&dir.join("speed"))
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .and_then(|s| u32::try_from(s).ok())
                .filter(|&s| s > 0);
            LinkState::Up { speed_mbps: speed }
        }
        Ok("0") => LinkState::Down,
        Ok(other) => LinkState::Unknown(format!("{ifname}: carrier reads {other:?}")),
        // The kernel returns EINVAL for `carrier` while the interface is down.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => LinkState::Unknown(format!(
            "{ifname} is administratively down: `ip link set {ifname} up`"
        )),
        Err(e) => LinkState::Unknown(format!("{ifname}: cannot read carrier: {e}")),
    }
}

fn register_link(sysfs: &Sysfs, dev: &PciDevice, family: &dyn Family) -> LinkState {
    let dir = sysfs.device_dir(dev.addr);
    let header = match ConfigHeader::read(&dir.join("config")) {
        Ok(h) => h,
        Err(e) => return LinkState::Unknown(format!("cannot read PCI config space: {e}")),
    };
    if !header.memory_enabled() {
        return LinkState::Unknown("memory decode off".into());
    }
    if let Some(d @ 1..) = header.power_state {
        let state = if d == 3 {
            "D3hot".to_owned()
        } else {
            format!("D{d}")
        };
        let why = if dev.is_vfio_bound() {
            "; vfio-pci powers idle devices down"
        } else {
            ""
        };
        return LinkState::Unknown(format!("device asleep in {state}{why}"));
    }
    let Some(offset) = family.link_register().map(u64::from) else {
        return LinkState::Unknown(format!(
            "no link register: a {} port shows its link once pollnic opens it",
            family.name()
        ));
    };
    match mmio::read_u32(&dir.join("resource0"), offset) {
        Ok(u32::MAX) => LinkState::Unknown("registers read all-ones: device asleep or gone".into()),
        Ok(v) => family.decode_link_register(v),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            LinkState::Unknown("run as root to read the link register".into())
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            LinkState::Unknown("BAR busy: device in use by a VFIO program?".into())
        }
        Err(e) => LinkState::Unknown(format!("cannot read BAR 0: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays() {
        assert_eq!(
            LinkState::Up {
                speed_mbps: Some(1000)
            }
            .to_string(),
            "up 1000 Mb/s"
        );
        assert_eq!(LinkState::Down.to_string(), "down");
        assert_eq!(
            LinkState::Unknown("memory decode off".into()).to_string(),
            "unknown (memory decode off)"
        );
    }
}
