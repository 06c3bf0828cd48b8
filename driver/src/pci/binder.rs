//! Shared machinery of `bind` and `unbind`: options, the sysfs writes with
//! error mapping, waiting for the kernel, and handing a device back to a
//! kernel driver.
//!
//! The sequences follow the kernel's `Documentation/driver-api/vfio.rst` and
//! the `driver_override` / `drivers_probe` / `bind` / `unbind` entries of
//! `Documentation/ABI/testing/sysfs-bus-pci`.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use super::address::PciAddress;
use super::device::is_pollnic_driver;
use super::error::{Error, Result};
use super::kernel::Kernel;
use super::state::StateDir;
use super::sysfs::{self, Sysfs};

const WRITE_HINT: &str = "check `dmesg | tail` for the kernel's reason";
const POLL: Duration = Duration::from_millis(10);

/// Where bind/unbind keep and look for things outside sysfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindOptions {
    /// Directory of previous-driver records; default `/run/pollnic`.
    pub state_dir: PathBuf,
    /// Directory of VFIO group nodes; default `/dev/vfio`.
    pub dev_vfio: PathBuf,
    /// Directory of the `uio<N>` nodes; default `/dev`.
    pub dev_uio: PathBuf,
    /// How long to wait for the kernel to bind a driver or create
    /// `/dev/vfio/<group>`; default 2 s.
    pub timeout: Duration,
}

impl Default for BindOptions {
    fn default() -> Self {
        Self {
            state_dir: PathBuf::from("/run/pollnic"),
            dev_vfio: PathBuf::from("/dev/vfio"),
            dev_uio: PathBuf::from("/dev"),
            timeout: Duration::from_secs(2),
        }
    }
}

/// Binds devices to vfio-pci or `uio_pci_generic` and back, through a [`Kernel`].
pub struct Binder<'a> {
    /// The sysfs tree to work on.
    pub sysfs: &'a Sysfs,
    /// Who carries out writes and module loads.
    pub kernel: &'a dyn Kernel,
    /// Paths and timeouts.
    pub options: BindOptions,
}

/// Which driver a device released from vfio-pci or `uio_pci_generic`
/// should end up on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target<'t> {
    /// This driver, via `drivers/<name>/bind` (loading it if needed).
    Driver(&'t str),
    /// Whatever the kernel picks by device ID (`drivers_probe`).
    KernelChoice,
    /// None: leave the device unbound.
    Unbound,
}

impl<'a> Binder<'a> {
    /// A binder with explicit collaborators (tests use a fake kernel/tree).
    pub fn new(sysfs: &'a Sysfs, kernel: &'a dyn Kernel, options: BindOptions) -> Self {
        Self {
            sysfs,
            kernel,
            options,
        }
    }

    pub(crate) fn state(&self) -> StateDir {
        StateDir::new(&self.options.state_dir)
    }

    /// Writes a sysfs attribute, mapping failures to [`Error`].
    pub(crate) fn write(&self, path: &Path, value: &str) -> Result<()> {
        self.kernel.write_attr(path, value).map_err(|e| {
            Error::io(
                &format!("writing {:?} to", value.trim_end()),
                path,
                WRITE_HINT,
                e,
            )
        })
    }

    /// The driver currently bound to `addr`, if any.
    pub(crate) fn current_driver(&self, addr: PciAddress) -> Result<Option<String>> {
        sysfs::link_basename(&self.sysfs.device_dir(addr).join("driver"))
    }

    /// `driver_override` of `addr`, `None` when unset.
    pub(crate) fn current_override(&self, addr: PciAddress) -> Option<String> {
        sysfs::read_trimmed(&self.sysfs.device_dir(addr).join("driver_override"))
            .ok()
            .filter(|s| !s.is_empty() && s != "(null)")
    }

    /// Polls `done` every 10 ms until it holds or the timeout passes.
    pub(crate) fn wait_until(&self, mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + self.options.timeout;
        loop {
            if done() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(POLL);
        }
    }

    /// Waits until `addr` is bound to `expected`.
    ///
    /// # Errors
    /// [`Error::WrongDriver`] when it is not by the timeout.
    pub(crate) fn wait_for_driver(&self, addr: PciAddress, expected: &str) -> Result<()> {
        let mut actual = None;
        if self.wait_until(|| {
            actual = self.current_driver(addr).ok().flatten();
            actual.as_deref() == Some(expected)
        }) {
            return Ok(());
        }
        Err(Error::WrongDriver {
            addr,
            expected: expected.to_owned(),
            actual: actual.unwrap_or_else(|| "none".into()),
        })
    }

    /// Makes sure PCI driver `name` is registered, loading its module if not.
    ///
    /// # Errors
    /// [`Error::Modprobe`] if loading fails or does not register the driver.
    pub(crate) fn ensure_driver(&self, name: &str) -> Result<()> {
        let dir = self.sysfs.driver_dir(name);
        if dir.exists() {
            return Ok(());
        }
        self.kernel
            .modprobe(name)
            .map_err(|detail| Error::Modprobe {
                module: name.to_owned(),
                detail,
            })?;
        if self.wait_until(|| dir.exists()) {
            return Ok(());
        }
        Err(Error::Modprobe {
            module: name.to_owned(),
            detail: format!("it loaded, but {} did not appear", dir.display()),
        })
    }

    /// Takes `addr` off vfio-pci or `uio_pci_generic` (if on one), clears a
    /// `driver_override` naming one of them, and moves it to `target` if it
    /// has no driver then. Appends what it did to `done`; returns the driver
    /// it ends on.
    ///
    /// # Errors
    /// The first failing step; `done` says what had been done before it.
    pub(crate) fn release(
        &self,
        addr: PciAddress,
        target: Target<'_>,
        done: &mut Vec<String>,
    ) -> Result<Option<String>> {
        let dir = self.sysfs.device_dir(addr);
        let name = addr.to_string();
        if let Some(d) = self.current_driver(addr)?.filter(|d| is_pollnic_driver(d)) {
            self.write(&dir.join("driver/unbind"), &name)?;
            done.push(format!("unbound from {d}"));
        }
        if self
            .current_override(addr)
            .is_some_and(|o| is_pollnic_driver(&o))
        {
            // Documentation/ABI/testing/sysfs-bus-pci: writing a newline clears it.
            self.write(&dir.join("driver_override"), "\n")?;
            done.push("cleared driver_override".into());
        }
        if self.current_driver(addr)?.is_none() {
            match target {
                Target::Driver(driver) => {
                    self.ensure_driver(driver)?;
                    self.write(&self.sysfs.driver_dir(driver).join("bind"), &name)?;
                    self.wait_for_driver(addr, driver)?;
                    done.push(format!("rebound to {driver}"));
                }
                Target::KernelChoice => {
                    self.write(&self.sysfs.drivers_probe(), &name)?;
                    // Probing is synchronous for the NIC drivers, but give an
                    // asynchronous one the same grace period.
                    self.wait_until(|| matches!(self.current_driver(addr), Ok(Some(_))));
                    done.push("asked the kernel to probe drivers".into());
                }
                Target::Unbound => {}
            }
        }
        self.current_driver(addr)
    }
}
