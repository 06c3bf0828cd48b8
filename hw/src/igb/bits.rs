//! Bit fields of the igb registers pollnic programs.
//!
//! Source: 82576 datasheet chapter 8 (the section of each register is given in
//! [`super::regs`]); values cross-checked with Linux `igb/e1000_defines.h`.

/// CTRL: full duplex.
pub const CTRL_FD: u32 = 1 << 0;
/// CTRL: GIO master disable: the part stops issuing new PCIe master
/// requests (DMA), and STATUS.GIO_MASTER_ENABLE clears once the pending ones
/// completed (82576 datasheet §8.2.1; Linux `E1000_CTRL_GIO_MASTER_DISABLE`,
/// set by `igb_disable_pcie_master` before every reset).
pub const CTRL_GIO_MASTER_DISABLE: u32 = 1 << 2;
/// CTRL: link reset.
pub const CTRL_LRST: u32 = 1 << 3;
/// CTRL: set link up (must be set for the MAC to use the link).
pub const CTRL_SLU: u32 = 1 << 6;
/// CTRL: device reset; self-clearing (§4.3.1: wait ≥ 1 ms after setting).
pub const CTRL_RST: u32 = 1 << 26;
/// CTRL: PHY reset.
pub const CTRL_PHY_RST: u32 = 1 << 31;
/// CTRL: receive flow control enable: honour received PAUSE frames.
pub const CTRL_RFCE: u32 = 1 << 27;
/// CTRL: transmit flow control enable: send PAUSE frames.
pub const CTRL_TFCE: u32 = 1 << 28;
/// FCRTL: XON enable: send XON when the buffer drains below the low mark.
pub const FCRTL_XONE: u32 = 1 << 31;
/// RXPBS: the 82576's RX packet buffer size in KB (bits 6:0); 64 after reset.
pub const RXPBS_SIZE_MASK_82576: u32 = 0x7f;
/// The 82576's RX packet buffer after reset, KB (RXPBS = 0x40).
pub const RXPBS_DEFAULT_KB: u32 = 64;
/// RXPBS on the I350 (and 82580): the buffer size field, bits 3:0, an
/// index into [`RXPBS_TABLE_I350`] (DPDK `igb_get_rx_buffer_size` masks it so).
pub const RXPBS_SIZE_MASK_I350: u32 = 0xf;
/// The I350's RXPBS encoding, KB by field value: Linux
/// `e1000_82580_rxpbs_table` (`e1000_82575.c`). Values 11..=15 have no size.
pub const RXPBS_TABLE_I350: [u16; 11] = [36, 72, 144, 1, 2, 4, 8, 16, 35, 70, 140];
/// The I350's RX packet buffer in KB for an RXPBS value, as Linux
/// `igb_rxpbs_adjust_82580` decodes it for `igb_reset`; `None` for a field
/// value outside the table (where Linux takes 0).
pub const fn rxpbs_kb_i350(rxpbs: u32) -> Option<u32> {
    let i = (rxpbs & RXPBS_SIZE_MASK_I350) as usize;
    if i < RXPBS_TABLE_I350.len() {
        Some(RXPBS_TABLE_I350[i] as u32)
    } else {
        None
    }
}

/// EEER: transmit low power idle enable (Linux `E1000_EEER_TX_LPI_EN`).
pub const EEER_TX_LPI_EN: u32 = 1 << 16;
/// EEER: receive low power idle enable (`E1000_EEER_RX_LPI_EN`).
pub const EEER_RX_LPI_EN: u32 = 1 << 17;
/// EEER: low power idle also while flow control pauses (`E1000_EEER_LPI_FC`).
pub const EEER_LPI_FC: u32 = 1 << 18;
/// The three EEER bits Linux `igb_set_eee_i350` sets or clears together.
pub const EEER_LPI_MASK: u32 = EEER_TX_LPI_EN | EEER_RX_LPI_EN | EEER_LPI_FC;
/// IPCNFG: advertise EEE at 100 Mb/s (`E1000_IPCNFG_EEE_100M_AN`).
pub const IPCNFG_EEE_100M_AN: u32 = 1 << 2;
/// IPCNFG: advertise EEE at 1 Gb/s (`E1000_IPCNFG_EEE_1G_AN`).
pub const IPCNFG_EEE_1G_AN: u32 = 1 << 3;
/// DMACR: DMA coalescing watchdog, bits 13:0, in 32 µs units on the I350
/// (`E1000_DMACR_DMACWT_MASK`).
pub const DMACR_DMACWT_MASK: u32 = 0x3fff;
/// DMACR: BMC-to-OS watchdog enable (`E1000_DMACR_DC_BMC2OSW_EN`).
pub const DMACR_DC_BMC2OSW_EN: u32 = 1 << 15;
/// DMACR: receive threshold in KB, bits 23:16 (`E1000_DMACR_DMACTHR_MASK`).
pub const DMACR_DMACTHR_SHIFT: u32 = 16;
/// DMACR: the receive threshold field.
pub const DMACR_DMACTHR_MASK: u32 = 0xff << DMACR_DMACTHR_SHIFT;
/// DMACR: go to L0s or L1 when no PCIe transaction is pending, bits 29:28
/// (`E1000_DMACR_DMAC_LX_MASK`).
pub const DMACR_DMAC_LX_MASK: u32 = 0x3 << 28;
/// DMACR: DMA coalescing on (`E1000_DMACR_DMAC_EN`).
pub const DMACR_DMAC_EN: u32 = 1 << 31;
/// DMCTLX: do not flush on DMA coalescing exit (Linux `IGB_DMCTLX_DCFLUSH_DIS`).
pub const DMCTLX_DCFLUSH_DIS: u32 = 1 << 31;
/// FCRTC: DMA coalescing high water mark, bytes in bits 17:4 (`E1000_FCRTC_RTH_COAL_MASK`).
pub const FCRTC_RTH_COAL_MASK: u32 = 0x0003_fff0;
/// FCRTC: the field's shift (`E1000_FCRTC_RTH_COAL_SHIFT`).
pub const FCRTC_RTH_COAL_SHIFT: u32 = 4;
/// PCIEMISC: the low power state decision follows DMA coalescing
/// (`E1000_PCIEMISC_LX_DECISION`).
pub const PCIEMISC_LX_DECISION: u32 = 1 << 7;
/// FCAL/FCAH: the PAUSE destination 01:80:C2:00:00:01 (Linux
/// `FLOW_CONTROL_ADDRESS_LOW`/`_HIGH`).
pub const FLOW_CONTROL_ADDRESS_LOW: u32 = 0x00C2_8001;
/// See [`FLOW_CONTROL_ADDRESS_LOW`].
pub const FLOW_CONTROL_ADDRESS_HIGH: u32 = 0x0000_0100;
/// FCT: the MAC Control EtherType (Linux `FLOW_CONTROL_TYPE`).
pub const FLOW_CONTROL_TYPE: u32 = 0x8808;

/// CTRL_EXT: driver loaded (`E1000_CTRL_EXT_DRV_LOAD`, 82576 datasheet
/// §8.2.3): tells the manageability firmware that a driver owns the port.
/// Linux sets it in `igb_get_hw_control` and clears it in
/// `igb_release_hw_control`.
pub const CTRL_EXT_DRV_LOAD: u32 = 1 << 28;

/// STATUS: full duplex.
pub const STATUS_FD: u32 = 1 << 0;
/// STATUS: link up.
pub const STATUS_LU: u32 = 1 << 1;
/// STATUS: GIO master enable: PCIe master requests may still be pending;
/// reads 0 once [`CTRL_GIO_MASTER_DISABLE`] took effect (82576 datasheet
/// §8.2.2; Linux `E1000_STATUS_GIO_MASTER_ENABLE`).
pub const STATUS_GIO_MASTER_ENABLE: u32 = 1 << 19;
/// STATUS: speed field shift (bits 7:6; 00 = 10, 01 = 100, 1x = 1000 Mb/s).
pub const STATUS_SPEED_SHIFT: u32 = 6;

/// Link speed in Mb/s from STATUS bits 7:6.
pub const fn status_speed_mbps(status: u32) -> u32 {
    match (status >> STATUS_SPEED_SHIFT) & 3 {
        0 => 10,
        1 => 100,
        _ => 1000,
    }
}

/// EECD: EEPROM auto-read done. QEMU's igb never sets it; wait with a bound.
pub const EECD_AUTO_RD: u32 = 1 << 9;

/// EERD: start a read.
pub const EERD_START: u32 = 1 << 0;
/// EERD: read done.
pub const EERD_DONE: u32 = 1 << 1;
/// EERD: word address shift.
pub const EERD_ADDR_SHIFT: u32 = 2;
/// EERD: data shift (bits 31:16).
pub const EERD_DATA_SHIFT: u32 = 16;

/// MDIC: data, bits 15:0.
pub const MDIC_DATA_MASK: u32 = 0xffff;
/// MDIC: PHY register address shift (bits 20:16).
pub const MDIC_REG_SHIFT: u32 = 16;
/// MDIC: PHY address shift (bits 25:21).
pub const MDIC_PHY_SHIFT: u32 = 21;
/// MDIC: opcode write (bits 27:26 = 01b).
pub const MDIC_OP_WRITE: u32 = 1 << 26;
/// MDIC: opcode read (bits 27:26 = 10b).
pub const MDIC_OP_READ: u32 = 2 << 26;
/// MDIC: ready (transaction complete).
pub const MDIC_READY: u32 = 1 << 28;
/// MDIC: error.
pub const MDIC_ERROR: u32 = 1 << 30;

/// RCTL: receiver enable.
pub const RCTL_EN: u32 = 1 << 1;
/// RCTL: store bad packets.
pub const RCTL_SBP: u32 = 1 << 2;
/// RCTL: unicast promiscuous.
pub const RCTL_UPE: u32 = 1 << 3;
/// RCTL: multicast promiscuous.
pub const RCTL_MPE: u32 = 1 << 4;
/// RCTL: long packet enable: frames up to RLPML bytes instead of 1518 (1522
/// with a VLAN tag) (§8.10.1).
pub const RCTL_LPE: u32 = 1 << 5;
/// RCTL: broadcast accept mode.
pub const RCTL_BAM: u32 = 1 << 15;
/// RCTL: strip Ethernet CRC from received frames.
pub const RCTL_SECRC: u32 = 1 << 26;

/// RLPML: the length field, bits 13:0, in bytes (§8.10.3).
pub const RLPML_MASK: u32 = 0x3fff;

/// TCTL: transmit enable.
pub const TCTL_EN: u32 = 1 << 1;
/// TCTL: pad short packets to 64 bytes.
pub const TCTL_PSP: u32 = 1 << 3;
/// TCTL: collision threshold shift (bits 11:4); recommended value 0x0F.
pub const TCTL_CT_SHIFT: u32 = 4;
/// TCTL: collision distance shift (bits 21:12); recommended value 0x3F.
pub const TCTL_COLD_SHIFT: u32 = 12;
/// TCTL: retransmit on late collision.
pub const TCTL_RTLC: u32 = 1 << 24;

/// SRRCTL: packet buffer size field, in 1 KiB units (bits 6:0).
pub const SRRCTL_BSIZEPKT_MASK: u32 = 0x7f;
/// SRRCTL: unit of BSIZEPKT, in bytes.
pub const SRRCTL_BSIZEPKT_UNIT: u32 = 1024;
/// SRRCTL: descriptor type "advanced, one buffer" (bits 27:25 = 001b).
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 1 << 25;
/// SRRCTL: drop packets when this queue has no free descriptors.
pub const SRRCTL_DROP_EN: u32 = 1 << 31;

/// RXDCTL / TXDCTL: queue enable (reads back 1 once the queue is running).
pub const XDCTL_ENABLE: u32 = 1 << 25;
/// RXDCTL / TXDCTL: prefetch threshold shift (bits 4:0).
pub const XDCTL_PTHRESH_SHIFT: u32 = 0;
/// RXDCTL / TXDCTL: host threshold shift (bits 12:8).
pub const XDCTL_HTHRESH_SHIFT: u32 = 8;
/// RXDCTL / TXDCTL: write-back threshold shift (bits 20:16).
pub const XDCTL_WTHRESH_SHIFT: u32 = 16;

/// RXCSUM: packet checksum disable; must be set for the RSS hash to be written
/// back (the field is shared with the IP identification / checksum).
pub const RXCSUM_PCSD: u32 = 1 << 13;

/// MRQC: multiple receive queues mode field (bits 2:0).
pub const MRQC_MODE_MASK: u32 = 0x7;
/// MRQC mode 010b: RSS only (82576 datasheet §8.10.21; QEMU's igb requires it).
pub const MRQC_MODE_RSS: u32 = 0x2;
/// MRQC hash field: TCP over IPv4.
pub const MRQC_FIELD_TCP_IPV4: u32 = 1 << 16;
/// MRQC hash field: IPv4 addresses.
pub const MRQC_FIELD_IPV4: u32 = 1 << 17;
/// MRQC hash field: TCP over IPv6 with extension headers (QEMU's igb uses
/// this bit, not [`MRQC_FIELD_TCP_IPV6`], for every TCP/IPv6 frame).
pub const MRQC_FIELD_TCP_IPV6_EX: u32 = 1 << 18;
/// MRQC hash field: IPv6 addresses.
pub const MRQC_FIELD_IPV6: u32 = 1 << 20;
/// MRQC hash field: TCP over IPv6.
pub const MRQC_FIELD_TCP_IPV6: u32 = 1 << 21;
/// MRQC hash field: UDP over IPv4.
pub const MRQC_FIELD_UDP_IPV4: u32 = 1 << 22;
/// MRQC hash field: UDP over IPv6.
pub const MRQC_FIELD_UDP_IPV6: u32 = 1 << 23;

/// RAH: address valid.
pub const RAH_AV: u32 = 1 << 31;

/// ICR: receiver overrun, a frame arrived with no free RX descriptor (82576
/// datasheet §8.8.1; Linux `E1000_ICR_RXO`). QEMU's igb sets it when it drops
/// a frame for a full ring, and counts nothing else.
pub const ICR_RXO: u32 = 1 << 6;

/// Value for IMC/EIMC that masks every interrupt cause.
pub const ALL_INTERRUPTS: u32 = 0xffff_ffff;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_i350_rxpbs_encoding_is_a_table_the_82576s_a_size() {
        // The same register value is 2 KB on the 82576 and 144 KB on the I350.
        assert_eq!(2 & RXPBS_SIZE_MASK_82576, 2);
        assert_eq!(rxpbs_kb_i350(2), Some(144));
        assert_eq!(rxpbs_kb_i350(0), Some(36));
        assert_eq!(rxpbs_kb_i350(10), Some(140));
        assert_eq!(rxpbs_kb_i350(11), None);
        // Only bits 3:0 are the field.
        assert_eq!(rxpbs_kb_i350(0x8000_0001), Some(72));
    }
    #[test]
    fn values_match_linux_e1000_defines() {
        assert_eq!(CTRL_SLU, 0x40);
        assert_eq!(CTRL_RST, 0x0400_0000);
        assert_eq!(CTRL_EXT_DRV_LOAD, 0x1000_0000);
        assert_eq!((CTRL_RFCE, CTRL_TFCE), (0x0800_0000, 0x1000_0000));
        assert_eq!(FCRTL_XONE, 0x8000_0000);
        assert_eq!(STATUS_LU, 0x2);
        assert_eq!(EECD_AUTO_RD, 0x200);
        assert_eq!(RCTL_SECRC, 0x0400_0000);
        assert_eq!(RCTL_BAM, 0x8000);
        assert_eq!(SRRCTL_DESCTYPE_ADV_ONEBUF, 0x0200_0000);
        assert_eq!(XDCTL_ENABLE, 0x0200_0000);
        assert_eq!(RXCSUM_PCSD, 0x2000);
        assert_eq!(MDIC_READY, 0x1000_0000);
        assert_eq!(MDIC_OP_WRITE, 0x0400_0000);
        assert_eq!(MDIC_OP_READ, 0x0800_0000);
        assert_eq!(ICR_RXO, 0x40);
        assert_eq!(EEER_LPI_MASK, 0x0007_0000);
        assert_eq!((IPCNFG_EEE_100M_AN, IPCNFG_EEE_1G_AN), (0x4, 0x8));
        assert_eq!(DMACR_DMAC_EN | DMACR_DMAC_LX_MASK, 0xb000_0000);
        assert_eq!(
            (DMACR_DMACTHR_MASK, DMACR_DC_BMC2OSW_EN),
            (0x00ff_0000, 0x8000)
        );
        assert_eq!(PCIEMISC_LX_DECISION, 0x80);
        // Linux e1000_defines.h / QEMU igb_regs.h MRQC values.
        assert_eq!(MRQC_FIELD_TCP_IPV4, 0x0001_0000);
        assert_eq!(MRQC_FIELD_IPV4, 0x0002_0000);
        assert_eq!(MRQC_FIELD_IPV6, 0x0010_0000);
        assert_eq!(MRQC_FIELD_TCP_IPV6, 0x0020_0000);
        assert_eq!(MRQC_FIELD_UDP_IPV4, 0x0040_0000);
        assert_eq!(MRQC_FIELD_UDP_IPV6, 0x0080_0000);
    }
    #[test]
    fn speed_decoding() {
        assert_eq!(status_speed_mbps(0), 10);
        assert_eq!(status_speed_mbps(1 << 6), 100);
        assert_eq!(status_speed_mbps(2 << 6), 1000);
        assert_eq!(status_speed_mbps(3 << 6), 1000);
    }
}
