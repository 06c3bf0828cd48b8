//! Intel ixgbe (82599, X520) back end behind [`crate::family::Family`]:
//! bring-up after the 82599 datasheet §4.6 (the sequence is spelled out in
//! `pollnic_hw::ixgbe`), RSS, link, counters and shutdown. Implemented and
//! tested against the software 82599 in [`model`]; not yet run on hardware.

pub mod ids;
pub mod init;
pub mod irq;
pub mod queue;
pub mod rss;
pub mod stats;
pub mod status_link;

use crate::family::{Caveat, Family, HashTypes, LinkStatus, RingRegs, RxFilter};
use crate::family::{LinkState, NicModel};
use crate::stats::StatsLayout;
use crate::sys::mmio::Regs;
use crate::wait::TimedOut;
use pollnic_hw::ixgbe::bits::RXDADV_ERR_FRAME_ERR_MASK;
use pollnic_hw::rss::{Reta, KEY_LEN};

/// The ixgbe family (82599 physical functions).
#[derive(Debug, Clone, Copy)]
pub struct Ixgbe;

impl crate::family::sealed::Sealed for Ixgbe {}

impl Family for Ixgbe {
    fn name(&self) -> &'static str {
        "ixgbe"
    }
    fn models(&self) -> &'static [NicModel] {
        ids::MODELS
    }
    /// Every 82599 physical function of `pollnic_hw::ixgbe::DEV_IDS_82599`,
    /// a superset of [`ids::MODELS`] (it adds `82599_LS`, 0x154F).
    fn drives(&self, vendor: u16, device: u16) -> bool {
        vendor == pollnic_hw::ixgbe::VENDOR_INTEL && pollnic_hw::ixgbe::is_82599(device)
    }
    /// RSS spreads over at most 16 queues (4-bit RETA entries).
    fn max_queues(&self, _device: u16) -> u16 {
        pollnic_hw::ixgbe::MAX_RSS_QUEUES
    }
    fn link_register(&self) -> u32 {
        status_link::LINKS
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
    /// The frame errors CE, LE, PE, OSE, USE (bits 24..=29). Bit 31 is the
    /// IPv4 checksum error here, not a reason to drop the frame.
    fn rx_error_mask(&self) -> u32 {
        RXDADV_ERR_FRAME_ERR_MASK
    }
    fn stats_layout(&self) -> &'static StatsLayout {
        &stats::LAYOUT
    }
    /// 9000, pollnic's ceiling (the 82599 takes MFS up to 15.5 KiB).
    fn max_mtu(&self) -> u32 {
        pollnic_hw::mtu::MAX_MTU
    }
    fn set_max_frame(&self, r: &dyn Regs, mtu: u32) {
        queue::set_max_frame(r, mtu)
    }
    fn init(&self, r: &dyn Regs) -> Result<[u8; 6], TimedOut> {
        init::reset(r)?;
        init::wait_eeprom_and_dma(r)?;
        let mac = init::read_mac(r)?;
        init::start_link(r);
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
        init::link_status(r)
    }
    fn shutdown(&self, r: &dyn Regs, queues: u16) {
        init::shutdown(r, queues)
    }
    /// EITR's interval field, 2 µs steps (1022 µs).
    fn max_rx_usecs(&self) -> u32 {
        pollnic_hw::ixgbe::irq::EITR_MAX_USECS
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
