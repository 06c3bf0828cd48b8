//! Guest work per packet, counted instead of timed: the testbed's counter
//! (`pollnic_tools::counts`) read around each row's send window.
//!
//! Whose work is counted: every vCPU but the generator's. The generator's
//! vCPU stands for the other machine of a real two-host test, so when the
//! counter is present `compare` keeps everything else off it (the process's
//! other threads and new IRQs: [`keep_off_generator`]). A row whose own
//! receive core is the generator's cannot be split and gets no counts.
//!
//! Two figures per row (docs/design/counting.md):
//! - all instructions per received packet: everything the receiving vCPUs
//!   did in the window, user and kernel (softirq, hard IRQ, NAPI and ksoftirqd
//!   are kernel work on the vCPU where they ran), the idle loop left out;
//! - work instructions per received packet: for a busy-polling loop that
//!   marks its bursts (`pollnic_tools::marker`), the instructions inside the
//!   marked bursts that returned packets, exactly (empty polls are never in
//!   them); for testpmd, what [`testpmd_work`] bounds; for any other path,
//!   all minus the receiving vCPUs' background (instructions per second with
//!   nothing running, [`measure_background`], × the window's length).

use pollnic_tools::counts::{sum_where, Counter, Snapshot, VcpuCounts};
use pollnic_tools::profile::{top_functions, Profile, Symbols};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// After the last frame is sent, the window stays open this long for the
/// receiver to take what is still in the rings (512 descriptors at 50 kpps
/// are 10 ms).
pub const TAIL: Duration = Duration::from_millis(200);

/// Queue threads that report empty polls (one slot each).
const SLOTS: usize = 8;

#[repr(align(64))]
struct Slot(AtomicU64);

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Slot = Slot(AtomicU64::new(0));
static EMPTY: [Slot; SLOTS] = [ZERO; SLOTS];
/// Whether the row running now reports its empty polls.
static REPORTING: AtomicBool = AtomicBool::new(false);
/// The machine's background per vCPU (ticks, RCU, kernel threads), counted
/// once with nothing running: the counts and the window's length, s.
static BACKGROUND: std::sync::OnceLock<(Vec<VcpuCounts>, f64)> = std::sync::OnceLock::new();

/// The receiving port's PCI address (`--rx`), whose interrupts each window
/// counts (set once by `main`).
pub static RX_PORT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Both ports' PCI addresses (`--tx`, `--rx`), whose BARs name the MMIO
/// sites of the profile (set once by `main`).
pub static PORTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// The memory BARs of [`PORTS`] from sysfs (`resource`: start, end, flags per
/// BAR): (guest physical start, length, `0000:00:06.0 BAR0`).
fn port_bars() -> Vec<(u64, u64, String)> {
    let mut bars = Vec::new();
    for bdf in PORTS.get().into_iter().flatten() {
        let Ok(text) = std::fs::read_to_string(format!("/sys/bus/pci/devices/{bdf}/resource"))
        else {
            continue;
        };
        for (i, line) in text.lines().take(6).enumerate() {
            let v: Vec<u64> = line
                .split_whitespace()
                .filter_map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).ok())
                .collect();
            // IORESOURCE_MEM (0x200); a zero start is an unused BAR.
            if let [start, end, flags] = v[..] {
                if start != 0 && end > start && flags & 0x200 != 0 {
                    bars.push((start, end - start + 1, format!("{bdf} BAR{i}")));
                }
            }
        }
    }
    bars
}

/// The receiving port's interrupts so far ([`pollnic_tools::cputime::port_interrupts`]).
fn rx_port_interrupts() -> Option<u64> {
    let bdf = RX_PORT.get()?;
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    Some(pollnic_tools::cputime::port_interrupts(&text, bdf))
}

/// How many functions each row's profile lists (`--top-functions`; 0: no profile).
pub static TOP_FUNCTIONS: AtomicUsize = AtomicUsize::new(10);
/// Processes other than this one whose user-mode addresses the profile
/// resolves (testpmd while it runs).
static PROFILE_PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Resolve `pid`'s addresses in the profiles from now on ([`forget_pid`] ends it).
pub fn profile_pid(pid: u32) {
    PROFILE_PIDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(pid);
}

/// Stop resolving `pid`'s addresses.
pub fn forget_pid(pid: u32) {
    PROFILE_PIDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| *p != pid);
}

/// Start a window's profile, when profiles are on; whether it started.
fn start_profile() -> bool {
    if TOP_FUNCTIONS.load(Relaxed) == 0 {
        return false;
    }
    Profile::start().unwrap_or_else(|e| {
        eprintln!("compare: no per-function profile: {e}");
        false
    })
}

/// The profile of the window [`start_profile`] started.
fn take_profile() -> Option<Profile> {
    Profile::take().unwrap_or_else(|e| {
        eprintln!("compare: no per-function profile: {e}");
        None
    })
}

/// How long [`measure_background`] counts.
pub const BACKGROUND_WINDOW: Duration = Duration::from_secs(1);

/// Count the machine's background once, before any row (nothing of compare
/// runs meanwhile). Returns what to say about it.
pub fn measure_background(meter: &Meter, gen_core: usize) -> Result<String, String> {
    // Read from the generator's vCPU, as the rows' windows are: reading the
    // counter file is work (9p), and it must not land on a counted vCPU.
    let (a, b) = std::thread::scope(|s| {
        s.spawn(|| {
            pollnic_tools::cores::pin_current_thread(gen_core);
            let a = meter.counter.snapshot()?;
            std::thread::sleep(BACKGROUND_WINDOW);
            Ok::<_, String>((a, meter.counter.snapshot()?))
        })
        .join()
        .map_err(|_| "the background counting thread panicked".to_string())?
    })?;
    let secs = (b.at_ns - a.at_ns) as f64 / 1e9;
    let per_vcpu = b.since(&a);
    let text = per_vcpu
        .iter()
        .enumerate()
        .map(|(i, c)| format!("vcpu{i} {:.0}", c.insns() as f64 / secs))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = BACKGROUND.set((per_vcpu, secs));
    Ok(format!("counting: idle background, instructions/s: {text}"))
}

/// A busy-polling row's queue threads report their empty polls from now on
/// (counts start at 0); [`stop_reporting`] ends it.
pub fn start_reporting() {
    for s in &EMPTY {
        s.0.store(0, Relaxed);
    }
    REPORTING.store(true, Relaxed);
}

/// The row is over: later rows report nothing unless they start again.
pub fn stop_reporting() {
    REPORTING.store(false, Relaxed);
}

/// Queue thread `queue` has polled an empty ring `total` times so far (a
/// plain store of its own count: one instruction on the hot loop).
#[inline]
pub fn report_empty(queue: usize, total: u64) {
    EMPTY[queue % SLOTS].0.store(total, Relaxed);
}

fn empty_polls() -> Option<u64> {
    REPORTING
        .load(Relaxed)
        .then(|| EMPTY.iter().map(|s| s.0.load(Relaxed)).sum())
}

/// What the counter saw around one send window.
#[derive(Clone, Debug)]
pub struct Window {
    /// The send window (send + [`TAIL`]): counts per vCPU, length, empty polls.
    pub send: (Vec<VcpuCounts>, f64, Option<u64>),
    /// The generator's vCPU.
    pub gen_core: Option<usize>,
    /// The machine's background ([`measure_background`]): counts per vCPU, s.
    pub background: (Vec<VcpuCounts>, f64),
    /// Work counted by the path itself over another span (testpmd:
    /// [`testpmd_work`]), which then replaces the window's work figures.
    /// `Err`: the path's own figure could not be made (the reason), and
    /// the row then has no work figure at all.
    pub external: Option<Result<External, String>>,
    /// The per-block profile of the send window and the symbols to name its
    /// blocks (read before the path's processes end), when profiles are on.
    pub profile: Option<(Profile, Symbols)>,
    /// The receiving port's interrupts in the send window, all CPUs.
    pub interrupts: Option<u64>,
    /// The plugin's cache model in the window (`on`, `marker`; `None`: off).
    pub cache_model: Option<String>,
}

/// What a row's cache figures are (`cache_note` of a row that has them).
pub const CACHE_NOTE: &str = "counts of a cache model under QEMU/TCG, not hardware: per vCPU \
     L1D 48 KiB 12-way and L2 1.25 MiB 20-way, LLC 1.5 MiB per vCPU 12-way (Ice Lake-SP), \
     64 B lines, true LRU, guest physical addresses, MMIO left out; device writes found by a \
     byte shadow (a lower bound); LLC misses with DDIO and without";

/// Whether the rows give the cache model's figures (`--count-cache`; set
/// once by `main`).
pub static COUNT_CACHE: AtomicBool = AtomicBool::new(false);

/// The cache model's figures of a row (a model of Ice Lake-SP's caches run
/// by the counting plugin under QEMU/TCG: counts of a model, not the
/// hardware's), per packet, on the counted vCPUs in the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachePerPacket {
    /// Line accesses that missed L1D.
    pub l1d_misses: f64,
    /// Line accesses that missed L2.
    pub l2_misses: f64,
    /// Line accesses that missed the LLC and every other core's caches,
    /// lines written by the device being in the LLC (DDIO).
    pub llc_misses: f64,
    /// The same without DDIO (a line written by the device is in memory only).
    pub llc_misses_no_ddio: f64,
    /// Lines found written by the device since a CPU last saw them (a lower
    /// bound: only changed bytes that a CPU had loaded before are seen).
    pub external_lines: f64,
}

/// The cache figures of `all` (the counted vCPUs' counts over the window)
/// per packet (`n` packets), when they were asked for (`asked`) and the
/// plugin's model was on (`model`: the snapshot's [`Snapshot::cache_model`]);
/// else why there are none.
pub fn cache_per_packet(
    asked: bool,
    model: Option<&str>,
    all: &VcpuCounts,
    n: f64,
) -> Result<CachePerPacket, String> {
    if !asked {
        return Err("cache model not asked for (compare --count-cache)".into());
    }
    match model {
        None => Err(
            "cache model off in the counting plugin: boot the guest with it \
             (`cargo xtask compare --count-cache`)"
                .into(),
        ),
        Some("on") => {
            let c = &all.cache;
            Ok(CachePerPacket {
                l1d_misses: c.l1d_misses() as f64 / n,
                l2_misses: c.l2_misses() as f64 / n,
                llc_misses: c.llc_misses() as f64 / n,
                llc_misses_no_ddio: c.llc_misses_no_ddio() as f64 / n,
                external_lines: c.external_lines() as f64 / n,
            })
        }
        Some(other) => Err(format!(
            "cache model `{other}` in the counting plugin (only inside marked regions): \
             per-packet figures need `on`"
        )),
    }
}

/// A work figure a path made itself, per packet.
#[derive(Clone, Debug, PartialEq)]
pub struct External {
    /// Instructions per packet, the upper bound (always above 0).
    pub insns: f64,
    /// The lower bound (`None`: it came out at or below 0, so there is none).
    pub insns_low: Option<f64>,
    /// Bytes loaded per packet (upper bound).
    pub loaded: f64,
    /// Bytes stored per packet (upper bound).
    pub stored: f64,
    /// How, with the numbers.
    pub method: String,
}

/// Reads the counter around a row's send window (`None` outside a counting guest).
pub struct Meter {
    counter: Counter,
    start: Option<(Snapshot, Option<u64>)>,
    /// The profile was started (its window ends at [`Meter::end`]).
    profile: bool,
    /// The receiving port's interrupts at the start.
    irqs: Option<u64>,
}

impl Meter {
    /// A meter, when this guest has a counter.
    pub fn new() -> Option<Meter> {
        Counter::from_env().map(|counter| Meter {
            counter,
            start: None,
            profile: false,
            irqs: None,
        })
    }

    fn snap(&self) -> Option<Snapshot> {
        match self.counter.snapshot() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("compare: {e}");
                None
            }
        }
    }

    /// The start of the send window.
    pub fn begin(&mut self) {
        // The profile starts first and ends last: reading it takes the
        // generator's vCPU a while, and the receiver's polls meanwhile are
        // not the window's.
        self.profile = start_profile();
        let e = empty_polls();
        self.irqs = rx_port_interrupts();
        self.start = self.snap().map(|s| (s, e));
    }

    /// The end of the send window (call [`TAIL`] after the last frame).
    pub fn end(self, gen_core: Option<usize>) -> Option<Window> {
        let e = empty_polls();
        let end = self.snap()?;
        let interrupts = rx_port_interrupts()
            .zip(self.irqs)
            .map(|(b, a)| b.saturating_sub(a));
        let profile = self.profile.then(take_profile).flatten().map(|window| {
            let mut pids = vec![std::process::id()];
            pids.extend(
                PROFILE_PIDS
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter(),
            );
            (window, Symbols::load(&pids))
        });
        let (s0, se) = self.start?;
        let secs = |a: &Snapshot, b: &Snapshot| (b.at_ns - a.at_ns) as f64 / 1e9;
        Some(Window {
            send: (
                end.since(&s0),
                secs(&s0, &end),
                e.zip(se).map(|(b, a)| b - a),
            ),
            gen_core,
            background: BACKGROUND.get().cloned().unwrap_or_default(),
            external: None,
            profile,
            interrupts,
            cache_model: end.cache_model.clone(),
        })
    }
}

/// One function of a row's profile, per received packet.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TopFunction {
    /// The function (`name [module]` for a kernel module's, `[user]` or
    /// `[kernel]` where no symbol was found).
    pub function: String,
    /// Its instructions per received packet.
    pub instructions_per_packet: f64,
}

/// One MMIO site of a row's profile, per received packet.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TopMmio {
    /// `write 0000:00:06.0 BAR0+0x3818 by igb_xmit_frame [igb]`: read or
    /// write, the register (BAR and offset), the function that made it.
    pub site: String,
    /// Its accesses per received packet.
    pub accesses_per_packet: f64,
}

/// The figures of a row, per received packet.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerPacket {
    /// All instructions (user + kernel) on the receiving vCPUs.
    pub instructions: f64,
    /// Minus the empty polls or the background (see the module doc);
    /// `None` where no figure can be made ([`Self::work_method`] says why):
    /// never a 0 that stands for "unknown".
    pub work_instructions: Option<f64>,
    /// User-mode instructions.
    pub user_instructions: f64,
    /// Kernel instructions.
    pub kernel_instructions: f64,
    /// Bytes loaded.
    pub bytes_loaded: f64,
    /// Bytes stored.
    pub bytes_stored: f64,
    /// Bytes loaded, less the empty polls' or the background's (as the work instructions).
    pub work_bytes_loaded: Option<f64>,
    /// Bytes stored, less the empty polls' or the background's.
    pub work_bytes_stored: Option<f64>,
    /// MMIO reads (device register loads) on the receiving vCPUs, user and
    /// kernel, in the window.
    pub mmio_reads: f64,
    /// MMIO writes on the receiving vCPUs (tail and doorbell writes, kicks).
    pub mmio_writes: f64,
    /// Marked loops: MMIO reads per burst with packets.
    pub mmio_reads_per_burst: Option<f64>,
    /// Marked loops: MMIO writes per burst with packets.
    pub mmio_writes_per_burst: Option<f64>,
    /// The generator's vCPU: MMIO writes per sent packet (pollnic's TX tail writes).
    pub gen_mmio_writes_per_sent: Option<f64>,
    /// The receiving port's hard interrupts (its MSI-X vectors, any CPU).
    pub interrupts: Option<f64>,
    /// The MMIO sites with the most accesses on the receiving vCPUs, per
    /// received packet (from the profile, when it is on).
    pub top_mmio: Vec<TopMmio>,
    /// Empty polls per packet, for the paths that count them.
    pub empty_polls: Option<f64>,
    /// The lower bound of the work, where it is a range (testpmd).
    pub work_instructions_low: Option<f64>,
    /// Marked loops: bursts (with packets) per packet.
    pub bursts_per_packet: Option<f64>,
    /// Marked loops: instructions of a burst that held one packet: the cost
    /// of a packet alone in its burst (does not depend on how the row batched).
    pub burst1_instructions: Option<f64>,
    /// Marked loops: of [`Self::burst1_instructions`], those in user mode
    /// (the kernel's share there is interrupts that fell into the burst and,
    /// under TCG, the clock read's system call).
    pub burst1_user_instructions: Option<f64>,
    /// Marked loops: bytes loaded, likewise.
    pub burst1_bytes_loaded: Option<f64>,
    /// Marked loops: bytes stored, likewise.
    pub burst1_bytes_stored: Option<f64>,
    /// Marked loops with enough bursts of several packets: the fit
    /// `work = per_burst x bursts + per_packet x packets`, per packet.
    pub fit_per_packet: Option<f64>,
    /// The same fit: instructions per burst.
    pub fit_per_burst: Option<f64>,
    /// How the work figure was made.
    pub work_method: String,
    /// The generator's vCPU, all instructions per sent packet (pollnic TX,
    /// with its pacing spin).
    pub gen_instructions_per_sent: Option<f64>,
    /// The generator's vCPU, marked: instructions of its sending turns per
    /// sent packet (filling the frames and the TX burst, no pacing loop).
    pub gen_work_instructions_per_sent: Option<f64>,
    /// Instructions in the window on each receiving vCPU (index = vCPU; the
    /// generator's is 0), per received packet.
    pub per_vcpu: Vec<f64>,
    /// The functions with the most instructions on the receiving vCPUs,
    /// per received packet: from the marked bursts where the work figure
    /// is (so, like it, without empty polls), else from all instructions.
    pub top_functions: Vec<TopFunction>,
    /// Which instructions [`Self::top_functions`] come from, and how much
    /// of the counted figure the profile holds (a check of the profile).
    pub top_functions_basis: String,
    /// The profile's instructions over the counted figure they stand for
    /// (marked bursts: both are counted at the same points, so 1.0 up to
    /// bursts too long to log; all: the two are read a moment apart).
    pub top_functions_coverage: Option<f64>,
    /// The cache model's figures ([`cache_per_packet`]); `None`: see
    /// [`Self::cache_note`].
    pub cache: Option<CachePerPacket>,
    /// What the cache figures are, or why there are none.
    pub cache_note: String,
}

impl Window {
    /// Per received packet (`received` test frames, `sent` by the generator),
    /// counting the vCPUs other than the generator's.
    pub fn per_packet(&self, received: u64, sent: u64) -> Option<PerPacket> {
        if received == 0 {
            return None;
        }
        let mine = |i: usize| Some(i) != self.gen_core;
        let (ref send, secs, empty) = self.send;
        let all = sum_where(send, mine);
        let n = received as f64;
        // What the send window held outside its packets, for a path that
        // does not mark its bursts: the machine's background for the
        // window's length.
        let bg = sum_where(&self.background.0, mine);
        let bsecs = self.background.1.max(1e-9);
        let f = |x: u64| x as f64 / bsecs * secs;
        let (idle_insns, idle_loaded, idle_stored) =
            (f(bg.insns()), f(bg.loaded()), f(bg.stored()));
        let mut work_method = format!(
            "background {:.0} instructions/s x {secs:.3} s",
            bg.insns() as f64 / bsecs
        );
        if empty.is_some() {
            // A busy-polling loop that counted its empty polls but marked no
            // burst: its figure holds every empty poll.
            work_method.push_str(", empty polls included (no marked burst)");
        }
        let work = |all: u64, idle: f64| Some((all as f64 - idle) / n).filter(|w| *w > 0.0);
        // A loop that marks its bursts (crate's `marker`): its work is what
        // ran inside the marked regions, counted exactly, empty polls never in
        // it. Only busy-polling rows use it: an interrupt row's wake-ups are
        // work too, and they happen outside the bursts.
        let (work_i, work_l, work_s, work_method) = if let Some(x) = &self.external {
            match x {
                Ok(x) => (
                    Some(x.insns),
                    Some(x.loaded),
                    Some(x.stored),
                    x.method.clone(),
                ),
                Err(why) => (None, None, None, format!("no work figure: {why}")),
            }
        } else if all.marks > 0 && empty.is_some() {
            (
                Some(all.marked_insns as f64 / n),
                Some(all.marked_loaded as f64 / n),
                Some(all.marked_stored as f64 / n),
                format!(
                    "marked: {} bursts with packets, from the poll to the packets freed (empty polls left out)",
                    all.marks
                ),
            )
        } else {
            let w = work(all.insns(), idle_insns);
            let work_method = if w.is_none() {
                format!(
                    "no work figure: the background ({work_method}) is not below the {} instructions counted",
                    all.insns()
                )
            } else {
                work_method
            };
            (
                w,
                w.and(work(all.loaded(), idle_loaded)),
                w.and(work(all.stored(), idle_stored)),
                work_method,
            )
        };
        // A packet alone in its burst costs F + P; the bursts of several
        // packets then give P: M_n = F B_n + P N_n.
        let marked = all.marks > 0 && empty.is_some();
        let ones = (marked && all.ones > 0).then_some(all.ones as f64);
        let one = |x: u64| ones.map(|b| x as f64 / b);
        let fit = ones.and_then(|b1| {
            let f_p = all.one_insns as f64 / b1;
            let mn = all.marked_insns.saturating_sub(all.one_insns) as f64;
            let bn = all.marks.saturating_sub(all.ones) as f64;
            let extra = n - b1 - bn;
            (extra >= (0.02 * n).max(50.0)).then(|| {
                let p = (mn - f_p * bn) / extra;
                (p, f_p - p)
            })
        });
        let gen = self
            .gen_core
            .and_then(|g| send.get(g))
            .filter(|_| sent > 0)
            .map(|c| c.insns() as f64 / sent as f64);
        let gen_work = self
            .gen_core
            .and_then(|g| send.get(g))
            .filter(|c| sent > 0 && c.marks > 0)
            .map(|c| c.marked_insns as f64 / sent as f64);
        let ((top_functions, top_functions_basis), top_functions_coverage) = self
            .profile
            .as_ref()
            .map(|(p, syms)| {
                let marked_basis = marked && self.external.is_none();
                let (top, total) = top_functions(p, mine, marked_basis, syms, TOP_FUNCTIONS.load(Relaxed));
                let counted = if marked_basis { all.marked_insns } else { all.insns() };
                let coverage = total as f64 / counted.max(1) as f64;
                let lost: u64 = p.lost.iter().enumerate().filter(|(i, _)| mine(*i)).map(|(_, x)| x).sum();
                let basis = format!(
                    "{}; the profile holds {total} of the {counted} counted ({:.2} %){}",
                    if marked_basis {
                        "marked bursts (the work figure)"
                    } else {
                        "all instructions of the receiving vCPUs (background and empty polls included)"
                    },
                    100.0 * coverage,
                    if marked_basis && lost > 0 {
                        format!(", {lost} in bursts too long to log")
                    } else {
                        String::new()
                    }
                );
                let top = top
                    .into_iter()
                    .map(|f| TopFunction {
                        function: f.function,
                        instructions_per_packet: f.instructions as f64 / n,
                    })
                    .collect();
                ((top, basis), Some(coverage))
            })
            .unwrap_or_default();
        let top_mmio = self
            .profile
            .as_ref()
            .map(|(p, syms)| {
                pollnic_tools::profile::top_mmio_sites(
                    p,
                    mine,
                    &port_bars(),
                    syms,
                    TOP_FUNCTIONS.load(Relaxed),
                )
                .into_iter()
                .map(|m| TopMmio {
                    site: m.site,
                    accesses_per_packet: m.accesses as f64 / n,
                })
                .collect()
            })
            .unwrap_or_default();
        let per_burst =
            |x: u64| (marked && self.external.is_none()).then(|| x as f64 / all.marks as f64);
        let cache = cache_per_packet(
            COUNT_CACHE.load(Relaxed),
            self.cache_model.as_deref(),
            &all,
            n,
        );
        Some(PerPacket {
            cache: cache.as_ref().ok().cloned(),
            cache_note: match cache {
                Ok(_) => CACHE_NOTE.to_string(),
                Err(why) => why,
            },
            mmio_reads: all.mmio_reads() as f64 / n,
            mmio_writes: all.mmio_writes() as f64 / n,
            mmio_reads_per_burst: per_burst(all.marked_mmio_reads),
            mmio_writes_per_burst: per_burst(all.marked_mmio_writes),
            gen_mmio_writes_per_sent: self
                .gen_core
                .and_then(|g| send.get(g))
                .filter(|_| sent > 0)
                .map(|c| c.mmio_writes() as f64 / sent as f64),
            interrupts: self.interrupts.map(|i| i as f64 / n),
            top_mmio,
            top_functions,
            top_functions_basis,
            top_functions_coverage,
            gen_work_instructions_per_sent: gen_work,
            instructions: all.insns() as f64 / n,
            work_instructions: work_i,
            work_bytes_loaded: work_l,
            work_bytes_stored: work_s,
            user_instructions: all.user_insns as f64 / n,
            kernel_instructions: all.kernel_insns as f64 / n,
            bytes_loaded: all.loaded() as f64 / n,
            bytes_stored: all.stored() as f64 / n,
            empty_polls: empty.map(|e| e as f64 / n),
            work_instructions_low: self
                .external
                .as_ref()
                .and_then(|x| x.as_ref().ok())
                .and_then(|x| x.insns_low),
            bursts_per_packet: marked.then(|| all.marks as f64 / n),
            burst1_instructions: one(all.one_insns),
            burst1_user_instructions: one(all.one_user),
            burst1_bytes_loaded: one(all.one_loaded),
            burst1_bytes_stored: one(all.one_stored),
            fit_per_packet: fit.map(|f| f.0),
            fit_per_burst: fit.map(|f| f.1),
            work_method,
            gen_instructions_per_sent: gen,
            per_vcpu: send
                .iter()
                .enumerate()
                .map(|(i, c)| if mine(i) { c.insns() as f64 / n } else { 0.0 })
                .collect(),
        })
    }
}

/// With a counter: run this process's threads off the generator's core
/// (threads pinned later choose their own cores) and give new IRQs a default
/// affinity without it, so no receive work lands on the generator's vCPU.
/// Returns what to say about it.
pub fn keep_off_generator(gen_core: usize) -> Result<String, String> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let others: Vec<usize> = (0..online).filter(|&c| c != gen_core).collect();
    if others.is_empty() {
        return Err(format!(
            "the guest has {online} vCPU: counting needs one for the generator (core {gen_core}) and one more"
        ));
    }
    let mut set = CpuSet::new();
    for &c in &others {
        set.set(c).map_err(|e| format!("CPU set: {e}"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("sched_setaffinity: {e}"))?;
    let mask: u64 = others.iter().map(|c| 1u64 << c).sum();
    std::fs::write("/proc/irq/default_smp_affinity", format!("{mask:x}"))
        .map_err(|e| format!("/proc/irq/default_smp_affinity: {e}"))?;
    Ok(format!(
        "counting: generator on vCPU {gen_core}; receive work counted on vCPUs {others:?} \
         (this process and new IRQs kept off the generator's vCPU)"
    ))
}

/// A snapshot read from the generator's vCPU (reading is work, and it must
/// not land on a counted vCPU); `None` outside a counting guest.
pub fn snapshot() -> Option<Snapshot> {
    let meter = Meter::new()?;
    let core = crate::gen::GEN_CORE.load(Relaxed);
    std::thread::scope(|s| {
        s.spawn(|| {
            if core != usize::MAX {
                pollnic_tools::cores::pin_current_thread(core);
            }
            meter.snap()
        })
        .join()
        .ok()
        .flatten()
    })
}

/// The counted vCPUs' sum over `a..b`, less the machine's background for
/// that span: (counts, seconds).
fn net_of_background(a: &Snapshot, b: &Snapshot) -> (f64, f64, f64, f64) {
    let gen = crate::gen::GEN_CORE.load(Relaxed);
    let mine = |i: usize| i != gen;
    let secs = (b.at_ns - a.at_ns) as f64 / 1e9;
    let all = sum_where(&b.since(a), mine);
    let (bg, bsecs) = BACKGROUND.get().cloned().unwrap_or_default();
    let bg = sum_where(&bg, mine);
    let per = |x: u64| x as f64 / bsecs.max(1e-9) * secs;
    (
        all.insns() as f64 - per(bg.insns()),
        all.loaded() as f64 - per(bg.loaded()),
        all.stored() as f64 - per(bg.stored()),
        secs,
    )
}

/// testpmd's empty RX bursts, measured once per run: (instructions, bytes
/// loaded, bytes stored) per empty burst, and the bursts a start-to-stop
/// cycle polls outside its counted span. Two testpmds with no traffic, one
/// counted for 1 s and one for 3 s: the difference gives the cost per burst
/// free of what each start and stop adds, and with it the bursts outside
/// the span (testpmd's counters cover its whole forwarding time, from its
/// auto-start to well after the Enter that stops it).
static TESTPMD_EMPTY: std::sync::OnceLock<Option<EmptyBursts>> = std::sync::OnceLock::new();

/// What an empty testpmd burst costs ([`testpmd_empty_cost`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmptyBursts {
    /// Instructions per empty burst.
    pub insns: f64,
    /// Bytes loaded per empty burst.
    pub loaded: f64,
    /// Bytes stored per empty burst.
    pub stored: f64,
    /// Bursts a start-to-stop cycle polls outside its counted span.
    pub outside: f64,
    /// The two calibration cycles' bursts.
    pub bursts: (u64, u64),
}

/// [`TESTPMD_EMPTY`], measured with `cycle(span, between)`: start a testpmd,
/// call `between` (a snapshot), wait `span`, call it again, stop it, and
/// return its RX bursts.
pub fn testpmd_empty_cost(
    mut cycle: impl FnMut(Duration, &mut dyn FnMut() -> Option<Snapshot>) -> Option<u64>,
) -> Option<EmptyBursts> {
    *TESTPMD_EMPTY.get_or_init(|| {
        let mut one = |span: Duration| {
            let mut snaps = Vec::new();
            let bursts = cycle(span, &mut || {
                let s = snapshot();
                if let Some(s) = &s {
                    snaps.push(s.clone());
                }
                s
            })?;
            let [a, b] = &snaps[..] else { return None };
            Some((net_of_background(a, b), bursts))
        };
        let ((i1, l1, s1, _), b1) = one(Duration::from_secs(1))?;
        let ((i3, l3, s3, _), b3) = one(Duration::from_secs(3))?;
        let db = b3.checked_sub(b1).filter(|&d| d > 0)? as f64;
        let insns = (i3 - i1) / db;
        (insns > 0.0).then(|| EmptyBursts {
            insns,
            loaded: ((l3 - l1) / db).max(0.0),
            stored: ((s3 - s1) / db).max(0.0),
            outside: (b1 as f64 - i1 / insns).max(0.0),
            bursts: (b1, b3),
        })
    })
}

/// testpmd's work per packet over its forwarding span `a..b`: the counted
/// work less the background and less its empty bursts at
/// [`testpmd_empty_cost`]. testpmd counts bursts, not empty ones: a burst held
/// between 1 and 32 packets, so the empty ones are between `bursts - packets`
/// and `bursts - packets / 32`, which bounds the work from both sides.
pub fn testpmd_work(
    a: &Snapshot,
    b: &Snapshot,
    bursts: u64,
    packets: u64,
    empty: EmptyBursts,
) -> Result<External, String> {
    if packets == 0 {
        return Err("testpmd received no packet".into());
    }
    let (i, l, s, secs) = net_of_background(a, b);
    let n = packets as f64;
    let inside = (bursts as f64 - empty.outside).max(0.0);
    let most_empty = (inside - packets.div_ceil(32) as f64).max(0.0);
    let least_empty = (inside - n).max(0.0);
    let per = |total: f64, each: f64, e: f64| (total - each * e) / n;
    let insns = per(i, empty.insns, least_empty);
    if insns <= 0.0 {
        // The calibrated cost of the empty bursts is all the work counted
        // or more: the estimate has nothing left to say (a zero would read
        // as "free").
        return Err(format!(
            "testpmd's {least_empty:.0} or more empty RX bursts at the calibrated {:.1} instructions each              ({} and {} bursts with no traffic) hold all the {i:.0} instructions counted over its {secs:.3} s              (background taken out) and more: the calibration does not fit this run",
            empty.insns, empty.bursts.0, empty.bursts.1
        ));
    }
    let low = per(i, empty.insns, most_empty);
    Ok(External {
        insns,
        insns_low: (low > 0.0).then_some(low),
        loaded: per(l, empty.loaded, least_empty).max(0.0),
        stored: per(s, empty.stored, least_empty).max(0.0),
        method: format!(
            "testpmd: {bursts} RX bursts for {packets} packets (its warm-up included), of them {:.0} \
             outside the {secs:.3} s counted; empty ones {least_empty:.0}..{most_empty:.0} at {:.1} \
             instructions each (calibrated: testpmds with no traffic, {} and {} bursts), background \
             taken out; upper bound (every packet in a burst of its own), lower bound {}",
            empty.outside,
            empty.insns,
            empty.bursts.0,
            empty.bursts.1,
            if low > 0.0 {
                format!("{low:.1}")
            } else {
                format!("none ({low:.1} is not above 0)")
            }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(user: u64, kernel: u64) -> VcpuCounts {
        VcpuCounts {
            user_insns: user,
            kernel_insns: kernel,
            user_loaded: user * 2,
            kernel_stored: kernel,
            ..VcpuCounts::default()
        }
    }

    #[test]
    fn the_generator_is_left_out_and_an_unmarked_busy_poll_keeps_its_empty_polls() {
        let w = Window {
            // Send 2 s: 10,000 empty polls and 1,000 packets, no burst marked.
            send: (
                vec![c(900_000, 120_000), c(7_000_000, 0)],
                2.0,
                Some(10_000),
            ),
            gen_core: Some(1),
            // Background: 10,000 kernel instructions/s on vCPU 0.
            background: (vec![c(0, 10_000), c(5, 5)], 1.0),
            external: None,
            profile: None,
            interrupts: None,
            cache_model: None,
        };
        let p = w.per_packet(1000, 1000).unwrap();
        assert_eq!(p.instructions, 1020.0);
        // 1.02e6 - 2 s x 10,000/s = 1e6: the empty polls stay in.
        let wi = p.work_instructions.unwrap();
        assert!((wi - 1000.0).abs() < 1e-9, "{wi}");
        assert!(
            p.work_method.contains("empty polls included"),
            "{}",
            p.work_method
        );
        assert_eq!((p.user_instructions, p.kernel_instructions), (900.0, 120.0));
        assert_eq!((p.bytes_loaded, p.bytes_stored), (1800.0, 120.0));
        assert!((p.work_bytes_loaded.unwrap() - 1800.0).abs() < 1e-9);
        // Stores: 120,000 - 2 s x 10,000.
        let ws = p.work_bytes_stored.unwrap();
        assert!((ws - 100.0).abs() < 1e-9, "{ws}");
        assert_eq!(p.empty_polls, Some(10.0));
        assert_eq!(p.gen_instructions_per_sent, Some(7000.0));
        assert_eq!(p.per_vcpu, vec![1020.0, 0.0]);
    }

    #[test]
    fn marked_bursts_give_the_work_the_cost_of_a_lone_packet_and_the_fit() {
        // 1,000 packets: 400 bursts of one (F + P = 300 each) and 100 bursts
        // of six (F = 100, P = 200: 1,300 each).
        let mut send = c(5_000_000, 0);
        send.marked_insns = 400 * 300 + 100 * 1300;
        send.marks = 500;
        send.one_insns = 400 * 300;
        send.ones = 400;
        let w = Window {
            send: (vec![send], 2.0, Some(10_000)),
            gen_core: None,
            background: (vec![c(0, 0)], 1.0),
            external: None,
            profile: None,
            interrupts: None,
            cache_model: None,
        };
        let p = w.per_packet(1000, 1000).unwrap();
        assert_eq!(
            p.work_instructions,
            Some(250.0),
            "250,000 marked / 1,000 packets"
        );
        assert!(p.work_method.starts_with("marked"));
        assert_eq!(p.bursts_per_packet, Some(0.5));
        assert_eq!(p.burst1_instructions, Some(300.0));
        let (pp, pb) = (p.fit_per_packet.unwrap(), p.fit_per_burst.unwrap());
        assert!(
            (pp - 200.0).abs() < 1e-9 && (pb - 100.0).abs() < 1e-9,
            "{pp} {pb}"
        );
    }

    #[test]
    fn testpmd_work_is_bounded_by_how_many_of_its_bursts_were_empty() {
        let snap = |user: u64, at_ns: u64| Snapshot {
            seq: 1,
            vcpus: vec![c(user, 0)],
            at_ns,
            cache_model: None,
        };
        // 1e6 instructions, 10,000 bursts for 1,000 packets, 50 per empty burst.
        let empty = EmptyBursts {
            insns: 50.0,
            loaded: 0.0,
            stored: 0.0,
            outside: 0.0,
            bursts: (1, 2),
        };
        let (a, b) = (snap(0, 0), snap(1_000_000, 1_000_000_000));
        let x = testpmd_work(&a, &b, 10_000, 1000, empty).unwrap();
        // At most 9,000 empty bursts (every packet alone): (1e6 - 450,000) / 1000.
        assert!((x.insns - 550.0).abs() < 1e-9, "{}", x.insns);
        // At least 10,000 - 32 (32 packets a burst): (1e6 - 498,400) / 1000.
        let low = x.insns_low.unwrap();
        assert!((low - 501.6).abs() < 1e-9, "{low}");
        assert!(x.method.starts_with("testpmd: 10000 RX bursts"));
        assert!(testpmd_work(&a, &b, 5, 0, empty).is_err());
        // Empty bursts calibrated at 120 instructions: 9,000 of them are
        // more than all 1e6 counted. No figure, never a 0.
        let dear = EmptyBursts {
            insns: 120.0,
            ..empty
        };
        let why = testpmd_work(&a, &b, 10_000, 1000, dear).unwrap_err();
        assert!(why.contains("calibration does not fit"), "{why}");
        // 105 each: the upper bound stands (55), the lower one (-47.7) is none.
        let z = testpmd_work(
            &a,
            &b,
            10_000,
            1000,
            EmptyBursts {
                insns: 105.0,
                ..empty
            },
        )
        .unwrap();
        assert!(
            (z.insns - 55.0).abs() < 1e-9 && z.insns_low.is_none(),
            "{z:?}"
        );
        let w = Window {
            send: (vec![c(1_000_000, 0)], 1.0, None),
            gen_core: None,
            background: (vec![c(0, 0)], 1.0),
            external: Some(Err(why)),
            profile: None,
            interrupts: None,
            cache_model: None,
        };
        let p = w.per_packet(1000, 1000).unwrap();
        assert_eq!(
            (
                p.work_instructions,
                p.work_bytes_loaded,
                p.work_instructions_low
            ),
            (None, None, None)
        );
        assert!(
            p.work_method.starts_with("no work figure: testpmd's"),
            "{}",
            p.work_method
        );
        // 2,000 of the bursts fell outside the counted span: 7,000 empty inside.
        let out = EmptyBursts {
            outside: 2000.0,
            ..empty
        };
        let y = testpmd_work(&a, &b, 10_000, 1000, out).unwrap();
        assert!((y.insns - 650.0).abs() < 1e-9, "{}", y.insns);
    }

    #[test]
    fn without_empty_polls_the_background_rate_is_subtracted() {
        let w = Window {
            send: (vec![c(0, 1_200_000)], 2.0, None),
            gen_core: None,
            background: (vec![c(0, 100_000)], 1.0),
            external: None,
            profile: None,
            interrupts: None,
            cache_model: None,
        };
        let p = w.per_packet(1000, 1000).unwrap();
        assert_eq!(p.instructions, 1200.0);
        // 100,000 instructions/s x 2 s = 200,000.
        assert!((p.work_instructions.unwrap() - 1000.0).abs() < 1e-6);
        assert!(p.work_method.starts_with("background"));
        assert_eq!(w.per_packet(0, 10), None, "no packet, no figure");
        // A background as large as the window's count: absent, not 0.
        let w = Window {
            background: (vec![c(0, 700_000)], 1.0),
            ..w
        };
        let p = w.per_packet(1000, 1000).unwrap();
        assert_eq!(p.work_instructions, None);
        assert!(
            p.work_method.starts_with("no work figure"),
            "{}",
            p.work_method
        );
        // No cache model in the window: no cache figures, and a note why.
        assert_eq!(p.cache, None);
        assert!(!p.cache_note.is_empty());
    }

    /// The cache figures are per packet when asked for and the plugin's
    /// model was on in every access; absent, with the reason, otherwise.
    #[test]
    fn cache_figures_need_the_flag_and_the_model_on() {
        use pollnic_tools::counts::CacheCounts;
        let all = VcpuCounts {
            cache: CacheCounts {
                user_l1d_misses: 5_000,
                kernel_l1d_misses: 1_500,
                user_l2_misses: 4_000,
                kernel_l2_misses: 1_000,
                user_llc_misses: 100,
                user_llc_misses_no_ddio: 4_100,
                kernel_llc_misses_no_ddio: 900,
                kernel_external_lines: 1_000,
                ..CacheCounts::default()
            },
            ..VcpuCounts::default()
        };
        let p = cache_per_packet(true, Some("on"), &all, 1000.0).unwrap();
        assert_eq!(
            p,
            CachePerPacket {
                l1d_misses: 6.5,
                l2_misses: 5.0,
                llc_misses: 0.1,
                llc_misses_no_ddio: 5.0,
                external_lines: 1.0,
            }
        );
        let why = |asked, model| cache_per_packet(asked, model, &all, 1000.0).unwrap_err();
        assert!(why(false, Some("on")).contains("--count-cache"));
        assert!(why(true, None).contains("off"));
        assert!(why(true, Some("marker")).contains("marked regions"));
    }
}
