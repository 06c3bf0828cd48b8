//! The model's data path: a frame from the wire through the L2 filter, RSS
//! (Toeplitz over the fields MRQC selects, RETA lookup) and DMA into the
//! chosen queue's ring; a TDT write sends what the ring holds. Counters as
//! the 82599 keeps them (octet counters include the 4-byte FCS).

use super::state::State;
use crate::ring::{deliver, transmit as ring_transmit, Delivery};
use crate::wire::{fcs, mac_of, oversized, rss_flow};
use crate::RxOutcome;
use pollnic_hw::ixgbe::stats::Width;
use pollnic_hw::ixgbe::stats::RX_LENGTH_ERRORS;
use pollnic_hw::ixgbe::stats::{mpc, qprdc, RX_BYTES, RX_PACKETS, TX_BYTES, TX_PACKETS};
use pollnic_hw::ixgbe::{bits::*, regs::*};
use pollnic_hw::rss::{Toeplitz, KEY_LEN};

use crate::wire::FCS_LEN;

fn bump(s: &mut State, w: Width, n: u64) {
    let off = match w {
        Width::Bits32(o) => o,
        Width::Bits64 { lo, .. } => lo,
    };
    *s.counters.entry(off).or_insert(0) += n;
}

fn bump32(s: &mut State, off: u32) {
    *s.counters.entry(off).or_insert(0) += 1;
}

/// The key as RSSRK(0..10) holds it (byte 4n in bits 7:0 of register n).
fn key(s: &State) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    for n in 0..KEY_LEN / 4 {
        k[4 * n..4 * n + 4].copy_from_slice(&s.reg(rssrk(n as u16)).to_le_bytes());
    }
    k
}

/// Whether the L2 filter takes a frame for `dst` (§7.1.1: exact match in
/// RAL/RAH with AV, broadcast with FCTRL.BAM, UPE/MPE promiscuous).
fn accepted(s: &State, dst: &[u8]) -> bool {
    let fctrl = s.reg(FCTRL);
    if dst.iter().all(|&b| b == 0xff) {
        return fctrl & FCTRL_BAM != 0;
    }
    if dst[0] & 1 != 0 {
        return fctrl & FCTRL_MPE != 0;
    }
    if fctrl & FCTRL_UPE != 0 {
        return true;
    }
    (0..128).any(|n| mac_of(s.reg(ral(n)), s.reg(rah(n))).is_some_and(|m| dst == m))
}

/// A frame arrives from the wire.
pub(crate) fn receive(s: &mut State, frame: &[u8]) -> RxOutcome {
    super::irq::tick(s);
    if s.in_reset() || !s.link_up() {
        return RxOutcome::LinkDown;
    }
    if s.reg(RXCTRL) & RXCTRL_RXEN == 0 || !s.bus_master {
        return RxOutcome::ReceiverOff;
    }
    if frame.len() < 14 || !accepted(s, &frame[..6]) {
        return RxOutcome::Filtered;
    }
    // The 82599's size check: MAXFRS.MFS with HLREG0.JUMBOEN, else 1518
    // bytes, 4 more with a VLAN tag; a longer frame is dropped and counted
    // in ROC and RLEC.
    let max = if s.reg(HLREG0) & HLREG0_JUMBOEN != 0 {
        (s.reg(MAXFRS) & MAXFRS_MFS_MASK) >> MAXFRS_MFS_SHIFT
    } else {
        pollnic_hw::mtu::max_frame(pollnic_hw::mtu::DEFAULT_MTU)
    };
    if oversized(frame, max) {
        bump32(s, 0x040AC); // ROC
        bump(s, RX_LENGTH_ERRORS.width, 1); // RLEC
        return RxOutcome::Oversized;
    }
    let mrqc = s.reg(MRQC);
    let (q, hash, rsstype) = if mrqc & MRQC_MRQE_MASK == MRQC_MRQE_RSS {
        match rss_flow(frame, mrqc) {
            Some((ty, flow)) => {
                let h = Toeplitz::new(&key(s)).hash_flow(&flow);
                let i = (h & 0x7f) as u16;
                let entry = (s.reg(reta(i / 4)) >> (8 * (i % 4))) & RETA_ENTRY_MASK;
                (entry as u16, h, ty)
            }
            None => (0, 0, RSSTYPE_NONE),
        }
    } else {
        (0, 0, RSSTYPE_NONE)
    };
    let hash = if s.reg(RXCSUM) & RXCSUM_PCSD != 0 {
        hash
    } else {
        0
    };
    // The offloads (82599 §7.1.6.2): RXDCTL.VME of the queue strips the
    // tag; the IPv4 and TCP/UDP checksums are always checked.
    let mut data = frame.to_vec();
    let extra = crate::offload::rx(
        &mut data,
        crate::offload::Part::Ixgbe,
        s.reg(rxdctl(q)) & pollnic_hw::ixgbe::bits::RXDCTL_VME != 0,
        true,
        true,
    );
    if s.reg(HLREG0) & HLREG0_RXCRCSTRP == 0 {
        let fcs = fcs(&data);
        data.extend_from_slice(&fcs);
    }
    let srrctl = s.reg(srrctl(q));
    let buf = ((srrctl & SRRCTL_BSIZEPKT_MASK) << SRRCTL_BSIZEPKT_SHIFT) as usize;
    let tail = s.reg(rdt(q)) as u16;
    let st = &mut s.rx[q as usize];
    let Some(ring) = st.ring.as_mut().filter(|_| st.enabled) else {
        bump32(s, mpc(0));
        return RxOutcome::QueueOff(q);
    };
    match deliver(ring, tail, &s.iommu, buf, &data, hash, rsstype, extra) {
        Delivery::Done(_) => {
            s.check_driver_owns(&format!("RX queue {q} received a frame"));
            super::irq::rx_cause(s, q);
            bump(s, RX_PACKETS.width, 1);
            bump(s, RX_BYTES.width, frame.len() as u64 + FCS_LEN);
            if frame[0] == 0xff {
                bump32(s, 0x04078); // BPRC
            } else if frame[0] & 1 != 0 {
                bump32(s, 0x0407C); // MPRC
            }
            RxOutcome::Delivered { queue: q, hash }
        }
        Delivery::NoDescriptor => {
            if srrctl & SRRCTL_DROP_EN != 0 {
                let idx = (s.reg(rqsmr(q / 4)) >> (8 * (q % 4))) & 0xF;
                bump32(s, qprdc(idx as u16));
            } else {
                bump32(s, mpc(0));
            }
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

/// The shortest frame an 82599 TX queue takes (Linux pads to it: "minimum
/// packet size for olinfo paylen is 17").
pub(crate) const TX_MIN_FRAME: usize = 17;

/// A TDT write: send every descriptor up to the tail (when the queue, the
/// transmit DMA, bus mastering and the link are all up). With
/// TXDCTL.WTHRESH > 0 every descriptor is written back, RS or not (the
/// 82599 ignores RS then). A frame under [`TX_MIN_FRAME`] bytes wedges the
/// queue at its first descriptor: nothing from there on is sent until a
/// reset (a violation names it).
pub(crate) fn transmit(s: &mut State, q: u16) {
    if s.reg(DMATXCTL) & DMATXCTL_TE == 0 || !s.bus_master || !s.link_up() {
        return;
    }
    if s.tx_wedged.contains(&q) {
        return;
    }
    let tail = s.reg(tdt(q)) as u16;
    let pad = s.reg(HLREG0) & HLREG0_TXPADEN != 0;
    let wthresh = (s.reg(txdctl(q)) >> TXDCTL_WTHRESH_SHIFT) & 0x7F;
    let partial = s.partial.len();
    let st = &mut s.tx[q as usize];
    let Some(ring) = st.ring.as_mut().filter(|_| st.enabled) else {
        return;
    };
    let (limit, wedge) = look_ahead(ring, tail, partial, wthresh > 0);
    let mut sent = Vec::new();
    let w = ring_transmit(
        ring,
        limit,
        &s.iommu,
        true,
        &mut s.partial,
        &mut None,
        &mut |f, m| sent.push((f, m)),
    );
    s.tx_writebacks += w.writebacks;
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
            crate::offload::Part::Ixgbe,
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
    if let Some((at, len)) = wedge {
        s.tx_wedged.insert(q);
        s.violation(format!(
            "TX queue {q} wedged at descriptor {at}: a {len}-byte frame, under the \
             {TX_MIN_FRAME} bytes the 82599 needs (Linux ixgbe pads to 17); nothing more \
             leaves this queue until a reset"
        ));
    }
}

/// Walk `[head, tail)` before sending: with `every` set, give each
/// descriptor RS (what WTHRESH > 0 does: every one is written back). Returns
/// where to stop (the first descriptor of a frame under [`TX_MIN_FRAME`]
/// bytes, else `tail`) and that frame's position and length.
fn look_ahead(
    ring: &mut crate::ring::DeviceRing,
    tail: u16,
    partial: usize,
    every: bool,
) -> (u16, Option<(u16, usize)>) {
    use pollnic_hw::desc::{TxRequest, TXD_DCMD_RS};
    let mut i = ring.head();
    let (mut start, mut len) = (i, partial);
    while i != tail {
        let mut d = ring.descriptor(i);
        let req = TxRequest::decode(d);
        if every && !req.rs {
            d.hi |= TXD_DCMD_RS as u64;
            ring.set_descriptor(i, d);
        }
        if req.is_adv_data {
            len += req.len as usize;
        }
        let next = (i + 1) % ring.count();
        if req.eop {
            if len < TX_MIN_FRAME {
                return (start, Some((start, len)));
            }
            (start, len) = (next, 0);
        }
        i = next;
    }
    (tail, None)
}
