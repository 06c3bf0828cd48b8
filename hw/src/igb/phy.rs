//! PHY registers reached through MDIC (IEEE 802.3 clause 22, as the 82576's
//! internal PHY implements them; 82576 datasheet §8.23).

/// MDIO address of the internal PHY (Linux igb reads it from MDICNFG; QEMU's
/// igb answers on address 1).
pub const PHY_ADDR: u32 = 1;
/// PHY Control register (BMCR).
pub const PHY_CTRL: u32 = 0;
/// PHY Status register (BMSR).
pub const PHY_STATUS: u32 = 1;
/// BMCR: restart auto-negotiation.
pub const BMCR_RESTART_AN: u16 = 1 << 9;
/// BMCR: auto-negotiation enable.
pub const BMCR_AUTOEN: u16 = 1 << 12;
/// BMCR: power down.
pub const BMCR_PDOWN: u16 = 1 << 11;
/// BMSR: link status.
pub const BMSR_LSTATUS: u16 = 1 << 2;
/// BMSR: auto-negotiation complete.
pub const BMSR_ANEGCOMPLETE: u16 = 1 << 5;

/// MDIC value that reads PHY register `reg`.
pub const fn mdic_read(reg: u32) -> u32 {
    use super::bits::*;
    (reg << MDIC_REG_SHIFT) | (PHY_ADDR << MDIC_PHY_SHIFT) | MDIC_OP_READ
}

/// MDIC value that writes `data` to PHY register `reg`.
pub const fn mdic_write(reg: u32, data: u16) -> u32 {
    use super::bits::*;
    data as u32 | (reg << MDIC_REG_SHIFT) | (PHY_ADDR << MDIC_PHY_SHIFT) | MDIC_OP_WRITE
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn mdic_encoding() {
        assert_eq!(
            mdic_write(PHY_CTRL, BMCR_AUTOEN | BMCR_RESTART_AN),
            0x0420_1200
        );
        assert_eq!(mdic_read(PHY_STATUS), 0x0821_0000);
    }
}
