//! The device API: open an igb NIC bound to vfio-pci, move bursts of packets
//! on its queue, read link, MAC and counters, and shut it down in the right
//! order (DMA stopped and the device reset before any DMA memory is released),
//! also on panic (Drop runs while unwinding) and on Ctrl-C when the program
//! uses [`crate::signal::stop_flag`].

use crate::config::DeviceConfig;
use crate::error::{Error, Result};
use crate::igb::init::{self, LinkStatus, TimedOut};
use crate::igb::queue;
use crate::igb::stats::Stats;
use crate::mmio::{Bar, Regs};
use crate::pci::{NicFamily, PciAddress, PciDevice, Sysfs, VFIO_PCI};
use crate::vfio::Vfio;
use pollnic_hw::igb::regs::{rdt, tdt};
use pollnic_rings::{DescRing, Doorbell, Mempool, Packet, PageSize, RxRing, RxStats, TxRing, TxStats};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The tail register of one ring, written through BAR0.
pub struct MmioDoorbell {
    bar: Arc<Bar>,
    reg: u32,
}

impl Doorbell for MmioDoorbell {
    #[inline]
    fn ring(&mut self, tail: u16) {
        self.bar.write32(self.reg, tail as u32);
    }
}

struct Queue {
    rx: RxRing<MmioDoorbell>,
    tx: TxRing<MmioDoorbell>,
    pool: Arc<Mempool>,
}

/// An igb NIC driven by pollnic (one RX and one TX queue).
pub struct Device {
    addr: PciAddress,
    name: String,
    mac: [u8; 6],
    queue: Option<Queue>,
    stats: Stats,
    // Dropped last: BAR unmapped, VFIO device and container closed.
    vfio: Vfio,
}

impl Device {
    /// Open the NIC at `addr` (e.g. `0000:00:08.0`), reset it and bring it up
    /// with `cfg`; returns once the link is up.
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
        match info.family() {
            Some(NicFamily::Igb) => {}
            _ => {
                return Err(crate::pci::Error::Unsupported { addr, vendor: info.vendor, device: info.device }.into())
            }
        }
        if info.driver.as_deref() != Some(VFIO_PCI) {
            return Err(Error::NotBoundToVfio { addr, driver: info.driver });
        }
        let group = info.iommu_group.ok_or(crate::pci::Error::NoIommuGroup { addr })?;
        let vfio = Vfio::open(&sysfs, addr, group)?;
        let mut dev = Device { addr, name: info.name(), mac: [0; 6], queue: None, stats: Stats::default(), vfio };
        // On error `dev` is dropped here, which resets the device and frees everything.
        dev.bring_up(cfg)?;
        Ok(dev)
    }

    fn bring_up(&mut self, cfg: &DeviceConfig) -> Result<()> {
        let addr = self.addr;
        let timeout = |t: TimedOut| Error::Timeout { addr, what: t.what, waited_ms: t.waited_ms };
        let bar = Arc::clone(self.vfio.bar0());
        init::reset(&*bar).map_err(timeout)?;
        init::wait_eeprom_auto_read(&*bar);
        self.mac = init::read_mac(&*bar).map_err(timeout)?;
        init::link_setup(&*bar).map_err(timeout)?;
        init::clear_counters(&*bar);

        let dma = self.vfio.dma();
        let pool = Mempool::new(cfg.mempool_size, cfg.buf_size, PageSize::Huge2M, dma.clone())?;
        let rx_desc = DescRing::new(cfg.rx_ring_size as u16, PageSize::Huge2M, dma.clone())?;
        let tx_desc = DescRing::new(cfg.tx_ring_size as u16, PageSize::Huge2M, dma)?;
        queue::setup_rx(&*bar, 0, &rx_desc, pool.buf_size(), false).map_err(timeout)?;
        queue::setup_tx(&*bar, 0, &tx_desc).map_err(timeout)?;
        let mut rx = RxRing::new(rx_desc, Arc::clone(&pool), MmioDoorbell { bar: Arc::clone(&bar), reg: rdt(0) })?;
        let tx = TxRing::new(tx_desc, MmioDoorbell { bar: Arc::clone(&bar), reg: tdt(0) });
        rx.start();
        self.queue = Some(Queue { rx, tx, pool });
        queue::enable_rx(&*bar, cfg.promisc);
        queue::enable_tx(&*bar);

        init::wait_for("link up", cfg.link_timeout, || init::link_status(&*bar).up)
            .map_err(|t| Error::LinkDown { addr, waited_ms: t.waited_ms })
    }

    fn q(&mut self) -> &mut Queue {
        self.queue.as_mut().expect("queue exists after open")
    }

    /// Receive up to `max` frames from queue 0, appending them to `out`;
    /// returns how many. Never blocks; never allocates if `out` has room.
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        self.q().rx.rx_burst(out, max)
    }

    /// Queue frames from the front of `pkts` on TX queue 0 until the ring is
    /// full; returns how many were taken (the rest stay in `pkts`, in order).
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>) -> usize {
        self.q().tx.tx_burst(pkts)
    }

    /// Reclaim sent TX buffers until none is in flight or `timeout` passes;
    /// returns whether the TX ring drained.
    pub fn flush_tx(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        loop {
            let q = self.q();
            q.tx.reclaim();
            if q.tx.in_flight() == 0 {
                return true;
            }
            if start.elapsed() > timeout {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// The queue's mempool: allocate TX frames from it with [`Mempool::alloc`].
    pub fn mempool(&self) -> &Arc<Mempool> {
        &self.queue.as_ref().expect("queue exists after open").pool
    }

    /// The station MAC address (RAL0/RAH0 as loaded from the EEPROM).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The MAC as `aa:bb:cc:dd:ee:ff`.
    pub fn mac_string(&self) -> String {
        let m = self.mac;
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }

    /// PCI address.
    pub fn address(&self) -> PciAddress {
        self.addr
    }

    /// Marketing name of the device (e.g. "82576 Gigabit Network Connection").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Current link state (STATUS register).
    pub fn link(&self) -> LinkStatus {
        init::link_status(&**self.vfio.bar0())
    }

    /// Read the hardware counters (adding to the totals since open) and return
    /// the totals under their `ethtool -S` names.
    pub fn stats(&mut self) -> &Stats {
        self.stats.update(&**self.vfio.bar0());
        &self.stats
    }

    /// Software counters of RX queue 0.
    pub fn rx_stats(&self) -> RxStats {
        self.queue.as_ref().map(|q| q.rx.stats()).unwrap_or_default()
    }

    /// Software counters of TX queue 0.
    pub fn tx_stats(&self) -> TxStats {
        self.queue.as_ref().map(|q| q.tx.stats()).unwrap_or_default()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // 1. stop DMA and reset; 2. no more bus mastering; 3. only then free
        //    rings and buffers (unmap from the IOMMU, munmap); 4. close VFIO.
        init::shutdown(&**self.vfio.bar0(), 1);
        self.vfio.disable_bus_master();
        self.queue = None;
    }
}
