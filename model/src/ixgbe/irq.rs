//! The software 82599's MSI-X: GPIE.MSIX_MODE, IVAR routing of each RX
//! queue's cause to a vector (`ixgbe_set_ivar`'s 82599 layout, two queues
//! per register), and the per-vector bits of [`crate::msix`] at the
//! 82599's offsets, EITR read as bits 11:3 in 2 µs units.
//!
//! Strict as the 82576 model: an IVAR entry naming a vector MSI-X does not
//! have, or an EIMS bit for one, is a violation.

use super::state::State;
use crate::msix::{Layout, Msix};
use pollnic_hw::ixgbe::irq::*;
use pollnic_hw::ixgbe::regs::{EIAC, EICR, EIMS, GPIE};
use std::time::Duration;

/// Vectors of the 82599's MSI-X table.
pub(crate) const VECTORS: usize = 64;

pub(crate) const LAYOUT: Layout = Layout {
    eicr: EICR,
    eims: EIMS,
    eiac: EIAC,
    eitr,
    usecs: eitr_usecs,
};

fn msix_mode(s: &State) -> bool {
    s.reg(GPIE) & GPIE_MSIX_MODE != 0
}

fn vectors(s: &State) -> usize {
    if s.msix.events.is_empty() {
        VECTORS
    } else {
        s.msix.events.len()
    }
}

/// An IVAR write: every valid entry must name a vector MSI-X has.
pub(crate) fn write_ivar(s: &mut State, off: u32, val: u32) {
    for b in val.to_le_bytes() {
        if b & IVAR_ALLOC_VAL != 0 && (b & 0x3f) as usize >= vectors(s) {
            s.violation(format!(
                "IVAR {off:#x} = {val:#010x} routes a cause to vector {}, but MSI-X has {} vectors",
                b & 0x3f,
                vectors(s)
            ));
        }
    }
    s.regs.insert(off, val);
}

/// An EIMS write: unmask (bits 0..16 are the queue vectors in MSI-X mode).
pub(crate) fn write_eims(s: &mut State, val: u32) {
    if msix_mode(s) {
        let n = vectors(s).min(16);
        let beyond = 0xFFFF & !((1u32 << n) - 1);
        if val & beyond != 0 {
            s.violation(format!(
                "EIMS = {val:#x} unmasks a queue vector MSI-X does not have ({n} vectors)"
            ));
        }
    }
    s.msix.unmask(&mut s.regs, &LAYOUT, val);
}

/// An EIMC write: mask.
pub(crate) fn write_eimc(s: &mut State, val: u32) {
    Msix::mask(&mut s.regs, &LAYOUT, val);
}

/// RX queue `q` wrote back a frame: set its vector's cause and raise it.
pub(crate) fn rx_cause(s: &mut State, q: u16) {
    if !msix_mode(s) {
        return;
    }
    let (reg, shift) = ivar_entry(q, false);
    let entry = (s.reg(reg) >> shift) as u8;
    if entry & IVAR_ALLOC_VAL != 0 && entry & 0x3f < 16 {
        s.msix.cause(&mut s.regs, &LAYOUT, (entry & 0x3f) as u16);
    }
}

/// The throttle interval of vector `v`.
pub(crate) fn interval(s: &State, v: u16) -> Duration {
    Msix::interval(&s.regs, &LAYOUT, v)
}

/// Let time act on throttled vectors.
pub(crate) fn tick(s: &mut State) {
    s.msix.tick(&mut s.regs, &LAYOUT);
}
