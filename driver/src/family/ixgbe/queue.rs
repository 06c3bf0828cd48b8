//! 82599 receive and transmit setup (datasheet §4.6.7, §4.6.8; steps 9–13
//! of the sequence in `pollnic_hw::ixgbe`): packet buffers, CRC strip,
//! filters, per-queue rings, DMATXCTL.TE before any TX queue, the enable
//! latches, and the receive enable last.

use crate::family::{RingRegs, RxFilter};
use crate::sys::mmio::Regs;
use crate::wait::{wait_for, TimedOut};
use pollnic_hw::ixgbe::{bits::*, regs::*};
use std::time::Duration;

/// How long the security RX path may take to drain before RXEN is set:
/// 40 ms, DPDK `ixgbe_disable_sec_rx_path_generic` (`IXGBE_MAX_SECRX_POLL`
/// 4000 polls 10 µs apart).
pub const SECRX_RDY_TIMEOUT: Duration = Duration::from_millis(40);

/// How long a queue enable may take to latch (Linux: 10 polls 1–2 ms apart).
pub const LATCH_TIMEOUT: Duration = Duration::from_millis(100);

/// Global RX setup with RXCTRL.RXEN off (§4.6.7): one packet buffer of
/// 512 KiB, CRC stripped in HLREG0 and RDRXCTL alike (the 82599 wants both
/// set or both clear), RSCACKC and FCOE_WRFIX set and RSCFRSTSIZE cleared
/// as Linux does ("required by hardware"), no-snoop off.
pub fn setup_rx_global(r: &dyn Regs) {
    r.clear_bits(RXCTRL, RXCTRL_RXEN);
    r.write32(rxpbsize(0), RXPBSIZE_MAX);
    for n in 1..8 {
        r.write32(rxpbsize(n), 0);
    }
    r.set_bits(HLREG0, HLREG0_RXCRCSTRP);
    let rdrxctl = r.read32(RDRXCTL) & !RDRXCTL_RSCFRSTSIZE;
    r.write32(
        RDRXCTL,
        rdrxctl | RDRXCTL_CRCSTRIP | RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX,
    );
    r.set_bits(CTRL_EXT, CTRL_EXT_NS_DIS);
}

/// The largest frame for `mtu`, as Linux ixgbe sets it on the 82599
/// (`ixgbe_set_rx_buffer_len`): MAXFRS.MFS = `mtu + 18` (FCS included; the
/// MAC allows 4 more bytes for a VLAN-tagged frame) and HLREG0.JUMBOEN set,
/// so MFS is the limit at every MTU. Longer frames are dropped and counted
/// in ROC and RLEC (`rx_long_length_errors`, `rx_length_errors`). Receiver off.
pub fn set_max_frame(r: &dyn Regs, mtu: u32) {
    let mfs = pollnic_hw::mtu::max_frame(mtu) << MAXFRS_MFS_SHIFT;
    r.write32(MAXFRS, (r.read32(MAXFRS) & !MAXFRS_MFS_MASK) | mfs);
    r.set_bits(HLREG0, HLREG0_JUMBOEN);
}

/// Program RX queue `q` (§4.6.7): SRRCTL buffer size in 1 KiB units,
/// advanced one-buffer descriptors, DROP_EN; ring base and length; head and
/// tail 0; DCA_RXCTRL bit 12 and the relaxed-ordering bits cleared (ixy;
/// Linux and DPDK `ixgbe_start_hw_gen2`, which `init` also runs over every
/// queue); its drops counted in QPRDC(q)
/// (RQSMR maps queue q to statistics index q, q < 16). The queue stays off.
pub fn configure_rx(r: &dyn Regs, q: u16, ring: RingRegs, buf_size: usize, drop_en: bool) {
    if q == 0 {
        setup_rx_global(r);
    }
    r.clear_bits(rxdctl(q), XDCTL_ENABLE);
    let bsize = (buf_size as u32 >> SRRCTL_BSIZEPKT_SHIFT) & SRRCTL_BSIZEPKT_MASK;
    r.write32(
        srrctl(q),
        bsize | SRRCTL_DESCTYPE_ADV_ONEBUF | if drop_en { SRRCTL_DROP_EN } else { 0 },
    );
    r.write32(rdbal(q), ring.iova as u32);
    r.write32(rdbah(q), (ring.iova >> 32) as u32);
    r.write32(rdlen(q), ring.len_bytes);
    r.write32(rdh(q), 0);
    r.write32(rdt(q), 0);
    r.clear_bits(dca_rxctrl(q), DCA_RXCTRL_CLEAR);
    if q < 16 {
        let shift = 8 * (q as u32 % 4);
        let v = r.read32(rqsmr(q / 4)) & !(0xF << shift);
        r.write32(rqsmr(q / 4), v | (q as u32) << shift);
    }
}

/// Global TX setup (§4.6.8): the MAC appends the FCS and pads short frames;
/// one 160 KiB packet buffer with its threshold (Linux); no DCB or
/// virtualization: DTXMXSZRQ 0xFFFF (ixy), MTQC written with the arbiter
/// disabled (Linux).
pub fn setup_tx_global(r: &dyn Regs) {
    r.set_bits(HLREG0, HLREG0_TXCRCEN | HLREG0_TXPADEN);
    r.write32(txpbsize(0), TXPBSIZE_MAX);
    r.write32(txpbthresh(0), (TXPBSIZE_MAX >> 10) - TXPKT_SIZE_MAX_KB);
    for n in 1..8 {
        r.write32(txpbsize(n), 0);
        r.write32(txpbthresh(n), 0);
    }
    r.write32(DTXMXSZRQ, 0xFFFF);
    r.set_bits(RTTDCS, RTTDCS_ARBDIS);
    r.write32(MTQC, MTQC_64Q_1PB);
    r.clear_bits(RTTDCS, RTTDCS_ARBDIS);
}

/// TXDCTL thresholds: PTHRESH 32, HTHRESH 0, WTHRESH 0 (DPDK's defaults,
/// `ixgbe_dev_tx_queue_setup`). pollnic's TX ring asks for a write-back (RS)
/// only at every 32nd descriptor and the burst's last, and reclaims by DD at
/// those slots. With WTHRESH > 0 the 82599 writes back descriptors in
/// batches and ignores RS, so DPDK refuses WTHRESH > 0 with an RS threshold
/// above 1; Linux's WTHRESH 1 goes with RS on every packet. WTHRESH 0 is the
/// setting that agrees with RS at batch ends.
pub const TXDCTL_THRESHOLDS: u32 =
    (32 << TXDCTL_PTHRESH_SHIFT) | (0 << TXDCTL_HTHRESH_SHIFT) | (0 << TXDCTL_WTHRESH_SHIFT);

/// Program TX queue `q`: ring base and length, head and tail 0, the
/// [`TXDCTL_THRESHOLDS`], DCA_TXCTRL.DESC_WRO_EN cleared (DPDK
/// `ixgbe_dev_tx_init`: relaxed ordering of the write-back "hoses
/// bookkeeping"). The queue stays off.
pub fn configure_tx(r: &dyn Regs, q: u16, ring: RingRegs) {
    if q == 0 {
        setup_tx_global(r);
    }
    r.clear_bits(txdctl(q), XDCTL_ENABLE);
    r.write32(tdbal(q), ring.iova as u32);
    r.write32(tdbah(q), (ring.iova >> 32) as u32);
    r.write32(tdlen(q), ring.len_bytes);
    r.write32(tdh(q), 0);
    r.write32(tdt(q), 0);
    r.clear_bits(dca_txctrl(q), DCA_TXCTRL_DESC_WRO_EN);
    r.write32(txdctl(q), TXDCTL_THRESHOLDS);
}

/// DMATXCTL.TE: must be set before any TXDCTL.ENABLE (Linux `ixgbe_configure_tx`).
pub fn start_tx(r: &dyn Regs) {
    r.set_bits(DMATXCTL, DMATXCTL_TE);
}

/// Set RXDCTL(q).ENABLE and poll until it latches.
///
/// # Errors
/// [`TimedOut`] "RX queue enable (RXDCTL.ENABLE)".
pub fn enable_rx_queue(r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
    r.set_bits(rxdctl(q), XDCTL_ENABLE);
    wait_for("RX queue enable (RXDCTL.ENABLE)", LATCH_TIMEOUT, || {
        r.read32(rxdctl(q)) & XDCTL_ENABLE != 0
    })
}

/// Set TXDCTL(q).ENABLE and poll until it latches.
///
/// # Errors
/// [`TimedOut`] "TX queue enable (TXDCTL.ENABLE)".
pub fn enable_tx_queue(r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
    r.set_bits(txdctl(q), XDCTL_ENABLE);
    wait_for("TX queue enable (TXDCTL.ENABLE)", LATCH_TIMEOUT, || {
        r.read32(txdctl(q)) & XDCTL_ENABLE != 0
    })
}

/// Filters (broadcast accepted, promiscuous on request), then the receive
/// enable with the security RX path stopped around it (Linux
/// `ixgbe_enable_rx_dma_82599`: set SECRXCTRL.RX_DIS, poll SECRXSTAT.SECRX_RDY
/// up to [`SECRX_RDY_TIMEOUT`] — Linux and DPDK carry on when it does not
/// come, so does pollnic — set RXEN, clear RX_DIS).
pub fn start_rx(r: &dyn Regs, filter: RxFilter) {
    let mut fctrl = (r.read32(FCTRL) | FCTRL_BAM) & !(FCTRL_UPE | FCTRL_MPE);
    if filter.unicast_promisc() {
        fctrl |= FCTRL_UPE;
    }
    if filter.multicast_promisc() {
        fctrl |= FCTRL_MPE;
    }
    r.write32(FCTRL, fctrl);
    r.set_bits(SECRXCTRL, SECRXCTRL_RX_DIS);
    let _ = wait_for(
        "security RX path ready (SECRXSTAT.SECRX_RDY)",
        SECRX_RDY_TIMEOUT,
        || r.read32(SECRXSTAT) & SECRXSTAT_SECRX_RDY != 0,
    );
    r.set_bits(RXCTRL, RXCTRL_RXEN);
    r.clear_bits(SECRXCTRL, SECRXCTRL_RX_DIS);
}
