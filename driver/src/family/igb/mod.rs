//! Intel igb (82576, I350) back end: bring-up, queue setup, RSS, link,
//! counters and shutdown, behind [`crate::family::Family`].

pub mod flow;
pub mod ids;
pub mod init;
pub mod irq;
pub mod power;
pub mod queue;
pub mod rss;
pub mod stats;
pub mod status_link;

use crate::family::{Family, HashTypes, LinkStatus, RingRegs, RxFilter};
use crate::family::{LinkState, NicModel};
use crate::stats::{Stats, StatsLayout};
use crate::sys::mmio::Regs;
use crate::wait::TimedOut;
use pollnic_hw::desc::RXD_ERR_RXE;
use pollnic_hw::flow::FlowControl;
use pollnic_hw::igb::bits::{CTRL_VME, RXCSUM_IPOFLD, RXCSUM_TUOFLD};
use pollnic_hw::igb::regs::{CTRL, RXCSUM};
use pollnic_hw::power::PowerSaving;
use pollnic_hw::rss::{Reta, KEY_LEN};

/// The igb family (82576 and I350).
#[derive(Debug, Clone, Copy)]
pub struct Igb;

impl crate::family::sealed::Sealed for Igb {}

impl Family for Igb {
    fn kind(&self) -> crate::family::NicFamily {
        crate::family::NicFamily::Igb
    }
    fn models(&self) -> &'static [NicModel] {
        ids::MODELS
    }
    /// The part's queue pairs from [`ids::MODELS`] (82576 16, I350 8).
    fn max_queues(&self, device: u16) -> u16 {
        ids::MODELS
            .iter()
            .find(|m| m.device_id == device)
            .map_or(pollnic_hw::igb::MAX_QUEUES_82576, |m| m.max_queues())
    }
    /// The igb equivalents of the 82599's list: CTRL (SDP0/1 pins, SLU),
    /// CTRL_EXT (SDP2/3 pins), STATUS (link), MTA(0..128) and the first 16
    /// receive addresses RAL/RAH(0..16) (82576 datasheet §8.10).
    fn selfcheck_registers(&self) -> Vec<(String, u32)> {
        use pollnic_hw::igb::regs::{CTRL, CTRL_EXT, MTA, RAH0, RAL0, STATUS};
        let mut v: Vec<(String, u32)> =
            [("CTRL", CTRL), ("CTRL_EXT", CTRL_EXT), ("STATUS", STATUS)]
                .into_iter()
                .map(|(n, o)| (n.to_owned(), o))
                .collect();
        v.extend((0..128).map(|n| (format!("MTA({n})"), MTA + 4 * n)));
        for n in 0..16 {
            v.push((format!("RAL({n})"), RAL0 + 8 * n));
            v.push((format!("RAH({n})"), RAH0 + 8 * n));
        }
        v
    }
    fn link_register(&self) -> Option<u32> {
        Some(status_link::STATUS)
    }
    fn decode_link_register(&self, value: u32) -> LinkState {
        status_link::decode_status(value)
    }
    fn min_ring_size(&self) -> u32 {
        pollnic_hw::igb::MIN_RING_SIZE as u32
    }
    fn stats_layout(&self) -> &'static StatsLayout {
        &stats::LAYOUT
    }
    /// 9000: RLPML takes 14 bits; the 82576 buffers 9.5 KiB frames (Linux
    /// igb allows up to 9216).
    fn max_mtu(&self) -> u32 {
        pollnic_hw::mtu::MAX_MTU
    }
    /// EITR's 13-bit interval field (8191 µs).
    fn max_rx_usecs(&self) -> u32 {
        pollnic_hw::igb::irq::EITR_MAX_USECS
    }
    fn desc(&self) -> Option<&dyn crate::family::DescFamily> {
        Some(self)
    }
}

impl crate::family::DescFamily for Igb {
    /// RXE (bit 31): CRC, symbol, sequence or length error (82576 §7.1.5).
    fn rx_error_mask(&self) -> u32 {
        RXD_ERR_RXE
    }
    fn configure_rx_offloads(
        &self,
        r: &dyn Regs,
        _queues: u16,
        rx_checksum: bool,
        vlan_strip: bool,
    ) {
        // 82576 §8.10.11: RXCSUM.IPOFLD and TUOFLD (PCSD stays set for the
        // RSS hash: the status bits do not need the checksum field); §8.2.1:
        // CTRL.VME strips the tag for every queue.
        if rx_checksum {
            r.set_bits(RXCSUM, RXCSUM_IPOFLD | RXCSUM_TUOFLD);
        }
        if vlan_strip {
            r.set_bits(CTRL, CTRL_VME);
        }
    }
    fn set_max_frame(&self, r: &dyn Regs, mtu: u32) {
        queue::set_max_frame(r, mtu)
    }
    fn init(&self, r: &dyn Regs) -> Result<[u8; 6], TimedOut> {
        init::reset(r)?;
        init::take_hw_control(r);
        init::wait_eeprom_auto_read(r);
        let mac = init::read_mac(r)?;
        init::link_setup(r)?;
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
        queue::enable_tx(r)
    }
    fn enable_rx_queue(&self, r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
        queue::enable_rx_queue(r, q)
    }
    fn enable_tx_queue(&self, r: &dyn Regs, q: u16) -> Result<(), TimedOut> {
        queue::enable_tx_queue(r, q)
    }
    fn start_rx(&self, r: &dyn Regs, filter: RxFilter) -> Result<(), TimedOut> {
        queue::enable_rx(r, filter);
        Ok(())
    }
    fn rdt(&self, q: u16) -> u32 {
        pollnic_hw::igb::regs::rdt(q)
    }
    fn tdt(&self, q: u16) -> u32 {
        pollnic_hw::igb::regs::tdt(q)
    }
    fn link_status(&self, r: &dyn Regs) -> LinkStatus {
        init::link_status(r)
    }
    fn update_stats(&self, r: &dyn Regs, s: &mut Stats) {
        stats::update(r, s)
    }
    fn shutdown(&self, r: &dyn Regs, queues: u16) {
        init::shutdown(r, queues)
    }
    fn configure_flow_control(&self, r: &dyn Regs, device: u16, mode: FlowControl, mtu: u32) {
        flow::configure(r, device, mode, mtu)
    }
    /// I350 only ([`power`]); the 82576 has neither EEE nor DMA coalescing.
    fn configure_power_saving(&self, r: &dyn Regs, device: u16, ps: PowerSaving, mtu: u32) {
        power::configure(r, device, ps, mtu, flow::packet_buffer_kb(r, device))
    }
    fn power_saving_refusal(&self, device: u16) -> Option<&'static str> {
        (!pollnic_hw::igb::is_i350(device)).then_some(
            "the 82576 (QEMU's igb too) has neither Energy Efficient Ethernet nor DMA coalescing \
             (the I350 has both); leave it PowerSaving::OFF",
        )
    }
    fn power_saving(&self, r: &dyn Regs, device: u16) -> PowerSaving {
        power::read(r, device)
    }
    fn flow_control(&self, r: &dyn Regs) -> FlowControl {
        flow::mode(r)
    }
    fn configure_msix(
        &self,
        r: &dyn Regs,
        device: u16,
        queues: u16,
        rx_usecs: u32,
    ) -> Option<Vec<crate::family::VectorRegs>> {
        irq::configure_msix(r, device, queues, rx_usecs)
    }
}
