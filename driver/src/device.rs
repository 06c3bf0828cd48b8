//! The device API: open an igb or ixgbe NIC bound to vfio-pci, move bursts of
//! packets on its queues, read link, MAC and counters, and shut it down in the
//! right order (DMA stopped and the device reset before any DMA memory is
//! released), also on panic (Drop runs while unwinding) and on Ctrl-C when the
//! program's signal handler sets the flag its loops check and returns, so
//! that the `Device` is dropped (the tools do it with `pollnic_tools::signal`).
//!
//! The family-specific register work goes through the crate's `Family`
//! trait, picked from the PCI ID; the device underneath is reached through
//! [`crate::io::DeviceIo`] (VFIO for a real NIC, a software model in host tests).

use crate::config::{DeviceConfig, DmaAddressing};
use crate::counters::{DeviceCounters, QueueCounters};
use crate::error::{ConfigError, Error, Result};
use crate::family::virtio::{self, VirtioNet};
use crate::family::{self, DescFamily, Family, LinkStatus, RingRegs};
use crate::io::{DeviceBar, DeviceIo, MsixError};
use crate::irq::{IrqControl, Moderation, QueueIrq, RxMode};
use crate::pci::{PciAddress, PciDevice, Sysfs, VFIO_PCI};
use crate::queue::{Queue, Rings};
use crate::refresh::{SharedStats, StatsRefresher, STATS_REFRESH};
use crate::removal::Removal;
use crate::stats::Stats;
use crate::sys::dmamap::{DmaMapping, DmaPurpose, MappingLog, Recording};
use crate::sys::uio::Uio;
use crate::sys::vfio::Vfio;
use crate::sys::vfio_noiommu::VfioNoIommu;
use crate::wait::{wait_for, TimedOut};
use crossbeam_utils::CachePadded;
use pollnic_hw::rss::{Reta, Toeplitz, KEY_LEN};
use pollnic_rings::{DescRing, Mempool, PageSize, RxRing, TxRing, VirtqRx, VirtqTx};
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
    family: &'static dyn Family,
    /// A virtio-net device's structures and features (`None` for the
    /// descriptor-ring families).
    virtio: Option<virtio::Port>,
    /// The first RX virtqueue whose MSI-X vector the device did not take at
    /// set-up, and that vector: interrupt mode is refused with it.
    virtio_vector_refused: Option<(u16, u16)>,
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
    /// Counter totals, read every [`STATS_REFRESH`] by `refresher` (the
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
    /// Open the NIC at `addr` (e.g. `0000:00:08.0`), reset it and bring it up
    /// with `cfg`; returns once the link is up. The back end (igb, ixgbe or
    /// virtio-net) is chosen from the PCI ID.
    ///
    /// # Errors
    /// - a configuration error ([`DeviceConfig::validate`]'s, and those of a
    ///   `cfg` the part cannot take: [`Error::TooManyQueues`],
    ///   [`Error::MtuAboveFamily`], [`Error::RxUsecsTooLarge`],
    ///   [`Error::RingBelowFamilyMin`]), checked first, device untouched;
    /// - [`Error::Pci`]: bad address, no such device, unsupported device, no IOMMU group;
    /// - [`Error::NotBoundToVfio`]: still bound to a kernel driver (run `pollnic bind`);
    /// - [`Error::GroupNotViable`], [`Error::VfioUnavailable`], [`Error::DeviceBusy`], [`Error::Vfio`];
    /// - [`Error::Dma`]: no hugepages reserved, or memlock too low;
    /// - [`Error::Timeout`], [`Error::LinkDown`]: the device did not respond or the link stayed down;
    /// - virtio-net only: [`Error::Virtio`] (a [`crate::VirtioError`]: a structure
    ///   missing from the capability list or outside its BAR, too few or too small
    ///   virtqueues, RSS limits), [`Error::VirtioFeatureMissing`] (no `VIRTIO_F_VERSION_1` or
    ///   `VIRTIO_F_ACCESS_PLATFORM`), [`Error::VirtioFeaturesRefused`] (FEATURES_OK
    ///   cleared), [`Error::VirtioNeedsReset`] (DEVICE_NEEDS_RESET after DRIVER_OK),
    ///   [`Error::VirtioMtu`] (`cfg.mtu` above the device's `VIRTIO_NET_F_MTU`);
    ///   a transitional device is [`Error::NotImplemented`].
    ///
    /// On every error after the device was opened it is reset and all memory released.
    ///
    /// `addr` is a [`PciAddress`] or anything that converts into one
    /// (`"0000:00:08.0"`, a `String`); a bad address is [`Error::Pci`] with
    /// the parse error.
    ///
    /// # Example
    ///
    /// Open a port bound to vfio-pci (`pollnic bind 0000:03:00.0`, with
    /// 2 MiB hugepages reserved) with two queues and jumbo frames, and
    /// print what came up:
    ///
    /// ```no_run
    /// use pollnic::{Device, DeviceConfig, Error};
    ///
    /// let cfg = DeviceConfig::default().with_queues(2).with_mtu(9000);
    /// match Device::open("0000:03:00.0", &cfg) {
    ///     Ok(dev) => println!("{} {} link {:?}", dev.address(), dev.mac_string(), dev.link()),
    ///     Err(e @ Error::NotBoundToVfio { .. }) => eprintln!("{e}"), // says what to run
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), pollnic::Error>(())
    /// ```
    pub fn open<A>(addr: A, cfg: &DeviceConfig) -> Result<Device>
    where
        A: TryInto<PciAddress>,
        Error: From<A::Error>,
    {
        let addr: PciAddress = addr.try_into()?;
        let mut v = Device::open_in(&[addr], cfg, false)?;
        Ok(v.remove(0))
    }

    /// Open several ports together, in one VFIO container: they share one
    /// IOMMU address space, so a [`Packet`](crate::Packet) received on one can be handed to
    /// another's `tx_burst` as the same buffer, with no copy (as ixy-fwd and
    /// DPDK's l2fwd forward). VFIO allows several IOMMU groups in one
    /// container (`Documentation/driver-api/vfio.rst`). Returned in the
    /// order given.
    ///
    /// A port opened alone with [`Device::open`] has a container of its
    /// own; its buffers cannot cross to another port's TX ring (they are
    /// refused there and counted in `tx_errors`, never sent with a foreign
    /// IOVA). [`Device::shares_dma_with`] tells which is which.
    ///
    /// # Errors
    /// As [`Device::open`], for the first port that fails; the ports opened
    /// before it are shut down. [`Error::NoPorts`] for an empty list,
    /// [`Error::PortGivenTwice`] for a port given twice.
    ///
    /// # Example
    ///
    /// Forward everything port 0 receives out of port 1, zero copy (one
    /// queue each):
    ///
    /// ```no_run
    /// use pollnic::{Device, DeviceConfig};
    ///
    /// let mut ports = Device::open_many(["0000:03:00.0", "0000:03:00.1"], &DeviceConfig::default())?;
    /// ports[0].check_shares_dma_with(&ports[1])?; // one container: true here
    /// let (a, b) = ports.split_at_mut(1);
    /// let (rx, tx) = (a[0].queue(0), b[0].queue(0));
    /// let mut burst = Vec::with_capacity(32);
    /// loop {
    ///     let room = 32 - burst.len();
    ///     rx.rx_burst(&mut burst, room);
    ///     tx.tx_burst(&mut burst); // the same buffers; what did not fit stays
    /// #   break;
    /// }
    /// # Ok::<(), pollnic::Error>(())
    /// ```
    pub fn open_many<I>(addrs: I, cfg: &DeviceConfig) -> Result<Vec<Device>>
    where
        I: IntoIterator,
        I::Item: TryInto<PciAddress>,
        Error: From<<I::Item as TryInto<PciAddress>>::Error>,
    {
        let addrs = addrs
            .into_iter()
            .map(|a| a.try_into().map_err(Error::from))
            .collect::<Result<Vec<PciAddress>>>()?;
        if addrs.is_empty() {
            return Err(Error::NoPorts);
        }
        if let Some(d) = addrs
            .iter()
            .enumerate()
            .find(|(i, a)| addrs[..*i].contains(a))
        {
            return Err(Error::PortGivenTwice { addr: *d.1 });
        }
        Device::open_in(&addrs, cfg, true)
    }

    /// Open `addrs` (all checked first), one VFIO container for all when
    /// `shared` is set, else one each (only ever called with one address then).
    fn open_in(addrs: &[PciAddress], cfg: &DeviceConfig, shared: bool) -> Result<Vec<Device>> {
        cfg.validate()?;
        let sysfs = Sysfs::default();
        let mut found = Vec::with_capacity(addrs.len());
        for &addr in addrs {
            found.push(Device::check_port(&sysfs, addr, cfg)?);
        }
        let mut container = None;
        let mut out = Vec::with_capacity(addrs.len());
        for (ident, route) in found {
            let io: Box<dyn DeviceIo> = match route {
                Route::Vfio { group } => {
                    let vfio = Vfio::open(&sysfs, ident.addr, group, container.as_ref())?;
                    if shared && container.is_none() {
                        container = Some(vfio.container());
                    }
                    Box::new(vfio)
                }
                // Physical addresses are one space: ports opened together
                // or apart share buffers alike.
                Route::Uio => Box::new(Uio::open(&sysfs, ident.addr)?),
                Route::VfioNoIommu { group } => Box::new(VfioNoIommu::open(ident.addr, group)?),
            };
            out.push(Device::open_checked(io, ident, cfg)?);
        }
        Ok(out)
    }

    /// The checks of [`Device::open`] and a VFIO container of its own for
    /// `addr`: what [`crate::selfcheck`] reads before the bring-up.
    pub(crate) fn open_io(
        addr: PciAddress,
        cfg: &DeviceConfig,
    ) -> Result<(Box<dyn DeviceIo>, DeviceIdent)> {
        cfg.validate()?;
        let sysfs = Sysfs::default();
        let (ident, route) = Device::check_port(&sysfs, addr, cfg)?;
        let io: Box<dyn DeviceIo> = match route {
            Route::Vfio { group } => Box::new(Vfio::open(&sysfs, ident.addr, group, None)?),
            Route::Uio => Box::new(Uio::open(&sysfs, ident.addr)?),
            Route::VfioNoIommu { group } => Box::new(VfioNoIommu::open(ident.addr, group)?),
        };
        Ok((io, ident))
    }

    /// What [`Device::open`] checks of `addr` before touching anything: it
    /// exists, a family drives it with `cfg`, and it is bound to a driver
    /// that gives pollnic the way in `cfg.dma` asks for: vfio-pci in an
    /// IOMMU group for [`DmaAddressing::Iommu`]; for
    /// [`DmaAddressing::UnsafeNoIommuPhysical`], `uio_pci_generic` with no
    /// translating IOMMU, or vfio-pci in a VFIO no-IOMMU group.
    fn check_port(
        sysfs: &Sysfs,
        addr: PciAddress,
        cfg: &DeviceConfig,
    ) -> Result<(DeviceIdent, Route)> {
        let info = PciDevice::read(sysfs, addr)?;
        let ident = DeviceIdent {
            addr,
            vendor: info.vendor,
            device: info.device,
            name: info.name(),
        };
        check_family(&ident, cfg)?;
        let physical = cfg.dma == DmaAddressing::UnsafeNoIommuPhysical;
        let group_type = |g: u32| {
            std::fs::read_to_string(sysfs.iommu_group_devices(g).with_file_name("type"))
                .map(|t| t.trim().to_owned())
                .unwrap_or_default()
        };
        match info.driver.as_deref() {
            Some(VFIO_PCI) => {
                let group = info
                    .iommu_group
                    .ok_or(crate::pci::Error::NoIommuGroup { addr })?;
                let noiommu = std::fs::read_to_string(
                    sysfs.iommu_group_devices(group).with_file_name("name"),
                )
                .is_ok_and(|n| n.trim() == "vfio-noiommu");
                if noiommu {
                    if !physical {
                        return Err(Error::NoIommuNotAsked {
                            addr,
                            driver: "vfio-pci (VFIO no-IOMMU group)".into(),
                        });
                    }
                    return Ok((ident, Route::VfioNoIommu { group }));
                }
                if physical {
                    return Err(Error::NoIommuNotNeeded {
                        addr,
                        why: format!("IOMMU group {group}, type {}", group_type(group)),
                        bound_vfio: true,
                    });
                }
                Ok((ident, Route::Vfio { group }))
            }
            Some(UIO_PCI_GENERIC) => {
                // Behind an IOMMU that translates (group type DMA or
                // DMA-FQ; `identity` is the passthrough of iommu=pt)
                // physical addresses would fault: vfio-pci is the way.
                if let Some(group) = info.iommu_group {
                    let t = group_type(group);
                    if t.starts_with("DMA") {
                        return Err(Error::NoIommuNotNeeded {
                            addr,
                            why: format!("IOMMU group {group}, type {t}"),
                            bound_vfio: false,
                        });
                    }
                }
                if !physical {
                    return Err(Error::NoIommuNotAsked {
                        addr,
                        driver: UIO_PCI_GENERIC.into(),
                    });
                }
                Ok((ident, Route::Uio))
            }
            _ => Err(Error::NotBoundToVfio {
                addr,
                driver: info.driver,
            }),
        }
    }

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

    /// Bring up the device behind `io` (its registers and DMA mapper) as
    /// [`Device::open`] does once VFIO is open: the same code, over any
    /// [`DeviceIo`], e.g. the software 82599 of `pollnic_model::ixgbe` (the
    /// repository's `pollnic-model` package).
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
        Device::open_checked(io, ident, cfg)
    }

    /// [`Device::open_on`] for a configuration already checked
    /// ([`DeviceConfig::validate`], once per open: [`Device::open_in`]
    /// checks it before it opens the first port).
    fn open_checked(
        io: Box<dyn DeviceIo>,
        ident: DeviceIdent,
        cfg: &DeviceConfig,
    ) -> Result<Device> {
        let family = check_family(&ident, cfg)?;
        let counters: DeviceCounters = (0..cfg.queues)
            .map(|_| CachePadded::new(QueueCounters::default()))
            .collect();
        let mut dev = Device {
            addr: ident.addr,
            name: ident.name,
            family,
            virtio: None,
            virtio_vector_refused: None,
            mac: [0; 6],
            queues: Vec::new(),
            counters,
            rss_key: cfg.rss_key,
            reta: cfg.effective_reta(),
            mtu: cfg.mtu,
            hw_queues: cfg.queues,
            device_id: ident.device,
            moderation: cfg.moderation,
            msix_on: false,
            stats: Arc::new(Mutex::new(Stats::new(family.stats_layout()))),
            refresher: None,
            bar: io.bar0(),
            open: Arc::new(AtomicBool::new(true)),
            mappings: MappingLog::default(),
            created_pools: Mutex::new(Vec::new()),
            removal: Arc::new(Removal::new(ident.addr)),
            io,
        };
        let removal = Arc::clone(&dev.removal);
        let watched = dev.io.watch_release(Box::new(move || removal.request()));
        dev.removal.set_watched(watched);
        // On error `dev` is dropped here, which resets the device and frees everything.
        match family.desc() {
            Some(desc) => dev.bring_up(desc, cfg)?,
            None => dev.bring_up_virtio(cfg)?,
        }
        dev.set_rx_mode(cfg.rx_mode)?;
        let source = dev.stats_source();
        let stats = Arc::clone(&dev.stats);
        let refresher = StatsRefresher::start(STATS_REFRESH, move || {
            let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
            source.update(&mut s);
        })
        .map_err(|source| Error::Thread {
            what: "counter refresh".into(),
            cause: source,
        })?;
        dev.refresher = Some(refresher);
        Ok(dev)
    }

    fn bring_up(&mut self, fam: &'static dyn DescFamily, cfg: &DeviceConfig) -> Result<()> {
        let addr = self.addr;
        let timeout = |t: TimedOut| Error::Timeout {
            addr,
            what: t.what,
            waited_ms: t.waited_ms,
        };
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
            rx.set_error_mask(fam.rx_error_mask())?;
            rx.set_offload_status(cfg.rx_checksum || cfg.vlan_strip, fam.rx_l4e_bit());
            let mut tx = TxRing::new(tx_desc, &pool, Arc::clone(&bar).doorbell(fam.tdt(q)));
            tx.set_check_context(fam.tx_check_context());
            // Chosen once per queue here (`validate` refused a forced vector
            // path this CPU cannot run).
            let path = cfg.data_path.resolve();
            rx.set_data_path(path);
            tx.set_data_path(path);
            self.queues.push(Queue::new(
                q,
                Rings::Desc { rx, tx },
                Arc::clone(&self.counters),
                Arc::clone(&self.removal),
                fam.max_rx_usecs(),
                fam.name(),
            ));
        }
        fam.start_tx(r);
        for q in &mut self.queues {
            fam.enable_rx_queue(r, q.id).map_err(timeout)?;
            if let Rings::Desc { rx, .. } = &mut q.rings {
                rx.start();
            }
            fam.enable_tx_queue(r, q.id).map_err(timeout)?;
        }
        fam.configure_rx_offloads(r, cfg.queues, cfg.rx_checksum, cfg.vlan_strip);
        fam.configure_flow_control(
            r,
            self.device_id,
            cfg.flow_control.unwrap_or(crate::config::FlowControl::Full),
            cfg.mtu,
        );
        fam.configure_power_saving(r, self.device_id, cfg.power_saving, cfg.mtu);
        fam.start_rx(r, cfg.rx_filter()).map_err(timeout)?;

        wait_for("link up", cfg.link_timeout, || fam.link_status(r).up).map_err(|t| {
            Error::LinkDown {
                addr,
                waited_ms: t.waited_ms,
            }
        })?;
        // Once more after the link came up, as Linux forces the mode after
        // autonegotiation (`igb_config_fc_after_link_up`): QEMU's igb sets
        // CTRL.RFCE and TFCE when its autonegotiation completes.
        fam.configure_flow_control(
            r,
            self.device_id,
            cfg.flow_control.unwrap_or(crate::config::FlowControl::Full),
            cfg.mtu,
        );
        Ok(())
    }

    /// [`Device::bring_up`] for a virtio-net device (virtio 1.x §3.1.1):
    /// capabilities, reset, ACKNOWLEDGE, DRIVER, features, FEATURES_OK,
    /// `cfg.queues` queue pairs (receiveq`q` is virtqueue 2q, transmitq`q`
    /// 2q + 1, §5.1.2) and the control queue when negotiated, DRIVER_OK,
    /// then the RSS configuration (or `VQ_PAIRS_SET`) on the control queue,
    /// link wait. A ring size above the device's `queue_size` is taken down
    /// to it (as DPDK's virtio PMD does with `nb_desc`); each buffer takes
    /// two descriptors (`pollnic_rings::virtq`).
    fn bring_up_virtio(&mut self, cfg: &DeviceConfig) -> Result<()> {
        let addr = self.addr;
        virtio::check_config(addr, cfg)?;
        let mut port = virtio::Port::find(self.io.as_ref(), addr)?;
        let negotiated = port.negotiate(cfg.dma == DmaAddressing::UnsafeNoIommuPhysical);
        // Kept from here on, so that every error path resets it on drop.
        self.virtio = Some(port);
        negotiated?;
        let port = self.virtio.as_ref().expect("set above");
        self.mac = port.mac().unwrap_or_else(|| local_mac(addr));
        port.check_mtu(cfg.mtu)?;
        port.check_rx_filter(cfg)?;
        // §5.1.4.2: with VIRTIO_NET_F_MTU negotiated, the driver MUST post
        // buffers that take a frame of the device's MTU (without
        // VIRTIO_NET_F_MRG_RXBUF, one buffer per frame): the buffers are
        // sized for the larger of the two MTUs, as Linux `virtio_net` comes
        // up at the device's MTU. (At the testbed's host_mtu=9000 a default
        // configuration's buffers are 9216 bytes, not 2048.)
        if let Some(m) = port
            .mtu()
            .filter(|&m| u32::from(m) > pollnic_hw::mtu::MAX_MTU)
        {
            return Err(Error::Virtio {
                addr,
                problem: virtio::problem::VirtioError::MtuTooLarge {
                    device_mtu: m,
                    max: pollnic_hw::mtu::MAX_MTU,
                },
            });
        }
        let rx_buf = port.mtu().map_or(cfg.rx_buf_size(), |m| {
            cfg.rx_buf_size()
                .max(pollnic_hw::mtu::rx_buf_size(u32::from(m)) as usize)
        });
        let sized = cfg.clone().with_buf_size(rx_buf);
        let cfg = &sized;
        let pairs = port.max_queue_pairs()?;
        if cfg.queues > pairs {
            return Err(Error::TooManyQueues {
                queues: cfg.queues,
                max: pairs,
                device: format!("{} at {addr} (max_virtqueue_pairs)", self.name),
            });
        }
        let missing = |problem: virtio::problem::VirtioError| Error::Virtio { addr, problem };
        let with_ctrl = port.has(virtio::feature::NET_CTRL_VQ);
        let needed = 2 * cfg.queues as u32 + u32::from(with_ctrl);
        if u32::from(port.num_queues()) < needed {
            return Err(missing(virtio::problem::VirtioError::TooFewVirtqueues {
                have: port.num_queues(),
                need: needed,
                pairs: cfg.queues,
                with_ctrl,
            }));
        }
        let size = |want: u32, max: u16, which: &'static str| -> Result<u16> {
            let got = want.min(u32::from(max));
            if got < VirtioNet.min_ring_size() {
                return Err(missing(virtio::problem::VirtioError::QueueTooSmall {
                    which,
                    max,
                    min: VirtioNet.min_ring_size(),
                }));
            }
            // A split virtqueue's size is a power of two (virtio 1.x §2.7).
            Ok(1 << (31 - got.leading_zeros()))
        };

        let page = self.io.page_size();
        if page == PageSize::Huge2M {
            check_hugepages(cfg)?;
        }
        let dma = self.io.dma();
        let mappings = Arc::clone(&self.mappings);
        let mapper = |purpose| -> Arc<dyn pollnic_rings::DmaMapper> {
            Recording::new(dma.clone(), purpose, Arc::clone(&mappings))
        };
        port.no_config_vector();
        // Each RX virtqueue gets its MSI-X vector (pair q: vector q) now, at
        // set-up: §4.1.4.3.2 allows no queue field to change after
        // `queue_enable`. Until `set_rx_mode` enables MSI-X, the device
        // sends nothing on them (poll mode keeps notifications off).
        let with_vectors = self.io.interrupts().is_some();
        let mut refused_vector: Option<(u16, u16)> = None;
        let hdr = port.net_hdr();
        let event_idx = port.event_idx();
        let mut started = Vec::with_capacity(cfg.queues as usize);
        for q in 0..cfg.queues {
            let (rxq, txq) = (2 * q, 2 * q + 1);
            let rx_size = size(cfg.rx_ring_size, port.max_queue_size(rxq), "receive")?;
            let tx_size = size(cfg.tx_ring_size, port.max_queue_size(txq), "transmit")?;
            let pool = Mempool::new(
                cfg.mempool_size,
                cfg.rx_buf_size(),
                page,
                mapper(DmaPurpose::Mempool(q)),
            )?;
            let mut rx = VirtqRx::new(
                rx_size,
                page,
                mapper(DmaPurpose::RxRing(q)),
                &pool,
                port.notify_for(rxq)?,
            )?;
            let mut tx = VirtqTx::new(
                tx_size,
                page,
                mapper(DmaPurpose::TxRing(q)),
                port.notify_for(txq)?,
            )?;
            rx.set_net_hdr(hdr);
            tx.set_net_hdr(hdr);
            if event_idx {
                rx.use_event_idx();
                tx.use_event_idx();
            }
            let vector = if with_vectors { q } else { virtio::NO_VECTOR };
            if !port.setup_queue(rxq, rx.addrs(), vector) && refused_vector.is_none() {
                refused_vector = Some((rxq, vector));
            }
            port.setup_queue(txq, tx.addrs(), virtio::NO_VECTOR);
            started.push((rx, tx));
        }
        self.virtio_vector_refused = refused_vector.filter(|_| with_vectors);
        let port = self.virtio.as_mut().expect("set above");
        if with_ctrl {
            port.setup_ctrl(page, mapper(DmaPurpose::CtrlQueue))?;
        }
        port.driver_ok()?;
        for (q, (mut rx, tx)) in started.into_iter().enumerate() {
            rx.start();
            self.queues.push(Queue::new(
                q as u16,
                Rings::Virtq { rx, tx },
                Arc::clone(&self.counters),
                Arc::clone(&self.removal),
                0,
                VirtioNet.name(),
            ));
        }
        port.configure_queues(cfg.queues, &cfg.hash_types, &self.rss_key, &self.reta)?;
        port.set_rx_filter(cfg.promisc, cfg.allmulti)?;
        wait_for("link up", cfg.link_timeout, || port.link().up).map_err(|t| Error::LinkDown {
            addr,
            waited_ms: t.waited_ms,
        })?;
        port.check()
    }

    /// Where this device's counters come from.
    fn stats_source(&self) -> StatsSource {
        match self.family.desc() {
            Some(desc) => StatsSource::Registers {
                family: desc,
                bar: Arc::clone(&self.bar),
            },
            None => StatsSource::Driver(Arc::clone(&self.counters)),
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
        self.family.kind()
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
            max_queues: self.family.max_queues(self.device_id),
            queues: self.hw_queues,
            max_mtu: self.family.max_mtu(),
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
        };
        match &self.virtio {
            None => intel,
            Some(port) => crate::Capabilities {
                max_queues: port.max_queue_pairs().unwrap_or(1),
                max_mtu: port.mtu().map_or(pollnic_hw::mtu::DEFAULT_MTU, u32::from),
                tx: crate::TxCapabilities::default(),
                rx_checksum: false,
                vlan_strip: false,
                rss: port
                    .rss_table_len()
                    .map(|table_len| crate::RssCapabilities {
                        table_len,
                        key_len: pollnic_hw::rss::KEY_LEN,
                    }),
                interrupts: msix && self.virtio_vector_refused.is_none(),
                ..intel
            },
        }
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
    /// throttled by EITR ([`DeviceConfig::moderation`]), masked until the
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
        let max = self.family.max_rx_usecs();
        if moderation.max_usecs() > max {
            return Err(Error::RxUsecsTooLarge {
                usecs: moderation.max_usecs(),
                max,
                family: self.family.name(),
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

    /// Enable MSI-X, one vector per queue, all masked: see [`Device::set_rx_mode`].
    fn enable_msix(&mut self) -> Result<()> {
        if self.msix_on {
            return Ok(());
        }
        let addr = self.addr;
        let fail = |source: MsixError| Error::Interrupts {
            addr,
            cause: source,
        };
        let n = self.queues.len() as u16;
        let Some(intr) = self.io.interrupts() else {
            return Err(fail(MsixError::Unsupported));
        };
        let Some(desc) = self.family.desc() else {
            return self.enable_msix_virtio();
        };
        let events = intr.enable_msix(n).map_err(fail)?;
        let Some(regs) = desc.configure_msix(
            self.bar.regs(),
            self.device_id,
            n,
            self.moderation.initial_usecs(),
        ) else {
            intr.disable_msix();
            return Err(fail(MsixError::NoFamilySupport {
                family: self.family.name(),
            }));
        };
        for ((q, event), regs) in self.queues.iter_mut().zip(events).zip(regs) {
            q.irq = Some(QueueIrq {
                event,
                ctl: IrqControl::Vector {
                    regs,
                    bar: Arc::clone(&self.bar),
                },
            });
            // In range: checked at open and by `set_moderation`.
            q.set_moderation(self.moderation)?;
        }
        self.msix_on = true;
        Ok(())
    }

    /// [`Device::enable_msix`] on virtio-net: vector `q` for queue pair
    /// `q`'s RX queue (virtqueue 2q; `queue_msix_vector`, read back:
    /// `VIRTIO_MSI_NO_VECTOR` means the device could not take it), none for
    /// TX, the control queue and configuration changes;
    /// the RX virtqueue's `VRING_AVAIL_F_NO_INTERRUPT` arms and masks it.
    fn enable_msix_virtio(&mut self) -> Result<()> {
        let addr = self.addr;
        let fail = |source: MsixError| Error::Interrupts {
            addr,
            cause: source,
        };
        let (Some(intr), Some(port)) = (self.io.interrupts(), self.virtio.as_ref()) else {
            return Err(fail(MsixError::Unsupported));
        };
        let _ = port;
        // The vectors were written at set-up (`bring_up_virtio`).
        if let Some((queue, vector)) = self.virtio_vector_refused {
            return Err(fail(MsixError::QueueVectorRefused { queue, vector }));
        }
        let n = self.queues.len() as u16;
        let events = intr.enable_msix(n).map_err(fail)?;
        for (q, event) in self.queues.iter_mut().zip(events) {
            q.irq = Some(QueueIrq {
                event,
                ctl: IrqControl::Virtq,
            });
            q.set_moderation(self.moderation)?;
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
        match (self.family.desc(), self.virtio.as_mut()) {
            (Some(desc), _) => desc.write_reta(self.bar.regs(), &reta),
            // virtio-net: the RSS configuration again, with the new table.
            (None, Some(port)) => port.set_reta(&reta)?,
            (None, None) => {}
        }
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

    /// PCI address.
    pub fn address(&self) -> PciAddress {
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
        match (self.family.desc(), &self.virtio) {
            (Some(desc), _) => desc.link_status(self.bar.regs()),
            (None, Some(port)) => port.link(),
            (None, None) => LinkStatus {
                up: false,
                speed_mbps: 0,
                full_duplex: true,
            },
        }
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
        if let Some(port) = &self.virtio {
            port.check()?;
        }
        self.queues.iter().try_for_each(Queue::check)
    }

    /// The flow control mode the port runs with, read back from its
    /// registers (igb CTRL.RFCE/TFCE; 82599 MFLCN.RFCE, FCCFG.TFCE_802_3X):
    /// [`DeviceConfig::flow_control`] as the NIC took it. `ethtool -a`.
    pub fn flow_control(&self) -> crate::config::FlowControl {
        match self.family.desc() {
            Some(desc) => desc.flow_control(self.bar.regs()),
            None => crate::config::FlowControl::None,
        }
    }

    /// The I350's Energy Efficient Ethernet and DMA coalescing as the NIC
    /// runs them, read back from EEER and DMACR ([`DeviceConfig::power_saving`]);
    /// always off on parts without them (82576, 82599). `ethtool --show-eee`.
    pub fn power_saving(&self) -> crate::config::PowerSaving {
        match self.family.desc() {
            Some(desc) => desc.power_saving(self.bar.regs(), self.device_id),
            None => crate::config::PowerSaving::OFF,
        }
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
        self.stats_reader().read()
    }

    /// A cloneable, `Send + Sync` handle that reads this device's hardware
    /// counters from any thread, as [`Device::stats`] does. After the device
    /// is closed it returns the last totals without touching the hardware.
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader {
            family: self.family.name(),
            source: self.stats_source(),
            stats: Arc::clone(&self.stats),
            open: Arc::clone(&self.open),
        }
    }
}

/// Reads a device's hardware counters from any thread ([`Device::stats_reader`]).
///
/// # Example
///
/// A reporter thread printing the received-packet total every second
/// while the queues run on pinned threads:
///
/// ```no_run
/// use pollnic::{Counter, Device, DeviceConfig};
/// use std::time::Duration;
///
/// let dev = Device::open("0000:03:00.0", &DeviceConfig::default())?;
/// let reader = dev.stats_reader(); // Send + Sync + Clone
/// std::thread::spawn(move || loop {
///     let s = reader.read(); // totals since open, in 64 bits
///     println!("rx_packets {:?} rx_missed {:?}", s.counter(Counter::RxPackets), s.counter(Counter::RxMissedErrors));
///     std::thread::sleep(Duration::from_secs(1));
/// });
/// // ... run the queues (pollnic::run_pinned) ...
/// # Ok::<(), pollnic::Error>(())
/// ```
#[derive(Clone)]
pub struct StatsReader {
    family: &'static str,
    source: StatsSource,
    stats: SharedStats,
    open: Arc<AtomicBool>,
}

/// Where a device's counters come from.
#[derive(Clone)]
enum StatsSource {
    /// The family's clear-on-read registers (igb, ixgbe).
    Registers {
        family: &'static dyn DescFamily,
        bar: Arc<dyn DeviceBar>,
    },
    /// The driver's own per-queue counters (virtio-net, which has no
    /// counter registers): set, not added, from the queues' totals.
    Driver(DeviceCounters),
}

impl StatsSource {
    fn update(&self, s: &mut Stats) {
        match self {
            StatsSource::Registers { family, bar } => family.update_stats(bar.regs(), s),
            StatsSource::Driver(counters) => {
                let mut t = crate::counters::QueueSnapshot::default();
                for q in counters.iter() {
                    let q = q.snapshot();
                    t.rx_packets += q.rx_packets;
                    t.tx_packets += q.tx_packets;
                    t.rx_bytes += q.rx_bytes;
                    t.tx_bytes += q.tx_bytes;
                    t.rx_errors += q.rx_errors;
                    t.rx_nombuf += q.rx_nombuf;
                    t.rx_kicks += q.rx_kicks;
                    t.tx_kicks += q.tx_kicks;
                    t.device_errors += q.device_errors;
                    t.virtqueues_stopped += q.virtqueues_stopped;
                }
                for (name, v) in [
                    ("rx_packets", t.rx_packets),
                    ("tx_packets", t.tx_packets),
                    ("rx_bytes", t.rx_bytes),
                    ("tx_bytes", t.tx_bytes),
                    ("rx_errors", t.rx_errors),
                    ("rx_nombuf", t.rx_nombuf),
                    ("rx_kicks", t.rx_kicks),
                    ("tx_kicks", t.tx_kicks),
                    ("device_errors", t.device_errors),
                    ("virtqueues_stopped", t.virtqueues_stopped),
                ] {
                    s.set_extra(name, v);
                }
            }
        }
    }
}

impl StatsReader {
    /// The counter totals since the device was opened, read from the
    /// hardware first while the device is open (as [`Device::stats`]).
    pub fn read(&self) -> Stats {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if self.open.load(Ordering::Acquire) {
            self.source.update(&mut s);
        }
        s.clone()
    }
}

impl std::fmt::Debug for StatsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsReader")
            .field("family", &self.family)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish()
    }
}

/// The family that drives `ident`, once `cfg` fits it (queue count, ring
/// sizes); nothing is touched yet.
pub(crate) fn check_family(ident: &DeviceIdent, cfg: &DeviceConfig) -> Result<&'static dyn Family> {
    let family =
        family::lookup(ident.vendor, ident.device).ok_or(crate::pci::Error::Unsupported {
            addr: ident.addr,
            vendor: ident.vendor,
            device: ident.device,
        })?;
    let family = family.for_device(ident.device).unwrap_or(family);
    if let Some(missing) = family.missing(ident.device) {
        return Err(Error::NotImplemented {
            addr: ident.addr,
            name: ident.name.clone(),
            missing,
        });
    }
    let max = family.max_queues(ident.device);
    if cfg.queues > max {
        return Err(Error::TooManyQueues {
            queues: cfg.queues,
            max,
            device: ident.name.clone(),
        });
    }
    if cfg.mtu > family.max_mtu() {
        return Err(Error::MtuAboveFamily {
            mtu: cfg.mtu,
            max: family.max_mtu(),
            family: family.name(),
            device: ident.name.clone(),
        });
    }
    if cfg.moderation.max_usecs() > family.max_rx_usecs() {
        return Err(Error::RxUsecsTooLarge {
            usecs: cfg.moderation.max_usecs(),
            max: family.max_rx_usecs(),
            family: family.name(),
        });
    }
    let min = family.min_ring_size();
    for (which, size) in [("rx", cfg.rx_ring_size), ("tx", cfg.tx_ring_size)] {
        if size < min {
            return Err(Error::RingBelowFamilyMin {
                which,
                size,
                min,
                family: family.name(),
                device: ident.name.clone(),
            });
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

/// How a port is reached ([`Device::check_port`]).
enum Route {
    /// vfio-pci behind an IOMMU, in this group.
    Vfio { group: u32 },
    /// `uio_pci_generic`, physical addresses.
    Uio,
    /// vfio-pci in a VFIO no-IOMMU group, physical addresses.
    VfioNoIommu { group: u32 },
}

/// The kernel's generic userspace I/O driver for PCI devices.
const UIO_PCI_GENERIC: &str = "uio_pci_generic";

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
        match (self.family.desc(), &self.virtio) {
            (Some(desc), _) => desc.shutdown(self.bar.regs(), self.hw_queues),
            // A reset stops the device's use of every virtqueue (virtio
            // 1.x §2.4); a device that does not finish it still loses bus
            // mastering next.
            (None, Some(port)) => {
                let _ = port.reset();
            }
            (None, None) => {}
        }
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
