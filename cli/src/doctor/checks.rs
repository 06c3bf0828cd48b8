//! The checks: pure functions from [`Facts`] to [`Finding`]s.
//!
//! Where each rule comes from:
//! - IOMMU groups exist only with the IOMMU on (`Documentation/driver-api/vfio.rst`);
//! - a VFIO group is viable only when every member is bound to vfio-pci, to
//!   a stub driver, or to nothing (same document, "Groups, Devices, and IOMMUs");
//! - VFIO's type1 backend counts every page it pins for DMA against
//!   `RLIMIT_MEMLOCK` unless the process has `CAP_IPC_LOCK`
//!   (`drivers/vfio/vfio_iommu_type1.c`, `vfio_pin_pages_remote`);
//! - `isolcpus`, `nohz_full`: `Documentation/admin-guide/kernel-parameters.txt`;
//! - with no IOMMU, VFIO's no-IOMMU mode (`Documentation/driver-api/vfio.rst`,
//!   "VFIO NO-IOMMU": physical addresses, taints the kernel) and
//!   `uio_pci_generic` (`drivers/uio/uio_pci_generic.c`) are the two ways
//!   in, both letting the NIC reach all of RAM;
//! - a virtio-net device is driven only with `VIRTIO_F_VERSION_1`, and
//!   behind an IOMMU only with `VIRTIO_F_ACCESS_PLATFORM` (virtio 1.2 §6;
//!   what `Device::open` and `pollnic bind` refuse without), read from
//!   `<device>/virtio<N>/features` while the kernel's virtio-pci holds it.

use super::facts::{Facts, Member, Module, NodeStat, Offer, PortFacts, User};
use super::{Finding, Status};
use pollnic::pci::{BindMode, LinkState, PciDevice, VirtioFeature, VirtioFeatures, VFIO_PCI};
use pollnic::NicFamily;
use pollnic_rings::dma::NR_HUGEPAGES;

/// Drivers that may share an IOMMU group with a VFIO device.
const GROUP_FRIENDLY: &[&str] = &[VFIO_PCI, "pci-stub", "pcieport"];

/// All findings, in the order they are printed.
pub fn run(f: &Facts) -> Vec<Finding> {
    let mut out = vec![
        iommu(f),
        vfio_pci(f),
        hugepages(f),
        memlock(f),
        vfio_container(f),
    ];
    for p in &f.ports {
        out.extend(port(f, p));
    }
    if f.ports.is_empty() {
        out.push(Finding::warn(
            "ports",
            "no port given and no supported NIC is bound to vfio-pci",
            "pollnic status   # lists the NICs; then `pollnic bind ADDR` and `pollnic doctor ADDR`",
        ));
    }
    out.extend(cores(f));
    out.push(irqbalance(f));
    out.push(waitpkg(f));
    out
}

/// `true` if any finding failed (doctor then exits non-zero).
pub fn any_failed(findings: &[Finding]) -> bool {
    findings.iter().any(|x| x.status == Status::Fail)
}

const IOMMU_FIX: &str = "add `intel_iommu=on iommu=pt` (AMD: `amd_iommu=on iommu=pt`) to \
GRUB_CMDLINE_LINUX in /etc/default/grub, then `sudo update-grub && sudo reboot` \
(and enable VT-d / AMD-Vi in the firmware setup)";

/// The IOMMU fix in a VM: the hypervisor's, not the guest kernel's.
const VIOMMU_FIX: &str = "give the VM a virtual IOMMU from the hypervisor (QEMU: a q35 machine \
with `-device intel-iommu,intremap=on,caching-mode=on` before the NICs; a cloud VM: an instance \
type that offers one); the guest's kernel command line cannot add one";

/// What a no-IOMMU route costs, said once.
const NO_IOMMU_COST: &str = "no IOMMU: the NIC is given physical addresses and can reach all \
of RAM, so a fault in it or in the program can overwrite any memory";

/// The ports doctor was given, as `pollnic bind` arguments (`ADDR` if none).
fn addr_args(f: &Facts) -> String {
    if f.ports.is_empty() {
        "ADDR".to_owned()
    } else {
        f.ports
            .iter()
            .map(|p| p.addr.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The three ways with no IOMMU group, best first, as one detail text and
/// one fix; and whether a no-IOMMU route is offered.
fn no_iommu_choices(f: &Facts) -> (String, String, bool) {
    let addrs = addr_args(f);
    let (a, a_fix) = match &f.vm {
        Some(vm) => (
            format!(
                "(a) best: an IOMMU; this is a VM ({vm}), so it is the hypervisor's to give: a virtual IOMMU"
            ),
            VIOMMU_FIX.to_owned(),
        ),
        None => (
            "(a) best: turn the IOMMU on (kernel command line and firmware)".to_owned(),
            IOMMU_FIX.to_owned(),
        ),
    };
    let b_has = match f.vfio_noiommu {
        Offer::Ready => "this kernel offers it, and it is on".to_owned(),
        Offer::Available => "this kernel offers it (CONFIG_VFIO_NOIOMMU)".to_owned(),
        Offer::Absent => "this kernel does not offer it (built without CONFIG_VFIO_NOIOMMU)".to_owned(),
        Offer::NoModuleTree => "this kernel does not offer it (not built in, and no modules are installed for the running kernel: /lib/modules/<release> is missing)".to_owned(),
        Offer::Unknown => "whether this kernel offers it could not be determined (vfio is not loaded and no kernel config was found: `sudo modprobe vfio && ls /sys/module/vfio/parameters/` lists enable_unsafe_noiommu_mode if it does)".to_owned(),
    };
    let c_has = match f.uio_pci_generic {
        Offer::Ready => "this kernel offers it (loaded)".to_owned(),
        Offer::Available => "this kernel offers it (module in modules.dep)".to_owned(),
        Offer::Absent => "this kernel does not offer it (not in modules.dep or modules.builtin)".to_owned(),
        Offer::NoModuleTree => "this kernel does not offer it (not built in, and no modules are installed for the running kernel: /lib/modules/<release> is missing)".to_owned(),
        Offer::Unknown => "whether this kernel offers it could not be determined (no modules.dep for the running kernel: try `sudo modprobe -n -v uio_pci_generic`)".to_owned(),
    };
    let detail = format!(
        "three ways, best first: {a}; (b) VFIO no-IOMMU mode ({NO_IOMMU_COST}; taints the kernel): {b_has}; \
         (c) uio_pci_generic ({NO_IOMMU_COST}): {c_has}"
    );
    let mut fixes = vec![format!("(a) {a_fix}")];
    if f.vfio_noiommu.offered() {
        fixes.push(format!(
            "(b) sudo pollnic bind --no-iommu {addrs}, then run the tools with --no-iommu"
        ));
    }
    if f.uio_pci_generic.offered() {
        fixes.push(format!(
            "(c) sudo pollnic bind --driver uio_pci_generic {addrs}, then run the tools with --no-iommu"
        ));
    }
    let offered = f.vfio_noiommu.offered() || f.uio_pci_generic.offered();
    (detail, fixes.join("; or "), offered)
}

/// IOMMU: units under `/sys/class/iommu` and groups under `/sys/kernel/iommu_groups`.
/// With none: the three ways (an IOMMU; VFIO no-IOMMU; `uio_pci_generic`),
/// a warning when a no-IOMMU route is offered, a failure when none is.
pub fn iommu(f: &Facts) -> Finding {
    let args: Vec<&str> = f
        .cmdline
        .split_whitespace()
        .filter(|a| {
            a.starts_with("intel_iommu=") || a.starts_with("amd_iommu=") || a.starts_with("iommu=")
        })
        .collect();
    let args = if args.is_empty() {
        "no IOMMU option on the kernel command line".to_owned()
    } else {
        format!("kernel command line: {}", args.join(" "))
    };
    if f.iommu_groups == 0 {
        let (choices, fix, offered) = no_iommu_choices(f);
        let detail = format!(
            "IOMMU off: no IOMMU groups in /sys/kernel/iommu_groups ({} unit(s) in /sys/class/iommu; {args}), \
             so vfio-pci cannot put a NIC behind one; {choices}",
            f.iommu_units.len()
        );
        return if offered {
            Finding::warn("iommu", detail, fix)
        } else {
            Finding::fail("iommu", detail, fix)
        };
    }
    let units = if f.iommu_units.is_empty() {
        "no unit listed in /sys/class/iommu".to_owned()
    } else {
        f.iommu_units.join(", ")
    };
    Finding::ok(
        "iommu",
        format!("IOMMU on: {units}; {} IOMMU groups; {args}", f.iommu_groups),
    )
}

/// `true` when doctor was given ports and every one is on `uio_pci_generic`
/// (which needs neither vfio-pci nor `/dev/vfio`).
fn all_on_uio(f: &Facts) -> bool {
    !f.ports.is_empty() && f.ports.iter().all(|p| p.mode == Some(BindMode::Uio))
}

/// vfio-pci loaded, or at least available to `modprobe`.
pub fn vfio_pci(f: &Facts) -> Finding {
    if all_on_uio(f) && !f.vfio_pci_loaded {
        return Finding::ok(
            "vfio-pci",
            "vfio-pci is not loaded, and not needed: every port is on uio_pci_generic",
        );
    }
    if f.vfio_pci_loaded {
        return Finding::ok(
            "vfio-pci",
            "vfio-pci is loaded (/sys/bus/pci/drivers/vfio-pci)",
        );
    }
    match &f.vfio_pci_available {
        Module::InKernel => Finding::ok(
            "vfio-pci",
            "vfio-pci is in the running kernel (/sys/module/vfio_pci: built in or loaded)",
        ),
        Module::NotInTree => Finding::fail(
            "vfio-pci",
            "vfio-pci is not loaded and this kernel has no vfio-pci module (not in modules.dep or modules.builtin)",
            "install your distribution's kernel modules for the running kernel (Debian: the linux-image package of `uname -r`), then `sudo modprobe vfio-pci`",
        ),
        Module::NoTree { dir } => Finding::fail(
            "vfio-pci",
            format!(
                "vfio-pci is missing: it is not loaded, not built in (no /sys/module/vfio_pci), and \
                 the running kernel has no modules installed ({dir} does not exist), so \
                 `modprobe vfio-pci` has nothing to load"
            ),
            no_module_tree_fix(f, dir),
        ),
        Module::InTree => Finding::warn(
            "vfio-pci",
            "vfio-pci is not loaded; this kernel has it (modules.dep), and `pollnic bind` loads it",
            "sudo modprobe vfio-pci",
        ),
        Module::Unknown => Finding::warn(
            "vfio-pci",
            "vfio-pci is not loaded, and whether this kernel has it could not be determined \
             (no modules.dep or modules.builtin under /lib/modules for the running kernel)",
            "sudo modprobe vfio-pci   # fails if this kernel has no vfio-pci",
        ),
    }
}

/// The fix when the running kernel has no module tree: install the modules
/// of that release (and let the kernel load them), or, with no IOMMU, the
/// no-IOMMU route of the iommu finding.
fn no_module_tree_fix(f: &Facts, dir: &str) -> String {
    let release = dir.rsplit('/').next().unwrap_or(dir);
    let mut fix = format!(
        "install the kernel modules package of the running kernel, release {release} (the one \
         `uname -r` names; Debian: linux-image-{release}), or boot a kernel whose modules are \
         installed; then `sudo modprobe vfio-pci`"
    );
    if f.cmdline.split_whitespace().any(|a| a == "nomodule") {
        fix.push_str(
            "; this kernel was also booted with `nomodule`, which forbids loading any module: \
             remove it from the kernel command line",
        );
    }
    if f.iommu_groups == 0 {
        let machine = if f.vm.is_some() {
            "this VM"
        } else {
            "this machine"
        };
        fix.push_str(&format!(
            "; or, as {machine} has no IOMMU, the no-IOMMU route with uio_pci_generic, which \
             needs no vfio-pci (its own module must be in the kernel too): see the iommu finding"
        ));
    }
    fix
}

fn mib(pages: u64) -> u64 {
    pages * 2
}

/// Hugepages: total and free, per node, against what the configuration needs.
pub fn hugepages(f: &Facts) -> Finding {
    let h = &f.hugepages;
    let n = &f.need;
    let need = n.pages();
    let per_node = if h.nodes.is_empty() {
        String::new()
    } else {
        let nodes: Vec<String> = h
            .nodes
            .iter()
            .map(|x| format!("node {}: {} total, {} free", x.node, x.total, x.free))
            .collect();
        format!(" ({})", nodes.join(", "))
    };
    let needs = format!(
        "the default configuration needs {} per queue ({} MiB: mempool {}, RX+TX rings {}), \
         {} for {} port(s) x {} queue(s)",
        n.per_queue(),
        mib(n.per_queue()),
        n.mempool_pages,
        n.ring_pages,
        need,
        n.ports,
        n.queues
    );
    if !h.supported {
        return Finding::fail(
            "hugepages",
            "this kernel has no 2 MiB hugepages (/sys/kernel/mm/hugepages/hugepages-2048kB missing)",
            "use a kernel built with CONFIG_HUGETLBFS (every distribution kernel is)",
        );
    }
    let have = format!(
        "2 MiB hugepages: {} total, {} free{per_node}; {needs}",
        h.total, h.free
    );
    if h.free < need {
        let want = h.total + (need - h.free);
        return Finding::fail(
            "hugepages",
            have,
            format!("echo {want} | sudo tee {NR_HUGEPAGES}   # or boot with hugepages={want}"),
        );
    }
    // Ports on one node draw from that node's pool first.
    for p in &f.ports {
        let Some(node) = p.device.as_ref().and_then(|d| d.numa_node) else {
            continue;
        };
        if let Some(np) = h.nodes.iter().find(|x| x.node == node) {
            let want = n.per_queue() * n.queues;
            if np.free < want {
                return Finding::warn(
                    "hugepages",
                    format!(
                        "{have}; port {} is on node {node}, which has {} free (it needs {want}): its memory would come from another node",
                        p.addr, np.free
                    ),
                    format!(
                        "echo {} | sudo tee /sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages",
                        np.total + (want - np.free)
                    ),
                );
            }
        }
    }
    Finding::ok("hugepages", have)
}

fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(1024)
}

fn limit(v: Option<u64>) -> String {
    match v {
        None => "unlimited".into(),
        Some(b) => format!("{} KiB", kib(b)),
    }
}

/// RLIMIT_MEMLOCK against what VFIO pins for the configuration.
pub fn memlock(f: &Facts) -> Finding {
    let need = f.need.bytes();
    let why = format!(
        "VFIO pins every DMA page (mempools and rings: {} MiB for {} port(s) x {} queue(s)) and counts it against RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK",
        need >> 20,
        f.need.ports,
        f.need.queues
    );
    let lim = format!(
        "soft {}, hard {}",
        limit(f.memlock.soft),
        limit(f.memlock.hard)
    );
    if f.user.cap_ipc_lock {
        return Finding::ok(
            "memlock",
            format!("CAP_IPC_LOCK held (root): not limited by RLIMIT_MEMLOCK ({lim}); {why}"),
        );
    }
    if f.memlock.soft.is_none_or(|s| s >= need) {
        return Finding::ok(
            "memlock",
            format!("RLIMIT_MEMLOCK {lim} covers {} KiB; {why}", kib(need)),
        );
    }
    let user = f
        .user
        .name
        .clone()
        .unwrap_or_else(|| f.user.uid.to_string());
    let k = kib(need);
    let fix = if f.memlock.hard.is_none_or(|h| h >= need) {
        format!("ulimit -l {k}   # in the shell that runs pollnic (the hard limit allows it)")
    } else {
        format!(
            "echo '{user} - memlock {k}' | sudo tee /etc/security/limits.d/pollnic.conf   # then log in again; \
             for one run: sudo prlimit --memlock={need}:{need} setpriv --reuid={user} --regid={user} --init-groups <command>"
        )
    };
    Finding::fail(
        "memlock",
        format!("RLIMIT_MEMLOCK {lim} is below the {k} KiB needed: {why}"),
        fix,
    )
}

/// Can `user` read and write a node with `st`? (root always can.)
pub fn can_rw(st: &NodeStat, user: &User) -> bool {
    if user.uid == 0 {
        return true;
    }
    let bits = if st.uid == user.uid {
        st.mode >> 6
    } else if st.gid == user.gid || user.groups.contains(&st.gid) {
        st.mode >> 3
    } else {
        st.mode
    };
    bits & 0o6 == 0o6
}

fn who(user: &User) -> String {
    user.name
        .clone()
        .unwrap_or_else(|| format!("uid {}", user.uid))
}

/// `/dev/vfio/vfio`: present and usable.
pub fn vfio_container(f: &Facts) -> Finding {
    if all_on_uio(f) && f.vfio_container.is_none() {
        return Finding::ok(
            "/dev/vfio",
            "/dev/vfio/vfio does not exist, and is not needed: every port is on uio_pci_generic",
        );
    }
    match &f.vfio_container {
        None => Finding::fail(
            "/dev/vfio",
            "/dev/vfio/vfio does not exist (the VFIO modules are not loaded)",
            "sudo modprobe vfio-pci",
        ),
        Some(st) if !can_rw(st, &f.user) => Finding::fail(
            "/dev/vfio",
            format!(
                "/dev/vfio/vfio is mode {:o} owner {}:{}: {} cannot open it",
                st.mode,
                st.uid,
                st.gid,
                who(&f.user)
            ),
            "sudo chmod 0666 /dev/vfio/vfio   # the kernel's default mode",
        ),
        Some(st) => Finding::ok(
            "/dev/vfio",
            format!(
                "/dev/vfio/vfio mode {:o}: {} can open it",
                st.mode,
                who(&f.user)
            ),
        ),
    }
}

fn member_text(m: &Member) -> String {
    format!(
        "{} ({})",
        m.addr,
        m.driver.as_deref().unwrap_or("no driver")
    )
}

/// Does `m` keep the group from being viable?
pub fn blocks(m: &Member) -> bool {
    match m.driver.as_deref() {
        None => false,
        Some(_) if m.bridge => false,
        Some(d) => !GROUP_FRIENDLY.contains(&d),
    }
}

/// The findings of one port: driver, IOMMU group, `/dev/vfio/N`, link, NUMA node.
pub fn port(f: &Facts, p: &PortFacts) -> Vec<Finding> {
    let area = format!("port {}", p.addr);
    let Some(d) = &p.device else {
        return vec![Finding::fail(
            area,
            format!("no PCI device at {}", p.addr),
            "pollnic status   # lists the supported NICs (igb, ixgbe, virtio-net) and their addresses",
        )];
    };
    let mut out = Vec::new();
    // Driver.
    match d.family() {
        None => {
            out.push(Finding::fail(
                &area,
                format!("{} is {}", p.addr, d.name()),
                "pollnic status   # lists the NICs pollnic drives",
            ));
            return out;
        }
        Some(family) => {
            if let Some(missing) = family.missing(d.device) {
                out.push(Finding::fail(
                    &area,
                    format!(
                        "{}: needs {missing}, which pollnic does not implement yet; \
                         `Device::open` refuses it",
                        d.name()
                    ),
                    format!(
                        "use another port (`pollnic status`); `pollnic unbind {}` gives this one back",
                        p.addr
                    ),
                ));
            }
            if let Some(c) = family.caveat() {
                out.push(Finding::warn(
                    &area,
                    format!("{} is an {} part: {}", d.name(), family.name(), c.what),
                    format!(
                        "{} (`pollnic status`); `pollnic unbind {}` gives this one back",
                        c.instead, p.addr
                    ),
                ));
            }
        }
    }
    let no_iommu = d.iommu_group.is_none() || p.mode == Some(BindMode::VfioNoIommu);
    match p.mode {
        Some(BindMode::Vfio) => {
            out.push(Finding::ok(&area, format!("{}: driver vfio-pci", d.name())))
        }
        Some(mode) => out.push(Finding::warn(
            &area,
            format!(
                "{}: driver {}, {mode}: {NO_IOMMU_COST}; the tools open it only with --no-iommu",
                d.name(),
                mode.driver()
            ),
            format!(
                "with an IOMMU on (see the iommu finding): `sudo pollnic unbind {a} && sudo pollnic bind {a}`",
                a = p.addr
            ),
        )),
        None => {
            let fix = bind_fix(f, p, d, no_iommu);
            out.push(Finding::fail(
                &area,
                format!(
                    "{}: driver {}, not vfio-pci",
                    d.name(),
                    d.driver.as_deref().unwrap_or("none")
                ),
                fix,
            ))
        }
    }
    out.extend(virtio_features(f, p, d));
    // IOMMU group: none is expected on a no-IOMMU route.
    let group = match (p.mode, d.iommu_group) {
        (Some(BindMode::Uio), _) => None,
        (Some(BindMode::VfioNoIommu), Some(g)) => {
            match &p.vfio_node {
                Some(_) => out.push(Finding::ok(
                    &area,
                    format!("VFIO no-IOMMU group {g}: /dev/vfio/noiommu-{g} exists"),
                )),
                None => out.push(Finding::fail(
                    &area,
                    format!("/dev/vfio/noiommu-{g} does not exist"),
                    format!(
                        "sudo pollnic unbind {a} && sudo pollnic bind --no-iommu {a}",
                        a = p.addr
                    ),
                )),
            }
            None
        }
        (_, None) => {
            let (_, fix, offered) = no_iommu_choices(f);
            let detail = "no IOMMU group: the IOMMU is off, so vfio-pci cannot put it behind one";
            out.push(if offered {
                Finding::warn(&area, detail, fix)
            } else {
                Finding::fail(&area, detail, fix)
            });
            None
        }
        (_, Some(g)) => Some(g),
    };
    if let Some(g) = group {
        let blockers: Vec<&Member> = p.members.iter().filter(|m| blocks(m)).collect();
        let all: Vec<String> = p.members.iter().map(member_text).collect();
        let members = if all.is_empty() {
            "no other member".to_owned()
        } else {
            format!("other members: {}", all.join(", "))
        };
        if blockers.is_empty() {
            out.push(Finding::ok(
                &area,
                format!("IOMMU group {g} is viable; {members}"),
            ));
        } else {
            let fixes: Vec<String> = blockers
                .iter()
                .map(|m| {
                    if m.supported_nic {
                        format!("sudo pollnic bind {}", m.addr)
                    } else {
                        format!(
                            "echo {a} | sudo tee /sys/bus/pci/devices/{a}/driver/unbind",
                            a = m.addr
                        )
                    }
                })
                .collect();
            let names: Vec<String> = blockers.iter().map(|m| member_text(m)).collect();
            out.push(Finding::fail(
                    &area,
                    format!(
                        "IOMMU group {g} is not viable: {} bound to a host driver ({members}); VFIO needs every member on vfio-pci or on no driver",
                        names.join(", ")
                    ),
                    fixes.join("; "),
                ));
        }
        // Its VFIO node.
        match &p.vfio_node {
            None if d.is_vfio_bound() => out.push(Finding::fail(
                &area,
                format!("/dev/vfio/{g} does not exist"),
                format!(
                    "sudo pollnic unbind {a} && sudo pollnic bind {a}",
                    a = p.addr
                ),
            )),
            None => {}
            Some(st) if !can_rw(st, &f.user) => out.push(Finding::fail(
                &area,
                format!(
                    "/dev/vfio/{g} is mode {:o} owner {}:{}: {} cannot open it",
                    st.mode,
                    st.uid,
                    st.gid,
                    who(&f.user)
                ),
                format!(
                    "sudo pollnic bind --user {} {}",
                    f.user
                        .name
                        .clone()
                        .unwrap_or_else(|| f.user.uid.to_string()),
                    p.addr
                ),
            )),
            Some(st) => out.push(Finding::ok(
                &area,
                format!(
                    "/dev/vfio/{g} mode {:o} owner {}:{}: {} can open it",
                    st.mode,
                    st.uid,
                    st.gid,
                    who(&f.user)
                ),
            )),
        }
    }
    // Link.
    match &p.link {
        LinkState::Up { .. } => out.push(Finding::ok(&area, format!("link {}", p.link))),
        other => out.push(Finding::warn(
            &area,
            format!("link {other}"),
            "check the cable and the link partner; pollnic restarts autonegotiation when it opens the port (`pollnic status` shows the link)",
        )),
    }
    // NUMA node against the cores.
    match d.numa_node {
        None => out.push(Finding::ok(
            &area,
            "no NUMA node reported (one-node machine or VM): any core is local",
        )),
        Some(node) => {
            let far: Vec<usize> = f
                .cores
                .iter()
                .filter(|c| c.node.is_some_and(|n| n != node))
                .map(|c| c.cpu)
                .collect();
            if far.is_empty() {
                out.push(Finding::ok(
                    &area,
                    format!("NUMA node {node}, the same as the requested cores"),
                ));
            } else {
                let local = f
                    .node_cpus
                    .iter()
                    .find(|(n, _)| *n == node)
                    .map(|(_, c)| cpu_list(c))
                    .unwrap_or_else(|| format!("<cores of node {node}>"));
                out.push(Finding::warn(
                    &area,
                    format!(
                        "NUMA node {node}, but core(s) {} are on another node: every packet crosses the interconnect",
                        cpu_list(&far)
                    ),
                    format!("--cores {local}   # cores of node {node}"),
                ));
            }
        }
    }
    out
}

/// `0,1,2,5` for a list of CPUs.
pub fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Each requested core: online, isolated, frequency governor.
pub fn cores(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    // The kernel command line to suggest: the requested cores that exist
    // (an absent one is reported as such, never suggested).
    let online: Vec<usize> = f.cores.iter().filter(|c| c.online).map(|c| c.cpu).collect();
    let list = cpu_list(&online);
    for c in &f.cores {
        let area = format!("core {}", c.cpu);
        if !c.online {
            out.push(Finding::fail(
                area,
                format!("CPU {} is not present or offline", c.cpu),
                "lscpu --online --parse=CPU   # pick --cores from these",
            ));
            continue;
        }
        let iso = f.isolated.contains(&c.cpu);
        let nohz = f.nohz_full.contains(&c.cpu);
        if iso && nohz {
            out.push(Finding::ok(
                &area,
                "isolated (isolcpus) and tickless (nohz_full)",
            ));
        } else {
            let what = match (iso, nohz) {
                (false, false) => "not isolated and not nohz_full: the scheduler puts other threads and the timer tick on it",
                (true, false) => "isolated but not nohz_full: the timer tick still interrupts the poll loop",
                _ => "nohz_full but not isolated (isolcpus): the scheduler may put other threads on it",
            };
            out.push(Finding::warn(
                &area,
                what,
                format!(
                    "add `isolcpus={list} nohz_full={list} rcu_nocbs={list}` to the kernel command line and reboot"
                ),
            ));
        }
        match c.governor.as_deref() {
            None => out.push(Finding::ok(&area, "no cpufreq scaling (fixed frequency or a VM)")),
            Some("performance") => out.push(Finding::ok(&area, "frequency governor performance")),
            Some(g) => out.push(Finding::warn(
                &area,
                format!("frequency governor {g}: the clock may drop between bursts"),
                format!(
                    "echo performance | sudo tee /sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor",
                    c.cpu
                ),
            )),
        }
    }
    out
}

/// irqbalance running: it spreads kernel IRQs over every core it may use.
pub fn irqbalance(f: &Facts) -> Finding {
    if f.irqbalance.is_empty() {
        return Finding::ok("irqbalance", "irqbalance is not running");
    }
    let list = cpu_list(&f.cores.iter().map(|c| c.cpu).collect::<Vec<_>>());
    Finding::warn(
        "irqbalance",
        format!(
            "irqbalance is running (pid {}): it may move other devices' interrupts onto the polling cores",
            f.irqbalance.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
        ),
        format!(
            "echo 'IRQBALANCE_BANNED_CPULIST={list}' | sudo tee -a /etc/default/irqbalance && sudo systemctl restart irqbalance   # or `sudo systemctl stop irqbalance`"
        ),
    )
}

/// WAITPKG (UMONITOR/UMWAIT/TPAUSE): said either way, never a problem. No
/// receive mode uses it; an adaptive queue spins, then sleeps on its MSI-X
/// interrupt whatever the CPU offers.
pub fn waitpkg(f: &Facts) -> Finding {
    let w = &f.waitpkg;
    let yes = |b: bool| if b { "yes" } else { "no" };
    let kernel = match (w.kernel, w.max_time_tsc) {
        (true, Some(t)) => format!("yes (umwait_control, max_time {t} TSC cycles)"),
        (true, None) => "yes (umwait_control)".to_string(),
        (false, _) => "no (no /sys/devices/system/cpu/umwait_control)".to_string(),
    };
    Finding::ok(
        "cpu-wait",
        format!(
            "this CPU offers WAITPKG (UMONITOR/UMWAIT): {}; the kernel enabled user wait: {kernel}. pollnic's receive modes do not use it: adaptive and irq sleep on the queue's MSI-X interrupt",
            yes(w.cpu)
        ),
    )
}

/// `VIRTIO_NET_F_MTU (bit 3: what it gives), ...` for a list of features.
fn feature_list(features: &[VirtioFeature]) -> String {
    features
        .iter()
        .map(|x| format!("{} (bit {}: {})", x.name(), x.bit(), x.gives()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A virtio-net port still on the kernel's virtio-pci: the feature bits
/// sysfs shows for it. A required one missing (`VIRTIO_F_VERSION_1`;
/// `VIRTIO_F_ACCESS_PLATFORM` for the way behind an IOMMU) is a failure
/// naming the fix, or a warning when the port has no IOMMU group and a
/// no-IOMMU route, which does not need ACCESS_PLATFORM, is offered; the
/// optional ones it lacks are said in an ok finding. Nothing for a port on
/// another driver: sysfs cannot tell, and `Device::open` checks them.
/// The fix for a port on no pollnic driver: the `pollnic bind` that would
/// succeed here, or, when every bind would be refused (no IOMMU and no
/// no-IOMMU route offered; a virtio-net device without a feature the route
/// needs), no bind at all but the finding that says what to change first.
/// So doctor never advises a bind whose refusal (or whose guard's advice
/// to take an interface down) comes for nothing.
fn bind_fix(f: &Facts, p: &PortFacts, d: &PciDevice, no_iommu: bool) -> String {
    let mode = if !no_iommu {
        BindMode::Vfio
    } else if f.vfio_noiommu.offered() {
        BindMode::VfioNoIommu
    } else if f.uio_pci_generic.offered() {
        BindMode::Uio
    } else {
        return "none yet: no way in is offered on this machine (see the iommu finding); \
                bind nothing until one is"
            .to_owned();
    };
    let is_virtio = d.family().map(|x| x.kind()) == Some(NicFamily::VirtioNet);
    if let (true, Some(Ok(feats))) = (is_virtio, &p.virtio_features) {
        let missing = feats.missing_for(mode);
        if !missing.is_empty() {
            return format!(
                "none yet: `pollnic bind` would refuse it (the device lacks {}; see the virtio \
                 features finding)",
                feature_list(&missing)
            );
        }
    }
    match mode {
        BindMode::Vfio => format!("sudo pollnic bind {}", p.addr),
        BindMode::VfioNoIommu => format!(
            "sudo pollnic bind --no-iommu {}   # no IOMMU: see the iommu finding",
            p.addr
        ),
        _ => format!(
            "sudo pollnic bind --driver uio_pci_generic {}   # no IOMMU: see the iommu finding",
            p.addr
        ),
    }
}

pub fn virtio_features(f: &Facts, p: &PortFacts, d: &PciDevice) -> Vec<Finding> {
    let area = format!("port {}", p.addr);
    if d.family().map(|x| x.kind()) != Some(NicFamily::VirtioNet) || p.mode.is_some() {
        return Vec::new();
    }
    let source = format!("/sys/bus/pci/devices/{}/virtio*/features", p.addr);
    let feats: VirtioFeatures = match &p.virtio_features {
        None if d.driver.as_deref() == Some("virtio-pci") => {
            return vec![Finding::warn(
                &area,
                format!(
                    "virtio features unknown: no virtio driver has probed the device yet, so \
                     {source} shows none; pollnic needs VIRTIO_F_VERSION_1, and behind an IOMMU \
                     VIRTIO_F_ACCESS_PLATFORM (`Device::open` checks them)"
                ),
                "sudo modprobe virtio_net   # then run `pollnic doctor` again to read them",
            )]
        }
        None => return Vec::new(),
        Some(Err(why)) => {
            return vec![Finding::warn(
                &area,
                format!("virtio features could not be read: {why}"),
                format!("cat {source}   # the kernel writes one '0' or '1' per feature bit"),
            )]
        }
        Some(Ok(x)) => *x,
    };
    let mut out = Vec::new();
    let behind_iommu = d.iommu_group.is_some();
    let mut missing = Vec::new();
    if !feats.version_1() {
        missing.push(VirtioFeature::Version1);
        out.push(Finding::fail(
            &area,
            format!(
                "the virtio-net device does not offer {}, as read from {source}: pollnic \
                 drives only the modern interface, so `pollnic bind` and `Device::open` refuse it on \
                 every route",
                feature_list(&[VirtioFeature::Version1])
            ),
            "give the VM a modern virtio-net device: QEMU `-device \
             virtio-net-pci,disable-legacy=on,...` (libvirt: a `virtio-non-transitional` \
             model), then restart the VM",
        ));
    }
    if !feats.access_platform() {
        missing.push(VirtioFeature::AccessPlatform);
        let what = format!(
            "the virtio-net device does not offer {}, as read from {source}",
            feature_list(&[VirtioFeature::AccessPlatform])
        );
        let hypervisor = "on the hypervisor, `-device \
            virtio-net-pci,disable-legacy=on,iommu_platform=on,...` with a virtual IOMMU \
            (`-device intel-iommu,intremap=on,caching-mode=on` before the NICs, or `-device \
            virtio-iommu-pci`; libvirt: `<driver iommu='on'/>` on the interface and an \
            `<iommu>` device), then restart the VM";
        if behind_iommu {
            out.push(Finding::fail(
                &area,
                format!(
                    "{what}: without it the device bypasses the IOMMU, so `pollnic bind` to \
                     vfio-pci and `Device::open` refuse it"
                ),
                hypervisor,
            ));
        } else {
            let mut routes = Vec::new();
            if f.vfio_noiommu.offered() {
                routes.push(format!("`sudo pollnic bind --no-iommu {}`", p.addr));
            }
            if f.uio_pci_generic.offered() {
                routes.push(format!(
                    "`sudo pollnic bind --driver uio_pci_generic {}`",
                    p.addr
                ));
            }
            let detail = format!(
                "{what}: with no IOMMU group here, the way behind an IOMMU needs both a virtual \
                 IOMMU and this bit (`pollnic bind` to vfio-pci refuses the port without it); \
                 the no-IOMMU routes do not need it ({NO_IOMMU_COST})"
            );
            if routes.is_empty() {
                out.push(Finding::fail(
                    &area,
                    detail,
                    format!(
                        "{hypervisor}; no no-IOMMU route is known to be offered by this kernel (see the iommu \
                         finding)"
                    ),
                ));
            } else {
                out.push(Finding::warn(
                    &area,
                    detail,
                    format!(
                        "{hypervisor}; or the no-IOMMU route: {}, then run the tools with \
                         --no-iommu",
                        routes.join(" or ")
                    ),
                ));
            }
        }
    }
    let absent = feats.absent_optional();
    let optional = if absent.is_empty() {
        "every optional feature pollnic takes is there".to_owned()
    } else {
        format!(
            "optional features absent: {} (sysfs shows what the kernel's virtio_net negotiated: \
             a bit it does not take reads 0 too)",
            feature_list(&absent)
        )
    };
    let required = if missing.is_empty() {
        "the virtio-net device offers VIRTIO_F_VERSION_1 and VIRTIO_F_ACCESS_PLATFORM, which \
         pollnic needs"
            .to_owned()
    } else {
        format!(
            "virtio features read from {source}: {} missing",
            missing
                .iter()
                .map(|x| x.name())
                .collect::<Vec<_>>()
                .join(" and ")
        )
    };
    out.push(Finding::ok(&area, format!("{required}; {optional}")));
    out
}
