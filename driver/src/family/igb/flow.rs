//! igb flow control, as Linux `igb_reset` computes the water marks and
//! `igb_setup_link` / `igb_set_fc_watermarks` / `igb_force_mac_fc` program
//! them: PAUSE address and type, the PAUSE time, FCRTH/FCRTL (only when the
//! port sends PAUSE), and CTRL.RFCE/TFCE. The mode is forced, as Linux does
//! when it does not autonegotiate pause (`fc.disable_fc_autoneg`); pollnic
//! does not advertise PAUSE/ASM_DIR in the PHY.

use crate::sys::mmio::Regs;
use pollnic_hw::flow::{igb_water_marks, FlowControl, PAUSE_TIME};
use pollnic_hw::igb::{bits::*, regs::*};

/// The RX packet buffer in KB, as Linux `igb_reset` reads it: on the I350
/// RXPBS holds an index into a table of sizes (`igb_rxpbs_adjust_82580`,
/// [`pollnic_hw::igb::bits::rxpbs_kb_i350`]); on the 82576 the size itself
/// in bits 6:0, its reset value where the field reads 0. An I350 value
/// outside the table gives [`FALLBACK_PBA_KB`].
pub fn packet_buffer_kb(r: &dyn Regs, device: u16) -> u32 {
    let rxpbs = r.read32(RXPBS);
    if pollnic_hw::igb::is_i350(device) {
        return rxpbs_kb_i350(rxpbs).unwrap_or(FALLBACK_PBA_KB);
    }
    match rxpbs & RXPBS_SIZE_MASK_82576 {
        0 => RXPBS_DEFAULT_KB,
        kb => kb,
    }
}

/// The buffer assumed for an I350 RXPBS value outside the table: 34 KB,
/// Linux's `E1000_PBA_34K` for the parts whose size it does not read (where
/// Linux would take 0 and compute no usable water mark).
pub const FALLBACK_PBA_KB: u32 = 34;

/// Program `mode` on PCI device `device` for frames of MTU `mtu` (+ 14 + FCS 4 + VLAN 4 bytes, as
/// Linux's `max_frame_size`).
pub fn configure(r: &dyn Regs, device: u16, mode: FlowControl, mtu: u32) {
    r.write32(FCAL, FLOW_CONTROL_ADDRESS_LOW);
    r.write32(FCAH, FLOW_CONTROL_ADDRESS_HIGH);
    r.write32(FCT, FLOW_CONTROL_TYPE);
    r.write32(FCTTV, u32::from(PAUSE_TIME));
    let (high, low) = igb_water_marks(packet_buffer_kb(r, device), mtu + 14 + 4 + 4);
    if mode.sends_pause() {
        r.write32(FCRTL, low | FCRTL_XONE);
        r.write32(FCRTH, high);
    } else {
        r.write32(FCRTL, 0);
        r.write32(FCRTH, 0);
    }
    let mut ctrl = r.read32(CTRL) & !(CTRL_RFCE | CTRL_TFCE);
    if mode.receives_pause() {
        ctrl |= CTRL_RFCE;
    }
    if mode.sends_pause() {
        ctrl |= CTRL_TFCE;
    }
    r.write32(CTRL, ctrl);
}

/// The mode the port runs with, read back from CTRL.RFCE/TFCE.
pub fn mode(r: &dyn Regs) -> FlowControl {
    let ctrl = r.read32(CTRL);
    FlowControl::from_directions(ctrl & CTRL_RFCE != 0, ctrl & CTRL_TFCE != 0)
}
