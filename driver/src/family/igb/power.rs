//! The I350's Energy Efficient Ethernet and DMA coalescing, on or off as
//! [`PowerSaving`] asks: EEE as Linux `igb_set_eee_i350` (`e1000_82575.c`)
//! sets it, DMA coalescing as Linux `igb_init_dmac` (`igb_main.c`)
//! programs it for the I350. The 82576 has neither register: nothing is
//! written there.

use crate::sys::mmio::Regs;
use pollnic_hw::igb::{bits::*, is_i350, regs::*};
use pollnic_hw::power::PowerSaving;

/// Linux `IGB_MIN_TXPBSIZE`: the transmit packet buffer DMCTXTH is sized
/// against, bytes.
const MIN_TXPBSIZE: u32 = 20408;
/// Linux `IGB_TX_BUF_4096`.
const TX_BUF_4096: u32 = 4096;
/// The DMA coalescing watchdog Linux sets, µs (DMACR counts 32 µs units).
const DMAC_WATCHDOG_USECS: u32 = 1000;

/// Program `ps` on device `device` (an I350; other parts are left alone),
/// for frames of MTU `mtu` and a receive packet buffer of `pba_kb` KB.
pub fn configure(r: &dyn Regs, device: u16, ps: PowerSaving, mtu: u32, pba_kb: u32) {
    if !is_i350(device) {
        return;
    }
    set_eee(r, ps.eee);
    set_dma_coalescing(r, ps.dma_coalescing, mtu + 14 + 4 + 4, pba_kb);
}

/// EEE on or off: IPCNFG's 100M/1G advertisement and EEER's LPI bits
/// together, written and read back (flush), as `igb_set_eee_i350`. The
/// advertisement takes effect at the next autonegotiation, which the link
/// setup restarts.
fn set_eee(r: &dyn Regs, on: bool) {
    let an = IPCNFG_EEE_100M_AN | IPCNFG_EEE_1G_AN;
    let (ipcnfg, eeer) = (r.read32(IPCNFG), r.read32(EEER));
    let (ipcnfg, eeer) = if on {
        (ipcnfg | an, eeer | EEER_LPI_MASK)
    } else {
        (ipcnfg & !an, eeer & !EEER_LPI_MASK)
    };
    r.write32(IPCNFG, ipcnfg);
    r.write32(EEER, eeer);
    r.read32(IPCNFG);
    r.read32(EEER);
}

/// DMA coalescing on, in `igb_init_dmac`'s order for the I350 (transmit
/// threshold 0 first; FCRTC's high water mark 64 × (PBA − 6); DMACR with
/// the threshold PBA − 10 KB, DMAC_EN, both Lx states, the 1 ms watchdog
/// and the BMC-to-OS watchdog off; no rate threshold; DMCTLX 4 with flush
/// disabled; the transmit threshold for one 4 KiB buffer and a frame;
/// PCIEMISC.LX_DECISION) — or off: DMACR.DMAC_EN cleared (Linux leaves the
/// reset value, which is off).
fn set_dma_coalescing(r: &dyn Regs, on: bool, max_frame: u32, pba_kb: u32) {
    if !on {
        r.clear_bits(DMACR, DMACR_DMAC_EN);
        return;
    }
    r.write32(DMCTXTH, 0);
    let hwm = 64 * pba_kb.saturating_sub(6);
    let fcrtc = r.read32(FCRTC) & !FCRTC_RTH_COAL_MASK;
    r.write32(
        FCRTC,
        fcrtc | ((hwm << FCRTC_RTH_COAL_SHIFT) & FCRTC_RTH_COAL_MASK),
    );
    let thr = pba_kb.saturating_sub(10);
    let mut dmacr = r.read32(DMACR) & !(DMACR_DMACTHR_MASK | DMACR_DMACWT_MASK);
    dmacr |= (thr << DMACR_DMACTHR_SHIFT) & DMACR_DMACTHR_MASK;
    dmacr |= DMACR_DMAC_EN | DMACR_DMAC_LX_MASK | (DMAC_WATCHDOG_USECS >> 5);
    dmacr &= !DMACR_DC_BMC2OSW_EN;
    r.write32(DMACR, dmacr);
    r.write32(DMCRTRH, 0);
    r.write32(DMCTLX, DMCTLX_DCFLUSH_DIS | 4);
    r.write32(
        DMCTXTH,
        MIN_TXPBSIZE.saturating_sub(TX_BUF_4096 + max_frame) >> 6,
    );
    r.set_bits(PCIEMISC, PCIEMISC_LX_DECISION);
}

/// What the port runs with: EEE on when any EEER LPI bit is set, DMA
/// coalescing when DMACR.DMAC_EN is; both off on a part without them.
pub fn read(r: &dyn Regs, device: u16) -> PowerSaving {
    if !is_i350(device) {
        return PowerSaving::OFF;
    }
    PowerSaving::OFF
        .with_eee(r.read32(EEER) & EEER_LPI_MASK != 0)
        .with_dma_coalescing(r.read32(DMACR) & DMACR_DMAC_EN != 0)
}
