//! The seam between the shared driver and one NIC family's registers.
//!
//! # Two traits
//!
//! [`Family`] is what every family has: its name, PCI IDs and kernel driver
//! (what `pollnic status`/`bind`/`doctor` use through [`FamilyInfo`]), its
//! limits (queues, ring size, MTU, EITR range), the link register `status`
//! peeks at, its counters' layout, and [`Family::desc`]. [`DescFamily`] is
//! the register work of a family whose queues are Intel descriptor rings
//! (igb, ixgbe): reset, RSS, per-queue registers, enables, link, counters,
//! MSI-X, shutdown. virtio-net has no `DescFamily` (`desc()` is `None`);
//! its bring-up is `family/virtio`'s `Port` and the device's
//! `device/virtio.rs`. A device keeps one back end value (`device/backend.rs`):
//! the `DescFamily`, or the virtio port.
//!
//! Both are trait objects (`&'static dyn`), picked once by PCI ID from
//! [`FAMILIES`] when the device is opened, as the Linux e1000/igb `mac.ops`
//! tables and DPDK's per-driver `eth_dev_ops` are. A third descriptor-ring
//! family is a folder implementing both traits and one line in
//! [`FAMILIES`]; a family with a new kind of ring also needs its ring type
//! in `pollnic-rings`, a variant of the queue's `Rings` and, where its
//! control path differs, of the device's `Backend`. The indirection is paid
//! on the control path only: `rx_burst`/`tx_burst` run on the rings, which
//! differ per family only in the RX error mask (a value,
//! [`DescFamily::rx_error_mask`]), and write tails through a
//! [`crate::lowlevel::io::TailDoorbell`], not through these traits.
//!
//! # The order `Device` calls a `DescFamily` in
//!
//! [`DescFamily::init`] (reset, EEPROM, DMA init, MAC, link start, counters
//! cleared) → [`DescFamily::set_max_frame`] → [`DescFamily::setup_rss`] →
//! per queue [`DescFamily::configure_rx`] and [`DescFamily::configure_tx`]
//! (queues and receiver still off) → [`DescFamily::start_tx`] → per queue
//! [`DescFamily::enable_rx_queue`], then the RX tail, and
//! [`DescFamily::enable_tx_queue`] → [`DescFamily::configure_rx_offloads`],
//! flow control, power saving → [`DescFamily::start_rx`] → link wait with
//! [`DescFamily::link_status`]. [`DescFamily::shutdown`] on every exit path,
//! before any DMA memory is freed.

use crate::sys::mmio::Regs;
use pollnic_hw::flow::FlowControl;
use pollnic_hw::power::PowerSaving;
mod ids;
pub(crate) mod igb;
pub(crate) mod ixgbe;
pub(crate) mod virtio;

pub(crate) use crate::config::{HashTypes, RxFilter};
pub(crate) use crate::irq::VectorRegs;
use crate::stats::{Stats, StatsLayout};
use crate::wait::TimedOut;
pub use ids::{LinkState, NicModel, INTEL_VENDOR_ID};
use pollnic_hw::rss::{Reta, KEY_LEN};

/// Every family pollnic drives, asked in order by [`lookup`] and by the PCI
/// ID look-ups of `pollnic status`/`bind`/`doctor` ([`crate::pci::lookup`]).
/// A new family is one line here (and, for a new kind of ring, see the
/// module docs).
pub(crate) static FAMILIES: &[FamilyInfo] = &[
    FamilyInfo(&crate::family::igb::Igb),
    FamilyInfo(&crate::family::ixgbe::IXGBE),
    FamilyInfo(&crate::family::virtio::VirtioNet),
];

/// The back end that drives PCI `vendor:device`, if any.
pub(crate) fn lookup(vendor: u16, device: u16) -> Option<&'static dyn Family> {
    FAMILIES
        .iter()
        .map(|f| f.0)
        .find(|f| f.drives(vendor, device))
}

/// The family of NICs a port belongs to, the back end that drives it
/// ([`crate::Device::family`], [`FamilyInfo::kind`]). Non-exhaustive: a
/// family may be added; match with a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NicFamily {
    /// Intel 82576 and I350 (Linux `igb`).
    Igb,
    /// Intel 82599 / X520 (Linux `ixgbe`).
    Ixgbe,
    /// Modern virtio 1.x network devices over PCI (Linux `virtio_net`).
    VirtioNet,
    /// The made-up family of the PCI layer's tests (feature `test-family`).
    #[cfg(feature = "test-family")]
    #[doc(hidden)]
    Test,
}

impl NicFamily {
    /// Its short name, as `pollnic status` prints it and as the Linux
    /// driver is called: `igb`, `ixgbe`, `virtio-net`.
    pub const fn name(self) -> &'static str {
        match self {
            NicFamily::Igb => "igb",
            NicFamily::Ixgbe => "ixgbe",
            NicFamily::VirtioNet => "virtio-net",
            #[cfg(feature = "test-family")]
            NicFamily::Test => "e1000e",
        }
    }
}

impl std::fmt::Display for NicFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A NIC family pollnic drives (igb, ixgbe), as the PCI look-ups name it
/// ([`crate::pci::PciDevice::family`], [`crate::pci::identify`],
/// [`crate::pci::NicModel::family`]): what it is called and what it
/// drives. The register work behind it stays inside the library: this
/// handle offers none of it.
#[derive(Clone, Copy)]
pub struct FamilyInfo(pub(crate) &'static dyn Family);

impl FamilyInfo {
    /// Short name, as `pollnic status` prints it (`igb`, `ixgbe`).
    pub fn name(&self) -> &'static str {
        self.0.name()
    }
    /// Which family it is.
    pub fn kind(&self) -> NicFamily {
        self.0.kind()
    }
    /// The Linux driver that normally owns this family's ports (`igb`,
    /// `ixgbe`): what `pollnic unbind` rebinds to.
    pub fn kernel_driver(&self) -> &'static str {
        self.0.kernel_driver()
    }
    /// The device IDs it drives.
    pub fn models(&self) -> &'static [NicModel] {
        self.0.models()
    }
    /// Whether it drives PCI `vendor:device`.
    pub fn drives(&self, vendor: u16, device: u16) -> bool {
        self.0.drives(vendor, device)
    }
    /// What pollnic does not implement yet for PCI device ID `device` (its
    /// board-level setup), so that `Device::open` refuses it; `None` when
    /// nothing is missing.
    pub fn missing(&self, device: u16) -> Option<&'static str> {
        self.0.missing(device)
    }
    /// What `pollnic doctor` warns about this family's ports, if anything.
    pub fn caveat(&self) -> Option<Caveat> {
        self.0.caveat()
    }
    /// RX/TX queue pairs PCI device ID `device` has.
    pub fn max_queues(&self, device: u16) -> u16 {
        self.0.max_queues(device)
    }
    /// The largest MTU its back end supports, bytes.
    pub fn max_mtu(&self) -> u32 {
        self.0.max_mtu()
    }
    /// The PCI vendor ID of its parts (Intel 0x8086; virtio 0x1af4).
    pub fn vendor(&self) -> u16 {
        self.0.vendor()
    }
}

impl std::fmt::Debug for FamilyInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FamilyInfo").field(&self.0.name()).finish()
    }
}

/// Two handles are equal when they name the same family.
impl PartialEq for FamilyInfo {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}
impl Eq for FamilyInfo {}

/// Where one queue's descriptor ring lives, for its base/length registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingRegs {
    /// IOVA of descriptor 0 (RDBAL/RDBAH, TDBAL/TDBAH).
    pub iova: u64,
    /// Ring length in bytes (RDLEN, TDLEN).
    pub len_bytes: u32,
}

/// Link state of an open port, read from the device ([`crate::Device::link`]:
/// igb STATUS, 82599 LINKS, virtio-net's status field). Not to be confused
/// with [`crate::pci::LinkState`], what sysfs says of a port the kernel
/// drives, without touching the device (`pollnic status`, `doctor`), which
/// can be `Unknown`. Non-exhaustive: more may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStatus {
    /// Link up (igb STATUS.LU, 82599 LINKS.UP).
    pub up: bool,
    /// Speed in Mb/s (meaningful when up).
    pub speed_mbps: u32,
    /// Full duplex (always true on the 82599).
    pub full_duplex: bool,
}

/// What `pollnic doctor` warns about a family's ports: "`<device>` is an
/// `<family>` part: `what`", fixed by "`instead` (`pollnic status`); `pollnic
/// unbind <addr>` gives this one back".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caveat {
    /// What the user should know, e.g. "its back end is tested only against a software model".
    pub what: &'static str,
    /// What to use instead, e.g. "use an igb port".
    pub instead: &'static str,
}

/// Only this crate's families implement [`Family`]: its methods take crate
/// internals, and the set of families is the driver's to decide.
pub(crate) mod sealed {
    /// The seal on [`super::Family`].
    pub trait Sealed {}
}

/// One NIC family's register-level behaviour, in the role of DPDK's
/// `eth_dev_ops` and Linux e1000/igb's `mac.ops`/`phy.ops`. Every method gets
/// the device's registers; none keeps state (the `Device` does). Sealed:
/// programs name it (e.g. in [`NicModel::family`]) but cannot implement it.
pub(crate) trait Family: sealed::Sealed + Send + Sync + 'static {
    /// Which family this is.
    fn kind(&self) -> NicFamily;
    /// Short name, as the Linux driver's: "igb", "ixgbe" ([`NicFamily::name`]).
    fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// Name of the Linux kernel driver for these parts, the one `pollnic
    /// unbind` gives a port back to (`/sys/bus/pci/drivers/<name>`). Default:
    /// [`Family::name`].
    fn kernel_driver(&self) -> &'static str {
        self.name()
    }
    /// The PCI device IDs (vendor [`INTEL_VENDOR_ID`]) `pollnic
    /// status`/`bind`/`doctor` know as this family, with their `lspci` names
    /// and queue counts; each entry's `family` is this family. Conventionally
    /// `driver/src/<family>/ids.rs`.
    fn models(&self) -> &'static [NicModel];
    /// Whether this back end drives PCI `vendor:device`. Default: it is one
    /// of [`Family::models`].
    fn drives(&self, vendor: u16, device: u16) -> bool {
        vendor == INTEL_VENDOR_ID && self.models().iter().any(|m| m.device_id == device)
    }
    /// The back end for this one part when it differs from the family's
    /// generic entry (e.g. the 82599's SFP+, backplane and CX4 boards need
    /// different link bring-up); `None`: this one. Default `None`.
    fn for_device(&self, _device: u16) -> Option<&'static dyn Family> {
        None
    }
    /// What this back end lacks to drive PCI device `device` (a family lists
    /// a part it recognises but cannot yet bring up, e.g. one with an
    /// external PHY), or `None` when it drives it fully. `Device::open`
    /// refuses such a part with [`crate::Error::NotImplemented`], and
    /// `pollnic status`/`doctor` say the same. Default `None`.
    fn missing(&self, _device: u16) -> Option<&'static str> {
        None
    }
    /// The registers `pollnic doctor --selfcheck` reads before and after the
    /// bring-up ([`crate::lowlevel::selfcheck`]), by datasheet name and BAR 0 offset:
    /// board wiring and state a previous driver may leave behind, none that
    /// clears on read. Default: none.
    fn selfcheck_registers(&self) -> Vec<(String, u32)> {
        Vec::new()
    }
    /// Queue pairs RSS can spread over on this part (`device` is the PCI device ID).
    fn max_queues(&self, device: u16) -> u16;
    /// Byte offset in BAR 0 of the register `pollnic status` reads, once and
    /// read-only, for the link of a port no kernel network driver owns
    /// (igb `STATUS`, 82599 `LINKS`); decoded by [`Family::decode_link_register`].
    /// `None` for a family whose link is not one BAR 0 register (virtio-net:
    /// its `status` field sits in the device configuration the capability
    /// list points at, read when pollnic opens the port).
    fn link_register(&self) -> Option<u32>;
    /// The link a value of [`Family::link_register`] shows.
    fn decode_link_register(&self, value: u32) -> LinkState;
    /// A warning `pollnic doctor` gives for every port of this family (a back
    /// end not ready for use), or `None`.
    fn caveat(&self) -> Option<Caveat> {
        None
    }
    /// Smallest ring, in descriptors, the part accepts.
    fn min_ring_size(&self) -> u32;
    /// Largest MTU the back end configures (bytes); the default, for a family
    /// without jumbo support, is the standard 1500.
    fn max_mtu(&self) -> u32 {
        pollnic_hw::mtu::DEFAULT_MTU
    }
    /// The counters behind [`crate::Device::stats`].
    fn stats_layout(&self) -> &'static StatsLayout;

    /// Largest per-vector interrupt throttle (EITR) in µs; 0 (the default):
    /// the family has no MSI-X support in pollnic.
    fn max_rx_usecs(&self) -> u32 {
        0
    }
    /// The vendor ID of the parts it drives. Default: [`INTEL_VENDOR_ID`].
    fn vendor(&self) -> u16 {
        INTEL_VENDOR_ID
    }
    /// The descriptor-ring register work (Intel's advanced descriptors:
    /// base/length/head/tail registers, RSS registers, clear-on-read
    /// counters), or `None` for a family whose queues are virtqueues
    /// (virtio-net, brought up by `family::virtio`).
    fn desc(&self) -> Option<&dyn DescFamily>;
}

/// A [`DescFamily`] seen as the [`Family`] it is (trait upcasting, by hand:
/// the crate's minimum Rust, 1.85, has no `dyn` upcast coercion).
pub(crate) trait AsFamily {
    /// `self` as a [`Family`].
    fn as_family(&self) -> &dyn Family;
}

impl<T: Family> AsFamily for T {
    fn as_family(&self) -> &dyn Family {
        self
    }
}

/// The register work of a family whose queues are Intel-style descriptor
/// rings driven through BAR 0 registers (igb, ixgbe): what `Device` calls,
/// in the order the module docs give, for such a family
/// ([`Family::desc`]). Stateless like [`Family`]: every method gets the
/// registers.
pub(crate) trait DescFamily: Family + AsFamily {
    /// Program the largest frame the receiver accepts for `mtu` (in
    /// 1500..=[`Family::max_mtu`]); called after [`DescFamily::init`], before
    /// any queue is configured, receiver off. Longer frames are dropped by
    /// the NIC and counted in `rx_length_errors`. Default: nothing (the
    /// part's 1518/1522-byte limit).
    fn set_max_frame(&self, _r: &dyn Regs, _mtu: u32) {}
    /// Program flow control `mode` for MTU `mtu` (water marks from the RX
    /// packet buffer size); called once the queues are configured, before
    /// the receiver is enabled. Default: nothing (the part's reset state).
    /// `device` is the PCI device ID (the packet buffer's encoding differs
    /// between parts).
    fn configure_flow_control(&self, _r: &dyn Regs, _device: u16, _mode: FlowControl, _mtu: u32) {}
    /// Program the power saving `ps` of PCI device `device` for MTU `mtu`;
    /// called with [`DescFamily::configure_flow_control`]'s first call, before
    /// the receiver is enabled. Default: nothing (a part without any).
    fn configure_power_saving(&self, _r: &dyn Regs, _device: u16, _ps: PowerSaving, _mtu: u32) {}
    /// Why PCI device `device` cannot honour a [`PowerSaving`] other than
    /// [`PowerSaving::OFF`] (what to set instead included), `None` where it
    /// can: the open refuses the field with this
    /// ([`crate::Error::ConfigUnsupported`]). Default: it has neither.
    fn power_saving_refusal(&self, _device: u16) -> Option<&'static str> {
        Some(
            "this part has neither Energy Efficient Ethernet nor DMA coalescing; leave it \
             PowerSaving::OFF",
        )
    }
    /// The power saving the port runs with, read from its registers.
    /// Default: none.
    fn power_saving(&self, _r: &dyn Regs, _device: u16) -> PowerSaving {
        PowerSaving::OFF
    }
    /// The flow control mode the port runs with, read from its registers.
    /// Default: none.
    fn flow_control(&self, _r: &dyn Regs) -> FlowControl {
        FlowControl::None
    }
    /// RX write-back error bits (in `status_error`) that make a frame bad.
    fn rx_error_mask(&self) -> u32;
    /// The bit of the RX write-back's `status_error` that holds the L4
    /// checksum error, the IPv4 one being the next
    /// (`pollnic_hw::offload::IGB_L4E_BIT` or `IXGBE_L4E_BIT`).
    fn rx_l4e_bit(&self) -> u32 {
        pollnic_hw::offload::IGB_L4E_BIT
    }
    /// Whether a TX data descriptor that uses a context needs CC (the
    /// 82599's check-context bit). Default: no.
    fn tx_check_context(&self) -> bool {
        false
    }
    /// Turn on RX checksum status (`rx_checksum`) and VLAN strip
    /// (`vlan_strip`) for queues `0..queues`; called once every RX queue is
    /// configured and enabled, before the receiver is. Default: nothing.
    fn configure_rx_offloads(
        &self,
        _r: &dyn Regs,
        _queues: u16,
        _rx_checksum: bool,
        _vlan_strip: bool,
    ) {
    }

    /// Reset the device and bring it to the point where queues can be
    /// configured: interrupts masked, reset done, EEPROM and DMA init
    /// awaited, link negotiation started (not awaited), counters cleared.
    /// Returns the station MAC address.
    ///
    /// # Errors
    /// [`TimedOut`] naming the step the device did not complete.
    fn init(&self, r: &dyn Regs) -> Result<[u8; 6], TimedOut>;
    /// Program the RSS key, the 128-entry table and the hash types, RSS on.
    fn setup_rss(&self, r: &dyn Regs, key: &[u8; KEY_LEN], reta: &Reta, types: &HashTypes);
    /// Rewrite the redirection table (safe while traffic flows).
    fn write_reta(&self, r: &dyn Regs, reta: &Reta);
    /// Program RX queue `q` (base, length, buffer size, head/tail 0, drop
    /// when full if `drop_en`); the queue and the receiver stay off.
    fn configure_rx(&self, r: &dyn Regs, q: u16, ring: RingRegs, buf_size: usize, drop_en: bool);
    /// Program TX queue `q`; the queue stays off.
    fn configure_tx(&self, r: &dyn Regs, q: u16, ring: RingRegs);
    /// Turn the transmit DMA on (before any TX queue is enabled).
    fn start_tx(&self, r: &dyn Regs);
    /// Enable RX queue `q` and wait for the enable to latch; the driver
    /// writes the tail afterwards.
    ///
    /// # Errors
    /// [`TimedOut`] when the enable bit never reads back set.
    fn enable_rx_queue(&self, r: &dyn Regs, q: u16) -> Result<(), TimedOut>;
    /// Enable TX queue `q` and wait for the enable to latch.
    ///
    /// # Errors
    /// [`TimedOut`] when the enable bit never reads back set.
    fn enable_tx_queue(&self, r: &dyn Regs, q: u16) -> Result<(), TimedOut>;
    /// Turn the receiver on (after every RX queue is enabled and armed),
    /// broadcast accepted, the multicast table emptied, unicast/multicast
    /// promiscuous as `filter` asks, CRC stripped.
    ///
    /// # Errors
    /// [`TimedOut`] for a step the device did not complete.
    fn start_rx(&self, r: &dyn Regs, filter: RxFilter) -> Result<(), TimedOut>;
    /// Byte offset of RX queue `q`'s tail register (RDT).
    fn rdt(&self, q: u16) -> u32;
    /// Byte offset of TX queue `q`'s tail register (TDT).
    fn tdt(&self, q: u16) -> u32;
    /// Current link state.
    fn link_status(&self, r: &dyn Regs) -> LinkStatus;
    /// Add the clear-on-read counters to `s`.
    fn update_stats(&self, r: &dyn Regs, s: &mut Stats) {
        s.read_registers(r);
    }
    /// Stop all DMA (receiver, transmitter, the first `queues` queues, each
    /// awaited with a bound) and reset. Safe on a device in any state.
    fn shutdown(&self, r: &dyn Regs, queues: u16);
    /// Put the device in MSI-X mode with RX queue `q`'s cause routed to
    /// vector `q` for `q` in `0..queues` (IVAR), every vector masked and its
    /// cause cleared, auto-clear on (EIAC), each throttled to `rx_usecs` µs
    /// (EITR); `device` is the PCI device ID (the IVAR layout differs between
    /// parts). Returns each queue's vector registers, or `None` (the
    /// default) when the family has no MSI-X support.
    fn configure_msix(
        &self,
        _r: &dyn Regs,
        _device: u16,
        _queues: u16,
        _rx_usecs: u32,
    ) -> Option<Vec<VectorRegs>> {
        None
    }
}
