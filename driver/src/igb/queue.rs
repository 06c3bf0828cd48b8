//! Per-queue RX and TX register setup (82576 datasheet §4.5.9 receive
//! initialization, §4.5.10 transmit initialization).

use super::init::{wait_for, TimedOut};
use crate::mmio::Regs;
use pollnic_hw::igb::{bits::*, regs::*};
use pollnic_rings::DescRing;
use std::time::Duration;

/// Program RX queue `q` on `ring` with `buf_size`-byte buffers (advanced
/// one-buffer descriptors), enable it, and wait for RXDCTL.ENABLE to read
/// back 1. The receiver itself (RCTL.EN) is enabled by [`enable_rx`].
pub fn setup_rx(
    r: &impl Regs,
    q: u16,
    ring: &DescRing,
    buf_size: usize,
    drop_en: bool,
) -> Result<(), TimedOut> {
    r.clear_bits(rxdctl(q), XDCTL_ENABLE);
    r.write32(rdbal(q), ring.iova() as u32);
    r.write32(rdbah(q), (ring.iova() >> 32) as u32);
    r.write32(rdlen(q), ring.len_bytes());
    let bsize = (buf_size as u32 / SRRCTL_BSIZEPKT_UNIT) & SRRCTL_BSIZEPKT_MASK;
    r.write32(
        srrctl(q),
        bsize | SRRCTL_DESCTYPE_ADV_ONEBUF | if drop_en { SRRCTL_DROP_EN } else { 0 },
    );
    r.write32(rdh(q), 0);
    r.write32(rdt(q), 0);
    // PTHRESH 8, HTHRESH 8, WTHRESH 1: Linux igb's defaults for 82576.
    let thresh =
        (8 << XDCTL_PTHRESH_SHIFT) | (8 << XDCTL_HTHRESH_SHIFT) | (1 << XDCTL_WTHRESH_SHIFT);
    r.write32(rxdctl(q), thresh | XDCTL_ENABLE);
    wait_for(
        "RX queue enable (RXDCTL.ENABLE)",
        Duration::from_secs(1),
        || r.read32(rxdctl(q)) & XDCTL_ENABLE != 0,
    )
}

/// Turn the receiver on: CRC stripped, broadcast accepted, promiscuous on request.
pub fn enable_rx(r: &impl Regs, promisc: bool) {
    let mut rctl = RCTL_EN | RCTL_BAM | RCTL_SECRC;
    if promisc {
        rctl |= RCTL_UPE | RCTL_MPE;
    }
    r.write32(RCTL, rctl);
}

/// Program TX queue `q` on `ring`, enable it and wait for TXDCTL.ENABLE.
pub fn setup_tx(r: &impl Regs, q: u16, ring: &DescRing) -> Result<(), TimedOut> {
    r.clear_bits(txdctl(q), XDCTL_ENABLE);
    r.write32(tdbal(q), ring.iova() as u32);
    r.write32(tdbah(q), (ring.iova() >> 32) as u32);
    r.write32(tdlen(q), ring.len_bytes());
    r.write32(tdh(q), 0);
    r.write32(tdt(q), 0);
    // WTHRESH 1: every RS descriptor is written back promptly (Linux igb for 82576 with MSI-X).
    let thresh =
        (8 << XDCTL_PTHRESH_SHIFT) | (1 << XDCTL_HTHRESH_SHIFT) | (1 << XDCTL_WTHRESH_SHIFT);
    r.write32(txdctl(q), thresh | XDCTL_ENABLE);
    wait_for(
        "TX queue enable (TXDCTL.ENABLE)",
        Duration::from_secs(1),
        || r.read32(txdctl(q)) & XDCTL_ENABLE != 0,
    )
}

/// Turn the transmitter on: pad short frames, collision threshold 15 and
/// distance 63 (the datasheet's full-duplex recommendation), retransmit on late collision.
pub fn enable_tx(r: &impl Regs) {
    r.write32(
        TCTL,
        TCTL_EN | TCTL_PSP | (0x0f << TCTL_CT_SHIFT) | (0x3f << TCTL_COLD_SHIFT) | TCTL_RTLC,
    );
}
