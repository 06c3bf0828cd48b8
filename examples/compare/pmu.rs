//! On hardware: the CPU's own performance counters around each row's send
//! window, per receiving core, read with `perf_event_open` (the `perf-event`
//! crate): cycles, instructions, and last-level-cache loads and load misses,
//! the events `perf stat -e cycles,instructions,LLC-loads,LLC-load-misses`
//! names. Every online CPU but the generator's is counted, as the testbed's
//! counter does ([`crate::cost`]): system-wide on those CPUs (all processes,
//! user and kernel), so the kernel's softirq work is in it as pollnic's is.
//!
//! Where the CPU exposes no PMU (this project's CI machine, a TCG guest, many
//! cloud VMs) the hardware events cannot be opened and each row says "no PMU"
//! with the kernel's reason; nothing fails. `--pmu software` counts the
//! kernel's software events instead (cpu-clock, context switches, page
//! faults, CPU migrations) through the same code, so the path is tested
//! where no PMU exists.

use perf_event::events::{Cache, CacheOp, CacheResult, Event, Hardware, Software, WhichCache};
use perf_event::{Builder, Counter};

/// Which events `compare --pmu` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PmuEvents {
    /// The CPU's: cycles, instructions, LLC-loads, LLC-load-misses.
    Hardware,
    /// The kernel's software events (no PMU needed): cpu-clock (ns),
    /// context-switches, page-faults, cpu-migrations.
    Software,
    /// None.
    Off,
}

/// Which events [`PMU_EVENTS`] asks for (set once by `main`).
pub static PMU_EVENTS: std::sync::OnceLock<PmuEvents> = std::sync::OnceLock::new();

/// The events of a choice, with the names `perf stat` gives them.
fn events(which: PmuEvents) -> Vec<(&'static str, Event)> {
    let llc = |result| {
        Event::from(Cache {
            which: WhichCache::LL,
            operation: CacheOp::READ,
            result,
        })
    };
    match which {
        PmuEvents::Hardware => vec![
            ("cycles", Hardware::CPU_CYCLES.into()),
            ("instructions", Hardware::INSTRUCTIONS.into()),
            ("LLC-loads", llc(CacheResult::ACCESS)),
            ("LLC-load-misses", llc(CacheResult::MISS)),
        ],
        PmuEvents::Software => vec![
            ("cpu-clock", Software::CPU_CLOCK.into()),
            ("context-switches", Software::CONTEXT_SWITCHES.into()),
            ("page-faults", Software::PAGE_FAULTS.into()),
            ("cpu-migrations", Software::CPU_MIGRATIONS.into()),
        ],
        PmuEvents::Off => Vec::new(),
    }
}

/// Counters open on a set of CPUs, one per CPU and event. Not a perf group:
/// the crate's `Group` leader counts this process on any CPU, and the kernel
/// refuses (EINVAL) a per-CPU, any-process member in it; the counters are
/// started and stopped one after the other instead, microseconds apart in a
/// window of seconds.
pub struct Pmu {
    names: Vec<&'static str>,
    cpus: Vec<(usize, Vec<Counter>)>,
}

/// One event summed over the counted CPUs, per packet.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PmuFigure {
    /// The event, as `perf stat` names it.
    pub event: String,
    /// Its count over the window on the counted CPUs, per received packet.
    pub per_packet: f64,
}

impl Pmu {
    /// Open `which` on every CPU of `cpus`, system-wide (any process).
    ///
    /// # Errors
    /// The kernel's refusal of the first event it refused, with what it
    /// means ("no PMU" when the CPU exposes none; a permission error names
    /// `perf_event_paranoid`).
    pub fn open(which: PmuEvents, cpus: &[usize]) -> Result<Pmu, String> {
        let events = events(which);
        if events.is_empty() {
            return Err("off (--pmu off)".into());
        }
        let mut open = Vec::new();
        for &cpu in cpus {
            let mut counters = Vec::new();
            for (name, ev) in &events {
                let c = Builder::new()
                    .one_cpu(cpu)
                    .any_pid()
                    .kind(ev.clone())
                    .build()
                    .map_err(|e| explain(e, name, cpu))?;
                counters.push(c);
            }
            open.push((cpu, counters));
        }
        Ok(Pmu {
            names: events.iter().map(|(n, _)| *n).collect(),
            cpus: open,
        })
    }

    /// Start counting (from zero).
    ///
    /// # Errors
    /// An ioctl on a counter failed.
    pub fn start(&mut self) -> Result<(), String> {
        for c in self.cpus.iter_mut().flat_map(|(_, c)| c.iter_mut()) {
            c.reset()
                .and_then(|_| c.enable())
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Stop counting and give each event's count summed over the CPUs.
    ///
    /// # Errors
    /// Reading a counter failed, or it was multiplexed (the PMU had no room
    /// for the group for part of the window: the figure would be scaled).
    pub fn finish(&mut self) -> Result<Vec<(&'static str, u64)>, String> {
        let mut sums = vec![0u64; self.names.len()];
        for c in self.cpus.iter_mut().flat_map(|(_, c)| c.iter_mut()) {
            c.disable().map_err(|e| e.to_string())?;
        }
        for (cpu, counters) in &mut self.cpus {
            for (i, c) in counters.iter_mut().enumerate() {
                let ct = c.read_count_and_time().map_err(|e| e.to_string())?;
                if ct.time_enabled != ct.time_running {
                    return Err(format!(
                        "{} on CPU {cpu} ran {} of {} ns (multiplexed with other perf users: \
                         its count would be an estimate)",
                        self.names[i], ct.time_running, ct.time_enabled
                    ));
                }
                sums[i] += ct.count;
            }
        }
        Ok(self.names.iter().copied().zip(sums).collect())
    }
}

/// Around one send window: open [`PMU_EVENTS`] on every online CPU but
/// `gen_core` and start them; `None` when `--pmu off`.
pub fn begin(gen_core: usize) -> Option<Result<Pmu, String>> {
    let which = *PMU_EVENTS.get().unwrap_or(&PmuEvents::Hardware);
    if which == PmuEvents::Off {
        return None;
    }
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpus: Vec<usize> = (0..online).filter(|&c| c != gen_core).collect();
    Some(Pmu::open(which, &cpus).and_then(|mut p| p.start().map(|_| p)))
}

/// The row's figures per received packet, and what to say of them: the
/// events' list, or why there is none ("no PMU: ...").
pub fn per_packet(
    window: &Option<Result<Vec<(&'static str, u64)>, String>>,
    packets: u64,
) -> (Vec<PmuFigure>, String) {
    match window {
        None => (
            Vec::new(),
            "not read for this row (--pmu off, or a transmit row)".into(),
        ),
        Some(Err(why)) => (Vec::new(), why.clone()),
        Some(Ok(_)) if packets == 0 => (Vec::new(), "no packet".into()),
        Some(Ok(sums)) => (
            sums.iter()
                .map(|(event, total)| PmuFigure {
                    event: event.to_string(),
                    per_packet: *total as f64 / packets as f64,
                })
                .collect(),
            format!(
                "{}: every CPU but the generator's, system-wide, over the send window",
                sums.iter().map(|(e, _)| *e).collect::<Vec<_>>().join(", ")
            ),
        ),
    }
}

/// A refusal from `perf_event_open`, in words.
fn explain(e: std::io::Error, what: &str, cpu: usize) -> String {
    let why = match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
            "no PMU: this CPU (or VM) does not expose the event".to_string()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "not permitted: system-wide counting needs root or CAP_PERFMON (or \
             `sysctl kernel.perf_event_paranoid=-1`) ({e})"
        ),
        _ => e.to_string(),
    };
    format!("{what} on CPU {cpu}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_opens_nothing_and_says_so() {
        let e = Pmu::open(PmuEvents::Off, &[0]).err().unwrap();
        assert!(e.contains("off"), "{e}");
        assert!(events(PmuEvents::Hardware).iter().map(|(n, _)| *n).eq([
            "cycles",
            "instructions",
            "LLC-loads",
            "LLC-load-misses"
        ]));
    }

    #[test]
    fn counts_become_figures_per_packet_and_a_refusal_stays_its_reason() {
        let w = Some(Ok(vec![("cycles", 1000u64), ("instructions", 500)]));
        let (f, note) = per_packet(&w, 10);
        assert_eq!(
            f[0],
            PmuFigure {
                event: "cycles".into(),
                per_packet: 100.0
            }
        );
        assert_eq!(f[1].per_packet, 50.0);
        assert!(note.starts_with("cycles, instructions:"), "{note}");
        let (f, note) = per_packet(&Some(Err("cycles on CPU 0: no PMU: x".into())), 10);
        assert!(f.is_empty() && note.contains("no PMU"), "{note}");
        assert!(per_packet(&None, 10).0.is_empty());
    }

    #[test]
    fn refusals_are_explained() {
        let e = explain(std::io::Error::from_raw_os_error(libc::ENOENT), "cycles", 3);
        assert!(e.starts_with("cycles on CPU 3: no PMU"), "{e}");
        let e = explain(std::io::Error::from_raw_os_error(libc::EACCES), "cycles", 0);
        assert!(e.contains("perf_event_paranoid"), "{e}");
    }
}
