//! A mapped PCI BAR: the device's registers, accessed with aligned 32-bit
//! volatile loads and stores only (QEMU's igb accepts nothing else; the
//! 82576 datasheet §8.1 asks for 32-bit accesses).
//!
//! The mapping is RAII: dropping the [`Bar`] unmaps it.

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

/// Register access, so device logic can run against a mock in unit tests.
pub trait Regs {
    /// Read the 32-bit register at byte offset `off`.
    fn read32(&self, off: u32) -> u32;
    /// Write the 32-bit register at byte offset `off`.
    fn write32(&self, off: u32, val: u32);
    /// Read-modify-write: set `bits`.
    fn set_bits(&self, off: u32, bits: u32) {
        self.write32(off, self.read32(off) | bits);
    }
    /// Read-modify-write: clear `bits`.
    fn clear_bits(&self, off: u32, bits: u32) {
        self.write32(off, self.read32(off) & !bits);
    }
    /// Read the 16-bit register at byte offset `off` (2-byte aligned). The
    /// default reads the 32-bit word around it, for register spaces with
    /// 32-bit registers only; a mapped BAR does a real 16-bit load (virtio
    /// 1.x §4.1.3.1: each field of the common configuration is accessed
    /// with its own width).
    fn read16(&self, off: u32) -> u16 {
        (self.read32(off & !3) >> (8 * (off & 2))) as u16
    }
    /// Write the 16-bit register at byte offset `off` (see [`Regs::read16`]).
    fn write16(&self, off: u32, val: u16) {
        let (w, sh) = (off & !3, 8 * (off & 2));
        let v = self.read32(w) & !(0xffff << sh) | (val as u32) << sh;
        self.write32(w, v);
    }
    /// Read the 8-bit register at byte offset `off` (see [`Regs::read16`]).
    fn read8(&self, off: u32) -> u8 {
        (self.read32(off & !3) >> (8 * (off & 3))) as u8
    }
    /// Write the 8-bit register at byte offset `off` (see [`Regs::read16`]).
    fn write8(&self, off: u32, val: u8) {
        let (w, sh) = (off & !3, 8 * (off & 3));
        let v = self.read32(w) & !(0xff << sh) | (val as u32) << sh;
        self.write32(w, v);
    }
}

/// One memory-mapped BAR.
#[derive(Debug)]
pub struct Bar {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-global memory; all access goes through
// volatile 32-bit loads/stores, which are fine from any thread (each register
// write is a single store; callers coordinate which thread owns which register).
unsafe impl Send for Bar {}
// SAFETY: as above; `&Bar` only offers volatile reads and writes.
unsafe impl Sync for Bar {}

impl Bar {
    /// The mapping's length in bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// Map `len` bytes of `fd` at `offset` (a VFIO region's reported offset) read-write, shared.
    ///
    /// # Errors
    /// The `mmap` error.
    pub fn map(fd: RawFd, offset: u64, len: usize) -> io::Result<Bar> {
        // SAFETY: a fresh shared mapping chosen by the kernel (no MAP_FIXED),
        // so it cannot alias any Rust object; failure is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Bar {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Replace the mapping, in place, with anonymous zeroed memory of the
    /// same size: the mapping no longer holds the file it came from (for
    /// VFIO, the device fd: the kernel counts the device open while any
    /// mapping of it exists), and any access still made through a clone of
    /// this `Bar` reads zeros and writes nowhere, instead of faulting (DPDK
    /// remaps a hot-unplugged device's BARs to anonymous memory alike:
    /// `pci_uio_remap_resource`, drivers/bus/pci). Called as the device closes.
    pub fn detach(&self) {
        // SAFETY: MAP_FIXED over exactly our own mapping `ptr..ptr+len`
        // (made in `map`, not yet unmapped: that happens only in `drop`):
        // the range stays valid memory throughout (the kernel swaps the
        // mapping under its mmap lock), it is only ever reached through
        // volatile accesses, and `drop` later unmaps the replacement.
        let p = unsafe {
            libc::mmap(
                self.ptr.cast(),
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        // On failure the device mapping simply stays until `drop`.
        let _ = p;
    }

    #[inline]
    fn reg(&self, off: u32) -> *mut u32 {
        self.at(off, 4)
    }

    /// The `width`-byte register at `off`, checked aligned and inside the BAR.
    #[inline]
    fn at<T>(&self, off: u32, width: u32) -> *mut T {
        assert!(
            off % width == 0 && off as usize + width as usize <= self.len,
            "register {off:#x} ({width} bytes) outside BAR"
        );
        self.ptr.wrapping_add(off as usize).cast()
    }
}

impl Regs for Bar {
    #[inline]
    fn read32(&self, off: u32) -> u32 {
        let p = self.reg(off);
        // SAFETY: `p` is 4-byte aligned and inside the live mapping (checked in
        // `reg`); device memory is only touched through volatile accesses.
        unsafe { p.read_volatile() }
    }
    #[inline]
    fn write32(&self, off: u32, val: u32) {
        let p = self.reg(off);
        // SAFETY: as in `read32`.
        unsafe { p.write_volatile(val) }
    }
    fn read16(&self, off: u32) -> u16 {
        let p = self.at::<u16>(off, 2);
        // SAFETY: aligned and inside the live mapping (checked in `at`);
        // volatile, one 16-bit load.
        unsafe { p.read_volatile() }
    }
    fn write16(&self, off: u32, val: u16) {
        let p = self.at::<u16>(off, 2);
        // SAFETY: as in `read16`.
        unsafe { p.write_volatile(val) }
    }
    fn read8(&self, off: u32) -> u8 {
        let p = self.at::<u8>(off, 1);
        // SAFETY: inside the live mapping (checked in `at`); volatile.
        unsafe { p.read_volatile() }
    }
    fn write8(&self, off: u32, val: u8) {
        let p = self.at::<u8>(off, 1);
        // SAFETY: as in `read8`.
        unsafe { p.write_volatile(val) }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr+len` is exactly the mapping made in `map`, and no
        // reference into it can outlive `self` (only raw volatile accesses).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The memory BARs of one device as a back end keeps them (VFIO, VFIO
/// no-IOMMU, `uio_pci_generic`): the first one, mapped at open (BAR 0 for
/// the Intel families; a modern virtio device may have none, and then its
/// first mappable BAR stands in), and the others mapped on first use.
#[derive(Debug)]
pub(crate) struct Bars {
    first: Arc<Bar>,
    slots: Mutex<[Option<Arc<Bar>>; 6]>,
}

impl Bars {
    /// The first of BARs 0..=5 that `map` maps, or `None`.
    pub(crate) fn first_of(map: impl Fn(u8) -> io::Result<Bar>) -> Option<Bars> {
        (0..6u8).find_map(|i| map(i).ok().map(|b| Bars::with(i, b)))
    }

    /// `bar`, mapped as BAR `index`, first.
    pub(crate) fn with(index: u8, bar: Bar) -> Bars {
        let first = Arc::new(bar);
        let mut slots: [Option<Arc<Bar>>; 6] = Default::default();
        slots[usize::from(index) % 6] = Some(Arc::clone(&first));
        Bars {
            first,
            slots: Mutex::new(slots),
        }
    }

    /// The BAR mapped at open.
    pub(crate) fn first(&self) -> Arc<Bar> {
        Arc::clone(&self.first)
    }

    /// BAR `index`, mapped with `map` on first use; `None` past 5 or when
    /// it cannot be mapped.
    pub(crate) fn get(&self, index: u8, map: impl FnOnce() -> io::Result<Bar>) -> Option<Arc<Bar>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots.get_mut(usize::from(index))?;
        if slot.is_none() {
            *slot = Some(Arc::new(map().ok()?));
        }
        slot.clone()
    }

    /// [`Bar::detach`] every mapping, as the device closes.
    pub(crate) fn detach(&self) {
        self.first.detach();
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for b in slots.iter().flatten() {
            b.detach();
        }
    }
}

/// PCI configuration space: the command register's offset and bits (PCI
/// Local Bus Specification 3.0, §6.2.2).
pub(crate) mod command {
    /// The command register's offset in configuration space.
    pub(crate) const OFFSET: u64 = 0x04;
    /// Memory space enable.
    pub(crate) const MEMORY: u16 = 1 << 1;
    /// Bus master enable: the device may DMA.
    pub(crate) const MASTER: u16 = 1 << 2;
    /// INTx disable. pollnic never takes the legacy interrupt; a device
    /// left free to raise it on a shared line gets that line disabled by
    /// the kernel ("irq N: nobody cared", seen in the no-IOMMU guest).
    pub(crate) const INTX_DISABLE: u16 = 1 << 10;

    /// `cmd` with `bits` set (`on`) or cleared.
    pub(crate) fn with(cmd: u16, bits: u16, on: bool) -> u16 {
        if on {
            cmd | bits
        } else {
            cmd & !bits
        }
    }
}
