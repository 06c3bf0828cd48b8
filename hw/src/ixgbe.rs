//! Intel ixgbe family, 82599 (X520 adapters): register map, bit fields and
//! counters.
//!
//! Sources: Linux `drivers/net/ethernet/intel/ixgbe/` (`ixgbe_type.h` for
//! every offset and bit, each pinned by a unit test to the macro it names;
//! `ixgbe_82599.c`, `ixgbe_common.c` and `ixgbe_main.c` for the order of
//! operations), cross-checked with ixy's C driver (`src/driver/ixgbe.c`),
//! whose comments give the 82599 datasheet's chapter 4 section numbers used
//! below. Register descriptions (datasheet chapter 8) are cited by Linux
//! macro instead of section: no copy of the datasheet was at hand to check
//! their numbers. The advanced RX/TX descriptors are shared with igb and live
//! in [`crate::desc`]; the 82599's meanings of the RX error bits are in
//! [`bits`].
//!
//! # Bring-up sequence
//!
//! What the driver follows, after the 82599 datasheet §4.6 as ixy and Linux
//! implement it. "Poll" always means with a bound and a timeout error.
//!
//! 1. **Mask interrupts** (§4.6.3.1): write [`bits::ALL_INTERRUPTS`] to
//!    `EIMC`. pollnic never unmasks them.
//! 2. **Stop PCIe mastering** (Linux, before every reset): set
//!    `CTRL.GIO_DIS`, poll until `STATUS.GIO` reads 0. If it never clears,
//!    Intel's 82599 specification update recommends two software resets in
//!    a row, more than 1 µs apart.
//! 3. **Global reset** (§4.6.3.2): set `CTRL.RST` (ixy also sets
//!    `CTRL.LNK_RST`, which resets the link as well); poll until neither bit
//!    of [`bits::CTRL_RST_MASK`] reads back set, then wait at least 10 ms
//!    before touching the device (ixy waits 10 ms, Linux 50 to 100 ms).
//! 4. **Mask interrupts again** (§4.6.3.1): the reset restored `EIMS`.
//! 5. **Wait for the EEPROM** (§4.6.3): poll `EEC.ARD` (auto-read done). The
//!    EEPROM is what loads the MAC address into `RAL(0)`/`RAH(0)` and the
//!    board's link mode into `AUTOC`/`AUTOC2`.
//! 6. **Wait for the DMA** (§4.6.3): poll `RDRXCTL.DMAIDONE`.
//! 7. **Start the link** (§4.6.4): first empty RAR 1..127, the MTA and the
//!    VFTA and turn relaxed ordering off in DCA_RXCTRL/DCA_TXCTRL (Linux
//!    `ixgbe_init_rx_addrs_generic`, `ixgbe_start_hw_gen2`). On SFP+ boards
//!    turn the laser on (clear `ESDP.SDP3`, wait 100 ms), set `AUTOC.LMS` =
//!    [`bits::AUTOC_LMS_10G_SERIAL`] and do the pipeline reset (Linux
//!    `ixgbe_reset_pipeline_82599`: LMS bit 2 toggled with AN_RESTART, ANLP1
//!    polled, then the wanted LMS with AN_RESTART); on other boards keep the
//!    link mode the EEPROM chose (ixy forces LMS to 10G serial everywhere)
//!    and set `AUTOC.AN_RESTART`. Do not wait here; step 14 does. (Linux takes a SW/FW semaphore
//!    around `AUTOC` writes when the "LESM" firmware is active; a board with
//!    such firmware is not covered by this sequence.)
//! 8. **Clear the statistics** (§4.6.5): read every register of
//!    [`stats::COUNTERS`] once; they clear on read.
//! 9. **Receive path, with `RXCTRL.RXEN` = 0** (§4.6.7):
//!    1. clear `RXCTRL.RXEN`;
//!    2. one packet buffer, no DCB (§4.6.11.3.4): `RXPBSIZE(0)` =
//!       [`bits::RXPBSIZE_MAX`] (all 512 KiB; Linux gives it all when flow
//!       director is off, ixy 128 KiB), `RXPBSIZE(1..8)` = 0;
//!    3. CRC strip in both places: `HLREG0.RXCRCSTRP` and
//!       `RDRXCTL.CRCSTRIP`; in the same `RDRXCTL` write set `RSCACKC` and
//!       `FCOE_WRFIX` and clear `RSCFRSTSIZE` (Linux: "required by hardware");
//!    4. filters: `FCTRL.BAM` (broadcasts), plus `UPE`/`MPE` for promiscuous
//!       mode; `MAXFRS.MFS` = MTU + 18 with `HLREG0.JUMBOEN` set (Linux
//!       `ixgbe_set_rx_buffer_len`; pollnic writes them right after step 8);
//!    5. each queue q: `SRRCTL(q)` = buffer size >> 10 |
//!       `DESCTYPE_ADV_ONEBUF` | `DROP_EN`; `RDBAL(q)`/`RDBAH(q)` = ring
//!       IOVA; `RDLEN(q)` = descriptors × 16; `RDH(q)` = `RDT(q)` = 0; clear
//!       bit 12 of `DCA_RXCTRL(q)` (ixy, see [`bits::DCA_RXCTRL_BIT12`]);
//!    6. set `CTRL_EXT.NS_DIS` (ixy's reading of the end of §4.6.7);
//!    7. with more than one queue, RSS: `RSSRK(0..10)`, `RETA(0..32)` (both
//!       as [`crate::rss`] packs them), `RXCSUM.PCSD`, then `MRQC` =
//!       [`bits::MRQC_MRQE_RSS`] | hash fields; Linux also writes
//!       `PSRTYPE(0)`.
//! 10. **Transmit path** (§4.6.8):
//!     1. `HLREG0.TXCRCEN` | `HLREG0.TXPADEN` (the MAC appends the FCS and
//!        pads short frames);
//!     2. one packet buffer: `TXPBSIZE(0)` = [`bits::TXPBSIZE_MAX`] (160 KiB;
//!        ixy writes 40 KiB), `TXPBSIZE(1..8)` = 0, and per Linux
//!        `TXPBTHRESH(0)` = 160 − [`bits::TXPKT_SIZE_MAX_KB`];
//!     3. no DCB/VT: `DTXMXSZRQ` = 0xFFFF (ixy); set `RTTDCS.ARBDIS`, write
//!        `MTQC` = [`bits::MTQC_64Q_1PB`], clear `RTTDCS.ARBDIS` (Linux);
//!     4. each queue q: `TDBAL(q)`/`TDBAH(q)`, `TDLEN(q)` = descriptors × 16,
//!        `TDH(q)` = `TDT(q)` = 0, thresholds in `TXDCTL(q)` (DPDK: PTHRESH
//!        32, HTHRESH 0, WTHRESH 0, which agrees with RS at batch ends;
//!        with WTHRESH > 0 the part ignores RS; keep PTHRESH + WTHRESH ≤ 40);
//!     5. set `DMATXCTL.TE`. It must come before any `TXDCTL.ENABLE`.
//! 11. **Enable the RX queues**: for each q set `RXDCTL(q).ENABLE`, poll
//!     until it reads back 1 (Linux: 10 tries, 1 to 2 ms apart), then write
//!     `RDT(q)` = descriptors − 1 once the ring holds buffers.
//! 12. **Enable the TX queues**: for each q set `TXDCTL(q).ENABLE` and poll
//!     until it reads back 1. `TDT(q)` stays 0 until the first send.
//! 13. **Start receiving** (82599 erratum workaround, Linux
//!     `ixgbe_enable_rx_dma_82599`): set `SECRXCTRL.RX_DIS`, poll
//!     `SECRXSTAT.SECRX_RDY` (Linux tries 30 × 10 µs and carries on anyway),
//!     set `RXCTRL.RXEN`, clear `SECRXCTRL.RX_DIS`.
//! 14. **Wait for the link**: poll `LINKS` until [`bits::LINKS_UP`] (Linux
//!     allows 9 s, `IXGBE_LINK_UP_TIME`; ixy 10 s); the speed is
//!     [`bits::links_speed_mbps`] of the same read.

pub mod bits;
pub mod irq;
pub mod regs;
pub mod stats;

pub use crate::igb::VENDOR_INTEL;

/// 82599 KX4 backplane (`IXGBE_DEV_ID_82599_KX4`).
pub const DEV_ID_82599_KX4: u16 = 0x10F7;
/// 82599 KX4 mezzanine, "Ethernet X520 10GbE Dual Port KX4 Mezz"
/// (`IXGBE_DEV_ID_82599_KX4_MEZZ`).
pub const DEV_ID_82599_KX4_MEZZ: u16 = 0x1514;
/// 82599 combined backplane (`IXGBE_DEV_ID_82599_COMBO_BACKPLANE`).
pub const DEV_ID_82599_COMBO_BACKPLANE: u16 = 0x10F8;
/// 82599 CX4 (`IXGBE_DEV_ID_82599_CX4`).
pub const DEV_ID_82599_CX4: u16 = 0x10F9;
/// 82599ES SFI/SFP+, the X520-DA2/SR2-style SFP+ adapters
/// (`IXGBE_DEV_ID_82599_SFP`).
pub const DEV_ID_82599_SFP: u16 = 0x10FB;
/// 82599 XAUI LOM (`IXGBE_DEV_ID_82599_XAUI_LOM`).
pub const DEV_ID_82599_XAUI_LOM: u16 = 0x10FC;
/// "Ethernet Express Module X520-P2" (`IXGBE_DEV_ID_82599_SFP_EM`).
pub const DEV_ID_82599_SFP_EM: u16 = 0x1507;
/// 82599 KR backplane (`IXGBE_DEV_ID_82599_KR`).
pub const DEV_ID_82599_KR: u16 = 0x1517;
/// 82599 with an external 10GBASE-T PHY (`IXGBE_DEV_ID_82599_T3_LOM`).
pub const DEV_ID_82599_T3_LOM: u16 = 0x151C;
/// 82599 SFP+ with FCoE (`IXGBE_DEV_ID_82599_SFP_FCOE`).
pub const DEV_ID_82599_SFP_FCOE: u16 = 0x1529;
/// 82599 backplane with FCoE (`IXGBE_DEV_ID_82599_BACKPLANE_FCOE`).
pub const DEV_ID_82599_BACKPLANE_FCOE: u16 = 0x152A;
/// "Ethernet Server Adapter X520-4" (`IXGBE_DEV_ID_82599_SFP_SF_QP`).
pub const DEV_ID_82599_SFP_SF_QP: u16 = 0x154A;
/// "Ethernet 10G 2P X520 Adapter" (`IXGBE_DEV_ID_82599_SFP_SF2`).
pub const DEV_ID_82599_SFP_SF2: u16 = 0x154D;
/// 82599 LS (`IXGBE_DEV_ID_82599_LS`).
pub const DEV_ID_82599_LS: u16 = 0x154F;
/// 82599EN single-port SFP+ (`IXGBE_DEV_ID_82599EN_SFP`).
pub const DEV_ID_82599EN_SFP: u16 = 0x1557;
/// "Ethernet Converged Network Adapter X520-Q1" (`IXGBE_DEV_ID_82599_QSFP_SF_QP`).
pub const DEV_ID_82599_QSFP_SF_QP: u16 = 0x1558;
/// The 82599's SR-IOV virtual function (`IXGBE_DEV_ID_82599_VF`): a different
/// programming model (registers through a PF mailbox); not in [`DEV_IDS_82599`].
pub const DEV_ID_82599_VF: u16 = 0x10ED;

/// Every 82599 physical-function device ID in Linux `ixgbe_type.h`.
pub const DEV_IDS_82599: &[u16] = &[
    DEV_ID_82599_KX4,
    DEV_ID_82599_KX4_MEZZ,
    DEV_ID_82599_COMBO_BACKPLANE,
    DEV_ID_82599_CX4,
    DEV_ID_82599_SFP,
    DEV_ID_82599_XAUI_LOM,
    DEV_ID_82599_SFP_EM,
    DEV_ID_82599_KR,
    DEV_ID_82599_T3_LOM,
    DEV_ID_82599_SFP_FCOE,
    DEV_ID_82599_BACKPLANE_FCOE,
    DEV_ID_82599_SFP_SF_QP,
    DEV_ID_82599_SFP_SF2,
    DEV_ID_82599_LS,
    DEV_ID_82599EN_SFP,
    DEV_ID_82599_QSFP_SF_QP,
];

/// Whether Intel device `dev_id` is an 82599 physical function.
pub const fn is_82599(dev_id: u16) -> bool {
    let mut i = 0;
    while i < DEV_IDS_82599.len() {
        if DEV_IDS_82599[i] == dev_id {
            return true;
        }
        i += 1;
    }
    false
}

/// Number of RX and of TX queues of the 82599 (the `IXGBE_RDBAL(_i)` and
/// `IXGBE_TDBAL(_i)` register blocks run to queue 127).
pub const MAX_QUEUES_82599: u16 = 128;
/// Queues RSS can spread over: RETA entries are 4 bits wide on the 82599
/// (Linux `IXGBE_MAX_RSS_INDICES`).
pub const MAX_RSS_QUEUES: u16 = 16;
/// Smallest ring size, in descriptors (Linux `IXGBE_MIN_RXD`, `IXGBE_MIN_TXD`).
pub const MIN_RING_SIZE: u16 = 64;
/// Largest ring size, in descriptors: Linux's long-standing `IXGBE_MAX_RXD` /
/// `IXGBE_MAX_TXD` of 4096, also igb's limit. Newer kernels allow 8192 on the
/// 82599 (`IXGBE_MAX_RXD_82599`); pollnic keeps 4096.
pub const MAX_RING_SIZE: u16 = 4096;
/// Ring sizes must be a multiple of this many descriptors, i.e. RDLEN/TDLEN a
/// multiple of 128 bytes (Linux `IXGBE_REQ_RX_DESCRIPTOR_MULTIPLE`,
/// `IXGBE_REQ_TX_DESCRIPTOR_MULTIPLE`).
pub const RING_SIZE_ALIGN: u16 = 8;

/// Whether `n` descriptors is a ring size the 82599 accepts
/// (multiple of [`RING_SIZE_ALIGN`] within [`MIN_RING_SIZE`]..=[`MAX_RING_SIZE`]).
pub const fn valid_ring_size(n: u32) -> bool {
    n >= MIN_RING_SIZE as u32 && n <= MAX_RING_SIZE as u32 && n % RING_SIZE_ALIGN as u32 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes() {
        assert!(valid_ring_size(64));
        assert!(valid_ring_size(72));
        assert!(valid_ring_size(512));
        assert!(valid_ring_size(4096));
        assert!(!valid_ring_size(32), "igb's minimum is below the 82599's");
        assert!(!valid_ring_size(0));
        assert!(!valid_ring_size(100));
        assert!(!valid_ring_size(4104));
        assert!(!valid_ring_size(8192));
        // 8 descriptors of 16 bytes: RDLEN stays a multiple of 128 bytes.
        assert_eq!(RING_SIZE_ALIGN as usize * crate::desc::DESC_SIZE, 128);
    }

    #[test]
    fn device_ids_match_ixgbe_type_h() {
        assert_eq!(VENDOR_INTEL, 0x8086);
        assert_eq!(DEV_ID_82599_SFP, 0x10FB);
        assert_eq!(DEV_ID_82599_KX4, 0x10F7);
        assert_eq!(DEV_ID_82599_KX4_MEZZ, 0x1514);
        assert_eq!(DEV_ID_82599_COMBO_BACKPLANE, 0x10F8);
        assert_eq!(DEV_ID_82599_CX4, 0x10F9);
        assert_eq!(DEV_ID_82599_XAUI_LOM, 0x10FC);
        assert_eq!(DEV_ID_82599_SFP_EM, 0x1507);
        assert_eq!(DEV_ID_82599_KR, 0x1517);
        assert_eq!(DEV_ID_82599_T3_LOM, 0x151C);
        assert_eq!(DEV_ID_82599_SFP_FCOE, 0x1529);
        assert_eq!(DEV_ID_82599_BACKPLANE_FCOE, 0x152A);
        assert_eq!(DEV_ID_82599_SFP_SF_QP, 0x154A);
        assert_eq!(DEV_ID_82599_SFP_SF2, 0x154D);
        assert_eq!(DEV_ID_82599_LS, 0x154F);
        assert_eq!(DEV_ID_82599EN_SFP, 0x1557);
        assert_eq!(DEV_ID_82599_QSFP_SF_QP, 0x1558);
        assert_eq!(DEV_ID_82599_VF, 0x10ED);
    }

    #[test]
    fn device_id_table() {
        assert_eq!(DEV_IDS_82599.len(), 16);
        for (i, a) in DEV_IDS_82599.iter().enumerate() {
            assert!(is_82599(*a));
            assert!(DEV_IDS_82599[i + 1..].iter().all(|b| a != b));
        }
        assert!(!is_82599(DEV_ID_82599_VF));
        assert!(!is_82599(crate::igb::DEV_ID_82576));
        assert!(!is_82599(0x10B6), "82598");
        assert!(!is_82599(0x1528), "X540-T");
    }

    #[test]
    fn queue_counts() {
        assert_eq!(MAX_QUEUES_82599, 128);
        assert_eq!(MAX_RSS_QUEUES as u32, bits::RETA_ENTRY_MASK + 1);
        assert!(regs::rdt(MAX_QUEUES_82599 - 1) < regs::BAR0_MIN_SIZE as u32);
    }
}
