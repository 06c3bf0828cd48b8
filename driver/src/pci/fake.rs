//! A fake sysfs tree in a temp dir, and a fake kernel that reacts to sysfs
//! writes the way Linux does (for the handful of attributes bind/unbind use).

use std::cell::{Cell, RefCell};
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::Duration;

use super::address::PciAddress;
use super::binder::BindOptions;
use super::device::{UIO_PCI_GENERIC, VFIO_PCI};
use super::ids;
use super::kernel::Kernel;
use super::mode::VFIO_NOIOMMU_GROUP_NAME;
use super::sysfs::Sysfs;

/// One fake PCI function.
pub(crate) struct Dev<'a> {
    pub addr: &'a str,
    pub vendor: u16,
    pub device: u16,
    pub class: u32,
    pub driver: Option<&'a str>,
    pub group: Option<u32>,
    pub ifname: Option<&'a str>,
    /// PCI command register (bit 1: memory decode).
    pub command: u16,
}

impl Dev<'_> {
    /// An Intel Ethernet function with memory decode on and no driver/group.
    pub fn nic(addr: &str, device: u16) -> Dev<'_> {
        Dev {
            addr,
            vendor: 0x8086,
            device,
            class: 0x020000,
            driver: None,
            group: None,
            ifname: None,
            command: 0x0406,
        }
    }
}

/// Fake `/sys`, `/run/pollnic`, `/dev/vfio` and kernel.
pub(crate) struct FakeSys {
    _tmp: tempfile::TempDir,
    pub sysfs: Sysfs,
    pub options: BindOptions,
    /// Every `write_attr` as `path-relative-to-sysfs=value`.
    pub log: RefCell<Vec<String>>,
    /// Writes to a path ending with `.0` fail with errno `.1`.
    pub fail: RefCell<Option<(String, i32)>>,
    /// Writes whose log entry `path=value` ends with `.0` fail with errno
    /// `.1` (to fail a write for one device only, e.g.
    /// `drivers_probe=0000:00:1e.0`).
    pub fail_entry: RefCell<Option<(String, i32)>>,
    pub modprobed: RefCell<Vec<String>>,
    pub modprobe_fails: Cell<bool>,
    /// Whether vfio creates `/dev/vfio/<group>` when a device binds.
    pub make_vfio_nodes: Cell<bool>,
    /// Whether vfio-pci's probe rejects devices.
    pub vfio_probe_fails: Cell<bool>,
    /// Whether the vfio module was built with `CONFIG_VFIO_NOIOMMU`: loading
    /// vfio-pci then makes `module/vfio/parameters/enable_unsafe_noiommu_mode`.
    pub vfio_noiommu_capable: Cell<bool>,
    /// Whether uio creates `<device>/uio/uio<N>` and `/dev/uio<N>` when a
    /// device binds to uio_pci_generic.
    pub make_uio_nodes: Cell<bool>,
}

fn errno(n: i32) -> io::Error {
    io::Error::from_raw_os_error(n)
}

impl FakeSys {
    /// A tree with the igb and ixgbe drivers registered, vfio-pci not loaded.
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("sys");
        fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
        fs::write(root.join("bus/pci/drivers_probe"), "").unwrap();
        fs::create_dir_all(tmp.path().join("dev/vfio")).unwrap();
        let options = BindOptions {
            state_dir: tmp.path().join("run/pollnic"),
            dev_vfio: tmp.path().join("dev/vfio"),
            dev_uio: tmp.path().join("dev"),
            timeout: Duration::from_millis(50),
        };
        let fake = Self {
            sysfs: Sysfs::new(root),
            options,
            _tmp: tmp,
            log: RefCell::default(),
            fail: RefCell::default(),
            fail_entry: RefCell::default(),
            modprobed: RefCell::default(),
            modprobe_fails: Cell::new(false),
            make_vfio_nodes: Cell::new(true),
            vfio_probe_fails: Cell::new(false),
            vfio_noiommu_capable: Cell::new(false),
            make_uio_nodes: Cell::new(true),
        };
        fake.add_driver("igb");
        fake.add_driver("ixgbe");
        fake
    }

    pub fn add_driver(&self, name: &str) {
        let dir = self.sysfs.driver_dir(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("bind"), "").unwrap();
        fs::write(dir.join("unbind"), "").unwrap();
    }

    pub fn add(&self, d: Dev<'_>) -> PciAddress {
        let addr: PciAddress = d.addr.parse().unwrap();
        let dir = self.sysfs.device_dir(addr);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("vendor"), format!("0x{:04x}\n", d.vendor)).unwrap();
        fs::write(dir.join("device"), format!("0x{:04x}\n", d.device)).unwrap();
        fs::write(dir.join("class"), format!("0x{:06x}\n", d.class)).unwrap();
        fs::write(dir.join("numa_node"), "-1\n").unwrap();
        fs::write(dir.join("driver_override"), "(null)\n").unwrap();
        let mut config = vec![0u8; 64];
        config[0..2].copy_from_slice(&d.vendor.to_le_bytes());
        config[2..4].copy_from_slice(&d.device.to_le_bytes());
        config[4..6].copy_from_slice(&d.command.to_le_bytes());
        fs::write(dir.join("config"), config).unwrap();
        fs::write(dir.join("resource0"), vec![0u8; 0x43000]).unwrap();
        if let Some(g) = d.group {
            let gdir = self
                .sysfs
                .root
                .join(format!("kernel/iommu_groups/{g}/devices"));
            fs::create_dir_all(&gdir).unwrap();
            symlink(
                format!("../../../kernel/iommu_groups/{g}"),
                dir.join("iommu_group"),
            )
            .unwrap();
            symlink(
                format!("../../../../bus/pci/devices/{addr}"),
                gdir.join(addr.to_string()),
            )
            .unwrap();
        }
        if let Some(ifname) = d.ifname {
            fs::create_dir_all(dir.join("net").join(ifname)).unwrap();
            let net = self.sysfs.net_dir(ifname);
            fs::create_dir_all(&net).unwrap();
            fs::write(net.join("carrier"), "0\n").unwrap();
            fs::write(net.join("speed"), "-1\n").unwrap();
            fs::write(net.join("flags"), "0x1003\n").unwrap();
        }
        self.set_driver(addr, d.driver);
        addr
    }

    /// Binds/unbinds like the driver core: the `driver` link, for vfio-pci
    /// the group node (and in no-IOMMU mode the made-up group), for
    /// uio_pci_generic `<device>/uio/uio<N>` and `/dev/uio<N>`.
    pub fn set_driver(&self, addr: PciAddress, driver: Option<&str>) {
        let dir = self.sysfs.device_dir(addr);
        let link = dir.join("driver");
        if let Some(old) = self.driver_of(addr) {
            fs::remove_file(&link).unwrap();
            if old == VFIO_PCI {
                if let Some(node) = self.vfio_node(addr) {
                    let _ = fs::remove_file(node);
                }
                if let Some(g) = self.noiommu_group(addr) {
                    // VFIO frees the group it made up when the device goes.
                    fs::remove_file(dir.join("iommu_group")).unwrap();
                    fs::remove_dir_all(self.sysfs.iommu_group_dir(g)).unwrap();
                }
            }
            if old == UIO_PCI_GENERIC {
                for n in fs::read_dir(dir.join("uio"))
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let _ = fs::remove_file(self.options.dev_uio.join(n.file_name()));
                }
                let _ = fs::remove_dir_all(dir.join("uio"));
            }
        }
        if let Some(d) = driver {
            symlink(format!("../../drivers/{d}"), &link).unwrap();
            if d == VFIO_PCI && self.make_vfio_nodes.get() {
                if let Some(node) = self.vfio_node(addr) {
                    fs::write(node, "").unwrap();
                }
            }
            if d == UIO_PCI_GENERIC && self.make_uio_nodes.get() {
                let n = (0..)
                    .find(|n| !self.options.dev_uio.join(format!("uio{n}")).exists())
                    .unwrap();
                fs::create_dir_all(dir.join(format!("uio/uio{n}"))).unwrap();
                fs::write(self.options.dev_uio.join(format!("uio{n}")), "").unwrap();
            }
        }
    }

    /// The group VFIO made up for `addr` in no-IOMMU mode, if it is in one.
    pub fn noiommu_group(&self, addr: PciAddress) -> Option<u32> {
        let link = fs::read_link(self.sysfs.device_dir(addr).join("iommu_group")).ok()?;
        let g: u32 = link.file_name()?.to_str()?.parse().ok()?;
        let name = fs::read_to_string(self.sysfs.iommu_group_dir(g).join("name")).ok()?;
        (name.trim() == VFIO_NOIOMMU_GROUP_NAME).then_some(g)
    }

    /// `/dev/vfio/<group>`, or `/dev/vfio/noiommu-<group>`.
    pub fn vfio_node(&self, addr: PciAddress) -> Option<PathBuf> {
        if let Some(g) = self.noiommu_group(addr) {
            return Some(self.options.dev_vfio.join(format!("noiommu-{g}")));
        }
        let link = fs::read_link(self.sysfs.device_dir(addr).join("iommu_group")).ok()?;
        Some(self.options.dev_vfio.join(link.file_name()?))
    }

    /// Gives IOMMU group `g` a `type` attribute (`DMA`, `identity`, ...).
    pub fn set_group_type(&self, g: u32, t: &str) {
        fs::write(self.sysfs.iommu_group_dir(g).join("type"), format!("{t}\n")).unwrap();
    }

    /// `enable_unsafe_noiommu_mode` as the kernel shows it (`Y`/`N`), if present.
    pub fn noiommu_param(&self) -> Option<String> {
        fs::read_to_string(self.sysfs.vfio_noiommu_param())
            .ok()
            .map(|s| s.trim().to_owned())
    }

    /// vfio-pci's probe of a device with no IOMMU group: in no-IOMMU mode,
    /// VFIO makes up a group for it (`vfio_noiommu_group_alloc`).
    fn make_noiommu_group(&self, addr: PciAddress) -> bool {
        if !matches!(self.noiommu_param().as_deref(), Some("Y" | "1")) {
            return false;
        }
        let groups = self.sysfs.root.join("kernel/iommu_groups");
        let g = (0u32..)
            .find(|g| !groups.join(g.to_string()).exists())
            .unwrap();
        let gdir = self.sysfs.iommu_group_dir(g);
        fs::create_dir_all(gdir.join("devices")).unwrap();
        fs::write(gdir.join("name"), format!("{VFIO_NOIOMMU_GROUP_NAME}\n")).unwrap();
        symlink(
            format!("../../../kernel/iommu_groups/{g}"),
            self.sysfs.device_dir(addr).join("iommu_group"),
        )
        .unwrap();
        symlink(
            format!("../../../../bus/pci/devices/{addr}"),
            gdir.join("devices").join(addr.to_string()),
        )
        .unwrap();
        true
    }

    pub fn driver_of(&self, addr: PciAddress) -> Option<String> {
        let link = fs::read_link(self.sysfs.device_dir(addr).join("driver")).ok()?;
        Some(link.file_name()?.to_string_lossy().into_owned())
    }

    pub fn override_of(&self, addr: PciAddress) -> String {
        fs::read_to_string(self.sysfs.device_dir(addr).join("driver_override"))
            .unwrap()
            .trim()
            .to_owned()
    }

    pub fn set_net(&self, ifname: &str, attr: &str, value: &str) {
        fs::write(self.sysfs.net_dir(ifname).join(attr), value).unwrap();
    }

    /// Puts `value` at byte `offset` of the device's BAR 0.
    pub fn set_reg(&self, addr: PciAddress, offset: usize, value: u32) {
        let path = self.sysfs.device_dir(addr).join("resource0");
        let mut bar = fs::read(&path).unwrap();
        bar[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
        fs::write(path, bar).unwrap();
    }

    pub fn writes(&self) -> Vec<String> {
        self.log.borrow().clone()
    }

    fn exists(&self, addr: PciAddress) -> bool {
        self.sysfs.device_dir(addr).exists()
    }

    /// Does `driver` match `addr` by ID (vfio-pci only via driver_override)?
    fn id_match(&self, addr: PciAddress, driver: &str) -> bool {
        let read = |f: &str| {
            let s = fs::read_to_string(self.sysfs.device_dir(addr).join(f)).unwrap();
            u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap()
        };
        ids::lookup(read("vendor"), read("device"))
            .is_some_and(|m| m.family.kernel_driver() == driver)
    }

    /// The driver core's probe of one driver: may fail.
    fn attach(&self, addr: PciAddress, driver: &str) -> io::Result<()> {
        if driver == VFIO_PCI && self.vfio_node(addr).is_none() && !self.make_noiommu_group(addr) {
            return Err(errno(libc::EINVAL));
        }
        if driver == VFIO_PCI && self.vfio_probe_fails.get() {
            return Err(errno(libc::EINVAL));
        }
        self.set_driver(addr, Some(driver));
        Ok(())
    }

    /// `drivers_probe`: first matching registered driver, honouring override.
    fn probe(&self, addr: PciAddress) {
        let over = self.override_of(addr);
        let candidates: Vec<&str> = if over == "(null)" {
            crate::family::FAMILIES
                .iter()
                .map(|f| f.kernel_driver())
                .collect()
        } else {
            vec![over.as_str()]
        };
        for d in candidates {
            let matches = over != "(null)" || self.id_match(addr, d);
            if matches && self.sysfs.driver_dir(d).exists() && self.attach(addr, d).is_ok() {
                return;
            }
        }
    }
}

impl Kernel for FakeSys {
    fn write_attr(&self, path: &std::path::Path, value: &str) -> io::Result<()> {
        let rel = path
            .strip_prefix(&self.sysfs.root)
            .expect("write outside the fake sysfs");
        let rel = rel.to_string_lossy().into_owned();
        let entry = format!("{rel}={value}");
        self.log.borrow_mut().push(entry.clone());
        if let Some((suffix, e)) = &*self.fail.borrow() {
            if rel.ends_with(suffix.as_str()) {
                return Err(errno(*e));
            }
        }
        if let Some((suffix, e)) = &*self.fail_entry.borrow() {
            if entry.ends_with(suffix.as_str()) {
                return Err(errno(*e));
            }
        }
        let v = value.strip_suffix('\n').unwrap_or(value);
        let parts: Vec<&str> = rel.split('/').collect();
        match parts.as_slice() {
            ["bus", "pci", "devices", a, "driver", "unbind"] => {
                let addr: PciAddress = a.parse().unwrap();
                if self.driver_of(addr).is_none() {
                    return Err(errno(libc::ENOENT));
                }
                if v != *a {
                    return Err(errno(libc::ENODEV));
                }
                self.set_driver(addr, None);
            }
            ["bus", "pci", "devices", a, "driver_override"] => {
                let addr: PciAddress = a.parse().unwrap();
                let stored = if v.is_empty() { "(null)" } else { v };
                fs::write(
                    self.sysfs.device_dir(addr).join("driver_override"),
                    format!("{stored}\n"),
                )?;
            }
            ["bus", "pci", "drivers_probe"] => {
                let addr: PciAddress = v.parse().map_err(|_| errno(libc::EINVAL))?;
                if !self.exists(addr) {
                    return Err(errno(libc::ENODEV));
                }
                if self.driver_of(addr).is_none() {
                    self.probe(addr);
                }
            }
            ["bus", "pci", "drivers", d, "bind"] => {
                let addr: PciAddress = v.parse().map_err(|_| errno(libc::ENODEV))?;
                if !self.exists(addr) {
                    return Err(errno(libc::ENODEV));
                }
                if self.driver_of(addr).is_some() {
                    return Err(errno(libc::EBUSY));
                }
                let over = self.override_of(addr);
                let allowed = if over == "(null)" {
                    self.id_match(addr, d)
                } else {
                    over == *d
                };
                if !allowed {
                    return Err(errno(libc::ENODEV));
                }
                self.attach(addr, d)?;
            }
            _ => {
                if !path.exists() {
                    return Err(errno(libc::ENOENT));
                }
                fs::write(path, value)?;
            }
        }
        Ok(())
    }

    fn modprobe(&self, module: &str) -> Result<(), String> {
        self.modprobed.borrow_mut().push(module.to_owned());
        if self.modprobe_fails.get() {
            return Err(format!("`modprobe {module}` exited with exit status: 1: modprobe: FATAL: Module {module} not found"));
        }
        self.add_driver(module);
        if module == VFIO_PCI && self.vfio_noiommu_capable.get() {
            let param = self.sysfs.vfio_noiommu_param();
            fs::create_dir_all(param.parent().unwrap()).unwrap();
            fs::write(param, "N\n").unwrap();
        }
        Ok(())
    }
}
