//! `pollnic status`: one line per Intel Ethernet function.

use super::device::{list_intel_nics_in, PciDevice};
use super::error::Result;
use super::link::{link_state, LinkState};
use super::sysfs::Sysfs;
use crate::family::{FamilyInfo, FAMILIES};

/// One Intel Ethernet function and its link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicStatus {
    /// What sysfs says about it.
    pub device: PciDevice,
    /// Its link, as far as can be told without touching it.
    pub link: LinkState,
}

/// Every Intel Ethernet function with its link state, sorted by address.
///
/// # Errors
/// As [`super::list_intel_nics`].
pub fn status(sysfs: &Sysfs) -> Result<Vec<NicStatus>> {
    status_in(sysfs, FAMILIES)
}

/// [`status`], with models looked up among `families` instead of the families pollnic drives.
///
/// # Errors
/// As [`super::list_intel_nics`].
pub fn status_in(sysfs: &Sysfs, families: &[FamilyInfo]) -> Result<Vec<NicStatus>> {
    Ok(list_intel_nics_in(sysfs, families)?
        .into_iter()
        .map(|device| NicStatus {
            link: link_state(sysfs, &device),
            device,
        })
        .collect())
}

/// Text shown when [`status`] finds nothing.
pub const NO_NICS_MESSAGE: &str = "no Intel Ethernet devices found (vendor 0x8086, class 0x0200) \
under /sys/bus/pci/devices; check `lspci -D -d 8086:` and that the NIC is seated / passed through \
to this machine";

/// Formats [`status`] as an aligned table with a header line; columns:
/// address, device, driver, IOMMU group, link, kernel interface.
pub fn format_status(rows: &[NicStatus]) -> String {
    let header = [
        "ADDRESS",
        "DEVICE",
        "DRIVER",
        "IOMMU GROUP",
        "LINK",
        "INTERFACE",
    ]
    .map(String::from);
    let mut table = vec![header];
    table.extend(rows.iter().map(row));
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &table {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            let pad = widths[c] - cell.chars().count();
            line.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn row(s: &NicStatus) -> [String; 6] {
    let d = &s.device;
    let group = match d.iommu_group {
        Some(g) => g.to_string(),
        None => "none — IOMMU off?".to_owned(),
    };
    let ifaces = if d.interfaces.is_empty() {
        "-".to_owned()
    } else {
        d.interfaces.join(",")
    };
    [
        d.address.to_string(),
        d.name(),
        d.driver.clone().unwrap_or_else(|| "none".to_owned()),
        group,
        s.link.to_string(),
        ifaces,
    ]
}
