//! Opening a port: the configuration checked once, the port found in sysfs
//! and checked against it (family, driver, IOMMU), the way in opened (VFIO,
//! VFIO no-IOMMU, `uio_pci_generic`), the back end chosen, then its
//! bring-up (`super::desc`, `super::virtio`).

use super::backend::{Backend, VirtioBackend};
use super::{Device, DeviceIdent};
use crate::config::{DeviceConfig, DmaAddressing};
use crate::counters::{DeviceCounters, QueueCounters};
use crate::error::{Error, Result};
use crate::family::virtio;
use crate::family::{self, Family};
use crate::lowlevel::io::DeviceIo;
use crate::pci::{PciAddress, PciDevice, Sysfs, VFIO_PCI};
use crate::refresh::{StatsRefresher, STATS_REFRESH};
use crate::removal::Removal;
use crate::stats::Stats;
use crate::sys::dmamap::MappingLog;
use crate::sys::uio::Uio;
use crate::sys::vfio::Vfio;
use crate::sys::vfio_noiommu::VfioNoIommu;
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

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
    ///     Ok(dev) => println!("{} {} link {:?}", dev.addr(), dev.mac_string(), dev.link()),
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
    /// `addr`: what [`crate::lowlevel::selfcheck`] reads before the bring-up.
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

    /// Bring up the device behind `io` (its registers and DMA mapper) as
    /// [`Device::open`] does once VFIO is open: the same code, over any
    /// [`DeviceIo`], e.g. the software 82599 of `pollnic_model::ixgbe` (the
    /// repository's `pollnic-model` package).
    ///
    /// For device models and test rigs, not applications (which open a port
    /// with [`Device::open`] or [`Device::open_many`]): `io` is a
    /// register-level device, see [`crate::lowlevel::io`].
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
        let backend = match family.desc() {
            Some(desc) => Backend::Desc(desc),
            None => {
                virtio::check_config(ident.addr, cfg)?;
                match virtio::Port::find(io.as_ref(), ident.addr) {
                    Ok(port) => Backend::Virtio(Box::new(VirtioBackend {
                        port,
                        vector_refused: None,
                    })),
                    Err(e) => {
                        // Nothing was written to the device yet.
                        io.disable_bus_master();
                        return Err(e);
                    }
                }
            }
        };
        let counters: DeviceCounters = (0..cfg.queues)
            .map(|_| CachePadded::new(QueueCounters::default()))
            .collect();
        let mut dev = Device {
            addr: ident.addr,
            name: ident.name,
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
            backend,
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
        match &dev.backend {
            Backend::Desc(desc) => {
                let desc = *desc;
                dev.bring_up_desc(desc, cfg)?
            }
            Backend::Virtio(_) => dev.bring_up_virtio(cfg)?,
        }
        dev.set_rx_mode(cfg.rx_mode)?;
        let source = dev.backend.stats_source(&dev.bar, &dev.counters);
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
    if cfg.power_saving != crate::config::PowerSaving::OFF {
        // virtio-net (no descriptor-ring family) refuses it in its own check.
        if let Some(why) = family
            .desc()
            .and_then(|d| d.power_saving_refusal(ident.device))
        {
            return Err(Error::ConfigUnsupported {
                addr: ident.addr,
                family: family.name(),
                field: "power_saving",
                why,
            });
        }
    }
    if cfg.virtq_layout.is_some() && family.desc().is_some() {
        // A descriptor-ring family (igb, ixgbe) has no virtqueues to lay out.
        return Err(Error::ConfigUnsupported {
            addr: ident.addr,
            family: family.name(),
            field: "virtq_layout",
            why:
                "its rings are descriptor rings, not virtqueues; leave DeviceConfig::virtq_layout \
                  unset (it chooses a virtio-net port's ring layout)",
        });
    }
    if cfg.virtq_in_order.is_some() && family.desc().is_some() {
        return Err(Error::ConfigUnsupported {
            addr: ident.addr,
            family: family.name(),
            field: "virtq_in_order",
            why: "its rings are descriptor rings, whose completions always come in order; leave \
                  DeviceConfig::virtq_in_order unset (it chooses in-order completion on a \
                  virtio-net port)",
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
pub(super) fn check_hugepages(cfg: &DeviceConfig) -> Result<()> {
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
