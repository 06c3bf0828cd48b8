//! 82599 register offsets in BAR0, in bytes. All registers are 32 bits wide and
//! must be accessed with aligned 32-bit loads and stores.
//!
//! Every offset is pinned by a unit test to the Linux
//! `drivers/net/ethernet/intel/ixgbe/ixgbe_type.h` macro named in its doc
//! comment. That header serves the 82598, 82599, X540 and X550 at once; where
//! it has a separate 82599 form (`IXGBE_DCA_TXCTRL_82599`, the queue-indexed
//! macros with a branch at queue 16 or 64) the 82599 form is the one used here.
//! The per-register sections of the 82599 datasheet (chapter 8) could not be
//! checked against a copy of the datasheet while this was written, so no
//! section number is given for them: the Linux macro is the citation.
//!
//! The RSS registers (MRQC 0x05818, RETA 0x05C00, RSSRK 0x05C80) are at the
//! same offsets on the 82598 and the 82599 (one macro each in `ixgbe_type.h`);
//! what differs is the RETA entry format (see [`super::bits::RETA_ENTRY_MASK`]).

// ---- General -------------------------------------------------------------------

/// Device Control (`IXGBE_CTRL`).
pub const CTRL: u32 = 0x00000;
/// Device Status, read-only (`IXGBE_STATUS`).
pub const STATUS: u32 = 0x00008;
/// Extended Device Control (`IXGBE_CTRL_EXT`).
pub const CTRL_EXT: u32 = 0x00018;
/// EEPROM/Flash Control (`IXGBE_EEC_8259X`; `IXGBE_EEC(hw)` resolves to it on
/// the 82599). Note the 0x10000 page: not at the igb's EECD offset.
pub const EEC: u32 = 0x10010;
/// EEPROM Read (`IXGBE_EERD`).
pub const EERD: u32 = 0x10014;
/// Extended SDP Control: the software-definable pins (`IXGBE_ESDP`). On SFP+
/// boards SDP3 drives the TX laser disable and SDP2 reads the module-present
/// line (Linux `ixgbe_disable_tx_laser_multispeed_fiber`,
/// `ixgbe_check_mac_link_generic`).
pub const ESDP: u32 = 0x00020;
/// Firmware Semaphore: the manageability firmware mode (`IXGBE_FWSM_8259X`).
pub const FWSM: u32 = 0x10148;
/// PCIe Control Extended (`IXGBE_GCR_EXT`): the buffer-clear of the
/// double-reset flow (Linux `ixgbe_clear_tx_pending`).
pub const GCR_EXT: u32 = 0x11050;

// ---- Interrupts (polled driver: only masked and read) ----------------------------

/// Extended Interrupt Cause Read, write 1 to clear (`IXGBE_EICR`).
pub const EICR: u32 = 0x00800;
/// Extended Interrupt Auto Clear (`IXGBE_EIAC`).
pub const EIAC: u32 = 0x00810;
/// Extended Interrupt Mask Set/Read (`IXGBE_EIMS`).
pub const EIMS: u32 = 0x00880;
/// Extended Interrupt Mask Clear (`IXGBE_EIMC`).
pub const EIMC: u32 = 0x00888;
/// General Purpose Interrupt Enable (`IXGBE_GPIE`).
pub const GPIE: u32 = 0x00898;
/// Extended Interrupt Mask Clear for MSI-X vectors, `n` in 0..2
/// (`IXGBE_EIMC_EX(n)`; Linux writes both with all ones when it masks every
/// vector on the 82599).
pub const fn eimc_ex(n: u16) -> u32 {
    0x00AB0 + 4 * n as u32
}

// ---- MAC / link ------------------------------------------------------------------

/// MAC Core Control 0: CRC strip/insert, padding, jumbo, loopback (`IXGBE_HLREG0`).
pub const HLREG0: u32 = 0x04240;
/// Max Frame Size (`IXGBE_MAXFRS`; same offset as the 82598's `IXGBE_MHADD`).
pub const MAXFRS: u32 = 0x04268;
/// Auto-Negotiation Control (`IXGBE_AUTOC`).
pub const AUTOC: u32 = 0x042A0;
/// Link Status, read-only (`IXGBE_LINKS`).
pub const LINKS: u32 = 0x042A4;
/// Auto-Negotiation Control 2 (`IXGBE_AUTOC2`).
pub const AUTOC2: u32 = 0x042A8;
/// Auto-Negotiation Link Partner 1, read-only; its AN state field leaves 0
/// once the pipeline reset has restarted the link (`IXGBE_ANLP1`, Linux
/// `ixgbe_reset_pipeline_82599`).
pub const ANLP1: u32 = 0x042B0;

// ---- Receive -------------------------------------------------------------------

/// Multicast Control: MTA filter type and enable (`IXGBE_MCSTCTRL`).
pub const MCSTCTRL: u32 = 0x05090;
/// VLAN Filter Table Array, `n` in 0..128: 4096 one-bit VLAN filters
/// (`IXGBE_VFTA(n)`); undefined after reset, cleared by Linux
/// `ixgbe_clear_vfta_generic`.
pub const fn vfta(n: u16) -> u32 {
    0x0A000 + 4 * n as u32
}

/// Receive Control: the global receive enable (`IXGBE_RXCTRL`).
pub const RXCTRL: u32 = 0x03000;
/// Receive DMA Control: CRC strip, DMA-init-done (`IXGBE_RDRXCTL`).
pub const RDRXCTL: u32 = 0x02F00;
/// Filter Control: broadcast accept, promiscuous modes (`IXGBE_FCTRL`).
pub const FCTRL: u32 = 0x05080;
/// VLAN Control (`IXGBE_VLNCTRL`).
pub const VLNCTRL: u32 = 0x05088;
/// Receive Checksum Control (`IXGBE_RXCSUM`).
pub const RXCSUM: u32 = 0x05000;
/// Multiple Receive Queues Command (`IXGBE_MRQC`).
pub const MRQC: u32 = 0x05818;
/// Security RX Control (`IXGBE_SECRXCTRL`).
pub const SECRXCTRL: u32 = 0x08D00;
/// Security RX Status (`IXGBE_SECRXSTAT`).
pub const SECRXSTAT: u32 = 0x08D04;

/// MAC Flow Control (`IXGBE_MFLCN`): receive PAUSE handling.
pub const MFLCN: u32 = 0x04294;
/// Flow Control Configuration (`IXGBE_FCCFG`): sending PAUSE.
pub const FCCFG: u32 = 0x03D00;
/// Flow Control Refresh Threshold Value (`IXGBE_FCRTV`).
pub const FCRTV: u32 = 0x032A0;
/// Flow Control Receive Threshold Low of packet buffer `n` in 0..8 (`IXGBE_FCRTL_82599(n)`).
pub const fn fcrtl(n: u16) -> u32 {
    0x03220 + 4 * n as u32
}
/// Flow Control Receive Threshold High of packet buffer `n` in 0..8 (`IXGBE_FCRTH_82599(n)`).
pub const fn fcrth(n: u16) -> u32 {
    0x03260 + 4 * n as u32
}
/// Flow Control Transmit Timer Value `n` in 0..4, two traffic classes each (`IXGBE_FCTTV(n)`).
pub const fn fcttv(n: u16) -> u32 {
    0x03200 + 4 * n as u32
}
/// Receive Packet Buffer Size of packet buffer `n` in 0..8 (`IXGBE_RXPBSIZE(n)`).
pub const fn rxpbsize(n: u16) -> u32 {
    0x03C00 + 4 * n as u32
}
/// Multicast Table Array word `n` in 0..128 (`IXGBE_MTA(n)`).
pub const fn mta(n: u16) -> u32 {
    0x05200 + 4 * n as u32
}
/// Receive Address Low of entry `n` in 0..128 (`IXGBE_RAL(n)`): entries 0..16
/// through the legacy window at 0x05400, the rest at 0x0A200.
pub const fn ral(n: u16) -> u32 {
    if n <= 15 {
        0x05400 + 8 * n as u32
    } else {
        0x0A200 + 8 * n as u32
    }
}
/// Receive Address High of entry `n` in 0..128 (`IXGBE_RAH(n)`).
pub const fn rah(n: u16) -> u32 {
    ral(n) + 4
}
/// Redirection Table register `n` in 0..32, four one-byte entries each
/// (`IXGBE_RETA(n)`; the X550's extra entries are in `IXGBE_ERETA`).
pub const fn reta(n: u16) -> u32 {
    0x05C00 + 4 * n as u32
}
/// RSS Random Key register `n` in 0..10 (40 bytes in all) (`IXGBE_RSSRK(n)`).
pub const fn rssrk(n: u16) -> u32 {
    0x05C80 + 4 * n as u32
}
/// Packet Split Receive Type of pool `n` (`IXGBE_PSRTYPE(n)`). Linux writes
/// pool 0's on every MAC after the 82598 ("PSRTYPE must be initialized").
pub const fn psrtype(n: u16) -> u32 {
    if n <= 15 {
        0x05480 + 4 * n as u32
    } else {
        0x0EA00 + 4 * n as u32
    }
}
/// Receive Queue Statistic Mapping register `n` in 0..32 (`IXGBE_RQSMR(n)`):
/// which of the 16 per-queue statistics counters each RX queue feeds.
pub const fn rqsmr(n: u16) -> u32 {
    0x02300 + 4 * n as u32
}

// ---- Per-queue receive ------------------------------------------------------------
//
// RX queue q < 64 has its block at 0x01000 + 0x40·q, q in 64..128 at
// 0x0D000 + 0x40·(q − 64) (`IXGBE_RDBAL(_i)` and siblings).

const fn rx_block(q: u16) -> u32 {
    if q < 64 {
        0x01000 + 0x40 * q as u32
    } else {
        0x0D000 + 0x40 * (q as u32 - 64)
    }
}

/// Receive Descriptor Base Address Low of queue `q` (`IXGBE_RDBAL(q)`).
pub const fn rdbal(q: u16) -> u32 {
    rx_block(q)
}
/// Receive Descriptor Base Address High of queue `q` (`IXGBE_RDBAH(q)`).
pub const fn rdbah(q: u16) -> u32 {
    rx_block(q) + 0x04
}
/// Receive Descriptor Ring Length of queue `q`, in bytes (`IXGBE_RDLEN(q)`).
pub const fn rdlen(q: u16) -> u32 {
    rx_block(q) + 0x08
}
/// Receive Descriptor Head of queue `q` (`IXGBE_RDH(q)`).
pub const fn rdh(q: u16) -> u32 {
    rx_block(q) + 0x10
}
/// Receive Descriptor Tail of queue `q` (`IXGBE_RDT(q)`).
pub const fn rdt(q: u16) -> u32 {
    rx_block(q) + 0x18
}
/// Receive Descriptor Control of queue `q` (`IXGBE_RXDCTL(q)`).
pub const fn rxdctl(q: u16) -> u32 {
    rx_block(q) + 0x28
}
/// Split and Replication Receive Control of queue `q` (`IXGBE_SRRCTL(q)`):
/// 0x02100 + 4·q (the 82598's location) for q < 16, inside the queue block
/// (+0x14) above. This is the address Linux uses; whether the in-block
/// address also reaches queues 0..16 on the 82599 was not confirmed, so use
/// this function rather than computing the block offset.
pub const fn srrctl(q: u16) -> u32 {
    if q <= 15 {
        0x02100 + 4 * q as u32
    } else {
        rx_block(q) + 0x14
    }
}
/// Receive DCA Control of queue `q` (`IXGBE_DCA_RXCTRL(q)`), split like
/// [`srrctl`]: 0x02200 + 4·q for q < 16, queue block + 0x0C above.
pub const fn dca_rxctrl(q: u16) -> u32 {
    if q <= 15 {
        0x02200 + 4 * q as u32
    } else {
        rx_block(q) + 0x0C
    }
}

// ---- Transmit -------------------------------------------------------------------

/// DMA Transmit Control: the global transmit enable (`IXGBE_DMATXCTL`).
pub const DMATXCTL: u32 = 0x04A80;
/// DCB Transmit Descriptor Plane Control and Status (`IXGBE_RTTDCS`).
pub const RTTDCS: u32 = 0x04900;
/// Multiple Transmit Queues Command (`IXGBE_MTQC`).
pub const MTQC: u32 = 0x08120;
/// DMA TX TCP Max Allow Size Requests (`IXGBE_DTXMXSZRQ`); ixy sets it to
/// 0xFFFF when DCB and virtualization are off.
pub const DTXMXSZRQ: u32 = 0x08100;
/// PF Virtual Machine TX Switch Control (`IXGBE_PFDTXGSWC`).
pub const PFDTXGSWC: u32 = 0x08220;
/// Security TX Control (`IXGBE_SECTXCTRL`).
pub const SECTXCTRL: u32 = 0x08800;
/// Security TX Status (`IXGBE_SECTXSTAT`).
pub const SECTXSTAT: u32 = 0x08804;

/// Transmit Packet Buffer Size of packet buffer `n` in 0..8 (`IXGBE_TXPBSIZE(n)`).
pub const fn txpbsize(n: u16) -> u32 {
    0x0CC00 + 4 * n as u32
}
/// Transmit Packet Buffer Threshold of packet buffer `n` in 0..8
/// (`IXGBE_TXPBTHRESH(n)`).
pub const fn txpbthresh(n: u16) -> u32 {
    0x04950 + 4 * n as u32
}
/// Transmit Queue Statistic Mapping register `n` in 0..32 (`IXGBE_TQSM(n)`,
/// the 82599 location; the 82598's `IXGBE_TQSMR` was at 0x07300).
pub const fn tqsm(n: u16) -> u32 {
    0x08600 + 4 * n as u32
}

// ---- Per-queue transmit -----------------------------------------------------------
//
// TX queue q in 0..128 has its block at 0x06000 + 0x40·q (`IXGBE_TDBAL(_i)`;
// the "32 of these" comment beside that macro dates from the 82598).

const fn tx_block(q: u16) -> u32 {
    0x06000 + 0x40 * q as u32
}

/// Transmit Descriptor Base Address Low of queue `q` (`IXGBE_TDBAL(q)`).
pub const fn tdbal(q: u16) -> u32 {
    tx_block(q)
}
/// Transmit Descriptor Base Address High of queue `q` (`IXGBE_TDBAH(q)`).
pub const fn tdbah(q: u16) -> u32 {
    tx_block(q) + 0x04
}
/// Transmit Descriptor Ring Length of queue `q`, in bytes (`IXGBE_TDLEN(q)`).
pub const fn tdlen(q: u16) -> u32 {
    tx_block(q) + 0x08
}
/// Transmit DCA Control of queue `q` (`IXGBE_DCA_TXCTRL_82599(q)`; the
/// 82598's `IXGBE_DCA_TXCTRL(q)` at 0x07200 + 4·q is not this register).
pub const fn dca_txctrl(q: u16) -> u32 {
    tx_block(q) + 0x0C
}
/// Transmit Descriptor Head of queue `q` (`IXGBE_TDH(q)`).
pub const fn tdh(q: u16) -> u32 {
    tx_block(q) + 0x10
}
/// Transmit Descriptor Tail of queue `q` (`IXGBE_TDT(q)`).
pub const fn tdt(q: u16) -> u32 {
    tx_block(q) + 0x18
}
/// Transmit Descriptor Control of queue `q` (`IXGBE_TXDCTL(q)`).
pub const fn txdctl(q: u16) -> u32 {
    tx_block(q) + 0x28
}

/// Size of BAR0 (the memory-mapped register space) that this map uses, in
/// bytes: 128 KiB covers every offset here (the highest is EEC/EERD at
/// 0x10014). The 82599's BAR0 is at least this large; its exact size (which
/// the EEPROM can raise) was not confirmed, so map what the BAR reports.
pub const BAR0_MIN_SIZE: usize = 128 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_queue_registers_match_ixgbe_type_h() {
        // IXGBE_RDBAL(_i) etc.: (i < 64) ? 0x01000 + i*0x40 : 0x0D000 + (i-64)*0x40.
        assert_eq!(rdbal(0), 0x01000);
        assert_eq!(rdbah(0), 0x01004);
        assert_eq!(rdlen(0), 0x01008);
        assert_eq!(rdh(0), 0x01010);
        assert_eq!(rdt(0), 0x01018);
        assert_eq!(rxdctl(0), 0x01028);
        assert_eq!(rdbal(1), 0x01040);
        assert_eq!(rdt(15), 0x01018 + 15 * 0x40);
        assert_eq!(rdt(63), 0x01FD8);
        assert_eq!(rdbal(64), 0x0D000);
        assert_eq!(rdt(64), 0x0D018);
        assert_eq!(rxdctl(65), 0x0D068);
        assert_eq!(rdbal(127), 0x0D000 + 63 * 0x40);
    }

    #[test]
    fn srrctl_and_dca_rxctrl_have_three_windows() {
        // IXGBE_SRRCTL(_i): 00-15 0x02100 + n*4, 16-63 0x01014 + n*0x40,
        // 64-127 0x0D014 + (n-64)*0x40.
        assert_eq!(srrctl(0), 0x02100);
        assert_eq!(srrctl(15), 0x0213C);
        assert_eq!(srrctl(16), 0x01014 + 16 * 0x40);
        assert_eq!(srrctl(63), 0x01014 + 63 * 0x40);
        assert_eq!(srrctl(64), 0x0D014);
        // IXGBE_DCA_RXCTRL(_i): 0x02200 + n*4, 0x0100C + n*0x40, 0x0D00C + (n-64)*0x40.
        assert_eq!(dca_rxctrl(0), 0x02200);
        assert_eq!(dca_rxctrl(16), 0x0100C + 16 * 0x40);
        assert_eq!(dca_rxctrl(100), 0x0D00C + 36 * 0x40);
    }

    #[test]
    fn tx_queue_registers_match_ixgbe_type_h() {
        assert_eq!(tdbal(0), 0x06000);
        assert_eq!(tdbah(0), 0x06004);
        assert_eq!(tdlen(0), 0x06008);
        assert_eq!(tdh(0), 0x06010);
        assert_eq!(tdt(0), 0x06018);
        assert_eq!(txdctl(0), 0x06028);
        assert_eq!(tdt(1), 0x06058);
        assert_eq!(txdctl(127), 0x06028 + 127 * 0x40);
        // IXGBE_DCA_TXCTRL_82599(_i) = 0x0600C + i*0x40 (not IXGBE_DCA_TXCTRL).
        assert_eq!(dca_txctrl(0), 0x0600C);
        assert_eq!(dca_txctrl(2), 0x0608C);
    }

    #[test]
    fn global_register_offsets() {
        assert_eq!((CTRL, STATUS, CTRL_EXT), (0x00000, 0x00008, 0x00018));
        assert_eq!((EEC, EERD), (0x10010, 0x10014));
        assert_eq!((ESDP, FWSM, GCR_EXT), (0x00020, 0x10148, 0x11050));
        assert_eq!((ANLP1, MCSTCTRL), (0x042B0, 0x05090));
        assert_eq!((vfta(0), vfta(127)), (0x0A000, 0x0A1FC));
        assert_eq!(
            (EICR, EIAC, EIMS, EIMC, GPIE),
            (0x800, 0x810, 0x880, 0x888, 0x898)
        );
        assert_eq!((eimc_ex(0), eimc_ex(1)), (0x00AB0, 0x00AB4));
        assert_eq!((HLREG0, MAXFRS), (0x04240, 0x04268));
        assert_eq!((AUTOC, LINKS, AUTOC2), (0x042A0, 0x042A4, 0x042A8));
        assert_eq!((RXCTRL, RDRXCTL), (0x03000, 0x02F00));
        assert_eq!((FCTRL, VLNCTRL, RXCSUM), (0x05080, 0x05088, 0x05000));
        assert_eq!((SECRXCTRL, SECRXSTAT), (0x08D00, 0x08D04));
        assert_eq!((SECTXCTRL, SECTXSTAT), (0x08800, 0x08804));
        assert_eq!((DMATXCTL, RTTDCS, MTQC), (0x04A80, 0x04900, 0x08120));
        assert_eq!((DTXMXSZRQ, PFDTXGSWC), (0x08100, 0x08220));
    }

    #[test]
    fn indexed_register_offsets() {
        assert_eq!((rxpbsize(0), rxpbsize(7)), (0x03C00, 0x03C1C));
        assert_eq!((fcrtl(7), fcrth(7), fcttv(3)), (0x0323C, 0x0327C, 0x0320C));
        assert_eq!((txpbsize(0), txpbsize(7)), (0x0CC00, 0x0CC1C));
        assert_eq!((txpbthresh(0), txpbthresh(7)), (0x04950, 0x0496C));
        assert_eq!((mta(0), mta(127)), (0x05200, 0x053FC));
        // IXGBE_RAL(_i): (i <= 15) ? 0x05400 + i*8 : 0x0A200 + i*8.
        assert_eq!((ral(0), rah(0)), (0x05400, 0x05404));
        assert_eq!((ral(15), rah(15)), (0x05478, 0x0547C));
        assert_eq!((ral(16), rah(16)), (0x0A280, 0x0A284));
        assert_eq!(rah(127), 0x0A204 + 127 * 8);
        assert_eq!((psrtype(0), psrtype(16)), (0x05480, 0x0EA40));
        assert_eq!((rqsmr(0), tqsm(0)), (0x02300, 0x08600));
    }

    #[test]
    fn rss_registers_are_the_82599_ones() {
        // IXGBE_MRQC 0x05818, IXGBE_RETA(_i) 0x05C00 + i*4 (32 of them),
        // IXGBE_RSSRK(_i) 0x05C80 + i*4 (10 of them).
        assert_eq!(MRQC, 0x05818);
        assert_eq!((reta(0), reta(31)), (0x05C00, 0x05C7C));
        assert_eq!((rssrk(0), rssrk(9)), (0x05C80, 0x05CA4));
        // RETA ends where RSSRK begins.
        assert_eq!(reta(32), rssrk(0));
    }

    #[test]
    fn everything_fits_the_mapped_window() {
        let max = [EERD, rah(127), rdt(127), txdctl(127), txpbsize(7)]
            .into_iter()
            .max()
            .unwrap();
        assert!((max as usize) + 4 <= BAR0_MIN_SIZE);
    }
}
