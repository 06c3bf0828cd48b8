//! The offloads of the software 82576 and 82599: RX checksum checks and VLAN
//! strip into the write-back, TX checksum insertion, VLAN insert and TCP
//! segmentation from an advanced context descriptor. Strict where silicon
//! is: a data descriptor whose context does not describe its frame (MACLEN,
//! IPLEN, TUCMD, and for TSO L4LEN), an IDX with no context, a missing CC on
//! the 82599, or a PAYLEN that is not the frame's length (the TCP payload's
//! with TSO) is a violation, not a frame sent wrong.
//!
//! TSO follows 82576 §7.2.4 and 82599 §7.2.4 (the same rules as the
//! 8254x manuals' §3.5.9 and the 82598's §3.5.3.4.7): the frame is cut
//! into `ceil(PAYLEN / MSS)` segments, each with a copy of the first
//! MACLEN + IPLEN + L4LEN bytes; the IPv4 total length (IPv6 payload
//! length) is the segment's, the IPv4 identification the frame's plus the
//! segment's number (wrapping), the TCP sequence number the frame's plus
//! the payload bytes before the segment; FIN and PSH are cleared on every
//! segment but the last (the reset values of DTXTCPFLGL/H); the IPv4
//! checksum is summed over each segment's header with the field as the
//! driver left it, the TCP checksum from the TCP header to the segment's
//! end with the field as the driver left it plus the segment's TCP length
//! (so the driver must leave the IPv4 field 0 and seed the TCP one with the
//! pseudo-header's sum without the length, as Linux `igb_tso` does). MSS 0
//! is a violation (no segment could carry anything).
//!
//! As silicon (and unlike QEMU's igb, which recomputes both from scratch),
//! the IPv4 header checksum is summed over the header as it is (its field
//! must be 0) and the L4 checksum from the L4 header to the end of the
//! frame (its field must hold the pseudo-header's sum).

use pollnic_hw::offload::{
    fold, ones_sum, TxContext, RXD_STAT_IPCS, RXD_STAT_L4CS, RXD_STAT_UDPCS, TXD_DCMD_TSE,
    TXD_DCMD_VLE, TXD_IDX_SHIFT, TXD_OLINFO_CC, TXD_POPTS_IXSM, TXD_POPTS_TXSM,
};

/// Which part: their layouts agree but for the error bits and CC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The 82576: L4E bit 29, IPE bit 30, contexts 0 and 1, no CC.
    Igb,
    /// The 82599: TCPE bit 30, IPE bit 31, CC needed.
    Ixgbe,
}

/// The parsed headers of a frame: (L2 length, IPv4?, IP header length,
/// IP protocol, end of the IP datagram).
fn headers(f: &[u8]) -> Option<(usize, bool, usize, u8, usize)> {
    let be16 = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
    if f.len() < 14 {
        return None;
    }
    let (mut l2, mut et) = (14, be16(12));
    if et == 0x8100 {
        if f.len() < 18 {
            return None;
        }
        l2 = 18;
        et = be16(16);
    }
    match et {
        0x0800 if f.len() >= l2 + 20 => {
            let ihl = (f[l2] & 0xf) as usize * 4;
            let end = l2 + be16(l2 + 2) as usize;
            (ihl >= 20 && end >= l2 + ihl && end <= f.len()).then_some((
                l2,
                true,
                ihl,
                f[l2 + 9],
                end,
            ))
        }
        0x86dd if f.len() >= l2 + 40 => {
            let end = l2 + 40 + be16(l2 + 4) as usize;
            (end <= f.len()).then_some((l2, false, 40, f[l2 + 6], end))
        }
        _ => None,
    }
}

/// The checksum over the pseudo-header and `f[l4..end]` (0 when right).
fn l4_check(f: &[u8], l2: usize, v4: bool, l4: usize, end: usize, proto: u8) -> u16 {
    let addrs = if v4 {
        &f[l2 + 12..l2 + 20]
    } else {
        &f[l2 + 8..l2 + 40]
    };
    let sum = ones_sum(addrs, proto as u64 + (end - l4) as u64);
    !fold(ones_sum(&f[l4..end], sum))
}

/// RX: strip the tag from `frame` when `strip` (and it has one), check the
/// IPv4 header checksum when `check_ip` and the TCP/UDP one when
/// `check_l4` (not on a fragment; not a UDP/IPv4 checksum of 0, which
/// means none). Returns the write-back's extra status bits (VP, IPCS, L4CS,
/// UDPCS and the part's error bits) and the stripped tag.
pub fn rx(
    frame: &mut Vec<u8>,
    part: Part,
    strip: bool,
    check_ip: bool,
    check_l4: bool,
) -> (u32, u16) {
    let (mut status, mut vlan) = (0u32, 0u16);
    if strip && frame.len() >= 18 && frame[12..14] == [0x81, 0x00] {
        vlan = u16::from_be_bytes([frame[14], frame[15]]);
        frame.drain(12..16);
        status |= pollnic_hw::desc::RXD_STAT_VP;
    }
    let (l4e, ipe) = match part {
        Part::Igb => (1u32 << 29, 1u32 << 30),
        Part::Ixgbe => (1u32 << 30, 1u32 << 31),
    };
    let Some((l2, v4, iplen, proto, end)) = headers(frame) else {
        return (status, vlan);
    };
    if check_ip && v4 {
        status |= RXD_STAT_IPCS;
        if fold(ones_sum(&frame[l2..l2 + iplen], 0)) != 0xffff {
            status |= ipe;
        }
    }
    let fragment = v4 && u16::from_be_bytes([frame[l2 + 6], frame[l2 + 7]]) & 0x3fff != 0;
    let l4 = l2 + iplen;
    let whole = match proto {
        6 => end >= l4 + 20,
        17 => end >= l4 + 8,
        _ => false,
    };
    if check_l4 && whole && !fragment {
        let udp_zero = proto == 17 && v4 && frame[l4 + 6..l4 + 8] == [0, 0];
        if !udp_zero {
            status |= RXD_STAT_L4CS | if proto == 17 { RXD_STAT_UDPCS } else { 0 };
            if l4_check(frame, l2, v4, l4, end, proto) != 0 {
                status |= l4e;
            }
        }
    }
    (status, vlan)
}

/// A TX context slot's content as the device keeps it.
pub type Contexts = [Option<TxContext>; 8];

/// TX: what the wire gets for `frame`, whose first data descriptor had
/// `cmd_type_len` and `olinfo_status`, with the queue's `contexts`; or the
/// violation that makes silicon send it wrong.
pub fn tx(
    frame: Vec<u8>,
    cmd: u32,
    olinfo: u32,
    contexts: &Contexts,
    part: Part,
) -> Result<Vec<Vec<u8>>, String> {
    if cmd & TXD_DCMD_TSE != 0 {
        return tso(frame, cmd, olinfo, contexts, part);
    }
    tx_one(frame, cmd, olinfo, contexts, part).map(|f| vec![f])
}

/// The context a data descriptor with `olinfo` names, checked: CC on the
/// 82599, IDX 0 or 1 on the 82576, a context written there.
fn context_of(
    olinfo: u32,
    contexts: &Contexts,
    part: Part,
    what: &str,
) -> Result<TxContext, String> {
    if part == Part::Ixgbe && olinfo & TXD_OLINFO_CC == 0 {
        return Err(format!(
            "{what} without CC: the 82599 does not read the context"
        ));
    }
    let idx = ((olinfo >> TXD_IDX_SHIFT) & 7) as usize;
    if part == Part::Igb && idx > 1 {
        return Err(format!("IDX {idx}: the 82576 has contexts 0 and 1"));
    }
    contexts[idx]
        .ok_or_else(|| format!("{what} asked with IDX {idx}, but no context descriptor set it"))
}

/// TSE: the segments silicon sends for `frame` (see the module
/// documentation), or the violation.
fn tso(
    frame: Vec<u8>,
    cmd: u32,
    olinfo: u32,
    contexts: &Contexts,
    part: Part,
) -> Result<Vec<Vec<u8>>, String> {
    let ctx = context_of(olinfo, contexts, part, "TSE")?;
    if olinfo & TXD_POPTS_TXSM == 0 {
        return Err(
            "TSE without POPTS.TXSM: each segment's TCP checksum would be left as is".into(),
        );
    }
    if !ctx.tcp() {
        return Err("TSE with a context whose L4T is not TCP".into());
    }
    let mss = ctx.mss() as usize;
    if ctx.l4len() < 20 {
        return Err(format!(
            "TSE with L4LEN {}: a TCP header is at least 20 bytes",
            ctx.l4len()
        ));
    }
    if mss == 0 {
        return Err("TSE with MSS 0 in the context".into());
    }
    let (l2, iplen, l4len) = (ctx.maclen(), ctx.iplen(), ctx.l4len());
    let be16 = |f: &[u8], at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
    // The frame's own headers, as a check of the context (silicon believes
    // the context; a wrong one cuts the frame in the wrong places).
    if frame.len() < 14 {
        return Err("TSE on a frame shorter than an Ethernet header".into());
    }
    let (fl2, et) = if be16(&frame, 12) == 0x8100 {
        (18, be16(&frame, 16))
    } else {
        (14, be16(&frame, 12))
    };
    let v4 = match et {
        0x0800 => true,
        0x86dd => false,
        other => return Err(format!("TSE on EtherType {other:#06x}")),
    };
    let fiplen = if v4 {
        frame.get(fl2).map_or(0, |b| (b & 0xf) as usize * 4)
    } else {
        40
    };
    let proto = if v4 {
        frame.get(fl2 + 9)
    } else {
        frame.get(fl2 + 6)
    }
    .copied();
    let fl4len = frame
        .get(fl2 + fiplen + 12)
        .map_or(0, |b| (b >> 4) as usize * 4);
    if (l2, iplen, l4len) != (fl2, fiplen, fl4len) || proto != Some(6) {
        return Err(format!(
            "TSE context MACLEN {l2} IPLEN {iplen} L4LEN {l4len}, but the frame's headers are              {fl2}, {fiplen} and {fl4len} bytes (IP protocol {proto:?})"
        ));
    }
    if ctx.ipv4() != v4 {
        return Err(format!(
            "TSE context TUCMD.IPV4 {} on an IPv{} frame",
            ctx.ipv4(),
            if v4 { 4 } else { 6 }
        ));
    }
    if v4 && olinfo & TXD_POPTS_IXSM == 0 {
        return Err(
            "TSE on IPv4 without POPTS.IXSM: each segment's IPv4 checksum would be stale".into(),
        );
    }
    let hdr = l2 + iplen + l4len;
    let paylen = (olinfo >> pollnic_hw::desc::TXD_PAYLEN_SHIFT) as usize;
    if frame.len() < hdr || paylen != frame.len() - hdr {
        return Err(format!(
            "TSE PAYLEN {paylen} is not the frame's TCP payload ({} bytes after {hdr} of headers)",
            frame.len().saturating_sub(hdr)
        ));
    }
    let (ip, l4) = (l2, l2 + iplen);
    let id0 = be16(&frame, ip + 4);
    let seq0 = u32::from_be_bytes([frame[l4 + 4], frame[l4 + 5], frame[l4 + 6], frame[l4 + 7]]);
    let nseg = paylen.div_ceil(mss);
    let mut out = Vec::with_capacity(nseg);
    for k in 0..nseg {
        let payload = &frame[hdr + k * mss..(hdr + (k + 1) * mss).min(frame.len())];
        let mut seg = Vec::with_capacity(hdr + payload.len() + 4);
        seg.extend_from_slice(&frame[..hdr]);
        seg.extend_from_slice(payload);
        let l4_bytes = l4len + payload.len();
        if v4 {
            seg[ip + 2..ip + 4].copy_from_slice(&((iplen + l4_bytes) as u16).to_be_bytes());
            seg[ip + 4..ip + 6].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
            let c = !fold(ones_sum(&seg[ip..ip + iplen], 0));
            seg[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            seg[ip + 4..ip + 6].copy_from_slice(&(l4_bytes as u16).to_be_bytes());
        }
        let seq = seq0.wrapping_add((k * mss) as u32);
        seg[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        if k + 1 < nseg {
            seg[l4 + 13] &= !(0x01 | 0x08); // FIN, PSH
        }
        // The field as the driver left it (the pseudo-header without the
        // length) plus this segment's TCP length.
        let c = !fold(ones_sum(&seg[l4..], l4_bytes as u64));
        seg[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        if cmd & TXD_DCMD_VLE != 0 {
            let tag = ctx.vlan().to_be_bytes();
            seg.splice(12..12, [0x81, 0x00, tag[0], tag[1]]);
        }
        out.push(seg);
    }
    Ok(out)
}

/// TX of one frame without TSE.
fn tx_one(
    mut frame: Vec<u8>,
    cmd: u32,
    olinfo: u32,
    contexts: &Contexts,
    part: Part,
) -> Result<Vec<u8>, String> {
    let paylen = (olinfo >> pollnic_hw::desc::TXD_PAYLEN_SHIFT) as usize;
    if paylen != frame.len() {
        return Err(format!(
            "PAYLEN {paylen} is not the frame's {} bytes (a non-TSO frame's PAYLEN is its length)",
            frame.len()
        ));
    }
    let (vle, ixsm, txsm) = (
        cmd & TXD_DCMD_VLE != 0,
        olinfo & TXD_POPTS_IXSM != 0,
        olinfo & TXD_POPTS_TXSM != 0,
    );
    if !(vle || ixsm || txsm) {
        return Ok(frame);
    }
    let ctx = context_of(olinfo, contexts, part, "VLE/IXSM/TXSM")?;
    if ixsm || txsm {
        let Some((l2, v4, iplen, proto, end)) = headers(&frame) else {
            return Err("checksum offload asked of a frame that is not IPv4/IPv6".into());
        };
        if ctx.maclen() != l2 || ctx.iplen() != iplen {
            return Err(format!(
                "context MACLEN {} IPLEN {} but the frame's headers are {l2} and {iplen} bytes",
                ctx.maclen(),
                ctx.iplen()
            ));
        }
        if ctx.ipv4() != v4 {
            return Err(format!(
                "context TUCMD.IPV4 {} on a frame that is IPv{}",
                ctx.ipv4(),
                if v4 { 4 } else { 6 }
            ));
        }
        if ixsm {
            if !v4 {
                return Err("IXSM on an IPv6 frame".into());
            }
            let c = !fold(ones_sum(&frame[l2..l2 + iplen], 0));
            frame[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
        }
        if txsm {
            let l4 = l2 + iplen;
            let at = match (proto, ctx.tcp()) {
                (6, true) => l4 + 16,
                (17, false) => l4 + 6,
                _ => {
                    return Err(format!(
                        "context L4T {} on IP protocol {proto}",
                        if ctx.tcp() { "TCP" } else { "UDP" }
                    ))
                }
            };
            if at + 2 > end {
                return Err("L4 header cut short".into());
            }
            // Silicon: the sum from the L4 header to the frame's end, with
            // the field as the driver left it (the pseudo-header's sum).
            let mut c = !fold(ones_sum(&frame[l4..], 0));
            if proto == 17 && c == 0 {
                c = 0xffff;
            }
            frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
    if vle {
        let tag = ctx.vlan().to_be_bytes();
        frame.splice(12..12, [0x81, 0x00, tag[0], tag[1]]);
    }
    Ok(frame)
}
