//! A port bound to `uio_pci_generic`, the kernel's generic userspace I/O
//! driver for PCI (`drivers/uio/uio_pci_generic.c`): no IOMMU, so DMA
//! takes physical addresses ([`super::physmem::PhysicalDma`]).
//!
//! - BARs: `mmap` of sysfs `resource<N>` (Linux
//!   `Documentation/PCI/sysfs-pci.rst`), as DPDK's `pci_uio_map_resource`;
//! - configuration space: `pread`/`pwrite` of sysfs `config`;
//! - bus mastering: turned on here at open and off at close (the PCI
//!   command register's bit 2);
//! - `/dev/uio<N>` is held open while the port is: `uio_pci_generic`'s
//!   `release` clears bus mastering when its last file closes, so a
//!   process that dies, even by SIGKILL, leaves no device DMAing;
//! - interrupts: `uio_pci_generic` offers INTx only (`/dev/uio<N>`), which
//!   pollnic does not use: the interrupt and adaptive receive modes are
//!   refused ([`MsixError::IntxOnly`]); busy polling works.

use crate::error::Error;
use crate::lowlevel::io::{DeviceBar, DeviceIo};
use crate::msix::MsixError;
use crate::pci::{PciAddress, Sysfs};
use crate::sys::mmio::{command, Bar, Bars};
use crate::sys::physmem::PhysicalDma;
use pollnic_rings::{DmaMapper, PageSize};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `IORESOURCE_MEM` in a sysfs `resource` line's flags
/// (`include/linux/ioport.h`): a memory BAR, which can be mapped.
const IORESOURCE_MEM: u64 = 0x200;

/// An open port on `uio_pci_generic`.
pub struct Uio {
    bars: Bars,
    /// The device's sysfs directory.
    dir: PathBuf,
    /// Its configuration space (sysfs `config`, read-write).
    config: File,
    /// `/dev/uio<N>`, held so that its release clears bus mastering.
    _uio: File,
    dma: Arc<PhysicalDma>,
}

impl Uio {
    /// Open the port at `addr`, which must be bound to `uio_pci_generic`:
    /// its `/dev/uio<N>`, its configuration space, and its first memory BAR
    /// (BAR 0 for the Intel families); then memory space and bus mastering
    /// on.
    ///
    /// # Errors
    /// [`Error::Uio`] naming the file that could not be opened or mapped
    /// (not root, the port not on `uio_pci_generic`, no memory BAR).
    pub fn open(sysfs: &Sysfs, addr: PciAddress) -> Result<Uio, Error> {
        let dir = sysfs.device_dir(addr);
        let fail = |what: String, source: std::io::Error| Error::Uio { addr, what, source };
        let node = uio_node(&dir).map_err(|e| fail(format!("{}/uio", dir.display()), e))?;
        let uio = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&node)
            .map_err(|e| fail(node.display().to_string(), e))?;
        let cfg_path = dir.join("config");
        let config = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&cfg_path)
            .map_err(|e| fail(cfg_path.display().to_string(), e))?;
        // A process without CAP_SYS_ADMIN reads only the first 64 bytes of
        // configuration space (`pci_read_config`, drivers/pci/pci-sysfs.c):
        // the capability list behind them would look empty.
        let mut whole = [0u8; 256];
        let got = config.read_at(&mut whole, 0).unwrap_or(0);
        if got < whole.len() {
            return Err(Error::NeedsCapSysAdmin {
                addr,
                what: "reading its PCI configuration space past 64 bytes (sysfs `config`)",
            });
        }
        let Some(bars) = Bars::first_of(|i| map_resource(&dir, i)) else {
            return Err(fail(
                format!("{}/resource0..5", dir.display()),
                std::io::Error::other("no memory BAR could be mapped"),
            ));
        };
        let uio = Uio {
            bars,
            dir,
            config,
            _uio: uio,
            dma: PhysicalDma::new(u64::MAX)?,
        };
        uio.set_command(
            command::MEMORY | command::MASTER | command::INTX_DISABLE,
            true,
        );
        Ok(uio)
    }

    fn set_command(&self, bits: u16, on: bool) {
        let mut b = [0u8; 2];
        if self.config.read_exact_at(&mut b, command::OFFSET).is_err() {
            return;
        }
        let cmd = command::with(u16::from_le_bytes(b), bits, on);
        let _ = self
            .config
            .write_all_at(&cmd.to_le_bytes(), command::OFFSET);
    }
}

/// `/dev/uio<N>` of the device whose sysfs directory is `dir` (its
/// `uio/uio<N>` entry, made by the uio core when `uio_pci_generic` binds).
fn uio_node(dir: &Path) -> std::io::Result<PathBuf> {
    for e in std::fs::read_dir(dir.join("uio"))?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name
            .strip_prefix("uio")
            .is_some_and(|n| n.parse::<u32>().is_ok())
        {
            return Ok(Path::new("/dev").join(name));
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "no uio<N> entry: the port is not bound to uio_pci_generic",
    ))
}

/// Whether BAR `index` is a memory BAR, from line `index` of sysfs
/// `resource` (`start end flags`, hexadecimal).
fn is_memory_bar(resource: &str, index: u8) -> bool {
    resource
        .lines()
        .nth(index as usize)
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & IORESOURCE_MEM != 0)
}

/// Map memory BAR `index` whole from sysfs `resource<index>` (its size is
/// the file's).
fn map_resource(dir: &Path, index: u8) -> std::io::Result<Bar> {
    let table = std::fs::read_to_string(dir.join("resource"))?;
    if !is_memory_bar(&table, index) {
        return Err(std::io::Error::other(format!(
            "BAR {index} is not a memory BAR"
        )));
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(format!("resource{index}")))?;
    let len = f.metadata()?.len() as usize;
    if len == 0 {
        return Err(std::io::Error::other(format!("BAR {index} is empty")));
    }
    // The mapping keeps the BAR reachable after `f` closes.
    Bar::map(f.as_raw_fd(), 0, len)
}

impl DeviceIo for Uio {
    /// The first memory BAR (BAR 0 for the Intel families).
    fn bar0(&self) -> Arc<dyn DeviceBar> {
        self.bars.first()
    }
    /// Memory BAR `index` from sysfs `resource<index>`, mapped on first use.
    fn bar(&self, index: u8) -> Option<Arc<dyn DeviceBar>> {
        let b: Arc<dyn DeviceBar> = self.bars.get(index, || map_resource(&self.dir, index))?;
        Some(b)
    }
    /// Sysfs `config`; false past its end or when the read fails.
    fn config_read(&self, off: u32, buf: &mut [u8]) -> bool {
        self.config.read_exact_at(buf, u64::from(off)).is_ok()
    }
    /// Physical addresses from pagemap.
    fn dma(&self) -> Arc<dyn DmaMapper> {
        self.dma.clone()
    }
    /// 2 MiB hugepages: each one physically contiguous.
    fn page_size(&self) -> PageSize {
        PageSize::Huge2M
    }
    /// Clear the PCI command register's bus-master bit.
    fn disable_bus_master(&self) {
        self.set_command(command::MASTER, false);
    }
    /// INTx only: refused (see the module's notes).
    fn interrupts(&self) -> Option<&dyn crate::lowlevel::io::Interrupts> {
        Some(self)
    }
}

impl crate::lowlevel::io::Interrupts for Uio {
    fn msix_capable(&self) -> bool {
        false
    }
    fn enable_msix(
        &self,
        _vectors: u16,
    ) -> Result<Vec<Arc<crate::lowlevel::io::IrqEvent>>, MsixError> {
        Err(MsixError::IntxOnly)
    }
    fn disable_msix(&self) {}
}

impl Drop for Uio {
    fn drop(&mut self) {
        // The device was reset and its memory is still held (Drop for
        // Device); bus mastering off before `/dev/uio<N>` closes too.
        self.set_command(command::MASTER, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bars_are_told_by_their_flags() {
        // QEMU's igb: BAR0 memory, BAR2 I/O ports, BAR3 memory (MSI-X).
        let table = "0x00000000febc0000 0x00000000febdffff 0x0000000000040200\n\
                     0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                     0x000000000000c000 0x000000000000c01f 0x0000000000040101\n\
                     0x00000000febe0000 0x00000000febe3fff 0x0000000000040200\n";
        assert!(is_memory_bar(table, 0));
        assert!(!is_memory_bar(table, 1));
        assert!(!is_memory_bar(table, 2));
        assert!(is_memory_bar(table, 3));
        assert!(!is_memory_bar(table, 5));
        assert!(!is_memory_bar("garbage", 0));
    }

    #[test]
    fn the_uio_node_comes_from_the_device_directory() {
        let d = tempfile::tempdir().unwrap();
        assert!(uio_node(d.path()).is_err());
        std::fs::create_dir_all(d.path().join("uio/uio3")).unwrap();
        assert_eq!(uio_node(d.path()).unwrap(), Path::new("/dev/uio3"));
    }
}
