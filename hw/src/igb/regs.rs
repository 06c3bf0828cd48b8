//! igb register offsets in BAR0, in bytes. All registers are 32 bits wide and
//! must be accessed with aligned 32-bit loads and stores.
//!
//! Source: 82576 datasheet §8.1.3 (register summary); per-queue registers use
//! the 82576 layout (`0xC000 + 0x40·n` for RX, `0xE000 + 0x40·n` for TX), which
//! QEMU's igb also decodes (`hw/net/igb_regs.h`).

/// Device Control (§8.2.1).
pub const CTRL: u32 = 0x0000;
/// Device Status, read-only (§8.2.2).
pub const STATUS: u32 = 0x0008;
/// EEPROM/Flash Control (§8.4.1).
pub const EECD: u32 = 0x0010;
/// EEPROM Read (§8.4.2).
pub const EERD: u32 = 0x0014;
/// Extended Device Control (§8.2.3).
pub const CTRL_EXT: u32 = 0x0018;
/// MDI Control: PHY register access (§8.2.4).
pub const MDIC: u32 = 0x0020;
/// Flow Control Address Low: the PAUSE destination 01:80:C2:00:00:01 (§8.2.5).
pub const FCAL: u32 = 0x0028;
/// Flow Control Address High (§8.2.6).
pub const FCAH: u32 = 0x002c;
/// Flow Control Type: the PAUSE EtherType 0x8808 (§8.2.7).
pub const FCT: u32 = 0x0030;
/// Flow Control Transmit Timer Value: the PAUSE time sent in XOFF (§8.2.8).
pub const FCTTV: u32 = 0x0170;
/// Flow Control Receive Threshold Low: XON below it, with XONE (§8.10.6).
pub const FCRTL: u32 = 0x2160;
/// Flow Control Receive Threshold High: XOFF above it (§8.10.7).
pub const FCRTH: u32 = 0x2168;
/// RX Packet Buffer Size: KB in bits 6:0 on the 82576 (§8.3.1); an index
/// into a table of sizes in bits 3:0 on the I350 ([`crate::igb::bits::rxpbs_kb_i350`]).
pub const RXPBS: u32 = 0x2404;
/// I350 only: Energy Efficient Ethernet control (I350 datasheet §8.23.1;
/// Linux `E1000_EEER`).
pub const EEER: u32 = 0x0e30;
/// I350 only: internal PHY configuration, the EEE advertisement (I350
/// datasheet §8.23.3; Linux `E1000_IPCNFG`).
pub const IPCNFG: u32 = 0x0e38;
/// I350 only: DMA coalescing control (I350 datasheet §8.8.27; Linux `E1000_DMACR`).
pub const DMACR: u32 = 0x2508;
/// I350 only: DMA coalescing time to Lx request (Linux `E1000_DMCTLX`).
pub const DMCTLX: u32 = 0x2514;
/// I350 only: DMA coalescing receive threshold high (Linux `E1000_FCRTC`).
pub const FCRTC: u32 = 0x2170;
/// I350 only: DMA coalescing transmit threshold (Linux `E1000_DMCTXTH`).
pub const DMCTXTH: u32 = 0x3550;
/// I350 only: PCIe miscellaneous configuration (Linux `E1000_PCIEMISC`).
pub const PCIEMISC: u32 = 0x5bb8;
/// I350 only: DMA coalescing receive packet rate threshold (Linux `E1000_DMCRTRH`).
pub const DMCRTRH: u32 = 0x5dd0;
/// Interrupt Cause Read, clear on read (§8.8.1).
pub const ICR: u32 = 0x00c0;
/// Interrupt Mask Set/Read (§8.8.5).
pub const IMS: u32 = 0x00d0;
/// Interrupt Mask Clear (§8.8.6).
pub const IMC: u32 = 0x00d8;
/// Receive Control (§8.10.1).
pub const RCTL: u32 = 0x0100;
/// Transmit Control (§8.12.1).
pub const TCTL: u32 = 0x0400;
/// Transmit Inter Packet Gap (§8.12.2).
pub const TIPG: u32 = 0x0410;
/// Extended Interrupt Cause Read (§8.8.7).
pub const EICR: u32 = 0x1580;
/// Extended Interrupt Mask Set/Read (§8.8.9).
pub const EIMS: u32 = 0x1524;
/// Extended Interrupt Mask Clear (§8.8.10).
pub const EIMC: u32 = 0x1528;
/// Extended Interrupt Auto Clear (§8.8.11).
pub const EIAC: u32 = 0x152c;
/// Receive Long Packet Maximum Length (82576 datasheet, RLPML): with RCTL.LPE set, frames
/// longer than this many bytes (FCS included) are dropped and counted in ROC;
/// the 82576 adds 4 bytes for each VLAN tag it recognizes (Linux commit
/// d3836f8e2517 "igb: Do not factor VLANs into RLPML calculation").
pub const RLPML: u32 = 0x5004;
/// Receive Checksum Control (§8.10.9).
pub const RXCSUM: u32 = 0x5000;
/// Multicast Table Array, 128 entries (§8.10.13).
pub const MTA: u32 = 0x5200;
/// Receive Address Low, entry 0 (§8.10.14); entry n at `RAL0 + 8·n`.
pub const RAL0: u32 = 0x5400;
/// Receive Address High, entry 0 (§8.10.15).
pub const RAH0: u32 = 0x5404;
/// Multiple Receive Queues Command (§8.10.21).
pub const MRQC: u32 = 0x5818;
/// Redirection Table, 32 registers of 4 one-byte entries (§8.10.22).
pub const RETA: u32 = 0x5c00;
/// RSS Random Key, 10 registers = 40 bytes (§8.10.23).
pub const RSSRK: u32 = 0x5c80;

/// Receive Descriptor Base Address Low of queue `n` (§8.10.4).
pub const fn rdbal(n: u16) -> u32 {
    0xc000 + 0x40 * n as u32
}
/// Receive Descriptor Base Address High of queue `n` (§8.10.5).
pub const fn rdbah(n: u16) -> u32 {
    0xc004 + 0x40 * n as u32
}
/// Receive Descriptor Ring Length of queue `n`, in bytes (§8.10.6).
pub const fn rdlen(n: u16) -> u32 {
    0xc008 + 0x40 * n as u32
}
/// Split and Replication Receive Control of queue `n` (§8.10.2).
pub const fn srrctl(n: u16) -> u32 {
    0xc00c + 0x40 * n as u32
}
/// Receive Descriptor Head of queue `n` (§8.10.7).
pub const fn rdh(n: u16) -> u32 {
    0xc010 + 0x40 * n as u32
}
/// Receive Descriptor Tail of queue `n` (§8.10.8).
pub const fn rdt(n: u16) -> u32 {
    0xc018 + 0x40 * n as u32
}
/// Receive Descriptor Control of queue `n` (§8.10.10).
pub const fn rxdctl(n: u16) -> u32 {
    0xc028 + 0x40 * n as u32
}
/// Transmit Descriptor Base Address Low of queue `n` (§8.12.5).
pub const fn tdbal(n: u16) -> u32 {
    0xe000 + 0x40 * n as u32
}
/// Transmit Descriptor Base Address High of queue `n` (§8.12.6).
pub const fn tdbah(n: u16) -> u32 {
    0xe004 + 0x40 * n as u32
}
/// Transmit Descriptor Ring Length of queue `n`, in bytes (§8.12.7).
pub const fn tdlen(n: u16) -> u32 {
    0xe008 + 0x40 * n as u32
}
/// Transmit Descriptor Head of queue `n` (§8.12.8).
pub const fn tdh(n: u16) -> u32 {
    0xe010 + 0x40 * n as u32
}
/// Transmit Descriptor Tail of queue `n` (§8.12.9).
pub const fn tdt(n: u16) -> u32 {
    0xe018 + 0x40 * n as u32
}
/// Transmit Descriptor Control of queue `n` (§8.12.10).
pub const fn txdctl(n: u16) -> u32 {
    0xe028 + 0x40 * n as u32
}

/// Size of BAR0 (the memory-mapped register space), in bytes (82576 datasheet §9.4.11).
pub const BAR0_SIZE: usize = 128 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn queue_register_offsets_match_linux_and_qemu() {
        // E1000_RDBAL(n) etc. from QEMU hw/net/igb_regs.h ("new" 82576 layout).
        assert_eq!(rdbal(0), 0xc000);
        assert_eq!(rdbal(1), 0xc040);
        assert_eq!(rdt(15), 0xc018 + 15 * 0x40);
        assert_eq!(srrctl(2), 0xc08c);
        assert_eq!(rxdctl(0), 0xc028);
        assert_eq!(tdbal(0), 0xe000);
        assert_eq!(tdt(1), 0xe058);
        assert_eq!(txdctl(3), 0xe0e8);
    }
    #[test]
    fn global_register_offsets() {
        assert_eq!((CTRL, STATUS, EECD, EERD, MDIC), (0, 8, 0x10, 0x14, 0x20));
        assert_eq!((RCTL, TCTL, RLPML), (0x100, 0x400, 0x5004));
        assert_eq!(
            (RAL0, RAH0, MRQC, RETA, RSSRK),
            (0x5400, 0x5404, 0x5818, 0x5c00, 0x5c80)
        );
        assert_eq!((EIMC, EICR), (0x1528, 0x1580));
    }
}
