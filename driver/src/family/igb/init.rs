//! igb bring-up and shutdown, in the order of the 82576 datasheet §4.5
//! (software initialization sequence) and Linux `igb_main.c`:
//! stop (PCIe master disable, interrupts masked, RCTL/TCTL off) → global
//! reset → wait for reset and EEPROM auto-read →
//! read the MAC → link setup (SLU + PHY autonegotiation restart) → clear
//! counters; then per queue RX/TX setup (see [`super::queue`]); link wait last.
//!
//! QEMU's igb differs from silicon in two ways handled here: EECD.AUTO_RD is
//! never set (bounded wait, then carry on), and link comes up only after a
//! PHY autonegotiation restart through MDIC.

use crate::family::LinkStatus;
use crate::sys::mmio::Regs;
pub use crate::wait::{wait_for, TimedOut};
use pollnic_hw::igb::{bits::*, phy, regs::*};
use std::time::Duration;

/// Mask every interrupt cause (IMC, EIMC) and clear pending ones; pollnic polls.
pub fn mask_interrupts(r: &dyn Regs) {
    r.write32(IMC, ALL_INTERRUPTS);
    r.write32(EIMC, ALL_INTERRUPTS);
    r.read32(ICR);
    r.read32(EICR);
}

/// How long [`stop_before_reset`] waits for STATUS.GIO_MASTER_ENABLE to
/// clear: Linux `MASTER_DISABLE_TIMEOUT`, 800 polls 100 µs apart.
const MASTER_DISABLE_TIMEOUT: Duration = Duration::from_millis(80);

/// Quiesce the port before CTRL.RST, as Linux `igb_reset_hw_82575` and
/// `igb_reset_hw_82580` (I350) do: PCIe master disable
/// (`igb_disable_pcie_master`: CTRL.GIO_MASTER_DISABLE, then a bounded wait
/// for STATUS.GIO_MASTER_ENABLE to clear, so that no DMA is in flight when
/// the MAC resets), every interrupt masked, the receiver off (RCTL 0) and the
/// transmitter off with short-packet padding kept (TCTL = PSP), a flush, and
/// 10 ms for the packet buffers to drain. A master disable that does not
/// complete is not an error, as in Linux: the reset goes ahead. Returns
/// whether it completed.
pub fn stop_before_reset(r: &dyn Regs) -> bool {
    r.set_bits(CTRL, CTRL_GIO_MASTER_DISABLE);
    let drained = wait_for(
        "PCIe master disable (STATUS.GIO_MASTER_ENABLE)",
        MASTER_DISABLE_TIMEOUT,
        || r.read32(STATUS) & STATUS_GIO_MASTER_ENABLE == 0,
    )
    .is_ok();
    mask_interrupts(r);
    r.write32(RCTL, 0);
    r.write32(TCTL, TCTL_PSP);
    r.read32(STATUS);
    std::thread::sleep(Duration::from_millis(10));
    drained
}

/// Global device reset (CTRL.RST) after [`stop_before_reset`], then wait
/// for the bit to self-clear (82576 datasheet §4.3.1: wait at least 1 ms
/// before polling), and mask and clear the causes again.
pub fn reset(r: &dyn Regs) -> Result<(), TimedOut> {
    stop_before_reset(r);
    r.write32(CTRL, r.read32(CTRL) | CTRL_RST);
    std::thread::sleep(Duration::from_millis(2));
    wait_for("device reset (CTRL.RST)", Duration::from_secs(1), || {
        r.read32(CTRL) & CTRL_RST == 0
    })?;
    mask_interrupts(r);
    Ok(())
}

/// Tell the manageability firmware the driver owns the port: CTRL_EXT.DRV_LOAD
/// on, right after the reset (Linux `igb_get_hw_control`, called from
/// `igb_probe` once the reset is done). [`shutdown`] clears it again.
pub fn take_hw_control(r: &dyn Regs) {
    r.set_bits(CTRL_EXT, CTRL_EXT_DRV_LOAD);
}

/// Wait up to 10 ms for EECD.AUTO_RD. Real parts set it within a few ms of
/// reset; QEMU never does, so a timeout here is not an error. Returns whether it was seen.
pub fn wait_eeprom_auto_read(r: &dyn Regs) -> bool {
    wait_for("EEPROM auto-read", Duration::from_millis(10), || {
        r.read32(EECD) & EECD_AUTO_RD != 0
    })
    .is_ok()
}

/// Read one 16-bit EEPROM word through EERD (bounded wait for EERD.DONE).
pub fn eeprom_read(r: &dyn Regs, word: u32) -> Result<u16, TimedOut> {
    r.write32(EERD, (word << EERD_ADDR_SHIFT) | EERD_START);
    let mut v = 0;
    wait_for("EEPROM read (EERD.DONE)", Duration::from_millis(50), || {
        v = r.read32(EERD);
        v & EERD_DONE != 0
    })?;
    Ok((v >> EERD_DATA_SHIFT) as u16)
}

/// The station MAC address: RAL0/RAH0 as loaded from the EEPROM at reset,
/// or the EEPROM words 0..3 when RAH0.AV is clear.
pub fn read_mac(r: &dyn Regs) -> Result<[u8; 6], TimedOut> {
    let (ral, rah) = (r.read32(RAL0), r.read32(RAH0));
    if rah & RAH_AV != 0 {
        let l = ral.to_le_bytes();
        let h = rah.to_le_bytes();
        return Ok([l[0], l[1], l[2], l[3], h[0], h[1]]);
    }
    let mut mac = [0u8; 6];
    for w in 0..3 {
        let v = eeprom_read(r, w)?.to_le_bytes();
        mac[2 * w as usize] = v[0];
        mac[2 * w as usize + 1] = v[1];
    }
    // Make it the filter address too.
    r.write32(RAL0, u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]]));
    r.write32(RAH0, u32::from_le_bytes([mac[4], mac[5], 0, 0]) | RAH_AV);
    Ok(mac)
}

/// Write a PHY register through MDIC and wait for MDIC.READY.
pub fn phy_write(r: &dyn Regs, reg: u32, data: u16) -> Result<(), TimedOut> {
    r.write32(MDIC, phy::mdic_write(reg, data));
    let mut v = 0;
    wait_for("PHY write (MDIC.READY)", Duration::from_millis(100), || {
        v = r.read32(MDIC);
        v & MDIC_READY != 0
    })
}

/// Read a PHY register through MDIC.
pub fn phy_read(r: &dyn Regs, reg: u32) -> Result<u16, TimedOut> {
    r.write32(MDIC, phy::mdic_read(reg));
    let mut v = 0;
    wait_for("PHY read (MDIC.READY)", Duration::from_millis(100), || {
        v = r.read32(MDIC);
        v & MDIC_READY != 0
    })?;
    Ok((v & MDIC_DATA_MASK) as u16)
}

/// Ask for link: CTRL.SLU set, link reset and PHY reset cleared, then
/// restart PHY autonegotiation (BMCR.AUTOEN | BMCR.RESTART_AN, power-down off).
pub fn link_setup(r: &dyn Regs) -> Result<(), TimedOut> {
    let ctrl = r.read32(CTRL);
    r.write32(CTRL, (ctrl | CTRL_SLU) & !(CTRL_LRST | CTRL_PHY_RST));
    let bmcr = phy_read(r, phy::PHY_CTRL)?;
    phy_write(
        r,
        phy::PHY_CTRL,
        (bmcr | phy::BMCR_AUTOEN | phy::BMCR_RESTART_AN) & !phy::BMCR_PDOWN,
    )
}

/// Read the link state (STATUS.LU, speed bits, FD).
pub fn link_status(r: &dyn Regs) -> LinkStatus {
    let s = r.read32(STATUS);
    LinkStatus {
        up: s & STATUS_LU != 0,
        speed_mbps: status_speed_mbps(s),
        full_duplex: s & STATUS_FD != 0,
    }
}

/// Stop all DMA: receiver and transmitter off, every queue disabled (bounded
/// wait for RXDCTL/TXDCTL.ENABLE to read back 0), then a global reset, and
/// CTRL_EXT.DRV_LOAD cleared (Linux `igb_release_hw_control`).
/// Safe to call on a device in any state.
pub fn shutdown(r: &dyn Regs, queues: u16) {
    mask_interrupts(r);
    r.clear_bits(RCTL, RCTL_EN);
    for q in 0..queues {
        r.clear_bits(rxdctl(q), XDCTL_ENABLE);
        r.clear_bits(txdctl(q), XDCTL_ENABLE);
    }
    for q in 0..queues {
        let _ = wait_for("RX queue disable", Duration::from_millis(50), || {
            r.read32(rxdctl(q)) & XDCTL_ENABLE == 0
        });
        let _ = wait_for("TX queue disable", Duration::from_millis(50), || {
            r.read32(txdctl(q)) & XDCTL_ENABLE == 0
        });
    }
    r.clear_bits(TCTL, TCTL_EN);
    let _ = reset(r);
    // Give the port back to the firmware (Linux `igb_release_hw_control`),
    // also where the reset left DRV_LOAD set.
    r.clear_bits(CTRL_EXT, CTRL_EXT_DRV_LOAD);
}
