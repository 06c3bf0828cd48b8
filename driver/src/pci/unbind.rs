//! `pollnic unbind`: give a NIC back from vfio-pci or `uio_pci_generic` to
//! its kernel driver
//! (`Documentation/ABI/testing/sysfs-bus-pci`):
//!
//! 1. `echo <addr> > /sys/bus/pci/devices/<addr>/driver/unbind`
//! 2. `echo > /sys/bus/pci/devices/<addr>/driver_override` (clear it)
//! 3. `echo <addr> > /sys/bus/pci/drivers/<previous>/bind` (loading the
//!    driver if needed), or without a record of the previous driver,
//!    `echo <addr> > /sys/bus/pci/drivers_probe` so the kernel picks one.
//!
//! It also repairs half-done binds: a device left without a driver but with
//! `driver_override` = vfio-pci or `uio_pci_generic`, or a state record, is
//! restored the same way. VFIO's no-IOMMU mode, if `bind --no-iommu` turned
//! it on, stays on (it is the `vfio` module's, not the port's).

use std::fmt;

use super::address::PciAddress;
use super::binder::{Binder, Target};
use super::device::{is_pollnic_driver, PciDevice};
use super::error::{Error, Result};

/// The outcome of a successful unbind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnbindReport {
    /// The device.
    pub addr: PciAddress,
    /// `false` if there was nothing to do (it was on neither vfio-pci nor
    /// `uio_pci_generic`).
    pub changed: bool,
    /// Driver before the call (`vfio-pci` or `uio_pci_generic` when
    /// `changed`, unless repairing).
    pub previous_driver: Option<String>,
    /// The driver recorded by `bind`, which it was returned to, if any.
    pub recorded_driver: Option<String>,
    /// The driver it is on now, `None` if no kernel driver claimed it.
    pub driver: Option<String>,
}

impl fmt::Display for UnbindReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let now = self.driver.as_deref().unwrap_or("no driver");
        if !self.changed {
            return write!(
                f,
                "{}: not bound to vfio-pci or uio_pci_generic (driver: {now}); nothing to do",
                self.addr
            );
        }
        let from = match self.previous_driver.as_deref() {
            Some(d) => format!("released from {d}"),
            None => "restored".to_owned(),
        };
        write!(f, "{}: {from}, now on {now}", self.addr)?;
        if self.recorded_driver.is_none() {
            f.write_str(" (no record of a previous driver: the kernel picked)")?;
        }
        Ok(())
    }
}

impl Binder<'_> {
    /// Returns `addr` from vfio-pci or `uio_pci_generic` to its previous
    /// kernel driver.
    ///
    /// # Errors
    /// [`Error::NoSuchDevice`], [`Error::PermissionDenied`] (not root),
    /// [`Error::Modprobe`] (previous driver cannot be loaded), or
    /// [`Error::StepFailed`] when returning to the recorded driver failed —
    /// the kernel is then asked to pick a driver, and `recovery` says which.
    pub fn unbind(&self, addr: PciAddress) -> Result<UnbindReport> {
        self.unbind_with(addr, true)
    }

    /// [`Binder::unbind`]; when returning to the recorded driver fails, asks
    /// the kernel to pick one only if `fall_back` (else returns the failure,
    /// the device possibly without a driver, for the caller to put back).
    pub(crate) fn unbind_with(&self, addr: PciAddress, fall_back: bool) -> Result<UnbindReport> {
        let dev = PciDevice::read(self.sysfs, addr)?;
        let state = self.state();
        let recorded = state.recall(addr)?;
        let leftover_override = dev
            .driver_override
            .as_deref()
            .is_some_and(is_pollnic_driver);
        let mut report = UnbindReport {
            addr,
            changed: false,
            previous_driver: dev.driver.clone(),
            recorded_driver: recorded.clone(),
            driver: dev.driver.clone(),
        };
        match dev.driver.as_deref() {
            Some(d) if is_pollnic_driver(d) => {}
            Some(_) => {
                // On a kernel driver already: tidy up leftovers, change nothing else.
                if leftover_override {
                    self.write(&self.sysfs.device_dir(addr).join("driver_override"), "\n")?;
                }
                state.forget(addr)?;
                report.recorded_driver = None;
                return Ok(report);
            }
            None if !leftover_override && recorded.is_none() => return Ok(report),
            None => {} // A half-done bind: restore.
        }

        let target = match recorded.as_deref() {
            Some(driver) => Target::Driver(driver),
            None => Target::KernelChoice,
        };
        let mut done = Vec::new();
        report.changed = true;
        match self.release(addr, target, &mut done) {
            Ok(now) => {
                state.forget(addr)?;
                report.driver = now;
                Ok(report)
            }
            Err(cause)
                if fall_back
                    && matches!(target, Target::Driver(_))
                    && !cause.is_permission_denied() =>
            {
                Err(self.fall_back_to_kernel_choice(addr, cause))
            }
            Err(cause) => Err(cause),
        }
    }

    /// After failing to return `addr` to its recorded driver, lets the kernel
    /// pick one so the device is not left driverless.
    fn fall_back_to_kernel_choice(&self, addr: PciAddress, cause: Error) -> Error {
        let mut done = Vec::new();
        let recovery = match self.release(addr, Target::KernelChoice, &mut done) {
            Ok(Some(now)) => {
                let _ = self.state().forget(addr);
                format!("asked the kernel to pick a driver instead: {addr} is now on {now}")
            }
            Ok(None) => format!(
                "asked the kernel to pick a driver instead, but none claimed {addr}; load the \
                 right one (`modprobe igb` / `modprobe ixgbe`) and run `pollnic unbind {addr}` again"
            ),
            Err(e) => format!(
                "asking the kernel to pick a driver failed too ({e}); {addr} may have no driver: \
                 run `pollnic status`"
            ),
        };
        Error::StepFailed {
            cause: Box::new(cause),
            recovery,
        }
    }
}
