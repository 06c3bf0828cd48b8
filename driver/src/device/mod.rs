//! The device API: open an igb, ixgbe or virtio-net port (bound to
//! vfio-pci, or on a no-IOMMU route), move bursts of packets on its queues,
//! read link, MAC and counters, and shut it down in the right order (DMA
//! stopped and the device reset before any DMA memory is released), also
//! on panic (Drop runs while unwinding) and on Ctrl-C when the program's
//! signal handler sets the flag its loops check and returns, so that the
//! `Device` is dropped (the tools do it with `pollnic_tools::signal`).
//!
//! A device holds one back end (`backend.rs`): an Intel family's register
//! work over descriptor rings (brought up in `desc.rs`) or a virtio-net
//! port over virtqueues (`virtio.rs`). Opening is `open.rs`, the counters'
//! reader `stats.rs`. The device underneath is reached through
//! [`crate::lowlevel::io::DeviceIo`] (VFIO or a no-IOMMU route for a real NIC, a
//! software model in host tests).

mod backend;
mod desc;
mod open;
mod stats;
mod virtio;

pub(crate) use open::check_family;
pub use stats::StatsReader;

use crate::counters::DeviceCounters;
use crate::error::{ConfigError, Error, Result};
use crate::family::LinkStatus;
use crate::irq::{Moderation, RxMode};
use crate::lowlevel::io::{DeviceBar, DeviceIo};
use crate::pci::PciAddress;
use crate::queue::Queue;
use crate::refresh::{SharedStats, StatsRefresher};
use crate::removal::Removal;
use crate::stats::Stats;
use crate::sys::dmamap::{DmaMapping, DmaPurpose, MappingLog, Recording};
use backend::Backend;
use pollnic_hw::rss::{Reta, Toeplitz, KEY_LEN};
use pollnic_rings::Mempool;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Which device [`Device::open_on`] drives: its PCI address (for messages)
/// and PCI IDs (to pick the family). Non-exhaustive: build one with
/// [`DeviceIdent::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceIdent {
    /// PCI address, as errors name it.
    pub addr: PciAddress,
    /// PCI vendor ID.
    pub vendor: u16,
    /// PCI device ID.
    pub device: u16,
    /// Marketing name.
    pub name: String,
}

impl DeviceIdent {
    /// The device at `addr` with PCI IDs `vendor:device`, called `name` in messages.
    pub fn new(addr: PciAddress, vendor: u16, device: u16, name: impl Into<String>) -> Self {
        DeviceIdent {
            addr,
            vendor,
            device,
            name: name.into(),
        }
    }
}

/// A NIC driven by pollnic: `cfg.queues` RX/TX queue pairs with RSS
/// spreading flows over them. Packets move on a queue: [`Device::queue`]
/// (`dev.queue(0).rx_burst(..)`), [`Device::queues_mut`] or
/// [`crate::run_pinned`] for one thread per queue.
pub struct Device {
    addr: PciAddress,
    name: String,
    /// What drives it: an Intel family over descriptor rings, or a
    /// virtio-net port over virtqueues.
    backend: Backend,
    mac: [u8; 6],
    queues: Vec<Queue>,
    counters: DeviceCounters,
    rss_key: [u8; KEY_LEN],
    reta: Reta,
    mtu: u32,
    /// Queues the hardware may have enabled (all are disabled at shutdown).
    hw_queues: u16,
    /// PCI device ID (the IVAR layout differs between parts).
    device_id: u16,
    /// The throttle MSI-X vectors get when enabled, in µs (EITR).
    moderation: Moderation,
    /// Whether MSI-X is enabled (disabled at shutdown).
    msix_on: bool,
    /// Counter totals, read every [`STATS_REFRESH`](crate::refresh::STATS_REFRESH) by `refresher` (the
    /// clear-on-read registers' horizon, see [`crate::refresh`]).
    stats: SharedStats,
    refresher: Option<StatsRefresher>,
    bar: Arc<dyn DeviceBar>,
    /// Cleared when the device shuts down: [`StatsReader`]s stop reading
    /// registers then.
    open: Arc<AtomicBool>,
    /// The live DMA mappings, kept by the [`Recording`] mappers of each region.
    mappings: MappingLog,
    /// Handles of the pools [`Device::create_mempool`] made, let go only
    /// after the device is reset (`Drop`), so that none is unmapped while
    /// a descriptor may still name it.
    created_pools: Mutex<Vec<Mempool>>,
    /// The kernel's request for the device back (shared with the queues).
    removal: Arc<Removal>,
    // Dropped last: BAR unmapped, VFIO device and container closed.
    io: Box<dyn DeviceIo>,
}

impl Device {
    /// Whether this device's DMA reaches `other`'s buffers, i.e. whether a
    /// [`Packet`](crate::Packet) received on one may be sent on the other as it is (ports
    /// opened together by [`Device::open_many`], or the same device).
    pub fn shares_dma_with(&self, other: &Device) -> bool {
        self.queues
            .first()
            .zip(other.queues.first())
            .is_some_and(|(a, b)| {
                a.mempool()
                    .region()
                    .same_address_space(b.mempool().region())
            })
    }

    /// [`Error::DifferentContainers`] unless [`Device::shares_dma_with`]:
    /// the check a forwarder makes before it hands one port's packets to
    /// another's TX ring.
    ///
    /// # Errors
    /// [`Error::DifferentContainers`], naming both ports.
    pub fn check_shares_dma_with(&self, other: &Device) -> Result<()> {
        if self.shares_dma_with(other) {
            Ok(())
        } else {
            Err(Error::DifferentContainers {
                addr: self.addr,
                other: other.addr,
            })
        }
    }

    /// Every IOMMU mapping this device has now (`VFIO_IOMMU_MAP_DMA` on a
    /// real NIC), sorted by IOVA: per queue one mempool and one RX and one TX
    /// descriptor ring, nothing else. Recorded as the mapper is called, and
    /// removed when a region is unmapped; a mempool stays mapped while
    /// packets of it are alive (also after the `Device` is dropped).
    pub fn dma_mappings(&self) -> Vec<DmaMapping> {
        let mut v = self
            .mappings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        v.sort_by_key(|m| m.iova);
        v
    }

    /// The family of NICs this device belongs to, the back end driving it
    /// (`NicFamily::Igb`, `Ixgbe`, `VirtioNet`; its `name()` and `Display`
    /// give "igb", "ixgbe", "virtio-net").
    pub fn family(&self) -> crate::NicFamily {
        self.backend.family().kind()
    }

    /// What this port can do: queues, MTU, transmit and receive offloads,
    /// RSS, interrupt modes and the counters it keeps. Read from what the
    /// family drives and, on virtio-net, from what the device offered and
    /// pollnic negotiated at open; the counters from one [`Device::stats`]
    /// read.
    pub fn capabilities(&self) -> crate::Capabilities {
        let stats = self.stats();
        let counters = crate::Counter::ALL
            .into_iter()
            .filter(|&c| stats.counter(c).is_some())
            .collect();
        let msix = self.io.interrupts().is_some_and(|i| i.msix_capable());
        let intel = crate::Capabilities {
            family: self.family(),
            max_queues: self.backend.family().max_queues(self.device_id),
            queues: self.hw_queues,
            max_mtu: self.backend.family().max_mtu(),
            tx: crate::TxCapabilities {
                ipv4_checksum: true,
                l4_checksum: true,
                vlan_insert: true,
                tso: true,
            },
            rx_checksum: true,
            vlan_strip: true,
            rss: Some(crate::RssCapabilities {
                table_len: pollnic_hw::rss::RETA_LEN,
                key_len: pollnic_hw::rss::KEY_LEN,
            }),
            interrupts: msix,
            counters,
            virtq_layout: None,
            virtq_in_order: None,
        };
        self.backend.capabilities(intel)
    }

    /// Whether the kernel has asked for this device back: an administrator
    /// unbound it from vfio-pci or removed it, and VFIO relayed the request
    /// (`VFIO_PCI_REQ_IRQ_INDEX`; the kernel's unbind or remove now waits
    /// until this `Device` is dropped). One relaxed atomic load: check it
    /// where a loop checks its stop flag ([`Queue::is_removed`] on a queue
    /// thread), or register [`Device::on_removal`]. The hardware keeps
    /// working until the device is dropped; the bursts do not look at this.
    /// Never true for a device that has no request channel (the software
    /// 82599; the software 82576 has one, fired by its `request_release`).
    #[inline]
    pub fn is_removed(&self) -> bool {
        self.removal.requested()
    }

    /// `Err(`[`Error::DeviceRemoved`]`)` once [`Device::is_removed`]: the
    /// error to hand up (its message says what happened and what to run to
    /// use the port again). Then drop the device: that stops its DMA
    /// (queues and receiver off, reset, bus mastering off), returns every
    /// ring buffer to its pool, and closes the VFIO device and group, which
    /// lets the kernel's unbind or remove complete.
    ///
    /// # Errors
    /// [`Error::DeviceRemoved`], naming the device.
    pub fn check_removed(&self) -> Result<()> {
        if self.is_removed() {
            Err(Error::DeviceRemoved { addr: self.addr })
        } else {
            Ok(())
        }
    }

    /// Run `f(address)` once when the kernel asks for this device back
    /// (see [`Device::is_removed`]), on the thread that receives the request
    /// (`pollnic-release`), or at once if it came already. Typically `f`
    /// sets the flag the program's loops already check, as a Ctrl-C handler
    /// does (DPDK's counterpart: an `RTE_DEV_EVENT_REMOVE` callback). `f`
    /// must not block and must not drop the device.
    pub fn on_removal<F>(&self, f: F)
    where
        F: Fn(PciAddress) + Send + Sync + 'static,
    {
        self.removal.on_request(Box::new(f));
    }

    /// Whether this device receives the kernel's release requests: true for
    /// a NIC opened through VFIO and for the software 82576, false for the
    /// software 82599. Without
    /// them an unbind or remove of the device waits until the process
    /// closes it.
    pub fn watches_removal(&self) -> bool {
        self.removal.watched()
    }

    /// Set every queue's receive mode ([`RxMode`]; [`Queue::wait_rx`] waits
    /// as it says). The first interrupt or adaptive mode enables MSI-X: one
    /// vector per RX queue, delivered to an eventfd through
    /// `VFIO_DEVICE_SET_IRQS`, the queue's cause routed to it through IVAR,
    /// throttled by EITR ([`DeviceConfig::moderation`](crate::DeviceConfig::moderation)), masked until the
    /// queue arms it (Linux `igb_configure_msix`, `ixgbe_configure_msix`).
    /// Going back to busy-poll leaves MSI-X on, every vector masked.
    ///
    /// # Errors
    /// [`Error::Interrupts`] when MSI-X cannot be enabled (the device or its
    /// back end has none, VFIO refuses); the queues keep their mode then.
    pub fn set_rx_mode(&mut self, mode: RxMode) -> Result<()> {
        if mode.uses_interrupts() {
            self.enable_msix()?;
        }
        for q in &mut self.queues {
            q.set_rx_mode(mode)?;
        }
        Ok(())
    }

    /// Set every queue's interrupt throttle in µs ([`Queue::set_rx_usecs`]),
    /// and the one vectors get if MSI-X is enabled later.
    ///
    /// # Errors
    /// [`Error::RxUsecsTooLarge`] above the family's EITR range.
    pub fn set_rx_usecs(&mut self, usecs: u32) -> Result<()> {
        self.set_moderation(Moderation::Fixed { usecs })
    }

    /// Set how every queue's vector is throttled ([`Queue::set_moderation`]:
    /// a fixed interval, or igb's dynamic classes under a latency bound),
    /// and what vectors get if MSI-X is enabled later.
    ///
    /// # Errors
    /// [`Error::RxUsecsTooLarge`] when the interval (or the dynamic cap, up
    /// to igb's longest class, 245 µs) is above the family's EITR range.
    pub fn set_moderation(&mut self, moderation: Moderation) -> Result<()> {
        let family = self.backend.family();
        let max = family.max_rx_usecs();
        if moderation.max_usecs() > max {
            return Err(Error::RxUsecsTooLarge {
                usecs: moderation.max_usecs(),
                max,
                family: family.name(),
            });
        }
        self.moderation = moderation;
        if self.msix_on {
            for q in &mut self.queues {
                q.set_moderation(moderation)?;
            }
        }
        Ok(())
    }

    /// Enable MSI-X, one vector per queue, all masked: see
    /// [`Device::set_rx_mode`]. Once; the back end does the work
    /// (`desc::enable_msix_desc`, `virtio::enable_msix_virtio`).
    fn enable_msix(&mut self) -> Result<()> {
        if self.msix_on {
            return Ok(());
        }
        match &self.backend {
            Backend::Desc(desc) => {
                let desc = *desc;
                self.enable_msix_desc(desc)?
            }
            Backend::Virtio(v) => {
                let refused = v.vector_refused;
                self.enable_msix_virtio(refused)?
            }
        }
        self.msix_on = true;
        Ok(())
    }

    /// Every queue, to read (e.g. each one's [`Queue::rx_stats`]).
    pub fn queues(&self) -> &[Queue] {
        &self.queues
    }

    /// Every queue, to hand to per-core threads (see [`crate::runner::run_pinned`]).
    pub fn queues_mut(&mut self) -> &mut [Queue] {
        &mut self.queues
    }

    /// Queue `i`.
    ///
    /// # Panics
    /// If `i` is not below the configured queue count.
    pub fn queue(&mut self, i: u16) -> &mut Queue {
        &mut self.queues[i as usize]
    }

    /// Number of queue pairs.
    pub fn queue_count(&self) -> u16 {
        self.queues.len() as u16
    }

    /// Live per-queue counters, readable from another thread while the queues run.
    pub fn counters(&self) -> DeviceCounters {
        Arc::clone(&self.counters)
    }

    /// The MTU the receiver was set up for (bytes, L3 payload): frames up to
    /// `mtu + 18` bytes with their FCS arrive, 4 more per VLAN tag.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The RSS key in use.
    pub fn rss_key(&self) -> &[u8; KEY_LEN] {
        &self.rss_key
    }

    /// The redirection table in use.
    pub fn reta(&self) -> &Reta {
        &self.reta
    }

    /// A software Toeplitz hasher with this device's key, to predict the
    /// queue a flow lands on (`pollnic_hw::rss::queue_for`).
    pub fn rss_hasher(&self) -> Toeplitz {
        Toeplitz::new(&self.rss_key)
    }

    /// Replace the redirection table while traffic flows (82576 datasheet
    /// §8.10.22, and the 82599 alike: RETA may be written at any time; on
    /// virtio-net with `VIRTIO_NET_F_RSS` the whole RSS configuration is
    /// sent again on the control queue, virtio 1.x §5.1.6.5.7).
    ///
    /// # Errors
    /// [`ConfigError::RetaQueueOutOfRange`] when the table names a queue that does not exist;
    /// on virtio-net [`Error::VirtioCtrl`] when the device refuses it.
    pub fn set_reta(&mut self, reta: Reta) -> Result<()> {
        if let Some(&bad) = reta.0.iter().find(|&&q| q as u16 >= self.queue_count()) {
            return Err(ConfigError::RetaQueueOutOfRange {
                queue: bad,
                queues: self.queue_count(),
            }
            .into());
        }
        self.backend.set_reta(self.bar.as_ref(), &reta)?;
        self.reta = reta;
        Ok(())
    }

    /// Queue 0's mempool: allocate TX frames from it with [`Mempool::alloc`]
    /// (each queue has its own: [`Queue::mempool`]).
    pub fn mempool(&self) -> &Mempool {
        self.queues[0].mempool()
    }

    /// A new mempool of `count` buffers of `buf_size` bytes each (rounded
    /// up to 128), mapped for this device's DMA: for TX frames longer than
    /// the queues' own buffers, above all TSO frames
    /// ([`offload::TxOffload::with_tso`](crate::offload::TxOffload::with_tso)):
    /// a 64 KiB TCP payload with its headers is one [`Packet`](crate::Packet)
    /// of such a pool, e.g. `dev.create_mempool(64, 72 * 1024)`. Every port
    /// that shares this device's container ([`Device::open_many`]) can send
    /// its packets, zero copy; the queues free them back into it once sent
    /// (counted in `TxStats::foreign`). No buffer crosses a page, so a
    /// 2 MiB hugepage holds `2 MiB / buf_size` of them; the pool stays
    /// mapped while any of its packets lives (DPDK's
    /// `rte_pktmbuf_pool_create`). Listed in [`Device::dma_mappings`] as
    /// `DmaPurpose::CreatedMempool`. The device keeps a handle of its own
    /// until it is closed and reset, so the pool stays mapped while any
    /// descriptor may name it, whichever is dropped first.
    ///
    /// # Errors
    /// [`Error::Dma`] when the memory cannot be had (no free hugepages:
    /// reserve more, `echo N > /proc/sys/vm/nr_hugepages`; `buf_size`
    /// above the page size) or mapped.
    pub fn create_mempool(&self, count: u32, buf_size: usize) -> Result<Mempool> {
        let mapper = Recording::new(
            self.io.dma(),
            DmaPurpose::CreatedMempool,
            Arc::clone(&self.mappings),
        );
        let pool = Mempool::new(count, buf_size, self.io.page_size(), mapper)?;
        self.created_pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pool.clone());
        Ok(pool)
    }

    /// The station MAC address (RAL0/RAH0 as loaded from the EEPROM).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The MAC as `aa:bb:cc:dd:ee:ff`.
    pub fn mac_string(&self) -> String {
        let m = self.mac;
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }

    /// PCI address (the name `PciDevice.addr` and every error's `addr`
    /// give it too).
    pub fn addr(&self) -> PciAddress {
        self.addr
    }

    /// Marketing name of the device (e.g. "82576 Gigabit Network Connection").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Current link state (igb STATUS, 82599 LINKS; virtio-net the
    /// `status` field of the device configuration, down while the device
    /// reports DEVICE_NEEDS_RESET, speed 0: not reported).
    pub fn link(&self) -> LinkStatus {
        self.backend.link(self.bar.as_ref())
    }

    /// [`Error::VirtioNeedsReset`] when a virtio-net device has set
    /// DEVICE_NEEDS_RESET since it was opened (virtio 1.x §2.1.1: its
    /// queues are then not to be trusted; close and reopen the port), and
    /// [`Error::QueueStopped`] for the first queue whose virtqueue stopped on
    /// a device error ([`Queue::check`]); `Ok` otherwise, and always on the
    /// Intel families.
    ///
    /// # Errors
    /// [`Error::VirtioNeedsReset`], [`Error::QueueStopped`].
    pub fn check_device(&self) -> Result<()> {
        self.backend.check()?;
        self.queues.iter().try_for_each(Queue::check)
    }

    /// The flow control mode the port runs with, read back from its
    /// registers (igb CTRL.RFCE/TFCE; 82599 MFLCN.RFCE, FCCFG.TFCE_802_3X):
    /// [`DeviceConfig::flow_control`](crate::DeviceConfig::flow_control) as the NIC took it. `ethtool -a`.
    pub fn flow_control(&self) -> crate::config::FlowControl {
        self.backend.flow_control(self.bar.as_ref())
    }

    /// The I350's Energy Efficient Ethernet and DMA coalescing as the NIC
    /// runs them, read back from EEER and DMACR ([`DeviceConfig::power_saving`](crate::DeviceConfig::power_saving));
    /// always off on parts without them (82576, 82599). `ethtool --show-eee`.
    pub fn power_saving(&self) -> crate::config::PowerSaving {
        self.backend.power_saving(self.bar.as_ref(), self.device_id)
    }

    /// Read the hardware counters (adding to the totals since open) and return
    /// the totals: typed with [`Stats::counter`], or by `ethtool -S` name
    /// with [`Stats::get`]. Takes `&self`, so it works while the queues run
    /// on pinned threads; [`Device::stats_reader`] gives a handle another
    /// thread can keep. The device also reads them every second
    /// (`STATS_REFRESH`) on its own thread, so no count is lost however
    /// rarely this is called (a 32-bit clear-on-read counter at 1 Gb/s
    /// wraps after about 48 minutes at line rate).
    pub fn stats(&self) -> Stats {
        self.stats_reader().stats()
    }

    /// A cloneable, `Send + Sync` handle that reads this device's hardware
    /// counters from any thread, as [`Device::stats`] does. After the device
    /// is closed it returns the last totals without touching the hardware.
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader {
            family: self.backend.family().name(),
            source: self.backend.stats_source(&self.bar, &self.counters),
            stats: Arc::clone(&self.stats),
            open: Arc::clone(&self.open),
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // 1. stop DMA and reset; 2. no more bus mastering; 3. only then free
        //    rings and buffers (unmap from the IOMMU, munmap); 4. close VFIO.
        // 0. no more counter reads (a read during reset may return all ones).
        if let Some(mut r) = self.refresher.take() {
            r.stop();
        }
        {
            // Under the counters' lock, so no reader is mid-read during reset.
            let _s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            self.open.store(false, Ordering::Release);
        }
        self.backend.shutdown(self.bar.as_ref(), self.hw_queues);
        if self.msix_on {
            if let Some(intr) = self.io.interrupts() {
                intr.disable_msix();
            }
        }
        self.io.disable_bus_master();
        self.queues.clear();
        self.created_pools
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// A locally administered MAC for a virtio device without
/// `VIRTIO_NET_F_MAC` (virtio 1.x §5.1.5: the driver then makes one up):
/// `02:00:<domain low byte>:<bus>:<device>:<function>`.
fn local_mac(addr: PciAddress) -> [u8; 6] {
    let s = addr.to_string();
    let hex = |r: std::ops::Range<usize>| {
        s.get(r)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0)
    };
    [0x02, 0x00, hex(2..4), hex(5..7), hex(8..10), hex(11..12)]
}
