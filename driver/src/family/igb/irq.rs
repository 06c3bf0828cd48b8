//! igb MSI-X: GPIE in MSI-X mode, one vector per RX queue through IVAR,
//! EITR throttling; masking is the queue's own (EIMS/EIMC), never auto-mask
//! (EIAM stays 0: QEMU's igb does not implement it, and the driver masks a
//! vector itself once woken). EIAC stays 0 too: a queue vector's EICR bit
//! stays set after its message, so frames that arrive before the woken
//! queue masks the vector raise no second message (a cause raises a message
//! only when it newly becomes set; QEMU `igb_raise_interrupts`), and the
//! queue clears the bit itself when it arms (docs/design/interrupts.md).
//!
//! Order as Linux `igb_configure_msix` and `igb_assign_vector`: GPIE first,
//! then IVAR, EITR; every vector stays masked until its queue arms it.

use crate::family::VectorRegs;
use crate::sys::mmio::Regs;
use pollnic_hw::igb::bits::ALL_INTERRUPTS;
use pollnic_hw::igb::irq::*;
use pollnic_hw::igb::regs::{EIAC, EICR, EIMC, EIMS};

/// Whether `device` is an I350, whose IVAR layout is the 82580's.
fn is_i350(device: u16) -> bool {
    super::ids::MODELS
        .iter()
        .any(|m| m.device_id == device && m.variant.starts_with("I350"))
}

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

/// Write the IVAR entry of RX queue `q` (vector `v`, valid), leaving the
/// other three entries of the register as they are (`igb_write_ivar`).
fn set_rx_ivar(r: &dyn Regs, device: u16, q: u16, v: u16) {
    let (reg, shift) = if is_i350(device) {
        ivar_entry_i350(q, false)
    } else {
        ivar_entry_82576(q, false)
    };
    let entry = (v as u32 | IVAR_VALID as u32) << shift;
    let keep = r.read32(reg) & !(0xFF << shift);
    r.write32(reg, keep | entry);
}

/// MSI-X mode, RX queue `q` → vector `q` for `q < queues`, all masked, EITR
/// at `rx_usecs`, no auto-clear (EIAC 0), causes cleared. VFIO has already checked that the
/// device offers `queues` vectors (QEMU's igb has 10, the 82576 25).
pub fn configure_msix(
    r: &dyn Regs,
    device: u16,
    queues: u16,
    rx_usecs: u32,
) -> Option<Vec<VectorRegs>> {
    r.write32(EIMC, ALL_INTERRUPTS);
    r.write32(GPIE, GPIE_MSIX_MODE | GPIE_PBA | GPIE_NSICR);
    for n in 0..IVAR_COUNT {
        r.write32(IVAR0 + 4 * n as u32, 0);
    }
    r.write32(IVAR_MISC, 0);
    let mut all = 0;
    let regs: Vec<VectorRegs> = (0..queues)
        .map(|q| {
            set_rx_ivar(r, device, q, q);
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
