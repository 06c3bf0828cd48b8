//! 82599 flow control, as Linux `ixgbe_pbthresh_setup` computes the water
//! marks and `ixgbe_fc_enable_generic` programs them: MFLCN.RFCE (with DPF:
//! PAUSE frames are consumed, not passed up) and FCCFG.TFCE_802_3X for the
//! mode; per packet buffer FCRTL/FCRTH with XONE/FCEN when the port sends
//! PAUSE; the PAUSE time in FCTTV and half of it in FCRTV. Forced, as
//! Linux with `fc.disable_fc_autoneg` (pollnic does not negotiate pause).

use crate::sys::mmio::Regs;
use pollnic_hw::flow::{ixgbe_water_marks_kb, FlowControl, PAUSE_TIME};
use pollnic_hw::ixgbe::{bits::*, regs::*};

/// Program `mode` at MTU `mtu`; the packet buffers must be sized first.
pub fn configure(r: &dyn Regs, mode: FlowControl, mtu: u32) {
    let mut mflcn = r.read32(MFLCN) & !(MFLCN_RPFCE_MASK | MFLCN_RFCE);
    if mode.receives_pause() {
        mflcn |= MFLCN_RFCE;
    }
    r.write32(MFLCN, mflcn | MFLCN_DPF);
    let mut fccfg = r.read32(FCCFG) & !(FCCFG_TFCE_802_3X | FCCFG_TFCE_PRIORITY);
    if mode.sends_pause() {
        fccfg |= FCCFG_TFCE_802_3X;
    }
    r.write32(FCCFG, fccfg);
    for pb in 0..8 {
        let size = r.read32(rxpbsize(pb));
        let (high, low) = ixgbe_water_marks_kb(size >> 10, mtu);
        if mode.sends_pause() && size != 0 && high != 0 {
            r.write32(fcrtl(pb), (low << 10) | FCRTL_XONE);
            r.write32(fcrth(pb), (high << 10) | FCRTH_FCEN);
        } else {
            // Linux: the buffer less 24 KiB, so the internal TX switch
            // cannot hang; 0 for a buffer of no size (Linux would wrap).
            r.write32(fcrtl(pb), 0);
            r.write32(fcrth(pb), size.saturating_sub(24 << 10));
        }
    }
    let pause = u32::from(PAUSE_TIME);
    for n in 0..4 {
        r.write32(fcttv(n), pause * 0x0001_0001);
    }
    r.write32(FCRTV, pause / 2);
}

/// The mode the port runs with, read back from MFLCN and FCCFG.
pub fn mode(r: &dyn Regs) -> FlowControl {
    FlowControl::from_directions(
        r.read32(MFLCN) & MFLCN_RFCE != 0,
        r.read32(FCCFG) & FCCFG_TFCE_802_3X != 0,
    )
}
