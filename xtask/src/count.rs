//! The guest-work counter: a TCG plugin (`xtask/plugin/pollnic_count.c`) that
//! counts, per vCPU, the instructions the guest executes (user, kernel, and the
//! kernel's idle loop apart) and the bytes they load and store. Counts, unlike
//! times, do not depend on how loaded the host is (docs/design/counting.md).
//!
//! [`prepare`] builds the plugin with the host's C compiler and finds the idle
//! loop's addresses (`.cpuidle.text`, from `/proc/kallsyms` of a `nokaslr`
//! boot, cached per guest kernel); [`Count::qemu_arg`] is the `-plugin`
//! argument. A guest booted with it also boots with `nokaslr` and sees the
//! counter file's path in `$POLLNIC_COUNTS`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::guest::GuestImage;
use crate::layout::Layout;
use crate::qemu::{self, VmOptions};
use crate::say;

/// The plugin's source, in the repository.
const SOURCE: &str = "xtask/plugin/pollnic_count.c";

/// The plugin's cache model (`cache=` of the plugin; docs/design/counting.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CacheModel {
    /// No model: the plugin's output and cost are what they were without it.
    #[default]
    Off,
    /// Every RAM access of the counted vCPUs goes through the model.
    On,
    /// Only the accesses inside marked regions (`pollnic_tools::marker`):
    /// cheap enough for the test suite's counting guest.
    Marker,
}

impl CacheModel {
    /// The plugin's word for it.
    pub fn word(self) -> &'static str {
        match self {
            CacheModel::Off => "off",
            CacheModel::On => "on",
            CacheModel::Marker => "marker",
        }
    }
}

/// How the measuring guest loads the counter.
#[derive(Debug, Clone)]
pub struct Count {
    /// The built plugin.
    pub plugin: PathBuf,
    /// `.cpuidle.text` of the guest kernel booted with `nokaslr`: `[start, end)`.
    pub idle: (u64, u64),
    /// `finish_task_switch` of the same kernel (0: unknown), where the plugin
    /// pauses a marked region while another process runs on its vCPU.
    pub switch: u64,
    /// Count bytes loaded and stored too (a callback per memory access: slower).
    pub mem: bool,
    /// Keep the per-block profile (`profile=` of the plugin; off: `profile=0`).
    pub profile: bool,
    /// The cache model (needs `mem`); off adds nothing to the argument.
    pub cache: CacheModel,
}

impl Count {
    /// The `-plugin` argument that writes the counters to `out`.
    pub fn qemu_arg(&self, out: &Path) -> String {
        format!(
            "{},out={},idle_start={:#x},idle_end={:#x},mem={}{}{}{}",
            self.plugin.display(),
            out.display(),
            self.idle.0,
            self.idle.1,
            if self.mem { "on" } else { "off" },
            if self.profile { "" } else { ",profile=0" },
            if self.cache == CacheModel::Off {
                String::new()
            } else {
                format!(",cache={}", self.cache.word())
            },
            if self.switch != 0 {
                format!(",switch={:#x}", self.switch)
            } else {
                String::new()
            }
        )
    }
}

/// Builds the plugin (when its source is newer) and finds the idle range of
/// `image`'s kernel (one short boot the first time, then cached). The cache
/// model needs the memory callbacks (`mem`).
pub fn prepare(
    layout: &Layout,
    image: &GuestImage,
    mem: bool,
    profile: bool,
    cache: CacheModel,
) -> Result<Count> {
    if cache != CacheModel::Off && !mem {
        bail!("the cache model sees the memory accesses: it cannot run with `--count-no-mem`");
    }
    let plugin = build_plugin(layout)?;
    let (idle, switch) = kernel_marks(layout, image)?;
    if switch == 0 {
        say!("count: no finish_task_switch in the guest's kallsyms: marked regions will also count other processes that run on their vCPU");
    }
    Ok(Count {
        plugin,
        idle,
        switch,
        mem,
        profile,
        cache,
    })
}

fn build_plugin(layout: &Layout) -> Result<PathBuf> {
    let src = layout.repo.join(SOURCE);
    let out = layout.testbed.join("pollnic-count.so");
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(s), Some(o)) = (mtime(&src), mtime(&out)) {
        if o >= s {
            return Ok(out);
        }
    }
    std::fs::create_dir_all(&layout.testbed)?;
    if Command::new("cc").arg("--version").output().is_err() {
        say!("count: no C compiler `cc`; installing Debian's gcc for the TCG plugin");
        crate::apt::update().and_then(|_| crate::apt::install(&["gcc"], None))?;
    }
    say!("count: building the TCG plugin {}", out.display());
    let status = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"])
        .arg("-fvisibility=hidden")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .arg("-lpthread")
        .status()
        .context("running the C compiler `cc` for the counting plugin (install it: `apt-get install gcc`)")?;
    if !status.success() {
        bail!(
            "building {} failed ({status}); install a C compiler with `apt-get install gcc`",
            src.display()
        );
    }
    Ok(out)
}

/// `[__cpuidle_text_start, __cpuidle_text_end)` of the guest kernel under
/// `nokaslr`, and its `finish_task_switch` (0 when it has none), read once
/// from the guest's /proc/kallsyms and kept in
/// `target/testbed/kallsyms-marks-<kernel version>.txt`.
fn kernel_marks(layout: &Layout, image: &GuestImage) -> Result<((u64, u64), u64)> {
    let cache = layout
        .testbed
        .join(format!("kallsyms-marks-{}.txt", image.kernel.version));
    if let Ok(text) = std::fs::read_to_string(&cache) {
        if let Some(r) = parse_kallsyms(&text) {
            return Ok((r, switch_addr(&text)));
        }
    }
    say!(
        "count: reading the idle loop's addresses of kernel {} (one short boot, then cached in {})",
        image.kernel.version,
        cache.display()
    );
    crate::layout::check_plain_path(&cache)?;
    let script = format!(
        "grep -E ' (__cpuidle_text_(start|end)|finish_task_switch(\\.[a-z0-9.]+)?)$' /proc/kallsyms > {}\nsync\n",
        cache.display()
    );
    let opts = VmOptions {
        bind: false,
        hugepages: 0,
        kernel_args: "nokaslr".into(),
        timeout: std::time::Duration::from_secs(300),
        ..VmOptions::default()
    };
    let outcome = qemu::run_in_guest(layout, image, &script, &opts)?;
    let text = std::fs::read_to_string(&cache).unwrap_or_default();
    match parse_kallsyms(&text) {
        Some(r) if outcome.code == 0 => Ok((r, switch_addr(&text))),
        _ => {
            let _ = std::fs::remove_file(&cache);
            bail!(
                "the guest kernel {} did not show __cpuidle_text_start/__cpuidle_text_end in /proc/kallsyms \
                 (exit {}; got {:?}); without them the idle loop cannot be left out of the counts",
                image.kernel.version,
                outcome.code,
                text.trim()
            )
        }
    }
}

/// `finish_task_switch` (or a compiler's copy of it, `finish_task_switch.isra.0`)
/// from kallsyms lines; 0 when there is none.
fn switch_addr(text: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            let a = u64::from_str_radix(w.next()?, 16).ok()?;
            let kind = w.next()?;
            let name = w.next()?;
            (matches!(kind, "t" | "T")
                && (name == "finish_task_switch" || name.starts_with("finish_task_switch.")))
            .then_some(a)
        })
        .unwrap_or(0)
}

/// The idle range from kallsyms lines `ffffffff81e0a000 T __cpuidle_text_start`.
fn parse_kallsyms(text: &str) -> Option<(u64, u64)> {
    let addr = |name: &str| {
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            let a = w.next()?;
            let _kind = w.next()?;
            (w.next()? == name).then(|| u64::from_str_radix(a, 16).ok())?
        })
    };
    let (s, e) = (addr("__cpuidle_text_start")?, addr("__cpuidle_text_end")?);
    (s != 0 && e > s).then_some((s, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_range_comes_from_both_symbols_and_zeroes_are_refused() {
        let text =
            "ffffffff82000000 T __cpuidle_text_start\nffffffff82001a40 T __cpuidle_text_end\n";
        assert_eq!(
            parse_kallsyms(text),
            Some((0xffff_ffff_8200_0000, 0xffff_ffff_8200_1a40))
        );
        // Without CAP_SYSLOG the kernel shows zeroes: no range, not an empty one.
        let hidden =
            "0000000000000000 T __cpuidle_text_start\n0000000000000000 T __cpuidle_text_end\n";
        assert_eq!(parse_kallsyms(hidden), None);
        assert_eq!(
            parse_kallsyms("ffffffff82000000 T __cpuidle_text_start\n"),
            None
        );
    }

    #[test]
    fn the_plugin_argument_names_every_setting() {
        let c = Count {
            plugin: "/t/pollnic-count.so".into(),
            idle: (0x10, 0x20),
            switch: 0,
            mem: false,
            profile: true,
            cache: CacheModel::Off,
        };
        assert_eq!(
            c.qemu_arg(Path::new("/t/run/count-x.txt")),
            "/t/pollnic-count.so,out=/t/run/count-x.txt,idle_start=0x10,idle_end=0x20,mem=off"
        );
        let c = Count {
            profile: false,
            ..c
        };
        assert!(c
            .qemu_arg(Path::new("/t/x"))
            .ends_with(",mem=off,profile=0"));
        let c = Count {
            switch: 0xffff_ffff_8100_0000,
            ..c
        };
        assert!(c
            .qemu_arg(Path::new("/t/x"))
            .ends_with(",profile=0,switch=0xffffffff81000000"));
        let c = Count {
            mem: true,
            cache: CacheModel::Marker,
            ..c
        };
        assert!(c
            .qemu_arg(Path::new("/t/x"))
            .ends_with(",mem=on,profile=0,cache=marker,switch=0xffffffff81000000"));
    }

    #[test]
    fn the_task_switch_is_found_under_a_compilers_name_too() {
        let text = "ffffffff82000000 T __cpuidle_text_start\nffffffff81100000 t finish_task_switch.isra.0\n";
        assert_eq!(switch_addr(text), 0xffff_ffff_8110_0000);
        assert_eq!(switch_addr("ffffffff81100000 t finish_task_switch_x\n"), 0);
    }
}
