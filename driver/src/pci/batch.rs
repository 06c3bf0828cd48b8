//! Several ports in one command, all or nothing (`pollnic bind A B`,
//! `pollnic unbind A B`): every address is checked before any port is
//! changed, and when a step fails part-way (a sysfs write the kernel
//! rejects, a driver that does not bind), the ports already done are put
//! back where they were before the error is returned.

use std::collections::HashSet;

use super::address::PciAddress;
use super::bind::BindReport;
use super::binder::{Binder, Target};
use super::device::{is_pollnic_driver, PciDevice};
use super::error::{Error, Result};
use super::mode::BindMode;
use super::unbind::UnbindReport;

/// `addrs` without repeats (first occurrence kept), and an
/// [`Error::DuplicateAddress`] for each address that was repeated.
fn distinct(addrs: &[PciAddress]) -> (Vec<PciAddress>, Vec<Error>) {
    let mut seen = HashSet::new();
    let mut repeated = HashSet::new();
    let mut unique = Vec::new();
    let mut errors = Vec::new();
    for &addr in addrs {
        if seen.insert(addr) {
            unique.push(addr);
        } else if repeated.insert(addr) {
            errors.push(Error::DuplicateAddress { addr });
        }
    }
    (unique, errors)
}

/// What `unbind_all` found for a port before changing anything.
struct Before {
    addr: PciAddress,
    /// How it was bound to pollnic, if it was (so rolling back means
    /// binding it back that way).
    mode: Option<BindMode>,
    /// Its previous-driver record then.
    recorded: Option<String>,
}

impl Binder<'_> {
    /// Binds every one of `addrs` to vfio-pci behind an IOMMU, or none of
    /// them: [`Binder::bind_all_as`] with [`BindMode::Vfio`].
    ///
    /// # Errors
    /// As [`Binder::bind_all_as`].
    pub fn bind_all(&self, addrs: &[PciAddress]) -> Result<Vec<BindReport>> {
        self.bind_all_as(addrs, BindMode::Vfio)
    }

    /// Every check of [`Binder::bind_all_as`], without changing any port:
    /// each address exists, is a NIC pollnic supports, its IOMMU fits `mode`
    /// (a group for vfio-pci; none, or an untranslated one, for the
    /// no-IOMMU routes), it is not bound to pollnic another way, a
    /// virtio-net port still on virtio-pci offers the features
    /// `Device::open` requires on that route, its record
    /// is readable; no address is repeated; the driver of `mode` is loaded
    /// (its module is loaded here if need be) and, for
    /// [`BindMode::VfioNoIommu`], VFIO offers its no-IOMMU mode. Returns
    /// the addresses without repeats.
    ///
    /// # Errors
    /// [`Error::Refused`] holding every failed check.
    pub fn check_all(&self, addrs: &[PciAddress], mode: BindMode) -> Result<Vec<PciAddress>> {
        let (addrs, mut errors) = distinct(addrs);
        let mut to_change = false;
        for &addr in &addrs {
            if let Some(dev) = self.check_bind(addr, mode, &mut errors) {
                to_change |= BindMode::of(self.sysfs, &dev) != Some(mode);
            }
        }
        if errors.is_empty() && to_change {
            match self.ensure_driver(mode.driver()) {
                Err(e) => errors.push(e),
                Ok(()) if mode == BindMode::VfioNoIommu => {
                    errors.extend(self.check_noiommu().err());
                }
                Ok(()) => {}
            }
        }
        if !errors.is_empty() {
            return Err(Error::Refused { errors });
        }
        Ok(addrs)
    }

    /// Binds every one of `addrs` the way `mode` says, or none of them. All
    /// the addresses are checked first ([`Binder::check_all`]); then each is
    /// bound as by [`Binder::bind_as`], in order. Ports already bound that
    /// way are left as they are and reported with `already_bound`.
    ///
    /// # Errors
    /// - [`Error::Refused`] when a check fails, before any port is changed:
    ///   its `errors` hold an [`Error::DuplicateAddress`] for each repeated
    ///   address, the [`Error::NoSuchDevice`], [`Error::Unsupported`],
    ///   [`Error::NoIommuGroup`], [`Error::IommuPresent`],
    ///   [`Error::BoundOtherWay`], [`Error::VirtioFeaturesMissing`] or
    ///   unreadable-record error of each failing address, [`Error::Modprobe`] when the driver cannot be loaded, or
    ///   [`Error::NoIommuModeUnavailable`].
    /// - [`Error::StepFailed`] when binding a port fails part-way after
    ///   earlier ports were bound: `cause` is that port's error (as
    ///   [`Binder::bind_as`] returns it, so the port itself is rolled back),
    ///   and `recovery` says which earlier ports were returned to their
    ///   previous driver, and what to run for any that could not be.
    /// - That port's error as [`Binder::bind_as`] returns it, when no earlier
    ///   port had been changed.
    pub fn bind_all_as(&self, addrs: &[PciAddress], mode: BindMode) -> Result<Vec<BindReport>> {
        let addrs = self.check_all(addrs, mode)?;
        let mut reports: Vec<BindReport> = Vec::with_capacity(addrs.len());
        for &addr in &addrs {
            match self.bind_as(addr, mode) {
                Ok(report) => reports.push(report),
                Err(cause) => return Err(self.undo_binds(&reports, cause)),
            }
        }
        Ok(reports)
    }

    /// What [`Binder::bind_as`] refuses without changing anything, each
    /// failure appended to `errors`; the device when there is none. A
    /// virtio-net port's features are checked even when its IOMMU does not
    /// fit `mode`, so that a host without an IOMMU also learns what the
    /// device would lack behind one.
    fn check_bind(
        &self,
        addr: PciAddress,
        mode: BindMode,
        errors: &mut Vec<Error>,
    ) -> Option<PciDevice> {
        let dev = match PciDevice::read(self.sysfs, addr) {
            Ok(dev) => dev,
            Err(e) => {
                errors.push(e);
                return None;
            }
        };
        match (self.admit(&dev, mode), self.admit_virtio(&dev, mode)) {
            (Ok(()), Ok(())) => match self.state().recall(addr) {
                Ok(_) => Some(dev),
                Err(e) => {
                    errors.push(e);
                    None
                }
            },
            (admitted, features) => {
                errors.extend(admitted.err());
                errors.extend(features.err());
                None
            }
        }
    }

    /// Returns the ports `bind_all` bound before `cause` to their previous
    /// driver (last first), and says so in the error.
    fn undo_binds(&self, reports: &[BindReport], cause: Error) -> Error {
        let bound: Vec<&BindReport> = reports.iter().filter(|r| !r.already_bound).collect();
        if bound.is_empty() {
            return cause;
        }
        let mut put_back = Vec::new();
        let mut stuck = Vec::new();
        for r in bound.iter().rev() {
            let addr = r.addr;
            let target = match r.previous_driver.as_deref() {
                Some(prev) => Target::Driver(prev),
                None => Target::Unbound,
            };
            let mut done = Vec::new();
            match self.release(addr, target, &mut done) {
                Ok(now) => {
                    // Kept on failure, so that `pollnic unbind` can still restore.
                    let _ = self.state().forget(addr);
                    let on = now.as_deref().unwrap_or("no driver");
                    let as_before = if now == r.previous_driver {
                        " as before"
                    } else {
                        ""
                    };
                    put_back.push(format!(
                        "{addr} ({}) is on {on}{as_before}",
                        done.join(", ")
                    ));
                }
                Err(e) => {
                    let did = if done.is_empty() {
                        "nothing".to_owned()
                    } else {
                        done.join(", ")
                    };
                    stuck.push(format!(
                        "{addr} could not be put back (did: {did}; then: {e}): run \
                         `pollnic unbind {addr}` to retry restoring its previous driver"
                    ));
                }
            }
        }
        put_back.reverse();
        stuck.reverse();
        let mut recovery = String::from("so that no port of this command stays bound, ");
        if !put_back.is_empty() {
            recovery.push_str(&format!(
                "the ports bound before it were put back: {}",
                put_back.join("; ")
            ));
        }
        if !stuck.is_empty() {
            if !put_back.is_empty() {
                recovery.push_str("; but ");
            }
            recovery.push_str(&format!("rollback incomplete: {}", stuck.join("; ")));
        }
        Error::StepFailed {
            cause: Box::new(cause),
            recovery,
        }
    }

    /// Returns every one of `addrs` from vfio-pci or `uio_pci_generic` to
    /// its previous kernel driver, or none of them. All the addresses are checked first (each
    /// exists, is a NIC pollnic supports, its record is readable, the
    /// recorded driver of each port to change is loaded or loadable; no
    /// address is repeated); then each is unbound as by [`Binder::unbind`],
    /// in order, except that a port whose recorded driver does not take it
    /// back is not handed to the kernel's choice: the command fails and is
    /// rolled back instead. A port not on vfio-pci is reported unchanged,
    /// as by [`Binder::unbind`].
    ///
    /// # Errors
    /// - [`Error::Refused`] when a check fails, before any port is changed:
    ///   its `errors` hold an [`Error::DuplicateAddress`] for each repeated
    ///   address, the [`Error::NoSuchDevice`], [`Error::Unsupported`] or
    ///   unreadable-record error of each failing address, or
    ///   [`Error::Modprobe`] when a recorded driver cannot be loaded.
    /// - [`Error::StepFailed`] when unbinding a port fails part-way: `cause`
    ///   is that port's error, and `recovery` says which ports (it and the
    ///   ones before it) were bound back to vfio-pci, and what to run for
    ///   any that could not be.
    /// - That port's error unchanged, when no port had left vfio-pci.
    pub fn unbind_all(&self, addrs: &[PciAddress]) -> Result<Vec<UnbindReport>> {
        let (addrs, mut errors) = distinct(addrs);
        let mut before = Vec::with_capacity(addrs.len());
        let mut drivers: Vec<String> = Vec::new();
        for &addr in &addrs {
            match self.check_unbind(addr) {
                Ok((b, driver)) => {
                    if let Some(d) = driver.filter(|d| !drivers.contains(d)) {
                        drivers.push(d);
                    }
                    before.push(b);
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            // Loaded now, so that a missing module changes no port.
            errors.extend(drivers.iter().filter_map(|d| self.ensure_driver(d).err()));
        }
        if !errors.is_empty() {
            return Err(Error::Refused { errors });
        }

        let mut reports = Vec::with_capacity(before.len());
        for (i, b) in before.iter().enumerate() {
            match self.unbind_with(b.addr, false) {
                Ok(report) => reports.push(report),
                Err(cause) => return Err(self.undo_unbinds(&before[..=i], cause)),
            }
        }
        Ok(reports)
    }

    /// What [`Binder::unbind`] would fail on without changing anything; the
    /// port's state, and the recorded driver it will be returned to, if any.
    fn check_unbind(&self, addr: PciAddress) -> Result<(Before, Option<String>)> {
        let dev = PciDevice::read(self.sysfs, addr)?;
        if !dev.is_supported() {
            return Err(Error::Unsupported {
                addr,
                vendor: dev.vendor,
                device: dev.device,
            });
        }
        let recorded = self.state().recall(addr)?;
        let half_bound = dev.driver.is_none()
            && (dev
                .driver_override
                .as_deref()
                .is_some_and(is_pollnic_driver)
                || recorded.is_some());
        let changes = dev.is_pollnic_bound() || half_bound;
        let target = recorded.clone().filter(|_| changes);
        Ok((
            Before {
                addr,
                mode: BindMode::of(self.sysfs, &dev),
                recorded,
            },
            target,
        ))
    }

    /// Binds the ports of `before` that left vfio-pci or `uio_pci_generic`
    /// back to it (last first), with their records as they were, and says
    /// so in the error.
    fn undo_unbinds(&self, before: &[Before], cause: Error) -> Error {
        let left: Vec<(&Before, BindMode)> = before
            .iter()
            .filter_map(|b| Some((b, b.mode?)))
            .filter(|(b, mode)| {
                self.current_driver(b.addr).ok().flatten().as_deref() != Some(mode.driver())
            })
            .collect();
        if left.is_empty() {
            return cause;
        }
        let state = self.state();
        let mut put_back = Vec::new();
        let mut stuck = Vec::new();
        for (b, mode) in left.iter().rev() {
            let (addr, driver) = (b.addr, mode.driver());
            match self.bind_as(addr, *mode) {
                Ok(_) => {
                    let restored = match &b.recorded {
                        Some(d) => state.record(addr, d),
                        None => state.forget(addr),
                    };
                    match restored {
                        Ok(()) => put_back.push(format!("{addr} on {driver}")),
                        Err(e) => stuck.push(format!(
                            "{addr} is on {driver} again, but its record of the previous driver \
                             could not be restored ({e}): `pollnic unbind {addr}` will return it \
                             to the driver it had just now"
                        )),
                    }
                }
                Err(e) => stuck.push(format!(
                    "{addr} could not be bound back to {driver} ({e}): run `pollnic status`, \
                     then `pollnic unbind {addr}` to finish giving it back or `pollnic bind \
                     {addr}` to retry binding it"
                )),
            }
        }
        put_back.reverse();
        stuck.reverse();
        let mut recovery = String::from("so that no port of this command is left half-done, ");
        if !put_back.is_empty() {
            recovery.push_str(&format!("put back as before: {}", put_back.join(", ")));
        }
        if !stuck.is_empty() {
            if !put_back.is_empty() {
                recovery.push_str("; but ");
            }
            recovery.push_str(&format!("rollback incomplete: {}", stuck.join("; ")));
        }
        Error::StepFailed {
            cause: Box::new(cause),
            recovery,
        }
    }
}
