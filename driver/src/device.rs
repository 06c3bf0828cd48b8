//! The device API: open an igb or ixgbe NIC bound to vfio-pci, move bursts of
//! packets on its queues, read link, MAC and counters, and shut it down in the
//! right order (DMA stopped and the device reset before any DMA memory is
//! released), also on panic (Drop runs while unwinding) and on Ctrl-C when the
//! program uses [`crate::signal::stop_flag`].
//!
//! The family-specific register work goes through [`crate::family::Family`],
//! picked from the PCI ID; the device underneath is reached through
//! [`crate::io::DeviceIo`] (VFIO for a real NIC, a software model in host tests).

use crate::config::DeviceConfig;
use crate::counters::{DeviceCounters, QueueCounters};
use crate::error::{Error, Result};
use crate::family::{self, Family, LinkStatus, RingRegs};
use crate::io::{DeviceBar, DeviceIo};
use crate::pci::{PciAddress, PciDevice, Sysfs, VFIO_PCI};
use crate::queue::Queue;
use crate::refresh::{SharedStats, StatsRefresher, STATS_REFRESH};
use crate::stats::Stats;
use crate::sys::dmamap::{DmaMapping, DmaPurpose, MappingLog, Recording};
use crate::sys::vfio::Vfio;
use crate::wait::{wait_for, TimedOut};
use crossbeam_utils::CachePadded;
use pollnic_hw::rss::{Reta, Toeplitz, KEY_LEN};
use pollnic_rings::{DescRing, Mempool, Packet, PageSize, RxRing, RxStats, TxRing, TxStats};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which device [`Device::open_on`] drives: its PCI address (for messages)
/// and PCI IDs (to pick the family).
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// A NIC driven by pollnic: `cfg.queues` RX/TX queue pairs with RSS
/// spreading flows over them. The `*_burst` methods on `Device` use queue 0;
/// use [`Device::queues_mut`] or [`crate::runner::run_pinned`] for the others.
pub struct Device {
    addr: PciAddress,
    name: String,
    family: &'static dyn Family,
    mac: [u8; 6],
    queues: Vec<Queue>,
    counters: DeviceCounters,
    rss_key: [u8; KEY_LEN],
    reta: Reta,
    mtu: u32,
    /// Queues the hardware may have enabled (all are disabled at shutdown).
    hw_queues: u16,
    /// Counter totals, read every [`STATS_REFRESH`] by `refresher` (the
    /// clear-on-read registers' horizon, see [`crate::refresh`]).
    stats: SharedStats,
    refresher: Option<StatsRefresher>,
    bar: Arc<dyn DeviceBar>,
    /// The live DMA mappings, kept by the [`Recording`] mappers of each region.
    mappings: MappingLog,
    // Dropped last: BAR unmapped, VFIO device and container closed.
    io: Box<dyn DeviceIo>,
}

impl Device {
    /// Open the NIC at `addr` (e.g. `0000:00:08.0`), reset it and bring it up
    /// with `cfg`; returns once the link is up. The back end (igb or ixgbe)
    /// is chosen from the PCI ID.
    ///
    /// # Errors
    /// - [`Error::InvalidRingSize`] / [`Error::Config`]: bad `cfg` (checked first, device untouched);
    /// - [`Error::Pci`]: bad address, no such device, unsupported device, no IOMMU group;
    /// - [`Error::NotBoundToVfio`]: still bound to a kernel driver (run `pollnic bind`);
    /// - [`Error::GroupNotViable`], [`Error::VfioUnavailable`], [`Error::DeviceBusy`], [`Error::Vfio`];
    /// - [`Error::Dma`]: no hugepages reserved, or memlock too low;
    /// - [`Error::Timeout`], [`Error::LinkDown`]: the device did not respond or the link stayed down.
    ///
    /// On every error after the device was opened it is reset and all memory released.
    pub fn open(addr: &str, cfg: &DeviceConfig) -> Result<Device> {
        cfg.validate()?;
        let addr: PciAddress = addr.parse().map_err(crate::pci::Error::from)?;
        let sysfs = Sysfs::default();
        let info = PciDevice::read(&sysfs, addr)?;
        let ident = DeviceIdent {
            addr,
            vendor: info.vendor,
            device: info.device,
            name: info.name(),
        };
        check_family(&ident, cfg)?;
        if info.driver.as_deref() != Some(VFIO_PCI) {
            return Err(Error::NotBoundToVfio {
                addr,
                driver: info.driver,
            });
        }
        let group = info
            .iommu_group
            .ok_or(crate::pci::Error::NoIommuGroup { addr })?;
        let vfio = Vfio::open(&sysfs, addr, group)?;
        Device::open_on(Box::new(vfio), ident, cfg)
    }

    /// Bring up the device behind `io` (its registers and DMA mapper) as
    /// [`Device::open`] does once VFIO is open: the same code, over any
    /// [`DeviceIo`], e.g. the software 82599 of [`crate::model::ixgbe`].
    ///
    /// # Errors
    /// As [`Device::open`] from the configuration check on. On error the
    /// device is shut down and all DMA memory released.
    pub fn open_on(
        io: Box<dyn DeviceIo>,
        ident: DeviceIdent,
        cfg: &DeviceConfig,
    ) -> Result<Device> {
        cfg.validate()?;
        let family = check_family(&ident, cfg)?;
        let counters: DeviceCounters = (0..cfg.queues)
            .map(|_| CachePadded::new(QueueCounters::default()))
            .collect();
        let mut dev = Device {
            addr: ident.addr,
            name: ident.name,
            family,
            mac: [0; 6],
            queues: Vec::new(),
            counters,
            rss_key: cfg.rss_key,
            reta: cfg.effective_reta(),
            mtu: cfg.mtu,
            hw_queues: cfg.queues,
            stats: Arc::new(Mutex::new(Stats::new(family.stats_layout()))),
            refresher: None,
            bar: io.bar0(),
            mappings: MappingLog::default(),
            io,
        };
        // On error `dev` is dropped here, which resets the device and frees everything.
        dev.bring_up(cfg)?;
        let (bar, stats) = (Arc::clone(&dev.bar), Arc::clone(&dev.stats));
        let refresher = StatsRefresher::start(STATS_REFRESH, move || {
            let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
            family.update_stats(bar.regs(), &mut s);
        })
        .map_err(|e| Error::Config(format!("cannot start the counter refresh thread: {e}")))?;
        dev.refresher = Some(refresher);
        Ok(dev)
    }

    fn bring_up(&mut self, cfg: &DeviceConfig) -> Result<()> {
        let addr = self.addr;
        let timeout = |t: TimedOut| Error::Timeout {
            addr,
            what: t.what,
            waited_ms: t.waited_ms,
        };
        let fam = self.family;
        let bar = Arc::clone(&self.bar);
        let r = bar.regs();
        self.mac = fam.init(r).map_err(timeout)?;
        fam.set_max_frame(r, cfg.mtu);

        let page = self.io.page_size();
        if page == PageSize::Huge2M {
            check_hugepages(cfg)?;
        }
        let dma = self.io.dma();
        // RSS always on: with one queue it still writes the hash back.
        fam.setup_rss(r, &self.rss_key, &self.reta, &cfg.hash_types);
        let drop_en = cfg.queues > 1; // one full queue must not stall the others
        let mapper = |purpose| -> Arc<dyn pollnic_rings::DmaMapper> {
            Recording::new(dma.clone(), purpose, Arc::clone(&self.mappings))
        };
        for q in 0..cfg.queues {
            let pool = Mempool::new(
                cfg.mempool_size,
                cfg.rx_buf_size(),
                page,
                mapper(DmaPurpose::Mempool(q)),
            )?;
            let rx_desc =
                DescRing::new(cfg.rx_ring_size as u16, page, mapper(DmaPurpose::RxRing(q)))?;
            let tx_desc =
                DescRing::new(cfg.tx_ring_size as u16, page, mapper(DmaPurpose::TxRing(q)))?;
            let ring = |d: &DescRing| RingRegs {
                iova: d.iova(),
                len_bytes: d.len_bytes(),
            };
            fam.configure_rx(r, q, ring(&rx_desc), pool.buf_size(), drop_en);
            fam.configure_tx(r, q, ring(&tx_desc));
            let mut rx = RxRing::new(rx_desc, &pool, Arc::clone(&bar).doorbell(fam.rdt(q)))?;
            rx.set_error_mask(fam.rx_error_mask());
            let tx = TxRing::new(tx_desc, &pool, Arc::clone(&bar).doorbell(fam.tdt(q)));
            self.queues.push(Queue {
                id: q,
                rx,
                tx,
                counters: Arc::clone(&self.counters),
            });
        }
        fam.start_tx(r);
        for q in &mut self.queues {
            fam.enable_rx_queue(r, q.id).map_err(timeout)?;
            q.rx.start();
            fam.enable_tx_queue(r, q.id).map_err(timeout)?;
        }
        fam.start_rx(r, cfg.rx_filter()).map_err(timeout)?;

        wait_for("link up", cfg.link_timeout, || fam.link_status(r).up).map_err(|t| {
            Error::LinkDown {
                addr,
                waited_ms: t.waited_ms,
            }
        })
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

    /// The back end driving this device ("igb", "ixgbe").
    pub fn family(&self) -> &'static str {
        self.family.name()
    }

    fn q(&mut self) -> &mut Queue {
        &mut self.queues[0]
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
    /// §8.10.22, and the 82599 alike: RETA may be written at any time).
    ///
    /// # Errors
    /// [`Error::Config`] when the table names a queue that does not exist.
    pub fn set_reta(&mut self, reta: Reta) -> Result<()> {
        if let Some(bad) = reta.0.iter().find(|&&q| q as u16 >= self.queue_count()) {
            return Err(Error::Config(format!(
                "redirection table names queue {bad} but the device has {} queues",
                self.queue_count()
            )));
        }
        self.family.write_reta(self.bar.regs(), &reta);
        self.reta = reta;
        Ok(())
    }

    /// Receive up to `max` frames from queue 0, appending them to `out`;
    /// returns how many. Never blocks; never allocates if `out` has room.
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        self.q().rx_burst(out, max)
    }

    /// Queue frames from the front of `pkts` on TX queue 0 until the ring is
    /// full; returns how many were taken (the rest stay in `pkts`, in order).
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>) -> usize {
        self.q().tx_burst(pkts)
    }

    /// Reclaim sent TX buffers of queue 0 until none is in flight or
    /// `timeout` passes; returns whether the TX ring drained.
    pub fn flush_tx(&mut self, timeout: Duration) -> bool {
        self.q().flush_tx(timeout)
    }

    /// The queue's mempool: allocate TX frames from it with [`Mempool::alloc`].
    pub fn mempool(&self) -> &Mempool {
        self.queues[0].mempool()
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

    /// PCI address.
    pub fn address(&self) -> PciAddress {
        self.addr
    }

    /// Marketing name of the device (e.g. "82576 Gigabit Network Connection").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Current link state (igb STATUS, 82599 LINKS).
    pub fn link(&self) -> LinkStatus {
        self.family.link_status(self.bar.regs())
    }

    /// Read the hardware counters (adding to the totals since open) and return
    /// the totals under their `ethtool -S` names. The device also reads them
    /// every [`STATS_REFRESH`] on its own thread, so no count is lost however
    /// rarely this is called ([`crate::refresh`] gives the horizon).
    pub fn stats(&mut self) -> Stats {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        self.family.update_stats(self.bar.regs(), &mut s);
        s.clone()
    }

    /// Software counters of RX queue 0.
    pub fn rx_stats(&self) -> RxStats {
        self.queues
            .first()
            .map(|q| q.rx_stats())
            .unwrap_or_default()
    }

    /// Software counters of TX queue 0.
    pub fn tx_stats(&self) -> TxStats {
        self.queues
            .first()
            .map(|q| q.tx_stats())
            .unwrap_or_default()
    }
}

/// The family that drives `ident`, once `cfg` fits it (queue count, ring
/// sizes); nothing is touched yet.
fn check_family(ident: &DeviceIdent, cfg: &DeviceConfig) -> Result<&'static dyn Family> {
    let family =
        family::lookup(ident.vendor, ident.device).ok_or(crate::pci::Error::Unsupported {
            addr: ident.addr,
            vendor: ident.vendor,
            device: ident.device,
        })?;
    let max = family.max_queues(ident.device);
    if cfg.queues > max {
        return Err(Error::Config(format!(
            "{} queues requested but {} has {max}",
            cfg.queues, ident.name
        )));
    }
    if cfg.mtu > family.max_mtu() {
        return Err(Error::Config(format!(
            "MTU {} is above the {} bytes the {} back end supports ({})",
            cfg.mtu,
            family.max_mtu(),
            family.name(),
            ident.name
        )));
    }
    let min = family.min_ring_size();
    for (which, size) in [("rx", cfg.rx_ring_size), ("tx", cfg.tx_ring_size)] {
        if size < min {
            return Err(Error::Config(format!(
                "{which} ring size {size} is below the {min} descriptors {} ({}) accepts: \
                 use a power of two from {min} to 4096",
                ident.name,
                family.name()
            )));
        }
    }
    Ok(family)
}

/// Refuse up front, with the total, when the hugepage pool cannot hold every
/// queue's mempool and two rings (each region is rounded up to 2 MiB pages).
fn check_hugepages(cfg: &DeviceConfig) -> Result<()> {
    use pollnic_rings::dma::free_hugepages;
    let (mempool, rings) = cfg.hugepages_per_queue();
    let per_queue = mempool + rings;
    let needed = per_queue * cfg.queues as usize;
    let free = free_hugepages();
    if free < needed {
        return Err(pollnic_rings::DmaError::NoHugepages { needed, free }.into());
    }
    Ok(())
}

impl Drop for Device {
    fn drop(&mut self) {
        // 1. stop DMA and reset; 2. no more bus mastering; 3. only then free
        //    rings and buffers (unmap from the IOMMU, munmap); 4. close VFIO.
        // 0. no more counter reads (a read during reset may return all ones).
        if let Some(mut r) = self.refresher.take() {
            r.stop();
        }
        self.family.shutdown(self.bar.regs(), self.hw_queues);
        self.io.disable_bus_master();
        self.queues.clear();
    }
}
