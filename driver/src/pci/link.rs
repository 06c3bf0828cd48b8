//! Link state for `pollnic status`, without disturbing the device.
//!
//! With a kernel network driver bound, the kernel's view is read from
//! `/sys/class/net/<if>/carrier` and `speed`
//! (`Documentation/ABI/testing/sysfs-class-net`). Otherwise (vfio-pci or no
//! driver) the MAC's link register is read through BAR 0, read-only, and only
//! when the PCI command register has memory decode enabled and the device is
//! in D0:
//! igb `STATUS` (0x0008; 82576/I350 datasheets §8.2.2) and ixgbe `LINKS`
//! (0x042A4; 82599 datasheet §8.2.3.22.20).

use std::fmt;
use std::io;

use super::config::ConfigHeader;
use super::device::{PciDevice, VFIO_PCI};
use super::ids::NicFamily;
use super::mmio;
use super::sysfs::{self, Sysfs};

/// igb `STATUS` register offset in BAR 0, bytes.
pub const IGB_STATUS: u64 = 0x0008;
/// igb `STATUS.LU`: link up.
pub const IGB_STATUS_LU: u32 = 1 << 1;
/// igb `STATUS.SPEED` (bits 7:6): 00 = 10, 01 = 100, 10/11 = 1000 Mb/s.
pub const IGB_STATUS_SPEED_SHIFT: u32 = 6;
/// ixgbe `LINKS` register offset in BAR 0, bytes.
pub const IXGBE_LINKS: u64 = 0x042A4;
/// ixgbe `LINKS.LINK_UP` (bit 30).
pub const IXGBE_LINKS_UP: u32 = 1 << 30;
/// ixgbe `LINKS.LINK_SPEED` (bits 29:28): 01 = 100 Mb/s, 10 = 1 Gb/s, 11 = 10 Gb/s.
pub const IXGBE_LINKS_SPEED_SHIFT: u32 = 28;

/// A NIC port's link, as far as can be told without touching the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Link up, at this speed in Mb/s when known.
    Up {
        /// Negotiated speed in Mb/s.
        speed_mbps: Option<u32>,
    },
    /// No link (no carrier).
    Down,
    /// Could not tell; the string says why.
    Unknown(String),
}

impl fmt::Display for LinkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkState::Up {
                speed_mbps: Some(s),
            } => write!(f, "up {s} Mb/s"),
            LinkState::Up { speed_mbps: None } => f.write_str("up"),
            LinkState::Down => f.write_str("down"),
            LinkState::Unknown(why) => write!(f, "unknown ({why})"),
        }
    }
}

/// Decodes an igb `STATUS` register value.
pub fn decode_igb_status(status: u32) -> LinkState {
    if status & IGB_STATUS_LU == 0 {
        return LinkState::Down;
    }
    let speed = match (status >> IGB_STATUS_SPEED_SHIFT) & 0b11 {
        0b00 => 10,
        0b01 => 100,
        _ => 1000,
    };
    LinkState::Up {
        speed_mbps: Some(speed),
    }
}

/// Decodes an ixgbe (82599) `LINKS` register value.
pub fn decode_ixgbe_links(links: u32) -> LinkState {
    if links & IXGBE_LINKS_UP == 0 {
        return LinkState::Down;
    }
    let speed = match (links >> IXGBE_LINKS_SPEED_SHIFT) & 0b11 {
        0b01 => Some(100),
        0b10 => Some(1000),
        0b11 => Some(10_000),
        _ => None,
    };
    LinkState::Up { speed_mbps: speed }
}

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
        None | Some(VFIO_PCI) => register_link(sysfs, dev, family),
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

fn register_link(sysfs: &Sysfs, dev: &PciDevice, family: NicFamily) -> LinkState {
    let dir = sysfs.device_dir(dev.address);
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
    let (offset, decode): (u64, fn(u32) -> LinkState) = match family {
        NicFamily::Igb => (IGB_STATUS, decode_igb_status),
        NicFamily::Ixgbe => (IXGBE_LINKS, decode_ixgbe_links),
    };
    match mmio::read_u32(&dir.join("resource0"), offset) {
        Ok(u32::MAX) => LinkState::Unknown("registers read all-ones: device asleep or gone".into()),
        Ok(v) => decode(v),
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
    fn decodes_igb_status() {
        assert_eq!(decode_igb_status(0), LinkState::Down);
        assert_eq!(decode_igb_status(0x80), LinkState::Down);
        assert_eq!(
            decode_igb_status(0x2),
            LinkState::Up {
                speed_mbps: Some(10)
            }
        );
        assert_eq!(
            decode_igb_status(0x42),
            LinkState::Up {
                speed_mbps: Some(100)
            }
        );
        assert_eq!(
            decode_igb_status(0x83),
            LinkState::Up {
                speed_mbps: Some(1000)
            }
        );
        assert_eq!(
            decode_igb_status(0xC2),
            LinkState::Up {
                speed_mbps: Some(1000)
            }
        );
    }

    #[test]
    fn decodes_ixgbe_links() {
        assert_eq!(decode_ixgbe_links(0x3000_0000), LinkState::Down);
        assert_eq!(
            decode_ixgbe_links(0x7000_0000),
            LinkState::Up {
                speed_mbps: Some(10_000)
            }
        );
        assert_eq!(
            decode_ixgbe_links(0x6000_0000),
            LinkState::Up {
                speed_mbps: Some(1000)
            }
        );
        assert_eq!(
            decode_ixgbe_links(0x5000_0000),
            LinkState::Up {
                speed_mbps: Some(100)
            }
        );
        assert_eq!(
            decode_ixgbe_links(0x4000_0000),
            LinkState::Up { speed_mbps: None }
        );
    }

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
