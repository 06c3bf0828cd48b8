//! Checksum, VLAN and TCP segmentation offloads: what the RX write-back
//! says about a frame's checksums and VLAN tag, and the TX context a frame's
//! offload request needs (the advanced context descriptor's fields, from the
//! frame's own headers).
//!
//! Sources: 82576 datasheet §7.1.5 (RX write-back status: VP, UDPCS, L4I,
//! IPCS; errors L4E, IPE), §7.2.2.3.x (advanced TX context descriptor:
//! VLAN, MACLEN, IPLEN, TUCMD, L4LEN, MSS, IDX; data descriptor POPTS
//! IXSM/TXSM, DCMD VLE); 82599 datasheet §7.1.6.2 (the same status bits; its
//! errors are TCPE at bit 30 and IPE at bit 31) and §7.2.3.2.3 (the same
//! context layout, plus the data descriptor's CC bit); for TSO 82576
//! §7.2.4 and 82599 §7.2.4 (TCP segmentation: MSS and L4LEN in the context,
//! DCMD.TSE and PAYLEN, the TCP payload, in the data descriptor); Linux
//! `igb_rx_checksum`, `igb_tx_csum`, `igb_tso`, `ixgbe_rx_checksum`,
//! `ixgbe_tx_csum`, `ixgbe_tso`.
//!
//! # RX status word
//!
//! The RX ring keeps, per received frame, one `u32` built from the
//! write-back by [`rx_status_word`] (the same layout on both families):
//! bit 0 L4 checksum error, bit 1 IPv4 checksum error, bit 3 VP (tag
//! stripped), bit 4 UDPCS, bit 5 L4CS (TCP or UDP checksum checked), bit 6
//! IPCS, bits 16..32 the stripped tag (TCI). 0 means nothing checked and
//! no tag, which is what a ring with offload status off keeps.

use crate::desc::{RXD_STAT_VP, TXD_DCMD_DEXT, TXD_DTYP_CTXT};
use core::fmt;

/// RX write-back status: UDP checksum checked (`UDPCS`, bit 4; igb and 82599).
pub const RXD_STAT_UDPCS: u32 = 1 << 4;
/// RX write-back status: L4 (TCP or UDP) checksum checked (`L4I`/`TCPCS` on
/// igb, `L4CS` on the 82599; bit 5).
pub const RXD_STAT_L4CS: u32 = 1 << 5;
/// RX write-back status: IPv4 header checksum checked (`IPCS`, bit 6).
pub const RXD_STAT_IPCS: u32 = 1 << 6;

/// Status bits [`rx_status_word`] keeps where they are.
const KEEP_STATUS: u32 = RXD_STAT_VP | RXD_STAT_UDPCS | RXD_STAT_L4CS | RXD_STAT_IPCS;
/// Status word: L4 checksum error.
const WORD_L4E: u32 = 1 << 0;
/// Status word: IPv4 checksum error.
const WORD_IPE: u32 = 1 << 1;

/// Bit of the write-back's `status_error` holding the L4 checksum error, on
/// igb (`L4E`, bit 29; IPE is the next one, bit 30). 82576 datasheet §7.1.5.
pub const IGB_L4E_BIT: u32 = 29;
/// Bit of the write-back's `status_error` holding the L4 checksum error, on
/// the 82599 (`TCPE`, bit 30; IPE is the next one, bit 31). Linux
/// `IXGBE_RXDADV_ERR_TCPE`.
pub const IXGBE_L4E_BIT: u32 = 30;

/// The RX status word (see the module documentation) of a write-back whose
/// `status_error` is `status` and whose VLAN field is `vlan`, on a family
/// whose L4 checksum error is bit `l4e_bit` (and the IPv4 one the next bit):
/// [`IGB_L4E_BIT`] or [`IXGBE_L4E_BIT`]. The RX ring computes the same in
/// its burst loops (`pollnic_rings::rx`), four at a time on the vector path.
#[inline(always)]
pub const fn rx_status_word(status: u32, vlan: u16, l4e_bit: u32) -> u32 {
    (status & KEEP_STATUS) | ((status >> l4e_bit) & (WORD_L4E | WORD_IPE)) | ((vlan as u32) << 16)
}

/// What the NIC found for one layer's checksum of a received frame.
/// Non-exhaustive: match with a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChecksumStatus {
    /// Not checked: offload off, not that protocol (e.g. no IPv4 header
    /// checksum in IPv6; ICMP has no L4 checksum the NIC checks), or the
    /// NIC could not parse the headers. DPDK `RTE_MBUF_F_RX_*_CKSUM_UNKNOWN`.
    NotChecked,
    /// Checked and correct (`RTE_MBUF_F_RX_*_CKSUM_GOOD`).
    Good,
    /// Checked and wrong (`RTE_MBUF_F_RX_*_CKSUM_BAD`).
    Bad,
}

/// The RX checksum status of one frame, per layer, as the NIC wrote it back
/// (82576 §7.1.5: IPCS/IPE for the IPv4 header, L4I/UDPCS/L4E for TCP or
/// UDP). Non-exhaustive: read the fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxChecksum {
    /// The IPv4 header checksum.
    pub ip: ChecksumStatus,
    /// The TCP or UDP checksum (over the pseudo-header and the payload).
    pub l4: ChecksumStatus,
}

impl RxChecksum {
    /// Decode an RX status word ([`rx_status_word`]). Follows Linux
    /// `igb_rx_checksum`: a layer is checked when its status bit is set
    /// (IPCS; L4CS or UDPCS), bad when its error bit is set too.
    #[inline]
    pub const fn from_status_word(w: u32) -> RxChecksum {
        const fn one(checked: bool, bad: bool) -> ChecksumStatus {
            if !checked {
                ChecksumStatus::NotChecked
            } else if bad {
                ChecksumStatus::Bad
            } else {
                ChecksumStatus::Good
            }
        }
        RxChecksum {
            ip: one(w & RXD_STAT_IPCS != 0, w & WORD_IPE != 0),
            l4: one(w & (RXD_STAT_L4CS | RXD_STAT_UDPCS) != 0, w & WORD_L4E != 0),
        }
    }
    /// Neither layer was found bad (each is good or not checked).
    #[inline]
    pub const fn none_bad(&self) -> bool {
        !matches!(self.ip, ChecksumStatus::Bad) && !matches!(self.l4, ChecksumStatus::Bad)
    }
}

/// The VLAN tag (TCI: priority, DEI, VLAN ID) the NIC stripped from a
/// received frame, from an RX status word; `None` when it stripped none
/// (VP clear).
#[inline]
pub const fn rx_vlan(w: u32) -> Option<u16> {
    if w & RXD_STAT_VP != 0 {
        Some((w >> 16) as u16)
    } else {
        None
    }
}

// ---- TX ----------------------------------------------------------------------

/// TX data descriptor DCMD: VLAN insert from the context's VLAN field (VLE).
pub const TXD_DCMD_VLE: u32 = 1 << 30;
/// TX data descriptor DCMD: TCP segmentation (TSE).
pub const TXD_DCMD_TSE: u32 = 1 << 31;
/// TX data descriptor `olinfo_status`: insert the IPv4 header checksum (POPTS.IXSM).
pub const TXD_POPTS_IXSM: u32 = 1 << 8;
/// TX data descriptor `olinfo_status`: insert the TCP/UDP checksum (POPTS.TXSM).
pub const TXD_POPTS_TXSM: u32 = 1 << 9;
/// TX data descriptor `olinfo_status`: check context (CC, 82599 only; bit 7,
/// `IXGBE_ADVTXD_CC`): the descriptor uses the context of its IDX.
pub const TXD_OLINFO_CC: u32 = 1 << 7;
/// TX data descriptor `olinfo_status` / context `mss_l4len_idx`: context
/// index shift (IDX, bits 6:4 and 6:4).
pub const TXD_IDX_SHIFT: u32 = 4;
/// Context `vlan_macip_lens`: MACLEN shift (bits 15:9, 7 bits).
pub const CTX_MACLEN_SHIFT: u32 = 9;
/// Context `vlan_macip_lens`: VLAN tag shift (bits 31:16).
pub const CTX_VLAN_SHIFT: u32 = 16;
/// Context `type_tucmd_mlhl`: TUCMD.IPV4 (the packet is IPv4; bit 10).
pub const CTX_TUCMD_IPV4: u32 = 1 << 10;
/// Context `type_tucmd_mlhl`: TUCMD.L4T = TCP (bits 12:11 = 01b; 00b is UDP).
pub const CTX_TUCMD_L4T_TCP: u32 = 1 << 11;
/// Context `type_tucmd_mlhl`: TUCMD.L4T mask (bits 12:11).
pub const CTX_TUCMD_L4T_MASK: u32 = 3 << 11;
/// Context `mss_l4len_idx`: L4LEN shift (bits 15:8).
pub const CTX_L4LEN_SHIFT: u32 = 8;
/// Context `mss_l4len_idx`: MSS shift (bits 31:16).
pub const CTX_MSS_SHIFT: u32 = 16;

/// Largest MSS pollnic asks for, in bytes of TCP payload per segment: DPDK's
/// hardware limit for igb (`IGB_TSO_MAX_MSS` in `igb_rxtx.c`, a 9 KiB jumbo
/// frame's payload), applied to both families. The context's MSS field is
/// 16 bits wide.
pub const TSO_MAX_MSS: u16 = 9216;
/// Largest TCP payload of one TSO frame, in bytes: the data descriptor's
/// PAYLEN field is 18 bits wide (82576 §7.2.2.3, 82599 §7.2.3.2.4).
pub const TSO_MAX_PAYLEN: usize = (1 << 18) - 1;
/// Most bytes one data descriptor of a TSO frame carries: the TX ring cuts
/// a frame longer than this into several data descriptors over the same
/// buffer. Linux ixgbe's `IXGBE_MAX_DATA_PER_TXD` (igb's is 32 KiB; the
/// smaller serves both).
pub const TSO_DATA_PER_DESC: usize = 16 * 1024;

/// Largest MACLEN (7 bits), IPLEN (9 bits) and L4LEN (8 bits) the context
/// descriptor holds, in bytes.
pub const MAX_MACLEN: usize = 0x7f;
/// See [`MAX_MACLEN`].
pub const MAX_IPLEN: usize = 0x1ff;
/// See [`MAX_MACLEN`].
pub const MAX_L4LEN: usize = 0xff;

/// EtherType of an 802.1Q tag (the TPID; VET's default on both families).
pub const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const PROTO_TCP: u8 = 6;
/// TCP flag CWR (RFC 3168 §6.1): congestion window reduced.
const TCP_CWR: u8 = 0x80;
const PROTO_UDP: u8 = 17;

/// What a frame asks the NIC to do on transmit, per frame (DPDK's
/// `RTE_MBUF_F_TX_IP_CKSUM`, `RTE_MBUF_F_TX_TCP_CKSUM`/`UDP_CKSUM` and
/// `RTE_MBUF_F_TX_VLAN`). The header lengths the context descriptor needs
/// are read from the frame itself (Ethernet, an optional 802.1Q tag, IPv4
/// with options or IPv6 without extension headers, TCP or UDP), so a
/// request cannot name wrong ones. Build with the `with_*` methods from
/// [`TxOffload::NONE`]. Non-exhaustive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TxOffload {
    /// Insert the IPv4 header checksum (POPTS.IXSM).
    pub ipv4_checksum: bool,
    /// Insert the TCP or UDP checksum, over IPv4 or IPv6 (POPTS.TXSM): the
    /// NIC sums the pseudo-header and the payload into the L4 checksum
    /// field, whatever the field held.
    pub l4_checksum: bool,
    /// Insert this 802.1Q tag (TCI) after the source MAC (DCMD.VLE; the
    /// TPID is VET's, 0x8100).
    pub vlan: Option<u16>,
    /// TCP segmentation (DCMD.TSE) with this MSS: the frame's TCP payload,
    /// which may be far larger than the MTU, is cut by the NIC into
    /// segments of at most this many bytes, each with its own copy of the
    /// headers (see [`TxOffload::with_tso`]).
    pub tso: Option<u16>,
}

impl TxOffload {
    /// No offload: the frame goes as it is.
    pub const NONE: TxOffload = TxOffload {
        ipv4_checksum: false,
        l4_checksum: false,
        vlan: None,
        tso: None,
    };
    /// Ask for the IPv4 header checksum.
    #[must_use]
    pub const fn with_ipv4_checksum(mut self) -> Self {
        self.ipv4_checksum = true;
        self
    }
    /// Ask for the TCP or UDP checksum.
    #[must_use]
    pub const fn with_l4_checksum(mut self) -> Self {
        self.l4_checksum = true;
        self
    }
    /// Ask for an 802.1Q tag with this TCI (priority in bits 15:13, DEI
    /// bit 12, VLAN ID bits 11:0).
    #[must_use]
    pub const fn with_vlan(mut self, tci: u16) -> Self {
        self.vlan = Some(tci);
        self
    }
    /// Ask for TCP segmentation with a maximum segment size of `mss` bytes
    /// of TCP payload (1..=[`TSO_MAX_MSS`]; checked per frame, a refusal
    /// otherwise). The frame is one TCP/IPv4 or TCP/IPv6 packet whose
    /// payload (1..=[`TSO_MAX_PAYLEN`] bytes, everything after the TCP
    /// header) the NIC sends as `ceil(payload / mss)` segments (82576
    /// §7.2.4, Linux `igb_tso`): each carries the headers with the IPv4
    /// total length or IPv6 payload length, the IPv4 identification
    /// (the frame's, plus one per segment), the TCP sequence number (plus
    /// the bytes before it) and both checksums written by the NIC; FIN and
    /// PSH stay on the last segment only. The IP length field of the frame
    /// is ignored (a 64 KiB payload does not fit it): pollnic zeroes it and
    /// the IPv4 checksum, and seeds the TCP checksum with the
    /// pseudo-header's sum without the length, as Linux does. Implies the
    /// TCP checksum and, for IPv4, the IPv4 header checksum.
    ///
    /// On virtio-net (`VIRTIO_NET_F_HOST_TSO4`/`HOST_TSO6`, virtio 1.2
    /// §5.1.6.2) the device reads the IP length instead, so pollnic writes
    /// the frame's own there, which must fit 16 bits (IPv4: 65,535 bytes
    /// of datagram), computes the IPv4 checksum and seeds the TCP one with
    /// the length ([`virtio_tso_prepare`]); a frame with TCP CWR set is
    /// refused there (no `VIRTIO_NET_F_HOST_ECN`).
    #[must_use]
    pub const fn with_tso(mut self, mss: u16) -> Self {
        self.tso = Some(mss);
        self
    }
    /// Whether anything is asked.
    pub const fn is_none(&self) -> bool {
        !self.ipv4_checksum && !self.l4_checksum && self.vlan.is_none() && self.tso.is_none()
    }
    /// Whether this request can be done for `frame` (the frame's Ethernet
    /// bytes, no FCS): the frame's headers checked against what the request
    /// needs ([`tx_plan`]), without sending. It does not know the port: on
    /// a port that does no transmit offloads (virtio-net) it says `Ok`
    /// where the TX burst refuses the frame with
    /// [`TxRefusal::NoTxOffloads`]. The port's answer, the TX burst's, is
    /// pollnic's `Capabilities::check_tx` (`Device::capabilities()`).
    ///
    /// # Errors
    /// The [`TxRefusal`] for a frame the request cannot be done for.
    pub fn check(&self, frame: &[u8]) -> Result<(), TxRefusal> {
        tx_plan(frame, self).map(|_| ())
    }
}

/// Why a frame's [`TxOffload`] request was refused: the NIC cannot do it on
/// this frame, so the frame is not sent (and is counted, never sent with a
/// wrong checksum). Non-exhaustive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxRefusal {
    /// The frame ends before the headers the request needs do.
    TooShort {
        /// Frame length in bytes.
        len: usize,
        /// Bytes the headers need.
        needed: usize,
    },
    /// A checksum was asked of a frame that is neither IPv4 nor IPv6
    /// (after at most one 802.1Q tag): this EtherType.
    NotIp {
        /// The EtherType found.
        ethertype: u16,
    },
    /// An IPv4 header checksum was asked of an IPv6 frame.
    NotIpv4,
    /// An L4 checksum was asked of a protocol the NIC does not checksum
    /// (not TCP or UDP; an IPv6 extension header, a tunnel): this IP
    /// protocol / next header number.
    UnsupportedL4 {
        /// The IP protocol number found.
        protocol: u8,
    },
    /// An L4 checksum was asked of an IPv4 fragment (the NIC sums only the
    /// bytes it sends, not the whole datagram).
    Fragment,
    /// A stacked (QinQ, 0x88a8, or a second 802.1Q) tag: the context's
    /// MACLEN would have to cover it, which pollnic does not do.
    StackedVlan,
    /// A header length does not fit its context descriptor field.
    HeaderTooLong {
        /// "MACLEN" (7 bits), "IPLEN" (9 bits) or "L4LEN" (8 bits).
        field: &'static str,
        /// The length in bytes.
        len: usize,
        /// The field's largest value.
        max: usize,
    },
    /// A bad IPv4 header length (IHL under 5) or TCP data offset (under 5).
    BadHeader,
    /// The device offers no transmit offloads at all (a virtio-net port
    /// whose device does not offer `VIRTIO_NET_F_CSUM`).
    NoTxOffloads,
    /// The port offers TCP and UDP checksum insertion but not `what` (a
    /// virtio-net port with `VIRTIO_NET_F_CSUM`: no IPv4 header checksum,
    /// VLAN tag insertion or TCP segmentation through the
    /// `virtio_net_hdr`, virtio 1.2 §5.1.6.2).
    NotOffered {
        /// "IPv4 header checksum insertion", "VLAN tag insertion" or "TCP
        /// segmentation".
        what: &'static str,
    },
    /// [`checksum_in_software`] was asked for an offload that changes the
    /// frame's length (a VLAN tag, TCP segmentation), which it does not do.
    NotInSoftware {
        /// "VLAN tag insertion" or "TCP segmentation".
        what: &'static str,
    },
    /// Bytes after the IP datagram (Ethernet padding) that are not zero:
    /// the NIC sums the L4 checksum to the end of the frame, so they would
    /// make it wrong.
    TrailingBytes,
    /// TSO asked with an MSS outside 1..=`max` ([`TSO_MAX_MSS`]).
    MssOutOfRange {
        /// The MSS asked, in bytes.
        mss: u16,
        /// The largest MSS pollnic sends with.
        max: u16,
    },
    /// TSO asked of a frame whose TCP payload is empty or longer than the
    /// data descriptor's PAYLEN field holds ([`TSO_MAX_PAYLEN`]).
    TsoPayload {
        /// The TCP payload in bytes (the frame after its TCP header).
        len: usize,
        /// The largest payload one TSO frame may carry.
        max: usize,
    },
    /// TSO asked of a frame that is not TCP: this IP protocol number.
    TsoNotTcp {
        /// The IP protocol number found.
        protocol: u8,
    },
    /// The frame needs more descriptors (a context and its data
    /// descriptors) than the TX ring holds, so it could never be queued.
    RingTooSmall {
        /// Descriptors the frame needs.
        needed: usize,
        /// Descriptors the ring can hold at once (its size − 1).
        ring: usize,
    },
}

impl fmt::Display for TxRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TxRefusal::TooShort { len, needed } => write!(
                f,
                "TX offload refused: the frame has {len} bytes but its headers need {needed}: \
                 send it whole, or without the offload"
            ),
            TxRefusal::NotIp { ethertype } => write!(
                f,
                "TX checksum offload refused: EtherType {ethertype:#06x} is neither IPv4 nor IPv6"
            ),
            TxRefusal::NotIpv4 => write!(
                f,
                "TX offload refused: an IPv4 header checksum was asked of an IPv6 frame: \
                 drop with_ipv4_checksum() for IPv6"
            ),
            TxRefusal::UnsupportedL4 { protocol } => write!(
                f,
                "TX L4 checksum offload refused: IP protocol {protocol} is not TCP (6) or UDP \
                 (17) (IPv6 extension headers and tunnels are not offloaded): compute it in software"
            ),
            TxRefusal::Fragment => write!(
                f,
                "TX L4 checksum offload refused: the frame is an IPv4 fragment: compute the \
                 checksum over the whole datagram in software"
            ),
            TxRefusal::StackedVlan => write!(
                f,
                "TX offload refused: stacked VLAN tags (QinQ) are not offloaded"
            ),
            TxRefusal::HeaderTooLong { field, len, max } => write!(
                f,
                "TX offload refused: {field} of {len} bytes does not fit the context \
                 descriptor (at most {max})"
            ),
            TxRefusal::NoTxOffloads => write!(
                f,
                "TX offload refused: this port's device offers no transmit offloads \
                 (virtio-net without VIRTIO_NET_F_CSUM): compute checksums and insert tags in \
                 software"
            ),
            TxRefusal::NotOffered { what } => write!(
                f,
                "TX offload refused: this port offers TCP/UDP checksum insertion but not {what} \
                 (virtio-net): ask with_l4_checksum() only, and do the rest in software"
            ),
            TxRefusal::NotInSoftware { what } => write!(
                f,
                "{what} is not done in software (it changes the frame's length): write the tag \
                 into the frame, or send segments of the MTU, before the checksums"
            ),
            TxRefusal::BadHeader => write!(
                f,
                "TX offload refused: IPv4 IHL or TCP data offset under 5 words"
            ),
            TxRefusal::TrailingBytes => write!(
                f,
                "TX L4 checksum offload refused: the frame has non-zero bytes after its IP \
                 datagram, which the NIC would sum: trim the frame to the datagram"
            ),
            TxRefusal::MssOutOfRange { mss, max } => write!(
                f,
                "TSO refused: MSS {mss} is outside 1..={max} bytes: ask with_tso() with an \
                 MSS the segments' MTU carries (1448 for TCP/IPv4 with timestamps at MTU 1500)"
            ),
            TxRefusal::TsoPayload { len, max } => write!(
                f,
                "TSO refused: a TCP payload of {len} bytes is outside 1..={max} (PAYLEN is \
                 18 bits): send a shorter frame, or an empty one without TSO"
            ),
            TxRefusal::TsoNotTcp { protocol } => write!(
                f,
                "TSO refused: IP protocol {protocol} is not TCP (6); the NIC segments TCP only"
            ),
            TxRefusal::RingTooSmall { needed, ring } => write!(
                f,
                "TSO refused: the frame needs {needed} TX descriptors but the ring holds \
                 {ring}: use a larger TX ring (DeviceConfig::with_tx_ring_size) or a shorter frame"
            ),
        }
    }
}

impl std::error::Error for TxRefusal {}

/// The three words of an advanced TX context descriptor (82576 §7.2.2.3.x,
/// 82599 §7.2.3.2.3), without IDX (the ring chooses the slot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxContext {
    /// `vlan_macip_lens`: VLAN (31:16), MACLEN (15:9), IPLEN (8:0).
    pub vlan_macip_lens: u32,
    /// `type_tucmd_mlhl`: DEXT, DTYP = context, TUCMD (IPV4, L4T).
    pub type_tucmd_mlhl: u32,
    /// `mss_l4len_idx`: MSS (31:16), L4LEN (15:8); IDX (6:4) added on write.
    pub mss_l4len: u32,
}

impl TxContext {
    /// Build one from its fields.
    ///
    /// # Errors
    /// [`TxRefusal::HeaderTooLong`] when `maclen`, `iplen` or `l4len` exceed
    /// their fields ([`MAX_MACLEN`], [`MAX_IPLEN`], [`MAX_L4LEN`]).
    pub fn new(
        vlan: u16,
        maclen: usize,
        iplen: usize,
        ipv4: bool,
        tcp: bool,
        l4len: usize,
    ) -> Result<TxContext, TxRefusal> {
        for (field, len, max) in [
            ("MACLEN", maclen, MAX_MACLEN),
            ("IPLEN", iplen, MAX_IPLEN),
            ("L4LEN", l4len, MAX_L4LEN),
        ] {
            if len > max {
                return Err(TxRefusal::HeaderTooLong { field, len, max });
            }
        }
        let mut tucmd = TXD_DCMD_DEXT | TXD_DTYP_CTXT;
        if ipv4 {
            tucmd |= CTX_TUCMD_IPV4;
        }
        if tcp {
            tucmd |= CTX_TUCMD_L4T_TCP;
        }
        Ok(TxContext {
            vlan_macip_lens: (vlan as u32) << CTX_VLAN_SHIFT
                | (maclen as u32) << CTX_MACLEN_SHIFT
                | iplen as u32,
            type_tucmd_mlhl: tucmd,
            mss_l4len: (l4len as u32) << CTX_L4LEN_SHIFT,
        })
    }
    /// The same context with MSS set (TSO; 82576 §7.2.2.3: bits 31:16 of
    /// `mss_l4len_idx`).
    ///
    /// # Errors
    /// [`TxRefusal::MssOutOfRange`] when `mss` is 0 or above [`TSO_MAX_MSS`].
    pub const fn with_mss(mut self, mss: u16) -> Result<TxContext, TxRefusal> {
        if mss == 0 || mss > TSO_MAX_MSS {
            return Err(TxRefusal::MssOutOfRange {
                mss,
                max: TSO_MAX_MSS,
            });
        }
        self.mss_l4len = (self.mss_l4len & 0xffff) | (mss as u32) << CTX_MSS_SHIFT;
        Ok(self)
    }
    /// The descriptor for context slot `idx` (0 or 1 on igb).
    pub const fn encode(&self, idx: u32) -> crate::desc::RawDesc {
        crate::desc::RawDesc {
            lo: self.vlan_macip_lens as u64,
            hi: self.type_tucmd_mlhl as u64
                | ((self.mss_l4len | (idx << TXD_IDX_SHIFT)) as u64) << 32,
        }
    }
    /// Decode a context descriptor (the software models read it so): the
    /// context and its IDX.
    pub const fn decode(d: crate::desc::RawDesc) -> (TxContext, u32) {
        let mss_l4len_idx = (d.hi >> 32) as u32;
        (
            TxContext {
                vlan_macip_lens: d.lo as u32,
                type_tucmd_mlhl: d.hi as u32,
                mss_l4len: mss_l4len_idx & !(7 << TXD_IDX_SHIFT),
            },
            (mss_l4len_idx >> TXD_IDX_SHIFT) & 7,
        )
    }
    /// VLAN tag field.
    pub const fn vlan(&self) -> u16 {
        (self.vlan_macip_lens >> CTX_VLAN_SHIFT) as u16
    }
    /// MACLEN in bytes.
    pub const fn maclen(&self) -> usize {
        ((self.vlan_macip_lens >> CTX_MACLEN_SHIFT) & 0x7f) as usize
    }
    /// IPLEN in bytes.
    pub const fn iplen(&self) -> usize {
        (self.vlan_macip_lens & 0x1ff) as usize
    }
    /// L4LEN in bytes.
    pub const fn l4len(&self) -> usize {
        ((self.mss_l4len >> CTX_L4LEN_SHIFT) & 0xff) as usize
    }
    /// MSS in bytes (TSO; 0 when not set).
    pub const fn mss(&self) -> u16 {
        (self.mss_l4len >> CTX_MSS_SHIFT) as u16
    }
    /// TUCMD.IPV4.
    pub const fn ipv4(&self) -> bool {
        self.type_tucmd_mlhl & CTX_TUCMD_IPV4 != 0
    }
    /// TUCMD.L4T is TCP (else UDP).
    pub const fn tcp(&self) -> bool {
        self.type_tucmd_mlhl & CTX_TUCMD_L4T_MASK == CTX_TUCMD_L4T_TCP
    }
}

/// What one frame's transmit needs: the context (when the request uses one)
/// and the data descriptor's extra bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPlan {
    /// What [`tx_prepare`] writes into the frame before it is queued.
    pub prep: TxPrep,
    /// The context descriptor the data descriptor refers to; `None` when
    /// nothing is asked.
    pub ctx: Option<TxContext>,
    /// DCMD bits to add (VLE).
    pub dcmd: u32,
    /// `olinfo_status` bits to add (IXSM, TXSM).
    pub popts: u32,
    /// With TSO (DCMD.TSE in `dcmd`): the TCP payload in bytes, the data
    /// descriptor's PAYLEN (the whole frame's length without TSO).
    pub tso_paylen: Option<u32>,
}

/// What the driver writes into a frame before the NIC offloads its
/// checksums, as DPDK's `rte_net_intel_cksum_prepare` does: the 82576 and
/// 82599 sum the IPv4 header as it is (so its checksum field must be 0) and
/// the L4 bytes from the L4 header to the end of the frame (so the L4
/// checksum field must hold the pseudo-header's sum). QEMU's igb computes
/// both itself and needs neither; silicon does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxPrep {
    /// Offset of the IPv4 header checksum to zero (IXSM), if any.
    pub ip_csum_at: Option<usize>,
    /// Offset of the L4 checksum field and the pseudo-header sum to put
    /// there, folded to 16 bits and not complemented (TXSM), if any. With
    /// TSO the sum leaves the length out (the NIC adds each segment's).
    pub l4_seed: Option<(usize, u16)>,
    /// Offset of the IPv4 total length or IPv6 payload length to zero
    /// (TSO: the NIC writes each segment's; Linux `igb_tso`), if any.
    pub ip_len_at: Option<usize>,
    /// The bytes the L4 checksum covers: from the L4 header to the IP
    /// datagram's end (a checksum without TSO), if any.
    pub l4_range: Option<(usize, usize)>,
}

/// Write `prep` into `frame` (the bytes [`tx_plan`] planned it for).
pub fn tx_prepare(frame: &mut [u8], prep: &TxPrep) {
    if let Some(at) = prep.ip_csum_at {
        frame[at..at + 2].copy_from_slice(&[0, 0]);
    }
    if let Some((at, seed)) = prep.l4_seed {
        frame[at..at + 2].copy_from_slice(&seed.to_be_bytes());
    }
    if let Some(at) = prep.ip_len_at {
        frame[at..at + 2].copy_from_slice(&[0, 0]);
    }
}

/// Insert in software the checksums `req` asks of the NIC, for a port that
/// does no transmit offloads (a virtio-net port: `Queue::offers_tx_offloads`
/// is false there): the IPv4 header checksum (RFC 791 §3.1) and the TCP or
/// UDP checksum over the pseudo-header and the segment (RFC 793 §3.1, RFC
/// 768, RFC 8200 §8.1; a UDP sum of 0 is sent as 0xffff). The frame is the
/// Ethernet frame without FCS, checked as the NIC would take it
/// ([`TxOffload::check`]): the same frames are refused for the same
/// reasons. Costs one pass over the IP header and one over the L4 segment,
/// about what Linux's `skb_checksum_help` does when a device lacks
/// `NETIF_F_HW_CSUM`.
///
/// # Errors
/// The frame's [`TxRefusal`] (nothing is written then), or
/// [`TxRefusal::NotInSoftware`] when `req` asks for a VLAN tag or TCP
/// segmentation, which change the frame's length.
pub fn checksum_in_software(frame: &mut [u8], req: &TxOffload) -> Result<(), TxRefusal> {
    if req.vlan.is_some() {
        return Err(TxRefusal::NotInSoftware {
            what: "VLAN tag insertion",
        });
    }
    if req.tso.is_some() {
        return Err(TxRefusal::NotInSoftware {
            what: "TCP segmentation",
        });
    }
    let plan = tx_plan(frame, req)?;
    // The IPv4 checksum field 0 and the L4 field the pseudo-header's sum:
    // what the NIC starts from too.
    tx_prepare(frame, &plan.prep);
    if let Some(at) = plan.prep.ip_csum_at {
        let start = at - 10;
        let ihl = (frame[start] & 0x0f) as usize * 4;
        let sum = !fold(ones_sum(&frame[start..start + ihl], 0));
        frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
    if let (Some((at, _)), Some((start, end))) = (plan.prep.l4_seed, plan.prep.l4_range) {
        let mut sum = !fold(ones_sum(&frame[start..end], 0));
        if sum == 0 && at - start == 6 {
            sum = 0xffff; // UDP: 0 means "no checksum"
        }
        frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
    Ok(())
}

/// Complete a partial checksum in place (Linux `CHECKSUM_PARTIAL`; virtio
/// 1.2 §5.1.6.2 and §5.1.6.4, `VIRTIO_NET_HDR_F_NEEDS_CSUM`): the ones'
/// complement sum of `frame[csum_start..]` (whose checksum field already
/// holds the pseudo-header's sum), complemented, stored big-endian at
/// `csum_start + csum_offset`. A result of 0 in a UDP field
/// (`csum_offset` 6) is stored as 0xffff (0 means "no checksum", RFC 768).
/// DPDK `virtio_rx_offload` does the same for a received packet. Offsets
/// are in bytes from the frame's start (the Ethernet header).
///
/// Returns false, and writes nothing, when the field does not lie inside
/// the frame (`csum_start + csum_offset + 2 > frame.len()`): a value a
/// device wrote is never trusted.
pub fn complete_partial_checksum(frame: &mut [u8], csum_start: usize, csum_offset: usize) -> bool {
    let Some(at) = csum_start.checked_add(csum_offset) else {
        return false;
    };
    if at.checked_add(2).is_none_or(|end| end > frame.len()) {
        return false;
    }
    let mut sum = !fold(ones_sum(&frame[csum_start..], 0));
    if sum == 0 && csum_offset == 6 {
        sum = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    true
}

/// One's complement sum of `bytes` as big-endian 16-bit words (an odd last
/// byte padded with 0) added to `acc`, not folded (RFC 1071).
pub fn ones_sum(bytes: &[u8], mut acc: u64) -> u64 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        acc += (*last as u64) << 8;
    }
    acc
}

/// `acc` folded to 16 bits (end-around carry), not complemented.
pub const fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The plan for sending `frame` with `req`: its header lengths read from the
/// frame (Ethernet with at most one 802.1Q tag; IPv4 with its IHL, IPv6's 40
/// bytes; TCP's data offset, UDP's 8), checked against what the NIC does
/// (Linux `igb_tx_csum`, DPDK `igbe_set_xmit_ctx`).
///
/// # Errors
/// A [`TxRefusal`] saying why the NIC cannot do it for this frame.
pub fn tx_plan(frame: &[u8], req: &TxOffload) -> Result<TxPlan, TxRefusal> {
    if req.is_none() {
        return Ok(TxPlan {
            prep: TxPrep::default(),
            ctx: None,
            dcmd: 0,
            popts: 0,
            tso_paylen: None,
        });
    }
    let short = |needed: usize| {
        if frame.len() < needed {
            Err(TxRefusal::TooShort {
                len: frame.len(),
                needed,
            })
        } else {
            Ok(())
        }
    };
    short(14)?;
    let be16 = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    let mut maclen = 14;
    let mut ethertype = be16(12);
    if ethertype == ETHERTYPE_VLAN {
        short(18)?;
        maclen = 18;
        ethertype = be16(16);
    }
    if ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
        return Err(TxRefusal::StackedVlan);
    }
    let vlan = req.vlan.unwrap_or(0);
    let dcmd = if req.vlan.is_some() { TXD_DCMD_VLE } else { 0 };
    if req.tso.is_some() {
        return tso_plan(frame, req, maclen, ethertype, vlan, dcmd);
    }
    if !req.ipv4_checksum && !req.l4_checksum {
        // VLAN insert only: MACLEN and IPLEN as Linux gives them for a
        // non-IP frame (the NIC uses neither without a checksum).
        let ctx = TxContext::new(vlan, maclen, 0, false, false, 0)?;
        return Ok(TxPlan {
            prep: TxPrep::default(),
            ctx: Some(ctx),
            dcmd,
            popts: 0,
            tso_paylen: None,
        });
    }
    // The IP datagram's end (from its own length field).
    let (ipv4, iplen, proto, end) = match ethertype {
        ETHERTYPE_IPV4 => {
            short(maclen + 20)?;
            let ihl = (frame[maclen] & 0x0f) as usize * 4;
            if ihl < 20 {
                return Err(TxRefusal::BadHeader);
            }
            short(maclen + ihl)?;
            let frag = be16(maclen + 6) & 0x3fff;
            if req.l4_checksum && frag != 0 {
                return Err(TxRefusal::Fragment);
            }
            let total = be16(maclen + 2) as usize;
            if total < ihl {
                return Err(TxRefusal::BadHeader);
            }
            (true, ihl, frame[maclen + 9], maclen + total)
        }
        ETHERTYPE_IPV6 => {
            if req.ipv4_checksum {
                return Err(TxRefusal::NotIpv4);
            }
            short(maclen + 40)?;
            (
                false,
                40,
                frame[maclen + 6],
                maclen + 40 + be16(maclen + 4) as usize,
            )
        }
        other => return Err(TxRefusal::NotIp { ethertype: other }),
    };
    short(end)?;
    let mut popts = 0;
    let mut prep = TxPrep::default();
    if req.ipv4_checksum {
        popts |= TXD_POPTS_IXSM;
        prep.ip_csum_at = Some(maclen + 10);
    }
    let (tcp, l4len) = if req.l4_checksum {
        let l4 = maclen + iplen;
        match proto {
            PROTO_TCP => {
                short(l4 + 20)?;
                let doff = (frame[l4 + 12] >> 4) as usize * 4;
                if doff < 20 {
                    return Err(TxRefusal::BadHeader);
                }
                short(l4 + doff)?;
                popts |= TXD_POPTS_TXSM;
                (true, doff)
            }
            PROTO_UDP => {
                short(l4 + 8)?;
                popts |= TXD_POPTS_TXSM;
                (false, 8)
            }
            other => return Err(TxRefusal::UnsupportedL4 { protocol: other }),
        }
    } else {
        (false, 0)
    };
    if req.l4_checksum {
        if frame[end..].iter().any(|&b| b != 0) {
            return Err(TxRefusal::TrailingBytes);
        }
        // The pseudo-header: addresses, protocol, L4 length (RFC 768/793,
        // RFC 8200 §8.1).
        let l4 = maclen + iplen;
        let addrs = if ipv4 {
            &frame[maclen + 12..maclen + 20]
        } else {
            &frame[maclen + 8..maclen + 40]
        };
        let sum = ones_sum(addrs, proto as u64 + (end - l4) as u64);
        let at = l4 + if tcp { 16 } else { 6 };
        prep.l4_seed = Some((at, fold(sum)));
        prep.l4_range = Some((l4, end));
    }
    let ctx = TxContext::new(vlan, maclen, iplen, ipv4, tcp, l4len)?;
    Ok(TxPlan {
        prep,
        ctx: Some(ctx),
        dcmd,
        popts,
        tso_paylen: None,
    })
}

/// [`tx_plan`] for a TSO request: the frame is Ethernet (`maclen` bytes,
/// EtherType `ethertype`), IPv4 or IPv6, TCP, then the payload to its end
/// (the IP length field is not read: a 64 KiB payload does not fit it).
/// As Linux `igb_tso`/`ixgbe_tso`: TUCMD.L4T = TCP (and IPV4), MSS and
/// L4LEN in the context, DCMD.TSE, POPTS.TXSM (and IXSM for IPv4), PAYLEN
/// the TCP payload; the IP length and IPv4 checksum zeroed, the TCP
/// checksum seeded with the pseudo-header's sum without the length.
fn tso_plan(
    frame: &[u8],
    req: &TxOffload,
    maclen: usize,
    ethertype: u16,
    vlan: u16,
    dcmd: u32,
) -> Result<TxPlan, TxRefusal> {
    let mss = req.tso.unwrap_or(0);
    if mss == 0 || mss > TSO_MAX_MSS {
        return Err(TxRefusal::MssOutOfRange {
            mss,
            max: TSO_MAX_MSS,
        });
    }
    let short = |needed: usize| {
        if frame.len() < needed {
            Err(TxRefusal::TooShort {
                len: frame.len(),
                needed,
            })
        } else {
            Ok(())
        }
    };
    let be16 = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    let (ipv4, iplen, proto) = match ethertype {
        ETHERTYPE_IPV4 => {
            short(maclen + 20)?;
            let ihl = (frame[maclen] & 0x0f) as usize * 4;
            if ihl < 20 {
                return Err(TxRefusal::BadHeader);
            }
            short(maclen + ihl)?;
            if be16(maclen + 6) & 0x3fff != 0 {
                return Err(TxRefusal::Fragment);
            }
            (true, ihl, frame[maclen + 9])
        }
        ETHERTYPE_IPV6 => {
            if req.ipv4_checksum {
                return Err(TxRefusal::NotIpv4);
            }
            short(maclen + 40)?;
            (false, 40, frame[maclen + 6])
        }
        other => return Err(TxRefusal::NotIp { ethertype: other }),
    };
    if proto != PROTO_TCP {
        return Err(TxRefusal::TsoNotTcp { protocol: proto });
    }
    let l4 = maclen + iplen;
    short(l4 + 20)?;
    let doff = (frame[l4 + 12] >> 4) as usize * 4;
    if doff < 20 {
        return Err(TxRefusal::BadHeader);
    }
    short(l4 + doff)?;
    let paylen = frame.len() - (l4 + doff);
    if paylen == 0 || paylen > TSO_MAX_PAYLEN {
        return Err(TxRefusal::TsoPayload {
            len: paylen,
            max: TSO_MAX_PAYLEN,
        });
    }
    let ctx = TxContext::new(vlan, maclen, iplen, ipv4, true, doff)?.with_mss(mss)?;
    let addrs = if ipv4 {
        &frame[maclen + 12..maclen + 20]
    } else {
        &frame[maclen + 8..maclen + 40]
    };
    let prep = TxPrep {
        ip_csum_at: ipv4.then_some(maclen + 10),
        l4_seed: Some((l4 + 16, fold(ones_sum(addrs, PROTO_TCP as u64)))),
        ip_len_at: Some(maclen + if ipv4 { 2 } else { 4 }),
        l4_range: None,
    };
    Ok(TxPlan {
        prep,
        ctx: Some(ctx),
        dcmd: dcmd | TXD_DCMD_TSE,
        popts: TXD_POPTS_TXSM | if ipv4 { TXD_POPTS_IXSM } else { 0 },
        tso_paylen: Some(paylen as u32),
    })
}

/// The `virtio_net_hdr` fields of one segmented frame (virtio 1.2
/// §5.1.6.2), from [`virtio_tso_prepare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtioGso {
    /// TCP over IPv6 (`VIRTIO_NET_HDR_GSO_TCPV6`, needs
    /// `VIRTIO_NET_F_HOST_TSO6`), else over IPv4 (`..._TCPV4`, `HOST_TSO4`).
    pub ipv6: bool,
    /// `hdr_len`: bytes from the frame's start to its TCP payload.
    pub hdr_len: u16,
    /// `gso_size`: the MSS, in bytes of TCP payload per segment.
    pub gso_size: u16,
    /// `csum_start`: the TCP header's offset in the frame.
    pub csum_start: u16,
    /// `csum_offset`: the TCP checksum field's offset from `csum_start` (16).
    pub csum_offset: u16,
}

/// The most bytes an IPv4 total length or an IPv6 payload length holds: a
/// virtio-net TSO frame must fit it (the device reads the packet's own IP
/// length, unlike an Intel NIC, which takes PAYLEN from the descriptor).
pub const VIRTIO_TSO_MAX_IP_LEN: usize = u16::MAX as usize;

/// Prepare `frame` (Ethernet, at most one 802.1Q tag, TCP over IPv4 or
/// IPv6, then the payload to its end) for TCP segmentation by a virtio-net
/// device with an MSS of `mss` bytes into segments of at most `mtu` bytes
/// of IP datagram, and give its header fields. The
/// frame is checked as [`tx_plan`] checks a TSO request; then the IP
/// length field gets the frame's own (IPv4 total length, IPv6 payload
/// length: the device's segmentation reads it), the IPv4 header checksum is
/// computed, and the TCP checksum is seeded with the pseudo-header's sum
/// *with* the TCP length, not complemented (§5.1.6.2: "the packet checksum
/// ... set to the TCP/UDP pseudo header"; Linux `tcp_gso_segment` adjusts
/// each segment's from it, and DPDK's `virtio_tso_fix_cksum` adds the
/// length an Intel-style seed leaves out).
///
/// # Errors
/// [`tx_plan`]'s refusals for a TSO request; [`TxRefusal::MssOutOfRange`]
/// when the IP and TCP headers plus `mss` exceed `mtu` (a device MTU is a
/// MUST, §5.1.4.1; its `max` is the largest MSS that fits);
/// [`TxRefusal::TsoPayload`]
/// when the IP length would exceed [`VIRTIO_TSO_MAX_IP_LEN`] (its `max` is
/// the largest payload that fits); [`TxRefusal::NotOffered`] for a segment
/// with TCP CWR set, which needs `VIRTIO_NET_F_HOST_ECN` (§5.1.6.2: the
/// driver SHOULD NOT send it otherwise; pollnic does not negotiate ECN).
pub fn virtio_tso_prepare(frame: &mut [u8], mss: u16, mtu: usize) -> Result<VirtioGso, TxRefusal> {
    let plan = tx_plan(frame, &TxOffload::NONE.with_tso(mss))?;
    let ctx = plan.ctx.ok_or(TxRefusal::BadHeader)?;
    let (l2, iplen, l4len, ipv4) = (ctx.maclen(), ctx.iplen(), ctx.l4len(), ctx.ipv4());
    let l4 = l2 + iplen;
    let hdr = l4 + l4len;
    if iplen + l4len + mss as usize > mtu {
        return Err(TxRefusal::MssOutOfRange {
            mss,
            max: mtu.saturating_sub(iplen + l4len).min(TSO_MAX_MSS as usize) as u16,
        });
    }
    // IPv4's total length counts its header; IPv6's payload length not.
    let (ip_len, counted) = if ipv4 {
        (frame.len() - l2, iplen + l4len)
    } else {
        (frame.len() - l2 - 40, l4len)
    };
    if ip_len > VIRTIO_TSO_MAX_IP_LEN {
        return Err(TxRefusal::TsoPayload {
            len: frame.len() - hdr,
            max: VIRTIO_TSO_MAX_IP_LEN - counted,
        });
    }
    if frame[l4 + 13] & TCP_CWR != 0 {
        return Err(TxRefusal::NotOffered {
            what: "TCP segmentation of a segment with CWR set (VIRTIO_NET_F_HOST_ECN)",
        });
    }
    let len_at = l2 + if ipv4 { 2 } else { 4 };
    frame[len_at..len_at + 2].copy_from_slice(&(ip_len as u16).to_be_bytes());
    let addrs = if ipv4 {
        frame[l2 + 10..l2 + 12].copy_from_slice(&[0, 0]);
        let c = !fold(ones_sum(&frame[l2..l4], 0));
        frame[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
        l2 + 12..l2 + 20
    } else {
        l2 + 8..l2 + 40
    };
    let seed = fold(ones_sum(
        &frame[addrs],
        PROTO_TCP as u64 + (frame.len() - l4) as u64,
    ));
    frame[l4 + 16..l4 + 18].copy_from_slice(&seed.to_be_bytes());
    Ok(VirtioGso {
        ipv6: !ipv4,
        hdr_len: hdr as u16,
        gso_size: mss,
        csum_start: l4 as u16,
        csum_offset: 16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + payload];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((20 + 8 + payload) as u16).to_be_bytes());
        f[14 + 9] = PROTO_UDP;
        f
    }

    #[test]
    fn bits_are_where_linux_puts_them() {
        // Linux e1000_82575.h / ixgbe_type.h.
        assert_eq!(TXD_DCMD_VLE, 0x4000_0000); // E1000_ADVTXD_DCMD_VLE
        assert_eq!(TXD_DCMD_TSE, 0x8000_0000); // E1000_ADVTXD_DCMD_TSE
        assert_eq!(TXD_POPTS_IXSM, 0x100); // E1000_ADVTXD_POPTS_IXSM
        assert_eq!(TXD_POPTS_TXSM, 0x200); // E1000_ADVTXD_POPTS_TXSM
        assert_eq!(TXD_OLINFO_CC, 0x80); // IXGBE_ADVTXD_CC
        assert_eq!(CTX_TUCMD_IPV4, 0x400); // E1000_ADVTXD_TUCMD_IPV4
        assert_eq!(CTX_TUCMD_L4T_TCP, 0x800); // E1000_ADVTXD_TUCMD_L4T_TCP
        assert_eq!(TXD_DTYP_CTXT, 0x0020_0000); // E1000_ADVTXD_DTYP_CTXT
        assert_eq!((CTX_MACLEN_SHIFT, CTX_VLAN_SHIFT), (9, 16));
        assert_eq!((CTX_L4LEN_SHIFT, CTX_MSS_SHIFT), (8, 16));
        assert_eq!(
            (RXD_STAT_UDPCS, RXD_STAT_L4CS, RXD_STAT_IPCS),
            (0x10, 0x20, 0x40)
        );
    }

    #[test]
    fn status_word_reads_the_same_on_both_families() {
        use crate::desc::{RXD_ERR_IPE, RXD_ERR_L4E, RXD_STAT_DD, RXD_STAT_EOP};
        use crate::ixgbe::bits::{RXDADV_ERR_IPE, RXDADV_ERR_TCPE};
        let base = RXD_STAT_DD | RXD_STAT_EOP | RXD_STAT_IPCS | RXD_STAT_L4CS;
        let igb = rx_status_word(base | RXD_ERR_L4E, 0, IGB_L4E_BIT);
        let ixgbe = rx_status_word(base | RXDADV_ERR_TCPE, 0, IXGBE_L4E_BIT);
        assert_eq!(igb, ixgbe);
        let c = RxChecksum::from_status_word(igb);
        assert_eq!((c.ip, c.l4), (ChecksumStatus::Good, ChecksumStatus::Bad));
        let c = RxChecksum::from_status_word(rx_status_word(base | RXD_ERR_IPE, 0, IGB_L4E_BIT));
        assert_eq!((c.ip, c.l4), (ChecksumStatus::Bad, ChecksumStatus::Good));
        let c =
            RxChecksum::from_status_word(rx_status_word(base | RXDADV_ERR_IPE, 0, IXGBE_L4E_BIT));
        assert_eq!((c.ip, c.l4), (ChecksumStatus::Bad, ChecksumStatus::Good));
        let none = RxChecksum::from_status_word(0);
        assert_eq!(
            (none.ip, none.l4),
            (ChecksumStatus::NotChecked, ChecksumStatus::NotChecked)
        );
        let w = rx_status_word(
            RXD_STAT_DD | RXD_STAT_EOP | RXD_STAT_VP,
            0x2064,
            IGB_L4E_BIT,
        );
        assert_eq!(rx_vlan(w), Some(0x2064));
        assert_eq!(
            rx_vlan(rx_status_word(RXD_STAT_DD, 0x2064, IGB_L4E_BIT)),
            None
        );
    }

    #[test]
    fn plan_reads_lengths_from_the_frame() {
        let f = udp4(10);
        let p = tx_plan(&f, &TxOffload::NONE.with_ipv4_checksum().with_l4_checksum()).unwrap();
        let c = p.ctx.unwrap();
        assert_eq!(
            (c.maclen(), c.iplen(), c.l4len(), c.ipv4(), c.tcp()),
            (14, 20, 8, true, false)
        );
        assert_eq!(p.popts, TXD_POPTS_IXSM | TXD_POPTS_TXSM);
        assert_eq!(p.dcmd, 0);
        let (d, idx) = TxContext::decode(c.encode(1));
        assert_eq!((d, idx), (c, 1));
        let p = tx_plan(&f, &TxOffload::NONE.with_vlan(0x0123)).unwrap();
        assert_eq!(
            (p.ctx.unwrap().vlan(), p.dcmd, p.popts),
            (0x0123, TXD_DCMD_VLE, 0)
        );
        assert_eq!(tx_plan(&f, &TxOffload::NONE).unwrap().ctx, None);
    }

    #[test]
    fn plan_refuses_what_the_nic_cannot_do() {
        let full = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
        let f = udp4(0);
        assert_eq!(
            tx_plan(&f[..40], &full),
            Err(TxRefusal::TooShort {
                len: 40,
                needed: 42
            })
        );
        let mut icmp = udp4(8);
        icmp[14 + 9] = 1;
        assert_eq!(
            tx_plan(&icmp, &full),
            Err(TxRefusal::UnsupportedL4 { protocol: 1 })
        );
        let mut arp = udp4(8);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(
            tx_plan(&arp, &full),
            Err(TxRefusal::NotIp { ethertype: 0x0806 })
        );
        let mut frag = udp4(8);
        frag[14 + 6] = 0x20; // MF
        assert_eq!(tx_plan(&frag, &full), Err(TxRefusal::Fragment));
        let mut v6 = vec![0u8; 14 + 40 + 8];
        v6[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        v6[14 + 5] = 8; // payload length
        v6[14 + 6] = PROTO_UDP;
        assert_eq!(tx_plan(&v6, &full), Err(TxRefusal::NotIpv4));
        assert!(tx_plan(&v6, &TxOffload::NONE.with_l4_checksum()).is_ok());
        let mut bad_ihl = udp4(8);
        bad_ihl[14] = 0x44;
        assert_eq!(tx_plan(&bad_ihl, &full), Err(TxRefusal::BadHeader));
        assert_eq!(
            TxContext::new(0, 128, 20, true, false, 8),
            Err(TxRefusal::HeaderTooLong {
                field: "MACLEN",
                len: 128,
                max: 127
            })
        );
        assert!(matches!(
            TxContext::new(0, 14, 512, true, false, 8),
            Err(TxRefusal::HeaderTooLong { field: "IPLEN", .. })
        ));
        assert!(matches!(
            TxContext::new(0, 14, 20, true, true, 256),
            Err(TxRefusal::HeaderTooLong { field: "L4LEN", .. })
        ));
    }

    /// A TCP/IPv4 frame with `payload` bytes after a 20-byte TCP header.
    fn tcp4(payload: usize) -> Vec<u8> {
        let mut f = udp4(payload + 12);
        f[14 + 9] = PROTO_TCP;
        f[14 + 20 + 12] = 5 << 4;
        f
    }

    #[test]
    fn tso_plan_sets_mss_l4len_tse_and_paylen_and_prepares_as_linux() {
        let mut f = tcp4(5000);
        f[14 + 12..14 + 20].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        let p = tx_plan(&f, &TxOffload::NONE.with_tso(1448)).unwrap();
        let c = p.ctx.unwrap();
        assert_eq!(
            (c.maclen(), c.iplen(), c.l4len(), c.mss(), c.ipv4(), c.tcp()),
            (14, 20, 20, 1448, true, true)
        );
        assert_eq!(p.dcmd, TXD_DCMD_TSE);
        assert_eq!(p.popts, TXD_POPTS_IXSM | TXD_POPTS_TXSM);
        assert_eq!(p.tso_paylen, Some(5000), "PAYLEN: the TCP payload only");
        // Linux igb_tso: IPv4 total length and checksum 0, the TCP
        // checksum the pseudo-header's sum without the length.
        assert_eq!(p.prep.ip_len_at, Some(14 + 2));
        assert_eq!(p.prep.ip_csum_at, Some(14 + 10));
        let seed = fold(ones_sum(&[10, 0, 0, 1, 10, 0, 0, 2], 6));
        assert_eq!(p.prep.l4_seed, Some((14 + 20 + 16, seed)));
        f[16..18].copy_from_slice(&[0xbe, 0xef]);
        tx_prepare(&mut f, &p.prep);
        assert_eq!(f[16..18], [0, 0]);
        // Another MSS is another context.
        let q = tx_plan(&f, &TxOffload::NONE.with_tso(1000)).unwrap();
        assert_ne!(q.ctx, p.ctx);
        let (d, _) = TxContext::decode(c.encode(0));
        assert_eq!(d.mss(), 1448);
    }

    #[test]
    fn virtio_tso_prepare_writes_what_the_devices_segmentation_reads() {
        let mut f = tcp4(5000);
        f[16..18].copy_from_slice(&[0xbe, 0xef]);
        f[24..26].copy_from_slice(&[0x12, 0x34]);
        let g = virtio_tso_prepare(&mut f, 1448, 1500).unwrap();
        assert_eq!(
            g,
            VirtioGso {
                ipv6: false,
                hdr_len: 54,
                gso_size: 1448,
                csum_start: 34,
                csum_offset: 16
            }
        );
        assert_eq!(
            f[16..18],
            5040u16.to_be_bytes(),
            "the frame's own total length"
        );
        assert_eq!(
            !fold(ones_sum(&f[14..34], 0)),
            0,
            "the IPv4 checksum verifies"
        );
        let seed = fold(ones_sum(&f[26..34], PROTO_TCP as u64 + 5020));
        assert_eq!(f[50..52], seed.to_be_bytes(), "seeded with the TCP length");
        // IPv6: the payload length, no header checksum.
        let mut v6 = vec![0u8; 14 + 40 + 20 + 3000];
        v6[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        v6[14] = 0x60;
        v6[14 + 6] = PROTO_TCP;
        v6[14 + 40 + 12] = 5 << 4;
        let g = virtio_tso_prepare(&mut v6, 1440, 1500).unwrap();
        assert!(g.ipv6 && g.hdr_len == 74 && g.csum_start == 54);
        assert_eq!(v6[18..20], 3020u16.to_be_bytes());
        let tcp = TxRefusal::MssOutOfRange {
            mss: 1461,
            max: 1460,
        };
        assert_eq!(virtio_tso_prepare(&mut tcp4(5000), 1461, 1500), Err(tcp));
        assert_eq!(
            virtio_tso_prepare(&mut tcp4(65496), 1448, 1500),
            Err(TxRefusal::TsoPayload {
                len: 65496,
                max: 65495
            })
        );
        assert!(virtio_tso_prepare(&mut tcp4(65495), 1448, 1500).is_ok());
        let mut cwr = tcp4(100);
        cwr[14 + 20 + 13] |= TCP_CWR;
        assert!(matches!(
            virtio_tso_prepare(&mut cwr, 1448, 1500),
            Err(TxRefusal::NotOffered { what }) if what.contains("CWR")
        ));
        assert_eq!(
            virtio_tso_prepare(&mut udp4(100), 1448, 1500),
            Err(TxRefusal::TsoNotTcp { protocol: 17 })
        );
    }

    #[test]
    fn tso_plan_refuses_what_the_nic_cannot_segment() {
        let f = tcp4(100);
        let tso = |mss| TxOffload::NONE.with_tso(mss);
        assert_eq!(
            tx_plan(&f, &tso(0)),
            Err(TxRefusal::MssOutOfRange {
                mss: 0,
                max: TSO_MAX_MSS
            })
        );
        assert!(matches!(
            tx_plan(&f, &tso(TSO_MAX_MSS + 1)),
            Err(TxRefusal::MssOutOfRange { .. })
        ));
        assert!(tx_plan(&f, &tso(TSO_MAX_MSS)).is_ok());
        assert_eq!(
            tx_plan(&f[..54], &tso(1448)),
            Err(TxRefusal::TsoPayload {
                len: 0,
                max: TSO_MAX_PAYLEN
            })
        );
        assert_eq!(
            tx_plan(&udp4(100), &tso(1448)),
            Err(TxRefusal::TsoNotTcp {
                protocol: PROTO_UDP
            })
        );
        assert_eq!(
            tx_plan(&f[..40], &tso(1448)),
            Err(TxRefusal::TooShort {
                len: 40,
                needed: 54
            })
        );
        let mut frag = tcp4(100);
        frag[14 + 6] = 0x20; // MF
        assert_eq!(tx_plan(&frag, &tso(1448)), Err(TxRefusal::Fragment));
        let mut v6 = vec![0u8; 14 + 40 + 20 + 10];
        v6[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        v6[14 + 6] = PROTO_TCP;
        v6[14 + 40 + 12] = 5 << 4;
        let p = tx_plan(&v6, &tso(1440)).unwrap();
        assert_eq!((p.popts, p.tso_paylen), (TXD_POPTS_TXSM, Some(10)));
        assert_eq!(p.prep.ip_len_at, Some(14 + 4));
        assert_eq!(
            tx_plan(&v6, &tso(1440).with_ipv4_checksum()),
            Err(TxRefusal::NotIpv4)
        );
        assert_eq!(
            TxContext::new(0, 14, 20, true, true, 20)
                .unwrap()
                .with_mss(0),
            Err(TxRefusal::MssOutOfRange {
                mss: 0,
                max: TSO_MAX_MSS
            })
        );
    }
}

#[cfg(test)]
mod software_tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame with `payload`, checksums zero.
    fn udp4(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        // The IPv4 header of RFC 1071's usual worked example (checksum b861
        // for this total length 0x73), then UDP.
        let total = 20 + 8 + payload.len();
        f.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0]);
        f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
        f.extend_from_slice(&[192, 168, 0, 1, 192, 168, 0, 199]);
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    /// The IPv4 header sums to 0xffff with its checksum, and equals the
    /// known answer for the textbook header (4500 0073 … → b861).
    #[test]
    fn the_ipv4_checksum_is_the_known_answer() {
        let mut f = udp4(&[0u8; 0x73 - 28]);
        checksum_in_software(&mut f, &TxOffload::NONE.with_ipv4_checksum()).unwrap();
        assert_eq!(&f[24..26], &[0xb8, 0x61]);
        assert_eq!(fold(ones_sum(&f[14..34], 0)), 0xffff);
    }

    /// The UDP checksum verifies over the pseudo-header (the receiver's
    /// check, RFC 768), for even and odd payloads; a TCP frame likewise.
    #[test]
    fn the_l4_checksum_verifies_over_the_pseudo_header() {
        for len in [0usize, 1, 17, 1000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut f = udp4(&payload);
            let req = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
            checksum_in_software(&mut f, &req).unwrap();
            let l4 = &f[34..];
            let pseudo = ones_sum(&f[26..34], 17 + l4.len() as u64);
            assert_eq!(fold(ones_sum(l4, pseudo)), 0xffff, "payload {len}");
            assert_ne!(&f[40..42], &[0, 0], "a UDP sum is never sent as 0");
        }
        // TCP: protocol 6, a 20-byte header, the checksum at +16.
        let mut f = udp4(&[]);
        f[23] = 6;
        f.truncate(34);
        let mut tcp = vec![0u8; 20];
        tcp[12] = 5 << 4;
        f.extend_from_slice(&tcp);
        f.extend_from_slice(b"hello");
        f[16..18].copy_from_slice(&(20u16 + 20 + 5).to_be_bytes());
        checksum_in_software(&mut f, &TxOffload::NONE.with_l4_checksum()).unwrap();
        let pseudo = ones_sum(&f[26..34], 6 + 25);
        assert_eq!(fold(ones_sum(&f[34..], pseudo)), 0xffff);
    }

    /// What the NIC would refuse is refused, and nothing is written; a tag
    /// or segmentation is not done in software.
    #[test]
    fn refusals_are_the_nics_and_leave_the_frame_alone() {
        let mut f = udp4(b"x");
        f.push(1); // a non-zero byte after the datagram
        let before = f.clone();
        assert_eq!(
            checksum_in_software(&mut f, &TxOffload::NONE.with_l4_checksum()),
            Err(TxRefusal::TrailingBytes)
        );
        assert_eq!(f, before);
        for req in [TxOffload::NONE.with_vlan(5), TxOffload::NONE.with_tso(1000)] {
            assert!(matches!(
                checksum_in_software(&mut f, &req),
                Err(TxRefusal::NotInSoftware { .. })
            ));
        }
    }
}
