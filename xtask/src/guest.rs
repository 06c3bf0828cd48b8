//! `cargo xtask guest`: the initramfs that turns the Debian kernel into a testbed.
//!
//! The archive holds static busybox, the kernel modules the testbed needs (dependency
//! closure from `modules.dep`, in load order, decompressed on the host), and `/init`, which
//!
//! 1. mounts proc/sys/devtmpfs and loads the modules;
//! 2. reserves 2 MiB hugepages;
//! 3. mounts the host root read-only over 9p at `/host` (tmpfs on `/host/tmp` and `/host/run`,
//!    proc/sys/dev/devpts/shm/hugetlbfs inside it) and the read-write shares (the repository,
//!    and the target directory if outside it) at their own absolute paths inside `/host`;
//! 4. runs the per-run script with `chroot /host /bin/sh <script>`, prints
//!    `POLLNIC-EXIT-<nonce>=<code>` on the console, syncs and powers off.
//!
//! Everything run-specific (script path, nonce, shares, hugepages) comes from the kernel
//! command line, so one initramfs serves every run. It is rebuilt only when its inputs change.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::install::{self, Kernel};
use crate::kmod::{ModuleIndex, Want};
use crate::layout::Layout;
use crate::{cmd, cpio, say};

/// Kernel modules the guest loads (with their dependencies), unless built in.
pub const MODULES: &[Want] = &[
    // 9p over virtio: the host root and the read-write shares.
    Want {
        name: "virtio_pci",
        optional: false,
    },
    Want {
        name: "9pnet_virtio",
        optional: false,
    },
    Want {
        name: "9p",
        optional: false,
    },
    // VFIO with the type1 IOMMU backend and the PCI driver the tests bind NICs to.
    Want {
        name: "vfio",
        optional: false,
    },
    Want {
        name: "vfio_iommu_type1",
        optional: false,
    },
    Want {
        name: "vfio_virqfd",
        optional: true,
    },
    Want {
        name: "vfio_pci",
        optional: false,
    },
    // Raw sockets for kernel-path comparisons.
    Want {
        name: "af_packet",
        optional: true,
    },
    // The kernel's own driver, for tests that hand a NIC back to the kernel.
    Want {
        name: "igb",
        optional: false,
    },
    // The kernel's virtio-net driver, for tests and comparison rows that hand a
    // virtio-net port back to the kernel. It takes every virtio-net device at
    // boot (the 9p shares are virtio-9p, not virtio-net); the run script then
    // binds the testbed's virtio-net ports to vfio-pci, as it does the igb ports.
    Want {
        name: "virtio_net",
        optional: false,
    },
    // The kernel's generic userspace I/O driver for PCI (and the uio core
    // it needs): the no-IOMMU guest's way in (docs/no-iommu.md). Loaded in
    // every guest; it takes no device until one is bound to it.
    Want {
        name: "uio_pci_generic",
        optional: false,
    },
    // 802.1Q VLAN devices, for the VLAN offload tests (guest_offload).
    Want {
        name: "8021q",
        optional: false,
    },
];

/// Bump when the archive layout changes in ways the recipe below does not capture.
const FORMAT: u32 = 1;

/// What a run needs to boot: a kernel image and the initramfs.
#[derive(Debug, Clone)]
pub struct GuestImage {
    /// The kernel that boots.
    pub kernel: Kernel,
    /// `target/testbed/initramfs.cpio.gz`.
    pub initramfs: PathBuf,
}

/// Runs setup and builds the initramfs if it is missing or stale: what `vm`, `test` and
/// `demo` call first.
pub fn prepare(layout: &Layout) -> Result<GuestImage> {
    let kernel = install::setup(layout)?;
    build(layout, &kernel, false)
}

/// Builds `target/testbed/initramfs.cpio.gz` for `kernel` (unless up to date and not `force`).
pub fn build(layout: &Layout, kernel: &Kernel, force: bool) -> Result<GuestImage> {
    build_variant(layout, kernel, force, None)
}

/// The no-IOMMU guest's image (`cargo xtask vm --no-iommu`): `image`'s kernel with
/// `target/testbed/initramfs-noiommu.cpio.gz`, which differs from every other guest's
/// initramfs only in its VFIO modules: those rebuilt with `CONFIG_VFIO_NOIOMMU=y`
/// ([`crate::noiommu_kmod`], built once and cached), `vfio.ko` loaded with
/// `enable_unsafe_noiommu_mode=1`.
pub fn for_no_iommu(layout: &Layout, image: &GuestImage) -> Result<GuestImage> {
    let modules = crate::noiommu_kmod::ensure(layout, &image.kernel)?;
    build_variant(layout, &image.kernel, false, Some(&modules))
}

/// The initramfs of every guest (`noiommu_modules` is `None`), or the no-IOMMU guest's, whose
/// VFIO modules come from `noiommu_modules`.
fn build_variant(
    layout: &Layout,
    kernel: &Kernel,
    force: bool,
    noiommu_modules: Option<&Path>,
) -> Result<GuestImage> {
    let modules_dir = kernel.modules_dir();
    let index = ModuleIndex::load(&modules_dir)?;
    let order = index.resolve(MODULES)?;
    let names: Vec<String> = order.iter().map(|p| flat_name(p)).collect();
    let (init, base) = match noiommu_modules {
        None => (render_init(&names), "initramfs"),
        Some(_) => {
            for (rebuilt, _) in crate::noiommu_kmod::MODULES {
                if !names.iter().any(|n| n == rebuilt) {
                    bail!("the guest loads no {rebuilt}, so the rebuilt one has no place");
                }
            }
            (render_init_noiommu(&names), "initramfs-noiommu")
        }
    };
    // The rebuilt module standing in for the kernel's `name`, if any.
    let replacement = |name: &str| {
        noiommu_modules.and_then(|dir| {
            crate::noiommu_kmod::MODULES
                .iter()
                .any(|(m, _)| *m == name)
                .then(|| dir.join(name))
        })
    };

    let initramfs = layout.testbed.join(format!("{base}.cpio.gz"));
    let stamp = layout.testbed.join(format!("{base}.stamp"));
    let mut recipe = recipe(kernel, &order, &init)?;
    if noiommu_modules.is_some() {
        recipe += &format!("variant noiommu {}\n", crate::noiommu_kmod::RECIPE);
        for name in &names {
            if let Some(path) = replacement(name) {
                recipe += &stat_line(&path)?;
            }
        }
    }
    let image = GuestImage {
        kernel: kernel.clone(),
        initramfs: initramfs.clone(),
    };
    if !force && initramfs.is_file() && fs::read_to_string(&stamp).ok().as_deref() == Some(&recipe)
    {
        say!("guest: {} is up to date", initramfs.display());
        return Ok(image);
    }

    say!(
        "guest: building {} (kernel {})",
        initramfs.display(),
        kernel.version
    );
    say!("guest: modules in load order: {}", names.join(" "));
    let decompressor = install::module_compression(kernel)?.map(|(tool, _)| tool);

    let mut archive = cpio::Archive::new();
    for dir in [
        "bin",
        "dev",
        "proc",
        "sys",
        "host",
        "lib",
        "lib/modules",
        "tmp",
    ] {
        archive.dir(dir, 0o755);
    }
    archive.char_dev("dev/console", 0o600, 5, 1);
    archive.char_dev("dev/null", 0o666, 1, 3);
    let busybox = fs::read(install::BUSYBOX)
        .with_context(|| format!("reading {} (run `cargo xtask setup`)", install::BUSYBOX))?;
    archive.file("bin/busybox", 0o755, &busybox);
    archive.symlink("bin/sh", "busybox");
    archive.file("init", 0o755, init.as_bytes());
    for (rel, name) in order.iter().zip(&names) {
        let contents = match replacement(name) {
            Some(path) => fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
            None => read_module(&modules_dir.join(rel), decompressor)?,
        };
        archive.file(&format!("lib/modules/{name}"), 0o644, &contents);
    }
    let bytes = archive.finish();

    // Compress into a private file and rename it into place: a guest booting concurrently
    // sees either the old archive or the new one, never half of one.
    let pid = std::process::id();
    let cpio_tmp = layout.testbed.join(format!("{base}.cpio.{pid}"));
    let gz_tmp = layout.testbed.join(format!("{base}.cpio.gz.{pid}"));
    fs::write(&cpio_tmp, &bytes).with_context(|| format!("writing {}", cpio_tmp.display()))?;
    let gz_file =
        fs::File::create(&gz_tmp).with_context(|| format!("creating {}", gz_tmp.display()))?;
    let gzip = cmd::run(
        Command::new("gzip")
            .args(["-n", "-6", "-c"])
            .arg(&cpio_tmp)
            .stdout(gz_file),
    );
    let _ = fs::remove_file(&cpio_tmp);
    if let Err(err) = gzip {
        let _ = fs::remove_file(&gz_tmp);
        return Err(err);
    }
    fs::rename(&gz_tmp, &initramfs)?;
    fs::write(&stamp, &recipe)?;
    say!(
        "guest: {} ready ({} KiB, {} modules)",
        initramfs.display(),
        fs::metadata(&initramfs)?.len() / 1024,
        names.len()
    );
    Ok(image)
}

/// `kernel/drivers/vfio/pci/vfio-pci.ko.xz` → `vfio-pci.ko` (flat, decompressed).
fn flat_name(rel: &str) -> String {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    match file.find(".ko") {
        Some(i) => format!("{}.ko", &file[..i]),
        None => file.to_owned(),
    }
}

fn read_module(path: &Path, decompressor: Option<&str>) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    if name.ends_with(".ko") {
        return fs::read(path).with_context(|| format!("reading {name}"));
    }
    let tool = match (name.rsplit('.').next(), decompressor) {
        (Some("xz"), _) => "xz",
        (Some("zst"), _) => "zstd",
        (Some("gz"), _) => "gzip",
        (_, Some(tool)) => tool,
        _ => bail!("do not know how to decompress {name}"),
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| {
            format!("cannot run {tool} to decompress {name} (run `cargo xtask setup`)")
        })?;
    if !out.status.success() {
        bail!(
            "{tool} -dc {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// Everything the archive is made of, as text: equal recipes mean an equal archive.
fn recipe(kernel: &Kernel, order: &[String], init: &str) -> Result<String> {
    let stat = stat_line;
    let mut text = format!("format {FORMAT}\nkernel {}\n", kernel.version);
    text += &stat(Path::new(install::BUSYBOX))?;
    for rel in order {
        text += &stat(&kernel.modules_dir().join(rel))?;
    }
    text += init;
    Ok(text)
}

/// `<path> <size> <mtime>` of one input file, for a recipe.
fn stat_line(p: &Path) -> Result<String> {
    let m = fs::metadata(p).with_context(|| format!("reading {}", p.display()))?;
    let mtime = m
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    Ok(format!("{} {} {mtime}\n", p.display(), m.len()))
}

/// The no-IOMMU guest's `/init`: as [`render_init`], but `vfio.ko` (the rebuilt one) is
/// loaded with VFIO's no-IOMMU mode on, so every device bound to vfio-pci without an IOMMU
/// group gets a `vfio-noiommu` group (`/dev/vfio/noiommu-N`).
pub fn render_init_noiommu(modules: &[String]) -> String {
    let param = crate::noiommu_kmod::PARAMETER;
    let loads: String = modules
        .iter()
        .map(|m| {
            if m == "vfio.ko" {
                format!(
                    "insmod /lib/modules/{m} {param}=1 || die \"insmod {m} {param}=1 failed\"\n"
                )
            } else {
                format!("load {m}\n")
            }
        })
        .collect();
    INIT_TEMPLATE.replace("@LOAD_MODULES@\n", &loads)
}

/// The `/init` script; `modules` are file names under `/lib/modules`, in load order.
pub fn render_init(modules: &[String]) -> String {
    let loads: String = modules.iter().map(|m| format!("load {m}\n")).collect();
    INIT_TEMPLATE.replace("@LOAD_MODULES@\n", &loads)
}

const INIT_TEMPLATE: &str = r#"#!/bin/sh
# /init of the pollnic testbed guest, generated by `cargo xtask guest`.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

script= nonce=none rw= hugepages=512 debug=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        pollnic_debug) debug=1 ;;
        pollnic_script=*) script=${arg#*=} ;;
        pollnic_nonce=*) nonce=${arg#*=} ;;
        pollnic_rw=*) rw=${arg#*=} ;;
        pollnic_hugepages=*) hugepages=${arg#*=} ;;
    esac
done

off() {
    sync
    poweroff -f
    echo o > /proc/sysrq-trigger
    sleep 5
}
die() {
    echo "POLLNIC-INIT-FAILED-$nonce: $*"
    off
}
load() {
    insmod "/lib/modules/$1" || die "insmod $1 failed"
}
stage() {
    [ -z "$debug" ] || echo "pollnic-init: $(cut -d' ' -f1 /proc/uptime)s: $*"
}

stage "loading modules"

@LOAD_MODULES@
stage "modules loaded"
ip link set lo up 2>/dev/null
hostname pollnic-guest

echo "$hugepages" > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
got=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
[ "$got" = "$hugepages" ] || echo "pollnic-init: warning: asked for $hugepages hugepages of 2 MiB, got $got"

stage "hugepages reserved"
opts=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$opts,ro,cache=loose" hostroot /host || die "mounting the host root over 9p failed"
mount -t tmpfs -o mode=1777 tmpfs /host/tmp || die "mounting /host/tmp failed"
mount -t tmpfs -o mode=0755 tmpfs /host/run || die "mounting /host/run failed"
mount -t proc proc /host/proc || die "mounting /host/proc failed"
mount -t sysfs sysfs /host/sys || die "mounting /host/sys failed"
mount -t devtmpfs devtmpfs /host/dev || die "mounting /host/dev failed"
mkdir -p /host/dev/pts /host/dev/shm /host/dev/hugepages
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /host/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm
mount -t hugetlbfs hugetlbfs /host/dev/hugepages || die "mounting hugetlbfs failed"
i=0
IFS=,
for path in $rw; do
    # A share under /tmp or /run sits on the fresh tmpfs: create its mount point there.
    [ -d "/host$path" ] || mkdir -p "/host$path"
    mount -t 9p -o "$opts,cache=mmap" "rw$i" "/host$path" || die "mounting share rw$i at $path failed"
    i=$((i + 1))
done
unset IFS

stage "filesystems mounted"
[ -n "$script" ] || die "no pollnic_script= on the kernel command line"
[ -f "/host$script" ] || die "run script $script not found in the guest"
echo "POLLNIC-READY-$nonce"
env -i TERM=linux /bin/chroot /host /bin/sh "$script"
rc=$?
stage "script done"
echo "POLLNIC-EXIT-$nonce=$rc"
off
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_loads_modules_in_order() {
        let init = render_init(&["vfio.ko".into(), "vfio-pci.ko".into()]);
        assert!(init.starts_with("#!/bin/sh\n"));
        let a = init.find("load vfio.ko\n").unwrap();
        let b = init.find("load vfio-pci.ko\n").unwrap();
        assert!(a < b);
        assert!(!init.contains('@'));
    }

    #[test]
    fn noiommu_init_turns_the_mode_on_at_vfio_only() {
        let names = [
            "irqbypass.ko".into(),
            "vfio.ko".into(),
            "vfio-pci.ko".into(),
        ];
        let init = render_init_noiommu(&names);
        assert!(init.contains(
            "insmod /lib/modules/vfio.ko enable_unsafe_noiommu_mode=1 || die \"insmod vfio.ko enable_unsafe_noiommu_mode=1 failed\"\n"
        ));
        assert!(!init.contains("load vfio.ko\n"));
        assert!(init.find("load irqbypass.ko\n").unwrap() < init.find("vfio.ko enable").unwrap());
        assert!(init.find("vfio.ko enable").unwrap() < init.find("load vfio-pci.ko\n").unwrap());
        // Everything else is the ordinary guest's /init.
        assert_eq!(
            init.replace(
                "insmod /lib/modules/vfio.ko enable_unsafe_noiommu_mode=1 || die \"insmod vfio.ko enable_unsafe_noiommu_mode=1 failed\"\n",
                "load vfio.ko\n"
            ),
            render_init(&names)
        );
    }

    #[test]
    fn flat_names() {
        assert_eq!(
            flat_name("kernel/drivers/vfio/pci/vfio-pci.ko.xz"),
            "vfio-pci.ko"
        );
        assert_eq!(flat_name("kernel/fs/9p/9p.ko"), "9p.ko");
    }
}
