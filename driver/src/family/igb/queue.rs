//! Per-queue RX and TX register setup (82576 datasheet §4.5.9 receive
//! initialization, §4.5.10 transmit initialization).

use crate::family::{RingRegs, RxFilter};
use crate::sys::mmio::Regs;
use crate::wait::{wait_for, TimedOut};
use pollnic_hw::igb::{bits::*, regs::*};
use std::time::Duration;

/// Program RX queue `q` on `ring` with `buf_size`-byte buffers (advanced
/// one-buffer descriptors), queue still disabled. The queue is enabled by
/// [`enable_rx_queue`], the receiver (RCTL.EN) by [`enable_rx`].
pub fn configure_rx(r: &dyn Regs, q: u16, ring: RingRegs, buf_size: usize, drop_en: bool) {
    r.clear_bits(rxdctl(q), XDCTL_ENABLE);
    r.write32(rdbal(q), ring.iova as u32);
    r.write32(rdbah(q), (ring.iova >> 32) as u32);
    r.write32(rdlen(q), ring.len_bytes);
    let bsize = (buf_size as u32 / SRRCTL_BSIZEPKT_UNIT) & SRRCTL_BSIZEPKT_MASK;
    r.write32(
        srrctl(q),
        bsize | SRRCTL_DESCTYPE_ADV_ONEBUF | if drop_en { SRRCTL_DROP_EN } else { 0 },
    );
    r.write32(rdh(q), 0);
    r.write32(rdt(q), 0);
}

/// Enable RX queue `q` and wait for RXDCTL.ENABLE to read back 1.
/// PTHRESH 8, HTHRESH 8, WTHRESH 1: Linux igb's defaults for the 82576.
pub fn enable_rx_queue(r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
    let thresh =
        (8 << XDCTL_PTHRESH_SHIFT) | (8 << XDCTL_HTHRESH_SHIFT) | (1 << XDCTL_WTHRESH_SHIFT);
    r.write32(rxdctl(q), thresh | XDCTL_ENABLE);
    wait_for(
        "RX queue enable (RXDCTL.ENABLE)",
        Duration::from_secs(1),
        || r.read32(rxdctl(q)) & XDCTL_ENABLE != 0,
    )
}

/// Multicast Table Array registers (82576 datasheet §8.10.16: 128 × 32 bits,
/// a 4096-bit hash filter; not cleared by reset on silicon).
pub const MTA_REGS: u32 = 128;

/// The largest frame for `mtu` (82576 datasheet §8.10.1 RCTL.LPE, and the
/// RLPML register). At 1500 LPE stays clear: the MAC's own limit, 1518 bytes (1522
/// with a VLAN tag), is the MTU's. Above, RLPML = `mtu + 18` with LPE set;
/// the 82576 adds 4 bytes per VLAN tag it recognizes, as Linux igb relies on
/// (commit d3836f8e2517). Longer frames are dropped and counted in ROC
/// (`rx_long_length_errors`, part of `rx_length_errors`). QEMU's igb applies
/// RLPML without the VLAN allowance and counts nothing (see README, "Jumbo
/// frames"). Receiver off; [`enable_rx`] keeps LPE.
pub fn set_max_frame(r: &dyn Regs, mtu: u32) {
    if mtu > pollnic_hw::mtu::DEFAULT_MTU {
        r.write32(RLPML, pollnic_hw::mtu::max_frame(mtu) & RLPML_MASK);
        r.set_bits(RCTL, RCTL_LPE);
    } else {
        r.clear_bits(RCTL, RCTL_LPE);
    }
}

/// Turn the receiver on: CRC stripped, broadcast accepted (BAM), unicast and
/// multicast promiscuous (UPE, MPE) as `filter` asks, long packets as
/// [`set_max_frame`] left RCTL.LPE. The multicast table is zeroed first, as
/// Linux igb does at init (`igb_init_hw_82575`), so with MPE off no multicast
/// frame passes the filter.
pub fn enable_rx(r: &dyn Regs, filter: RxFilter) {
    for n in 0..MTA_REGS {
        r.write32(MTA + 4 * n, 0);
    }
    let mut rctl = RCTL_EN | RCTL_BAM | RCTL_SECRC | (r.read32(RCTL) & RCTL_LPE);
    if filter.unicast_promisc() {
        rctl |= RCTL_UPE;
    }
    if filter.multicast_promisc() {
        rctl |= RCTL_MPE;
    }
    r.write32(RCTL, rctl);
}

/// Program TX queue `q` on `ring`, queue still disabled.
pub fn configure_tx(r: &dyn Regs, q: u16, ring: RingRegs) {
    r.clear_bits(txdctl(q), XDCTL_ENABLE);
    r.write32(tdbal(q), ring.iova as u32);
    r.write32(tdbah(q), (ring.iova >> 32) as u32);
    r.write32(tdlen(q), ring.len_bytes);
    r.write32(tdh(q), 0);
    r.write32(tdt(q), 0);
}

/// Enable TX queue `q` and wait for TXDCTL.ENABLE. WTHRESH 1: every RS
/// descriptor is written back promptly (Linux igb for 82576 with MSI-X).
pub fn enable_tx_queue(r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
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
/// distance 63 (the datasheet's full-duplex recommendation), retransmit on
/// late collision. Linux igb (`igb_setup_tctl`) sets TCTL.EN before it
/// enables the queues, as pollnic does.
pub fn enable_tx(r: &dyn Regs) {
    r.write32(
        TCTL,
        TCTL_EN | TCTL_PSP | (0x0f << TCTL_CT_SHIFT) | (0x3f << TCTL_COLD_SHIFT) | TCTL_RTLC,
    );
}
