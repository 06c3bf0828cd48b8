//! A strict software virtio-net device (virtio 1.2, PCI transport) that
//! [`pollnic::Device`] drives through [`pollnic::Device::open_on`], the same
//! code that drives QEMU's virtio-net-pci in the guest tests.
//!
//! **What it has:** the four PCI capabilities (common, notify, ISR, device
//! configuration, §4.1.4) in BAR 4 of [`BAR_SIZE`] bytes; the status
//! handshake and feature negotiation (§3.1.1); split virtqueues, device
//! side, with `VIRTIO_F_EVENT_IDX` (§2.7, `vq.rs`); checksum offloads
//! (`VIRTIO_NET_F_CSUM`: a transmitted `VIRTIO_NET_HDR_F_NEEDS_CSUM`
//! request is checked and its checksum computed into the frame on the
//! wire, §5.1.6.2; `VIRTIO_NET_F_GUEST_CSUM`: received TCP and UDP frames
//! get `VIRTIO_NET_HDR_F_DATA_VALID` when their checksum is right, or are
//! passed partial with `NEEDS_CSUM`, [`RxCsum`], §5.1.6.4); the control queue with
//! `VIRTIO_NET_F_CTRL_RX`, `_MQ` and `_RSS` (§5.1.6.5); the MTU
//! (`VIRTIO_NET_F_MTU`); MSI-X vectors per queue (§4.1.5.1.2), delivered to
//! eventfds; and a wire: [`SoftVirtioNet::receive`] and
//! [`SoftVirtioNet::take_tx_frames`].
//!
//! **The spec's MUSTs are rules.** Each is a violation the model records
//! with its clause ([`SoftVirtioNet::violations`]) where QEMU forgives it:
//! a field accessed at the wrong width (§4.1.3.1); a status bit cleared or
//! set out of order, DRIVER_OK before FEATURES_OK was read back, a feature
//! accepted that was not offered or after FEATURES_OK (§3.1.1, §2.1.2); a
//! queue field written after `queue_enable`, 0 written to it, a bad size or
//! a misaligned or unmapped ring (§4.1.4.3.2, §2.7); a notification before
//! DRIVER_OK or with a wrong value (§3.1.1, §4.1.5.2); receive buffers too
//! small for a frame of the MTU (§5.1.4.2); a transmitted frame longer than
//! the MTU (§5.1.4.1); a broken chain (§2.7.4.2, §2.7.5); a control command
//! whose feature was not negotiated or whose RSS configuration breaks
//! §5.1.6.5.7.1; a write to the read-only device configuration; a mapping
//! removed while an enabled virtqueue in it can still be reached.
//!
//! **A hostile mode** ([`Hostile`]) plays the device the driver must not
//! trust: capabilities outside the BAR or at the end of configuration
//! space, FEATURES_OK refused, DEVICE_NEEDS_RESET during traffic, used
//! entries that lie, the avail ring and the descriptor table rewritten
//! while the driver works.

pub(crate) mod vq;

use crate::iommu::{Mappings, ModelDma};
use crate::{lock, ModelHost, RegisterModel, SharedModel};
use pollnic::irq::MsixError;
use pollnic::lowlevel::io::{DeviceBar, DeviceIo, IrqEvent, Regs, TailDoorbell};
use pollnic::{Device, DeviceConfig, DeviceIdent, Result};
use pollnic_hw::rss::{Toeplitz, KEY_LEN};
use pollnic_rings::{DmaMapper, PageSize};
use std::sync::{Arc, Mutex};
use vq::{Chain, Take, Vq, NO_VECTOR};

/// The PCI address the model reports in messages.
pub const MODEL_ADDR: &str = "0000:5e:00.4";
/// The BAR the structures live in (QEMU's virtio-pci uses BAR 4 too).
pub const BAR: u8 = 4;
/// Its size in bytes.
pub const BAR_SIZE: u32 = 0x4000;

/// Where each structure sits in [`BAR`].
const COMMON: u32 = 0x0000;
const COMMON_LEN: u32 = 0x38;
const ISR: u32 = 0x1000;
const DEVCFG: u32 = 0x2000;
const DEVCFG_LEN: u32 = 24;
const NOTIFY: u32 = 0x3000;
/// `notify_off_multiplier`: each queue's doorbell 4 bytes after the last.
const NOTIFY_MULT: u32 = 4;

/// Device status bits (§2.1).
mod status {
    pub const ACKNOWLEDGE: u8 = 1;
    pub const DRIVER: u8 = 2;
    pub const DRIVER_OK: u8 = 4;
    pub const FEATURES_OK: u8 = 8;
    pub const DEVICE_NEEDS_RESET: u8 = 0x40;
}

/// Feature bits the model knows (§5.1.3, §6), for [`VirtioModelConfig::features`].
///
/// Written from the spec here, not taken from `pollnic_hw::virtio::feature`
/// on purpose: a model that shared the driver's constants would agree with
/// a wrong bit number instead of catching it.
pub mod feature {
    /// `VIRTIO_NET_F_CSUM`.
    pub const NET_CSUM: u64 = 1 << 0;
    /// `VIRTIO_NET_F_GUEST_CSUM`.
    pub const NET_GUEST_CSUM: u64 = 1 << 1;
    /// `VIRTIO_NET_F_MTU`.
    pub const NET_MTU: u64 = 1 << 3;
    /// `VIRTIO_NET_F_HOST_TSO4`.
    pub const NET_HOST_TSO4: u64 = 1 << 11;
    /// `VIRTIO_NET_F_HOST_TSO6`.
    pub const NET_HOST_TSO6: u64 = 1 << 12;
    /// `VIRTIO_NET_F_HOST_ECN`: never in [`ALL`], so a segment with CWR is a
    /// violation.
    pub const NET_HOST_ECN: u64 = 1 << 13;
    /// `VIRTIO_NET_F_MAC`.
    pub const NET_MAC: u64 = 1 << 5;
    /// `VIRTIO_NET_F_STATUS`.
    pub const NET_STATUS: u64 = 1 << 16;
    /// `VIRTIO_NET_F_CTRL_VQ`.
    pub const NET_CTRL_VQ: u64 = 1 << 17;
    /// `VIRTIO_NET_F_CTRL_RX`.
    pub const NET_CTRL_RX: u64 = 1 << 18;
    /// `VIRTIO_NET_F_MQ`.
    pub const NET_MQ: u64 = 1 << 22;
    /// `VIRTIO_F_EVENT_IDX`.
    pub const EVENT_IDX: u64 = 1 << 29;
    /// `VIRTIO_NET_F_HASH_REPORT`.
    pub const NET_HASH_REPORT: u64 = 1 << 57;
    /// `VIRTIO_NET_F_RSS`.
    pub const NET_RSS: u64 = 1 << 60;
    /// `VIRTIO_F_VERSION_1`.
    pub const VERSION_1: u64 = 1 << 32;
    /// `VIRTIO_F_ACCESS_PLATFORM`.
    pub const ACCESS_PLATFORM: u64 = 1 << 33;
    /// `VIRTIO_F_RING_PACKED`: packed virtqueues (virtio 1.2 §2.8). Not in
    /// [`ALL`], as QEMU offers it only with `packed=on`: add it to
    /// `VirtioModelConfig::features` to run the packed layout.
    pub const RING_PACKED: u64 = 1 << 34;
    /// `VIRTIO_F_IN_ORDER`: buffers used in the order they were made
    /// available (virtio 1.2 §6). Not in [`ALL`], as QEMU offers it only
    /// with `in_order=on`. With it the model holds a split ring's driver to
    /// ring order (heads and `next` fields, §2.7.5) and completes each
    /// transmit notification's chains as one batch: one used entry, for
    /// the last (§2.7.8; packed, one used descriptor, §2.8).
    pub const IN_ORDER: u64 = 1 << 35;
    /// Everything above but ECN: what QEMU's virtio-net-pci offers with
    /// `iommu_platform=on,mq=on,rss=on,hash=on,host_mtu=N` on a tap with a
    /// vnet header (`csum`, `guest_csum`, `host_tso4` and `host_tso6` are
    /// on by default).
    pub const ALL: u64 = NET_CSUM
        | NET_GUEST_CSUM
        | NET_HOST_TSO4
        | NET_HOST_TSO6
        | NET_MTU
        | NET_MAC
        | NET_STATUS
        | NET_CTRL_VQ
        | NET_CTRL_RX
        | NET_MQ
        | EVENT_IDX
        | NET_HASH_REPORT
        | NET_RSS
        | VERSION_1
        | ACCESS_PLATFORM;
}

/// `virtio_net_hdr.flags` (§5.1.6): `VIRTIO_NET_HDR_F_NEEDS_CSUM`,
/// `VIRTIO_NET_HDR_F_DATA_VALID`.
const NEEDS_CSUM: u8 = 1;
const DATA_VALID: u8 = 2;

/// Ones' complement sum of `b` as big-endian 16-bit words (RFC 1071), not
/// folded: the model's own, not the driver's.
fn sum16(b: &[u8]) -> u64 {
    b.chunks(2)
        .map(|c| u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0)))
        .sum()
}

fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// A TCP or UDP frame's L4 header offset, checksum field offset from it
/// (16 or 6), pseudo-header sum (RFC 793, RFC 768, RFC 8200 §8.1) and the
/// IP datagram's end:
/// Ethernet without a tag, IPv4 (not a fragment) or IPv6 without extension
/// headers; `None` for anything else or a frame shorter than its headers.
fn l4_of(f: &[u8]) -> Option<(usize, usize, u64, usize)> {
    let be = |i: usize| Some(u16::from_be_bytes([*f.get(i)?, *f.get(i + 1)?]) as usize);
    let (start, proto, end, addrs) = match be(12)? {
        0x0800 => {
            let ihl = (*f.get(14)? as usize & 0xf) * 4;
            if ihl < 20 || be(20)? & 0x3fff != 0 {
                return None;
            }
            (14 + ihl, *f.get(23)?, 14 + be(16)?, f.get(26..34)?)
        }
        0x86dd => (54, *f.get(20)?, 54 + be(18)?, f.get(22..54)?),
        _ => return None,
    };
    let offset = match proto {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    if end > f.len() || start + offset + 2 > end {
        return None;
    }
    Some((
        start,
        offset,
        sum16(addrs) + u64::from(proto) + (end - start) as u64,
        end,
    ))
}

/// `virtio_net_hdr.gso_type` values (§5.1.6).
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;

/// The segments of a frame sent with `gso_type` ≠ NONE (§5.1.6.2), cut as
/// Linux's GSO cuts what QEMU's tap back end hands it
/// (`inet_gso_segment`, `ipv6_gso_segment`, `tcp_gso_segment`): each
/// segment has the frame's headers, the payload cut at `gso_size`, its own
/// IP length (IPv4: the identification plus the segment's number and the
/// header checksum recomputed), the sequence number plus the bytes before
/// it, FIN and PSH on the last segment only, and its TCP checksum complete.
/// Strict where a device may trust the driver (§5.1.6.2's MUSTs, and what
/// Linux and DPDK's virtio PMD both do): the feature for the type, no ECN
/// bit, NEEDS_CSUM at the TCP checksum, a non-zero `gso_size`, `hdr_len`
/// not below the headers, the frame's own IP length, the TCP field seeded
/// with the pseudo-header's sum with the whole TCP length, no CWR.
/// `features` are the negotiated ones.
fn gso_segments(hdr: &[u8], frame: &[u8], features: u64) -> Result<Vec<Vec<u8>>, String> {
    let le = |i: usize| u16::from_le_bytes([hdr[i], hdr[i + 1]]) as usize;
    let (flags, gso) = (hdr[0], hdr[1]);
    let (hdr_len, mss, start, offset) = (le(2), le(4), le(6), le(8));
    if gso & GSO_ECN != 0 {
        return Err(format!(
            "gso_type {gso:#x} with VIRTIO_NET_HDR_GSO_ECN, but VIRTIO_NET_F_HOST_ECN was not \
             negotiated (virtio 1.2 §5.1.6.2)"
        ));
    }
    let (v6, need, name) = match gso {
        GSO_TCPV4 => (false, feature::NET_HOST_TSO4, "VIRTIO_NET_F_HOST_TSO4"),
        GSO_TCPV6 => (true, feature::NET_HOST_TSO6, "VIRTIO_NET_F_HOST_TSO6"),
        other => {
            return Err(format!(
                "gso_type {other:#x}: the model segments TCPV4 (1) and TCPV6 (4) only, and \
                 no other type was negotiated (virtio 1.2 §5.1.6.2)"
            ))
        }
    };
    if features & need == 0 {
        return Err(format!(
            "gso_type {gso}, but {name} was not negotiated: the driver MUST NOT set it \
             (virtio 1.2 §5.1.6.2.1)"
        ));
    }
    if flags & !NEEDS_CSUM != 0 {
        return Err(format!(
            "flags {flags:#x}: the driver MUST NOT set DATA_VALID or RSC_INFO (virtio 1.2 \
             §5.1.6.2.1)"
        ));
    }
    if flags & NEEDS_CSUM == 0 || mss == 0 {
        return Err(format!(
            "gso_type {gso} with flags {flags:#x} and gso_size {mss}: the driver MUST also set \
             NEEDS_CSUM and gso_size to the MSS (virtio 1.2 §5.1.6.2.1)"
        ));
    }
    let be = |i: usize| {
        frame
            .get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    };
    let mut l2 = 14;
    let mut et = be(12).ok_or("a segmented frame shorter than an Ethernet header")?;
    if et == 0x8100 {
        l2 = 18;
        et = be(16).ok_or("a segmented frame cut inside its 802.1Q tag")?;
    }
    let want_et = if v6 { 0x86dd } else { 0x0800 };
    if et != want_et {
        return Err(format!(
            "gso_type {gso} on a frame of EtherType {et:#06x} (virtio 1.2 §5.1.6.2)"
        ));
    }
    let (iplen, proto) = if v6 {
        (40, frame.get(l2 + 6).copied())
    } else {
        let ihl = frame.get(l2).map_or(0, |b| (b & 0xf) as usize * 4);
        (ihl.max(20), frame.get(l2 + 9).copied())
    };
    let l4 = l2 + iplen;
    let doff = frame.get(l4 + 12).map_or(0, |b| (b >> 4) as usize * 4);
    let hlen = l4 + doff;
    if proto != Some(6) || doff < 20 || frame.len() < hlen {
        return Err(format!(
            "gso_type {gso} on a frame that is not a whole TCP header over IPv{} (protocol \
             {proto:?}, data offset {doff}, {} bytes)",
            if v6 { 6 } else { 4 },
            frame.len()
        ));
    }
    if (start, offset) != (l4, 16) {
        return Err(format!(
            "segmentation with csum_start {start} and csum_offset {offset}: the TCP checksum \
             is at {l4} + 16 (virtio 1.2 §5.1.6.2.1)"
        ));
    }
    if hdr_len < hlen {
        return Err(format!(
            "hdr_len {hdr_len} below the {hlen} bytes of headers: the driver SHOULD set it not \
             less (virtio 1.2 §5.1.6.2.1)"
        ));
    }
    let ip_len = be(l2 + if v6 { 4 } else { 2 }).unwrap_or(0);
    let own = frame.len() - l2 - if v6 { 40 } else { 0 };
    if ip_len != own {
        return Err(format!(
            "a segmented frame's IP length field says {ip_len}, but it carries {own} bytes: \
             the device's segmentation reads it (Linux's GSO, DPDK's virtio_tso_fix_cksum)"
        ));
    }
    let tcp_len = frame.len() - l4;
    let addrs = if v6 {
        &frame[l2 + 8..l2 + 40]
    } else {
        &frame[l2 + 12..l2 + 20]
    };
    let seed = fold(sum16(addrs) + 6 + tcp_len as u64);
    let field = be(l4 + 16).unwrap_or(0) as u16;
    if field != seed {
        return Err(format!(
            "a segmented frame's TCP checksum field holds {field:#06x}, not the pseudo-header's \
             sum {seed:#06x}: the driver MUST set it to the TCP pseudo header (virtio 1.2 \
             §5.1.6.2.1), with the whole TCP length"
        ));
    }
    if frame[l4 + 13] & 0x80 != 0 && features & feature::NET_HOST_ECN == 0 {
        return Err(
            "a segmented frame with TCP CWR set, but VIRTIO_NET_F_HOST_ECN was not \
             negotiated: the driver SHOULD NOT send it (virtio 1.2 §5.1.6.2.1)"
                .into(),
        );
    }
    let payload = &frame[hlen..];
    let id0 = be(l2 + 4).unwrap_or(0) as u16;
    let seq0 = u32::from_be_bytes([frame[l4 + 4], frame[l4 + 5], frame[l4 + 6], frame[l4 + 7]]);
    let n = payload.len().div_ceil(mss).max(1);
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let part = &payload[(k * mss).min(payload.len())..((k + 1) * mss).min(payload.len())];
        let mut seg = frame[..hlen].to_vec();
        seg.extend_from_slice(part);
        let seg_tcp = doff + part.len();
        if v6 {
            seg[l2 + 4..l2 + 6].copy_from_slice(&(seg_tcp as u16).to_be_bytes());
        } else {
            seg[l2 + 2..l2 + 4].copy_from_slice(&((iplen + seg_tcp) as u16).to_be_bytes());
            seg[l2 + 4..l2 + 6].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
            seg[l2 + 10..l2 + 12].copy_from_slice(&[0, 0]);
            let c = !fold(sum16(&seg[l2..l4]));
            seg[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
        }
        let seq = seq0.wrapping_add((k * mss) as u32);
        seg[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        if k + 1 < n {
            seg[l4 + 13] &= !(0x01 | 0x08); // FIN, PSH
        }
        seg[l4 + 16..l4 + 18].copy_from_slice(&[0, 0]);
        let c = !fold(sum16(addrs) + 6 + seg_tcp as u64 + sum16(&seg[l4..]));
        seg[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        out.push(seg);
    }
    Ok(out)
}

/// Control classes and commands (§5.1.6.5).
const CLASS_RX: u8 = 0;
const CLASS_MQ: u8 = 4;
const ACK_OK: u8 = 0;
const ACK_ERR: u8 = 1;
/// `supported_hash_types`: IPv4, TCPv4, UDPv4, IPv6, TCPv6, UDPv6 (§5.1.4).
const HASH_TYPES: u32 = 0x3f;
/// `rss_max_indirection_table_length` and `rss_max_key_size`, QEMU's.
const RSS_MAX_TABLE: u16 = 128;
const RSS_MAX_KEY: u8 = 40;

/// How the model is built.
#[derive(Clone, Debug)]
pub struct VirtioModelConfig {
    /// The MAC in the device configuration (`VIRTIO_NET_F_MAC`).
    pub mac: [u8; 6],
    /// `max_virtqueue_pairs`.
    pub queue_pairs: u16,
    /// Each virtqueue's largest size (QEMU: 256).
    pub queue_size: u16,
    /// The MTU in the device configuration (with `VIRTIO_NET_F_MTU`).
    pub mtu: u16,
    /// Feature bits offered ([`feature`]).
    pub features: u64,
    /// MSI-X table size (QEMU: 2 × pairs + 2).
    pub msix_vectors: u16,
    /// `VIRTIO_NET_S_LINK_UP` in the status field.
    pub link_up: bool,
    /// What a received TCP or UDP frame's header says with
    /// `VIRTIO_NET_F_GUEST_CSUM` negotiated.
    pub rx_csum: RxCsum,
}

/// How the model fills the checksum part of a received frame's header
/// once `VIRTIO_NET_F_GUEST_CSUM` is negotiated (virtio 1.2 §5.1.6.4).
/// Only TCP and UDP over IPv4 (not a fragment) or IPv6 get a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RxCsum {
    /// `VIRTIO_NET_HDR_F_DATA_VALID` when the frame's L4 checksum is
    /// right (the model checks it), no flag otherwise.
    #[default]
    DataValid,
    /// The frame passed partial, as from a local sender: its checksum field
    /// replaced by the pseudo-header's sum, `VIRTIO_NET_HDR_F_NEEDS_CSUM`
    /// with `csum_start` (the L4 header) and `csum_offset` (16 or 6).
    NeedsCsum,
    /// No flag (the device checked nothing).
    Nothing,
}

impl Default for VirtioModelConfig {
    fn default() -> Self {
        VirtioModelConfig {
            mac: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
            queue_pairs: 4,
            queue_size: 256,
            mtu: 1500,
            features: feature::ALL,
            msix_vectors: 10,
            link_up: true,
            rx_csum: RxCsum::DataValid,
        }
    }
}

/// What a hostile device does ([`SoftVirtioNet::set_hostile`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hostile {
    /// The common configuration capability reaches past the end of its BAR.
    CapabilityBeyondBar,
    /// The device configuration capability sits in the last 4 bytes of
    /// configuration space (its body runs past the end).
    CapabilityAtConfigEnd,
    /// FEATURES_OK never stays set.
    RefuseFeaturesOk,
    /// After this many received frames, DEVICE_NEEDS_RESET is set and the
    /// device stops (§2.1.1).
    NeedsResetAfter(u64),
    /// The next used entry names a chain id past the queue's end.
    UsedIdOutOfRange,
    /// The next received frame's used entry claims 64 KiB more than the
    /// chain holds.
    UsedLenTooLong,
    /// Every used entry repeats the id of the one before (a chain
    /// completed twice, without the driver re-posting it in between).
    UsedIdTwice,
    /// With `VIRTIO_NET_F_GUEST_CSUM`: every received frame's header says
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM` with `csum_start` one byte before the
    /// frame's end (the checksum field would run past it).
    CsumStartPastFrame,
    /// Every avail ring entry the device takes is overwritten with 0x7fff
    /// after it read it, and the data descriptor of each chain it takes
    /// gets a garbage address and length: what a driver must never read
    /// back. (On a packed ring, only the descriptor.)
    RewriteRings,
    /// Packed rings: the next received frame's used descriptor has AVAIL
    /// and USED set to the inverse of the device's wrap counter (a used
    /// descriptor of the wrong lap).
    UsedWrongWrap,
}

/// What became of a frame given to [`SoftVirtioNet::receive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtioRx {
    /// Written into receive queue `queue`'s next chain.
    Delivered {
        /// The queue pair RSS (or queue 0) chose.
        queue: u16,
        /// The RSS hash reported (0 without RSS).
        hash: u32,
    },
    /// DRIVER_OK not set, the device needs a reset, or bus mastering is off.
    NotReady,
    /// The receive filter (promiscuous off) dropped it.
    Filtered,
    /// The queue is not enabled.
    QueueOff(u16),
    /// No chain available on the queue.
    NoBuffer(u16),
    /// The chain is too short for the frame: dropped (the chain stays).
    TooLong(u16),
    /// The queue's ring or buffer could not be reached or is broken (a
    /// violation is recorded).
    Fault(u16),
}

/// The RSS configuration the driver sent.
#[derive(Clone, Debug)]
pub struct RssState {
    /// `hash_types`.
    pub hash_types: u32,
    /// `indirection_table` (length `indirection_table_mask` + 1).
    pub table: Vec<u16>,
    /// `unclassified_queue`.
    pub unclassified: u16,
    /// `hash_key_data`.
    pub key: Vec<u8>,
    toeplitz: Arc<Toeplitz>,
}

/// The device's state, under one lock.
pub(crate) struct State {
    cfg: VirtioModelConfig,
    hostile: Option<Hostile>,
    status: u8,
    /// FEATURES_OK was read back after it was set (§3.1.1 step 6).
    features_ok_seen: bool,
    device_feature_select: u32,
    driver_feature_select: u32,
    driver_features: u64,
    /// Accepted at FEATURES_OK.
    features: u64,
    msix_config: u16,
    queue_select: u16,
    queues: Vec<Vq>,
    isr: u8,
    iommu: Mappings,
    bus_master: bool,
    violations: Vec<String>,
    wire: Vec<Vec<u8>>,
    promisc: bool,
    allmulti: bool,
    pairs_in_use: u16,
    rss: Option<RssState>,
    received: u64,
    msix: Vec<Arc<IrqEvent>>,
    fired: Vec<u64>,
    /// The id of the last used entry written on a receive queue, for
    /// `UsedIdTwice`.
    last_used_id: Option<u32>,
}

impl State {
    fn new(cfg: VirtioModelConfig) -> State {
        let n = Self::num_queues_of(&cfg);
        State {
            queues: (0..n).map(|_| Vq::new(cfg.queue_size)).collect(),
            cfg,
            hostile: None,
            status: 0,
            features_ok_seen: false,
            device_feature_select: 0,
            driver_feature_select: 0,
            driver_features: 0,
            features: 0,
            msix_config: NO_VECTOR,
            queue_select: 0,
            isr: 0,
            iommu: Mappings::default(),
            bus_master: true,
            violations: Vec::new(),
            wire: Vec::new(),
            promisc: true,
            allmulti: false,
            pairs_in_use: 1,
            rss: None,
            received: 0,
            msix: Vec::new(),
            fired: Vec::new(),
            last_used_id: None,
        }
    }

    /// RX and TX of each pair, and the control queue when offered.
    fn num_queues_of(cfg: &VirtioModelConfig) -> u16 {
        2 * cfg.queue_pairs + u16::from(cfg.features & feature::NET_CTRL_VQ != 0)
    }

    fn ctrl_index(&self) -> Option<u16> {
        (self.cfg.features & feature::NET_CTRL_VQ != 0).then_some(2 * self.cfg.queue_pairs)
    }

    fn has(&self, f: u64) -> bool {
        self.features & f != 0
    }

    fn violation(&mut self, v: String) {
        if !self.violations.contains(&v) {
            self.violations.push(v);
        }
    }

    /// A device reset (0 written to `device_status`, §4.1.4.3.1).
    fn reset(&mut self) {
        let (cfg, hostile, iommu, bus_master, violations, wire, msix, fired) = (
            self.cfg.clone(),
            self.hostile,
            std::mem::take(&mut self.iommu),
            self.bus_master,
            std::mem::take(&mut self.violations),
            std::mem::take(&mut self.wire),
            std::mem::take(&mut self.msix),
            std::mem::take(&mut self.fired),
        );
        *self = State::new(cfg);
        self.hostile = hostile;
        self.iommu = iommu;
        self.bus_master = bus_master;
        self.violations = violations;
        self.wire = wire;
        self.msix = msix;
        self.fired = fired;
    }

    fn dma_ok(&self) -> bool {
        self.bus_master
            && self.status & status::DRIVER_OK != 0
            && self.status & status::DEVICE_NEEDS_RESET == 0
    }

    // ---- register access -------------------------------------------------

    fn read(&mut self, off: u32, width: u32) -> u32 {
        match off {
            COMMON..=0x0fff if off < COMMON + COMMON_LEN => self.common_read(off - COMMON, width),
            ISR => {
                let v = self.isr;
                self.isr = 0;
                u32::from(v)
            }
            DEVCFG..=0x2fff if off < DEVCFG + DEVCFG_LEN => self.devcfg_read(off - DEVCFG, width),
            _ => {
                self.violation(format!(
                    "a {width}-byte read at BAR {BAR} offset {off:#x}, which no structure covers"
                ));
                !0
            }
        }
    }

    fn write(&mut self, off: u32, width: u32, val: u32) {
        match off {
            COMMON..=0x0fff if off < COMMON + COMMON_LEN => {
                self.common_write(off - COMMON, width, val)
            }
            DEVCFG..=0x2fff => self.violation(format!(
                "a write to the network device configuration at offset {:#x}: its fields are \
                 read-only to the driver (virtio 1.2 §5.1.4)",
                off - DEVCFG
            )),
            NOTIFY..=0x3fff => self.notify(off - NOTIFY, width, val),
            _ => self.violation(format!(
                "a {width}-byte write at BAR {BAR} offset {off:#x}, which no writable structure \
                 covers"
            )),
        }
    }

    /// The common configuration field at `o`: (start, width). 64-bit fields
    /// are two 32-bit halves (§4.1.3.1).
    fn common_field(o: u32) -> Option<(u32, u32)> {
        Some(match o {
            0x00..=0x0f => (o & !3, 4),
            0x10..=0x13 => (o & !1, 2),
            0x14 | 0x15 => (o, 1),
            0x16..=0x1f => (o & !1, 2),
            0x20..=0x37 => (o & !3, 4),
            _ => return None,
        })
    }

    fn check_width(&mut self, what: &str, o: u32, width: u32, field: Option<(u32, u32)>) -> bool {
        match field {
            Some((start, w)) if start == o && w == width => true,
            _ => {
                self.violation(format!(
                    "a {width}-byte access to the {what} at offset {o:#x}: each field is \
                     accessed at its own width and alignment (virtio 1.2 §4.1.3.1)"
                ));
                false
            }
        }
    }

    fn common_read(&mut self, o: u32, width: u32) -> u32 {
        if !self.check_width("common configuration", o, width, Self::common_field(o)) {
            return !0;
        }
        let q = self.queues.get(self.queue_select as usize).cloned();
        let half = |v: u64, sel: u32| if sel < 2 { (v >> (32 * sel)) as u32 } else { 0 };
        match o {
            0x00 => self.device_feature_select,
            0x04 => half(self.cfg.features, self.device_feature_select),
            0x08 => self.driver_feature_select,
            0x0c => half(self.driver_features, self.driver_feature_select),
            0x10 => u32::from(self.msix_config),
            0x12 => u32::from(self.queues.len() as u16),
            0x14 => {
                if self.status & status::FEATURES_OK != 0 {
                    self.features_ok_seen = true;
                }
                u32::from(self.status)
            }
            0x15 => 0,
            0x16 => u32::from(self.queue_select),
            _ => {
                let Some(q) = q else { return 0 };
                match o {
                    0x18 => u32::from(q.size),
                    0x1a => u32::from(q.vector),
                    0x1c => u32::from(q.enabled),
                    0x1e => u32::from(self.queue_select),
                    0x20 => q.desc as u32,
                    0x24 => (q.desc >> 32) as u32,
                    0x28 => q.avail as u32,
                    0x2c => (q.avail >> 32) as u32,
                    0x30 => q.used as u32,
                    0x34 => (q.used >> 32) as u32,
                    _ => 0,
                }
            }
        }
    }

    fn common_write(&mut self, o: u32, width: u32, val: u32) {
        if !self.check_width("common configuration", o, width, Self::common_field(o)) {
            return;
        }
        match o {
            0x00 => self.device_feature_select = val,
            0x08 => self.driver_feature_select = val,
            0x0c => {
                if self.status & status::FEATURES_OK != 0 {
                    self.violation(
                        "driver_feature written after FEATURES_OK: the driver MUST NOT accept \
                         new feature bits after that step (virtio 1.2 §3.1.1 step 5)"
                            .into(),
                    );
                    return;
                }
                let sh = match self.driver_feature_select {
                    0 => 0,
                    1 => 32,
                    _ => return,
                };
                self.driver_features =
                    self.driver_features & !(0xffff_ffffu64 << sh) | u64::from(val) << sh;
            }
            0x10 => self.msix_config = self.vector_or_none(val as u16),
            0x14 => self.status_write(val as u8),
            0x16 => self.queue_select = val as u16,
            0x04 | 0x12 | 0x15 | 0x1e => self.violation(format!(
                "a write to the read-only common configuration field at {o:#x} (virtio 1.2 \
                 §4.1.4.3)"
            )),
            _ => self.queue_write(o, val),
        }
    }

    /// A vector the device can map, else `VIRTIO_MSI_NO_VECTOR` (what it
    /// reads back, §4.1.5.1.2).
    fn vector_or_none(&self, v: u16) -> u16 {
        if v < self.cfg.msix_vectors {
            v
        } else {
            NO_VECTOR
        }
    }

    fn queue_write(&mut self, o: u32, val: u32) {
        let q = self.queue_select;
        let Some(vq) = self.queues.get(q as usize).cloned() else {
            self.violation(format!(
                "a queue field written with queue_select {q}, a queue the device does not have \
                 (num_queues {})",
                self.queues.len()
            ));
            return;
        };
        if self.status & status::FEATURES_OK == 0 {
            self.violation(format!(
                "queue {q}'s field at {o:#x} written before FEATURES_OK: virtqueues are set up \
                 after feature negotiation (virtio 1.2 §3.1.1 step 7)"
            ));
        }
        if vq.enabled && o != 0x1c {
            self.violation(format!(
                "queue {q}'s field at {o:#x} written after queue_enable: the driver MUST \
                 configure the other virtqueue fields before enabling the virtqueue (virtio 1.2 \
                 §4.1.4.3.2)"
            ));
            return;
        }
        let set_lo = |v: u64| v & !0xffff_ffff | u64::from(val);
        let set_hi = |v: u64| v & 0xffff_ffff | u64::from(val) << 32;
        let vector = self.vector_or_none(val as u16);
        let packed = self.has(feature::RING_PACKED);
        let in_order = self.has(feature::IN_ORDER);
        let vqm = &mut self.queues[q as usize];
        match o {
            0x18 => {
                let n = val as u16;
                if packed && (n == 0 || n > vqm.max) {
                    let max = vqm.max;
                    self.violation(format!(
                        "queue {q}'s size set to {n}: a packed virtqueue's size is 1 to the \
                         device's {max} (virtio 1.2 §2.8, §4.1.4.3.2)"
                    ));
                } else if !packed && (n == 0 || !n.is_power_of_two() || n > vqm.max) {
                    let max = vqm.max;
                    self.violation(format!(
                        "queue {q}'s size set to {n}: a split virtqueue's size is a power of 2 \
                         no larger than the device's {max} (virtio 1.2 §2.7, §4.1.4.3.2)"
                    ));
                } else {
                    vqm.size = n;
                }
            }
            0x1a => vqm.vector = vector,
            0x1c => {
                if val == 0 {
                    self.violation(format!(
                        "0 written to queue {q}'s queue_enable: the driver MUST NOT write a 0 \
                         there (virtio 1.2 §4.1.4.3.2)"
                    ));
                    return;
                }
                if vqm.enabled {
                    return;
                }
                vqm.packed = packed;
                if let Some(p) = vqm.layout_problem(&self.iommu) {
                    self.violation(format!("queue {q} enabled with a bad ring: {p}"));
                    return;
                }
                vqm.enable(packed, in_order);
            }
            0x20 => vqm.desc = set_lo(vqm.desc),
            0x24 => vqm.desc = set_hi(vqm.desc),
            0x28 => vqm.avail = set_lo(vqm.avail),
            0x2c => vqm.avail = set_hi(vqm.avail),
            0x30 => vqm.used = set_lo(vqm.used),
            0x34 => vqm.used = set_hi(vqm.used),
            _ => {}
        }
    }

    fn status_write(&mut self, v: u8) {
        if v == 0 {
            self.reset();
            return;
        }
        let old = self.status;
        let cleared = old & !v & !status::DEVICE_NEEDS_RESET;
        if cleared != 0 {
            self.violation(format!(
                "device_status bits {cleared:#x} cleared without a reset: the driver MUST NOT \
                 clear a device status bit (virtio 1.2 §2.1.2)"
            ));
        }
        let new = v & !old;
        for (bit, needs, name) in [
            (
                status::DRIVER,
                status::ACKNOWLEDGE,
                "DRIVER before ACKNOWLEDGE",
            ),
            (
                status::FEATURES_OK,
                status::DRIVER,
                "FEATURES_OK before DRIVER",
            ),
            (
                status::DRIVER_OK,
                status::FEATURES_OK,
                "DRIVER_OK before FEATURES_OK",
            ),
        ] {
            if new & bit != 0 && v & needs == 0 {
                self.violation(format!(
                    "{name}: the driver MUST follow the initialization sequence (virtio 1.2 §3.1.1)"
                ));
            }
        }
        let mut v = v | old & status::DEVICE_NEEDS_RESET;
        if new & status::FEATURES_OK != 0 {
            let f = self.driver_features;
            let unoffered = f & !self.cfg.features;
            if unoffered != 0 {
                self.violation(format!(
                    "features {unoffered:#x} accepted that the device did not offer: the driver \
                     MUST NOT accept a feature which the device did not offer (virtio 1.2 §2.2.1)"
                ));
            }
            let ctrl_deps = feature::NET_CTRL_RX | feature::NET_MQ | feature::NET_RSS;
            if f & ctrl_deps != 0 && f & feature::NET_CTRL_VQ == 0 {
                self.violation(
                    "CTRL_RX, MQ or RSS accepted without VIRTIO_NET_F_CTRL_VQ (virtio 1.2 \
                     §5.1.3.1)"
                        .into(),
                );
            }
            if self.hostile == Some(Hostile::RefuseFeaturesOk) || f & feature::VERSION_1 == 0 {
                v &= !status::FEATURES_OK;
            } else {
                self.features = f;
                self.features_ok_seen = false;
            }
        }
        if new & status::DRIVER_OK != 0 && !self.features_ok_seen {
            self.violation(
                "DRIVER_OK set without reading device_status back after FEATURES_OK: the driver \
                 MUST re-read it to ensure FEATURES_OK is still set (virtio 1.2 §3.1.1 step 6)"
                    .into(),
            );
        }
        self.status = v;
    }

    /// The network device configuration (§5.1.4): (start, width, value)
    /// of the field at `o`.
    fn devcfg_field(&self, o: u32) -> Option<(u32, u32, u32)> {
        let c = &self.cfg;
        Some(match o {
            0..=5 => (o, 1, u32::from(c.mac[o as usize])),
            6 | 7 => (6, 2, u32::from(c.link_up)),
            8 | 9 => (8, 2, u32::from(c.queue_pairs)),
            10 | 11 => (10, 2, u32::from(c.mtu)),
            12..=15 => (12, 4, u32::MAX),
            16 => (16, 1, 0xff),
            17 => (17, 1, u32::from(RSS_MAX_KEY)),
            18 | 19 => (18, 2, u32::from(RSS_MAX_TABLE)),
            20..=23 => (20, 4, HASH_TYPES),
            _ => return None,
        })
    }

    fn devcfg_read(&mut self, o: u32, width: u32) -> u32 {
        let f = self.devcfg_field(o);
        if !self.check_width(
            "network device configuration",
            o,
            width,
            f.map(|(s, w, _)| (s, w)),
        ) {
            return !0;
        }
        f.map_or(!0, |(_, _, v)| v)
    }

    // ---- configuration space ---------------------------------------------

    /// The 256-byte PCI configuration space: IDs, the capability list with
    /// the four virtio structures (§4.1.4) in [`BAR`].
    fn config_space(&self) -> [u8; 256] {
        let mut c = [0u8; 256];
        c[0..2].copy_from_slice(&0x1af4u16.to_le_bytes());
        c[2..4].copy_from_slice(&0x1041u16.to_le_bytes());
        c[0x06] = 1 << 4; // capability list
        c[0x34] = 0x40;
        let common_off = if self.hostile == Some(Hostile::CapabilityBeyondBar) {
            BAR_SIZE - 0x10
        } else {
            COMMON
        };
        let devcfg_at = if self.hostile == Some(Hostile::CapabilityAtConfigEnd) {
            0xfc
        } else {
            0x74
        };
        // (position, next, cfg_type, offset, length, cap_len)
        let caps: [(usize, usize, u8, u32, u32, u8); 4] = [
            (0x40, 0x50, 1, common_off, COMMON_LEN, 16),
            (
                0x50,
                0x64,
                2,
                NOTIFY,
                NOTIFY_MULT * self.queues.len() as u32,
                20,
            ),
            (0x64, devcfg_at, 3, ISR, 4, 16),
            (devcfg_at, 0, 4, DEVCFG, DEVCFG_LEN, 16),
        ];
        for (p, next, ty, off, len, cap_len) in caps {
            let body = [
                0x09, // vendor-specific
                next as u8, cap_len, ty, BAR, 0, 0, 0,
            ];
            for (i, b) in body.iter().enumerate() {
                if let Some(x) = c.get_mut(p + i) {
                    *x = *b;
                }
            }
            for (i, b) in off
                .to_le_bytes()
                .iter()
                .chain(len.to_le_bytes().iter())
                .enumerate()
            {
                if let Some(x) = c.get_mut(p + 8 + i) {
                    *x = *b;
                }
            }
            if cap_len == 20 {
                c[p + 16..p + 20].copy_from_slice(&NOTIFY_MULT.to_le_bytes());
            }
        }
        c
    }

    // ---- notifications and the queues' work -------------------------------

    fn notify(&mut self, o: u32, width: u32, val: u32) {
        let q = o / NOTIFY_MULT;
        if width != 2 || o % NOTIFY_MULT != 0 || q as usize >= self.queues.len() {
            self.violation(format!(
                "a {width}-byte notification at notify offset {o:#x}: the driver writes the \
                 16-bit queue index at queue_notify_off × notify_off_multiplier (virtio 1.2 \
                 §4.1.4.4)"
            ));
            return;
        }
        if val != q {
            self.violation(format!(
                "notification value {val} at queue {q}'s address: without \
                 VIRTIO_F_NOTIFICATION_DATA it is the queue index (virtio 1.2 §4.1.5.2)"
            ));
        }
        if self.status & status::DRIVER_OK == 0 {
            self.violation(format!(
                "queue {q} notified before DRIVER_OK: the driver MUST NOT send any buffer \
                 available notification before setting DRIVER_OK (virtio 1.2 §3.1.1)"
            ));
            return;
        }
        if !self.queues[q as usize].enabled {
            self.violation(format!("queue {q} notified while not enabled"));
            return;
        }
        if !self.dma_ok() {
            return;
        }
        let q = q as u16;
        if Some(q) == self.ctrl_index() {
            self.control();
        } else if q % 2 == 1 {
            self.transmit(q);
        }
        // An RX notification only says buffers were added: taken as frames come.
    }

    fn hdr_len(&self) -> usize {
        if self.has(feature::NET_HASH_REPORT) {
            20
        } else {
            12
        }
    }

    /// The MTU the driver must take (§5.1.4.2): the device's with
    /// VIRTIO_NET_F_MTU negotiated, else 1500.
    fn mtu(&self) -> u32 {
        if self.has(feature::NET_MTU) {
            u32::from(self.cfg.mtu)
        } else {
            1500
        }
    }

    /// Interrupt for queue `q` if the driver asked for one, on the queue's
    /// vector.
    fn interrupt(&mut self, q: u16, old_used: u16) {
        let vq = &self.queues[q as usize];
        if !vq.wants_interrupt(&self.iommu, self.has(feature::EVENT_IDX), old_used) {
            return;
        }
        self.isr |= 1;
        let v = vq.vector;
        if let Some(e) = self.msix.get(v as usize) {
            e.signal();
            self.fired[v as usize] += 1;
        }
    }

    fn transmit(&mut self, q: u16) {
        let event_idx = self.has(feature::EVENT_IDX);
        let hdr_len = self.hdr_len();
        let max_frame = 14 + self.mtu() as usize + 4;
        let old = self.queues[q as usize].used_idx;
        // In order: this notification's chains completed as one batch.
        let mut batch = Vec::new();
        loop {
            let chain = match self.queues[q as usize].take(&self.iommu) {
                Take::Empty => break,
                Take::Broken(why) => {
                    self.violation(format!("transmit queue {q}: {why}"));
                    break;
                }
                Take::Chain(c) => c,
            };
            if !chain.writable.is_empty() {
                self.violation(format!(
                    "transmit queue {q}'s chain {} has a device-writable buffer: a transmit \
                     chain is read-only to the device (virtio 1.2 §5.1.6.2)",
                    chain.head
                ));
            }
            let mut bytes = Vec::new();
            let mut fault = false;
            for &(a, l) in &chain.readable {
                let mut b = vec![0u8; l as usize];
                if !self.iommu.dma_read(a, &mut b) {
                    fault = true;
                    break;
                }
                bytes.extend_from_slice(&b);
            }
            if fault {
                self.violation(format!(
                    "transmit queue {q}'s chain {} names memory not mapped for the device",
                    chain.head
                ));
            } else if bytes.len() < hdr_len {
                self.violation(format!(
                    "transmit queue {q}'s chain {} holds {} bytes, less than the {hdr_len}-byte \
                     virtio_net_hdr (virtio 1.2 §5.1.6)",
                    chain.head,
                    bytes.len()
                ));
            } else {
                let (hdr, frame) = bytes.split_at(hdr_len);
                let mut frame = frame.to_vec();
                let frames = if hdr[1] != 0 {
                    match gso_segments(hdr, &frame, self.features) {
                        Ok(segs) => segs,
                        Err(why) => {
                            self.violation(format!("transmit header: {why}"));
                            Vec::new()
                        }
                    }
                } else {
                    self.transmit_header(hdr, &mut frame);
                    vec![frame]
                };
                for frame in frames {
                    if frame.len() > max_frame {
                        self.violation(format!(
                            "a {}-byte frame sent with MTU {}: the driver MUST NOT transmit \
                             packets longer than the MTU (virtio 1.2 §5.1.4.1)",
                            frame.len(),
                            self.mtu()
                        ));
                    }
                    self.wire.push(frame);
                }
            }
            self.scribble(&chain.readable, q, &chain);
            let vq = &mut self.queues[q as usize];
            if vq.in_order {
                batch.push(chain);
            } else {
                vq.put_used(&self.iommu, u32::from(chain.head), 0, &chain, false);
            }
        }
        self.queues[q as usize].put_used_batch(&self.iommu, &batch, 0);
        if event_idx {
            self.queues[q as usize].publish_avail_event(&self.iommu);
        }
        self.interrupt(q, old);
    }

    /// Check a transmitted frame's header (virtio 1.2 §5.1.6.2.1) and do
    /// what it asks: with `VIRTIO_NET_HDR_F_NEEDS_CSUM` (only with
    /// `VIRTIO_NET_F_CSUM`), the checksum from `csum_start` to the end,
    /// complemented, into `csum_start + csum_offset`, which must lie inside
    /// the frame. No other flag; `gso_type` NONE (a segmented frame goes
    /// to [`gso_segments`] instead).
    fn transmit_header(&mut self, hdr: &[u8], frame: &mut [u8]) {
        let flags = hdr[0];
        let le = |i: usize| u16::from_le_bytes([hdr[i], hdr[i + 1]]) as usize;
        let (start, offset) = (le(6), le(8));
        if flags & !NEEDS_CSUM != 0 {
            self.violation(format!(
                "transmit header flags {flags:#x}: the driver MUST NOT set DATA_VALID or \
                 RSC_INFO, and no other flag is defined (virtio 1.2 §5.1.6.2.1)"
            ));
        }
        if flags & NEEDS_CSUM == 0 {
            return;
        }
        if !self.has(feature::NET_CSUM) {
            self.violation(format!(
                "transmit header flags {flags:#x}: without VIRTIO_NET_F_CSUM the driver MUST set \
                 flags to zero (virtio 1.2 §5.1.6.2.1)"
            ));
            return;
        }
        if start + offset + 2 > frame.len() {
            self.violation(format!(
                "transmit header NEEDS_CSUM with csum_start {start} and csum_offset {offset} in \
                 a {}-byte frame: the checksum field must lie inside the packet (virtio 1.2 \
                 §5.1.6.2)",
                frame.len()
            ));
            return;
        }
        let mut sum = !fold(sum16(&frame[start..]));
        if sum == 0 && offset == 6 {
            sum = 0xffff;
        }
        frame[start + offset..start + offset + 2].copy_from_slice(&sum.to_be_bytes());
    }

    /// The checksum part of a received frame's header (flags, csum_start,
    /// csum_offset), per [`RxCsum`], with `VIRTIO_NET_F_GUEST_CSUM`; the
    /// frame as the device hands it over (partial for `NeedsCsum`).
    fn receive_header(&self, frame: &mut [u8]) -> (u8, u16, u16) {
        if !self.has(feature::NET_GUEST_CSUM) {
            return (0, 0, 0);
        }
        if self.hostile == Some(Hostile::CsumStartPastFrame) {
            return (NEEDS_CSUM, frame.len().saturating_sub(1) as u16, 0);
        }
        let Some((start, offset, pseudo, end)) = l4_of(frame) else {
            return (0, 0, 0);
        };
        match self.cfg.rx_csum {
            RxCsum::DataValid => {
                if fold(sum16(&frame[start..end]) + pseudo) == 0xffff {
                    (DATA_VALID, 0, 0)
                } else {
                    (0, 0, 0)
                }
            }
            RxCsum::NeedsCsum => {
                let at = start + offset;
                frame[at..at + 2].copy_from_slice(&fold(pseudo).to_be_bytes());
                (NEEDS_CSUM, start as u16, offset as u16)
            }
            RxCsum::Nothing => (0, 0, 0),
        }
    }

    /// Hostile `RewriteRings`: the avail slot just read gets 0x7fff, and
    /// the last buffer of the chain a garbage address and length.
    fn scribble(&mut self, bufs: &[(u64, u32)], q: u16, chain: &Chain) {
        if self.hostile != Some(Hostile::RewriteRings) {
            return;
        }
        let head = chain.head;
        let vq = &self.queues[q as usize];
        let mut garbage = [0u8; 12];
        garbage[..8].copy_from_slice(&0xdead_beef_0000u64.to_le_bytes());
        garbage[8..].copy_from_slice(&u32::MAX.to_le_bytes());
        if vq.packed {
            // No avail ring: the chain's last descriptor's address and
            // length (not its id or flags).
            self.iommu
                .dma_write(vq.desc + 16 * u64::from(chain.last_pos), &garbage);
            return;
        }
        let slot = u64::from(vq.last_avail.wrapping_sub(1) % vq.size);
        self.iommu.store_u16(vq.avail + 4 + 2 * slot, 0x7fff);
        if bufs.is_empty() {
            return;
        }
        // The chain's last descriptor: walk from the head by `next`.
        let mut id = head;
        for _ in 1..bufs.len() {
            let mut d = [0u8; 16];
            if !self.iommu.dma_read(vq.desc + 16 * u64::from(id), &mut d) {
                return;
            }
            id = u16::from_le_bytes([d[14], d[15]]);
        }
        self.iommu
            .dma_write(vq.desc + 16 * u64::from(id % vq.size), &garbage);
    }

    fn control(&mut self) {
        let Some(q) = self.ctrl_index() else { return };
        let old = self.queues[q as usize].used_idx;
        loop {
            let chain = match self.queues[q as usize].take(&self.iommu) {
                Take::Empty => break,
                Take::Broken(why) => {
                    self.violation(format!("control queue: {why}"));
                    break;
                }
                Take::Chain(c) => c,
            };
            let mut cmd = Vec::new();
            for &(a, l) in &chain.readable {
                let mut b = vec![0u8; l as usize];
                if self.iommu.dma_read(a, &mut b) {
                    cmd.extend_from_slice(&b);
                }
            }
            let ack = if cmd.len() < 2 {
                self.violation("a control command shorter than its class and command".into());
                ACK_ERR
            } else {
                self.command(cmd[0], cmd[1], &cmd[2..])
            };
            match chain.writable.first() {
                Some(&(a, l)) if l >= 1 => {
                    self.iommu.dma_write(a, &[ack]);
                }
                _ => self.violation(
                    "a control command without a device-writable ack byte (virtio 1.2 §5.1.6.5)"
                        .into(),
                ),
            }
            let vq = &mut self.queues[q as usize];
            vq.put_used(&self.iommu, u32::from(chain.head), 1, &chain, false);
        }
        if self.has(feature::EVENT_IDX) {
            self.queues[q as usize].publish_avail_event(&self.iommu);
        }
        self.interrupt(q, old);
    }

    fn command(&mut self, class: u8, cmd: u8, data: &[u8]) -> u8 {
        match (class, cmd) {
            (CLASS_RX, 0 | 1) => {
                if !self.has(feature::NET_CTRL_RX) {
                    self.violation(
                        "a VIRTIO_NET_CTRL_RX command without VIRTIO_NET_F_CTRL_RX negotiated \
                         (virtio 1.2 §5.1.6.5.1)"
                            .into(),
                    );
                    return ACK_ERR;
                }
                let [on] = data else { return ACK_ERR };
                if cmd == 0 {
                    self.promisc = *on != 0;
                } else {
                    self.allmulti = *on != 0;
                }
                ACK_OK
            }
            (CLASS_MQ, 0) => {
                if !self.has(feature::NET_MQ) {
                    self.violation(
                        "VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET without VIRTIO_NET_F_MQ negotiated \
                         (virtio 1.2 §5.1.6.5.6.1)"
                            .into(),
                    );
                    return ACK_ERR;
                }
                match data {
                    [lo, hi] => {
                        let n = u16::from_le_bytes([*lo, *hi]);
                        if n == 0 || n > self.cfg.queue_pairs {
                            return ACK_ERR;
                        }
                        self.pairs_in_use = n;
                        ACK_OK
                    }
                    _ => ACK_ERR,
                }
            }
            (CLASS_MQ, 1) => self.rss_config(data),
            _ => ACK_ERR,
        }
    }

    /// `VIRTIO_NET_CTRL_MQ_RSS_CONFIG` (§5.1.6.5.7): checked as
    /// §5.1.6.5.7.1 asks of the driver.
    fn rss_config(&mut self, d: &[u8]) -> u8 {
        if !self.has(feature::NET_RSS) {
            self.violation(
                "VIRTIO_NET_CTRL_MQ_RSS_CONFIG without VIRTIO_NET_F_RSS negotiated (virtio 1.2 \
                 §5.1.6.5.7.1)"
                    .into(),
            );
            return ACK_ERR;
        }
        let u16_at = |i: usize| d.get(i..i + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let Some(hash_types) = d
            .get(0..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return ACK_ERR;
        };
        let (Some(mask), Some(unclassified)) = (u16_at(4), u16_at(6)) else {
            return ACK_ERR;
        };
        let len = usize::from(mask) + 1;
        let table: Option<Vec<u16>> = (0..len).map(|i| u16_at(8 + 2 * i)).collect();
        let at = 8 + 2 * len;
        let (Some(table), Some(max_tx_vq), Some(&key_len)) = (table, u16_at(at), d.get(at + 2))
        else {
            return ACK_ERR;
        };
        let Some(key) = d.get(at + 3..at + 3 + usize::from(key_len)) else {
            return ACK_ERR;
        };
        let mut problems = Vec::new();
        if !len.is_power_of_two() || len > usize::from(RSS_MAX_TABLE) {
            problems.push(format!(
                "indirection_table_mask + 1 = {len}, not a power of 2 up to \
                 rss_max_indirection_table_length {RSS_MAX_TABLE}"
            ));
        }
        if key_len > RSS_MAX_KEY {
            problems.push(format!(
                "hash_key_length {key_len} above rss_max_key_size {RSS_MAX_KEY}"
            ));
        }
        if hash_types & !HASH_TYPES != 0 {
            problems.push(format!(
                "hash_types {hash_types:#x} outside supported_hash_types {HASH_TYPES:#x}"
            ));
        }
        let enabled = |rxq: u16| {
            self.queues
                .get(2 * usize::from(rxq))
                .is_some_and(|v| v.enabled)
        };
        if let Some(bad) = table.iter().chain([&unclassified]).find(|&&q| !enabled(q)) {
            problems.push(format!(
                "queue {bad} in the table is not an enabled receive queue"
            ));
        }
        if max_tx_vq == 0 || max_tx_vq > self.cfg.queue_pairs {
            problems.push(format!(
                "max_tx_vq {max_tx_vq} outside 1..={}",
                self.cfg.queue_pairs
            ));
        }
        if !problems.is_empty() {
            self.violation(format!(
                "an RSS configuration the driver MUST NOT send (virtio 1.2 §5.1.6.5.7.1): {}",
                problems.join("; ")
            ));
            return ACK_ERR;
        }
        let mut k = [0u8; KEY_LEN];
        let n = key.len().min(KEY_LEN);
        k[..n].copy_from_slice(&key[..n]);
        self.pairs_in_use = max_tx_vq;
        self.rss = Some(RssState {
            hash_types,
            table,
            unclassified,
            key: key.to_vec(),
            toeplitz: Arc::new(Toeplitz::new(&k)),
        });
        ACK_OK
    }

    /// Queue pair, hash and hash report type for `frame` (§5.1.6.4.3).
    fn steer(&self, frame: &[u8]) -> (u16, u32, u16) {
        let Some(rss) = &self.rss else {
            return (0, 0, 0);
        };
        use crate::wire::field;
        let mut mrqc = 0;
        for (bit, f) in [
            (1, field::IPV4),
            (2, field::TCP_IPV4),
            (4, field::UDP_IPV4),
            (8, field::IPV6),
            (16, field::TCP_IPV6),
            (32, field::UDP_IPV6),
        ] {
            if rss.hash_types & bit != 0 {
                mrqc |= f;
            }
        }
        match crate::wire::rss_flow(frame, mrqc) {
            Some((ty, flow)) => {
                let hash = rss.toeplitz.hash_flow(&flow);
                let q = rss.table[hash as usize & (rss.table.len() - 1)];
                // pkt_info RSS type → VIRTIO_NET_HASH_REPORT_* (§5.1.6.4.3.4).
                let report = match ty {
                    1 => 2, // TCPv4
                    2 => 1, // IPv4
                    3 => 5, // TCPv6
                    5 => 4, // IPv6
                    7 => 3, // UDPv4
                    8 => 6, // UDPv6
                    _ => 0,
                };
                (q, hash, report)
            }
            None => (rss.unclassified, 0, 0),
        }
    }

    fn passes_filter(&self, frame: &[u8]) -> bool {
        if self.promisc {
            return true;
        }
        let Some(dst) = frame.get(0..6) else {
            return false;
        };
        dst == self.cfg.mac || dst == [0xff; 6] || (dst[0] & 1 == 1 && self.allmulti)
    }

    fn receive(&mut self, frame: &[u8]) -> VirtioRx {
        if !self.dma_ok() {
            return VirtioRx::NotReady;
        }
        if !self.passes_filter(frame) {
            return VirtioRx::Filtered;
        }
        let (pair, hash, report) = self.steer(frame);
        let q = 2 * pair;
        let hdr_len = self.hdr_len();
        let needed = hdr_len as u64 + 14 + u64::from(self.mtu());
        let event_idx = self.has(feature::EVENT_IDX);
        let Some(vq) = self.queues.get_mut(q as usize).filter(|v| v.enabled) else {
            return VirtioRx::QueueOff(pair);
        };
        let chain = match vq.take(&self.iommu) {
            Take::Empty => return VirtioRx::NoBuffer(pair),
            Take::Broken(why) => {
                self.violation(format!("receive queue {q}: {why}"));
                return VirtioRx::Fault(pair);
            }
            Take::Chain(c) => c,
        };
        if !chain.readable.is_empty() {
            self.violation(format!(
                "receive queue {q}'s chain {} has a device-readable buffer: receive buffers are \
                 device-writable (virtio 1.2 §5.1.6.3)",
                chain.head
            ));
        }
        let room = chain.writable_len();
        if room < needed {
            self.violation(format!(
                "receive queue {q}'s chain {} holds {room} bytes, less than the {hdr_len}-byte \
                 header and a frame of the MTU {} ({needed} bytes): with VIRTIO_NET_F_MTU the \
                 driver MUST supply receive buffers that take a packet of the MTU, and \
                 without MRG_RXBUF each buffer takes a whole frame (virtio 1.2 §5.1.4.2, \
                 §5.1.6.3.1)",
                chain.head,
                self.mtu()
            ));
        }
        if (hdr_len + frame.len()) as u64 > room {
            self.queues[q as usize].untake(&chain);
            return VirtioRx::TooLong(pair);
        }
        let mut frame = frame.to_vec();
        let (flags, csum_start, csum_offset) = self.receive_header(&mut frame);
        let mut bytes = vec![0u8; hdr_len];
        bytes[0] = flags;
        bytes[6..8].copy_from_slice(&csum_start.to_le_bytes());
        bytes[8..10].copy_from_slice(&csum_offset.to_le_bytes());
        bytes[10..12].copy_from_slice(&1u16.to_le_bytes()); // num_buffers
        if hdr_len == 20 {
            bytes[12..16].copy_from_slice(&hash.to_le_bytes());
            bytes[16..18].copy_from_slice(&report.to_le_bytes());
        }
        bytes.extend_from_slice(&frame);
        let mut at = 0;
        for &(a, l) in &chain.writable {
            if at == bytes.len() {
                break;
            }
            let n = (l as usize).min(bytes.len() - at);
            if !self.iommu.dma_write(a, &bytes[at..at + n]) {
                self.violation(format!(
                    "receive queue {q}'s chain {} names memory not mapped for the device",
                    chain.head
                ));
                self.queues[q as usize].untake(&chain);
                return VirtioRx::Fault(pair);
            }
            at += n;
        }
        self.scribble(&chain.writable, q, &chain);
        let (mut id, mut len) = (u32::from(chain.head), bytes.len() as u32);
        match self.hostile {
            Some(Hostile::UsedIdOutOfRange) => id = u32::from(self.queues[q as usize].size) + 7,
            Some(Hostile::UsedLenTooLong) => len = room as u32 + 65536,
            Some(Hostile::UsedIdTwice) => {
                if let Some(prev) = self.last_used_id {
                    id = prev;
                }
            }
            _ => {}
        }
        self.last_used_id = Some(id);
        let vq = &mut self.queues[q as usize];
        let old = vq.used_idx;
        let wrong_wrap = self.hostile == Some(Hostile::UsedWrongWrap);
        vq.put_used(&self.iommu, id, len, &chain, wrong_wrap);
        if event_idx {
            vq.publish_avail_event(&self.iommu);
        }
        self.interrupt(q, old);
        self.received += 1;
        if let Some(Hostile::NeedsResetAfter(n)) = self.hostile {
            if self.received >= n {
                self.status |= status::DEVICE_NEEDS_RESET;
                self.isr |= 2;
            }
        }
        VirtioRx::Delivered { queue: pair, hash }
    }
}

impl RegisterModel for State {
    fn read(&mut self, off: u32) -> u32 {
        State::read(self, off, 4)
    }
    fn write(&mut self, off: u32, val: u32) {
        State::write(self, off, 4, val)
    }
    fn mappings(&mut self) -> &mut Mappings {
        &mut self.iommu
    }
    /// A mapping that holds an enabled virtqueue goes while the device can
    /// still reach it (not reset, bus mastering on): a violation.
    fn unmapping(&mut self, iova: u64, len: usize) {
        if !self.bus_master || self.status == 0 {
            return;
        }
        let end = iova.saturating_add(len as u64);
        let live = self
            .queues
            .iter()
            .enumerate()
            .find(|(_, q)| q.enabled && q.parts().iter().any(|&(a, _)| a >= iova && a < end));
        if let Some((q, _)) = live {
            self.violation(format!(
                "the mapping at {iova:#x} holding enabled virtqueue {q} was removed while the \
                 device could still use it (no reset, bus mastering on)"
            ));
        }
    }
    fn log(&mut self, _e: crate::Event) {}
    fn bus_master_off(&mut self) {
        self.bus_master = false;
    }
    fn msix(&mut self, events: Option<Vec<Arc<IrqEvent>>>) -> std::result::Result<(), MsixError> {
        match events {
            Some(e) if e.len() > usize::from(self.cfg.msix_vectors) => {
                Err(MsixError::TooFewVectors {
                    available: u32::from(self.cfg.msix_vectors),
                    needed: e.len() as u16,
                })
            }
            Some(e) => {
                self.fired = vec![0; e.len()];
                self.msix = e;
                Ok(())
            }
            None => {
                self.msix.clear();
                self.fired.clear();
                Ok(())
            }
        }
    }
}

/// The model's BAR 4, with accesses of every width (virtio's fields are 8,
/// 16 and 32 bits wide, and the width is part of the rule).
struct VirtioBar(Arc<Mutex<State>>);

impl Regs for VirtioBar {
    fn read32(&self, off: u32) -> u32 {
        lock(&self.0).read(off, 4)
    }
    fn write32(&self, off: u32, val: u32) {
        lock(&self.0).write(off, 4, val)
    }
    fn read16(&self, off: u32) -> u16 {
        lock(&self.0).read(off, 2) as u16
    }
    fn write16(&self, off: u32, val: u16) {
        lock(&self.0).write(off, 2, u32::from(val))
    }
    fn read8(&self, off: u32) -> u8 {
        lock(&self.0).read(off, 1) as u8
    }
    fn write8(&self, off: u32, val: u8) {
        lock(&self.0).write(off, 1, u32::from(val))
    }
}

impl DeviceBar for VirtioBar {
    fn regs(&self) -> &dyn Regs {
        self
    }
    fn size(&self) -> u64 {
        u64::from(BAR_SIZE)
    }
    fn doorbell(self: Arc<Self>, reg: u32) -> TailDoorbell {
        TailDoorbell::new(self, reg)
    }
}

/// What `Device` runs over: configuration space, BAR 4, the model's IOMMU
/// and MSI-X.
struct VirtioIo {
    state: Arc<Mutex<State>>,
    bar: Arc<VirtioBar>,
    dma: Arc<ModelDma<ModelHost>>,
}

impl DeviceIo for VirtioIo {
    /// The first (and only) memory BAR the model maps: BAR 4.
    fn bar0(&self) -> Arc<dyn DeviceBar> {
        self.bar.clone()
    }
    fn bar(&self, index: u8) -> Option<Arc<dyn DeviceBar>> {
        (index == BAR).then(|| self.bar.clone() as Arc<dyn DeviceBar>)
    }
    fn dma(&self) -> Arc<dyn DmaMapper> {
        self.dma.clone()
    }
    fn page_size(&self) -> PageSize {
        PageSize::Emulated2M
    }
    fn disable_bus_master(&self) {
        lock(&self.state).bus_master = false;
    }
    fn config_read(&self, off: u32, buf: &mut [u8]) -> bool {
        let c = lock(&self.state).config_space();
        let o = off as usize;
        match o.checked_add(buf.len()).and_then(|e| c.get(o..e)) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
    fn interrupts(&self) -> Option<&dyn pollnic::lowlevel::io::Interrupts> {
        Some(self)
    }
}

impl pollnic::lowlevel::io::Interrupts for VirtioIo {
    fn enable_msix(&self, vectors: u16) -> std::result::Result<Vec<Arc<IrqEvent>>, MsixError> {
        let shared: SharedModel = self.state.clone();
        crate::enable_msix(&shared, vectors)
    }
    fn disable_msix(&self) {
        let _ = lock(&self.state).msix(None);
    }
}

/// A software virtio-net port. Cheap to clone; every clone is the same
/// device.
#[derive(Clone)]
pub struct SoftVirtioNet {
    state: Arc<Mutex<State>>,
}

impl Default for SoftVirtioNet {
    fn default() -> Self {
        Self::new(VirtioModelConfig::default())
    }
}

impl SoftVirtioNet {
    /// A device just after power-on (status 0).
    pub fn new(cfg: VirtioModelConfig) -> Self {
        SoftVirtioNet {
            state: Arc::new(Mutex::new(State::new(cfg))),
        }
    }

    /// Play the hostile device from now on (`None`: an honest one again).
    pub fn set_hostile(&self, h: Option<Hostile>) {
        lock(&self.state).hostile = h;
    }

    /// The identity `Device` sees: a modern virtio-net device (1af4:1041)
    /// at [`MODEL_ADDR`].
    pub fn ident(&self) -> DeviceIdent {
        DeviceIdent::new(
            MODEL_ADDR.parse().expect("valid address"),
            0x1af4,
            0x1041,
            "Virtio network device (software model)",
        )
    }

    /// What `Device` runs over.
    pub fn io(&self) -> Box<dyn DeviceIo> {
        let shared: SharedModel = self.state.clone();
        Box::new(VirtioIo {
            state: Arc::clone(&self.state),
            bar: Arc::new(VirtioBar(Arc::clone(&self.state))),
            dma: Arc::new(ModelDma(ModelHost(shared))),
        })
    }

    /// Open a [`Device`] on this model.
    ///
    /// # Errors
    /// Those of [`Device::open_on`].
    pub fn open(&self, cfg: &DeviceConfig) -> Result<Device> {
        Device::open_on(self.io(), self.ident(), cfg)
    }

    /// BAR 4 as the driver sees it (for tests that play a driver).
    pub fn regs(&self) -> Arc<dyn DeviceBar> {
        Arc::new(VirtioBar(Arc::clone(&self.state)))
    }

    /// A frame arrives from the wire.
    pub fn receive(&self, frame: &[u8]) -> VirtioRx {
        lock(&self.state).receive(frame)
    }

    /// Frames the driver sent since the last call (without the header).
    pub fn take_tx_frames(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.state).wire)
    }

    /// Violations recorded so far, each once, with its clause.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// `device_status` as stored.
    pub fn status(&self) -> u8 {
        lock(&self.state).status
    }

    /// The features accepted at FEATURES_OK.
    pub fn features(&self) -> u64 {
        lock(&self.state).features
    }

    /// Promiscuous and all-multicast modes (`VIRTIO_NET_CTRL_RX`).
    pub fn rx_modes(&self) -> (bool, bool) {
        let s = lock(&self.state);
        (s.promisc, s.allmulti)
    }

    /// The RSS configuration the driver sent, if any.
    pub fn rss(&self) -> Option<RssState> {
        lock(&self.state).rss.clone()
    }

    /// Queue `q`'s MSI-X vector as the device holds it.
    pub fn queue_vector(&self, q: u16) -> Option<u16> {
        lock(&self.state).queues.get(q as usize).map(|v| v.vector)
    }

    /// Queue `q`'s size as the driver set it, and whether it is enabled.
    pub fn queue(&self, q: u16) -> Option<(u16, bool)> {
        lock(&self.state)
            .queues
            .get(q as usize)
            .map(|v| (v.size, v.enabled))
    }

    /// Whether virtqueue `q` is enabled and the driver asked for an
    /// interrupt at its next used entry (`used_event`, or no
    /// `VIRTQ_AVAIL_F_NO_INTERRUPT`).
    pub fn armed(&self, q: u16) -> bool {
        let s = lock(&self.state);
        s.queues
            .get(q as usize)
            .is_some_and(|v| v.enabled && v.armed(&s.iommu, s.has(feature::EVENT_IDX)))
    }

    /// How often each MSI-X vector fired since MSI-X was enabled.
    pub fn msix_fired(&self) -> Vec<u64> {
        lock(&self.state).fired.clone()
    }

    /// Live DMA mappings (IOVA, length).
    pub fn mappings(&self) -> Vec<(u64, usize)> {
        lock(&self.state)
            .iommu
            .list
            .iter()
            .map(|m| (m.iova, m.len))
            .collect()
    }
}

#[cfg(test)]
mod tests;
