//! The bits of PCI configuration space `status` needs, read from sysfs
//! `config` (`Documentation/PCI/sysfs-pci.rst`): the command register and,
//! when readable, the power state from the Power Management capability
//! (PCI Local Bus spec §6.2.2; PCI PM spec §3.2.4). Unprivileged reads see
//! only the first 64 bytes, which holds the command register but usually not
//! the capability.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// PCI command register offset.
pub const PCI_COMMAND: usize = 0x04;
/// PCI command register: Memory Space enable.
pub const PCI_COMMAND_MEMORY: u16 = 1 << 1;
const PCI_STATUS: usize = 0x06;
const PCI_STATUS_CAP_LIST: u16 = 1 << 4;
const PCI_CAPABILITY_LIST: usize = 0x34;
const PCI_CAP_ID_PM: u8 = 0x01;
const PCI_PM_CTRL: usize = 4;

/// What `status` reads from config space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConfigHeader {
    /// The command register.
    pub command: u16,
    /// Power state 0..=3 (D0, D1, D2, D3hot) from PMCSR, `None` if unreadable.
    pub power_state: Option<u8>,
}

impl ConfigHeader {
    /// Reads the first 256 bytes of the device's sysfs `config` file.
    pub fn read(config: &Path) -> io::Result<Self> {
        let mut buf = Vec::with_capacity(256);
        File::open(config)?.take(256).read_to_end(&mut buf)?;
        Self::parse(&buf)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "config space too short"))
    }

    /// Parses a config space prefix; `None` if it lacks the command register.
    pub fn parse(cfg: &[u8]) -> Option<Self> {
        let word = |off: usize| Some(u16::from_le_bytes([*cfg.get(off)?, *cfg.get(off + 1)?]));
        let command = word(PCI_COMMAND)?;
        let power_state = (|| {
            if word(PCI_STATUS)? & PCI_STATUS_CAP_LIST == 0 {
                return None;
            }
            let mut ptr = usize::from(*cfg.get(PCI_CAPABILITY_LIST)? & !3);
            // At most 48 capabilities fit in 256 bytes; bound the walk.
            for _ in 0..48 {
                if ptr < 0x40 {
                    return None;
                }
                if *cfg.get(ptr)? == PCI_CAP_ID_PM {
                    return word(ptr + PCI_PM_CTRL).map(|pmcsr| (pmcsr & 0b11) as u8);
                }
                ptr = usize::from(*cfg.get(ptr + 1)? & !3);
            }
            None
        })();
        Some(Self {
            command,
            power_state,
        })
    }

    /// `true` if the device decodes memory accesses (BARs are live).
    pub fn memory_enabled(&self) -> bool {
        self.command & PCI_COMMAND_MEMORY != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config space with command `cmd` and a PM capability at 0x40 (after
    /// an MSI capability at 0x50 in the list) in power state `d`.
    fn cfg(cmd: u16, d: u16) -> Vec<u8> {
        let mut c = vec![0u8; 256];
        c[PCI_COMMAND..PCI_COMMAND + 2].copy_from_slice(&cmd.to_le_bytes());
        c[PCI_STATUS..PCI_STATUS + 2].copy_from_slice(&PCI_STATUS_CAP_LIST.to_le_bytes());
        c[PCI_CAPABILITY_LIST] = 0x50;
        c[0x50] = 0x05; // MSI
        c[0x51] = 0x40;
        c[0x40] = PCI_CAP_ID_PM;
        c[0x41] = 0x00;
        c[0x44..0x46].copy_from_slice(&(0x0100 | d).to_le_bytes());
        c
    }

    #[test]
    fn finds_command_and_power_state() {
        let h = ConfigHeader::parse(&cfg(0x0406, 3)).unwrap();
        assert!(h.memory_enabled());
        assert_eq!(h.power_state, Some(3));
        let h = ConfigHeader::parse(&cfg(0x0400, 0)).unwrap();
        assert!(!h.memory_enabled());
        assert_eq!(h.power_state, Some(0));
    }

    #[test]
    fn unprivileged_64_byte_view_has_no_power_state() {
        let h = ConfigHeader::parse(&cfg(0x0406, 3)[..64]).unwrap();
        assert!(h.memory_enabled());
        assert_eq!(h.power_state, None);
        assert_eq!(ConfigHeader::parse(&[0u8; 4]), None);
    }

    #[test]
    fn survives_capability_loops() {
        let mut c = cfg(0x0406, 3);
        c[0x51] = 0x50; // MSI points at itself
        assert_eq!(ConfigHeader::parse(&c).unwrap().power_state, None);
    }
}
