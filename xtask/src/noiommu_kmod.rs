//! VFIO modules with `CONFIG_VFIO_NOIOMMU=y` for the no-IOMMU guest (`cargo xtask vm --no-iommu`).
//!
//! Debian builds its kernels with `# CONFIG_VFIO_NOIOMMU is not set`, so its `vfio.ko` has no
//! `enable_unsafe_noiommu_mode` parameter. This rebuilds the VFIO modules of exactly the guest
//! kernel from Debian's own source package, with that one option turned on:
//!
//! 1. download `linux-source-<major.minor>` and `linux-headers-<version>` from where the kernel
//!    came from (the private trixie-backports tree for `current`), into
//!    `target/testbed/vfio-noiommu/debs/`;
//! 2. unpack the source tree into `target/testbed/vfio-noiommu/build/`, take the kernel's
//!    exact build configuration (`.config`) and `Module.symvers` from the headers package, set
//!    `CONFIG_VFIO_NOIOMMU=y`, `make olddefconfig` and refuse if Kconfig changed anything but
//!    the toolchain's own capabilities ([`unexpected_changes`]);
//! 3. `make modules_prepare` and `make M=drivers/vfio modules` (which builds `pci/` too), with
//!    `KERNELRELEASE=<version>` so that the vermagic is the kernel's, using the host's gcc;
//! 4. check each module's vermagic against the kernel's own `vfio.ko`, strip debug info, and
//!    keep only the four modules in `target/testbed/vfio-noiommu/<version>/` with a stamp
//!    ([`stamp`]: kernel version and [`RECIPE`]). The build tree is removed.
//!
//! A warm run reads the stamp and does nothing else. The guest loads the modules unsigned (the
//! kernel has `MODULE_SIG` without `MODULE_SIG_FORCE`: it loads them and taints itself `E`, and
//! `O` for out-of-tree).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::install::{self, Kernel};
use crate::layout::Layout;
use crate::{apt, cmd, say};

/// Bump when the build below changes in a way that changes its output.
pub const RECIPE: u32 = 1;

/// The option this is all about.
const OPTION: &str = "VFIO_NOIOMMU";

/// The modules rebuilt, as the initramfs names them (flat file names), and where the build
/// puts them under `drivers/vfio/`. They are rebuilt together: `vfio-pci-core` and `vfio-pci`
/// link against `vfio`'s exports, and a set from one build is consistent by construction.
pub const MODULES: &[(&str, &str)] = &[
    ("vfio.ko", "vfio.ko"),
    ("vfio_iommu_type1.ko", "vfio_iommu_type1.ko"),
    ("vfio-pci-core.ko", "pci/vfio-pci-core.ko"),
    ("vfio-pci.ko", "pci/vfio-pci.ko"),
];

/// The module parameter that turns no-IOMMU mode on (of `vfio.ko`).
pub const PARAMETER: &str = "enable_unsafe_noiommu_mode";

/// Kconfig symbols that `make olddefconfig` may change with another compiler without
/// changing any data structure the modules share with the kernel: the toolchain's versions
/// and capabilities (code generation only), and the Rust side (no C header depends on
/// `CONFIG_RUST`; the host has no bindgen, so Rust and the Rust-only drivers drop out).
const TOOLCHAIN_PREFIXES: &[&str] = &[
    "CC_",
    "GCC_",
    "CLANG_",
    "AS_",
    "LD_",
    "PAHOLE_",
    "RUST",
    "BINDGEN_",
    "TOOLCHAIN_",
];
/// Single symbols that only exist with a Rust toolchain or a newer OpenSSL on the build host
/// (checked for Linux 7.3: Rust PHY drivers, the DRM panic QR code, ML-DSA signing support).
const TOOLCHAIN_SYMBOLS: &[&str] = &[
    "AMCC_QT2025_PHY",
    "AX88796B_RUST_PHY",
    "DRM_PANIC_SCREEN_QR_CODE",
    "DRM_PANIC_SCREEN_QR_CODE_URL",
    "DRM_PANIC_SCREEN_QR_VERSION",
    "OPENSSL_SUPPORTS_ML_DSA",
];

/// Host programs (and the package that has them) the kernel build needs.
const TOOLS: &[(&str, &str)] = &[
    ("make", "make"),
    ("gcc", "gcc"),
    ("ld", "binutils"),
    ("strip", "binutils"),
    ("bc", "bc"),
    ("bison", "bison"),
    ("flex", "flex"),
    ("perl", "perl"),
    // pahole >= 1.22 keeps CONFIG_DEBUG_INFO_BTF, and with it CONFIG_SCHED_CLASS_EXT, which
    // changes `struct task_struct`: without it the config would differ where it matters.
    ("pahole", "dwarves"),
    ("xz", "xz-utils"),
    ("tar", "tar"),
];
/// Host headers the kernel's build tools include.
const HEADERS: &[(&str, &str)] = &[
    ("/usr/include/libelf.h", "libelf-dev"),
    ("/usr/include/openssl/opensslv.h", "libssl-dev"),
];

/// `target/testbed/vfio-noiommu`.
pub fn root(layout: &Layout) -> PathBuf {
    layout.testbed.join("vfio-noiommu")
}

/// `target/testbed/vfio-noiommu/<version>`: the modules of one kernel.
pub fn modules_dir(layout: &Layout, kernel: &Kernel) -> PathBuf {
    root(layout).join(&kernel.version)
}

/// What the stamp of a finished build holds: equal text means the modules are current.
pub fn stamp(version: &str) -> String {
    format!("recipe {RECIPE}\nkernel {version}\noption CONFIG_{OPTION}=y\n")
}

const STAMP_FILE: &str = ".pollnic-ready";

/// `7.3.4+deb13-amd64` → `linux-source-7.3`; `6.1.0-57-amd64` → `linux-source-6.1`.
pub fn source_package(version: &str) -> Result<String> {
    let upstream = version.split(['-', '+']).next().unwrap_or("");
    let mut parts = upstream.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor))
            if !major.is_empty()
                && !minor.is_empty()
                && major
                    .chars()
                    .chain(minor.chars())
                    .all(|c| c.is_ascii_digit()) =>
        {
            Ok(format!("linux-source-{major}.{minor}"))
        }
        _ => bail!("cannot tell the source package of kernel {version:?}"),
    }
}

/// Turns `CONFIG_<name>` on in a `.config` text: replaces `# CONFIG_<name> is not set` or any
/// `CONFIG_<name>=...` line, or appends one (Kconfig then places it).
pub fn enable_option(config: &str, name: &str) -> String {
    let set = format!("CONFIG_{name}=y");
    let unset = format!("# CONFIG_{name} is not set");
    let assign = format!("CONFIG_{name}=");
    let mut found = false;
    let mut out = String::with_capacity(config.len() + set.len() + 1);
    for line in config.lines() {
        if line == unset || line.starts_with(&assign) {
            if !found {
                out.push_str(&set);
                out.push('\n');
            }
            found = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !found {
        out.push_str(&set);
        out.push('\n');
    }
    out
}

/// The `CONFIG_*` assignments of a `.config` (unset options are absent), by name.
fn assignments(config: &str) -> std::collections::BTreeMap<&str, &str> {
    config
        .lines()
        .filter_map(|l| l.strip_prefix("CONFIG_")?.split_once('='))
        .collect()
}

/// One symbol whose value differs between two configurations (`None`: not set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The name without `CONFIG_`.
    pub name: String,
    /// The value before.
    pub before: Option<String>,
    /// The value after.
    pub after: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "(not set)".to_owned());
        write!(
            f,
            "CONFIG_{}: {} -> {}",
            self.name,
            v(&self.before),
            v(&self.after)
        )
    }
}

/// Every symbol whose value differs between `before` and `after`, sorted by name.
pub fn config_changes(before: &str, after: &str) -> Vec<Change> {
    let (a, b) = (assignments(before), assignments(after));
    let mut names: Vec<&str> = a.keys().chain(b.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter(|n| a.get(n) != b.get(n))
        .map(|n| Change {
            name: n.to_owned(),
            before: a.get(n).map(|v| (*v).to_owned()),
            after: b.get(n).map(|v| (*v).to_owned()),
        })
        .collect()
}

/// The changes that are neither the one asked for (`CONFIG_VFIO_NOIOMMU=y`) nor the build
/// host's toolchain ([`TOOLCHAIN_PREFIXES`], [`TOOLCHAIN_SYMBOLS`]). Any of these may change a
/// structure the rebuilt modules share with the running kernel, so the build refuses them.
pub fn unexpected_changes(changes: &[Change]) -> Vec<&Change> {
    changes
        .iter()
        .filter(|c| {
            let wanted = c.name == OPTION && c.after.as_deref() == Some("y");
            let toolchain = TOOLCHAIN_PREFIXES.iter().any(|p| c.name.starts_with(p))
                || TOOLCHAIN_SYMBOLS.contains(&c.name.as_str());
            !wanted && !toolchain
        })
        .collect()
}

/// Makes sure the rebuilt modules of `kernel` exist; returns their directory. Builds them
/// (about two minutes on two cores, most of it unpacking and `modules_prepare`) if not.
pub fn ensure(layout: &Layout, kernel: &Kernel) -> Result<PathBuf> {
    let out = modules_dir(layout, kernel);
    let want = stamp(&kernel.version);
    let complete = MODULES.iter().all(|(name, _)| out.join(name).is_file());
    if complete && fs::read_to_string(out.join(STAMP_FILE)).ok().as_deref() == Some(&want) {
        return Ok(out);
    }
    let started = Instant::now();
    say!(
        "noiommu: building vfio modules with CONFIG_{OPTION}=y for kernel {} (once; cached in {})",
        kernel.version,
        out.display()
    );
    ensure_tools()?;
    let root = root(layout);
    let debs = root.join("debs");
    fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    let source = source_package(&kernel.version)?;
    let headers = format!("linux-headers-{}", kernel.version);
    let names = [source.clone(), headers.clone()];
    let missing: Vec<String> = names
        .iter()
        .filter(|p| apt::find_deb(p, &debs).ok().flatten().is_none())
        .cloned()
        .collect();
    if !missing.is_empty() {
        install::download_kernel_packages(layout, &missing, &debs)?;
    }
    let source_deb = apt::find_deb(&source, &debs)?.context("source package missing")?;
    let headers_deb = apt::find_deb(&headers, &debs)?.context("headers package missing")?;
    let (sv, hv) = (deb_version(&source_deb)?, deb_version(&headers_deb)?);
    if sv != hv {
        bail!(
            "{source} is version {sv} but {headers} is {hv}: the source is not the guest \
             kernel's (remove {} and run again once the mirror has both at one version)",
            debs.display()
        );
    }

    // A build tree private to this process, removed at the end either way.
    let build = root.join(format!("build.{}", std::process::id()));
    if build.exists() {
        fs::remove_dir_all(&build)?;
    }
    let result = build_in(
        &build,
        kernel,
        &source_deb,
        &headers_deb,
        &source,
        &out,
        &want,
    );
    let _ = fs::remove_dir_all(&build);
    result?;
    remove_stale(&root, &kernel.version, &sv);
    say!(
        "noiommu: vfio modules for {} ready in {} ({:.0}s)",
        kernel.version,
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(out)
}

fn build_in(
    build: &Path,
    kernel: &Kernel,
    source_deb: &Path,
    headers_deb: &Path,
    source: &str,
    out: &Path,
    want: &str,
) -> Result<()> {
    let debs_out = build.join("debs");
    fs::create_dir_all(&debs_out)?;
    say!("noiommu: unpacking {}", source_deb.display());
    for deb in [source_deb, headers_deb] {
        cmd::run_captured(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&debs_out))?;
    }
    let tarball = debs_out.join("usr/src").join(format!("{source}.tar.xz"));
    let tree = build.join(source);
    cmd::run_captured(
        Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(build),
    )?;
    let _ = fs::remove_file(&tarball);
    if !tree.join("Makefile").is_file() {
        bail!(
            "{} did not unpack into {}",
            tarball.display(),
            tree.display()
        );
    }
    let hdr = debs_out
        .join("usr/src")
        .join(format!("linux-headers-{}", kernel.version));
    let original = fs::read_to_string(hdr.join(".config"))
        .with_context(|| format!("reading {}/.config", hdr.display()))?;
    fs::copy(hdr.join("Module.symvers"), tree.join("Module.symvers"))
        .with_context(|| format!("copying {}/Module.symvers", hdr.display()))?;
    fs::write(tree.join(".config"), enable_option(&original, OPTION))?;

    let make = |targets: &[&str]| -> Result<()> {
        let mut c = Command::new("nice");
        c.args(["-n", "10", "make", "-j2"])
            .arg(format!("KERNELRELEASE={}", kernel.version))
            // No Rust in these modules: keep a Rust toolchain on PATH out of Kconfig's way.
            .args(["RUSTC=false", "BINDGEN=false"])
            .args(targets)
            .current_dir(&tree)
            .env_remove("MAKEFLAGS");
        say!("noiommu: make {}", targets.join(" "));
        cmd::run_captured(&mut c)
    };
    make(&["olddefconfig"])?;
    let config = fs::read_to_string(tree.join(".config"))?;
    let changes = config_changes(&original, &config);
    let report: String = changes.iter().map(|c| format!("{c}\n")).collect();
    let bad = unexpected_changes(&changes);
    if !bad.is_empty() {
        let list: Vec<String> = bad.iter().map(|c| c.to_string()).collect();
        bail!(
            "with this host's toolchain, Kconfig changes more than CONFIG_{OPTION} in the \
             kernel's config; these may change structures the modules share with the kernel, \
             so the modules would not be safe to load:\n  {}\n(if one is harmless, add it to \
             TOOLCHAIN_SYMBOLS in xtask/src/noiommu_kmod.rs and say why)",
            list.join("\n  ")
        );
    }
    if !changes
        .iter()
        .any(|c| c.name == OPTION && c.after.as_deref() == Some("y"))
    {
        bail!("Kconfig did not keep CONFIG_{OPTION}=y (its dependencies are not met?)");
    }
    say!(
        "noiommu: {} config symbols differ from Debian's, all toolchain or CONFIG_{OPTION}",
        changes.len()
    );
    make(&["modules_prepare"])?;
    make(&["M=drivers/vfio", "modules"])?;

    let vermagic = modinfo_vermagic(&find_kernel_module(kernel, "vfio")?)?;
    let staging = out.with_file_name(format!("{}.partial.{}", kernel.version, std::process::id()));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    for (name, rel) in MODULES {
        let built = tree.join("drivers/vfio").join(rel);
        let got = modinfo_vermagic(&built)?;
        if got != vermagic {
            bail!(
                "{} has vermagic {got:?}, the kernel's vfio.ko {vermagic:?}",
                built.display()
            );
        }
        cmd::run_captured(
            Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(staging.join(name))
                .arg(&built),
        )?;
    }
    let params = cmd::output(
        Command::new(modinfo()?)
            .args(["-F", "parm"])
            .arg(staging.join("vfio.ko")),
    )?;
    if !params.contains(PARAMETER) {
        bail!("the rebuilt vfio.ko has no {PARAMETER} parameter");
    }
    fs::write(staging.join("config-changes.txt"), report)?;
    fs::write(staging.join(STAMP_FILE), want)?;
    if out.exists() {
        fs::remove_dir_all(out)?;
    }
    fs::rename(&staging, out).with_context(|| format!("moving modules into {}", out.display()))?;
    Ok(())
}

/// Installs what the kernel build needs and is missing (needs root then).
fn ensure_tools() -> Result<()> {
    let mut missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(prog, _)| cmd::find_program(prog).is_none())
        .map(|(_, pkg)| *pkg)
        .chain(
            HEADERS
                .iter()
                .filter(|(path, _)| !Path::new(path).exists())
                .map(|(_, pkg)| *pkg),
        )
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    say!(
        "noiommu: the kernel build needs {} (missing)",
        missing.join(" ")
    );
    cmd::require_root("installing the kernel build's tools")?;
    apt::update()?;
    apt::install(&missing, None)
}

fn modinfo() -> Result<PathBuf> {
    cmd::find_program("modinfo").context("modinfo not found (package kmod)")
}

fn modinfo_vermagic(module: &Path) -> Result<String> {
    Ok(cmd::output(
        Command::new(modinfo()?)
            .args(["-F", "vermagic"])
            .arg(module),
    )?
    .trim()
    .to_owned())
}

/// The kernel's own file of module `name` (e.g. `kernel/drivers/vfio/vfio.ko.xz`).
fn find_kernel_module(kernel: &Kernel, name: &str) -> Result<PathBuf> {
    let dep = fs::read_to_string(kernel.modules_dir().join("modules.dep"))?;
    dep.lines()
        .filter_map(|l| l.split_once(':').map(|(p, _)| p))
        .find(|p| crate::kmod::module_name(p) == name)
        .map(|p| kernel.modules_dir().join(p))
        .with_context(|| format!("kernel {} has no module {name}", kernel.version))
}

/// `dpkg-deb -f <deb> Version`.
fn deb_version(deb: &Path) -> Result<String> {
    Ok(
        cmd::output(Command::new("dpkg-deb").arg("-f").arg(deb).arg("Version"))?
            .trim()
            .to_owned(),
    )
}

/// Removes other kernels' modules, other versions' debs, and build trees of killed runs.
fn remove_stale(root: &Path, version: &str, deb_version: &str) {
    use crate::install::{entries, name};
    for path in entries(root) {
        if path.is_dir() && name(&path) != "debs" && name(&path) != version {
            say!("noiommu: removing stale {}", path.display());
            let _ = fs::remove_dir_all(&path);
        }
    }
    let marker = format!("_{}_", deb_version.replace(':', "%3a"));
    for path in entries(&root.join("debs")) {
        if name(&path).ends_with(".deb") && !name(&path).contains(&marker) {
            say!("noiommu: removing stale {}", path.display());
            let _ = fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_packages() {
        assert_eq!(
            source_package("7.3.4+deb13-amd64").unwrap(),
            "linux-source-7.3"
        );
        assert_eq!(
            source_package("6.1.0-57-amd64").unwrap(),
            "linux-source-6.1"
        );
        assert!(source_package("amd64").is_err());
        assert!(source_package("").is_err());
    }

    #[test]
    fn enabling_an_option() {
        let config = "CONFIG_VFIO=m\n# CONFIG_VFIO_NOIOMMU is not set\nCONFIG_VFIO_VIRQFD=y\n";
        assert_eq!(
            enable_option(config, "VFIO_NOIOMMU"),
            "CONFIG_VFIO=m\nCONFIG_VFIO_NOIOMMU=y\nCONFIG_VFIO_VIRQFD=y\n"
        );
        // Already set, set to m, or absent.
        assert_eq!(
            enable_option("CONFIG_VFIO_NOIOMMU=y\n", "VFIO_NOIOMMU"),
            "CONFIG_VFIO_NOIOMMU=y\n"
        );
        assert_eq!(enable_option("CONFIG_X=m\n", "X"), "CONFIG_X=y\n");
        assert_eq!(
            enable_option("CONFIG_A=y\n", "VFIO_NOIOMMU"),
            "CONFIG_A=y\nCONFIG_VFIO_NOIOMMU=y\n"
        );
        // A longer name with the same prefix is left alone.
        assert_eq!(
            enable_option("# CONFIG_VFIO_NOIOMMU_X is not set\n", "VFIO_NOIOMMU"),
            "# CONFIG_VFIO_NOIOMMU_X is not set\nCONFIG_VFIO_NOIOMMU=y\n"
        );
    }

    const BEFORE: &str = "\
CONFIG_CC_VERSION_TEXT=\"x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0\"
CONFIG_GCC_VERSION=140200
CONFIG_CC_HAS_ASM_GOTO_OUTPUT=y
CONFIG_RUST=y
CONFIG_AX88796B_RUST_PHY=y
CONFIG_SCHED_CLASS_EXT=y
CONFIG_VFIO=m
# CONFIG_VFIO_NOIOMMU is not set
";

    #[test]
    fn toolchain_changes_pass_and_others_do_not() {
        let after = "\
CONFIG_CC_VERSION_TEXT=\"gcc (Debian 12.2.0-14+deb12u1) 12.2.0\"
CONFIG_GCC_VERSION=120200
CONFIG_GCC_ASM_GOTO_OUTPUT_BROKEN=y
CONFIG_SCHED_CLASS_EXT=y
CONFIG_VFIO=m
CONFIG_VFIO_NOIOMMU=y
";
        let changes = config_changes(BEFORE, after);
        let names: Vec<&str> = changes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "AX88796B_RUST_PHY",
                "CC_HAS_ASM_GOTO_OUTPUT",
                "CC_VERSION_TEXT",
                "GCC_ASM_GOTO_OUTPUT_BROKEN",
                "GCC_VERSION",
                "RUST",
                "VFIO_NOIOMMU"
            ]
        );
        assert!(unexpected_changes(&changes).is_empty());
        assert_eq!(
            changes.last().unwrap().to_string(),
            "CONFIG_VFIO_NOIOMMU: (not set) -> y"
        );

        // Losing pahole drops BTF and sched_ext, which changes `struct task_struct`.
        let without_ext = after.replace("CONFIG_SCHED_CLASS_EXT=y\n", "");
        let changes = config_changes(BEFORE, &without_ext);
        let bad = unexpected_changes(&changes);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].name, "SCHED_CLASS_EXT");

        // VFIO_NOIOMMU anything but y is not what was asked for.
        let changes = config_changes(BEFORE, &after.replace("NOIOMMU=y", "NOIOMMU=m"));
        assert_eq!(unexpected_changes(&changes).len(), 1);
    }

    #[test]
    fn stamps_name_kernel_and_recipe() {
        let s = stamp("7.3.4+deb13-amd64");
        assert!(s.contains("kernel 7.3.4+deb13-amd64\n"));
        assert!(s.contains(&format!("recipe {RECIPE}\n")));
        assert_ne!(s, stamp("6.1.0-57-amd64"));
    }
}
