//! What `pollnic doctor` looks at, gathered once from sysfs, procfs and
//! `/dev` into plain data, so that every check ([`super::checks`]) is a pure
//! function over it and can be unit-tested without a machine.
//!
//! Sources: `Documentation/ABI/testing/sysfs-kernel-iommu_groups`,
//! `Documentation/admin-guide/mm/hugetlbpage.rst` (global and per-node
//! `nr_hugepages`/`free_hugepages`), `Documentation/ABI/testing/sysfs-devices-system-cpu`
//! (`isolated`, `nohz_full`, `cpufreq/scaling_governor`), `proc(5)`
//! (`/proc/cmdline`, `/proc/<pid>/comm`, `/proc/self/status` `CapEff`),
//! `getrlimit(2)` (`RLIMIT_MEMLOCK`); for a machine with no IOMMU,
//! `Documentation/driver-api/vfio.rst` ("VFIO NO-IOMMU":
//! `/sys/module/vfio/parameters/enable_unsafe_noiommu_mode` exists when the
//! kernel has `CONFIG_VFIO_NOIOMMU`), `/lib/modules/<release>/modules.dep`
//! and `modules.builtin` (`modules.dep(5)`), `/boot/config-<release>`, and
//! the `hypervisor` CPU flag of `/proc/cpuinfo` and
//! `/sys/class/dmi/id/{sys_vendor,product_name}` (is this a VM?); a
//! virtio port's `/sys/bus/pci/devices/<addr>/virtio<N>/features`
//! (`features_show` in the kernel's `drivers/virtio/virtio.c`).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use pollnic::pci::{self, BindMode, LinkState, PciAddress, PciDevice, Sysfs, VirtioFeatures};

/// Bit of `CAP_IPC_LOCK` in the capability sets (`include/uapi/linux/capability.h`).
pub const CAP_IPC_LOCK_BIT: u32 = 14;

/// Hugepage pool of one NUMA node, in 2 MiB pages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePages {
    /// NUMA node number.
    pub node: u32,
    /// `nr_hugepages` of the node.
    pub total: u64,
    /// `free_hugepages` of the node.
    pub free: u64,
}

/// The 2 MiB hugepage pool (`/sys/kernel/mm/hugepages/hugepages-2048kB`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hugepages {
    /// `false` when the kernel has no 2 MiB hugepage size at all.
    pub supported: bool,
    /// `nr_hugepages`, pages.
    pub total: u64,
    /// `free_hugepages`, pages.
    pub free: u64,
    /// Per NUMA node (`/sys/devices/system/node/node*/hugepages/hugepages-2048kB`).
    pub nodes: Vec<NodePages>,
}

/// `RLIMIT_MEMLOCK` of this process, bytes; `None` = unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memlock {
    /// Soft limit (what applies), bytes.
    pub soft: Option<u64>,
    /// Hard limit (how far an unprivileged user may raise the soft one), bytes.
    pub hard: Option<u64>,
}

/// Who runs doctor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Effective user ID.
    pub uid: u32,
    /// Effective group ID.
    pub gid: u32,
    /// Supplementary group IDs.
    pub groups: Vec<u32>,
    /// Login name, when the user database has one.
    pub name: Option<String>,
    /// `CAP_IPC_LOCK` in the effective set: VFIO then does not count pinned
    /// memory against `RLIMIT_MEMLOCK`.
    pub cap_ipc_lock: bool,
}

/// Owner and mode of a device node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeStat {
    /// Permission bits (`st_mode & 0o777`).
    pub mode: u32,
    /// Owner user ID.
    pub uid: u32,
    /// Owner group ID.
    pub gid: u32,
}

/// A member of an IOMMU group other than the port itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its PCI address.
    pub addr: PciAddress,
    /// Its driver, `None` when unbound.
    pub driver: Option<String>,
    /// `true` for a PCI bridge (class 0x0604), whose driver (if any) never blocks VFIO.
    pub bridge: bool,
    /// `true` if pollnic drives it (so `pollnic bind` applies).
    pub supported_nic: bool,
}

/// One port doctor was asked about (or found bound to vfio-pci).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortFacts {
    /// The address asked for.
    pub addr: PciAddress,
    /// What sysfs says about it; `None` if there is no such device.
    pub device: Option<PciDevice>,
    /// The other members of its IOMMU group.
    pub members: Vec<Member>,
    /// `/dev/vfio/<group>` (`/dev/vfio/noiommu-<group>` in VFIO's no-IOMMU
    /// mode), if it exists.
    pub vfio_node: Option<NodeStat>,
    /// Its link as `pollnic status` reads it.
    pub link: LinkState,
    /// How it is bound for pollnic (vfio-pci behind an IOMMU, or a no-IOMMU
    /// route), `None` when on a kernel driver or none.
    pub mode: Option<BindMode>,
    /// A virtio port's feature bits as sysfs shows them while the kernel's
    /// virtio-pci holds it (`<device>/virtio<N>/features`,
    /// [`pci::virtio_features`]): `None` when sysfs cannot tell (on another
    /// driver, no virtio driver bound to `virtio<N>` yet, not virtio);
    /// `Some(Err(why))` when the file is not as the kernel writes it.
    pub virtio_features: Option<Result<VirtioFeatures, String>>,
}

/// Whether the running kernel has a module, as its files tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Module {
    /// In the kernel now: loaded or built in (`/sys/module/<name>`, or its
    /// driver's directory under `/sys/bus/pci/drivers`).
    InKernel,
    /// Named in the running kernel's `modules.dep` or `modules.builtin`:
    /// `modprobe` can load it.
    InTree,
    /// Those files were read and do not name it: this kernel lacks it.
    NotInTree,
    /// The running kernel has no module tree: `dir` (`/lib/modules/<release>`)
    /// does not exist, so no module can be loaded (as on minimal cloud VM
    /// images, which ship the kernel without its modules).
    NoTree {
        /// The missing directory.
        dir: String,
    },
    /// Could not be told (no release to read, or the tree has neither file).
    Unknown,
}

/// Whether this kernel offers something pollnic can use (a driver module, a
/// mode of one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Ready now: the driver is loaded, the mode is on.
    Ready,
    /// This kernel has it; `pollnic bind` loads it or turns it on.
    Available,
    /// This kernel does not have it.
    Absent,
    /// Not in the running kernel, which has no module tree
    /// (`/lib/modules/<release>` missing): nothing to load.
    NoModuleTree,
    /// Could not be told (no `modules.dep`, no kernel config to read).
    Unknown,
}

impl Offer {
    /// `true` when ready or available.
    pub fn offered(self) -> bool {
        matches!(self, Offer::Ready | Offer::Available)
    }
}

/// One core doctor was asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreFacts {
    /// CPU number.
    pub cpu: usize,
    /// Present and online.
    pub online: bool,
    /// Its NUMA node, when the machine reports one.
    pub node: Option<u32>,
    /// `cpufreq/scaling_governor`, `None` without cpufreq (VMs, fixed clocks).
    pub governor: Option<String>,
}

/// What a configuration pins per queue and in all, in 2 MiB hugepages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Need {
    /// Hugepages of one queue's mempool (buffers × buffer size).
    pub mempool_pages: u64,
    /// Hugepages of one queue's RX and TX descriptor rings (one each).
    pub ring_pages: u64,
    /// Queues per port.
    pub queues: u64,
    /// Ports opened by one process.
    pub ports: u64,
}

impl Need {
    /// The need of `cfg` with `ports` ports; the page counts are the ones
    /// `Device::open` checks ([`pollnic::DeviceConfig::hugepages_per_queue`]).
    pub fn of(cfg: &pollnic::DeviceConfig, ports: u64) -> Need {
        let (mempool, rings) = cfg.hugepages_per_queue();
        Need {
            mempool_pages: mempool as u64,
            ring_pages: rings as u64,
            queues: u64::from(cfg.queues),
            ports,
        }
    }
    /// Hugepages of one queue.
    pub fn per_queue(&self) -> u64 {
        self.mempool_pages + self.ring_pages
    }
    /// Hugepages in all (per queue × queues × ports).
    pub fn pages(&self) -> u64 {
        self.per_queue() * self.queues * self.ports
    }
    /// Bytes VFIO pins in all (and counts against `RLIMIT_MEMLOCK`).
    pub fn bytes(&self) -> u64 {
        self.pages() * pollnic_rings::dma::HUGEPAGE_SIZE as u64
    }
}

/// Everything the checks look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// Entries of `/sys/class/iommu` (e.g. `dmar0`).
    pub iommu_units: Vec<String>,
    /// Number of `/sys/kernel/iommu_groups/*`.
    pub iommu_groups: usize,
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// `/sys/bus/pci/drivers/vfio-pci` exists.
    pub vfio_pci_loaded: bool,
    /// vfio-pci: loaded or built in (`/sys/module/vfio_pci`), else what
    /// `/lib/modules/<release>/modules.dep` (or `modules.builtin`) says, or
    /// that the running kernel has no module tree at all.
    pub vfio_pci_available: Module,
    /// VFIO's no-IOMMU mode: [`Offer::Ready`] when
    /// `enable_unsafe_noiommu_mode` reads `Y`, [`Offer::Available`] when it
    /// exists (or, with vfio not loaded, the kernel config has
    /// `CONFIG_VFIO_NOIOMMU=y`), [`Offer::Absent`] when vfio is loaded
    /// without it (or the config lacks it), else [`Offer::Unknown`].
    pub vfio_noiommu: Offer,
    /// `uio_pci_generic`: [`Offer::Ready`] when
    /// `/sys/bus/pci/drivers/uio_pci_generic` exists, else by
    /// `modules.dep`/`modules.builtin`.
    pub uio_pci_generic: Offer,
    /// What says this is a virtual machine (`QEMU Standard PC ...` from DMI,
    /// or the CPU's `hypervisor` flag), `None` on bare metal.
    pub vm: Option<String>,
    /// The 2 MiB hugepage pool.
    pub hugepages: Hugepages,
    /// What the configuration needs.
    pub need: Need,
    /// `RLIMIT_MEMLOCK`.
    pub memlock: Memlock,
    /// Who asks.
    pub user: User,
    /// `/dev/vfio/vfio`, if it exists.
    pub vfio_container: Option<NodeStat>,
    /// The ports.
    pub ports: Vec<PortFacts>,
    /// The requested cores.
    pub cores: Vec<CoreFacts>,
    /// Online CPUs of each NUMA node (`node<N>/cpulist`), by node.
    pub node_cpus: Vec<(u32, Vec<usize>)>,
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated: Vec<usize>,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: Vec<usize>,
    /// PIDs of running `irqbalance` processes.
    pub irqbalance: Vec<u32>,
    /// UMONITOR/UMWAIT (WAITPKG): the CPU's CPUID bit and the kernel's
    /// `umwait_control`.
    pub waitpkg: pollnic::irq::Waitpkg,
}

/// Where to read from (the real system: `/sys`, `/proc`, `/dev`, `/lib/modules`).
#[derive(Clone, Debug)]
pub struct Roots {
    /// sysfs.
    pub sysfs: Sysfs,
    /// procfs mount point.
    pub proc: PathBuf,
    /// devtmpfs mount point.
    pub dev: PathBuf,
    /// Kernel modules tree.
    pub modules: PathBuf,
    /// Where the kernel configs are (`config-<release>`).
    pub boot: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sysfs: Sysfs::default(),
            proc: "/proc".into(),
            dev: "/dev".into(),
            modules: "/lib/modules".into(),
            boot: "/boot".into(),
        }
    }
}

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.parse().ok()
}

/// IOMMU groups behind a real IOMMU in `dir` (`/sys/kernel/iommu_groups`):
/// the groups VFIO's no-IOMMU mode makes (`name` reads `vfio-noiommu`)
/// have no IOMMU behind them and are not counted.
fn iommu_groups(dir: &Path) -> usize {
    names(dir)
        .iter()
        .filter(|g| read(&dir.join(g).join("name")).is_none_or(|n| n.trim() != "vfio-noiommu"))
        .count()
}

fn names(path: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(path)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Parses a kernel CPU list (`0-3,6`); empty text is an empty list.
pub fn parse_cpulist(text: &str) -> Vec<usize> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    crate::cores::parse_cores(text.trim()).unwrap_or_default()
}

fn stat(path: &Path) -> Option<NodeStat> {
    fs::metadata(path).ok().map(|m| NodeStat {
        mode: m.mode() & 0o777,
        uid: m.uid(),
        gid: m.gid(),
    })
}

/// The 2 MiB hugepage pool, globally and per node.
pub fn gather_hugepages(sysfs: &Sysfs) -> Hugepages {
    let dir = sysfs.root.join("kernel/mm/hugepages/hugepages-2048kB");
    let mut nodes = Vec::new();
    for name in names(&sysfs.root.join("devices/system/node")) {
        let Some(n) = name.strip_prefix("node").and_then(|n| n.parse().ok()) else {
            continue;
        };
        let d = sysfs
            .root
            .join("devices/system/node")
            .join(&name)
            .join("hugepages/hugepages-2048kB");
        if let (Some(total), Some(free)) = (
            read_u64(&d.join("nr_hugepages")),
            read_u64(&d.join("free_hugepages")),
        ) {
            nodes.push(NodePages {
                node: n,
                total,
                free,
            });
        }
    }
    nodes.sort_by_key(|n| n.node);
    Hugepages {
        supported: dir.is_dir(),
        total: read_u64(&dir.join("nr_hugepages")).unwrap_or(0),
        free: read_u64(&dir.join("free_hugepages")).unwrap_or(0),
        nodes,
    }
}

fn gather_user(proc: &Path) -> User {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let groups = nix::unistd::getgroups()
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default();
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name);
    let cap_ipc_lock = read(&proc.join("self/status"))
        .as_deref()
        .and_then(cap_eff)
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK_BIT) != 0);
    User {
        uid,
        gid,
        groups,
        name,
        cap_ipc_lock,
    }
}

/// The `CapEff:` mask of a `/proc/<pid>/status` text.
pub fn cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

fn gather_memlock() -> Memlock {
    use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
    let lim = |v: u64| (v != RLIM_INFINITY).then_some(v);
    match getrlimit(Resource::RLIMIT_MEMLOCK) {
        Ok((soft, hard)) => Memlock {
            soft: lim(soft),
            hard: lim(hard),
        },
        Err(_) => Memlock {
            soft: Some(0),
            hard: Some(0),
        },
    }
}

/// vfio-pci: in the running kernel already (`/sys/module/vfio_pci` or the
/// driver's directory: loaded, or built in), else as the module tree says.
pub fn vfio_pci_available(roots: &Roots) -> Module {
    let sysfs = &roots.sysfs;
    if sysfs.root.join("module/vfio_pci").is_dir() || sysfs.driver_dir(pci::VFIO_PCI).is_dir() {
        return Module::InKernel;
    }
    module_state(roots, pci::VFIO_PCI)
}

/// What the running kernel's module tree (`/lib/modules/<release>`) says
/// of `module`: named in `modules.dep` or `modules.builtin` (`-` and `_`
/// alike, any `.ko` compression), not named, or no tree at all.
pub fn module_state(roots: &Roots, module: &str) -> Module {
    let Some(release) = read(&roots.proc.join("sys/kernel/osrelease")) else {
        return Module::Unknown;
    };
    let dir = roots.modules.join(&release);
    if let Err(e) = fs::metadata(&dir) {
        return if e.kind() == std::io::ErrorKind::NotFound {
            Module::NoTree {
                dir: dir.display().to_string(),
            }
        } else {
            Module::Unknown
        };
    }
    let want = module.replace('-', "_");
    let mut any = false;
    for f in ["modules.dep", "modules.builtin"] {
        if let Some(text) = read(&dir.join(f)) {
            any = true;
            if text.lines().any(|l| {
                l.split(':')
                    .next()
                    .and_then(|m| m.rsplit('/').next())
                    .and_then(|file| file.split(".ko").next())
                    .is_some_and(|stem| stem.replace('-', "_") == want)
            }) {
                return Module::InTree;
            }
        }
    }
    if any {
        Module::NotInTree
    } else {
        Module::Unknown
    }
}

/// VFIO's no-IOMMU mode: the module parameter when vfio is loaded, else
/// the kernel's config (`/boot/config-<release>`, `/lib/modules/<release>/config`).
pub fn vfio_noiommu(roots: &Roots) -> Offer {
    let sysfs = &roots.sysfs;
    if let Some(v) = read(&sysfs.vfio_noiommu_param()) {
        return if v == "Y" || v == "1" {
            Offer::Ready
        } else {
            Offer::Available
        };
    }
    if sysfs.root.join("module/vfio").is_dir() {
        return Offer::Absent;
    }
    let Some(release) = read(&roots.proc.join("sys/kernel/osrelease")) else {
        return Offer::Unknown;
    };
    // Built in with CONFIG_VFIO_NOIOMMU, vfio would show its parameter
    // above; as a module it needs a module tree to load from.
    if matches!(module_state(roots, "vfio"), Module::NoTree { .. }) {
        return Offer::NoModuleTree;
    }
    for config in [
        roots.boot.join(format!("config-{release}")),
        roots.modules.join(&release).join("config"),
    ] {
        if let Some(text) = read(&config) {
            return if text.lines().any(|l| l.trim() == "CONFIG_VFIO_NOIOMMU=y") {
                Offer::Available
            } else {
                Offer::Absent
            };
        }
    }
    Offer::Unknown
}

/// `uio_pci_generic`: loaded, or in the running kernel's modules.
pub fn uio_pci_generic(roots: &Roots) -> Offer {
    if roots.sysfs.driver_dir(pci::UIO_PCI_GENERIC).is_dir() {
        return Offer::Ready;
    }
    // Built in, its driver directory would be there (above).
    match module_state(roots, pci::UIO_PCI_GENERIC) {
        Module::InKernel | Module::InTree => Offer::Available,
        Module::NotInTree => Offer::Absent,
        Module::NoTree { .. } => Offer::NoModuleTree,
        Module::Unknown => Offer::Unknown,
    }
}

/// DMI vendors and products of hypervisors (`/sys/class/dmi/id`).
const VM_DMI: &[&str] = &[
    "QEMU",
    "KVM",
    "Bochs",
    "VMware",
    "VirtualBox",
    "innotek",
    "Xen",
    "Virtual Machine",
    "Amazon EC2",
    "Google Compute Engine",
    "Parallels",
    "OpenStack",
    "Cloud Hypervisor",
];

/// What says this is a virtual machine, if anything: the DMI vendor and
/// product of a hypervisor, or the `hypervisor` CPU flag.
pub fn detect_vm(roots: &Roots) -> Option<String> {
    let dmi = roots.sysfs.root.join("class/dmi/id");
    let vendor = read(&dmi.join("sys_vendor")).unwrap_or_default();
    let product = read(&dmi.join("product_name")).unwrap_or_default();
    let both = format!("{vendor} {product}").trim().to_owned();
    if VM_DMI.iter().any(|k| both.contains(k)) {
        return Some(both);
    }
    let cpuinfo = read(&roots.proc.join("cpuinfo")).unwrap_or_default();
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"))
        .then(|| "the CPU's hypervisor flag in /proc/cpuinfo".to_owned())
}

fn gather_port(roots: &Roots, addr: PciAddress) -> PortFacts {
    let sysfs = &roots.sysfs;
    let Ok(dev) = PciDevice::read(sysfs, addr) else {
        return PortFacts {
            addr,
            device: None,
            members: Vec::new(),
            vfio_node: None,
            link: LinkState::Unknown("no such device".into()),
            mode: None,
            virtio_features: None,
        };
    };
    let mut members = Vec::new();
    if let Some(g) = dev.iommu_group {
        for name in names(&sysfs.iommu_group_devices(g)) {
            let Ok(other) = name.parse::<PciAddress>() else {
                continue;
            };
            if other == addr {
                continue;
            }
            let dir = sysfs.device_dir(other);
            let driver = fs::read_link(dir.join("driver"))
                .ok()
                .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()));
            let class = read(&dir.join("class"))
                .and_then(|c| u32::from_str_radix(c.trim_start_matches("0x"), 16).ok())
                .unwrap_or(0);
            let supported_nic = PciDevice::read(sysfs, other).is_ok_and(|d| d.is_supported());
            members.push(Member {
                addr: other,
                driver,
                bridge: class >> 8 == 0x0604,
                supported_nic,
            });
        }
    }
    let mode = BindMode::of(sysfs, &dev);
    let vfio_node = dev.iommu_group.and_then(|g| {
        let name = match mode {
            Some(BindMode::VfioNoIommu) => format!("noiommu-{g}"),
            _ => g.to_string(),
        };
        stat(&roots.dev.join("vfio").join(name))
    });
    let link = pci::link_state(sysfs, &dev);
    let virtio_features = pci::virtio_features(sysfs, addr)
        .transpose()
        .map(|r| r.map_err(|e| e.to_string()));
    PortFacts {
        addr,
        mode,
        virtio_features,
        device: Some(dev),
        members,
        vfio_node,
        link,
    }
}

fn gather_core(sysfs: &Sysfs, cpu: usize) -> CoreFacts {
    let dir = sysfs.root.join(format!("devices/system/cpu/cpu{cpu}"));
    let online = dir.is_dir() && read(&dir.join("online")).is_none_or(|s| s == "1");
    let node = names(&dir)
        .iter()
        .find_map(|n| n.strip_prefix("node").and_then(|n| n.parse().ok()));
    CoreFacts {
        cpu,
        online,
        node,
        governor: read(&dir.join("cpufreq/scaling_governor")),
    }
}

fn irqbalance_pids(proc: &Path) -> Vec<u32> {
    names(proc)
        .iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .filter(|pid| {
            read(&proc.join(pid.to_string()).join("comm")).as_deref() == Some("irqbalance")
        })
        .collect()
}

/// Gathers every fact for `ports` (supported NICs bound to vfio-pci or
/// `uio_pci_generic` when empty) and `cores`, with the hugepage need of `cfg` for that many ports.
/// Never fails: what cannot be read shows up as absent and the checks say so.
pub fn gather(
    roots: &Roots,
    ports: &[PciAddress],
    cores: &[usize],
    cfg: &pollnic::DeviceConfig,
) -> Facts {
    let sysfs = &roots.sysfs;
    let ports: Vec<PciAddress> = if ports.is_empty() {
        pci::list_nics(sysfs)
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.is_supported() && d.is_pollnic_bound())
            .map(|d| d.addr)
            .collect()
    } else {
        ports.to_vec()
    };
    let node_cpus = names(&sysfs.root.join("devices/system/node"))
        .iter()
        .filter_map(|n| {
            let node: u32 = n.strip_prefix("node")?.parse().ok()?;
            let cpus = parse_cpulist(&read(
                &sysfs
                    .root
                    .join("devices/system/node")
                    .join(n)
                    .join("cpulist"),
            )?);
            Some((node, cpus))
        })
        .collect();
    let cpu_dir = sysfs.root.join("devices/system/cpu");
    Facts {
        iommu_units: names(&sysfs.root.join("class/iommu")),
        iommu_groups: iommu_groups(&sysfs.root.join("kernel/iommu_groups")),
        cmdline: read(&roots.proc.join("cmdline")).unwrap_or_default(),
        vfio_pci_loaded: sysfs.driver_dir(pollnic::pci::VFIO_PCI).is_dir(),
        vfio_pci_available: vfio_pci_available(roots),
        vfio_noiommu: vfio_noiommu(roots),
        uio_pci_generic: uio_pci_generic(roots),
        vm: detect_vm(roots),
        hugepages: gather_hugepages(sysfs),
        need: Need::of(cfg, ports.len().max(1) as u64),
        memlock: gather_memlock(),
        user: gather_user(&roots.proc),
        vfio_container: stat(&roots.dev.join("vfio/vfio")),
        ports: ports.iter().map(|&a| gather_port(roots, a)).collect(),
        cores: cores.iter().map(|&c| gather_core(sysfs, c)).collect(),
        node_cpus,
        isolated: parse_cpulist(&read(&cpu_dir.join("isolated")).unwrap_or_default()),
        nohz_full: parse_cpulist(&read(&cpu_dir.join("nohz_full")).unwrap_or_default()),
        irqbalance: irqbalance_pids(&roots.proc),
        waitpkg: pollnic::irq::Waitpkg::detect(sysfs),
    }
}
