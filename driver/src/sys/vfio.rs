//! VFIO: the container (type1 IOMMU), the device's IOMMU group and device fd,
//! BAR0 mapped at the offset VFIO reports, PCI command register access, and
//! DMA mapping of whole regions at IOVAs pollnic chooses.
//!
//! Source: Linux `Documentation/driver-api/vfio.rst`. Built on rust-vmm's
//! `vfio-ioctls`, wrapped here because its region accessors only log errors.

use crate::error::Error;
use crate::io::{DeviceBar, DeviceIo};
use crate::pci::{PciAddress, Sysfs};
use crate::sys::irq::IrqEvent;
use crate::sys::mmio::Bar;
use pollnic_rings::{DmaError, DmaMapper, PageSize};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vfio_bindings::bindings::vfio::{
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_REGION_INFO_FLAG_MMAP,
};
use vfio_ioctls::{VfioContainer, VfioDevice, VfioError, VfioOps};

/// PCI command register offset in configuration space.
const PCI_COMMAND: u64 = 0x04;
/// PCI command: memory space enable.
const PCI_COMMAND_MEMORY: u16 = 1 << 1;
/// PCI command: bus master enable (the device may DMA).
const PCI_COMMAND_MASTER: u16 = 1 << 2;
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

impl DmaMapper for VfioDma {
    unsafe fn map(&self, va: *mut u8, len: usize) -> Result<u64, DmaError> {
        let step = (len as u64).div_ceil(2 << 20) * (2 << 20);
        let iova = self.next_iova.fetch_add(step, Ordering::Relaxed);
        // SAFETY: the caller promises `va..va+len` stays mapped until `unmap`
        // and is only accessed through raw pointers / volatile operations
        // while the device may DMA to it (the DmaMapper contract).
        unsafe { self.container.vfio_dma_map(iova, len, va) }.map_err(|e| DmaError::Map {
            len,
            source: Box::new(e),
        })?;
        Ok(iova)
    }

    fn unmap(&self, iova: u64, len: usize) {
        // Fails only when the container already lost its group (device closed
        // while Packets still hold a pool): the mapping is gone either way.
        let _ = self.container.vfio_dma_unmap(iova, len);
    }
}

/// An open VFIO device: its container, device fd and mapped BAR0.
pub struct Vfio {
    // Field order is drop order: BAR unmapped, then device fd and group
    // released, then the container.
    bar0: Arc<Bar>,
    device: VfioDevice,
    dma: Arc<VfioDma>,
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
                VfioContainer::new(None).map_err(|e| Error::VfioUnavailable {
                    source: Box::new(e),
                })?,
            ),
        };
        let ops: Arc<dyn VfioOps> = container.clone();
        let device = VfioDevice::new(&sysfs.device_dir(addr), ops, false).map_err(|e| match e {
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
                source: Box::new(other),
            },
        })?;

        let flags = device.get_region_flags(0);
        let size = device.get_region_size(0) as usize;
        if flags & VFIO_REGION_INFO_FLAG_MMAP == 0 || size == 0 {
            return Err(Error::Vfio {
                addr,
                what: "mapping BAR0",
                source: format!("region 0 is not mappable (flags {flags:#x}, size {size})").into(),
            });
        }
        let bar0 =
            Bar::map(device.as_raw_fd(), device.get_region_offset(0), size).map_err(|e| {
                Error::Vfio {
                    addr,
                    what: "mapping BAR0",
                    source: Box::new(e),
                }
            })?;
        let dma = match shared {
            Some(dma) => Arc::clone(dma),
            None => Arc::new(VfioDma {
                container,
                next_iova: AtomicU64::new(IOVA_BASE),
            }),
        };
        let vfio = Vfio {
            bar0: Arc::new(bar0),
            device,
            dma,
        };
        vfio.set_command(PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, true);
        Ok(vfio)
    }

    /// The container's DMA mapper, to open another device into the same
    /// container ([`Vfio::open`]'s `shared`).
    pub fn container(&self) -> Arc<VfioDma> {
        Arc::clone(&self.dma)
    }

    fn set_command(&self, bits: u16, on: bool) {
        let mut b = [0u8; 2];
        self.device
            .region_read(VFIO_PCI_CONFIG_REGION_INDEX, &mut b, PCI_COMMAND);
        let cmd = u16::from_le_bytes(b);
        let cmd = if on { cmd | bits } else { cmd & !bits };
        self.device.region_write(
            VFIO_PCI_CONFIG_REGION_INDEX,
            &cmd.to_le_bytes(),
            PCI_COMMAND,
        );
    }
}

impl DeviceIo for Vfio {
    /// BAR0, mapped.
    fn bar0(&self) -> Arc<dyn DeviceBar> {
        self.bar0.clone()
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
        self.set_command(PCI_COMMAND_MASTER, false);
    }
    /// MSI-X through `VFIO_DEVICE_SET_IRQS` (the MSI-X section below).
    fn interrupts(&self) -> Option<&dyn crate::io::Interrupts> {
        Some(self)
    }
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
    fn msix_enable(&self, vectors: u16) -> Result<Vec<Arc<IrqEvent>>, String> {
        let have = self
            .device
            .get_irq_info(VFIO_PCI_MSIX_IRQ_INDEX)
            .map_or(0, |i| i.count);
        if have < vectors as u32 {
            return Err(format!(
                "the device offers {have} MSI-X vectors through VFIO, {vectors} are needed (one per RX queue)"
            ));
        }
        let events = (0..vectors)
            .map(|_| IrqEvent::new().map(Arc::new))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("cannot create an eventfd: {e}"))?;
        self.device
            .enable_msix(events.iter().map(|e| e.eventfd()).collect())
            .map_err(|e| format!("VFIO_DEVICE_SET_IRQS (MSI-X, {vectors} vectors) failed: {e}"))?;
        Ok(events)
    }

    /// Disable MSI-X (no vector signals its eventfd afterwards).
    fn msix_disable(&self) {
        // Fails only when MSI-X was not enabled: nothing to undo then.
        let _ = self.device.disable_msix();
    }
}

impl crate::io::Interrupts for Vfio {
    fn enable_msix(&self, vectors: u16) -> Result<Vec<Arc<IrqEvent>>, String> {
        self.msix_enable(vectors)
    }
    fn disable_msix(&self) {
        self.msix_disable()
    }
}
