//! VFIO: the container (type1 IOMMU), the device's IOMMU group and device fd,
//! BAR0 mapped at the offset VFIO reports, PCI command register access, and
//! DMA mapping of whole regions at IOVAs pollnic chooses.
//!
//! Source: Linux `Documentation/driver-api/vfio.rst`. Built on rust-vmm's
//! `vfio-ioctls`, wrapped here because its region accessors only log errors.
//!
//! The device-release request (the last section): an eventfd on
//! `VFIO_PCI_REQ_IRQ_INDEX` and the thread that waits on it, and a close
//! that lets the kernel's unbind or remove finish
//! (`docs/design/device-release.md`).

use crate::error::Error;
use crate::lowlevel::io::{DeviceBar, DeviceIo};
use crate::msix::MsixError;
use crate::pci::{PciAddress, Sysfs};
use crate::sys::irq::IrqEvent;
use crate::sys::mmio::{command, Bar, Bars};
use pollnic_rings::{DmaError, DmaMapper, PageSize};
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use vfio_bindings::bindings::vfio::{
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_REQ_IRQ_INDEX,
    VFIO_REGION_INFO_FLAG_MMAP,
};
use vfio_ioctls::{VfioContainer, VfioDevice, VfioError, VfioOps};
use vmm_sys_util::eventfd::EventFd;

/// First IOVA handed out: above 4 GiB, clear of the x86 MSI window at 0xfee00000.
const IOVA_BASE: u64 = 1 << 32;

/// The VFIO container as a [`DmaMapper`]: maps whole regions at increasing
/// 2 MiB-aligned IOVAs.
pub struct VfioDma {
    container: Arc<VfioContainer>,
    next_iova: AtomicU64,
}

impl std::fmt::Debug for VfioDma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioDma")
            .field("next_iova", &self.next_iova)
            .finish()
    }
}

// SAFETY: `map` returns an IOVA only once `VFIO_IOMMU_MAP_DMA` mapped
// `iova..iova + len` to `va..va + len` in this container's IOMMU domain; the
// IOVAs come from one counter per container stepped by the mapping's length
// rounded up to 2 MiB, so live mappings never overlap (the kernel refuses an
// overlap too). `unmap` issues `VFIO_IOMMU_UNMAP_DMA`, after which the
// domain no longer translates the range (or the container already lost its
// group, and no device reaches it at all). One `VfioDma` per container,
// shared by its ports, so the default `address_space` (its address) is equal
// exactly for ports of one container.
unsafe impl DmaMapper for VfioDma {
    unsafe fn map(&self, va: *mut u8, len: usize) -> Result<u64, DmaError> {
        let step = (len as u64).div_ceil(2 << 20) * (2 << 20);
        let iova = self.next_iova.fetch_add(step, Ordering::Relaxed);
        // SAFETY: the caller promises `va..va+len` stays mapped until `unmap`
        // and is only accessed through raw pointers / volatile operations
        // while the device may DMA to it (the DmaMapper contract).
        unsafe { self.container.vfio_dma_map(iova, len, va) }.map_err(|e| DmaError::Map {
            len,
            cause: Box::new(e),
        })?;
        Ok(iova)
    }

    fn unmap(&self, iova: u64, len: usize) {
        // Fails only when the container already lost its group (device closed
        // while Packets still hold a pool): the mapping is gone either way.
        let _ = self.container.vfio_dma_unmap(iova, len);
    }
}

/// An open VFIO device: its container, device fd and mapped BARs.
pub struct Vfio {
    // Dropped in `Drop for Vfio` (the release section): the request watch
    // stopped, the BARs detached from the device fd, the device fd and group
    // released; then the fields in order, the container last.
    /// The BARs: BAR 0 at open, any other when asked for
    /// ([`DeviceIo::bar`]: a virtio device's capabilities name them). A
    /// modern virtio device has no BAR 0; its first mappable BAR stands in.
    bars: Bars,
    device: ManuallyDrop<VfioDevice>,
    dma: Arc<VfioDma>,
    /// The device-release request: its eventfd and watching thread.
    release: ReleaseWatch,
    /// The path vfio-ioctls knows the device by (see [`DeviceLink`]).
    link: DeviceLink,
}

impl Vfio {
    /// Open the device at `addr`, which must be bound to vfio-pci, in a new
    /// VFIO container, or in `shared`'s container (which then maps DMA for
    /// both devices: one IOMMU address space, IOVAs handed out from one
    /// counter).
    ///
    /// # Errors
    /// [`Error::GroupNotViable`] naming the devices of its IOMMU group still
    /// bound to other drivers; [`Error::VfioUnavailable`] when `/dev/vfio/vfio`
    /// cannot be opened; [`Error::DeviceBusy`] when another process has it;
    /// [`Error::Vfio`] for other ioctl failures.
    pub fn open(
        sysfs: &Sysfs,
        addr: PciAddress,
        group: u32,
        shared: Option<&Arc<VfioDma>>,
    ) -> Result<Vfio, Error> {
        let others = group_blockers(sysfs, group, addr);
        if !others.is_empty() {
            return Err(Error::GroupNotViable {
                addr,
                group,
                others,
            });
        }
        let container = match shared {
            Some(dma) => Arc::clone(&dma.container),
            None => Arc::new(
                VfioContainer::new(None)
                    .map_err(|e| Error::VfioUnavailable { cause: Box::new(e) })?,
            ),
        };
        let ops: Arc<dyn VfioOps> = container.clone();
        let link = DeviceLink::new(sysfs, addr, group);
        let device = VfioDevice::new(&link.path(), ops, false).map_err(|e| match e {
            VfioError::GroupViable => Error::GroupNotViable {
                addr,
                group,
                others: vec![],
            },
            VfioError::OpenGroup(ref io, _) if io.raw_os_error() == Some(libc::EBUSY) => {
                Error::DeviceBusy { addr }
            }
            VfioError::OpenGroup(io, g) if io.raw_os_error() == Some(libc::EACCES) => {
                Error::GroupPermission {
                    addr,
                    node: format!("/dev/vfio/{g}"),
                    source: io,
                }
            }
            other => Error::Vfio {
                addr,
                what: "opening the device",
                cause: Box::new(other),
            },
        })?;

        // BAR 0 (the Intel families' registers); a device without one (a
        // modern virtio device) gets its first mappable BAR in its place.
        let mut bars = None;
        let mut first_error = None;
        for i in 0..6u32 {
            match map_region(&device, i) {
                Ok(b) => {
                    bars = Some(Bars::with(i as u8, b));
                    break;
                }
                // A BAR 0 that exists but cannot be mapped is an error (the
                // Intel families' registers); only an absent one is skipped.
                Err(e) if i == 0 => {
                    let absent = device.get_region_size(0) == 0;
                    first_error = Some(e);
                    if !absent {
                        break;
                    }
                }
                Err(_) => {}
            }
        }
        let Some(bars) = bars else {
            return Err(Error::Vfio {
                addr,
                what: "mapping BAR0",
                cause: first_error.unwrap_or_default().into(),
            });
        };
        let dma = match shared {
            Some(dma) => Arc::clone(dma),
            None => Arc::new(VfioDma {
                container,
                next_iova: AtomicU64::new(IOVA_BASE),
            }),
        };
        // Registered before the device is touched, so a request that comes
        // during bring-up is held in the eventfd's counter, not lost.
        let release = ReleaseWatch::register(&device).map_err(|source| Error::Vfio {
            addr,
            what: "registering the device-release request (VFIO_PCI_REQ_IRQ_INDEX)",
            cause: source,
        })?;
        let vfio = Vfio {
            bars,
            device: ManuallyDrop::new(device),
            dma,
            release,
            link,
        };
        vfio.set_command(command::MEMORY | command::MASTER, true);
        Ok(vfio)
    }

    /// Read `buf.len()` bytes of PCI configuration space at `off`
    /// (`VFIO_PCI_CONFIG_REGION_INDEX`); false when the read fails.
    fn read_config(&self, off: u32, buf: &mut [u8]) -> bool {
        let size = self.device.get_region_size(VFIO_PCI_CONFIG_REGION_INDEX);
        if off as u64 + buf.len() as u64 > size {
            return false;
        }
        self.device
            .region_read(VFIO_PCI_CONFIG_REGION_INDEX, buf, off as u64);
        true
    }

    /// The container's DMA mapper, to open another device into the same
    /// container ([`Vfio::open`]'s `shared`).
    pub fn container(&self) -> Arc<VfioDma> {
        Arc::clone(&self.dma)
    }

    fn set_command(&self, bits: u16, on: bool) {
        let mut b = [0u8; 2];
        self.device
            .region_read(VFIO_PCI_CONFIG_REGION_INDEX, &mut b, command::OFFSET);
        let cmd = command::with(u16::from_le_bytes(b), bits, on);
        self.device.region_write(
            VFIO_PCI_CONFIG_REGION_INDEX,
            &cmd.to_le_bytes(),
            command::OFFSET,
        );
    }
}

impl DeviceIo for Vfio {
    /// BAR0, mapped (or the first mapped BAR of a device without BAR 0).
    fn bar0(&self) -> Arc<dyn DeviceBar> {
        self.bars.first()
    }
    /// Memory BAR `index`, mapped on first use, if VFIO lets it be mapped.
    fn bar(&self, index: u8) -> Option<Arc<dyn DeviceBar>> {
        let map = || map_region(&self.device, u32::from(index)).map_err(std::io::Error::other);
        let b: Arc<dyn DeviceBar> = self.bars.get(index, map)?;
        Some(b)
    }
    /// PCI configuration space through VFIO.
    fn config_read(&self, off: u32, buf: &mut [u8]) -> bool {
        self.read_config(off, buf)
    }
    /// The container, mapping whole regions at IOVAs above 4 GiB.
    fn dma(&self) -> Arc<dyn DmaMapper> {
        self.dma.clone()
    }
    /// 2 MiB hugepages.
    fn page_size(&self) -> PageSize {
        PageSize::Huge2M
    }
    /// Clear the PCI command register's bus-master bit.
    fn disable_bus_master(&self) {
        self.set_command(command::MASTER, false);
    }
    /// The device-release request (the release section below).
    fn watch_release(&self, on_request: Box<dyn Fn() + Send + Sync>) -> bool {
        self.release.start(on_request)
    }
    /// MSI-X through `VFIO_DEVICE_SET_IRQS` (the MSI-X section below).
    fn interrupts(&self) -> Option<&dyn crate::lowlevel::io::Interrupts> {
        Some(self)
    }
}

/// Map VFIO region `index` (BAR `index`) whole, or say why not.
fn map_region(device: &VfioDevice, index: u32) -> Result<Bar, String> {
    let flags = device.get_region_flags(index);
    let size = device.get_region_size(index) as usize;
    if flags & VFIO_REGION_INFO_FLAG_MMAP == 0 || size == 0 {
        return Err(format!(
            "region {index} is not mappable (flags {flags:#x}, size {size})"
        ));
    }
    Bar::map(device.as_raw_fd(), device.get_region_offset(index), size).map_err(|e| e.to_string())
}

/// Devices in IOMMU group `group`, other than `addr`, bound to a driver that
/// makes the group non-viable for VFIO (anything but vfio-pci, pci-stub and
/// pcieport), as "address (driver)".
fn group_blockers(sysfs: &Sysfs, group: u32, addr: PciAddress) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(sysfs.iommu_group_devices(group)) else {
        return vec![];
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == addr.to_string() {
            continue;
        }
        let driver = std::fs::read_link(entry.path().join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        if let Some(d) = driver {
            if !matches!(d.as_str(), "vfio-pci" | "pci-stub" | "pcieport") {
                out.push(format!("{name} ({d})"));
            }
        }
    }
    out.sort();
    out
}

// ---- The device-release request (VFIO_PCI_REQ_IRQ_INDEX) -------------------
//
// When an administrator unbinds the device from vfio-pci or removes it, the
// kernel's `vfio_unregister_group_dev` (drivers/vfio/vfio_main.c) waits for
// every user of the device to close it, and asks them to: it calls the
// driver's `request` op at once and again every 10 s
// (`wait_for_completion_interruptible_timeout(.., HZ * 10)`), and
// `vfio_pci_core_request` (drivers/vfio/pci/vfio_pci_core.c) signals the
// eventfd registered on VFIO_PCI_REQ_IRQ_INDEX, or with none registered logs
// "No device request channel registered, blocked until released by user"
// once and waits for ever. A thread here waits on that eventfd and hands
// the request to the device (`DeviceIo::watch_release`); the device stops
// its queues and closes, and `Drop for Vfio` gives the fds back.

/// The eventfd on VFIO_PCI_REQ_IRQ_INDEX and the thread that waits on it.
struct ReleaseWatch {
    event: Arc<EventFd>,
    /// Set before the thread is woken to end (not a request).
    closing: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl ReleaseWatch {
    /// A blocking eventfd, registered as the device's request trigger
    /// (`VFIO_DEVICE_SET_IRQS` with `VFIO_IRQ_SET_DATA_EVENTFD |
    /// VFIO_IRQ_SET_ACTION_TRIGGER`, one eventfd). No thread runs yet: a
    /// request before [`ReleaseWatch::start`] stays in the eventfd's counter.
    fn register(device: &VfioDevice) -> Result<ReleaseWatch, crate::error::Cause> {
        match device.get_irq_info(VFIO_PCI_REQ_IRQ_INDEX) {
            Some(i) if i.count >= 1 => {}
            _ => {
                return Err(
                    "the device has no request interrupt (VFIO_PCI_REQ_IRQ_INDEX): \
                            vfio-pci offers it since Linux 4.0"
                        .into(),
                )
            }
        }
        let event = EventFd::new(0)?;
        device
            .enable_irq(VFIO_PCI_REQ_IRQ_INDEX, vec![&event])
            .map_err(Box::new)?;
        Ok(ReleaseWatch {
            event: Arc::new(event),
            closing: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
        })
    }

    /// Start the thread `pollnic-release`, which calls `on_request` on every
    /// request (the kernel repeats one every 10 s until the device is
    /// closed). Returns false if the thread could not be started.
    fn start(&self, on_request: Box<dyn Fn() + Send + Sync>) -> bool {
        let mut slot = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return true;
        }
        let (event, closing) = (Arc::clone(&self.event), Arc::clone(&self.closing));
        let spawned = std::thread::Builder::new()
            .name("pollnic-release".into())
            .stack_size(64 << 10)
            .spawn(move || loop {
                match event.read() {
                    Ok(_) if closing.load(Ordering::Acquire) => return,
                    Ok(_) => on_request(),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            });
        match spawned {
            Ok(t) => {
                *slot = Some(t);
                true
            }
            Err(_) => false,
        }
    }

    /// Unregister the eventfd (the kernel signals it no more) and end the
    /// thread.
    fn stop(&self, device: &VfioDevice) {
        let _ = device.disable_irq(VFIO_PCI_REQ_IRQ_INDEX);
        self.closing.store(true, Ordering::Release);
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            // A write of 1 wakes the blocking read; it cannot fail short of
            // the counter overflowing, which a 1 cannot do.
            let _ = self.event.write(1);
            let _ = t.join();
        }
    }
}

impl Drop for Vfio {
    fn drop(&mut self) {
        self.release.stop(&self.device);
        // Every mapping of BAR0 holds the device file open: the kernel sees
        // the device closed only once it is gone. Clones of the mapping may
        // outlive this (a `StatsReader` kept after its device); they now read
        // zeros from anonymous memory instead of keeping the device.
        self.bars.detach();
        // SAFETY: `device` is dropped exactly once, here, and never used
        // again (the other fields do not refer to it).
        unsafe { ManuallyDrop::drop(&mut self.device) };
        self.link.remove();
    }
}

/// The path vfio-ioctls is given for the device: a private directory
/// `<tmp>/pollnic-vfio-<pid>-<n>/<addr>/` whose `iommu_group` link names the
/// group, kept while the device is open. vfio-ioctls resolves
/// `<path>/iommu_group` when it opens the device and again when it is
/// dropped, and panics if the link is gone; after the device fd closes, a
/// kernel from 6.2 on lets a remove go on without waiting for the group fd,
/// so the real `/sys/bus/pci/devices/<addr>` may already have vanished by
/// then. The group number and the device name (`<addr>`, the last path
/// component) are all it reads. Falls back to the sysfs path when the
/// directory cannot be made.
struct DeviceLink {
    /// The private directory, or `None` when the sysfs path is used.
    dir: Option<PathBuf>,
    /// What vfio-ioctls is given.
    path: PathBuf,
}

/// Prefix of the private directories in the temporary directory.
const LINK_PREFIX: &str = "pollnic-vfio-";

impl DeviceLink {
    fn new(sysfs: &Sysfs, addr: PciAddress, group: u32) -> DeviceLink {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = std::env::temp_dir();
        remove_stale_links(&tmp);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = tmp.join(format!("{LINK_PREFIX}{}-{n}", std::process::id()));
        let path = dir.join(addr.to_string());
        let made = std::fs::create_dir_all(&path).and_then(|()| {
            std::os::unix::fs::symlink(
                format!("/sys/kernel/iommu_groups/{group}"),
                path.join("iommu_group"),
            )
        });
        match made {
            Ok(()) => DeviceLink {
                dir: Some(dir),
                path,
            },
            Err(_) => {
                let _ = std::fs::remove_dir_all(&dir);
                DeviceLink {
                    dir: None,
                    path: sysfs.device_dir(addr),
                }
            }
        }
    }

    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    fn remove(&self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Remove the private directories of processes that no longer exist (one
/// killed with SIGKILL leaves its own behind).
fn remove_stale_links(tmp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(LINK_PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

// ---- MSI-X: one eventfd per RX queue vector (VFIO_PCI_MSIX_IRQ_INDEX) -------

impl Vfio {
    /// Enable MSI-X with `vectors` vectors, vector `v` signalling the `v`th
    /// eventfd returned (`VFIO_DEVICE_SET_IRQS`, `VFIO_IRQ_SET_DATA_EVENTFD |
    /// VFIO_IRQ_SET_ACTION_TRIGGER` on `VFIO_PCI_MSIX_IRQ_INDEX`).
    ///
    /// # Errors
    /// A message when the device has no MSI-X capability or fewer vectors
    /// than asked (`VFIO_DEVICE_GET_IRQ_INFO`), an eventfd cannot be made, or
    /// the kernel refuses (e.g. no interrupt remapping for the device).
    fn msix_enable(&self, vectors: u16) -> Result<Vec<Arc<IrqEvent>>, MsixError> {
        let have = self
            .device
            .get_irq_info(VFIO_PCI_MSIX_IRQ_INDEX)
            .map_or(0, |i| i.count);
        if have < vectors as u32 {
            return Err(MsixError::TooFewVectors {
                available: have,
                needed: vectors,
            });
        }
        let events = (0..vectors)
            .map(|_| IrqEvent::new().map(Arc::new))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(MsixError::EventFd)?;
        self.device
            .enable_msix(events.iter().map(|e| e.eventfd()).collect())
            .map_err(|e| MsixError::SetIrqs {
                vectors,
                cause: Box::new(e),
            })?;
        Ok(events)
    }

    /// Disable MSI-X (no vector signals its eventfd afterwards).
    fn msix_disable(&self) {
        // Fails only when MSI-X was not enabled: nothing to undo then.
        let _ = self.device.disable_msix();
    }
}

impl crate::lowlevel::io::Interrupts for Vfio {
    fn enable_msix(&self, vectors: u16) -> Result<Vec<Arc<IrqEvent>>, MsixError> {
        self.msix_enable(vectors)
    }
    fn disable_msix(&self) {
        self.msix_disable()
    }
}
