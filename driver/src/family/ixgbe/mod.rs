//! Intel ixgbe (82599, X520) back end behind [`crate::family::Family`]:
//! bring-up after the 82599 datasheet §4.6 (the sequence is spelled out in
//! `pollnic_hw::ixgbe`), RSS, link, counters and shutdown. Implemented and
//! tested against the software 82599 in `pollnic_model::ixgbe`; not yet run on hardware.

pub mod flow;
pub mod ids;
pub mod init;
pub mod irq;
pub mod link;
pub mod media;
pub mod queue;
pub mod rss;
pub mod stats;
pub mod status_link;

use crate::family::{Caveat, Family, HashTypes, LinkStatus, RingRegs, RxFilter};
use crate::family::{LinkState, NicModel};
use crate::stats::StatsLayout;
use crate::sys::mmio::Regs;
use crate::wait::TimedOut;
use media::{media_of, Media};
use pollnic_hw::flow::FlowControl;
use pollnic_hw::ixgbe::bits::{RXDADV_ERR_FRAME_ERR_MASK, RXDCTL_VME};
use pollnic_hw::ixgbe::regs::rxdctl;
use pollnic_hw::rss::{Reta, KEY_LEN};

/// The ixgbe family (82599 physical functions), for one kind of board: the
/// link bring-up differs between SFP+, backplane and CX4 boards
/// ([`media::Media`], from the device ID as Linux `ixgbe_get_media_type_82599`).
#[derive(Debug, Clone, Copy)]
pub struct Ixgbe {
    media: Media,
}

/// The family's entry in `FAMILIES` and in [`ids::MODELS`]; `Device` drives
/// a port through the entry of its board ([`Family::for_device`]).
pub static IXGBE: Ixgbe = Ixgbe {
    media: Media::Unknown,
};
static SFP: Ixgbe = Ixgbe { media: Media::Sfp };
static FIBER_LCO: Ixgbe = Ixgbe {
    media: Media::FiberLco,
};
static BACKPLANE: Ixgbe = Ixgbe {
    media: Media::Backplane,
};
static CX4: Ixgbe = Ixgbe { media: Media::Cx4 };
static EXTERNAL_PHY: Ixgbe = Ixgbe {
    media: Media::ExternalPhy,
};
static QSFP: Ixgbe = Ixgbe { media: Media::Qsfp };

impl crate::family::sealed::Sealed for Ixgbe {}

impl Family for Ixgbe {
    fn kind(&self) -> crate::family::NicFamily {
        crate::family::NicFamily::Ixgbe
    }
    fn models(&self) -> &'static [NicModel] {
        ids::MODELS
    }
    /// Every 82599 physical function of `pollnic_hw::ixgbe::DEV_IDS_82599`,
    /// a superset of [`ids::MODELS`] (it adds `82599_LS`, 0x154F).
    fn drives(&self, vendor: u16, device: u16) -> bool {
        vendor == pollnic_hw::ixgbe::VENDOR_INTEL && pollnic_hw::ixgbe::is_82599(device)
    }
    /// The entry for the board of `device` ([`media::media_of`]).
    fn for_device(&self, device: u16) -> Option<&'static dyn Family> {
        Some(match media_of(device) {
            Media::Unknown => &IXGBE,
            Media::Sfp => &SFP,
            Media::FiberLco => &FIBER_LCO,
            Media::Backplane => &BACKPLANE,
            Media::Cx4 => &CX4,
            Media::ExternalPhy => &EXTERNAL_PHY,
            Media::Qsfp => &QSFP,
        })
    }
    /// 0x151C (external 10GBASE-T PHY) and 0x1558 (QSFP+, I2C shared over
    /// ESDP): their board setup is not implemented ([`media::Media::missing`]).
    fn missing(&self, device: u16) -> Option<&'static str> {
        media_of(device).missing()
    }
    /// CTRL_EXT (DRV_LOAD), ESDP (laser, module present), AUTOC/AUTOC2 (link
    /// mode), LINKS, FWSM (manageability firmware), MCSTCTRL, MTA(0..128),
    /// RAL/RAH(0..128).
    fn selfcheck_registers(&self) -> Vec<(String, u32)> {
        use pollnic_hw::ixgbe::regs::*;
        let mut v: Vec<(String, u32)> = [
            ("CTRL_EXT", CTRL_EXT),
            ("ESDP", ESDP),
            ("AUTOC", AUTOC),
            ("AUTOC2", AUTOC2),
            ("LINKS", LINKS),
            ("FWSM", FWSM),
            ("MCSTCTRL", MCSTCTRL),
        ]
        .into_iter()
        .map(|(n, o)| (n.to_owned(), o))
        .collect();
        v.extend((0..128).map(|n| (format!("MTA({n})"), mta(n))));
        for n in 0..128 {
            v.push((format!("RAL({n})"), ral(n)));
            v.push((format!("RAH({n})"), rah(n)));
        }
        v
    }
    /// RSS spreads over at most 16 queues (4-bit RETA entries).
    fn max_queues(&self, _device: u16) -> u16 {
        pollnic_hw::ixgbe::MAX_RSS_QUEUES
    }
    fn link_register(&self) -> Option<u32> {
        Some(status_link::LINKS)
    }
    fn decode_link_register(&self, value: u32) -> LinkState {
        status_link::decode_links(value)
    }
    fn caveat(&self) -> Option<Caveat> {
        Some(Caveat {
            what: "its back end is tested only against pollnic's software 82599, never on hardware",
            instead: "an igb port is the tested path",
        })
    }
    /// 64 descriptors (Linux `IXGBE_MIN_RXD`/`IXGBE_MIN_TXD`).
    fn min_ring_size(&self) -> u32 {
        pollnic_hw::ixgbe::MIN_RING_SIZE as u32
    }
    fn stats_layout(&self) -> &'static StatsLayout {
        &stats::LAYOUT
    }
    /// 9000, pollnic's ceiling (the 82599 takes MFS up to 15.5 KiB).
    fn max_mtu(&self) -> u32 {
        pollnic_hw::mtu::MAX_MTU
    }
    /// EITR's interval field, 2 µs steps (1022 µs).
    fn max_rx_usecs(&self) -> u32 {
        pollnic_hw::ixgbe::irq::EITR_MAX_USECS
    }
    fn desc(&self) -> Option<&dyn crate::family::DescFamily> {
        Some(self)
    }
}

impl crate::family::DescFamily for Ixgbe {
    /// The frame errors CE, LE, PE, OSE, USE (bits 24..=29). Bit 31 is the
    /// IPv4 checksum error here, not a reason to drop the frame.
    fn rx_error_mask(&self) -> u32 {
        RXDADV_ERR_FRAME_ERR_MASK
    }
    fn rx_l4e_bit(&self) -> u32 {
        pollnic_hw::offload::IXGBE_L4E_BIT
    }
    fn tx_check_context(&self) -> bool {
        true
    }
    fn power_saving_refusal(&self, _device: u16) -> Option<&'static str> {
        Some(
            "the 82599 has neither Energy Efficient Ethernet nor DMA coalescing; leave it \
             PowerSaving::OFF",
        )
    }
    fn configure_rx_offloads(
        &self,
        r: &dyn Regs,
        queues: u16,
        _rx_checksum: bool,
        vlan_strip: bool,
    ) {
        // The 82599 checks IPv4, TCP and UDP checksums on receive whenever
        // it can parse the frame (82599 datasheet §7.1.11; RXCSUM holds only
        // PCSD and IPPCSE): nothing to turn on for them. Its VLAN strip is
        // per queue, RXDCTL.VME (Linux `ixgbe_vlan_strip_enable`).
        if vlan_strip {
            for q in 0..queues {
                r.set_bits(rxdctl(q), RXDCTL_VME);
            }
        }
    }
    fn set_max_frame(&self, r: &dyn Regs, mtu: u32) {
        queue::set_max_frame(r, mtu)
    }
    /// Reset (double when the master disable times out), EEPROM and DMA
    /// init, MAC; RAR 1..127, MTA and VFTA emptied and relaxed ordering off
    /// (Linux `ixgbe_init_rx_addrs_generic`, `ixgbe_clear_vfta_generic`,
    /// `ixgbe_start_hw_gen2`); on SFP+ boards the laser on (100 ms); the
    /// link started for the board; counters cleared.
    fn init(&self, r: &dyn Regs) -> Result<[u8; 6], TimedOut> {
        init::reset(r)?;
        init::take_hw_control(r);
        init::wait_eeprom_and_dma(r)?;
        let mac = init::read_mac(r)?;
        init::clear_rx_filters(r);
        init::disable_relaxed_ordering(r);
        if link::controls_laser(r, self.media) {
            link::enable_tx_laser(r);
        }
        link::start_link(r, self.media);
        stats::clear(r);
        Ok(mac)
    }
    fn setup_rss(&self, r: &dyn Regs, key: &[u8; KEY_LEN], reta: &Reta, types: &HashTypes) {
        rss::enable(r, key, reta, types)
    }
    fn write_reta(&self, r: &dyn Regs, reta: &Reta) {
        rss::write_reta(r, reta)
    }
    fn configure_rx(&self, r: &dyn Regs, q: u16, ring: RingRegs, buf_size: usize, drop_en: bool) {
        queue::configure_rx(r, q, ring, buf_size, drop_en)
    }
    fn configure_tx(&self, r: &dyn Regs, q: u16, ring: RingRegs) {
        queue::configure_tx(r, q, ring)
    }
    fn start_tx(&self, r: &dyn Regs) {
        queue::start_tx(r)
    }
    fn enable_rx_queue(&self, r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
        queue::enable_rx_queue(r, q)
    }
    fn enable_tx_queue(&self, r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
        queue::enable_tx_queue(r, q)
    }
    fn start_rx(&self, r: &dyn Regs, filter: RxFilter) -> Result<(), TimedOut> {
        queue::start_rx(r, filter);
        Ok(())
    }
    fn rdt(&self, q: u16) -> u32 {
        pollnic_hw::ixgbe::regs::rdt(q)
    }
    fn tdt(&self, q: u16) -> u32 {
        pollnic_hw::ixgbe::regs::tdt(q)
    }
    fn link_status(&self, r: &dyn Regs) -> LinkStatus {
        link::link_status(r, self.media)
    }
    fn shutdown(&self, r: &dyn Regs, queues: u16) {
        init::shutdown(r, queues, self.media)
    }
    fn configure_flow_control(&self, r: &dyn Regs, _device: u16, mode: FlowControl, mtu: u32) {
        flow::configure(r, mode, mtu)
    }
    fn flow_control(&self, r: &dyn Regs) -> FlowControl {
        flow::mode(r)
    }
    fn configure_msix(
        &self,
        r: &dyn Regs,
        _device: u16,
        queues: u16,
        rx_usecs: u32,
    ) -> Option<Vec<crate::family::VectorRegs>> {
        irq::configure_msix(r, queues, rx_usecs)
    }
}
