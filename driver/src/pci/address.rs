//! PCI addresses in the Linux sysfs form `dddd:bb:dd.f`.
//!
//! The form is the one the kernel uses for the entries of
//! `/sys/bus/pci/devices/` (`pci_name()` in `include/linux/pci.h`):
//! a 16-bit domain, an 8-bit bus, a 5-bit device (slot) and a 3-bit
//! function, written in lower-case hex.

use std::fmt;
use std::str::FromStr;

/// A PCI function address: domain, bus, device (slot) and function.
///
/// Parses from `0000:01:00.0` or the short `01:00.0` form (domain 0), as
/// printed by `lspci -D` and `lspci`; displays as `dddd:bb:dd.f`, the name of
/// the device's directory under `/sys/bus/pci/devices/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    /// PCI segment (domain), 0..=0xffff.
    pub domain: u16,
    /// Bus number, 0..=0xff.
    pub bus: u8,
    /// Device (slot) number, 0..32.
    pub device: u8,
    /// Function number, 0..8.
    pub function: u8,
}

impl PciAddress {
    /// Builds an address, or `None` when `device >= 32` or `function >= 8`.
    pub fn new(domain: u16, bus: u8, device: u8, function: u8) -> Option<Self> {
        (device < 32 && function < 8).then_some(Self {
            domain,
            bus,
            device,
            function,
        })
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Why a string is not a PCI address; the message says the expected form and
/// how to find the addresses of the NICs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid PCI address {input:?}: {reason}; expected DOMAIN:BUS:DEVICE.FUNCTION in hex, \
     like 0000:01:00.0 (or the short form 01:00.0); run `pollnic status` or \
     `lspci -D -nn | grep -i ethernet` to list the NICs' addresses"
)]
pub struct ParseAddressError {
    /// The string that was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// `"0000:03:00.0"` (or `"03:00.0"`), as [`str::parse`] takes it: what
/// [`crate::Device::open`] accepts besides a parsed address.
impl TryFrom<&str> for PciAddress {
    type Error = ParseAddressError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl TryFrom<&String> for PciAddress {
    type Error = ParseAddressError;
    fn try_from(s: &String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl TryFrom<String> for PciAddress {
    type Error = ParseAddressError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl FromStr for PciAddress {
    type Err = ParseAddressError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| ParseAddressError {
            input: s.to_owned(),
            reason,
        };
        let t = s.trim();
        let (head, function) = t
            .rsplit_once('.')
            .ok_or_else(|| err("missing `.FUNCTION`"))?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, s] => (*d, *b, *s),
            [b, s] => ("0", *b, *s),
            _ => return Err(err("wrong number of `:`-separated fields")),
        };
        let domain = hex(domain, 4).ok_or_else(|| err("domain is not 1-4 hex digits"))?;
        let bus = hex(bus, 2).ok_or_else(|| err("bus is not 1-2 hex digits"))?;
        let device = hex(device, 2).ok_or_else(|| err("device is not 1-2 hex digits"))?;
        let function = hex(function, 1).ok_or_else(|| err("function is not one digit 0-7"))?;
        if device >= 32 {
            return Err(err("device must be below 0x20 (32)"));
        }
        if function >= 8 {
            return Err(err("function must be 0-7"));
        }
        // The `hex` width limits make these conversions lossless.
        Ok(Self {
            domain: domain as u16,
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

/// Parses 1..=`max_digits` hex digits (no sign, no `0x`).
fn hex(s: &str, max_digits: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<PciAddress, ParseAddressError> {
        s.parse()
    }

    #[test]
    fn parses_full_and_short_forms() {
        let a = PciAddress::new(0, 0, 8, 0).unwrap();
        assert_eq!(p("0000:00:08.0"), Ok(a));
        assert_eq!(p("00:08.0"), Ok(a));
        assert_eq!(p(" 0000:00:08.0\n"), Ok(a));
        assert_eq!(
            p("abcd:FF:1f.7"),
            Ok(PciAddress::new(0xabcd, 0xff, 0x1f, 7).unwrap())
        );
        assert_eq!(p("1:2:3.4"), Ok(PciAddress::new(1, 2, 3, 4).unwrap()));
    }

    #[test]
    fn displays_canonical_form() {
        let a = PciAddress::new(0xabcd, 0xff, 0x1f, 7).unwrap();
        assert_eq!(a.to_string(), "abcd:ff:1f.7");
        assert_eq!(p("01:00.1").unwrap().to_string(), "0000:01:00.1");
        assert_eq!(p(&a.to_string()), Ok(a));
    }

    #[test]
    fn rejects_bad_forms() {
        for bad in [
            "",
            "0000:00:08",
            "00.0",
            "0000:00:20.0",
            "0000:00:08.8",
            "0000:100:08.0",
            "00000:00:08.0",
            "0000:00:08.0.0",
            "0:0:0:0.0",
            "0000:0g:08.0",
            "0000:00:08.",
            "0000::08.0",
            "+000:00:08.0",
            "0x00:08.0",
            "eth0",
        ] {
            assert!(p(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn error_says_form_and_how_to_find_addresses() {
        let msg = p("eth0").unwrap_err().to_string();
        assert!(msg.contains("\"eth0\""), "{msg}");
        assert!(msg.contains("0000:01:00.0"), "{msg}");
        assert!(msg.contains("pollnic status"), "{msg}");
        assert!(msg.contains("lspci -D -nn"), "{msg}");
    }

    #[test]
    fn new_checks_ranges_and_order_follows_fields() {
        assert!(PciAddress::new(0, 0, 32, 0).is_none());
        assert!(PciAddress::new(0, 0, 0, 8).is_none());
        let a = PciAddress::new(0, 1, 0, 1).unwrap();
        let b = PciAddress::new(0, 2, 0, 0).unwrap();
        let c = PciAddress::new(1, 0, 0, 0).unwrap();
        assert!(a < b && b < c);
    }
}
