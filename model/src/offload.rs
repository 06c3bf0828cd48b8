//! The offloads of the software 82576 and 82599: RX checksum checks and VLAN
//! strip into the write-back, TX checksum insertion and VLAN insert from an
//! advanced context descriptor. Strict where silicon is: a data descriptor
//! whose context does not describe its frame (MACLEN, IPLEN, TUCMD), an
//! IDX with no context, a missing CC on the 82599, or a PAYLEN that is not
//! the frame's length is a violation, not a frame sent wrong.
//!
//! As silicon (and unlike QEMU's igb, which recomputes both from scratch),
//! the IPv4 header checksum is summed over the header as it is (its field
//! must be 0) and the L4 checksum from the L4 header to the end of the
//! frame (its field must hold the pseudo-header's sum).

use pollnic_hw::desc::TXD_DCMD_EOP;
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
    mut frame: Vec<u8>,
    cmd: u32,
    olinfo: u32,
    contexts: &Contexts,
    part: Part,
) -> Result<Vec<u8>, String> {
    let _ = TXD_DCMD_EOP;
    if cmd & TXD_DCMD_TSE != 0 {
        return Err("TSE set: TCP segmentation is not modelled".into());
    }
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
    if part == Part::Ixgbe && olinfo & TXD_OLINFO_CC == 0 {
        return Err("VLE/IXSM/TXSM without CC: the 82599 does not read the context".into());
    }
    let idx = ((olinfo >> TXD_IDX_SHIFT) & 7) as usize;
    if part == Part::Igb && idx > 1 {
        return Err(format!("IDX {idx}: the 82576 has contexts 0 and 1"));
    }
    let Some(ctx) = contexts[idx] else {
        return Err(format!(
            "offload asked with IDX {idx}, but no context descriptor set it"
        ));
    };
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
