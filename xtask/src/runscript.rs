//! The script a guest run executes: the testbed environment, NIC checks, the optional
//! bind to vfio-pci, then the caller's commands.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::layout::Layout;
use crate::{cmd, install};

/// The igb NICs: guest PCI address and MAC, in port order. Ports 0 and 1 are
/// wired back to back through QEMU hub 0, ports 2 and 3 through hub 1 ([`hub_of`]).
///
/// Each emulated igb reserves the slots of its 8 SR-IOV VFs at realize time:
/// a PF in slot `s` takes slots `s + 16` and `s + 17` (VF offset 0x80, stride 2),
/// so PFs need slots at least 2 apart, and slot 0xe would collide with q35's
/// LPC bridge in slot 0x1f. Slot 6 keeps clear of the virtio-9p shares, which
/// QEMU places in the first free slots (1..=3).
pub const PORTS: [(&str, &str); 4] = [
    ("0000:00:08.0", "52:54:00:12:34:01"),
    ("0000:00:0a.0", "52:54:00:12:34:02"),
    ("0000:00:0c.0", "52:54:00:12:34:03"),
    ("0000:00:06.0", "52:54:00:12:34:04"),
];

/// Two more igb NICs that share one IOMMU group, for the doctor test of a
/// group that is not viable. Linux keeps the functions of a multi-function
/// 82576 apart (an ACS quirk in `drivers/pci/quirks.c`), so the group comes
/// from the topology instead: two PCIe root ports as functions 0 and 1 of slot
/// 4, with ACS off (`disable-acs=on`), one igb behind each (buses 1 and 2).
/// Without ACS on the path both root ports and both NICs form one group
/// (`drivers/iommu/iommu.c`, `pci_device_group`). No network is attached; the
/// guest's kernel igb driver takes both at boot and the testbed leaves them there.
pub const SHARED_GROUP: [&str; 2] = ["0000:01:00.0", "0000:02:00.0"];

/// The virtio-net ports: modern virtio 1.x devices (`disable-legacy=on`, PCI
/// ID 1af4:1041) whose DMA goes through the guest's vIOMMU
/// (`iommu_platform=on`, so they offer `VIRTIO_F_ACCESS_PLATFORM`), guest PCI
/// address and MAC in port order, wired back to back through two multi-queue
/// taps on a private bridge (`qemu::in_private_net`). Slots 0x10 and 0x11 keep clear of the igb ports' VF slots
/// (0x16..=0x1d). Bound to vfio-pci with the igb ports; exported as
/// `POLLNIC_VIRTIO_PORT{0,1}` and `POLLNIC_VIRTIO_PORT{0,1}_MAC`.
pub const VIRTIO_PORTS: [(&str, &str); 2] = [
    ("0000:00:10.0", "52:54:00:12:36:01"),
    ("0000:00:11.0", "52:54:00:12:36:02"),
];

/// The one of [`VIRTIO_PORTS`] that also offers packed virtqueues
/// (`VIRTIO_F_RING_PACKED`, QEMU's `packed=on`); pollnic takes them there
/// unless a test asks for the split ring (`DeviceConfig::virtq_layout`).
/// The guest sees it as `$POLLNIC_VIRTIO_PACKED_PORT` (0 or 1).
pub const PACKED_PORT: usize = 1;

/// Queue pairs of each of the two [`VIRTIO_PORTS`] (their taps' `queues=`;
/// the guest sees it as `$POLLNIC_VIRTIO_QUEUE_PAIRS`).
pub const VIRTIO_QUEUE_PAIRS: u16 = 2;

/// Two virtio-net devices pollnic must refuse, for the bad-input test: one
/// without `iommu_platform=on` (modern, but no `VIRTIO_F_ACCESS_PLATFORM`:
/// it would bypass the vIOMMU; bound to vfio-pci so that the refusal comes
/// from the feature negotiation) and one transitional (legacy interface
/// too, PCI ID 1af4:1000, which QEMU does not give `iommu_platform`; left
/// with the guest's virtio-pci driver). The first sits on the virtio ports'
/// tap bridge (a third tap, [`NOPLATFORM_TAP`]): `guest_virtio_kernel` gives
/// it to the guest kernel's `virtio_net` as the peer of pollnic's virtio port
/// 1, since a kernel driving a port through the vIOMMU after vfio-pci had it
/// has had its memory overwritten in this testbed (DESIGN.md, "Open testbed
/// problems"), and this one bypasses the vIOMMU. The second is on the
/// traffic-free hub 2. Exported as `POLLNIC_VIRTIO_NOPLATFORM` and
/// `POLLNIC_VIRTIO_TRANSITIONAL`.
pub const VIRTIO_NOPLATFORM: &str = "0000:00:12.0";
/// See [`VIRTIO_NOPLATFORM`].
pub const VIRTIO_TRANSITIONAL: &str = "0000:00:13.0";
/// The host-side tap of [`VIRTIO_NOPLATFORM`], on the virtio ports' bridge.
pub const NOPLATFORM_TAP: &str = "pollnic-vt2";

/// Every device the testbed has on vfio-pci in its IOMMU guest: the igb
/// ports and virtio-net ports `pollnic bind` binds ([`pollnic_ports`]), and
/// the virtio device without ACCESS_PLATFORM, which `pollnic bind` refuses
/// and the testbed binds by hand ([`bind_commands`]).
pub fn bound_ports() -> Vec<&'static str> {
    pollnic_ports()
        .into_iter()
        .chain([VIRTIO_NOPLATFORM])
        .collect()
}

/// The ports `pollnic bind` takes in either guest: the igb and virtio-net
/// ports (to vfio-pci behind the vIOMMU, to `uio_pci_generic` with none).
pub fn pollnic_ports() -> Vec<&'static str> {
    PORTS.iter().chain(&VIRTIO_PORTS).map(|p| p.0).collect()
}

/// The shell lines that put the testbed's ports where each test binary
/// starts from: `pollnic bind` of [`pollnic_ports`] (with `--force` past its
/// active-interface guard when `force`; `--driver uio_pci_generic` with no
/// IOMMU), then, behind the vIOMMU, [`VIRTIO_NOPLATFORM`] to vfio-pci by
/// hand through sysfs (`driver_override`, as `driverctl` or
/// `dpdk-devbind.py` would), since `pollnic bind` refuses a virtio device
/// without ACCESS_PLATFORM there and `Device::open`'s own refusal is what
/// `guest_virtio` tests. Each line runs `on_fail` when it fails.
pub fn bind_commands(layout: &Layout, no_iommu: bool, force: bool, on_fail: &str) -> String {
    let how = match (force, no_iommu) {
        (false, false) => "",
        (false, true) => "--driver uio_pci_generic ",
        (true, false) => "--force ",
        (true, true) => "--force --driver uio_pci_generic ",
    };
    let mut s = format!(
        "{} bind {how}{}{} || {on_fail}\n",
        cmd::shell_quote(layout.pollnic_debug_bin()),
        pollnic_ports().join(" "),
        if force { " >/dev/null" } else { "" },
    );
    if !no_iommu {
        let _ = writeln!(
            s,
            "np=/sys/bus/pci/devices/{dev}\n\
             {{ echo vfio-pci > $np/driver_override && \\\n\
             {{ [ ! -e $np/driver ] || [ \"$(basename \"$(readlink $np/driver)\")\" = vfio-pci ] || echo {dev} > $np/driver/unbind; }} && \\\n\
             {{ [ -e $np/driver ] || echo {dev} > /sys/bus/pci/drivers_probe; }} && \\\n\
             [ \"$(basename \"$(readlink $np/driver)\")\" = vfio-pci ]; }} || {on_fail}",
            dev = VIRTIO_NOPLATFORM
        );
    }
    s
}

/// The QEMU device id of virtio-net port `i` (what QMP's `set_link` names).
pub fn virtio_id(port: usize) -> String {
    format!("pollnic_virtio{port}")
}

/// The QEMU hub that port `i` is on: ports 0 and 1 share hub 0, ports 2 and 3 hub 1.
pub fn hub_of(port: usize) -> usize {
    port / 2
}

/// The QEMU device id of igb port `i` (`-device igb,id=...`), the name QMP's `set_link` takes.
pub fn nic_id(port: usize) -> String {
    format!("pollnic_port{port}")
}

/// Host variables that the guest command sees too (besides `POLLNIC_*`).
const PASSTHROUGH: &[&str] = &["PATH", "HOME", "RUST_BACKTRACE", "RUST_LOG"];

/// The whole script for `user` (POSIX sh text); `bind` adds `target/debug/pollnic bind`.
pub fn full_script(layout: &Layout, user: &str, bind: bool, no_iommu: bool) -> String {
    let mut s =
        String::from("# Generated by `cargo xtask` (pollnic testbed); runs inside the guest.\n");
    let mut export = |k: &str, v: &str| {
        let _ = writeln!(s, "export {k}={}", cmd::shell_quote(v));
    };
    for (key, value) in std::env::vars_os() {
        let (Some(key), Some(value)) = (key.to_str(), value.to_str()) else {
            continue;
        };
        let ours = key == "POLLNIC_GUEST"
            || key.starts_with("POLLNIC_PORT")
            || key.starts_with("POLLNIC_VIRTIO_");
        if PASSTHROUGH.contains(&key) || (key.starts_with("POLLNIC_") && !ours) {
            export(key, value);
        }
    }
    // The guest console is a tty: keep colours only if our own stdout is a terminal.
    let term = match std::env::var("TERM") {
        Ok(term) if std::io::stdout().is_terminal() => term,
        _ => "dumb".to_owned(),
    };
    export("TERM", &term);
    export("POLLNIC_GUEST", "1");
    // Which kernel flavour booted, for tests whose expectations differ (AF_XDP zero-copy on
    // igb needs Linux >= 6.14, i.e. `current`).
    export(install::GUEST_KERNEL_VAR, layout.guest_kernel.name());
    for (i, (pci, mac)) in PORTS.iter().enumerate() {
        export(&format!("POLLNIC_PORT{i}"), pci);
        export(&format!("POLLNIC_PORT{i}_MAC"), mac);
    }
    export("POLLNIC_SHARED_GROUP", &SHARED_GROUP.join(","));
    for (i, (pci, mac)) in VIRTIO_PORTS.iter().enumerate() {
        export(&format!("POLLNIC_VIRTIO_PORT{i}"), pci);
        export(&format!("POLLNIC_VIRTIO_PORT{i}_MAC"), mac);
    }
    export(
        "POLLNIC_VIRTIO_QUEUE_PAIRS",
        &VIRTIO_QUEUE_PAIRS.to_string(),
    );
    export("POLLNIC_VIRTIO_PACKED_PORT", &PACKED_PORT.to_string());
    export("POLLNIC_VIRTIO_NOPLATFORM", VIRTIO_NOPLATFORM);
    export("POLLNIC_VIRTIO_TRANSITIONAL", VIRTIO_TRANSITIONAL);
    if no_iommu {
        export("POLLNIC_NO_IOMMU", "1");
    }
    let _ = writeln!(s, "cd {} || exit 125", cmd::shell_quote(&layout.repo));
    let pcis = bound_ports();
    let _ = writeln!(
        s,
        "for dev in {}; do\n    [ -e /sys/bus/pci/devices/$dev ] || {{ echo \"pollnic-testbed: NIC $dev is missing in the guest\" >&2; exit 125; }}\ndone",
        pcis.join(" ")
    );
    if bind {
        s.push_str(&bind_commands(
            layout,
            no_iommu,
            false,
            "{ echo 'pollnic-testbed: binding the NICs failed' >&2; exit 125; }",
        ));
    }
    s.push_str("# ---- the command ----\n");
    s.push_str(user);
    if !user.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// A per-run token that the console sentinels carry.
pub fn nonce() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{:x}{:05x}",
        nanos as u64 & 0xffff_ffff_ffff,
        std::process::id() & 0xfffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_has_env_and_command() {
        let layout = Layout {
            repo: "/work/main".into(),
            target: "/work/main/target".into(),
            testbed: "/work/main/target/testbed".into(),
            guest_kernel: crate::install::GuestKernel::Lts,
        };
        let s = full_script(&layout, "sh -c 'exit 3'", false, false);
        assert!(s.contains("export POLLNIC_PORT0=0000:00:08.0\n"));
        assert!(s.contains("export POLLNIC_GUEST_KERNEL=lts\n"));
        assert!(s.contains("export POLLNIC_PORT1_MAC=52:54:00:12:34:02\n"));
        assert!(s.contains("export POLLNIC_PORT3=0000:00:06.0\n"));
        assert_eq!((hub_of(0), hub_of(1), hub_of(2), hub_of(3)), (0, 0, 1, 1));
        assert!(s.contains("cd /work/main || exit 125\n"));
        assert!(!s.contains(" bind "));
        assert!(s.ends_with("sh -c 'exit 3'\n"));
        let plain = full_script(&layout, "true", true, true);
        assert!(plain.contains("export POLLNIC_NO_IOMMU=1\n"));
        assert!(plain.contains(
            "/work/main/target/debug/pollnic bind --driver uio_pci_generic 0000:00:08.0 \
             0000:00:0a.0 0000:00:0c.0 0000:00:06.0 0000:00:10.0 0000:00:11.0 ||"
        ));
        let bound = full_script(&layout, "true", true, false);
        assert!(!bound.contains("POLLNIC_NO_IOMMU"));
        assert!(bound.contains(
            "/work/main/target/debug/pollnic bind 0000:00:08.0 0000:00:0a.0 0000:00:0c.0 \
             0000:00:06.0 0000:00:10.0 0000:00:11.0 ||"
        ));
        // The device pollnic bind refuses goes to vfio-pci by hand.
        assert!(bound.contains("np=/sys/bus/pci/devices/0000:00:12.0\n"));
        assert!(bound.contains("echo vfio-pci > $np/driver_override"));
        assert!(!plain.contains("driver_override"));
        assert!(s.contains("export POLLNIC_VIRTIO_PORT1=0000:00:11.0\n"));
        assert!(s.contains("export POLLNIC_VIRTIO_PORT0_MAC=52:54:00:12:36:01\n"));
        assert!(s.contains("export POLLNIC_VIRTIO_TRANSITIONAL=0000:00:13.0\n"));
    }
}
