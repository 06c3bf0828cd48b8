//! What board an 82599 device ID is, for the steps that differ by board:
//! Linux `ixgbe_get_media_type_82599` maps each ID to a media type, and the
//! laser, link-mode and module-present handling follow from it.

use pollnic_hw::ixgbe::*;

/// The board behind an 82599 device ID (Linux `enum ixgbe_media_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Media {
    /// Not known (the family's generic entry, used only to look parts up):
    /// the EEPROM's link mode is kept, no pin is touched.
    Unknown,
    /// SFP+ cage (`ixgbe_media_type_fiber`): the TX laser on ESDP.SDP3, the
    /// module-present line on ESDP.SDP2, link mode 10G serial (SFI).
    Sfp,
    /// 82599 LS (`ixgbe_media_type_fiber_lco`): fiber without the laser
    /// control Linux gives `ixgbe_media_type_fiber`; the EEPROM's link mode is kept.
    FiberLco,
    /// KX4/KX/KR backplane or XAUI LOM (`ixgbe_media_type_backplane`): the
    /// EEPROM's link mode is the board's and is kept.
    Backplane,
    /// CX4 copper (`ixgbe_media_type_cx4`): the EEPROM's link mode is kept.
    Cx4,
    /// 10GBASE-T through an external PHY (`ixgbe_media_type_copper`, 0x151C).
    ExternalPhy,
    /// QSFP+ with an I2C bus shared over ESDP (`ixgbe_media_type_fiber_qsfp`, 0x1558).
    Qsfp,
}

/// The board of 82599 device `device`, as Linux `ixgbe_get_media_type_82599`
/// has it.
pub fn media_of(device: u16) -> Media {
    match device {
        DEV_ID_82599_SFP
        | DEV_ID_82599_SFP_FCOE
        | DEV_ID_82599_SFP_EM
        | DEV_ID_82599_SFP_SF2
        | DEV_ID_82599_SFP_SF_QP
        | DEV_ID_82599EN_SFP => Media::Sfp,
        DEV_ID_82599_KX4
        | DEV_ID_82599_KX4_MEZZ
        | DEV_ID_82599_COMBO_BACKPLANE
        | DEV_ID_82599_KR
        | DEV_ID_82599_BACKPLANE_FCOE
        | DEV_ID_82599_XAUI_LOM => Media::Backplane,
        DEV_ID_82599_CX4 => Media::Cx4,
        DEV_ID_82599_T3_LOM => Media::ExternalPhy,
        DEV_ID_82599_LS => Media::FiberLco,
        DEV_ID_82599_QSFP_SF_QP => Media::Qsfp,
        _ => Media::Unknown,
    }
}

impl Media {
    /// What pollnic lacks for this board, or `None` when it brings it up.
    pub fn missing(self) -> Option<&'static str> {
        match self {
            Media::ExternalPhy => Some(
                "the setup of its external 10GBASE-T PHY over MDIO \
                 (Linux ixgbe_setup_phy_link_tnx)",
            ),
            Media::Qsfp => Some(
                "the QSFP+ I2C bus it shares over ESDP SDP0/SDP1 \
                 (Linux ixgbe_read_i2c_byte_82599 with qsfp_shared_i2c_bus)",
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_82599_id_has_the_linux_media_type() {
        for &d in DEV_IDS_82599 {
            assert_ne!(media_of(d), Media::Unknown, "{d:#06x}");
        }
        assert_eq!(media_of(0x10FB), Media::Sfp);
        assert_eq!(media_of(0x1517), Media::Backplane);
        assert_eq!(media_of(0x10F9), Media::Cx4);
        assert!(media_of(0x151C)
            .missing()
            .unwrap()
            .contains("10GBASE-T PHY"));
        assert!(media_of(0x1558).missing().unwrap().contains("SDP0/SDP1"));
        assert_eq!(media_of(0x10FB).missing(), None);
    }
}
