//! A first-contact check for a port on real hardware: the registers that
//! say how a board is wired and what state it was left in (82599: ESDP,
//! AUTOC, AUTOC2, LINKS, FWSM, MCSTCTRL, MTA, RAR), read once before
//! pollnic touches the device and once after its reset and bring-up. It
//! writes nothing beyond the bring-up itself (the reads are of registers
//! that do not clear on read), and the port is shut down again before it
//! returns.

use crate::config::DeviceConfig;
use crate::device::{check_family, Device, DeviceIdent};
use crate::error::Result;
use crate::family::LinkStatus;
use crate::lowlevel::io::DeviceIo;
use crate::pci::PciAddress;

/// One register, as found and as left by the bring-up. Non-exhaustive:
/// read by [`selfcheck`], not built by callers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisterRead {
    /// Datasheet name, e.g. "ESDP", "MTA(3)", "RAH(1)".
    pub name: String,
    /// Byte offset in BAR 0.
    pub offset: u32,
    /// Value before pollnic's reset (as the previous driver, or vfio-pci's
    /// function reset on open, left it).
    pub before: u32,
    /// Value after pollnic's reset and bring-up.
    pub after: u32,
}

/// What [`selfcheck`] found. Non-exhaustive (fields come as families
/// gain checks): made by [`selfcheck`], not by callers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SelfCheck {
    /// The port.
    pub addr: PciAddress,
    /// Its name (`lspci`'s).
    pub name: String,
    /// Its PCI device ID.
    pub device: u16,
    /// The back end ("igb", "ixgbe").
    pub family: &'static str,
    /// The link once bring-up finished.
    pub link: LinkStatus,
    /// The flow control mode read back after bring-up ([`Device::flow_control`]).
    pub flow_control: crate::config::FlowControl,
    /// The I350's EEE and DMA coalescing as the port was found, before the
    /// reset (what its previous owner left: Linux igb turns both on).
    pub power_saving_before: crate::config::PowerSaving,
    /// The same after bring-up ([`Device::power_saving`]): what
    /// [`DeviceConfig::power_saving`] asked.
    pub power_saving: crate::config::PowerSaving,
    /// The registers, in the family's order (empty for a family without a
    /// list).
    pub registers: Vec<RegisterRead>,
}

/// Open `addr` with `cfg` as [`Device::open`] does, reading the family's
/// check registers before the reset and after the bring-up, then shut the
/// port down.
///
/// # Errors
/// Those of [`Device::open`] (the port must be bound to vfio-pci).
pub fn selfcheck(addr: PciAddress, cfg: &DeviceConfig) -> Result<SelfCheck> {
    let (io, ident) = Device::open_io(addr, cfg)?;
    selfcheck_on(io, ident, cfg)
}

/// [`selfcheck`] over any [`DeviceIo`], e.g. the software 82599.
///
/// # Errors
/// Those of [`Device::open_on`].
pub fn selfcheck_on(
    io: Box<dyn DeviceIo>,
    ident: DeviceIdent,
    cfg: &DeviceConfig,
) -> Result<SelfCheck> {
    cfg.validate()?;
    let family = check_family(&ident, cfg)?;
    let list = family.selfcheck_registers();
    let bar = io.bar0();
    let before: Vec<u32> = list.iter().map(|(_, o)| bar.regs().read32(*o)).collect();
    let (addr, name, device) = (ident.addr, ident.name.clone(), ident.device);
    let power_saving_before = match family.desc() {
        Some(desc) => desc.power_saving(bar.regs(), device),
        None => crate::config::PowerSaving::OFF,
    };
    let dev = Device::open_on(io, ident, cfg)?;
    let after: Vec<u32> = list.iter().map(|(_, o)| bar.regs().read32(*o)).collect();
    let link = dev.link();
    let flow_control = dev.flow_control();
    let power_saving = dev.power_saving();
    drop(dev);
    Ok(SelfCheck {
        addr,
        name,
        device,
        family: family.name(),
        link,
        flow_control,
        power_saving_before,
        power_saving,
        registers: list
            .into_iter()
            .zip(before.into_iter().zip(after))
            .map(|((name, offset), (before, after))| RegisterRead {
                name,
                offset,
                before,
                after,
            })
            .collect(),
    })
}
