//! The guard in front of `pollnic bind`: binding a port to vfio-pci takes
//! its kernel interface away, with its addresses and routes, and a port whose
//! IOMMU group holds a device still in use by another kernel driver cannot
//! be opened through VFIO anyway. So, unless `--force`, `bind` refuses
//!
//! - a port whose kernel interface is up and has an address (IPv4, or IPv6
//!   other than link-local) or a route (as `dpdk-devbind.py` refuses an
//!   "Active" interface, one that appears in `ip route`);
//! - a port whose IOMMU group holds another device bound to a driver other
//!   than vfio-pci, pci-stub or pcieport, unless that device is being bound
//!   in the same command.
//!
//! The decision ([`check`]) is a pure function over facts gathered once
//! ([`gather`]), like `pollnic doctor`, so it is unit-tested on made-up
//! hosts. Addresses come from `getifaddrs(3)`, routes from
//! `/proc/net/route` and `/proc/net/ipv6_route` (`proc(5)`), the up flag
//! from `/sys/class/net/<if>/flags` (`IFF_UP`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use std::path::Path;

use pollnic::pci::{PciAddress, PciDevice, Sysfs, VFIO_PCI};

/// Drivers that may share an IOMMU group with a VFIO device (as in
/// `bind.rs`): vfio-pci itself, `pci-stub`, PCIe port services on bridges.
const GROUP_FRIENDLY_DRIVERS: &[&str] = &[VFIO_PCI, "pci-stub", "pcieport"];

/// `IFF_UP` (`include/uapi/linux/if.h`).
const IFF_UP: u32 = 0x1;

/// What is known about one kernel interface of the port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterfaceFacts {
    /// Interface name, e.g. `enp3s0f0`.
    pub name: String,
    /// `IFF_UP` set (administratively up).
    pub up: bool,
    /// Its addresses with prefix length, e.g. `10.0.0.1/24`
    /// (IPv6 link-local ones left out: every up interface has one).
    pub addresses: Vec<String>,
    /// Routes through it, e.g. `10.0.0.0/24` (IPv6 link-local and
    /// multicast routes left out: the kernel adds them to every up interface).
    pub routes: Vec<String>,
}

/// Another device in the port's IOMMU group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    /// Its address.
    pub addr: PciAddress,
    /// Its driver, if bound.
    pub driver: Option<String>,
}

/// Everything [`check`] decides on, for one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindFacts {
    /// The port.
    pub addr: PciAddress,
    /// Its kernel interfaces (none when it is not on a network driver).
    pub interfaces: Vec<InterfaceFacts>,
    /// Its IOMMU group, if any.
    pub group: Option<u32>,
    /// The other devices of that group.
    pub members: Vec<GroupMember>,
}

/// Why `bind` refuses a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The port's kernel interface is up with addresses or routes.
    ActiveInterface {
        /// The port.
        addr: PciAddress,
        /// The interface.
        name: String,
        /// Its addresses.
        addresses: Vec<String>,
        /// Its routes.
        routes: Vec<String>,
    },
    /// Another member of the port's IOMMU group is bound to a kernel driver.
    GroupInUse {
        /// The port.
        addr: PciAddress,
        /// The IOMMU group.
        group: u32,
        /// The member.
        member: PciAddress,
        /// Its driver.
        driver: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ActiveInterface {
                addr,
                name,
                addresses,
                routes,
            } => {
                let mut what = Vec::new();
                if !addresses.is_empty() {
                    what.push(format!("address {}", addresses.join(", ")));
                }
                if !routes.is_empty() {
                    what.push(format!("route {}", routes.join(", ")));
                }
                write!(
                    f,
                    "{addr}: refusing to bind: its kernel interface {name} is up with {}; \
                     binding removes {name} and cuts off whatever uses it. Take it down first \
                     (`sudo ip addr flush dev {name} && sudo ip link set {name} down`), \
                     or run `pollnic bind --force {addr}`",
                    what.join(" and ")
                )
            }
            Refusal::GroupInUse {
                addr,
                group,
                member,
                driver,
            } => write!(
                f,
                "{addr}: refusing to bind: IOMMU group {group} also holds {member}, in use by \
                 the kernel driver {driver}; VFIO cannot open the group while it is. Bind both \
                 (`sudo pollnic bind {addr} {member}`), unbind {member} from {driver} \
                 (`echo {member} | sudo tee /sys/bus/pci/devices/{member}/driver/unbind`), \
                 or run `pollnic bind --force {addr}`"
            ),
        }
    }
}

/// Why `bind` refuses `facts.addr`, if it does, given that the ports in
/// `binding` are bound by the same command (so they do not count as in use).
pub fn check(facts: &BindFacts, binding: &[PciAddress]) -> Vec<Refusal> {
    let mut out = Vec::new();
    for i in &facts.interfaces {
        if i.up && (!i.addresses.is_empty() || !i.routes.is_empty()) {
            out.push(Refusal::ActiveInterface {
                addr: facts.addr,
                name: i.name.clone(),
                addresses: i.addresses.clone(),
                routes: i.routes.clone(),
            });
        }
    }
    if let Some(group) = facts.group {
        for m in &facts.members {
            let Some(driver) = &m.driver else { continue };
            if m.addr == facts.addr
                || binding.contains(&m.addr)
                || GROUP_FRIENDLY_DRIVERS.contains(&driver.as_str())
            {
                continue;
            }
            out.push(Refusal::GroupInUse {
                addr: facts.addr,
                group,
                member: m.addr,
                driver: driver.clone(),
            });
        }
    }
    out
}

/// The routes of `/proc/net/route` (IPv4, main table) by interface:
/// `(interface, "dest/prefix")`, the default route as `default`.
pub fn parse_ipv4_routes(text: &str) -> Vec<(String, String)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
            let (iface, dest, mask) = (f.first()?, f.get(1)?, f.get(7)?);
            let dest = Ipv4Addr::from(u32::from_str_radix(dest, 16).ok()?.swap_bytes());
            let mask = u32::from_str_radix(mask, 16).ok()?.swap_bytes();
            let route = if mask == 0 {
                "default".to_owned()
            } else {
                format!("{dest}/{}", mask.count_ones())
            };
            Some((iface.to_string(), route))
        })
        .collect()
}

/// The routes of `/proc/net/ipv6_route` by interface, `(interface,
/// "dest/prefix")`, without link-local (fe80::/10) and multicast (ff00::/8)
/// destinations.
pub fn parse_ipv6_routes(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            // dest destlen src srclen nexthop metric refcnt use flags iface
            let f: Vec<&str> = l.split_whitespace().collect();
            let (dest, len, iface) = (f.first()?, f.get(1)?, f.get(9)?);
            let dest = Ipv6Addr::from(u128::from_str_radix(dest, 16).ok()?);
            let len = u8::from_str_radix(len, 16).ok()?;
            if is_link_local_v6(&dest) || dest.segments()[0] & 0xff00 == 0xff00 {
                return None;
            }
            let route = if len == 0 {
                "default (IPv6)".to_owned()
            } else {
                format!("{dest}/{len}")
            };
            Some((iface.to_string(), route))
        })
        .collect()
}

fn is_link_local_v6(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// Whether an address counts as "configured": every IPv4 address, IPv6
/// addresses except link-local ones.
pub fn counts_as_configured(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(_) => true,
        IpAddr::V6(v6) => !is_link_local_v6(v6),
    }
}

/// Gather the facts for `dev` on the running system (sysfs under `sysfs`,
/// addresses from `getifaddrs`, routes from `/proc/net`). What cannot be
/// read counts as absent.
pub fn gather(sysfs: &Sysfs, dev: &PciDevice) -> BindFacts {
    let mut routes = Vec::new();
    if let Ok(t) = std::fs::read_to_string("/proc/net/route") {
        routes.extend(parse_ipv4_routes(&t));
    }
    if let Ok(t) = std::fs::read_to_string("/proc/net/ipv6_route") {
        routes.extend(parse_ipv6_routes(&t));
    }
    let addrs: Vec<(String, String)> = match nix::ifaddrs::getifaddrs() {
        Ok(list) => list
            .filter_map(|ifa| {
                let sa = ifa.address?;
                let ip: IpAddr = if let Some(v4) = sa.as_sockaddr_in() {
                    IpAddr::V4(v4.ip())
                } else {
                    IpAddr::V6(sa.as_sockaddr_in6()?.ip())
                };
                if !counts_as_configured(&ip) {
                    return None;
                }
                let prefix = ifa.netmask.and_then(|m| {
                    m.as_sockaddr_in()
                        .map(|v4| u32::from(v4.ip()).count_ones())
                        .or_else(|| {
                            m.as_sockaddr_in6()
                                .map(|v6| u128::from(v6.ip()).count_ones())
                        })
                });
                let text = match prefix {
                    Some(p) => format!("{ip}/{p}"),
                    None => ip.to_string(),
                };
                Some((ifa.interface_name, text))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let interfaces = dev
        .interfaces
        .iter()
        .map(|name| InterfaceFacts {
            name: name.clone(),
            up: read_hex(&sysfs.net_dir(name).join("flags")).is_some_and(|f| f & IFF_UP != 0),
            addresses: addrs
                .iter()
                .filter(|(i, _)| i == name)
                .map(|(_, a)| a.clone())
                .collect(),
            routes: routes
                .iter()
                .filter(|(i, _)| i == name)
                .map(|(_, r)| r.clone())
                .collect(),
        })
        .collect();
    let members = dev
        .iommu_group
        .map(|g| dir_names(&sysfs.iommu_group_devices(g)))
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.parse::<PciAddress>().ok())
        .filter(|&m| m != dev.addr)
        .map(|m| GroupMember {
            addr: m,
            driver: std::fs::read_link(sysfs.device_dir(m).join("driver"))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
        })
        .collect();
    BindFacts {
        addr: dev.addr,
        interfaces,
        group: dev.iommu_group,
        members,
    }
}

/// Why `pollnic bind` would refuse each of `addrs` (bound together in one
/// command) on the running system. A port that cannot be read is left to
/// [`pollnic::pci::bind_vfio_all`] to report.
pub fn refusals(sysfs: &Sysfs, addrs: &[PciAddress]) -> Vec<Refusal> {
    addrs
        .iter()
        .filter_map(|&a| PciDevice::read(sysfs, a).ok())
        .flat_map(|dev| check(&gather(sysfs, &dev), addrs))
        .collect()
}

/// A `0x`-prefixed hex attribute (`flags`), `None` when absent or not hex.
fn read_hex(path: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    u32::from_str_radix(text.strip_prefix("0x").unwrap_or(text), 16).ok()
}

/// Entry names of directory `path`; empty when it cannot be read.
fn dir_names(path: &Path) -> Vec<String> {
    std::fs::read_dir(path)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> PciAddress {
        s.parse().unwrap()
    }

    fn port(interfaces: Vec<InterfaceFacts>, members: Vec<GroupMember>) -> BindFacts {
        BindFacts {
            addr: a("0000:03:00.0"),
            interfaces,
            group: Some(7),
            members,
        }
    }

    fn iface(up: bool, addresses: &[&str], routes: &[&str]) -> InterfaceFacts {
        InterfaceFacts {
            name: "enp3s0f0".into(),
            up,
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            routes: routes.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn an_idle_port_alone_in_its_group_is_bound() {
        assert!(check(&port(vec![], vec![]), &[]).is_empty());
        // Up without an address or route (e.g. only a link-local address): fine.
        assert!(check(&port(vec![iface(true, &[], &[])], vec![]), &[]).is_empty());
        // An address on a down interface carries no traffic: fine.
        assert!(check(
            &port(vec![iface(false, &["10.0.0.1/24"], &[])], vec![]),
            &[]
        )
        .is_empty());
    }

    #[test]
    fn an_interface_up_with_an_address_or_route_is_refused_and_named() {
        let r = check(
            &port(
                vec![iface(true, &["10.0.0.1/24"], &["10.0.0.0/24"])],
                vec![],
            ),
            &[],
        );
        assert_eq!(r.len(), 1);
        let msg = r[0].to_string();
        assert!(msg.starts_with("0000:03:00.0: refusing to bind: its kernel interface enp3s0f0 is up with address 10.0.0.1/24 and route 10.0.0.0/24"), "{msg}");
        assert!(
            msg.contains("sudo ip addr flush dev enp3s0f0 && sudo ip link set enp3s0f0 down"),
            "{msg}"
        );
        assert!(msg.contains("pollnic bind --force 0000:03:00.0"), "{msg}");
        let r = check(&port(vec![iface(true, &[], &["default"])], vec![]), &[]);
        assert!(
            r[0].to_string().contains("is up with route default;"),
            "{}",
            r[0]
        );
    }

    #[test]
    fn a_group_member_on_a_kernel_driver_is_refused_unless_bound_along() {
        let member = |s: &str, d: Option<&str>| GroupMember {
            addr: a(s),
            driver: d.map(str::to_owned),
        };
        let members = vec![
            member("0000:00:04.0", Some("pcieport")),
            member("0000:03:00.1", Some("igb")),
            member("0000:03:00.2", None),
            member("0000:03:00.3", Some("vfio-pci")),
        ];
        let f = port(vec![], members);
        let r = check(&f, &[f.addr]);
        assert_eq!(r.len(), 1, "{r:?}");
        let msg = r[0].to_string();
        assert!(
            msg.contains("IOMMU group 7 also holds 0000:03:00.1, in use by the kernel driver igb"),
            "{msg}"
        );
        assert!(
            msg.contains("sudo pollnic bind 0000:03:00.0 0000:03:00.1"),
            "{msg}"
        );
        assert!(msg.contains("--force"), "{msg}");
        // Bound by the same command: no longer in use afterwards.
        assert!(check(&f, &[f.addr, a("0000:03:00.1")]).is_empty());
    }

    #[test]
    fn proc_net_route_parses() {
        let t =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                 eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                 eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(
            parse_ipv4_routes(t),
            vec![
                ("eth0".to_string(), "default".to_string()),
                ("eth0".to_string(), "192.168.1.0/24".to_string())
            ]
        );
    }

    #[test]
    fn proc_net_ipv6_route_parses_without_link_local_and_multicast() {
        let z = "00000000000000000000000000000000";
        let t = format!(
            "fe800000000000000000000000000000 40 {z} 00 {z} 00000100 00000001 00000000 00000001 eth0\n\
             ff000000000000000000000000000000 08 {z} 00 {z} 00000100 00000001 00000000 00000001 eth0\n\
             20010db8000000000000000000000000 40 {z} 00 {z} 00000100 00000001 00000000 00000001 eth1\n"
        );
        assert_eq!(
            parse_ipv6_routes(&t),
            vec![("eth1".to_string(), "2001:db8::/64".to_string())]
        );
        assert!(!counts_as_configured(&"fe80::1".parse().unwrap()));
        assert!(counts_as_configured(&"2001:db8::1".parse().unwrap()));
        assert!(counts_as_configured(&"10.1.2.3".parse().unwrap()));
    }
}
