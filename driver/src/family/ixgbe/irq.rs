//! 82599 MSI-X: GPIE in MSI-X mode, one vector per RX queue through IVAR
//! (`ixgbe_set_ivar`, two queues per register), EITR throttling in 2 µs
//! steps; masking is the queue's own (EIMS/EIMC), EIAM and EIAC left 0 as
//! on igb: a queue vector's EICR bit stays set after its message, so frames
//! that arrive before the woken queue masks it raise no more messages, and
//! the queue clears the bit when it arms.
//!
//! Order as Linux `ixgbe_configure_msix` after `ixgbe_setup_gpie`: GPIE,
//! IVAR per queue, EITR per vector; every vector masked until its
//! queue arms it. Only vectors 0..16 (the EICR RTX queue bits) are used:
//! pollnic drives at most 16 queues.

use crate::family::VectorRegs;
use crate::sys::mmio::Regs;
use pollnic_hw::ixgbe::bits::ALL_INTERRUPTS;
use pollnic_hw::ixgbe::irq::*;
use pollnic_hw::ixgbe::regs::{EIAC, EICR, EIMC, EIMS, GPIE};

/// The vector registers of RX queue `q`'s vector `q`.
pub fn vector_regs(q: u16) -> VectorRegs {
    VectorRegs {
        eicr: EICR,
        eims: EIMS,
        eimc: EIMC,
        bit: vector_bit(q),
        eitr: eitr(q),
        eitr_value,
    }
}

/// MSI-X mode, RX queue `q` → vector `q` for `q < queues` (at most 16), all
/// masked, EITR at `rx_usecs`, no auto-clear (EIAC 0), causes cleared.
pub fn configure_msix(r: &dyn Regs, queues: u16, rx_usecs: u32) -> Option<Vec<VectorRegs>> {
    if queues > 16 {
        return None;
    }
    r.write32(EIMC, ALL_INTERRUPTS);
    r.write32(GPIE, GPIE_MSIX_MODE | GPIE_OCD | GPIE_PBA_SUPPORT);
    let mut all = 0;
    let regs = (0..queues)
        .map(|q| {
            let (reg, shift) = ivar_entry(q, false);
            let keep = r.read32(reg) & !(0xFF << shift);
            r.write32(reg, keep | (q as u32 | IVAR_ALLOC_VAL as u32) << shift);
            r.write32(eitr(q), eitr_value(rx_usecs));
            let v = vector_regs(q);
            all |= v.bit;
            v
        })
        .collect();
    r.write32(EIAC, 0);
    r.write32(EICR, all);
    Some(regs)
}
