//! The shape of a family's counter table, shared by igb and ixgbe so that
//! the driver's clear-on-read accumulation works on either: each counter's
//! `ethtool -S` name, datasheet mnemonic and registers, and the counters
//! Linux reports as sums of several registers.

/// How a counter is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// One 32-bit clear-on-read register.
    Bits32(u32),
    /// A 64-bit pair: read `lo` then `hi`; reading `hi` clears both.
    Bits64 {
        /// Low 32 bits.
        lo: u32,
        /// High 32 bits.
        hi: u32,
    },
}

/// One hardware counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// Name as printed by `ethtool -S` for the Linux igb driver.
    pub name: &'static str,
    /// Datasheet register mnemonic(s).
    pub register: &'static str,
    /// Where it lives.
    pub width: Width,
}

/// A 32-bit clear-on-read counter at `off` (shared by the families' tables).
pub(crate) const fn c32(name: &'static str, register: &'static str, off: u32) -> Counter {
    Counter {
        name,
        register,
        width: Width::Bits32(off),
    }
}
/// A 64-bit low/high counter pair starting at `lo` (shared by the families' tables).
pub(crate) const fn c64(name: &'static str, register: &'static str, lo: u32) -> Counter {
    Counter {
        name,
        register,
        width: Width::Bits64 { lo, hi: lo + 4 },
    }
}

/// A counter Linux reports as the sum of several registers of a family's `COUNTERS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sum {
    /// Name as the family's Linux driver prints it.
    pub name: &'static str,
    /// Names (in a family's `COUNTERS`) of the parts.
    pub parts: &'static [&'static str],
}
