//! 82599 reset, EEPROM and DMA-init waits, MAC, link and shutdown, in the
//! order of the 82599 datasheet §4.6 (steps 1–8 and 14 of the sequence in
//! `pollnic_hw::ixgbe`), as Linux `ixgbe_82599.c`/`ixgbe_common.c` and ixy
//! implement it.

use crate::family::LinkStatus;
use crate::sys::mmio::Regs;
use crate::wait::{wait_for, TimedOut};
use pollnic_hw::ixgbe::{bits::*, regs::*};
use std::time::Duration;

/// How long reset, EEPROM auto-read and DMA init may take (Linux polls the
/// reset bit for 10 ms and the EEPROM for longer; 1 s is generous for both).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(1);

/// Mask every interrupt cause (EIMC, EIMC_EX(0..2)) and clear pending ones
/// (§4.6.3.1); pollnic polls and never unmasks them.
pub fn mask_interrupts(r: &dyn Regs) {
    r.write32(EIMC, ALL_INTERRUPTS);
    r.write32(eimc_ex(0), ALL_INTERRUPTS);
    r.write32(eimc_ex(1), ALL_INTERRUPTS);
    r.read32(EICR);
}

/// Stop PCIe mastering (CTRL.GIO_DIS) and wait up to 80 ms for STATUS.GIO
/// to read 0, as Linux does before every reset. Returns whether it did;
/// the reset goes ahead either way (Linux too).
pub fn disable_pcie_master(r: &dyn Regs) -> bool {
    r.set_bits(CTRL, CTRL_GIO_DIS);
    wait_for(
        "PCIe master disable (STATUS.GIO)",
        Duration::from_millis(80),
        || r.read32(STATUS) & STATUS_GIO == 0,
    )
    .is_ok()
}

/// Global reset (§4.6.3.2): mask interrupts, stop mastering, set CTRL.RST
/// and CTRL.LNK_RST, wait for both to self-clear, then 10 ms (ixy; Linux
/// waits longer) before anything else touches the device; mask again (the
/// reset restored the masks).
///
/// # Errors
/// [`TimedOut`] "device reset (CTRL.RST)" when the bits stay set.
pub fn reset(r: &dyn Regs) -> Result<(), TimedOut> {
    mask_interrupts(r);
    disable_pcie_master(r);
    r.write32(CTRL, r.read32(CTRL) | CTRL_RST_MASK);
    std::thread::sleep(Duration::from_millis(1));
    wait_for("device reset (CTRL.RST)", INIT_TIMEOUT, || {
        r.read32(CTRL) & CTRL_RST_MASK == 0
    })?;
    std::thread::sleep(Duration::from_millis(10));
    mask_interrupts(r);
    Ok(())
}

/// Wait for the EEPROM auto-read (EEC.ARD) and then the DMA init
/// (RDRXCTL.DMAIDONE), §4.6.3.
///
/// # Errors
/// [`TimedOut`] naming the one that did not come.
pub fn wait_eeprom_and_dma(r: &dyn Regs) -> Result<(), TimedOut> {
    wait_for("EEPROM auto-read (EEC.ARD)", INIT_TIMEOUT, || {
        r.read32(EEC) & EEC_ARD != 0
    })?;
    wait_for("DMA init (RDRXCTL.DMAIDONE)", INIT_TIMEOUT, || {
        r.read32(RDRXCTL) & RDRXCTL_DMAIDONE != 0
    })
}

/// The station MAC from RAL(0)/RAH(0), which the EEPROM auto-read loads.
///
/// # Errors
/// [`TimedOut`] when RAH(0).AV stays clear (no address was loaded).
pub fn read_mac(r: &dyn Regs) -> Result<[u8; 6], TimedOut> {
    wait_for(
        "MAC address load from the EEPROM (RAH(0).AV)",
        Duration::from_millis(10),
        || r.read32(rah(0)) & RAH_AV != 0,
    )?;
    let l = r.read32(ral(0)).to_le_bytes();
    let h = r.read32(rah(0)).to_le_bytes();
    Ok([l[0], l[1], l[2], l[3], h[0], h[1]])
}

/// Start link negotiation (§4.6.4): keep the link mode the EEPROM put in
/// AUTOC.LMS, set AUTOC.AN_RESTART. Link up is awaited at the very end.
pub fn start_link(r: &dyn Regs) {
    let autoc = r.read32(AUTOC);
    r.write32(AUTOC, autoc | AUTOC_AN_RESTART);
}

/// Link state from LINKS (the 82599 is full duplex only).
pub fn link_status(r: &dyn Regs) -> LinkStatus {
    let l = r.read32(LINKS);
    LinkStatus {
        up: l & LINKS_UP != 0,
        speed_mbps: links_speed_mbps(l),
        full_duplex: true,
    }
}

/// Stop all DMA in the order of §4.6.7.1 and §4.6.8.1: receiver off, each RX
/// queue disabled and awaited, each TX queue disabled and awaited, TX DMA
/// off, then a global reset. Safe in any state; failures are ignored (the
/// reset follows regardless).
pub fn shutdown(r: &dyn Regs, queues: u16) {
    mask_interrupts(r);
    r.clear_bits(RXCTRL, RXCTRL_RXEN);
    for q in 0..queues {
        r.clear_bits(rxdctl(q), XDCTL_ENABLE);
    }
    for q in 0..queues {
        let _ = wait_for("RX queue disable", Duration::from_millis(50), || {
            r.read32(rxdctl(q)) & XDCTL_ENABLE == 0
        });
    }
    for q in 0..queues {
        r.clear_bits(txdctl(q), XDCTL_ENABLE);
    }
    for q in 0..queues {
        let _ = wait_for("TX queue disable", Duration::from_millis(50), || {
            r.read32(txdctl(q)) & XDCTL_ENABLE == 0
        });
    }
    r.clear_bits(DMATXCTL, DMATXCTL_TE);
    let _ = reset(r);
}
