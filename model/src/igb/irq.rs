//! The software 82576's MSI-X: GPIE.MSIX_MODE, IVAR routing of each RX
//! queue's cause to a vector (the 82576 layout of `igb_assign_vector`), and
//! the per-vector bits of [`crate::msix`] at the 82576's offsets,
//! EITR read as bits 14:2 in µs.
//!
//! Strict where a mistake would route or lose an interrupt: an IVAR entry
//! naming a vector MSI-X does not have, an EIMS bit for such a vector, EIAC
//! written before GPIE.MSIX_MODE (QEMU's igb ignores it then) are
//! violations.

use super::state::State;
use crate::msix::{Layout, Msix};
use pollnic_hw::igb::irq::*;
use pollnic_hw::igb::regs::{EIAC, EICR, EIMS};
use std::time::Duration;

/// Vectors of the 82576's MSI-X table.
pub(crate) const VECTORS: usize = 25;

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

/// The vectors the driver may name: those enabled, or the table's size
/// before MSI-X is enabled.
fn vectors(s: &State) -> usize {
    if s.msix.events.is_empty() {
        VECTORS
    } else {
        s.msix.events.len()
    }
}

/// An IVAR or IVAR_MISC write: every valid entry must name a vector MSI-X has.
pub(crate) fn write_ivar(s: &mut State, off: u32, val: u32) {
    for b in val.to_le_bytes() {
        if b & IVAR_VALID != 0 && (b & 0x1f) as usize >= vectors(s) {
            s.violation(format!(
                "IVAR {off:#x} = {val:#010x} routes a cause to vector {}, but MSI-X has {} vectors",
                b & 0x1f,
                vectors(s)
            ));
        }
    }
    s.regs.insert(off, val);
}

/// An EIAC write: only in MSI-X mode (QEMU's igb drops it otherwise).
pub(crate) fn write_eiac(s: &mut State, val: u32) {
    if val != 0 && !msix_mode(s) {
        s.violation(format!(
            "EIAC = {val:#x} written before GPIE.MSIX_MODE: QEMU's igb ignores it then (set GPIE first)"
        ));
        return;
    }
    s.regs.insert(EIAC, val);
}

/// An EIMS write: unmask, and fire any vector whose cause is already set.
pub(crate) fn write_eims(s: &mut State, val: u32) {
    if msix_mode(s) {
        let n = vectors(s);
        if n < 32 && val >> n != 0 {
            s.violation(format!(
                "EIMS = {val:#x} unmasks a vector MSI-X does not have ({n} vectors)"
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
    let (reg, shift) = ivar_entry_82576(q, false);
    let entry = (s.reg(reg) >> shift) as u8;
    if entry & IVAR_VALID != 0 {
        s.msix.cause(&mut s.regs, &LAYOUT, (entry & 0x1f) as u16);
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
