//! Bit fields of the 82599 registers pollnic programs.
//!
//! Every value is pinned by a unit test to the Linux `ixgbe_type.h` macro named
//! in its doc comment (the register is in [`super::regs`]). Several fields sit
//! elsewhere than on the igb although the names match; the ones that catch a
//! port from igb out are called out: [`SRRCTL_DROP_EN`] (bit 28, not 31),
//! [`MRQC_MRQE_RSS`] (0001b, not 010b), [`RXCTRL_RXEN`] (bit 0 of its own
//! register, not RCTL bit 1) and the RX write-back error bits
//! ([`RXDADV_ERR_IPE`] is bit 31, where igb has RXE).

// ---- CTRL / STATUS / CTRL_EXT -------------------------------------------------

/// CTRL: PCIe master disable; STATUS.GIO reads 0 once no master request is
/// pending (`IXGBE_CTRL_GIO_DIS`). Linux sets it before a reset.
pub const CTRL_GIO_DIS: u32 = 1 << 2;
/// CTRL: link reset, which also resets the link ("resets everything" in
/// Linux's comment; `IXGBE_CTRL_LNK_RST`).
pub const CTRL_LNK_RST: u32 = 1 << 3;
/// CTRL: software (device) reset, self-clearing (`IXGBE_CTRL_RST`).
pub const CTRL_RST: u32 = 1 << 26;
/// CTRL: both reset bits; reset is complete when neither reads back set
/// (`IXGBE_CTRL_RST_MASK`).
pub const CTRL_RST_MASK: u32 = CTRL_LNK_RST | CTRL_RST;

/// STATUS: PCIe master enable status (`IXGBE_STATUS_GIO`).
pub const STATUS_GIO: u32 = 1 << 19;
/// STATUS: LAN ID (port number of this function), bits 3:2 (`IXGBE_STATUS_LAN_ID`).
pub const STATUS_LAN_ID_MASK: u32 = 0x3 << 2;
/// STATUS: LAN ID shift (`IXGBE_STATUS_LAN_ID_SHIFT`).
pub const STATUS_LAN_ID_SHIFT: u32 = 2;

/// CTRL_EXT: PF reset done (`IXGBE_CTRL_EXT_PFRSTD`); only meaningful with SR-IOV.
pub const CTRL_EXT_PFRSTD: u32 = 1 << 14;
/// CTRL_EXT: no-snoop disable (`IXGBE_CTRL_EXT_NS_DIS`). ixy sets it at the
/// end of RX setup, reading the last sentence of the 82599 datasheet §4.6.7.
pub const CTRL_EXT_NS_DIS: u32 = 1 << 16;
/// CTRL_EXT: relaxed-ordering disable (`IXGBE_CTRL_EXT_RO_DIS`).
pub const CTRL_EXT_RO_DIS: u32 = 1 << 17;
/// CTRL_EXT: driver loaded, tells the manageability firmware a driver owns
/// the port (`IXGBE_CTRL_EXT_DRV_LOAD`).
pub const CTRL_EXT_DRV_LOAD: u32 = 1 << 28;

// ---- EEPROM ----------------------------------------------------------------------

/// EEC: EEPROM present (`IXGBE_EEC_PRES`).
pub const EEC_PRES: u32 = 1 << 8;
/// EEC: EEPROM auto-read done, set once the hardware has loaded its EEPROM
/// configuration after reset (`IXGBE_EEC_ARD`).
pub const EEC_ARD: u32 = 1 << 9;

/// EERD: start a read (`IXGBE_EEPROM_RW_REG_START` = 1).
pub const EERD_START: u32 = 1 << 0;
/// EERD: read done (`IXGBE_EEPROM_RW_REG_DONE` = 2).
pub const EERD_DONE: u32 = 1 << 1;
/// EERD: word address shift (`IXGBE_EEPROM_RW_ADDR_SHIFT`).
pub const EERD_ADDR_SHIFT: u32 = 2;
/// EERD: data shift, bits 31:16 (`IXGBE_EEPROM_RW_REG_DATA`).
pub const EERD_DATA_SHIFT: u32 = 16;

// ---- Interrupts -----------------------------------------------------------------

/// EICR/EIMS/EIMC: the 16 RX/TX queue (vector) cause bits (`IXGBE_EICR_RTX_QUEUE`).
pub const EICR_RTX_QUEUE: u32 = 0xFFFF;
/// EICR: packet buffer overrun, a frame was dropped for lack of room in the
/// RX packet buffer (`IXGBE_EICR_RX_MISS`).
pub const EICR_RX_MISS: u32 = 1 << 17;
/// EICR: link status change (`IXGBE_EICR_LSC`).
pub const EICR_LSC: u32 = 1 << 20;
/// EICR: some other cause is active (`IXGBE_EICR_OTHER`).
pub const EICR_OTHER: u32 = 1 << 31;
/// Value for EIMC (and EIMC_EX) that masks every interrupt cause
/// (`IXGBE_IRQ_CLEAR_MASK`).
pub const ALL_INTERRUPTS: u32 = 0xFFFF_FFFF;

// ---- Link: AUTOC, AUTOC2, LINKS ------------------------------------------------

/// AUTOC: force link up (`IXGBE_AUTOC_FLU`).
pub const AUTOC_FLU: u32 = 1 << 0;
/// AUTOC: 10 Gb/s PMA/PMD for parallel (XAUI-family) modes, bits 8:7
/// (`IXGBE_AUTOC_10G_PMA_PMD_MASK`).
pub const AUTOC_10G_PMA_PMD_MASK: u32 = 0x3 << 7;
/// AUTOC: `AUTOC_10G_PMA_PMD` shift (`IXGBE_AUTOC_10G_PMA_PMD_SHIFT`).
pub const AUTOC_10G_PMA_PMD_SHIFT: u32 = 7;
/// AUTOC: 10G PMA/PMD = XAUI, 00b (`IXGBE_AUTOC_10G_XAUI`).
pub const AUTOC_10G_XAUI: u32 = 0 << 7;
/// AUTOC: restart auto-negotiation, self-clearing (`IXGBE_AUTOC_AN_RESTART`).
pub const AUTOC_AN_RESTART: u32 = 1 << 12;
/// AUTOC: link mode select shift, bits 15:13 (`IXGBE_AUTOC_LMS_SHIFT`).
pub const AUTOC_LMS_SHIFT: u32 = 13;
/// AUTOC: link mode select field (`IXGBE_AUTOC_LMS_MASK`).
pub const AUTOC_LMS_MASK: u32 = 0x7 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 000b: 1 Gb/s link, no auto-negotiation (`IXGBE_AUTOC_LMS_1G_LINK_NO_AN`).
pub const AUTOC_LMS_1G_LINK_NO_AN: u32 = 0x0 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 001b: 10 Gb/s parallel link, no auto-negotiation (`IXGBE_AUTOC_LMS_10G_LINK_NO_AN`).
pub const AUTOC_LMS_10G_LINK_NO_AN: u32 = 0x1 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 010b: 1 Gb/s with auto-negotiation (`IXGBE_AUTOC_LMS_1G_AN`).
pub const AUTOC_LMS_1G_AN: u32 = 0x2 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 011b: 10 Gb/s serial link, no auto-negotiation: the SFI mode of
/// SFP+ boards such as the X520 (`IXGBE_AUTOC_LMS_10G_SERIAL`).
pub const AUTOC_LMS_10G_SERIAL: u32 = 0x3 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 100b: KX4/KX/KR backplane auto-negotiation (`IXGBE_AUTOC_LMS_KX4_KX_KR`).
pub const AUTOC_LMS_KX4_KX_KR: u32 = 0x4 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 101b: SGMII 1 Gb/s / 100 Mb/s (`IXGBE_AUTOC_LMS_SGMII_1G_100M`).
pub const AUTOC_LMS_SGMII_1G_100M: u32 = 0x5 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 110b: KX4/KX/KR and 1 Gb/s auto-negotiation (`IXGBE_AUTOC_LMS_KX4_KX_KR_1G_AN`).
pub const AUTOC_LMS_KX4_KX_KR_1G_AN: u32 = 0x6 << AUTOC_LMS_SHIFT;
/// AUTOC.LMS 111b: KX4/KX/KR and SGMII (`IXGBE_AUTOC_LMS_KX4_KX_KR_SGMII`).
pub const AUTOC_LMS_KX4_KX_KR_SGMII: u32 = 0x7 << AUTOC_LMS_SHIFT;

/// AUTOC2: 10 Gb/s serial PMA/PMD field, bits 17:16
/// (`IXGBE_AUTOC2_10G_SERIAL_PMA_PMD_MASK`).
pub const AUTOC2_10G_SERIAL_PMA_PMD_MASK: u32 = 0x3 << 16;
/// AUTOC2: 10G serial PMA/PMD = SFI, 10b (`IXGBE_AUTOC2_10G_SFI`).
pub const AUTOC2_10G_SFI: u32 = 0x2 << 16;
/// AUTOC2: the link-disable bits an NVM may set, bits 30:28; Linux
/// `ixgbe_reset_pipeline_82599` clears them (`IXGBE_AUTOC2_LINK_DISABLE_MASK`).
pub const AUTOC2_LINK_DISABLE_MASK: u32 = 0x7000_0000;
/// AUTOC2 bits 31:16 (the 10G serial PMA/PMD field, the link-disable bits
/// and the rest of the upper half): what Linux `ixgbe_reset_hw_82599` keeps
/// across resets, restoring the value it saw after its first reset
/// (`IXGBE_AUTOC2_UPPER_MASK`).
pub const AUTOC2_UPPER_MASK: u32 = 0xFFFF_0000;

/// ANLP1: auto-negotiation state machine, bits 19:16; 0 until the link
/// restarts (`IXGBE_ANLP1_AN_STATE_MASK`).
pub const ANLP1_AN_STATE_MASK: u32 = 0x000F_0000;

/// ESDP: SDP0 data (`IXGBE_ESDP_SDP0`): the QSFP shared-I2C request on
/// 82599_QSFP_SF_QP boards.
pub const ESDP_SDP0: u32 = 1 << 0;
/// ESDP: SDP1 data (`IXGBE_ESDP_SDP1`): the QSFP shared-I2C grant.
pub const ESDP_SDP1: u32 = 1 << 1;
/// ESDP: SDP2 data (`IXGBE_ESDP_SDP2`): on 82599 SFP+ boards, high while a
/// module sits in the cage (Linux `ixgbe_check_mac_link_generic`).
pub const ESDP_SDP2: u32 = 1 << 2;
/// ESDP: SDP3 data (`IXGBE_ESDP_SDP3`): on 82599 SFP+ boards, high disables
/// the TX laser (Linux `ixgbe_disable_tx_laser_multispeed_fiber`).
pub const ESDP_SDP3: u32 = 1 << 3;
/// ESDP: SDP0 direction, 1 = output (`IXGBE_ESDP_SDP0_DIR`).
pub const ESDP_SDP0_DIR: u32 = 1 << 8;
/// ESDP: SDP3 direction, 1 = output (`IXGBE_ESDP_SDP3_DIR`).
pub const ESDP_SDP3_DIR: u32 = 1 << 11;

/// FWSM: firmware mode field, bits 3:1 (`IXGBE_FWSM_MODE_MASK`).
pub const FWSM_MODE_MASK: u32 = 0xE;
/// FWSM: pass-through manageability firmware (`IXGBE_FWSM_FW_MODE_PT`):
/// with it, Linux leaves the laser to the firmware (`ixgbe_mng_enabled`).
pub const FWSM_FW_MODE_PT: u32 = 0x4;

/// GCR_EXT: clear the PCIe transaction-layer buffers
/// (`IXGBE_GCR_EXT_BUFFERS_CLEAR`, Linux `ixgbe_clear_tx_pending`).
pub const GCR_EXT_BUFFERS_CLEAR: u32 = 1 << 30;

/// LINKS: KX/KX4/KR auto-negotiation complete (`IXGBE_LINKS_KX_AN_COMP`).
pub const LINKS_KX_AN_COMP: u32 = 1 << 31;
/// LINKS: link up (`IXGBE_LINKS_UP`).
pub const LINKS_UP: u32 = 1 << 30;
/// LINKS: 82599 speed field, bits 29:28 (`IXGBE_LINKS_SPEED_82599`). The
/// 82598 has a one-bit field at bit 29 instead (`IXGBE_LINKS_SPEED`).
pub const LINKS_SPEED_MASK: u32 = 0x3 << 28;
/// LINKS speed field shift.
pub const LINKS_SPEED_SHIFT: u32 = 28;
/// LINKS speed 11b: 10 Gb/s (`IXGBE_LINKS_SPEED_10G_82599`).
pub const LINKS_SPEED_10G: u32 = 0x3 << 28;
/// LINKS speed 10b: 1 Gb/s (`IXGBE_LINKS_SPEED_1G_82599`).
pub const LINKS_SPEED_1G: u32 = 0x2 << 28;
/// LINKS speed 01b: 100 Mb/s (`IXGBE_LINKS_SPEED_100_82599`).
pub const LINKS_SPEED_100M: u32 = 0x1 << 28;

/// Link speed in Mb/s from LINKS bits 29:28; 0 for 00b, which the 82599 does
/// not use (Linux reads it as "unknown"; only the X550EM_a calls it 10 Mb/s).
/// Meaningful only while [`LINKS_UP`] is set.
pub const fn links_speed_mbps(links: u32) -> u32 {
    match (links & LINKS_SPEED_MASK) >> LINKS_SPEED_SHIFT {
        3 => 10_000,
        2 => 1_000,
        1 => 100,
        _ => 0,
    }
}

// ---- MAC core: HLREG0, MAXFRS ----------------------------------------------------

/// HLREG0: TX CRC enable, the MAC appends the FCS (`IXGBE_HLREG0_TXCRCEN`).
pub const HLREG0_TXCRCEN: u32 = 1 << 0;
/// HLREG0: RX CRC strip at the MAC (`IXGBE_HLREG0_RXCRCSTRP`); must agree
/// with [`RDRXCTL_CRCSTRIP`].
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
/// HLREG0: jumbo frame enable (`IXGBE_HLREG0_JUMBOEN`).
pub const HLREG0_JUMBOEN: u32 = 1 << 2;
/// HLREG0: TX pad short frames to 64 bytes (`IXGBE_HLREG0_TXPADEN`).
pub const HLREG0_TXPADEN: u32 = 1 << 10;
/// HLREG0: MAC loopback (`IXGBE_HLREG0_LPBK`).
pub const HLREG0_LPBK: u32 = 1 << 15;

/// MAXFRS: max frame size field shift, bits 31:16 (`IXGBE_MHADD_MFS_SHIFT`).
pub const MAXFRS_MFS_SHIFT: u32 = 16;
/// MAXFRS: max frame size field (`IXGBE_MHADD_MFS_MASK`).
pub const MAXFRS_MFS_MASK: u32 = 0xFFFF << MAXFRS_MFS_SHIFT;

// ---- Receive --------------------------------------------------------------------

/// RXCTRL: receive enable (`IXGBE_RXCTRL_RXEN`). On the 82599 Linux sets it
/// only with SECRXCTRL.RX_DIS set and SECRXSTAT.SECRX_RDY seen, a silicon
/// erratum workaround (`ixgbe_enable_rx_dma_82599`).
pub const RXCTRL_RXEN: u32 = 1 << 0;
/// RXCTRL: descriptor monitor bypass (`IXGBE_RXCTRL_DMBYPS`).
pub const RXCTRL_DMBYPS: u32 = 1 << 1;

/// RDRXCTL: strip the Ethernet CRC in the DMA (`IXGBE_RDRXCTL_CRCSTRIP`);
/// set together with [`HLREG0_RXCRCSTRP`].
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
/// RDRXCTL: DMA initialization cycle done, read-only (`IXGBE_RDRXCTL_DMAIDONE`).
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
/// RDRXCTL: RSC first-packet size field, bits 21:17; Linux clears it on the
/// 82599 (`IXGBE_RDRXCTL_RSCFRSTSIZE`).
pub const RDRXCTL_RSCFRSTSIZE: u32 = 0x1F << 17;
/// RDRXCTL: RSC ACK coalescing; Linux sets it on the 82599 as "required by
/// hardware" (`IXGBE_RDRXCTL_RSCACKC`).
pub const RDRXCTL_RSCACKC: u32 = 1 << 25;
/// RDRXCTL: FCoE write fix; Linux sets it on the 82599 as "required by
/// hardware" (`IXGBE_RDRXCTL_FCOE_WRFIX`).
pub const RDRXCTL_FCOE_WRFIX: u32 = 1 << 26;

/// FCTRL: store bad packets (`IXGBE_FCTRL_SBP`).
pub const FCTRL_SBP: u32 = 1 << 1;
/// FCTRL: multicast promiscuous (`IXGBE_FCTRL_MPE`).
pub const FCTRL_MPE: u32 = 1 << 8;
/// FCTRL: unicast promiscuous (`IXGBE_FCTRL_UPE`).
pub const FCTRL_UPE: u32 = 1 << 9;
/// FCTRL: broadcast accept mode (`IXGBE_FCTRL_BAM`).
pub const FCTRL_BAM: u32 = 1 << 10;

/// VLNCTRL: VLAN ethertype field, bits 15:0 (`IXGBE_VLNCTRL_VET`).
pub const VLNCTRL_VET_MASK: u32 = 0xFFFF;
/// VLNCTRL: VLAN filter enable (`IXGBE_VLNCTRL_VFE`).
pub const VLNCTRL_VFE: u32 = 1 << 30;
/// VLNCTRL: VLAN mode enable, strip tags (`IXGBE_VLNCTRL_VME`).
pub const VLNCTRL_VME: u32 = 1 << 31;

/// SECRXCTRL: security RX engine disable (`IXGBE_SECRXCTRL_SECRX_DIS`).
pub const SECRXCTRL_SECRX_DIS: u32 = 1 << 0;
/// SECRXCTRL: RX data path disable (`IXGBE_SECRXCTRL_RX_DIS`).
pub const SECRXCTRL_RX_DIS: u32 = 1 << 1;
/// SECRXSTAT: security RX path ready, i.e. drained (`IXGBE_SECRXSTAT_SECRX_RDY`).
pub const SECRXSTAT_SECRX_RDY: u32 = 1 << 0;

/// RXPBSIZE: the size is in KiB at bits 19:10, so a byte count is written
/// as is (`IXGBE_RXPBSIZE_SHIFT`).
pub const RXPBSIZE_SHIFT: u32 = 10;
/// MFLCN: discard received PAUSE frames instead of passing them up (`IXGBE_MFLCN_DPF`).
pub const MFLCN_DPF: u32 = 1 << 1;
/// MFLCN: receive flow control enable (`IXGBE_MFLCN_RFCE`).
pub const MFLCN_RFCE: u32 = 1 << 3;
/// MFLCN: the priority flow control enables (`IXGBE_MFLCN_RPFCE_MASK`).
pub const MFLCN_RPFCE_MASK: u32 = 0x0000_0FF4;
/// FCCFG: transmit 802.3x PAUSE (`IXGBE_FCCFG_TFCE_802_3X`).
pub const FCCFG_TFCE_802_3X: u32 = 1 << 3;
/// FCCFG: transmit priority flow control (`IXGBE_FCCFG_TFCE_PRIORITY`).
pub const FCCFG_TFCE_PRIORITY: u32 = 1 << 4;
/// FCRTL: XON enable (`IXGBE_FCRTL_XONE`).
pub const FCRTL_XONE: u32 = 1 << 31;
/// FCRTH: XOFF enable (`IXGBE_FCRTH_FCEN`).
pub const FCRTH_FCEN: u32 = 1 << 31;
/// RXPBSIZE: the whole 512 KiB RX packet buffer (`IXGBE_RXPBSIZE_MAX`).
pub const RXPBSIZE_MAX: u32 = 0x0008_0000;
/// RXPBSIZE: 128 KiB (`IXGBE_RXPBSIZE_128KB`), what ixy gives packet buffer 0.
pub const RXPBSIZE_128KB: u32 = 0x0002_0000;

/// SRRCTL: packet buffer size field, in 1 KiB units (bits 6:0)
/// (`IXGBE_SRRCTL_BSIZEPKT_MASK`).
pub const SRRCTL_BSIZEPKT_MASK: u32 = 0x7F;
/// SRRCTL: a buffer size in bytes shifted right by this is the BSIZEPKT
/// value (`IXGBE_SRRCTL_BSIZEPKT_SHIFT`).
pub const SRRCTL_BSIZEPKT_SHIFT: u32 = 10;
/// SRRCTL: unit of BSIZEPKT, in bytes.
pub const SRRCTL_BSIZEPKT_UNIT: u32 = 1 << SRRCTL_BSIZEPKT_SHIFT;
/// SRRCTL: descriptor type field, bits 27:25 (`IXGBE_SRRCTL_DESCTYPE_MASK`).
pub const SRRCTL_DESCTYPE_MASK: u32 = 0x7 << 25;
/// SRRCTL: descriptor type "advanced, one buffer" 001b
/// (`IXGBE_SRRCTL_DESCTYPE_ADV_ONEBUF`).
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 1 << 25;
/// SRRCTL: drop frames for this queue when it has no free descriptor, rather
/// than holding them in the packet buffer (`IXGBE_SRRCTL_DROP_EN`). Bit 28
/// here; igb's is bit 31.
pub const SRRCTL_DROP_EN: u32 = 1 << 28;

/// RXDCTL / TXDCTL: queue enable; reads back 1 once the queue runs
/// (`IXGBE_RXDCTL_ENABLE`, `IXGBE_TXDCTL_ENABLE`).
pub const XDCTL_ENABLE: u32 = 1 << 25;
/// RXDCTL: VLAN mode enable, strip the 802.1Q tag of this queue's frames
/// (`IXGBE_RXDCTL_VME`, bit 30; the 82599 strips per queue, Linux
/// `ixgbe_vlan_strip_enable`).
pub const RXDCTL_VME: u32 = 1 << 30;
/// RXDCTL / TXDCTL: software flush of write-back (`IXGBE_RXDCTL_SWFLSH`,
/// `IXGBE_TXDCTL_SWFLSH`).
pub const XDCTL_SWFLSH: u32 = 1 << 26;
/// TXDCTL: prefetch threshold, bits 6:0 (Linux writes PTHRESH = 32 as the
/// low bits of TXDCTL; no macro).
pub const TXDCTL_PTHRESH_SHIFT: u32 = 0;
/// TXDCTL: host threshold, bits 14:8 (Linux writes `1 << 8` for HTHRESH = 1).
pub const TXDCTL_HTHRESH_SHIFT: u32 = 8;
/// TXDCTL: write-back threshold, bits 22:16 (`IXGBE_TXDCTL_WTHRESH_SHIFT`).
/// Linux keeps WTHRESH + PTHRESH at most 40, the on-chip descriptor count.
pub const TXDCTL_WTHRESH_SHIFT: u32 = 16;

/// DCA_RXCTRL: descriptor read relaxed ordering (`IXGBE_DCA_RXCTRL_DESC_RRO_EN`).
pub const DCA_RXCTRL_DESC_RRO_EN: u32 = 1 << 9;
/// DCA_RXCTRL: bit 12, no Linux macro. ixy clears it on every queue: it reads
/// the last sentence of the 82599 datasheet §4.6.7 as requiring this reserved,
/// reset-to-1 bit to be written 0. Unconfirmed beyond ixy.
pub const DCA_RXCTRL_BIT12: u32 = 1 << 12;
/// DCA_RXCTRL: data write relaxed ordering (`IXGBE_DCA_RXCTRL_DATA_WRO_EN`).
pub const DCA_RXCTRL_DATA_WRO_EN: u32 = 1 << 13;
/// DCA_RXCTRL: header write relaxed ordering (`IXGBE_DCA_RXCTRL_HEAD_WRO_EN`).
pub const DCA_RXCTRL_HEAD_WRO_EN: u32 = 1 << 15;
/// DCA_RXCTRL bits pollnic clears on every queue: bit 12 (ixy) and the two
/// write relaxed-ordering enables (Linux and DPDK `ixgbe_start_hw_gen2`).
pub const DCA_RXCTRL_CLEAR: u32 =
    DCA_RXCTRL_BIT12 | DCA_RXCTRL_DATA_WRO_EN | DCA_RXCTRL_HEAD_WRO_EN;
/// DCA_TXCTRL: descriptor write-back relaxed ordering
/// (`IXGBE_DCA_TXCTRL_DESC_WRO_EN`); cleared by DPDK `ixgbe_dev_tx_init`,
/// since a head write-back out of order "hoses bookkeeping".
pub const DCA_TXCTRL_DESC_WRO_EN: u32 = 1 << 11;

// ---- RSS ---------------------------------------------------------------------

/// PSRTYPE: the header types the packet-split logic recognizes, as Linux
/// `ixgbe_setup_psrtype` sets them: TCP, UDP, IPv4, IPv6 and L2 headers
/// (`IXGBE_PSRTYPE_TCPHDR` 0x10, `_UDPHDR` 0x20, `_IPV4HDR` 0x100,
/// `_IPV6HDR` 0x200, `_L2HDR` 0x1000).
pub const PSRTYPE_HEADERS: u32 = 0x10 | 0x20 | 0x100 | 0x200 | 0x1000;
/// PSRTYPE.RQPL (bits 31:29): RSS queues per pool, log2 (Linux: 1 above one
/// RSS queue, 2 above three).
pub const PSRTYPE_RQPL_SHIFT: u32 = 29;

/// MRQC: multiple receive queues enable field, bits 3:0 (`IXGBE_MRQC_MRQE_MASK`).
pub const MRQC_MRQE_MASK: u32 = 0xF;
/// MRQC.MRQE 0001b: RSS only, no DCB or virtualization (`IXGBE_MRQC_RSSEN`).
/// igb's RSS mode value is 010b; on the 82599 010b is "8 TCs, no RSS".
pub const MRQC_MRQE_RSS: u32 = 0x1;
/// MRQC hash field: TCP over IPv4 (`IXGBE_MRQC_RSS_FIELD_IPV4_TCP`).
pub const MRQC_FIELD_TCP_IPV4: u32 = 1 << 16;
/// MRQC hash field: IPv4 addresses (`IXGBE_MRQC_RSS_FIELD_IPV4`).
pub const MRQC_FIELD_IPV4: u32 = 1 << 17;
/// MRQC hash field: TCP over IPv6 with extension headers (`IXGBE_MRQC_RSS_FIELD_IPV6_EX_TCP`).
pub const MRQC_FIELD_TCP_IPV6_EX: u32 = 1 << 18;
/// MRQC hash field: IPv6 with extension headers (`IXGBE_MRQC_RSS_FIELD_IPV6_EX`).
pub const MRQC_FIELD_IPV6_EX: u32 = 1 << 19;
/// MRQC hash field: IPv6 addresses (`IXGBE_MRQC_RSS_FIELD_IPV6`).
pub const MRQC_FIELD_IPV6: u32 = 1 << 20;
/// MRQC hash field: TCP over IPv6 (`IXGBE_MRQC_RSS_FIELD_IPV6_TCP`).
pub const MRQC_FIELD_TCP_IPV6: u32 = 1 << 21;
/// MRQC hash field: UDP over IPv4 (`IXGBE_MRQC_RSS_FIELD_IPV4_UDP`).
pub const MRQC_FIELD_UDP_IPV4: u32 = 1 << 22;
/// MRQC hash field: UDP over IPv6 (`IXGBE_MRQC_RSS_FIELD_IPV6_UDP`).
pub const MRQC_FIELD_UDP_IPV6: u32 = 1 << 23;
/// MRQC hash field: UDP over IPv6 with extension headers (`IXGBE_MRQC_RSS_FIELD_IPV6_EX_UDP`).
pub const MRQC_FIELD_UDP_IPV6_EX: u32 = 1 << 24;

/// RETA: each one-byte entry holds an RSS output index in bits 3:0 on the
/// 82599 (Linux `ixgbe_store_reta`: "8 bit wide entries containing 4 bit RSS
/// index"), hence at most [`super::MAX_RSS_QUEUES`] queues. The 82598 wants
/// the index in both nibbles (entry × 0x11); the 82599 does not. Entry i is
/// byte i % 4 of register i / 4, as [`crate::rss::Reta::registers`] packs it.
pub const RETA_ENTRY_MASK: u32 = 0x0F;

/// RXCSUM: IP payload checksum enable (`IXGBE_RXCSUM_IPPCSE`).
pub const RXCSUM_IPPCSE: u32 = 1 << 12;
/// RXCSUM: packet checksum disable; must be set for the RSS hash to be written
/// back in place of the IP identification / checksum (`IXGBE_RXCSUM_PCSD`).
pub const RXCSUM_PCSD: u32 = 1 << 13;

/// RAH: address valid (`IXGBE_RAH_AV`).
pub const RAH_AV: u32 = 1 << 31;

// ---- Transmit -------------------------------------------------------------------

/// DMATXCTL: transmit enable (`IXGBE_DMATXCTL_TE`). Must be set before any
/// TXDCTL.ENABLE (Linux `ixgbe_configure_tx`: "DMATXCTL.EN must be before Tx
/// queues are enabled"; ixy sets it at the end of its §4.6.8 step, before it
/// starts the queues).
pub const DMATXCTL_TE: u32 = 1 << 0;

/// RTTDCS: DCB TX arbiter disable (`IXGBE_RTTDCS_ARBDIS`); Linux sets it
/// around the MTQC write and clears it afterwards.
pub const RTTDCS_ARBDIS: u32 = 1 << 6;

/// MTQC: 64 TX queues, one packet buffer, no DCB/VT (`IXGBE_MTQC_64Q_1PB`).
pub const MTQC_64Q_1PB: u32 = 0x0;

/// PFDTXGSWC: local VM-to-VM switch enable (`IXGBE_PFDTXGSWC_VT_LBEN`).
pub const PFDTXGSWC_VT_LBEN: u32 = 1 << 0;

/// SECTXCTRL: security TX engine disable (`IXGBE_SECTXCTRL_SECTX_DIS`).
pub const SECTXCTRL_SECTX_DIS: u32 = 1 << 0;
/// SECTXCTRL: TX data path disable (`IXGBE_SECTXCTRL_TX_DIS`).
pub const SECTXCTRL_TX_DIS: u32 = 1 << 1;
/// SECTXCTRL: store-and-forward (`IXGBE_SECTXCTRL_STORE_FORWARD`).
pub const SECTXCTRL_STORE_FORWARD: u32 = 1 << 2;
/// SECTXSTAT: security TX path ready (`IXGBE_SECTXSTAT_SECTX_RDY`).
pub const SECTXSTAT_SECTX_RDY: u32 = 1 << 0;

/// TXPBSIZE: size in KiB at bits 19:10, a byte count written as is
/// (`IXGBE_TXPBSIZE_SHIFT`).
pub const TXPBSIZE_SHIFT: u32 = 10;
/// TXPBSIZE: the whole 160 KiB TX packet buffer (`IXGBE_TXPBSIZE_MAX`).
pub const TXPBSIZE_MAX: u32 = 0x0002_8000;
/// Largest TX packet in KiB the packet-buffer threshold must leave room for
/// (`IXGBE_TXPKT_SIZE_MAX`): Linux sets TXPBTHRESH(n) to the buffer size in
/// KiB minus this.
pub const TXPKT_SIZE_MAX_KB: u32 = 0xA;

// ---- RX write-back descriptor: 82599 meanings ------------------------------------
//
// The layout is the one in `crate::desc`; these are the 82599's bits of the
// extended error field (upper byte of `status_error`), which differ from igb's.

/// RX write-back error: Ethernet CRC error (`IXGBE_RXDADV_ERR_CE`). Only
/// seen with FCTRL.SBP set, like the other frame errors.
pub const RXDADV_ERR_CE: u32 = 1 << 24;
/// RX write-back error: length error (`IXGBE_RXDADV_ERR_LE`).
pub const RXDADV_ERR_LE: u32 = 1 << 25;
/// RX write-back error: packet (symbol) error (`IXGBE_RXDADV_ERR_PE`).
pub const RXDADV_ERR_PE: u32 = 1 << 27;
/// RX write-back error: oversize (`IXGBE_RXDADV_ERR_OSE`).
pub const RXDADV_ERR_OSE: u32 = 1 << 28;
/// RX write-back error: undersize (`IXGBE_RXDADV_ERR_USE`).
pub const RXDADV_ERR_USE: u32 = 1 << 29;
/// RX write-back error: TCP/UDP checksum error (`IXGBE_RXDADV_ERR_TCPE`).
pub const RXDADV_ERR_TCPE: u32 = 1 << 30;
/// RX write-back error: IPv4 header checksum error (`IXGBE_RXDADV_ERR_IPE`).
/// Bit 31, where igb reports RXE: `crate::desc::RxCompletion::rx_error`
/// means "IP checksum error" on an 82599.
pub const RXDADV_ERR_IPE: u32 = 1 << 31;
/// The frame errors, any of which makes the frame bad
/// (`IXGBE_RXDADV_ERR_FRAME_ERR_MASK` = CE | LE | PE | OSE | USE).
pub const RXDADV_ERR_FRAME_ERR_MASK: u32 =
    RXDADV_ERR_CE | RXDADV_ERR_LE | RXDADV_ERR_PE | RXDADV_ERR_OSE | RXDADV_ERR_USE;

/// RX write-back `pkt_info` bits 3:0: RSS type (`IXGBE_RXDADV_RSSTYPE_MASK`).
pub const RXDADV_RSSTYPE_MASK: u16 = 0xF;
/// RSS type: no hash computed (`IXGBE_RXDADV_RSSTYPE_NONE`).
pub const RSSTYPE_NONE: u16 = 0x0;
/// RSS type: TCP/IPv4 (`IXGBE_RXDADV_RSSTYPE_IPV4_TCP`).
pub const RSSTYPE_TCP_IPV4: u16 = 0x1;
/// RSS type: IPv4 (`IXGBE_RXDADV_RSSTYPE_IPV4`).
pub const RSSTYPE_IPV4: u16 = 0x2;
/// RSS type: TCP/IPv6 (`IXGBE_RXDADV_RSSTYPE_IPV6_TCP`).
pub const RSSTYPE_TCP_IPV6: u16 = 0x3;
/// RSS type: IPv6 with extension headers (`IXGBE_RXDADV_RSSTYPE_IPV6_EX`).
pub const RSSTYPE_IPV6_EX: u16 = 0x4;
/// RSS type: IPv6 (`IXGBE_RXDADV_RSSTYPE_IPV6`).
pub const RSSTYPE_IPV6: u16 = 0x5;
/// RSS type: TCP/IPv6 with extension headers (`IXGBE_RXDADV_RSSTYPE_IPV6_TCP_EX`).
pub const RSSTYPE_TCP_IPV6_EX: u16 = 0x6;
/// RSS type: UDP/IPv4 (`IXGBE_RXDADV_RSSTYPE_IPV4_UDP`).
pub const RSSTYPE_UDP_IPV4: u16 = 0x7;
/// RSS type: UDP/IPv6 (`IXGBE_RXDADV_RSSTYPE_IPV6_UDP`).
pub const RSSTYPE_UDP_IPV6: u16 = 0x8;
/// RSS type: UDP/IPv6 with extension headers (`IXGBE_RXDADV_RSSTYPE_IPV6_UDP_EX`).
pub const RSSTYPE_UDP_IPV6_EX: u16 = 0x9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_link_and_reset_bits_match_ixgbe_type_h() {
        assert_eq!((ESDP_SDP0, ESDP_SDP1, ESDP_SDP2, ESDP_SDP3), (1, 2, 4, 8));
        assert_eq!((ESDP_SDP0_DIR, ESDP_SDP3_DIR), (0x100, 0x800));
        assert_eq!((FWSM_MODE_MASK, FWSM_FW_MODE_PT), (0xE, 0x4));
        assert_eq!(ANLP1_AN_STATE_MASK, 0x000f_0000);
        assert_eq!(AUTOC2_LINK_DISABLE_MASK, 0x7000_0000);
        assert_eq!(
            AUTOC2_UPPER_MASK & AUTOC2_LINK_DISABLE_MASK,
            AUTOC2_LINK_DISABLE_MASK
        );
        assert_eq!(GCR_EXT_BUFFERS_CLEAR, 0x4000_0000);
        assert_eq!(DCA_TXCTRL_DESC_WRO_EN, 1 << 11);
        assert_eq!(DCA_RXCTRL_CLEAR, 0xB000);
    }

    #[test]
    fn general_bits_match_ixgbe_type_h() {
        assert_eq!(CTRL_GIO_DIS, 0x0000_0004);
        assert_eq!(CTRL_LNK_RST, 0x0000_0008);
        assert_eq!(CTRL_RST, 0x0400_0000);
        assert_eq!(CTRL_RST_MASK, 0x0400_0008);
        assert_eq!(STATUS_GIO, 0x0008_0000);
        assert_eq!(STATUS_LAN_ID_MASK, 0x0000_000C);
        assert_eq!(CTRL_EXT_PFRSTD, 0x0000_4000);
        assert_eq!(CTRL_EXT_NS_DIS, 0x0001_0000);
        assert_eq!(CTRL_EXT_RO_DIS, 0x0002_0000);
        assert_eq!(CTRL_EXT_DRV_LOAD, 0x1000_0000);
        assert_eq!((MFLCN_DPF, MFLCN_RFCE, FCCFG_TFCE_802_3X), (0x2, 0x8, 0x8));
        assert_eq!(EEC_PRES, 0x0000_0100);
        assert_eq!(EEC_ARD, 0x0000_0200);
        assert_eq!((EERD_START, EERD_DONE), (1, 2));
        assert_eq!((EERD_ADDR_SHIFT, EERD_DATA_SHIFT), (2, 16));
    }

    #[test]
    fn interrupt_bits_match_ixgbe_type_h() {
        assert_eq!(EICR_RTX_QUEUE, 0x0000_FFFF);
        assert_eq!(EICR_RX_MISS, 0x0002_0000);
        assert_eq!(EICR_LSC, 0x0010_0000);
        assert_eq!(EICR_OTHER, 0x8000_0000);
        assert_eq!(ALL_INTERRUPTS, 0xFFFF_FFFF);
    }

    #[test]
    fn link_bits_match_ixgbe_type_h() {
        assert_eq!(AUTOC_FLU, 0x0000_0001);
        assert_eq!(AUTOC_AN_RESTART, 0x0000_1000);
        assert_eq!(AUTOC_LMS_SHIFT, 13);
        assert_eq!(AUTOC_LMS_MASK, 0x0000_E000);
        assert_eq!(AUTOC_LMS_1G_LINK_NO_AN, 0);
        assert_eq!(AUTOC_LMS_10G_LINK_NO_AN, 0x0000_2000);
        assert_eq!(AUTOC_LMS_1G_AN, 0x0000_4000);
        assert_eq!(AUTOC_LMS_10G_SERIAL, 0x0000_6000);
        assert_eq!(AUTOC_LMS_KX4_KX_KR, 0x0000_8000);
        assert_eq!(AUTOC_LMS_SGMII_1G_100M, 0x0000_A000);
        assert_eq!(AUTOC_LMS_KX4_KX_KR_1G_AN, 0x0000_C000);
        assert_eq!(AUTOC_LMS_KX4_KX_KR_SGMII, 0x0000_E000);
        assert_eq!(AUTOC_10G_PMA_PMD_MASK, 0x0000_0180);
        assert_eq!(AUTOC_10G_PMA_PMD_SHIFT, 7);
        assert_eq!(AUTOC_10G_XAUI, 0);
        assert_eq!(AUTOC2_10G_SERIAL_PMA_PMD_MASK, 0x0003_0000);
        assert_eq!(AUTOC2_10G_SFI, 0x0002_0000);
        assert_eq!(LINKS_KX_AN_COMP, 0x8000_0000);
        assert_eq!(LINKS_UP, 0x4000_0000);
        assert_eq!(LINKS_SPEED_MASK, 0x3000_0000);
        assert_eq!(LINKS_SPEED_10G, 0x3000_0000);
        assert_eq!(LINKS_SPEED_1G, 0x2000_0000);
        assert_eq!(LINKS_SPEED_100M, 0x1000_0000);
    }

    #[test]
    fn speed_decoding() {
        assert_eq!(links_speed_mbps(LINKS_UP | LINKS_SPEED_10G), 10_000);
        assert_eq!(links_speed_mbps(LINKS_UP | LINKS_SPEED_1G), 1_000);
        assert_eq!(links_speed_mbps(LINKS_UP | LINKS_SPEED_100M), 100);
        assert_eq!(links_speed_mbps(LINKS_UP), 0);
        // Other LINKS bits do not leak into the field.
        assert_eq!(links_speed_mbps(!LINKS_SPEED_MASK), 0);
        assert_eq!(links_speed_mbps(0xFFFF_FFFF), 10_000);
    }

    #[test]
    fn mac_and_receive_bits_match_ixgbe_type_h() {
        assert_eq!(HLREG0_TXCRCEN, 0x0000_0001);
        assert_eq!(HLREG0_RXCRCSTRP, 0x0000_0002);
        assert_eq!(HLREG0_JUMBOEN, 0x0000_0004);
        assert_eq!(HLREG0_TXPADEN, 0x0000_0400);
        assert_eq!(HLREG0_LPBK, 0x0000_8000);
        assert_eq!(MAXFRS_MFS_MASK, 0xFFFF_0000);
        assert_eq!(RXCTRL_RXEN, 0x0000_0001);
        assert_eq!(RXCTRL_DMBYPS, 0x0000_0002);
        assert_eq!(RDRXCTL_CRCSTRIP, 0x0000_0002);
        assert_eq!(RDRXCTL_DMAIDONE, 0x0000_0008);
        assert_eq!(RDRXCTL_RSCFRSTSIZE, 0x003E_0000);
        assert_eq!(RDRXCTL_RSCACKC, 0x0200_0000);
        assert_eq!(RDRXCTL_FCOE_WRFIX, 0x0400_0000);
        assert_eq!(FCTRL_SBP, 0x0000_0002);
        assert_eq!(FCTRL_MPE, 0x0000_0100);
        assert_eq!(FCTRL_UPE, 0x0000_0200);
        assert_eq!(FCTRL_BAM, 0x0000_0400);
        assert_eq!(VLNCTRL_VFE, 0x4000_0000);
        assert_eq!(VLNCTRL_VME, 0x8000_0000);
        assert_eq!(SECRXCTRL_SECRX_DIS, 1);
        assert_eq!(SECRXCTRL_RX_DIS, 2);
        assert_eq!(SECRXSTAT_SECRX_RDY, 1);
        assert_eq!(RXPBSIZE_SHIFT, 10);
        assert_eq!(RXPBSIZE_MAX, 512 << 10);
        assert_eq!(RXPBSIZE_128KB, 128 << 10);
    }

    #[test]
    fn queue_bits_match_ixgbe_type_h() {
        assert_eq!(SRRCTL_BSIZEPKT_MASK, 0x0000_007F);
        assert_eq!(SRRCTL_BSIZEPKT_SHIFT, 10);
        assert_eq!(SRRCTL_BSIZEPKT_UNIT, 1024);
        assert_eq!(SRRCTL_DESCTYPE_MASK, 0x0E00_0000);
        assert_eq!(SRRCTL_DESCTYPE_ADV_ONEBUF, 0x0200_0000);
        assert_eq!(SRRCTL_DROP_EN, 0x1000_0000);
        // A 2 KiB buffer is BSIZEPKT = 2.
        assert_eq!(2048 >> SRRCTL_BSIZEPKT_SHIFT, 2);
        assert_eq!(XDCTL_ENABLE, 0x0200_0000);
        assert_eq!(XDCTL_SWFLSH, 0x0400_0000);
        assert_eq!(TXDCTL_WTHRESH_SHIFT, 16);
        // Linux ixgbe_configure_tx_ring: PTHRESH 32, HTHRESH 1, WTHRESH 1.
        let txdctl =
            32 << TXDCTL_PTHRESH_SHIFT | 1 << TXDCTL_HTHRESH_SHIFT | 1 << TXDCTL_WTHRESH_SHIFT;
        assert_eq!(txdctl, 32 | (1 << 8) | (1 << 16));
        assert_eq!(DCA_RXCTRL_DESC_RRO_EN, 1 << 9);
        assert_eq!(DCA_RXCTRL_DATA_WRO_EN, 1 << 13);
        assert_eq!(DCA_RXCTRL_HEAD_WRO_EN, 1 << 15);
    }

    #[test]
    fn rss_bits_match_ixgbe_type_h() {
        assert_eq!(MRQC_MRQE_MASK, 0xF);
        assert_eq!(MRQC_MRQE_RSS, 0x0000_0001);
        assert_eq!(MRQC_FIELD_TCP_IPV4, 0x0001_0000);
        assert_eq!(MRQC_FIELD_IPV4, 0x0002_0000);
        assert_eq!(MRQC_FIELD_TCP_IPV6_EX, 0x0004_0000);
        assert_eq!(MRQC_FIELD_IPV6_EX, 0x0008_0000);
        assert_eq!(MRQC_FIELD_IPV6, 0x0010_0000);
        assert_eq!(MRQC_FIELD_TCP_IPV6, 0x0020_0000);
        assert_eq!(MRQC_FIELD_UDP_IPV4, 0x0040_0000);
        assert_eq!(MRQC_FIELD_UDP_IPV6, 0x0080_0000);
        assert_eq!(MRQC_FIELD_UDP_IPV6_EX, 0x0100_0000);
        assert_eq!(RXCSUM_IPPCSE, 0x0000_1000);
        assert_eq!(RXCSUM_PCSD, 0x0000_2000);
        assert_eq!(RAH_AV, 0x8000_0000);
        // The hash-field bits sit where igb's do; only the mode value differs.
        assert_eq!(MRQC_FIELD_TCP_IPV4, crate::igb::bits::MRQC_FIELD_TCP_IPV4);
        assert_eq!(MRQC_FIELD_UDP_IPV6, crate::igb::bits::MRQC_FIELD_UDP_IPV6);
        assert_ne!(MRQC_MRQE_RSS, crate::igb::bits::MRQC_MODE_RSS);
    }

    #[test]
    fn reta_packing_is_the_shared_one() {
        // ixgbe_store_reta: reta |= entry << (i & 3) * 8, written at i >> 2.
        let r = crate::rss::Reta::round_robin(super::super::MAX_RSS_QUEUES);
        let regs = r.registers();
        assert_eq!(regs[0], 0x0302_0100);
        assert_eq!(regs[3], 0x0F0E_0D0C);
        assert!(r.0.iter().all(|&e| e as u32 & !RETA_ENTRY_MASK == 0));
    }

    #[test]
    fn transmit_bits_match_ixgbe_type_h() {
        assert_eq!(DMATXCTL_TE, 0x1);
        assert_eq!(RTTDCS_ARBDIS, 0x0000_0040);
        assert_eq!(MTQC_64Q_1PB, 0x0);
        assert_eq!(PFDTXGSWC_VT_LBEN, 0x1);
        assert_eq!(SECTXCTRL_SECTX_DIS, 1);
        assert_eq!(SECTXCTRL_TX_DIS, 2);
        assert_eq!(SECTXCTRL_STORE_FORWARD, 4);
        assert_eq!(SECTXSTAT_SECTX_RDY, 1);
        assert_eq!(TXPBSIZE_SHIFT, 10);
        assert_eq!(TXPBSIZE_MAX, 160 << 10);
        assert_eq!(TXPKT_SIZE_MAX_KB, 10);
    }

    #[test]
    fn rx_writeback_errors_match_ixgbe_type_h() {
        assert_eq!(RXDADV_ERR_CE, 0x0100_0000);
        assert_eq!(RXDADV_ERR_LE, 0x0200_0000);
        assert_eq!(RXDADV_ERR_PE, 0x0800_0000);
        assert_eq!(RXDADV_ERR_OSE, 0x1000_0000);
        assert_eq!(RXDADV_ERR_USE, 0x2000_0000);
        assert_eq!(RXDADV_ERR_TCPE, 0x4000_0000);
        assert_eq!(RXDADV_ERR_IPE, 0x8000_0000);
        assert_eq!(RXDADV_ERR_FRAME_ERR_MASK, 0x3B00_0000);
        // Same bit, different meaning on igb.
        assert_eq!(RXDADV_ERR_IPE, crate::desc::RXD_ERR_RXE);
        assert_eq!(RXDADV_RSSTYPE_MASK, 0xF);
        assert_eq!(
            [
                RSSTYPE_NONE,
                RSSTYPE_TCP_IPV4,
                RSSTYPE_IPV4,
                RSSTYPE_TCP_IPV6
            ],
            [0, 1, 2, 3]
        );
        assert_eq!(
            [RSSTYPE_IPV6_EX, RSSTYPE_IPV6, RSSTYPE_TCP_IPV6_EX],
            [4, 5, 6]
        );
        assert_eq!(
            [RSSTYPE_UDP_IPV4, RSSTYPE_UDP_IPV6, RSSTYPE_UDP_IPV6_EX],
            [7, 8, 9]
        );
    }
}
