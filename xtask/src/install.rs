//! `cargo xtask setup`: install what the testbed needs, and nothing more.
//!
//! * QEMU >= 8.1 (the `igb` device model; bookworm's own 7.2 is too old): from
//!   `<codename>-backports`, whose source is added from the machine's own mirror if missing.
//! * `busybox-static` (the initramfs's only userland), `kmod` (for `depmod`).
//! * Debian's guest kernel, downloaded with `apt-get download` into `target/testbed/` and
//!   unpacked there with `dpkg-deb -x` (never installed), then indexed with `depmod -b`.
//!
//! Everything is checked first; when all is present this takes well under a second.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::layout::Layout;
use crate::{apt, cmd, elf, say};

/// The oldest QEMU with the `igb` device model.
pub const MIN_QEMU: (u32, u32) = (8, 1);
/// The QEMU binary the testbed runs.
pub const QEMU: &str = "qemu-system-x86_64";
/// Where `busybox-static` puts its binary.
pub const BUSYBOX: &str = "/bin/busybox";
/// The metapackage naming the current guest kernel.
const KERNEL_META: &str = "linux-image-amd64";
/// Written into an unpacked kernel tree once it is complete (unpacked and depmod'ed).
const READY_STAMP: &str = ".pollnic-ready";

/// An unpacked Debian kernel package, ready to boot and to take modules from.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The kernel release, e.g. `6.1.0-57-amd64`.
    pub version: String,
    /// The root of the unpacked package.
    pub root: PathBuf,
}

impl Kernel {
    /// `boot/vmlinuz-<version>`.
    pub fn vmlinuz(&self) -> PathBuf {
        self.root
            .join("boot")
            .join(format!("vmlinuz-{}", self.version))
    }

    /// `lib/modules/<version>`, holding `modules.dep` after setup.
    pub fn modules_dir(&self) -> PathBuf {
        self.root.join("lib/modules").join(&self.version)
    }

    /// `boot/config-<version>`.
    pub fn config(&self) -> PathBuf {
        self.root
            .join("boot")
            .join(format!("config-{}", self.version))
    }
}

/// Tracks whether `apt-get update` already ran in this process (run it at most once).
#[derive(Default)]
struct Apt {
    updated: bool,
}

impl Apt {
    fn update_once(&mut self) -> Result<()> {
        if !self.updated {
            apt::update()?;
            self.updated = true;
        }
        Ok(())
    }

    fn install(&mut self, packages: &[&str], release: Option<&str>) -> Result<()> {
        cmd::require_root(&format!("installing {}", packages.join(" ")))?;
        self.update_once()?;
        apt::install(packages, release)
    }
}

/// Checks everything, installs what is missing, and returns the guest kernel.
pub fn setup(layout: &Layout) -> Result<Kernel> {
    apt::require_debian()?;
    let mut apt = Apt::default();

    // Host tools from the release itself, installed in one go.
    let mut missing = Vec::new();
    match busybox_is_static() {
        Ok(true) => {}
        Ok(false) => {
            say!("setup: {BUSYBOX} is not statically linked: need busybox-static");
            missing.push("busybox-static");
        }
        Err(why) => {
            say!("setup: {BUSYBOX}: {why:#}: need busybox-static");
            missing.push("busybox-static");
        }
    }
    if cmd::find_program("depmod").is_none() {
        say!("setup: depmod not found: need kmod");
        missing.push("kmod");
    }
    if !missing.is_empty() {
        apt.install(&missing, None)?;
        if !busybox_is_static().unwrap_or(false) {
            bail!("busybox-static is installed but {BUSYBOX} is still not a static binary");
        }
    }

    let qemu = ensure_qemu(&mut apt)?;
    let kernel = ensure_kernel(layout, &mut apt)?;
    say!(
        "setup: ready: QEMU {}.{}.{}, static busybox, depmod, guest kernel {}",
        qemu.0,
        qemu.1,
        qemu.2,
        kernel.version
    );
    Ok(kernel)
}

fn busybox_is_static() -> Result<bool> {
    let image = fs::read(BUSYBOX).with_context(|| format!("cannot read {BUSYBOX}"))?;
    elf::is_static(&image)
}

/// Parses `QEMU emulator version 10.0.2 (Debian ...)`.
pub fn parse_qemu_version(text: &str) -> Option<(u32, u32, u32)> {
    let rest = &text[text.find("version ")? + "version ".len()..];
    let token = rest.split_whitespace().next()?;
    let mut parts = token.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
    });
    let major = parts.next()?.ok()?;
    let minor = parts.next().and_then(Result::ok).unwrap_or(0);
    let patch = parts.next().and_then(Result::ok).unwrap_or(0);
    Some((major, minor, patch))
}

fn qemu_version() -> Option<(u32, u32, u32)> {
    let out = Command::new(QEMU).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_qemu_version(&String::from_utf8_lossy(&out.stdout))
}

fn new_enough(v: (u32, u32, u32)) -> bool {
    (v.0, v.1) >= MIN_QEMU
}

fn ensure_qemu(apt: &mut Apt) -> Result<(u32, u32, u32)> {
    let version = match qemu_version() {
        Some(v) if new_enough(v) => v,
        found => {
            match found {
                Some(v) => say!(
                    "setup: {QEMU} is {}.{}.{}, older than {}.{}",
                    v.0,
                    v.1,
                    v.2,
                    MIN_QEMU.0,
                    MIN_QEMU.1
                ),
                None => say!("setup: {QEMU} not found"),
            }
            cmd::require_root("installing QEMU")?;
            let codename = apt::codename(Path::new("/"))?;
            let backports = format!("{codename}-backports");
            if apt::ensure_backports(Path::new("/"), &codename)? {
                apt.updated = false;
            }
            apt.install(&["qemu-system-x86"], Some(&backports))?;
            match qemu_version() {
                Some(v) if new_enough(v) => v,
                Some(v) => bail!(
                    "installed qemu-system-x86 from {backports}, but {QEMU} is still {}.{}.{}",
                    v.0,
                    v.1,
                    v.2
                ),
                None => bail!("installed qemu-system-x86, but `{QEMU} --version` still fails"),
            }
        }
    };
    let devices = cmd::output(Command::new(QEMU).args(["-device", "help"]))?;
    if !devices.contains("name \"igb\"") {
        bail!("{QEMU} has no `igb` device model; the testbed needs it");
    }
    Ok(version)
}

/// The versioned kernel package behind `linux-image-amd64`, e.g. `linux-image-6.1.0-57-amd64`.
fn current_kernel_package(apt: &mut Apt) -> Result<String> {
    let pick = |deps: Vec<String>| deps.into_iter().find(|d| d.starts_with("linux-image-"));
    if let Some(pkg) = pick(apt::depends(KERNEL_META)?) {
        return Ok(pkg);
    }
    say!("setup: apt knows no {KERNEL_META}: refreshing the package lists");
    apt.update_once()?;
    pick(apt::depends(KERNEL_META)?)
        .with_context(|| format!("`apt-cache depends {KERNEL_META}` names no linux-image package"))
}

fn ensure_kernel(layout: &Layout, apt: &mut Apt) -> Result<Kernel> {
    let package = current_kernel_package(apt)?;
    let version = package
        .strip_prefix("linux-image-")
        .expect("picked by prefix")
        .to_owned();
    let kernels = layout.testbed.join("kernel");
    let kernel = Kernel {
        version: version.clone(),
        root: kernels.join(&version),
    };
    if kernel.root.join(READY_STAMP).exists() {
        return Ok(kernel);
    }

    fs::create_dir_all(&layout.testbed)
        .with_context(|| format!("creating {}", layout.testbed.display()))?;
    let deb = match apt::find_deb(&package, &layout.testbed)? {
        Some(deb) => deb,
        None => match apt::download(&package, &layout.testbed) {
            Ok(deb) => deb,
            // Stale package lists point at files the mirror no longer has: refresh, retry.
            Err(err) if !apt.updated && cmd::is_root() => {
                say!("setup: download failed ({err:#}); refreshing the package lists and retrying");
                apt.update_once()?;
                apt::download(&package, &layout.testbed)?
            }
            Err(err) => return Err(err),
        },
    };

    let staging = kernels.join(format!("{version}.partial.{}", std::process::id()));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    if kernel.root.exists() {
        fs::remove_dir_all(&kernel.root)?;
    }
    fs::create_dir_all(&staging)?;
    say!("setup: dpkg-deb -x {} {}", deb.display(), staging.display());
    cmd::run_captured(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&staging))?;
    let depmod = cmd::find_program("depmod").context("depmod not found (package kmod)")?;
    say!("setup: depmod -b {} {version}", staging.display());
    cmd::run_captured(Command::new(depmod).arg("-b").arg(&staging).arg(&version))?;
    if let Err(err) = fs::rename(&staging, &kernel.root) {
        // Another setup running concurrently may have finished first.
        let _ = fs::remove_dir_all(&staging);
        if kernel.root.join(READY_STAMP).exists() {
            return Ok(kernel);
        }
        return Err(err)
            .with_context(|| format!("moving the kernel into {}", kernel.root.display()));
    }

    let vmlinuz = kernel.vmlinuz();
    if !vmlinuz.is_file() || !kernel.modules_dir().join("modules.dep").is_file() {
        bail!(
            "{} does not hold {} and modules.dep: is {package} really a kernel image package?",
            kernel.root.display(),
            vmlinuz.display()
        );
    }
    ensure_decompressor(&kernel, apt)?;
    fs::write(kernel.root.join(READY_STAMP), format!("{package}\n"))?;
    remove_stale(&layout.testbed, &kernels, &package, &version);
    say!(
        "setup: guest kernel {version} unpacked in {}",
        kernel.root.display()
    );
    Ok(kernel)
}

/// Which host tool decompresses this kernel's modules (busybox insmod may not), if any.
pub fn module_compression(kernel: &Kernel) -> Result<Option<(&'static str, &'static str)>> {
    let config = fs::read_to_string(kernel.config())
        .with_context(|| format!("reading {}", kernel.config().display()))?;
    let has = |opt: &str| config.lines().any(|l| l == format!("{opt}=y"));
    Ok(if has("CONFIG_MODULE_COMPRESS_XZ") {
        Some(("xz", "xz-utils"))
    } else if has("CONFIG_MODULE_COMPRESS_ZSTD") {
        Some(("zstd", "zstd"))
    } else if has("CONFIG_MODULE_COMPRESS_GZIP") {
        Some(("gzip", "gzip"))
    } else {
        None
    })
}

fn ensure_decompressor(kernel: &Kernel, apt: &mut Apt) -> Result<()> {
    if let Some((tool, package)) = module_compression(kernel)? {
        if cmd::find_program(tool).is_none() {
            say!("setup: kernel modules are compressed and {tool} is missing");
            apt.install(&[package], None)?;
        }
    }
    Ok(())
}

/// Drops downloads and unpacked trees of kernels other than the current one.
fn remove_stale(testbed: &Path, kernels: &Path, package: &str, version: &str) {
    let entries = |dir: &Path| {
        fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    for path in entries(testbed) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("linux-image-")
            && name.ends_with(".deb")
            && !name.starts_with(&format!("{package}_"))
        {
            say!("setup: removing stale {}", path.display());
            let _ = fs::remove_file(&path);
        }
    }
    for path in entries(kernels) {
        if path.file_name().and_then(|n| n.to_str()) != Some(version) {
            say!("setup: removing stale {}", path.display());
            let _ = fs::remove_dir_all(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_versions() {
        let text = "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\nCopyright";
        assert_eq!(parse_qemu_version(text), Some((10, 0, 2)));
        assert_eq!(
            parse_qemu_version("QEMU emulator version 7.2.15"),
            Some((7, 2, 15))
        );
        assert_eq!(
            parse_qemu_version("QEMU emulator version 8.1"),
            Some((8, 1, 0))
        );
        assert_eq!(parse_qemu_version("nothing here"), None);
        assert!(new_enough((8, 1, 0)) && new_enough((10, 0, 2)));
        assert!(!new_enough((7, 2, 15)) && !new_enough((8, 0, 4)));
    }
}
