//! The software 82576's data path: L2 filter, RSS, DMA into the chosen
//! queue, TX on a TDT write, counters (octets include the FCS).

use super::state::State;
use crate::ring::{deliver, transmit as ring_transmit, Delivery};
use crate::wire::{fcs, mac_of, oversized, rss_flow, FCS_LEN};
use crate::RxOutcome;
use pollnic_hw::igb::stats::{Width, RX_MISSED_ERRORS, RX_NO_BUFFER_COUNT};
use pollnic_hw::igb::stats::{RX_BYTES, RX_PACKETS, TX_BYTES, TX_PACKETS};
use pollnic_hw::igb::{bits::*, regs::*};
use pollnic_hw::rss::{Toeplitz, KEY_LEN};

fn bump(s: &mut State, w: Width, n: u64) {
    let off = match w {
        Width::Bits32(o) => o,
        Width::Bits64 { lo, .. } => lo,
    };
    *s.counters.entry(off).or_insert(0) += n;
}

/// ROC, Receive Oversize Count (`rx_long_length_errors`).
const ROC: Width = Width::Bits32(0x40ac);

fn accepted(s: &State, dst: &[u8]) -> bool {
    let rctl = s.reg(RCTL);
    if dst.iter().all(|&b| b == 0xff) {
        return rctl & RCTL_BAM != 0;
    }
    if dst[0] & 1 != 0 {
        return rctl & RCTL_MPE != 0;
    }
    rctl & RCTL_UPE != 0
        || (0..16)
            .any(|n| mac_of(s.reg(RAL0 + 8 * n), s.reg(RAH0 + 8 * n)).is_some_and(|m| dst == m))
}

pub(crate) fn receive(s: &mut State, frame: &[u8]) -> RxOutcome {
    super::irq::tick(s);
    if s.in_reset() || !s.link_up() {
        return RxOutcome::LinkDown;
    }
    if s.reg(RCTL) & RCTL_EN == 0 || !s.bus_master {
        return RxOutcome::ReceiverOff;
    }
    if frame.len() < 14 || !accepted(s, &frame[..6]) {
        return RxOutcome::Filtered;
    }
    // The 82576's size check: 1518 bytes, or RLPML with RCTL.LPE, 4 more
    // with a VLAN tag; a longer frame is dropped and counted in ROC unless
    // RCTL.SBP stores bad packets.
    let rctl = s.reg(RCTL);
    let max = if rctl & RCTL_LPE != 0 {
        s.reg(RLPML) & RLPML_MASK
    } else {
        pollnic_hw::mtu::max_frame(pollnic_hw::mtu::DEFAULT_MTU)
    };
    if rctl & RCTL_SBP == 0 && oversized(frame, max) {
        bump(s, ROC, 1);
        return RxOutcome::Oversized;
    }
    let mrqc = s.reg(MRQC);
    let (q, hash, rsstype) = match (mrqc & MRQC_MODE_MASK == MRQC_MODE_RSS)
        .then(|| rss_flow(frame, mrqc))
        .flatten()
    {
        Some((ty, flow)) => {
            let mut key = [0u8; KEY_LEN];
            for n in 0..KEY_LEN / 4 {
                key[4 * n..4 * n + 4].copy_from_slice(&s.reg(RSSRK + 4 * n as u32).to_le_bytes());
            }
            let h = Toeplitz::new(&key).hash_flow(&flow);
            let i = h & 0x7f;
            let entry = (s.reg(RETA + 4 * (i / 4)) >> (8 * (i % 4))) & 0xF;
            (entry as u16, h, ty)
        }
        None => (0, 0, 0),
    };
    let hash = if s.reg(RXCSUM) & RXCSUM_PCSD != 0 {
        hash
    } else {
        0
    };
    // The offloads (82576 §7.1.5): CTRL.VME strips the tag, RXCSUM.IPOFLD
    // and TUOFLD check the IPv4 and TCP/UDP checksums.
    let mut data = frame.to_vec();
    let rxcsum = s.reg(RXCSUM);
    let extra = crate::offload::rx(
        &mut data,
        crate::offload::Part::Igb,
        s.reg(CTRL) & pollnic_hw::igb::bits::CTRL_VME != 0,
        rxcsum & pollnic_hw::igb::bits::RXCSUM_IPOFLD != 0,
        rxcsum & pollnic_hw::igb::bits::RXCSUM_TUOFLD != 0,
    );
    if s.reg(RCTL) & RCTL_SECRC == 0 {
        let fcs = fcs(&data);
        data.extend_from_slice(&fcs);
    }
    let buf = ((s.reg(srrctl(q)) & SRRCTL_BSIZEPKT_MASK) * SRRCTL_BSIZEPKT_UNIT) as usize;
    let tail = s.reg(rdt(q)) as u16;
    let st = &mut s.rx[q as usize];
    let Some(ring) = st.ring.as_mut().filter(|_| st.enabled) else {
        bump(s, RX_MISSED_ERRORS.width, 1);
        return RxOutcome::QueueOff(q);
    };
    match deliver(ring, tail, &s.iommu, buf, &data, hash, rsstype, extra) {
        Delivery::Done(_) => {
            s.check_driver_owns(&format!("RX queue {q} received a frame"));
            super::irq::rx_cause(s, q);
            bump(s, RX_PACKETS.width, 1);
            bump(s, RX_BYTES.width, frame.len() as u64 + FCS_LEN);
            RxOutcome::Delivered { queue: q, hash }
        }
        Delivery::NoDescriptor => {
            bump(s, RX_NO_BUFFER_COUNT.width, 1);
            RxOutcome::NoDescriptor(q)
        }
        Delivery::NotArmed(i) => {
            s.violation(format!(
                "RX queue {q}: descriptor {i}, below RDT {tail}, still holds a write-back \
                 (DD set): the driver gave the device a descriptor it had not re-armed"
            ));
            RxOutcome::NotArmed { queue: q, index: i }
        }
        Delivery::Fault(iova) => {
            s.violation(format!(
                "RX DMA of queue {q} to IOVA {iova:#x}, unmapped or across a 2 MiB IOMMU page (an IOMMU fault)"
            ));
            RxOutcome::Fault(iova)
        }
    }
}

pub(crate) fn transmit(s: &mut State, q: u16) {
    if s.reg(TCTL) & TCTL_EN == 0 || !s.bus_master || !s.link_up() {
        return;
    }
    let tail = s.reg(tdt(q)) as u16;
    let pad = s.reg(TCTL) & TCTL_PSP != 0;
    let st = &mut s.tx[q as usize];
    let Some(ring) = st.ring.as_mut().filter(|_| st.enabled) else {
        return;
    };
    let mut sent = Vec::new();
    let w = ring_transmit(
        ring,
        tail,
        &s.iommu,
        true,
        &mut s.partial,
        &mut None,
        &mut |f, m| sent.push((f, m)),
    );
    if !sent.is_empty() {
        s.check_driver_owns(&format!("TX queue {q} sent a frame"));
    }
    for (f, m) in sent {
        // The offloads the frame's descriptors asked for (VLAN insert,
        // checksums), strictly: a wrong context is a violation, not sent.
        // With TSE, one frame is several segments on the wire.
        let segments = match crate::offload::tx(
            f,
            m.cmd_type_len,
            m.olinfo_status,
            &m.contexts,
            crate::offload::Part::Igb,
        ) {
            Ok(segments) => segments,
            Err(why) => {
                s.violation(format!("TX queue {q}: {why}"));
                continue;
            }
        };
        for mut f in segments {
            if pad && f.len() < 60 {
                f.resize(60, 0);
            }
            bump(s, TX_PACKETS.width, 1);
            bump(s, TX_BYTES.width, f.len() as u64 + FCS_LEN);
            s.wire.push(f);
        }
    }
    if let Some(iova) = w.fault {
        s.violation(format!(
            "TX DMA of queue {q} from IOVA {iova:#x}, unmapped or across a 2 MiB IOMMU page (an IOMMU fault)"
        ));
    }
}
