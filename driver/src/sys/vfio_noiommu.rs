//! A port in a VFIO no-IOMMU group: vfio-pci with no IOMMU behind it
//! (Linux `Documentation/driver-api/vfio.rst`, "VFIO No-IOMMU mode":
//! the `vfio` module parameter `enable_unsafe_noiommu_mode`, a kernel
//! built with `CONFIG_VFIO_NOIOMMU`; group nodes `/dev/vfio/noiommu-<N>`,
//! the container's IOMMU type `VFIO_NOIOMMU_IOMMU`, which has no DMA
//! mapping). DMA takes physical addresses
//! ([`super::physmem::PhysicalDma`]).
//!
//! rust-vmm's `vfio-ioctls` knows only the type1 container and numbered
//! group nodes, so the few ioctls this needs are made here directly
//! (`include/uapi/linux/vfio.h`): the container, the group, the device fd;
//! region information for the BARs (mapped from the device fd) and
//! configuration space (read and written at its region's offset); MSI-X
//! through `VFIO_DEVICE_SET_IRQS`, as for type1. Closing the device fd
//! makes vfio-pci disable the device (`vfio_pci_core_disable`: bus
//! mastering off, reset), also when the process was killed.

use crate::error::Error;
use crate::lowlevel::io::{DeviceBar, DeviceIo, IrqEvent};
use crate::msix::MsixError;
use crate::pci::PciAddress;
use crate::sys::mmio::{command, Bar, Bars};
use crate::sys::physmem::PhysicalDma;
use pollnic_rings::{DmaMapper, PageSize};
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// `_IO(VFIO_TYPE, VFIO_BASE + n)`: VFIO_TYPE is `';'`, VFIO_BASE 100.
const fn vfio_io(n: u64) -> u64 {
    ((b';' as u64) << 8) | (100 + n)
}
const VFIO_GET_API_VERSION: u64 = vfio_io(0);
const VFIO_CHECK_EXTENSION: u64 = vfio_io(1);
const VFIO_SET_IOMMU: u64 = vfio_io(2);
const VFIO_GROUP_GET_STATUS: u64 = vfio_io(3);
const VFIO_GROUP_SET_CONTAINER: u64 = vfio_io(4);
const VFIO_GROUP_GET_DEVICE_FD: u64 = vfio_io(6);
const VFIO_DEVICE_GET_REGION_INFO: u64 = vfio_io(8);
const VFIO_DEVICE_GET_IRQ_INFO: u64 = vfio_io(9);
const VFIO_DEVICE_SET_IRQS: u64 = vfio_io(10);
/// The API version every VFIO kernel reports.
const VFIO_API_VERSION: i32 = 0;
/// The no-IOMMU container type.
const VFIO_NOIOMMU_IOMMU: u64 = 8;
/// `VFIO_GROUP_FLAGS_VIABLE`.
const GROUP_VIABLE: u32 = 1 << 0;
/// `VFIO_REGION_INFO_FLAG_MMAP`.
const REGION_MMAP: u32 = 1 << 2;
/// `VFIO_PCI_CONFIG_REGION_INDEX`.
const CONFIG_REGION: u32 = 7;
/// `VFIO_PCI_MSIX_IRQ_INDEX`.
const MSIX_IRQ: u32 = 2;
/// `VFIO_IRQ_SET_DATA_NONE`, `_DATA_EVENTFD`, `_ACTION_TRIGGER`.
const IRQ_DATA_NONE: u32 = 1 << 0;
const IRQ_DATA_EVENTFD: u32 = 1 << 2;
const IRQ_ACTION_TRIGGER: u32 = 1 << 5;

/// `struct vfio_group_status`.
#[repr(C)]
#[derive(Default)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}

/// `struct vfio_region_info` (without capabilities).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RegionInfo {
    argsz: u32,
    flags: u32,
    index: u32,
    cap_offset: u32,
    size: u64,
    offset: u64,
}

/// `struct vfio_irq_info`.
#[repr(C)]
#[derive(Default)]
struct IrqInfo {
    argsz: u32,
    flags: u32,
    index: u32,
    count: u32,
}

/// `struct vfio_irq_set` with room for this many eventfds after it.
const MAX_VECTORS: usize = 64;
#[repr(C)]
struct IrqSet {
    argsz: u32,
    flags: u32,
    index: u32,
    start: u32,
    count: u32,
    fds: [i32; MAX_VECTORS],
}

/// `ioctl(fd, req, arg)`, the OS error on -1.
///
/// # Safety
/// `arg` is what `req` expects: a value, or a pointer to a live, writable
/// structure of the size the request reads and writes.
unsafe fn ioctl(fd: RawFd, req: u64, arg: usize) -> std::io::Result<i32> {
    // SAFETY: the caller's promise about `arg`; `fd` is an open descriptor
    // (a failed call on a closed one is EBADF, not undefined behaviour).
    let r = unsafe { libc::ioctl(fd, req as libc::c_ulong, arg) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An open port in a VFIO no-IOMMU group.
pub struct VfioNoIommu {
    bars: Bars,
    // Dropped in this order (declaration order): the device fd first, so
    // vfio-pci disables the device while the group and container are
    // still held; then the group, then the container.
    device: File,
    _group: File,
    _container: File,
    /// Configuration space: its region's offset in the device fd.
    config: RegionInfo,
    dma: Arc<PhysicalDma>,
}

impl VfioNoIommu {
    /// Open `addr`, bound to vfio-pci in no-IOMMU group `group`, in a
    /// container of its own with the `VFIO_NOIOMMU_IOMMU` type; map its
    /// first memory BAR; memory space and bus mastering on.
    ///
    /// # Errors
    /// [`Error::Vfio`] naming the step that failed (no
    /// `CAP_SYS_RAWIO`: the kernel lets only it open a no-IOMMU group;
    /// the group not viable; a kernel without `VFIO_NOIOMMU_IOMMU`).
    pub fn open(addr: PciAddress, group: u32) -> Result<VfioNoIommu, Error> {
        let fail = |what: &'static str, e: std::io::Error| Error::Vfio {
            addr,
            what,
            cause: Box::new(e),
        };
        let rw = |p: &str| OpenOptions::new().read(true).write(true).open(p);
        let container =
            rw("/dev/vfio/vfio").map_err(|e| Error::VfioUnavailable { cause: Box::new(e) })?;
        let cfd = container.as_raw_fd();
        // SAFETY: VFIO_GET_API_VERSION and VFIO_CHECK_EXTENSION take a value.
        let version = unsafe { ioctl(cfd, VFIO_GET_API_VERSION, 0) }
            .map_err(|e| fail("VFIO_GET_API_VERSION", e))?;
        // SAFETY: as above.
        let noiommu = unsafe { ioctl(cfd, VFIO_CHECK_EXTENSION, VFIO_NOIOMMU_IOMMU as usize) }
            .map_err(|e| fail("VFIO_CHECK_EXTENSION(VFIO_NOIOMMU_IOMMU)", e))?;
        if version != VFIO_API_VERSION || noiommu <= 0 {
            return Err(fail(
                "checking the container for VFIO_NOIOMMU_IOMMU",
                std::io::Error::other(format!(
                    "API version {version}, no-IOMMU extension {noiommu}: is \
                     enable_unsafe_noiommu_mode on? (`pollnic bind --no-iommu`)"
                )),
            ));
        }
        let node = format!("/dev/vfio/noiommu-{group}");
        let group_file = rw(&node)
            .map_err(|e| fail("opening /dev/vfio/noiommu-<group> (needs CAP_SYS_RAWIO)", e))?;
        let gfd = group_file.as_raw_fd();
        let mut status = GroupStatus {
            argsz: std::mem::size_of::<GroupStatus>() as u32,
            flags: 0,
        };
        // SAFETY: a pointer to a live `vfio_group_status` with its argsz.
        unsafe { ioctl(gfd, VFIO_GROUP_GET_STATUS, &mut status as *mut _ as usize) }
            .map_err(|e| fail("VFIO_GROUP_GET_STATUS", e))?;
        if status.flags & GROUP_VIABLE == 0 {
            return Err(Error::GroupNotViable {
                addr,
                group,
                others: vec![],
            });
        }
        // SAFETY: VFIO_GROUP_SET_CONTAINER reads one int, the container fd.
        unsafe { ioctl(gfd, VFIO_GROUP_SET_CONTAINER, &cfd as *const RawFd as usize) }
            .map_err(|e| fail("VFIO_GROUP_SET_CONTAINER", e))?;
        // SAFETY: VFIO_SET_IOMMU takes a value.
        unsafe { ioctl(cfd, VFIO_SET_IOMMU, VFIO_NOIOMMU_IOMMU as usize) }
            .map_err(|e| fail("VFIO_SET_IOMMU(VFIO_NOIOMMU_IOMMU)", e))?;
        let name = std::ffi::CString::new(addr.to_string()).expect("no NUL in an address");
        // SAFETY: a NUL-terminated device name that outlives the call.
        let dfd = unsafe { ioctl(gfd, VFIO_GROUP_GET_DEVICE_FD, name.as_ptr() as usize) }
            .map_err(|e| fail("VFIO_GROUP_GET_DEVICE_FD", e))?;
        // SAFETY: the ioctl returned a new descriptor that nothing else owns.
        let device = unsafe { File::from_raw_fd(dfd) };
        let config = region_info(&device, CONFIG_REGION)
            .map_err(|e| fail("VFIO_DEVICE_GET_REGION_INFO (configuration space)", e))?;
        let Some(bars) = Bars::first_of(|i| map_bar(&device, u32::from(i))) else {
            return Err(fail(
                "mapping a memory BAR",
                std::io::Error::other("no BAR can be mapped"),
            ));
        };
        let dev = VfioNoIommu {
            bars,
            device,
            _group: group_file,
            _container: container,
            config,
            dma: PhysicalDma::new(u64::MAX)?,
        };
        dev.set_command(
            command::MEMORY | command::MASTER | command::INTX_DISABLE,
            true,
        );
        Ok(dev)
    }

    fn set_command(&self, bits: u16, on: bool) {
        let mut b = [0u8; 2];
        if !self.config_rw(command::OFFSET as u32, &mut b, false) {
            return;
        }
        let mut cmd = command::with(u16::from_le_bytes(b), bits, on).to_le_bytes();
        self.config_rw(command::OFFSET as u32, &mut cmd, true);
    }

    /// Read (or write) `buf` at `off` of configuration space; false past
    /// its end or on a failed call.
    fn config_rw(&self, off: u32, buf: &mut [u8], write: bool) -> bool {
        if u64::from(off) + buf.len() as u64 > self.config.size {
            return false;
        }
        let at = self.config.offset + u64::from(off);
        if write {
            self.device.write_all_at(buf, at).is_ok()
        } else {
            self.device.read_exact_at(buf, at).is_ok()
        }
    }

    fn set_irqs(&self, flags: u32, fds: &[RawFd]) -> std::io::Result<()> {
        let mut set = IrqSet {
            argsz: (5 * 4 + 4 * fds.len()) as u32,
            flags,
            index: MSIX_IRQ,
            start: 0,
            count: fds.len() as u32,
            fds: [-1; MAX_VECTORS],
        };
        set.fds[..fds.len()].copy_from_slice(fds);
        // SAFETY: a pointer to a live `vfio_irq_set` whose argsz covers the
        // header and exactly `count` eventfds, all inside `set`.
        unsafe {
            ioctl(
                self.device.as_raw_fd(),
                VFIO_DEVICE_SET_IRQS,
                &mut set as *mut _ as usize,
            )
        }
        .map(|_| ())
    }
}

/// `VFIO_DEVICE_GET_REGION_INFO` for region `index`.
fn region_info(device: &File, index: u32) -> std::io::Result<RegionInfo> {
    let mut info = RegionInfo {
        argsz: std::mem::size_of::<RegionInfo>() as u32,
        index,
        ..RegionInfo::default()
    };
    // SAFETY: a pointer to a live `vfio_region_info` with its argsz; the
    // kernel writes no more than argsz bytes.
    unsafe {
        ioctl(
            device.as_raw_fd(),
            VFIO_DEVICE_GET_REGION_INFO,
            &mut info as *mut _ as usize,
        )
    }?;
    Ok(info)
}

/// Map BAR `index` whole from the device fd, if VFIO lets it be mapped.
fn map_bar(device: &File, index: u32) -> std::io::Result<Bar> {
    let info = region_info(device, index)?;
    if info.flags & REGION_MMAP == 0 || info.size == 0 {
        return Err(std::io::Error::other(format!(
            "BAR {index} cannot be mapped"
        )));
    }
    Bar::map(device.as_raw_fd(), info.offset, info.size as usize)
}

impl DeviceIo for VfioNoIommu {
    fn bar0(&self) -> Arc<dyn DeviceBar> {
        self.bars.first()
    }
    fn bar(&self, index: u8) -> Option<Arc<dyn DeviceBar>> {
        let b: Arc<dyn DeviceBar> = self
            .bars
            .get(index, || map_bar(&self.device, u32::from(index)))?;
        Some(b)
    }
    fn config_read(&self, off: u32, buf: &mut [u8]) -> bool {
        self.config_rw(off, buf, false)
    }
    /// Physical addresses from pagemap.
    fn dma(&self) -> Arc<dyn DmaMapper> {
        self.dma.clone()
    }
    fn page_size(&self) -> PageSize {
        PageSize::Huge2M
    }
    fn disable_bus_master(&self) {
        self.set_command(command::MASTER, false);
    }
    fn interrupts(&self) -> Option<&dyn crate::lowlevel::io::Interrupts> {
        Some(self)
    }
}

impl crate::lowlevel::io::Interrupts for VfioNoIommu {
    fn enable_msix(&self, vectors: u16) -> Result<Vec<Arc<IrqEvent>>, MsixError> {
        let mut info = IrqInfo {
            argsz: std::mem::size_of::<IrqInfo>() as u32,
            index: MSIX_IRQ,
            ..IrqInfo::default()
        };
        // SAFETY: a pointer to a live `vfio_irq_info` with its argsz.
        let have = unsafe {
            ioctl(
                self.device.as_raw_fd(),
                VFIO_DEVICE_GET_IRQ_INFO,
                &mut info as *mut _ as usize,
            )
        }
        .map_or(0, |_| info.count);
        if have < u32::from(vectors) || usize::from(vectors) > MAX_VECTORS {
            return Err(MsixError::TooFewVectors {
                available: have.min(MAX_VECTORS as u32),
                needed: vectors,
            });
        }
        let events = (0..vectors)
            .map(|_| IrqEvent::new().map(Arc::new))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(MsixError::EventFd)?;
        let fds: Vec<RawFd> = events.iter().map(|e| e.eventfd().as_raw_fd()).collect();
        self.set_irqs(IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, &fds)
            .map_err(|e| MsixError::SetIrqs {
                vectors,
                cause: Box::new(e),
            })?;
        Ok(events)
    }
    fn disable_msix(&self) {
        // Fails only when MSI-X was not enabled: nothing to undo then.
        let _ = self.set_irqs(IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, &[]);
    }
}

impl Drop for VfioNoIommu {
    fn drop(&mut self) {
        self.set_command(command::MASTER, false);
        // Every mapping of a BAR holds the device fd open: detach them so
        // that closing it lets vfio-pci release the device.
        self.bars.detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_and_layouts_are_the_uapi_ones() {
        // include/uapi/linux/vfio.h: _IO(';', 100 + n).
        assert_eq!(VFIO_GET_API_VERSION, 0x3b64);
        assert_eq!(VFIO_SET_IOMMU, 0x3b66);
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(VFIO_DEVICE_SET_IRQS, 0x3b6e);
        assert_eq!(std::mem::size_of::<RegionInfo>(), 32);
        assert_eq!(std::mem::size_of::<IrqInfo>(), 16);
        assert_eq!(std::mem::offset_of!(IrqSet, fds), 20);
        // vfio-bindings (generated from the kernel header) agrees.
        use vfio_bindings::bindings::vfio as b;
        assert_eq!(std::mem::size_of::<b::vfio_region_info>(), 32);
        assert_eq!(b::VFIO_NOIOMMU_IOMMU as u64, VFIO_NOIOMMU_IOMMU);
        assert_eq!(b::VFIO_PCI_CONFIG_REGION_INDEX, CONFIG_REGION);
        assert_eq!(b::VFIO_PCI_MSIX_IRQ_INDEX, MSIX_IRQ);
        assert_eq!(b::VFIO_REGION_INFO_FLAG_MMAP, REGION_MMAP);
        assert_eq!(b::VFIO_IRQ_SET_ACTION_TRIGGER, IRQ_ACTION_TRIGGER);
        assert_eq!(b::VFIO_IRQ_SET_DATA_EVENTFD, IRQ_DATA_EVENTFD);
    }
}
