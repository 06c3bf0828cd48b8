//! Advanced RX and TX descriptor layouts (read and write-back views).
//!
//! A descriptor is 16 bytes: two little-endian 64-bit words. [`RawDesc`] is the
//! bit pattern; the functions here build the read format software writes and
//! decode the write-back format the device writes. They never touch memory:
//! `rings` does the volatile accesses and calls these on the values it read.
//!
//! Sources: 82576 datasheet §7.1.5 (advanced receive descriptors, read and
//! write-back formats) and §7.2.2.3 (advanced transmit data descriptor); the
//! 82599 uses the same layouts (82599 datasheet §7.1.6, §7.2.3.2.4; Linux
//! `ixgbe_type.h` `union ixgbe_adv_rx_desc` / `union ixgbe_adv_tx_desc`), and
//! so does QEMU's igb model (`hw/net/igb_regs.h`, `union e1000_adv_rx_desc`).
//!
//! One thing differs: the meaning of the extended error bits of the RX
//! write-back. The `RXD_ERR_*` values here are igb's; on the 82599 bit 31 is
//! the IPv4 checksum error and bit 30 the TCP/UDP one, and the frame errors
//! are bits 24..=29 (`crate::ixgbe::bits::RXDADV_ERR_*`). So
//! [`RxCompletion::rx_error`] is an igb test.

/// One 16-byte descriptor as two little-endian 64-bit words, `lo` at byte 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct RawDesc {
    /// Bytes 0..8.
    pub lo: u64,
    /// Bytes 8..16.
    pub hi: u64,
}

/// Size of one descriptor in bytes (RDLEN/TDLEN count in these).
pub const DESC_SIZE: usize = 16;

// ---- RX: advanced one-buffer descriptor -------------------------------------

/// RX write-back `status_error` (bits 31:0 of `hi`): descriptor done.
pub const RXD_STAT_DD: u32 = 1 << 0;
/// RX write-back: end of packet (last descriptor of the frame).
pub const RXD_STAT_EOP: u32 = 1 << 1;
/// RX write-back: VLAN tag stripped into `vlan`.
pub const RXD_STAT_VP: u32 = 1 << 3;
/// RX write-back extended error: RX data error (CRC, symbol, ...); 82576 §7.1.5.
/// igb only: on the 82599 this bit is the IPv4 checksum error.
pub const RXD_ERR_RXE: u32 = 1 << 31;
/// RX write-back extended error: IPv4 header checksum error.
pub const RXD_ERR_IPE: u32 = 1 << 30;
/// RX write-back extended error: TCP/UDP checksum error.
pub const RXD_ERR_L4E: u32 = 1 << 29;

/// Read format of an advanced one-buffer RX descriptor: packet buffer IOVA in
/// `lo`, header buffer 0 in `hi`. Writing `hi = 0` also clears a stale DD bit,
/// because write-back puts DD in bit 0 of the same word.
#[inline]
pub const fn rx_read(pkt_iova: u64) -> RawDesc {
    RawDesc {
        lo: pkt_iova,
        hi: 0,
    }
}

/// Whether the device has written back this RX descriptor (DD set), from `hi` alone.
/// Software must read `hi`, check this, and only then read `lo`.
#[inline]
pub const fn rx_done(hi: u64) -> bool {
    hi as u32 & RXD_STAT_DD != 0
}

/// A decoded RX write-back descriptor. Values are as the device wrote them:
/// untrusted until checked by the ring (length against the buffer size, EOP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxCompletion {
    /// Bytes written to the packet buffer for this descriptor (`PKT_LEN`).
    pub len: u16,
    /// Status and extended error bits (`RXD_STAT_*`, `RXD_ERR_*`).
    pub status_error: u32,
    /// RSS hash (valid when RSS is on and RXCSUM.PCSD is set), 82576 §7.1.2.10.
    pub rss_hash: u32,
    /// RSS type (bits 3:0) and packet type (bits 16:4) (`pkt_info`).
    pub pkt_info: u16,
    /// Stripped VLAN tag when `RXD_STAT_VP` is set.
    pub vlan: u16,
}

impl RxCompletion {
    /// Decode a written-back RX descriptor.
    #[inline]
    pub const fn decode(d: RawDesc) -> Self {
        RxCompletion {
            len: (d.hi >> 32) as u16,
            status_error: d.hi as u32,
            rss_hash: (d.lo >> 32) as u32,
            pkt_info: d.lo as u16,
            vlan: (d.hi >> 48) as u16,
        }
    }
    /// The last descriptor of the frame.
    #[inline]
    pub const fn eop(&self) -> bool {
        self.status_error & RXD_STAT_EOP != 0
    }
    /// The device reported a receive data error (RXE).
    #[inline]
    pub const fn rx_error(&self) -> bool {
        self.status_error & RXD_ERR_RXE != 0
    }
    /// Encode as the device would write it back (used by the software device model).
    #[inline]
    pub const fn encode(&self) -> RawDesc {
        RawDesc {
            lo: (self.pkt_info as u64) | ((self.rss_hash as u64) << 32),
            hi: (self.status_error as u64) | ((self.len as u64) << 32) | ((self.vlan as u64) << 48),
        }
    }
}

// ---- TX: advanced data descriptor ----------------------------------------------

/// TX `cmd_type_len` DTYP field value for an advanced data descriptor (bits 23:20 = 0011b).
pub const TXD_DTYP_DATA: u32 = 0x3 << 20;
/// TX `type_tucmd_mlhl` DTYP field value for an advanced context descriptor
/// (bits 23:20 = 0010b; [`crate::offload::TxContext`]).
pub const TXD_DTYP_CTXT: u32 = 0x2 << 20;
/// TX DTYP field mask (bits 23:20).
pub const TXD_DTYP_MASK: u32 = 0xf << 20;
/// TX DCMD: end of packet.
pub const TXD_DCMD_EOP: u32 = 1 << 24;
/// TX DCMD: insert FCS (Ethernet CRC).
pub const TXD_DCMD_IFCS: u32 = 1 << 25;
/// TX DCMD: report status (write back DD when done).
pub const TXD_DCMD_RS: u32 = 1 << 27;
/// TX DCMD: descriptor extension (1 = advanced format).
pub const TXD_DCMD_DEXT: u32 = 1 << 29;
/// TX `olinfo_status`: PAYLEN field shift (bits 31:14).
pub const TXD_PAYLEN_SHIFT: u32 = 14;
/// TX write-back status (bits 63:32 of `hi`): descriptor done.
pub const TXD_STAT_DD: u32 = 1 << 0;

/// Largest buffer one TX data descriptor can carry (DTALEN is 16 bits), in bytes.
pub const TX_MAX_DATA_LEN: usize = 0xffff;

/// Read format of a one-buffer advanced TX data descriptor for a whole frame of
/// `len` bytes at `buf_iova`: EOP and IFCS (the device appends the FCS), without
/// RS; [`tx_rs`] adds the write-back request to the descriptors that need it.
/// `len` must be at most [`TX_MAX_DATA_LEN`].
#[inline]
pub const fn tx_data(buf_iova: u64, len: u16) -> RawDesc {
    let cmd_type_len = len as u32 | TXD_DTYP_DATA | TXD_DCMD_EOP | TXD_DCMD_IFCS | TXD_DCMD_DEXT;
    let olinfo_status = (len as u32) << TXD_PAYLEN_SHIFT;
    RawDesc {
        lo: buf_iova,
        hi: cmd_type_len as u64 | ((olinfo_status as u64) << 32),
    }
}

/// [`tx_data`] for a frame sent with offloads: `dcmd` added to DCMD (VLE)
/// and `olinfo` to `olinfo_status` (POPTS IXSM/TXSM, IDX, CC), PAYLEN the
/// whole frame (no TSO; 82576 §7.2.2.3.x: "PAYLEN ... the entire packet
/// length for a non-TSO packet").
#[inline]
pub const fn tx_data_offload(buf_iova: u64, len: u16, dcmd: u32, olinfo: u32) -> RawDesc {
    let d = tx_data(buf_iova, len);
    RawDesc {
        lo: d.lo,
        hi: d.hi | dcmd as u64 | (olinfo as u64) << 32,
    }
}

/// One of the data descriptors of a frame that spans several (a TSO frame
/// over one buffer, cut at [`crate::offload::TSO_DATA_PER_DESC`]): `len`
/// bytes at `buf_iova`, DCMD `dcmd` (TSE, VLE) on every one as Linux
/// `igb_tx_map` does, EOP on the frame's last only, and `olinfo_status`
/// as given (PAYLEN, POPTS, IDX, CC on the first; 0 on the others, which
/// the NIC does not read). IFCS and DEXT always; no RS.
#[inline]
pub const fn tx_data_part(buf_iova: u64, len: u16, eop: bool, dcmd: u32, olinfo: u32) -> RawDesc {
    let eop = if eop { TXD_DCMD_EOP } else { 0 };
    let cmd_type_len = len as u32 | TXD_DTYP_DATA | TXD_DCMD_IFCS | TXD_DCMD_DEXT | eop | dcmd;
    RawDesc {
        lo: buf_iova,
        hi: cmd_type_len as u64 | (olinfo as u64) << 32,
    }
}

/// The same TX descriptor with report status (RS) set: the device writes DD
/// back into it once it and every earlier descriptor are done (82576
/// datasheet §7.2.3.1).
#[inline]
pub const fn tx_rs(d: RawDesc) -> RawDesc {
    RawDesc {
        lo: d.lo,
        hi: d.hi | TXD_DCMD_RS as u64,
    }
}

/// Whether the device has written back this TX descriptor (DD set), from `hi`.
#[inline]
pub const fn tx_done(hi: u64) -> bool {
    (hi >> 32) as u32 & TXD_STAT_DD != 0
}

/// Decoded read format of a TX data descriptor (used by the software device model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxRequest {
    /// Buffer IOVA.
    pub buf_iova: u64,
    /// Data length in bytes (DTALEN).
    pub len: u16,
    /// End of packet.
    pub eop: bool,
    /// Report status requested.
    pub rs: bool,
    /// Advanced data descriptor (DEXT set and DTYP = data).
    pub is_adv_data: bool,
    /// Advanced context descriptor (DEXT set and DTYP = context).
    pub is_adv_ctx: bool,
    /// The whole `cmd_type_len` word (DCMD, DTYP, DTALEN).
    pub cmd_type_len: u32,
    /// The whole `olinfo_status` word (PAYLEN, POPTS, CC, IDX).
    pub olinfo_status: u32,
}

impl TxRequest {
    /// Decode a TX descriptor in read format.
    #[inline]
    pub const fn decode(d: RawDesc) -> Self {
        let ctl = d.hi as u32;
        TxRequest {
            buf_iova: d.lo,
            len: ctl as u16,
            eop: ctl & TXD_DCMD_EOP != 0,
            rs: ctl & TXD_DCMD_RS != 0,
            is_adv_data: ctl & TXD_DCMD_DEXT != 0 && ctl & TXD_DTYP_MASK == TXD_DTYP_DATA,
            is_adv_ctx: ctl & TXD_DCMD_DEXT != 0 && ctl & TXD_DTYP_MASK == TXD_DTYP_CTXT,
            cmd_type_len: ctl,
            olinfo_status: (d.hi >> 32) as u32,
        }
    }
}

/// The write-back a device does on a TX descriptor with RS set: DD in the status word.
#[inline]
pub const fn tx_writeback(d: RawDesc) -> RawDesc {
    RawDesc {
        lo: d.lo,
        hi: d.hi | ((TXD_STAT_DD as u64) << 32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_is_16_bytes_and_aligned() {
        assert_eq!(core::mem::size_of::<RawDesc>(), DESC_SIZE);
        assert_eq!(core::mem::align_of::<RawDesc>(), 16);
    }

    #[test]
    fn rx_writeback_fields_sit_where_the_datasheet_puts_them() {
        // Bytes as the device writes them: pkt_info=0x0011, hdr_info=0,
        // rss=0x12345678, status_error=DD|EOP, length=1514, vlan=0.
        let bytes: [u8; 16] = [
            0x11, 0x00, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12, 0x03, 0x00, 0x00, 0x00, 0xea, 0x05,
            0x00, 0x00,
        ];
        let d = RawDesc {
            lo: u64::from_le_bytes(bytes[0..8].try_into().unwrap()),
            hi: u64::from_le_bytes(bytes[8..16].try_into().unwrap()),
        };
        assert!(rx_done(d.hi));
        let c = RxCompletion::decode(d);
        assert_eq!(c.len, 1514);
        assert_eq!(c.rss_hash, 0x1234_5678);
        assert_eq!(c.pkt_info, 0x11);
        assert!(c.eop());
        assert!(!c.rx_error());
        assert_eq!(c.encode(), d);
    }

    #[test]
    fn rx_read_format_clears_dd() {
        let d = rx_read(0xdead_b000);
        assert_eq!(d.lo, 0xdead_b000);
        assert!(!rx_done(d.hi));
    }

    #[test]
    fn rx_error_bits() {
        assert_eq!(RXD_ERR_RXE, 0x8000_0000);
        assert_eq!(RXD_ERR_IPE, 0x4000_0000);
        assert_eq!(RXD_ERR_L4E, 0x2000_0000);
        assert_eq!(RXD_STAT_EOP, 0x2);
    }

    #[test]
    fn the_82599_uses_the_same_layouts() {
        // Linux ixgbe_type.h: IXGBE_RXD_STAT_DD 0x01, _EOP 0x02, _VP 0x08;
        // IXGBE_ADVTXD_DTYP_DATA 0x00300000; IXGBE_TXD_CMD_EOP 0x01000000,
        // _IFCS 0x02000000, _RS 0x08000000, _DEXT 0x20000000;
        // IXGBE_ADVTXD_PAYLEN_SHIFT 14; IXGBE_TXD_STAT_DD 0x1.
        assert_eq!((RXD_STAT_DD, RXD_STAT_EOP, RXD_STAT_VP), (0x01, 0x02, 0x08));
        assert_eq!(TXD_DTYP_DATA, 0x0030_0000);
        assert_eq!(TXD_DCMD_EOP, 0x0100_0000);
        assert_eq!(TXD_DCMD_IFCS, 0x0200_0000);
        assert_eq!(TXD_DCMD_RS, 0x0800_0000);
        assert_eq!(TXD_DCMD_DEXT, 0x2000_0000);
        assert_eq!(TXD_PAYLEN_SHIFT, 14);
        assert_eq!(TXD_STAT_DD, 0x1);
        // union ixgbe_adv_rx_desc write-back: pkt_info (bytes 0..2), hdr_info
        // (2..4), rss (4..8), status_error (8..12), length (12..14), vlan
        // (14..16). A UDP/IPv4 frame (RSS type 7) of 60 bytes, DD | EOP.
        let bytes: [u8; 16] = [
            0x07, 0x00, 0x00, 0x00, 0xef, 0xbe, 0xad, 0xde, 0x03, 0x00, 0x00, 0x00, 0x3c, 0x00,
            0x00, 0x00,
        ];
        let d = RawDesc {
            lo: u64::from_le_bytes(bytes[0..8].try_into().unwrap()),
            hi: u64::from_le_bytes(bytes[8..16].try_into().unwrap()),
        };
        let c = RxCompletion::decode(d);
        assert!(rx_done(d.hi) && c.eop());
        assert_eq!((c.len, c.rss_hash), (60, 0xdead_beef));
        assert_eq!(
            c.pkt_info & crate::ixgbe::bits::RXDADV_RSSTYPE_MASK,
            crate::ixgbe::bits::RSSTYPE_UDP_IPV4
        );
        // The error bits do not carry over: an 82599 IPv4 checksum error
        // (IXGBE_RXDADV_ERR_IPE, bit 31) is what igb calls RXE.
        let ipe = RxCompletion {
            status_error: c.status_error | crate::ixgbe::bits::RXDADV_ERR_IPE,
            ..c
        };
        assert!(ipe.rx_error());
    }

    #[test]
    fn tx_data_descriptor_bits() {
        let plain = tx_data(0x1000, 60);
        assert_eq!(
            plain.hi as u32 & TXD_DCMD_RS,
            0,
            "no write-back unless asked"
        );
        let d = tx_rs(plain);
        let ctl = d.hi as u32;
        // Values from Linux igb e1000_82575.h: DTYP_DATA 0x00300000, EOP
        // 0x01000000, IFCS 0x02000000, RS 0x08000000, DEXT 0x20000000.
        assert_eq!(
            ctl,
            60 | 0x0030_0000 | 0x0100_0000 | 0x0200_0000 | 0x0800_0000 | 0x2000_0000
        );
        assert_eq!(
            (d.hi >> 32) as u32 >> 14,
            60,
            "PAYLEN at olinfo_status bits 31:14"
        );
        assert!(!tx_done(d.hi));
        assert!(tx_done(tx_writeback(d).hi));
        let r = TxRequest::decode(d);
        assert!(r.eop && r.rs && r.is_adv_data);
        assert_eq!((r.buf_iova, r.len), (0x1000, 60));
    }
}
