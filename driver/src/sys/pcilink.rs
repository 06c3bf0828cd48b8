//! Read-only peek at one 32-bit register of a memory BAR through its sysfs
//! `resourceN` file (`Documentation/PCI/sysfs-pci.rst`: "resource0..N ...
//! mmap-able"). Used by `pollnic status` for link state of devices that have
//! no kernel network driver. It maps one page `PROT_READ`, does one volatile
//! load and unmaps: it never writes to the device.
//!
//! This is the only `unsafe` in `pci`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::ptr::NonNull;

/// A read-only shared mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<libc::c_void>,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what a successful `mmap` returned and
        // no reference into the mapping outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr(), self.len);
        }
    }
}

/// Reads the little-endian 32-bit register at byte `offset` of the BAR whose
/// sysfs file is `resource` (e.g. `/sys/bus/pci/devices/<addr>/resource0`).
///
/// # Errors
/// `InvalidInput` if `offset` is unaligned or beyond the BAR (file size);
/// otherwise the error of `open`/`mmap` (`EACCES`/`EPERM`: not root or kernel
/// lockdown; `EINVAL`: region claimed exclusively by a driver, e.g. a running
/// VFIO user with `CONFIG_IO_STRICT_DEVMEM`).
pub(crate) fn read_u32(resource: &Path, offset: u64) -> io::Result<u32> {
    let file = File::open(resource)?;
    let bar_len = file.metadata()?.len();
    if offset % 4 != 0 || offset.checked_add(4).is_none_or(|end| end > bar_len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "register offset {offset:#x} is unaligned or outside the {bar_len:#x}-byte BAR"
            ),
        ));
    }
    let page = page_size();
    let map_off = offset & !(page - 1);
    let map_len = usize::try_from(page.min(bar_len - map_off)).map_err(io::Error::other)?;
    let within = usize::try_from(offset - map_off).map_err(io::Error::other)?;
    let off = libc::off_t::try_from(map_off).map_err(io::Error::other)?;

    // SAFETY: mapping a fresh region (null hint) of an open fd with PROT_READ;
    // the result is checked below and owned by `Mapping`, which unmaps it.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let map = Mapping {
        ptr: NonNull::new(raw).ok_or_else(|| io::Error::other("mmap returned null"))?,
        len: map_len,
    };
    // SAFETY: `within + 4 <= map_len` (checked against the BAR length above and
    // `within < page`, with `offset + 4 <= bar_len`), the address is 4-byte
    // aligned (page-aligned base, `offset % 4 == 0`), and the mapping is live
    // for the duration of the read. A volatile load is how MMIO must be read.
    let value =
        unsafe { std::ptr::read_volatile(map.ptr.as_ptr().cast::<u8>().add(within).cast::<u32>()) };
    drop(map);
    Ok(u32::from_le(value))
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n)
        .ok()
        .filter(|n| n.is_power_of_two())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn bar_file(len: usize, writes: &[(usize, u32)]) -> tempfile::NamedTempFile {
        let mut bytes = vec![0u8; len];
        for &(off, v) in writes {
            bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
        }
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        f
    }

    #[test]
    fn reads_registers_in_first_and_later_pages() {
        let f = bar_file(0x43000, &[(0x8, 0x8000_0083), (0x42A4, 0x7000_0000)]);
        assert_eq!(read_u32(f.path(), 0x8).unwrap(), 0x8000_0083);
        assert_eq!(read_u32(f.path(), 0x42A4).unwrap(), 0x7000_0000);
        assert_eq!(read_u32(f.path(), 0x42A0).unwrap(), 0);
    }

    #[test]
    fn rejects_out_of_range_and_unaligned() {
        let f = bar_file(0x1000, &[]);
        assert_eq!(
            read_u32(f.path(), 0x42A4).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            read_u32(f.path(), 0xFFE).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            read_u32(f.path(), 0x9).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(read_u32(f.path(), 0xFFC).is_ok());
    }
}
