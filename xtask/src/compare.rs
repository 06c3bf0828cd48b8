//! `cargo xtask compare`: the receive-path comparison in the testbed. Installs
//! Debian's DPDK and libxdp packages if missing (for the dpdk-testpmd and
//! kernel-afxdp rows), builds the
//! release `compare` example, boots the guest and runs it between the two
//! igb ports (`--family virtio`: the two virtio-net ports); results land in
//! `results/compare-<UTC date>/` (`…-virtio/`) in the repo.

use anyhow::{bail, Result};
use std::path::Path;

use crate::cmd::shell_join;
use crate::layout::Layout;
use crate::qemu::{self, RunOutcome, VmOptions};
use crate::{apt, cargo, guest, say};

/// Debian packages that give a working `dpdk-testpmd` with the igb PMD and
/// the virtio PMD (`net_virtio`, for `--family virtio`).
pub const DPDK_PACKAGES: &[&str] = &[
    "dpdk-dev",
    "librte-net-e1000-23",
    "librte-net-virtio23",
    "librte-mempool-ring23",
];

/// Whether testpmd and both PMDs the comparison drives are installed.
fn dpdk_installed() -> bool {
    let pmds = Path::new("/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0");
    Path::new("/usr/bin/dpdk-testpmd").exists()
        && ["librte_net_e1000.so.23.0", "librte_net_virtio.so.23.0"]
            .iter()
            .all(|f| pmds.join(f).exists())
}

/// Debian package with libxdp (`libxdp.so.1`, and libxdp's XSK and dispatcher
/// BPF objects under `/usr/lib/<triplet>/bpf/`) for the kernel-afxdp row,
/// which loads it at run time; it pulls in libbpf1. No compiler or headers
/// are needed: the BPF program ships compiled in the package.
pub const AFXDP_PACKAGES: &[&str] = &["libxdp1"];

/// Whether `libxdp.so.1` is where the dynamic loader finds it.
fn libxdp_installed() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
        "/usr/local/lib",
    ]
    .iter()
    .any(|d| Path::new(d).join("libxdp.so.1").exists())
}

/// Install what the comparison's peer rows need, unless already there:
/// DPDK (dpdk-testpmd row) and libxdp (kernel-afxdp row). A failure is
/// reported and the row will say why it is missing.
pub fn ensure_peers() {
    let mut want: Vec<&str> = Vec::new();
    if !dpdk_installed() {
        want.extend(DPDK_PACKAGES);
    }
    if !libxdp_installed() {
        want.extend(AFXDP_PACKAGES);
    }
    if want.is_empty() {
        return;
    }
    say!(
        "compare: installing for the dpdk-testpmd and kernel-afxdp rows: {}",
        want.join(" ")
    );
    if let Err(e) = apt::update().and_then(|_| apt::install(&want, None)) {
        say!(
            "compare: could not install {} ({e:#}); the rows that need them will say so",
            want.join(" ")
        );
    }
}

/// The port pair `cargo xtask compare` runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    /// igb ports 0 and 1 (`$POLLNIC_PORT0` sends, `$POLLNIC_PORT1` receives).
    Igb,
    /// The virtio-net ports (`$POLLNIC_VIRTIO_PORT0` sends,
    /// `$POLLNIC_VIRTIO_PORT1` receives); the kernel rows use `virtio_net`.
    Virtio,
}

impl Family {
    /// The guest's variables of the sending and the receiving port.
    fn port_vars(self) -> (&'static str, &'static str) {
        match self {
            Family::Igb => ("POLLNIC_PORT0", "POLLNIC_PORT1"),
            Family::Virtio => ("POLLNIC_VIRTIO_PORT0", "POLLNIC_VIRTIO_PORT1"),
        }
    }
}

/// Build, boot, run `compare` on `family`'s ports with `extra` arguments;
/// returns the guest's outcome.
pub fn run(
    layout: &Layout,
    opts: &VmOptions,
    no_dpdk: bool,
    family: Family,
    extra: &[String],
) -> Result<RunOutcome> {
    if !no_dpdk {
        ensure_peers();
    }
    let image = guest::prepare(layout)?;
    cargo::run(
        layout,
        &[
            "build",
            "--release",
            "-p",
            "pollnic-tools",
            "--example",
            "compare",
            // The pollnic-fwd-* rows of `--forward` run the fwd example.
            "--example",
            "fwd",
        ],
    )?;
    cargo::build_pollnic_cli(layout)?;
    let exe = layout.target.join("release/examples/compare");
    if !exe.is_file() {
        bail!("{} was not built", exe.display());
    }
    let date = chrono_free_utc_date();
    let out = layout.repo.join(match family {
        Family::Igb => format!("results/compare-{date}"),
        Family::Virtio => format!("results/compare-{date}-virtio"),
    });
    let given = |flag: &str| {
        extra
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    let mut defaults = String::new();
    if !given("--out") {
        defaults += &format!("--out {} ", shell_join([&out]));
    }
    if !given("--label") {
        defaults += &format!(
            "--label {} ",
            shell_join([match family {
                Family::Igb => format!("(QEMU/TCG testbed, {date})"),
                Family::Virtio => format!("(QEMU/TCG testbed, virtio-net ports, {date})"),
            }])
        );
    }
    // The family's ports unless the arguments name others (e.g. `--rx
    // 0000:00:10.0 --tx 0000:00:11.0`: the virtio-net family the other way
    // round, to receive on the port that offers only the split ring).
    let (tx, rx) = family.port_vars();
    let mut ports = String::new();
    if !given("--tx") {
        ports += &format!("--tx \"${tx}\" ");
    }
    if !given("--rx") {
        ports += &format!("--rx \"${rx}\" ");
    }
    let script = format!(
        "{} {ports}{defaults}{}\n",
        shell_join([&exe]),
        shell_join(extra)
    );
    qemu::run_in_guest(layout, &image, &script, opts)
}

/// Today's UTC date as YYYY-MM-DD, from `date -u` (no date crate needed).
fn chrono_free_utc_date() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "undated".into())
}
