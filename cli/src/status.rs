//! `pollnic status`: one line per Ethernet function of a vendor pollnic has
//! a family for (Intel; virtio-net).

use pollnic::pci::{link_state, list_nics, BindMode, LinkState, PciDevice, Result, Sysfs};

/// One supported Ethernet function (igb, ixgbe or virtio-net) and its link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicStatus {
    /// What sysfs says about it.
    pub device: PciDevice,
    /// Its link, as far as can be told without touching it.
    pub link: LinkState,
    /// How pollnic can reach it (vfio-pci behind an IOMMU, or a no-IOMMU
    /// route), `None` for a port on a kernel driver or on none.
    pub mode: Option<BindMode>,
}

/// Every supported Ethernet function (igb, ixgbe, virtio-net) with its link state, sorted by address.
///
/// # Errors
/// As [`pollnic::pci::list_nics`].
pub fn status(sysfs: &Sysfs) -> Result<Vec<NicStatus>> {
    Ok(list_nics(sysfs)?
        .into_iter()
        .map(|device| NicStatus {
            link: link_state(sysfs, &device),
            mode: BindMode::of(sysfs, &device),
            device,
        })
        .collect())
}

/// Text shown when [`status`] finds nothing.
pub const NO_NICS_MESSAGE: &str = "no supported Ethernet device found under /sys/bus/pci/devices \
(Intel 82576, I350 or 82599: vendor 0x8086; modern virtio-net: 1af4:1041); \
check `lspci -D -nn | grep -i ethernet` and that the NIC is seated / passed through to this machine. No NIC at hand? In a clone of the pollnic repository, `cargo xtask demo` boots \
the QEMU testbed, whose emulated 82576 ports pollnic drives";

/// Formats [`status`] as an aligned table with a header line; columns:
/// address, device, family (`igb`, `ixgbe`, `virtio-net`; `-` for a
/// device pollnic does not drive), driver, DMA (the way in: `vfio (iommu)`,
/// `vfio (no-iommu)`, `uio (no-iommu)`, `-` for a kernel-driven port), IOMMU
/// group (`noiommu-<N>` for one VFIO made up in no-IOMMU mode), link,
/// kernel interface.
pub fn format_status(rows: &[NicStatus]) -> String {
    let header = [
        "ADDRESS",
        "DEVICE",
        "FAMILY",
        "DRIVER",
        "DMA",
        "IOMMU GROUP",
        "LINK",
        "INTERFACE",
    ]
    .map(String::from);
    let mut table = vec![header];
    table.extend(rows.iter().map(row));
    let widths: Vec<usize> = (0..8)
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

fn row(s: &NicStatus) -> [String; 8] {
    let d = &s.device;
    let group = match (d.iommu_group, s.mode) {
        (Some(g), Some(BindMode::VfioNoIommu)) => format!("noiommu-{g}"),
        (Some(g), _) => g.to_string(),
        (None, _) => "none — IOMMU off?".to_owned(),
    };
    let ifaces = if d.interfaces.is_empty() {
        "-".to_owned()
    } else {
        d.interfaces.join(",")
    };
    [
        d.addr.to_string(),
        d.name(),
        d.family().map_or("-", |f| f.name()).to_owned(),
        d.driver.clone().unwrap_or_else(|| "none".to_owned()),
        s.mode.map_or_else(|| "-".to_owned(), |m| m.to_string()),
        group,
        s.link.to_string(),
        ifaces,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        addr: &str,
        id: u16,
        driver: Option<&str>,
        group: Option<u32>,
        link: LinkState,
    ) -> NicStatus {
        NicStatus {
            device: PciDevice {
                addr: addr.parse().unwrap(),
                vendor: 0x8086,
                device: id,
                class: 0x020000,
                model: pollnic::pci::lookup(0x8086, id),
                driver: driver.map(str::to_owned),
                driver_override: None,
                iommu_group: group,
                interfaces: if driver == Some("igb") {
                    vec!["eth0".into()]
                } else {
                    vec![]
                },
                numa_node: None,
            },
            link,
            mode: match driver {
                Some("vfio-pci") => Some(BindMode::Vfio),
                Some("uio_pci_generic") => Some(BindMode::Uio),
                _ => None,
            },
        }
    }

    #[test]
    fn the_table_has_a_header_and_aligned_columns() {
        let rows = [
            row(
                "0000:00:08.0",
                0x10C9,
                Some("igb"),
                Some(5),
                LinkState::Up {
                    speed_mbps: Some(1000),
                },
            ),
            row(
                "0000:01:00.0",
                0x10FB,
                Some("vfio-pci"),
                Some(12),
                LinkState::Down,
            ),
            row(
                "0000:01:00.1",
                0x10FB,
                None,
                None,
                LinkState::Unknown("memory decode off".into()),
            ),
            row(
                "0000:01:00.2",
                0x10FB,
                Some("uio_pci_generic"),
                None,
                LinkState::Down,
            ),
        ];
        let text = format_status(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[0].starts_with("ADDRESS ") && lines[0].ends_with("INTERFACE"),
            "{text}"
        );
        let cols = |l: &str| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            cols(lines[1]),
            [
                "0000:00:08.0",
                "82576 Gigabit Network Connection",
                "igb",
                "igb",
                "-",
                "5",
                "up 1000 Mb/s",
                "eth0"
            ]
        );
        assert_eq!(
            cols(lines[2]),
            [
                "0000:01:00.0",
                "82599ES 10-Gigabit SFI/SFP+ Network Connection",
                "ixgbe",
                "vfio-pci",
                "vfio (iommu)",
                "12",
                "down",
                "-"
            ]
        );
        assert_eq!(
            cols(lines[3])[3..7],
            [
                "none",
                "-",
                "none — IOMMU off?",
                "unknown (memory decode off)"
            ]
        );
        assert_eq!(
            cols(lines[4])[3..6],
            ["uio_pci_generic", "uio (no-iommu)", "none — IOMMU off?"]
        );
        let mut noiommu = rows[1].clone();
        noiommu.mode = Some(BindMode::VfioNoIommu);
        noiommu.device.iommu_group = Some(0);
        let text = format_status(&[noiommu]);
        let line = text.lines().nth(1).unwrap();
        assert_eq!(
            cols(line)[3..6],
            ["vfio-pci", "vfio (no-iommu)", "noiommu-0"]
        );
        let at = |l: &str| {
            l.find("FAMILY")
                .or_else(|| l.find("igb"))
                .or_else(|| l.find("ixgbe"))
        };
        assert_eq!(at(lines[0]), at(lines[1]));
        assert_eq!(at(lines[1]), at(lines[2]));
        assert_eq!(lines[0].find("DRIVER"), lines[2].find("vfio-pci"));
        assert_eq!(lines[0].find("DMA"), lines[2].find("vfio (iommu)"));
    }
}
