//! 82599 reset, EEPROM and DMA-init waits, MAC, link and shutdown, in the
//! order of the 82599 datasheet §4.6 (steps 1–8 and 14 of the sequence in
//! `pollnic_hw::ixgbe`), as Linux `ixgbe_82599.c`/`ixgbe_common.c` and ixy
//! implement it.

use super::link;
use super::media::Media;
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
/// to read 0, as Linux `ixgbe_disable_pcie_master` does before every reset
/// (800 polls 100 µs apart). Returns whether it did; when it did not, the
/// reset must be the double one ([`reset`]).
pub fn disable_pcie_master(r: &dyn Regs) -> bool {
    r.set_bits(CTRL, CTRL_GIO_DIS);
    wait_for(
        "PCIe master disable (STATUS.GIO)",
        Duration::from_millis(80),
        || r.read32(STATUS) & STATUS_GIO == 0,
    )
    .is_ok()
}

/// Flush what the transmit path still holds in the PCIe block before the
/// double reset (Linux `ixgbe_clear_tx_pending`, run when
/// `IXGBE_FLAGS_DOUBLE_RESET_REQUIRED` is set): MAC loopback on so nothing
/// leaves on the wire, 3 ms for a last completion, GCR_EXT.BUFFERS_CLEAR for
/// 20 µs, then HLREG0 and GCR_EXT as they were. Linux also polls the PCIe
/// Device Status "transaction pending" bit in configuration space; the
/// family sees only BAR 0, so pollnic waits the 3 ms and goes on.
pub fn clear_tx_pending(r: &dyn Regs) {
    let hlreg0 = r.read32(HLREG0);
    r.write32(HLREG0, hlreg0 | HLREG0_LPBK);
    r.read32(STATUS);
    std::thread::sleep(Duration::from_millis(3));
    let gcr_ext = r.read32(GCR_EXT);
    r.write32(GCR_EXT, gcr_ext | GCR_EXT_BUFFERS_CLEAR);
    r.read32(STATUS);
    std::thread::sleep(Duration::from_micros(20));
    r.write32(GCR_EXT, gcr_ext);
    r.write32(HLREG0, hlreg0);
}

/// One reset, awaited until it self-clears, then 10 ms (ixy; Linux waits
/// 50 ms) before anything else touches the device. The bit follows the
/// link, as Linux `ixgbe_reset_hw_82599` chooses it: CTRL.RST (the MAC
/// alone) while the link is up, since a link reset then may reset the PHY
/// under manageability firmware that uses it; CTRL.LNK_RST when it is down.
fn reset_once(r: &dyn Regs) -> Result<(), TimedOut> {
    let bit = if r.read32(LINKS) & LINKS_UP != 0 {
        CTRL_RST
    } else {
        CTRL_LNK_RST
    };
    r.write32(CTRL, r.read32(CTRL) | bit);
    std::thread::sleep(Duration::from_millis(1));
    wait_for("device reset (CTRL.RST)", INIT_TIMEOUT, || {
        r.read32(CTRL) & CTRL_RST_MASK == 0
    })?;
    std::thread::sleep(Duration::from_millis(10));
    Ok(())
}

/// Stop whatever the port was left doing before it is reset, as Linux
/// `ixgbe_stop_adapter` does: the receiver off (RXCTRL.RXEN), interrupts
/// masked and the pending cause read away, every TX queue's TXDCTL set to
/// SWFLSH alone and every RX queue's RXDCTL.ENABLE cleared with SWFLSH
/// (all 128 of each), a flush, then, for each queue that was enabled, a
/// bounded wait (10 ms) for its enable bit to read 0. The master disable
/// follows in [`reset`].
pub fn stop_adapter(r: &dyn Regs) {
    r.clear_bits(RXCTRL, RXCTRL_RXEN);
    mask_interrupts(r);
    let was: Vec<(u32, bool)> = (0..QUEUES)
        .flat_map(|q| [(txdctl(q), true), (rxdctl(q), false)])
        .filter(|&(reg, _)| r.read32(reg) & XDCTL_ENABLE != 0)
        .collect();
    for q in 0..QUEUES {
        r.write32(txdctl(q), XDCTL_SWFLSH);
    }
    for q in 0..QUEUES {
        let v = r.read32(rxdctl(q));
        r.write32(rxdctl(q), (v & !XDCTL_ENABLE) | XDCTL_SWFLSH);
    }
    r.read32(STATUS);
    for (reg, tx) in was {
        let what = if tx { "TX queue stop" } else { "RX queue stop" };
        let _ = wait_for(what, Duration::from_millis(10), || {
            r.read32(reg) & XDCTL_ENABLE == 0
        });
    }
}

/// Global reset (§4.6.3.2): stop the adapter ([`stop_adapter`]), stop mastering, set CTRL.RST
/// and CTRL.LNK_RST, wait for both to self-clear; mask again (the reset
/// restored the masks). When the master disable timed out, flush the TX
/// path and reset twice, more than 1 µs apart: the 82599 specification
/// update's master-disable flow, as Linux `ixgbe_reset_hw_82599` does it
/// (`ixgbe_clear_tx_pending`, then `goto mac_reset_top` once).
///
/// # Errors
/// [`TimedOut`] "device reset (CTRL.RST)" when the bits stay set.
pub fn reset(r: &dyn Regs) -> Result<(), TimedOut> {
    stop_adapter(r);
    let double = !disable_pcie_master(r);
    if double {
        clear_tx_pending(r);
    }
    reset_once(r)?;
    if double {
        reset_once(r)?;
    }
    mask_interrupts(r);
    Ok(())
}

/// Empty the receive address filters the reset leaves undefined, as Linux
/// `ixgbe_init_rx_addrs_generic` does after every reset: RAR 1..127
/// (RAL/RAH) zeroed (RAR 0 holds the station address the EEPROM loaded),
/// the 128 MTA words zeroed with MCSTCTRL's filter off; and the VLAN filter
/// table (Linux `ixgbe_clear_vfta_generic`). pollnic adds no multicast or
/// extra unicast address: multicast passes only with MPE (allmulti).
pub fn clear_rx_filters(r: &dyn Regs) {
    for n in 1..RAR_ENTRIES {
        r.write32(ral(n), 0);
        r.write32(rah(n), 0);
    }
    r.write32(MCSTCTRL, 0);
    for n in 0..MTA_WORDS {
        r.write32(mta(n), 0);
    }
    for n in 0..VFTA_WORDS {
        r.write32(vfta(n), 0);
    }
}

/// Receive address registers of the 82599 (`IXGBE_82599_RAR_ENTRIES`).
pub const RAR_ENTRIES: u16 = 128;
/// Multicast table words (`IXGBE_MTA(0..128)`).
pub const MTA_WORDS: u16 = 128;
/// VLAN filter table words (`IXGBE_VFTA(0..128)`, 4096 bits).
pub const VFTA_WORDS: u16 = 128;
/// RX/TX queues of the 82599.
pub const QUEUES: u16 = 128;

/// Turn relaxed ordering off on every queue, as Linux and DPDK
/// `ixgbe_start_hw_gen2` do: DCA_TXCTRL.DESC_WRO_EN (a descriptor
/// write-back overtaking the data it reports "hoses bookkeeping", DPDK
/// `ixgbe_dev_tx_init`) and DCA_RXCTRL's data and header write relaxed
/// ordering, plus DCA_RXCTRL bit 12 (ixy).
pub fn disable_relaxed_ordering(r: &dyn Regs) {
    for q in 0..QUEUES {
        r.clear_bits(dca_txctrl(q), DCA_TXCTRL_DESC_WRO_EN);
        r.clear_bits(dca_rxctrl(q), DCA_RXCTRL_CLEAR);
    }
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

/// How long a TX queue may take to send what it holds at shutdown (DPDK
/// `ixgbe_dev_tx_queue_stop`: `RTE_IXGBE_REGISTER_POLL_WAIT_10_MS`).
pub const TX_DRAIN_TIMEOUT: Duration = Duration::from_millis(10);

/// After a reset other than the first of an open, put back AUTOC2's upper
/// half (bits 31:16: the 10G serial PMA/PMD field and the link-disable
/// bits) as it read before that reset, when the reset changed it, as Linux
/// `ixgbe_reset_hw_82599` does with the value it saved at its first reset
/// (`orig_autoc2`). The reset reloads the NVM's value, which on some boards
/// disables the link (AUTOC2 bits 30:28); the bring-up's pipeline reset
/// had enabled it, so the value before a later reset is the one Linux
/// saved. AUTOC itself is not restored: pollnic writes it only to start the
/// link, which every open does again. Returns whether it wrote AUTOC2.
pub fn restore_autoc2_upper(r: &dyn Regs, before: u32) -> bool {
    let now = r.read32(AUTOC2);
    if (now ^ before) & AUTOC2_UPPER_MASK == 0 {
        return false;
    }
    r.write32(
        AUTOC2,
        (now & !AUTOC2_UPPER_MASK) | (before & AUTOC2_UPPER_MASK),
    );
    true
}

/// Tell the manageability firmware the driver owns the port: CTRL_EXT.DRV_LOAD
/// on, right after the reset (Linux `ixgbe_get_hw_control`, from
/// `ixgbe_probe`). [`shutdown`] clears it again.
pub fn take_hw_control(r: &dyn Regs) {
    r.set_bits(CTRL_EXT, CTRL_EXT_DRV_LOAD);
}

/// Stop all DMA in the order of §4.6.7.1 and §4.6.8.1: receiver off, each RX
/// queue disabled and awaited; each TX queue left up to 10 ms to send what
/// it holds (TDH reaching TDT, DPDK `ixgbe_dev_tx_queue_stop`; only with the
/// link up, since without it nothing leaves: Linux `ixgbe_disable_tx`), then
/// disabled with TXDCTL.SWFLSH, which writes back what the queue has done
/// (Linux `ixgbe_disable_tx`), and awaited; TX DMA off, a global reset
/// with AUTOC2's upper half kept across it ([`restore_autoc2_upper`]),
/// and on SFP+ boards the laser off again (Linux `ixgbe_down`, DPDK
/// `ixgbe_dev_stop`), and CTRL_EXT.DRV_LOAD cleared (Linux
/// `ixgbe_release_hw_control`). Safe in any state; failures are ignored (the reset
/// follows regardless).
pub fn shutdown(r: &dyn Regs, queues: u16, media: Media) {
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
    let link_up = r.read32(LINKS) & LINKS_UP != 0;
    for q in 0..queues {
        if link_up && r.read32(txdctl(q)) & XDCTL_ENABLE != 0 {
            let _ = wait_for("TX queue drain (TDH == TDT)", TX_DRAIN_TIMEOUT, || {
                r.read32(tdh(q)) == r.read32(tdt(q))
            });
        }
        r.write32(txdctl(q), XDCTL_SWFLSH);
    }
    for q in 0..queues {
        let _ = wait_for("TX queue disable", Duration::from_millis(50), || {
            r.read32(txdctl(q)) & XDCTL_ENABLE == 0
        });
    }
    r.clear_bits(DMATXCTL, DMATXCTL_TE);
    let autoc2 = r.read32(AUTOC2);
    let _ = reset(r);
    restore_autoc2_upper(r, autoc2);
    if link::controls_laser(r, media) {
        link::disable_tx_laser(r);
    }
    // Give the port back to the firmware (Linux `ixgbe_release_hw_control`).
    r.clear_bits(CTRL_EXT, CTRL_EXT_DRV_LOAD);
}
