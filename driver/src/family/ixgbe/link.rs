//! 82599 board-level link bring-up: the SFP+ TX laser (ESDP.SDP3), the link
//! mode and pipeline reset of SFP+ boards, and the link state with the
//! module-present line (ESDP.SDP2). Each step names the Linux or DPDK
//! function it follows.

use super::media::Media;
use crate::family::LinkStatus;
use crate::sys::mmio::Regs;
use pollnic_hw::ixgbe::{bits::*, regs::*};
use std::time::Duration;

/// How long the laser takes to light after SDP3 is cleared (Linux
/// `ixgbe_enable_tx_laser_multispeed_fiber`: `msleep(100)`).
pub const LASER_ON_WAIT: Duration = Duration::from_millis(100);
/// How long it takes to go dark (Linux `ixgbe_disable_tx_laser_multispeed_fiber`:
/// "allow 100us to go dark per spec").
pub const LASER_OFF_WAIT: Duration = Duration::from_micros(100);

/// Whether pollnic drives the laser pin itself: SFP+ boards without
/// pass-through manageability firmware. Linux `ixgbe_init_mac_link_ops_82599`
/// installs the laser functions only for `ixgbe_media_type_fiber` and
/// `!ixgbe_mng_enabled`; pollnic checks the first condition of
/// `ixgbe_mng_enabled`, FWSM mode = pass-through (with such firmware the
/// laser is the firmware's).
pub fn controls_laser(r: &dyn Regs, media: Media) -> bool {
    media == Media::Sfp && r.read32(FWSM) & FWSM_MODE_MASK != FWSM_FW_MODE_PT
}

/// Turn the TX laser on: clear ESDP.SDP3 and wait 100 ms (Linux
/// `ixgbe_enable_tx_laser_multispeed_fiber`, called from
/// `ixgbe_up_complete`; DPDK `ixgbe_dev_start`). A port the kernel driver
/// closed was left with its laser off (`ixgbe_close` → `ixgbe_down`).
pub fn enable_tx_laser(r: &dyn Regs) {
    r.write32(ESDP, r.read32(ESDP) & !ESDP_SDP3);
    r.read32(STATUS); // flush (IXGBE_WRITE_FLUSH)
    std::thread::sleep(LASER_ON_WAIT);
}

/// Turn the TX laser off: set ESDP.SDP3, wait 100 µs (Linux
/// `ixgbe_disable_tx_laser_multispeed_fiber` from `ixgbe_down`; DPDK
/// `ixgbe_dev_stop`).
pub fn disable_tx_laser(r: &dyn Regs) {
    r.write32(ESDP, r.read32(ESDP) | ESDP_SDP3);
    r.read32(STATUS);
    std::thread::sleep(LASER_OFF_WAIT);
}

/// Start the link for `media` (§4.6.4) through the pipeline reset, as Linux
/// does on every 82599 board (`ixgbe_start_mac_link_82599` and
/// `prot_autoc_write_82599` both end in `ixgbe_reset_pipeline_82599`, which
/// also re-enables a link the NVM disabled in AUTOC2). SFP+ boards get link
/// mode 10G serial (SFI), as `ixgbe_setup_sfp_modules_82599` sets it;
/// backplane (KX4/KX/KR), XAUI, CX4 and LS boards keep the mode their
/// EEPROM put in AUTOC.LMS (ixy's forcing of 10G serial everywhere is wrong
/// there). The link is awaited later.
///
/// Not done: the per-module init sequence Linux writes to CORECTL from the
/// EEPROM after identifying the module over I2C (`ixgbe_setup_sfp_modules_82599`);
/// ixy runs X520s without it.
pub fn start_link(r: &dyn Regs, media: Media) {
    let autoc = r.read32(AUTOC);
    if media == Media::Sfp {
        // Linux ORs LMS_10G_SERIAL into the EEPROM's AUTOC; on an SFP+ board
        // LMS is 0..=3, so setting the field is the same.
        let autoc = (autoc & !AUTOC_LMS_MASK) | AUTOC_LMS_10G_SERIAL;
        r.write32(AUTOC, autoc);
        reset_pipeline(r, autoc);
    } else {
        reset_pipeline(r, autoc);
    }
}

/// Linux `ixgbe_reset_pipeline_82599`: enable the link if the NVM disabled
/// it (AUTOC2 link-disable bits), write AUTOC with LMS bit 2 toggled and
/// AN_RESTART, wait (up to 10 × 4–8 ms) for ANLP1's AN state to leave 0,
/// then write AUTOC with the wanted LMS and AN_RESTART. Returns whether the
/// AN state moved (Linux logs "auto negotiation not completed" otherwise and
/// carries on; so does pollnic: the link wait reports a link that stays down).
pub fn reset_pipeline(r: &dyn Regs, autoc: u32) -> bool {
    let autoc2 = r.read32(AUTOC2);
    if autoc2 & AUTOC2_LINK_DISABLE_MASK != 0 {
        r.write32(AUTOC2, autoc2 & !AUTOC2_LINK_DISABLE_MASK);
        r.read32(STATUS);
    }
    let autoc = autoc | AUTOC_AN_RESTART;
    r.write32(AUTOC, autoc ^ (0x4 << AUTOC_LMS_SHIFT));
    let mut moved = false;
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(4));
        if r.read32(ANLP1) & ANLP1_AN_STATE_MASK != 0 {
            moved = true;
            break;
        }
    }
    r.write32(AUTOC, autoc);
    r.read32(STATUS);
    moved
}

/// Whether an SFP+ module sits in the cage: ESDP.SDP2 high (Linux
/// `ixgbe_check_mac_link_generic`, where the crosstalk fix is on; DPDK
/// `ixgbe_check_sfp_cage`). Always true on other boards.
pub fn module_present(r: &dyn Regs, media: Media) -> bool {
    media != Media::Sfp || r.read32(ESDP) & ESDP_SDP2 != 0
}

/// Link state (the 82599 is full duplex only). LINKS is read twice and the
/// second value used (Linux and DPDK `ixgbe_check_mac_link_generic`: the
/// first read returns the latched old state). On SFP+ boards an empty cage
/// is link down whatever LINKS says (Linux and DPDK gate this on the
/// EEPROM's crosstalk-fix flag; pollnic always checks, since with no module
/// there can be no link).
pub fn link_status(r: &dyn Regs, media: Media) -> LinkStatus {
    if !module_present(r, media) {
        return LinkStatus {
            up: false,
            speed_mbps: 0,
            full_duplex: true,
        };
    }
    let _old = r.read32(LINKS);
    let l = r.read32(LINKS);
    LinkStatus {
        up: l & LINKS_UP != 0,
        speed_mbps: links_speed_mbps(l),
        full_duplex: true,
    }
}
