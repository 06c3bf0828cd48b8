//! The guest-work counter, read from inside the testbed's guest: per vCPU,
//! the instructions the guest executed (user, kernel; the idle loop apart)
//! and the bytes they loaded and stored, as counted by the testbed's TCG
//! plugin (`xtask/plugin/pollnic_count.c`, docs/design/counting.md). The
//! plugin rewrites the file named by `$POLLNIC_COUNTS` every millisecond;
//! outside a counting guest (`cargo xtask vm --count`, `cargo xtask
//! compare`) there is no counter and [`Counter::from_env`] is `None`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One vCPU's counts since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VcpuCounts {
    /// Instructions executed in user mode (below the canonical hole).
    pub user_insns: u64,
    /// Instructions executed in the kernel, its idle loop (`.cpuidle.text`) left out.
    pub kernel_insns: u64,
    /// Instructions of the kernel's idle loop (not work; kept for the record).
    pub idle_insns: u64,
    /// Bytes loaded by user-mode instructions.
    pub user_loaded: u64,
    /// Bytes stored by user-mode instructions.
    pub user_stored: u64,
    /// Bytes loaded by kernel instructions (idle loop left out).
    pub kernel_loaded: u64,
    /// Bytes stored by kernel instructions (idle loop left out).
    pub kernel_stored: u64,
    /// Instructions inside marked regions ([`crate::marker`]), user and kernel.
    pub marked_insns: u64,
    /// Bytes loaded inside marked regions.
    pub marked_loaded: u64,
    /// Bytes stored inside marked regions.
    pub marked_stored: u64,
    /// Marked regions committed.
    pub marks: u64,
    /// Of the marked: instructions in regions of one packet ([`crate::marker::commit_one`]).
    pub one_insns: u64,
    /// Bytes loaded in regions of one packet.
    pub one_loaded: u64,
    /// Bytes stored in regions of one packet.
    pub one_stored: u64,
    /// Regions of one packet.
    pub ones: u64,
    /// Of [`Self::marked_insns`], those in user mode.
    pub marked_user: u64,
    /// Of [`Self::one_insns`], those in user mode.
    pub one_user: u64,
    /// MMIO reads by user-mode instructions: loads from a device's register
    /// region (a page QEMU maps as I/O, not RAM), the platform's fixed range
    /// `0xfec00000..=0xffffffff` (IOAPIC, HPET, local APIC) left out.
    pub user_mmio_reads: u64,
    /// MMIO writes by user-mode instructions.
    pub user_mmio_writes: u64,
    /// Bytes of [`Self::user_mmio_reads`].
    pub user_mmio_read_bytes: u64,
    /// Bytes of [`Self::user_mmio_writes`].
    pub user_mmio_written_bytes: u64,
    /// MMIO reads by kernel instructions.
    pub kernel_mmio_reads: u64,
    /// MMIO writes by kernel instructions.
    pub kernel_mmio_writes: u64,
    /// Bytes of [`Self::kernel_mmio_reads`].
    pub kernel_mmio_read_bytes: u64,
    /// Bytes of [`Self::kernel_mmio_writes`].
    pub kernel_mmio_written_bytes: u64,
    /// MMIO reads inside marked regions.
    pub marked_mmio_reads: u64,
    /// MMIO writes inside marked regions.
    pub marked_mmio_writes: u64,
    /// MMIO reads inside regions of one packet.
    pub one_mmio_reads: u64,
    /// MMIO writes inside regions of one packet.
    pub one_mmio_writes: u64,
    /// The plugin's cache model, when it is on ([`Snapshot::cache_model`]);
    /// all 0 otherwise.
    pub cache: CacheCounts,
}

/// One vCPU's counts of the plugin's cache model (a model of Ice Lake-SP's
/// L1D, L2 and LLC under QEMU/TCG, not the hardware's counters): line
/// accesses that missed each level, user and kernel (docs/design/counting.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheCounts {
    /// User mode: line accesses that missed L1D.
    pub user_l1d_misses: u64,
    /// User mode: line accesses that missed L2.
    pub user_l2_misses: u64,
    /// User mode: line accesses that missed the LLC and every other core's
    /// caches, a line a device wrote being in the LLC (DDIO).
    pub user_llc_misses: u64,
    /// User mode: the same without DDIO (a line a device wrote is in memory only).
    pub user_llc_misses_no_ddio: u64,
    /// User mode: lines found written by a device since a CPU last saw them
    /// (a lower bound: the byte shadow sees changed bytes only).
    pub user_external_lines: u64,
    /// Kernel: line accesses that missed L1D.
    pub kernel_l1d_misses: u64,
    /// Kernel: line accesses that missed L2.
    pub kernel_l2_misses: u64,
    /// Kernel: LLC misses (DDIO).
    pub kernel_llc_misses: u64,
    /// Kernel: LLC misses without DDIO.
    pub kernel_llc_misses_no_ddio: u64,
    /// Kernel: lines found written by a device.
    pub kernel_external_lines: u64,
}

/// Every counter of [`CacheCounts`], in the order of a `cache` line.
macro_rules! each_cache_field {
    ($m:ident) => {
        $m!(
            user_l1d_misses,
            user_l2_misses,
            user_llc_misses,
            user_llc_misses_no_ddio,
            user_external_lines,
            kernel_l1d_misses,
            kernel_l2_misses,
            kernel_llc_misses,
            kernel_llc_misses_no_ddio,
            kernel_external_lines
        )
    };
}

/// How many numbers a `cache` line carries.
const CACHE_FIELDS: usize = {
    macro_rules! count {
        ($($f:ident),*) => { [$(stringify!($f)),*].len() };
    }
    each_cache_field!(count)
};

impl CacheCounts {
    /// L1D misses, user and kernel.
    pub fn l1d_misses(&self) -> u64 {
        self.user_l1d_misses + self.kernel_l1d_misses
    }

    /// L2 misses, user and kernel.
    pub fn l2_misses(&self) -> u64 {
        self.user_l2_misses + self.kernel_l2_misses
    }

    /// LLC misses with DDIO, user and kernel.
    pub fn llc_misses(&self) -> u64 {
        self.user_llc_misses + self.kernel_llc_misses
    }

    /// LLC misses without DDIO, user and kernel.
    pub fn llc_misses_no_ddio(&self) -> u64 {
        self.user_llc_misses_no_ddio + self.kernel_llc_misses_no_ddio
    }

    /// Lines found written by a device, user and kernel.
    pub fn external_lines(&self) -> u64 {
        self.user_external_lines + self.kernel_external_lines
    }

    /// `self - earlier`, field by field (saturating, as [`VcpuCounts::since`]).
    pub fn since(&self, earlier: &CacheCounts) -> CacheCounts {
        macro_rules! sub {
            ($($f:ident),*) => {
                CacheCounts { $($f: self.$f.saturating_sub(earlier.$f)),* }
            };
        }
        each_cache_field!(sub)
    }

    /// Field-by-field sum.
    pub fn plus(&self, o: &CacheCounts) -> CacheCounts {
        macro_rules! add {
            ($($f:ident),*) => {
                CacheCounts { $($f: self.$f + o.$f),* }
            };
        }
        each_cache_field!(add)
    }
}

/// Every counter of [`VcpuCounts`], in the order of a `cpu` line of the
/// plugin's file (format 5), for the field-by-field operations.
macro_rules! each_field {
    ($m:ident) => {
        $m!(
            user_insns,
            kernel_insns,
            idle_insns,
            user_loaded,
            user_stored,
            kernel_loaded,
            kernel_stored,
            marked_insns,
            marked_loaded,
            marked_stored,
            marks,
            one_insns,
            one_loaded,
            one_stored,
            ones,
            marked_user,
            one_user,
            user_mmio_reads,
            user_mmio_writes,
            user_mmio_read_bytes,
            user_mmio_written_bytes,
            kernel_mmio_reads,
            kernel_mmio_writes,
            kernel_mmio_read_bytes,
            kernel_mmio_written_bytes,
            marked_mmio_reads,
            marked_mmio_writes,
            one_mmio_reads,
            one_mmio_writes
        )
    };
}

/// How many numbers a `cpu` line carries.
const FIELDS: usize = {
    macro_rules! count {
        ($($f:ident),*) => { [$(stringify!($f)),*].len() };
    }
    each_field!(count)
};

impl VcpuCounts {
    /// User plus kernel instructions (the idle loop left out).
    pub fn insns(&self) -> u64 {
        self.user_insns + self.kernel_insns
    }

    /// Bytes loaded, user and kernel.
    pub fn loaded(&self) -> u64 {
        self.user_loaded + self.kernel_loaded
    }

    /// Bytes stored, user and kernel.
    pub fn stored(&self) -> u64 {
        self.user_stored + self.kernel_stored
    }

    /// MMIO reads, user and kernel.
    pub fn mmio_reads(&self) -> u64 {
        self.user_mmio_reads + self.kernel_mmio_reads
    }

    /// MMIO writes, user and kernel.
    pub fn mmio_writes(&self) -> u64 {
        self.user_mmio_writes + self.kernel_mmio_writes
    }

    /// `self - earlier`, field by field (a counter never goes back; a wrapped
    /// or reset one gives 0, not a huge number).
    pub fn since(&self, earlier: &VcpuCounts) -> VcpuCounts {
        macro_rules! sub {
            ($($f:ident),*) => {
                VcpuCounts {
                    $($f: self.$f.saturating_sub(earlier.$f),)*
                    cache: self.cache.since(&earlier.cache),
                }
            };
        }
        each_field!(sub)
    }

    /// Field-by-field sum.
    pub fn plus(&self, o: &VcpuCounts) -> VcpuCounts {
        macro_rules! add {
            ($($f:ident),*) => {
                VcpuCounts {
                    $($f: self.$f + o.$f,)*
                    cache: self.cache.plus(&o.cache),
                }
            };
        }
        each_field!(add)
    }
}

/// Every vCPU's counts at one moment, and when that was (CLOCK_MONOTONIC, ns).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The plugin's write sequence number.
    pub seq: u64,
    /// Index = vCPU.
    pub vcpus: Vec<VcpuCounts>,
    /// When the reader saw it.
    pub at_ns: u64,
    /// The plugin's cache model: `Some("on")`, or `Some("marker")` (only
    /// inside marked regions); `None` when it is off (the `cache` fields of
    /// [`VcpuCounts`] are then 0).
    pub cache_model: Option<String>,
}

impl Snapshot {
    /// What each vCPU did since `earlier` (index = vCPU).
    pub fn since(&self, earlier: &Snapshot) -> Vec<VcpuCounts> {
        self.vcpus
            .iter()
            .enumerate()
            .map(|(i, c)| c.since(earlier.vcpus.get(i).unwrap_or(&VcpuCounts::default())))
            .collect()
    }
}

/// The sum of `per_vcpu` over the vCPUs `pick` accepts.
pub fn sum_where(per_vcpu: &[VcpuCounts], pick: impl Fn(usize) -> bool) -> VcpuCounts {
    per_vcpu
        .iter()
        .enumerate()
        .filter(|(i, _)| pick(*i))
        .fold(VcpuCounts::default(), |a, (_, c)| a.plus(c))
}

/// The counter file of this guest.
#[derive(Clone, Debug)]
pub struct Counter {
    path: PathBuf,
}

impl Counter {
    /// The counter named by `$POLLNIC_COUNTS`, if this guest has one.
    pub fn from_env() -> Option<Counter> {
        std::env::var_os("POLLNIC_COUNTS").map(|p| Counter { path: p.into() })
    }

    /// The counter file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// A snapshot written after this call began: it waits for the plugin's
    /// next rewrite (about 1 ms), so no work done before the call is missing
    /// from it and at most one period's work after it is in it.
    ///
    /// # Errors
    /// The file cannot be read or parsed, or no new rewrite came within 2 s
    /// (QEMU stopped counting).
    pub fn snapshot(&self) -> Result<Snapshot, String> {
        let first = self.read()?;
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            std::thread::sleep(Duration::from_micros(300));
            let s = self.read()?;
            if s.seq != first.seq {
                return Ok(s);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{}: the counter did not change for 2 s (seq {})",
                    self.path.display(),
                    s.seq
                ));
            }
        }
    }

    /// The file as it is now, retried while a rewrite is caught half done.
    fn read(&self) -> Result<Snapshot, String> {
        let mut last = String::new();
        for _ in 0..100 {
            let text = std::fs::read_to_string(&self.path)
                .map_err(|e| format!("reading the counter {}: {e}", self.path.display()))?;
            match parse(&text) {
                Some(mut s) => {
                    s.at_ns = pollnic::clock::monotonic_ns();
                    return Ok(s);
                }
                None => last = text,
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Err(format!(
            "{}: no whole snapshot in 100 reads; last: {:?}",
            self.path.display(),
            last.lines().next().unwrap_or("")
        ))
    }
}

/// Parse the plugin's file; `None` for a torn or malformed one (the sequence
/// numbers of its first and last lines differ, or a line is short).
pub fn parse(text: &str) -> Option<Snapshot> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next()?.split_whitespace().collect();
    let (seq, n, cache_model) = match head[..] {
        ["pollnic-count", "5", "seq", seq, "vcpus", n] => (seq, n, None),
        ["pollnic-count", "5", "seq", seq, "vcpus", n, "cache", mode @ ("on" | "marker")] => {
            (seq, n, Some(mode.to_string()))
        }
        _ => return None,
    };
    let (seq, n): (u64, usize) = (seq.parse().ok()?, n.parse().ok()?);
    let mut vcpus = Vec::with_capacity(n);
    for i in 0..n {
        let w: Vec<&str> = lines.next()?.split_whitespace().collect();
        if w.len() != FIELDS + 2 || w[0] != "cpu" || w[1].parse::<usize>().ok()? != i {
            return None;
        }
        let v: Vec<u64> = w[2..]
            .iter()
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        let mut v = v.into_iter();
        macro_rules! fill {
            ($($f:ident),*) => {
                VcpuCounts {
                    $($f: v.next()?,)*
                    cache: CacheCounts::default(),
                }
            };
        }
        vcpus.push(each_field!(fill));
    }
    if cache_model.is_some() {
        for (i, c) in vcpus.iter_mut().enumerate() {
            let w: Vec<&str> = lines.next()?.split_whitespace().collect();
            if w.len() != CACHE_FIELDS + 2 || w[0] != "cache" || w[1].parse::<usize>().ok()? != i {
                return None;
            }
            let mut v = w[2..].iter().map(|x| x.parse::<u64>().ok());
            macro_rules! fill {
                ($($f:ident),*) => {
                    CacheCounts { $($f: v.next()??),* }
                };
            }
            c.cache = each_cache_field!(fill);
        }
    }
    let end: Vec<&str> = lines.next()?.split_whitespace().collect();
    (end.len() == 2 && end[0] == "end" && end[1].parse::<u64>().ok()? == seq).then_some(Snapshot {
        seq,
        vcpus,
        at_ns: 0,
        cache_model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(seq: u64, end: u64) -> String {
        format!(
            "pollnic-count 5 seq {seq:020} vcpus 002\n\
             cpu 000 00000000000000000010 00000000000000000020 00000000000000000030 \
             00000000000000000040 00000000000000000050 00000000000000000060 00000000000000000070 \
             00000000000000000008 00000000000000000009 00000000000000000011 00000000000000000002 \
             00000000000000000004 00000000000000000004 00000000000000000005 00000000000000000001 \
             00000000000000000006 00000000000000000003 00000000000000000001 00000000000000000002 \
             00000000000000000004 00000000000000000008 00000000000000000003 00000000000000000004 \
             00000000000000000012 00000000000000000016 00000000000000000001 00000000000000000005 \
             00000000000000000000 00000000000000000001\n\
             cpu 001 00000000000000000001 00000000000000000002 00000000000000000003 \
             00000000000000000004 00000000000000000005 00000000000000000006 00000000000000000007 \
             00000000000000000000 00000000000000000000 00000000000000000000 00000000000000000000 \
             00000000000000000000 00000000000000000000 00000000000000000000 00000000000000000000 \
             00000000000000000000 00000000000000000000 00000000000000000000 00000000000000000000 \
             00000000000000000000 00000000000000000000 00000000000000000000 00000000000000000000 \
             00000000000000000000 00000000000000000000 00000000000000000000 00000000000000000000 \
             00000000000000000000 00000000000000000000\n\
             end {end:020}\n"
        )
    }

    #[test]
    fn a_whole_file_parses_and_a_torn_one_does_not() {
        let s = parse(&file(7, 7)).expect("whole");
        assert_eq!(s.seq, 7);
        assert_eq!(s.vcpus.len(), 2);
        assert_eq!(s.vcpus[0].user_insns, 10);
        assert_eq!(s.vcpus[0].kernel_stored, 70);
        assert_eq!((s.vcpus[0].marked_insns, s.vcpus[0].marks), (8, 2));
        assert_eq!((s.vcpus[0].one_insns, s.vcpus[0].ones), (4, 1));
        assert_eq!((s.vcpus[0].marked_user, s.vcpus[0].one_user), (6, 3));
        assert_eq!(s.vcpus[1].insns(), 3);
        let c = &s.vcpus[0];
        assert_eq!(
            (
                c.user_mmio_reads,
                c.user_mmio_writes,
                c.user_mmio_written_bytes
            ),
            (1, 2, 8)
        );
        assert_eq!(
            (
                c.kernel_mmio_reads,
                c.kernel_mmio_writes,
                c.kernel_mmio_written_bytes
            ),
            (3, 4, 16)
        );
        assert_eq!((c.mmio_reads(), c.mmio_writes()), (4, 6));
        assert_eq!(
            (c.marked_mmio_reads, c.marked_mmio_writes, c.one_mmio_writes),
            (1, 5, 1)
        );
        // The writer was caught between the header and the end line.
        assert_eq!(parse(&file(8, 7)), None);
        // Cut short.
        let whole = file(9, 9);
        assert_eq!(parse(&whole[..whole.len() - 30]), None);
        assert_eq!(parse(""), None);
    }

    /// The cache model's lines (`cache on` in the header, a `cache` line per
    /// vCPU before the end line); without them the fields are 0 and the
    /// model is `None`.
    #[test]
    fn the_cache_models_lines_are_read_when_the_header_says_so() {
        let plain = parse(&file(3, 3)).unwrap();
        assert_eq!(plain.cache_model, None);
        assert_eq!(plain.vcpus[0].cache, CacheCounts::default());
        let n = |x: u64| format!(" {x:020}");
        let line = |v: usize, xs: [u64; 10]| {
            format!(
                "cache {v:03}{}\n",
                xs.iter().map(|x| n(*x)).collect::<String>()
            )
        };
        let with = |mode: &str, lines: &str| {
            file(4, 4)
                .replacen("vcpus 002\n", &format!("vcpus 002 cache {mode}\n"), 1)
                .replacen("end ", &format!("{lines}end "), 1)
        };
        let both =
            line(0, [10, 8, 3, 5, 2, 20, 16, 6, 9, 1]) + &line(1, [1, 0, 0, 0, 0, 2, 1, 1, 1, 0]);
        let s = parse(&with("on", &both)).expect("whole");
        assert_eq!(s.cache_model.as_deref(), Some("on"));
        let c = s.vcpus[0].cache;
        assert_eq!(
            (
                c.l1d_misses(),
                c.l2_misses(),
                c.llc_misses(),
                c.llc_misses_no_ddio(),
                c.external_lines()
            ),
            (30, 24, 9, 14, 3)
        );
        assert_eq!((c.user_l1d_misses, c.kernel_external_lines), (10, 1));
        assert_eq!(s.vcpus[1].cache.kernel_l1d_misses, 2);
        assert_eq!(
            parse(&with("marker", &both))
                .unwrap()
                .cache_model
                .as_deref(),
            Some("marker")
        );
        // The header promises the lines: one missing, or short, is a torn file.
        assert_eq!(parse(&with("on", &line(0, [0; 10]))), None);
        assert_eq!(
            parse(&with("on", &both.replacen(" 00000000000000000010", "", 1))),
            None
        );
        assert_eq!(parse(&with("sometimes", &both)), None);
        // Deltas and sums carry the cache counts too.
        let d = s.vcpus[0].since(&plain.vcpus[0]).plus(&s.vcpus[1]);
        assert_eq!(d.cache.l1d_misses(), 33);
    }

    #[test]
    fn deltas_are_per_vcpu_and_never_negative() {
        let a = parse(&file(1, 1)).unwrap();
        let mut b = a.clone();
        b.vcpus[0].user_insns += 1000;
        b.vcpus[1].kernel_loaded += 64;
        let d = b.since(&a);
        assert_eq!(d[0].user_insns, 1000);
        assert_eq!(d[1].kernel_loaded, 64);
        assert_eq!(d[1].user_insns, 0);
        assert_eq!(a.since(&b)[0].user_insns, 0, "a counter going back gives 0");
        let only1 = sum_where(&d, |i| i == 1);
        assert_eq!((only1.insns(), only1.loaded()), (0, 64));
    }
}
