//! `cargo xtask setup`: install what the testbed needs, and nothing more.
//!
//! * QEMU >= 8.1 (the `igb` device model; bookworm's own 7.2 is too old): from
//!   `<codename>-backports`, whose source is added from the machine's own mirror if missing.
//! * `busybox-static` (the initramfs's only userland), `kmod` (for `depmod`), `iproute2` and
//!   `util-linux` (`ip` and `unshare`: the virtio-net ports' taps in a private network namespace).
//! * Debian's guest kernel, downloaded with `apt-get download` into `target/testbed/` and
//!   unpacked there with `dpkg-deb -x` (never installed), then indexed with `depmod -b`.
//!   Two flavours ([`GuestKernel`]): `current`, the newest kernel of
//!   `<next release>-backports` (today trixie-backports, 7.x), read through a private apt
//!   tree in `target/testbed/apt/` so that the host's own sources are never touched; and
//!   `lts`, the host release's own `linux-image-amd64` (bookworm: 6.1).
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
/// The variable that picks the guest kernel when `--guest-kernel` is not given.
pub const GUEST_KERNEL_VAR: &str = "POLLNIC_GUEST_KERNEL";

/// Which Debian kernel the guest boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GuestKernel {
    /// The newest kernel in the next Debian release's backports (trixie-backports: 7.x), the
    /// default: AF_XDP zero-copy on igb (Linux >= 6.14), current busy polling and NAPI.
    Current,
    /// The host release's own kernel (bookworm: 6.1), the long-term baseline.
    Lts,
}

impl GuestKernel {
    /// `--guest-kernel` if given, else `$POLLNIC_GUEST_KERNEL`, else `current`.
    pub fn choose(flag: Option<GuestKernel>) -> Result<GuestKernel> {
        if let Some(k) = flag {
            return Ok(k);
        }
        match std::env::var(GUEST_KERNEL_VAR) {
            Err(_) => Ok(GuestKernel::Current),
            Ok(v) => <GuestKernel as clap::ValueEnum>::from_str(&v, true).map_err(|_| {
                anyhow::anyhow!("{GUEST_KERNEL_VAR}={v:?}: expected `current` or `lts`")
            }),
        }
    }

    /// The directory name under `target/testbed/kernel/`.
    pub fn name(self) -> &'static str {
        match self {
            GuestKernel::Current => "current",
            GuestKernel::Lts => "lts",
        }
    }
}

/// An unpacked Debian kernel package, ready to boot and to take modules from.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The kernel release, e.g. `6.1.0-57-amd64` or `7.3.4+deb13-amd64`.
    pub version: String,
    /// The root of the unpacked package(s).
    pub root: PathBuf,
}

impl Kernel {
    /// The bzImage: `boot/vmlinuz-<version>` (Debian up to 6.x) or
    /// `usr/lib/modules/<version>/vmlinuz` (Debian's 7.x packaging).
    pub fn vmlinuz(&self) -> PathBuf {
        let old = self
            .root
            .join("boot")
            .join(format!("vmlinuz-{}", self.version));
        if old.exists() {
            old
        } else {
            self.modules_dir().join("vmlinuz")
        }
    }

    /// `lib/modules/<version>`, holding `modules.dep` after setup (7.x packages put their
    /// modules under `usr/lib`; setup links `lib` to it).
    pub fn modules_dir(&self) -> PathBuf {
        self.root.join("lib/modules").join(&self.version)
    }

    /// The kernel's build configuration: `boot/config-<version>` or, in 7.x packaging,
    /// `usr/lib/modules/<version>/config`.
    pub fn config(&self) -> PathBuf {
        let old = self
            .root
            .join("boot")
            .join(format!("config-{}", self.version));
        if old.exists() {
            old
        } else {
            self.modules_dir().join("config")
        }
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
    // The virtio-net ports' taps and bridge, in QEMU's own network
    // namespace (qemu.rs, `in_private_net`).
    if cmd::find_program("ip").is_none() {
        say!("setup: ip not found: need iproute2");
        missing.push("iproute2");
    }
    if cmd::find_program("unshare").is_none() {
        say!("setup: unshare not found: need util-linux");
        missing.push("util-linux");
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
        "setup: ready: QEMU {}.{}.{}, static busybox, depmod, ip, unshare, guest kernel {}",
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

/// The backports suite whose newest kernel the `current` flavour boots.
const CURRENT_SUITE: &str = "trixie-backports";
/// Refresh the private package lists when they are older than this.
const PRIVATE_LISTS_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Where the kernel's packages come from: the host's apt, or a private apt tree that reads
/// [`CURRENT_SUITE`] from the host's own mirror without touching `/etc/apt`.
enum Packages {
    Host,
    Private(apt::Private),
}

impl Packages {
    fn depends(&self, package: &str) -> Result<Vec<String>> {
        match self {
            Packages::Host => apt::depends(package),
            Packages::Private(p) => p.depends(package),
        }
    }

    fn download(&self, packages: &[String], dir: &Path) -> Result<()> {
        match self {
            Packages::Host => apt::download(packages, dir),
            Packages::Private(p) => p.download(packages, dir),
        }
    }

    /// Refreshes the package lists (at most once per process for the host's).
    fn refresh(&mut self, host: &mut Apt) -> Result<()> {
        match self {
            Packages::Host => host.update_once(),
            Packages::Private(p) => p.update(),
        }
    }

    fn can_refresh(&self, host: &Apt) -> bool {
        match self {
            Packages::Host => !host.updated && cmd::is_root(),
            Packages::Private(_) => true,
        }
    }
}

fn packages_for(layout: &Layout) -> Result<Packages> {
    Ok(match layout.guest_kernel {
        GuestKernel::Lts => Packages::Host,
        GuestKernel::Current => {
            let private =
                apt::Private::new(&layout.testbed.join("apt"), CURRENT_SUITE, Path::new("/"))?;
            if private
                .lists_age()
                .is_none_or(|age| age > PRIVATE_LISTS_MAX_AGE)
            {
                private.update()?;
            }
            Packages::Private(private)
        }
    })
}

/// Downloads `names` into `dir` from where this flavour's kernel comes from (the private
/// trixie-backports tree for `current`, the host's apt for `lts`), refreshing stale package
/// lists once if the download fails. Used for the kernel's source and headers
/// ([`crate::noiommu_kmod`]).
pub fn download_kernel_packages(layout: &Layout, names: &[String], dir: &Path) -> Result<()> {
    let mut apt = Apt::default();
    let mut packages = packages_for(layout)?;
    match packages.download(names, dir) {
        Ok(()) => Ok(()),
        Err(err) if packages.can_refresh(&apt) => {
            say!("setup: download failed ({err:#}); refreshing the package lists and retrying");
            packages.refresh(&mut apt)?;
            packages.download(names, dir)
        }
        Err(err) => Err(err),
    }
}

/// The versioned kernel package behind `linux-image-amd64`, e.g. `linux-image-6.1.0-57-amd64`.
fn current_kernel_package(packages: &mut Packages, apt: &mut Apt) -> Result<String> {
    let pick = |deps: Vec<String>| deps.into_iter().find(|d| d.starts_with("linux-image-"));
    if let Some(pkg) = pick(packages.depends(KERNEL_META)?) {
        return Ok(pkg);
    }
    say!("setup: apt knows no {KERNEL_META}: refreshing the package lists");
    packages.refresh(apt)?;
    pick(packages.depends(KERNEL_META)?)
        .with_context(|| format!("`apt-cache depends {KERNEL_META}` names no linux-image package"))
}

/// The packages that hold a kernel's files: the image package itself and, in Debian's 7.x
/// packaging (where `linux-image-<ver>` is empty), its `linux-binary-`, `linux-modules-` and
/// `linux-base-<ver>` dependencies.
pub fn kernel_file_packages(image: &str, version: &str, deps: &[String]) -> Vec<String> {
    let suffix = format!("-{version}");
    let mut out = vec![image.to_owned()];
    out.extend(
        deps.iter()
            .filter(|d| d.starts_with("linux-") && d.ends_with(&suffix) && *d != image)
            .cloned(),
    );
    out
}

fn ensure_kernel(layout: &Layout, apt: &mut Apt) -> Result<Kernel> {
    let flavour = layout.guest_kernel;
    let mut packages = packages_for(layout)?;
    let package = current_kernel_package(&mut packages, apt)?;
    let version = package
        .strip_prefix("linux-image-")
        .expect("picked by prefix")
        .to_owned();
    let kernels = layout.testbed.join("kernel").join(flavour.name());
    let kernel = Kernel {
        version: version.clone(),
        root: kernels.join(&version),
    };
    if kernel.root.join(READY_STAMP).exists() {
        return Ok(kernel);
    }

    let debs = layout.testbed.join("debs").join(flavour.name());
    fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    let wanted = kernel_file_packages(&package, &version, &packages.depends(&package)?);
    let missing: Vec<String> = wanted
        .iter()
        .filter(|p| apt::find_deb(p, &debs).ok().flatten().is_none())
        .cloned()
        .collect();
    if !missing.is_empty() {
        match packages.download(&missing, &debs) {
            Ok(()) => {}
            // Stale package lists point at files the mirror no longer has: refresh, retry.
            Err(err) if packages.can_refresh(apt) => {
                say!("setup: download failed ({err:#}); refreshing the package lists and retrying");
                packages.refresh(apt)?;
                packages.download(&missing, &debs)?;
            }
            Err(err) => return Err(err),
        }
    }

    let staging = kernels.join(format!("{version}.partial.{}", std::process::id()));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    if kernel.root.exists() {
        fs::remove_dir_all(&kernel.root)?;
    }
    fs::create_dir_all(&staging)?;
    for name in &wanted {
        let deb = apt::find_deb(name, &debs)?
            .with_context(|| format!("{name}_*.deb is missing from {}", debs.display()))?;
        say!("setup: dpkg-deb -x {} {}", deb.display(), staging.display());
        cmd::run_captured(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&staging))?;
    }
    // 7.x packages install under usr/lib only; the host's depmod (bookworm's kmod 30) looks
    // for <root>/lib/modules.
    if staging.join("usr/lib/modules").is_dir() && !staging.join("lib").exists() {
        std::os::unix::fs::symlink("usr/lib", staging.join("lib"))
            .context("linking lib -> usr/lib in the unpacked kernel")?;
    }
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
    fs::write(
        kernel.root.join(READY_STAMP),
        format!("{}\n", wanted.join(" ")),
    )?;
    remove_stale(layout, &debs, &kernels, &version);
    say!(
        "setup: guest kernel {version} ({}) unpacked in {}",
        flavour.name(),
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

/// The paths in `dir` (none when it cannot be read).
pub(crate) fn entries(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// The last component of `p` as text ("" when there is none, or it is not UTF-8).
pub(crate) fn name(p: &Path) -> String {
    p.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_owned()
}

/// Drops this flavour's downloads and unpacked trees of other kernel versions, and what the
/// testbed's older layout left directly in `target/testbed/` (`linux-image-*.deb`,
/// `kernel/<version>/`).
fn remove_stale(layout: &Layout, debs: &Path, kernels: &Path, version: &str) {
    let marker = format!("-{version}_");
    for path in entries(debs) {
        if name(&path).ends_with(".deb") && !name(&path).contains(&marker) {
            say!("setup: removing stale {}", path.display());
            let _ = fs::remove_file(&path);
        }
    }
    for path in entries(kernels) {
        if name(&path) != version {
            say!("setup: removing stale {}", path.display());
            let _ = fs::remove_dir_all(&path);
        }
    }
    for path in entries(&layout.testbed) {
        if name(&path).starts_with("linux-image-") && name(&path).ends_with(".deb") {
            say!("setup: removing stale {}", path.display());
            let _ = fs::remove_file(&path);
        }
    }
    for path in entries(&layout.testbed.join("kernel")) {
        if !matches!(name(&path).as_str(), "current" | "lts") {
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

    #[test]
    fn seven_x_kernels_take_their_files_from_the_versioned_dependencies() {
        let v = "7.3.4+deb13-amd64";
        let deps: Vec<String> = [
            "linux-base",
            "linux-initramfs-tool",
            "linux-base-7.3.4+deb13-amd64",
            "linux-binary-7.3.4+deb13-amd64",
            "linux-modules-7.3.4+deb13-amd64",
            "linux-doc-7.3",
        ]
        .map(String::from)
        .to_vec();
        let image = format!("linux-image-{v}");
        assert_eq!(
            kernel_file_packages(&image, v, &deps),
            [
                image.as_str(),
                "linux-base-7.3.4+deb13-amd64",
                "linux-binary-7.3.4+deb13-amd64",
                "linux-modules-7.3.4+deb13-amd64"
            ]
        );
        // 6.1: the image package holds everything.
        let old = ["linux-base", "initramfs-tools", "kmod"].map(String::from);
        assert_eq!(
            kernel_file_packages("linux-image-6.1.0-57-amd64", "6.1.0-57-amd64", &old),
            ["linux-image-6.1.0-57-amd64"]
        );
    }

    #[test]
    fn guest_kernel_flag_beats_the_variable() {
        assert_eq!(
            GuestKernel::choose(Some(GuestKernel::Lts)).unwrap(),
            GuestKernel::Lts
        );
    }
}
