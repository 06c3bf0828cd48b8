//! One RSS queue per pinned core: run a burst loop on every queue of a device,
//! each in its own thread pinned to a named core, while the caller's thread
//! is free to report. Threads are scoped, so the device (and its shutdown
//! order) outlives every queue thread by construction.

use crate::device::Device;
use crate::irq::RxMode;
use crate::queue::Queue;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Core numbers are below this (Linux's largest NR_CPUS is 8192).
const MAX_CORE: usize = 8192;

/// Parse a core list like `0,1` or `0-3,6`.
///
/// # Errors
/// A message naming the bad item.
pub fn parse_cores(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        if let Some((a, b)) = item.split_once('-') {
            let (a, b): (usize, usize) = (
                a.parse().map_err(|_| {
                    format!("bad core `{item}` in `{s}` (expected e.g. 0,1 or 0-3)")
                })?,
                b.parse().map_err(|_| {
                    format!("bad core `{item}` in `{s}` (expected e.g. 0,1 or 0-3)")
                })?,
            );
            if a > b {
                return Err(format!("bad core range `{item}` in `{s}`"));
            }
            if b >= MAX_CORE {
                return Err(format!(
                    "core {b} in `{s}` is beyond any machine (cores are numbered below {MAX_CORE})"
                ));
            }
            out.extend(a..=b);
        } else {
            out.push(
                item.parse().map_err(|_| {
                    format!("bad core `{item}` in `{s}` (expected e.g. 0,1 or 0-3)")
                })?,
            );
        }
    }
    if out.is_empty() {
        return Err("empty core list".into());
    }
    Ok(out)
}

/// Pin the calling thread to `core`. Returns false when the OS refused (e.g.
/// the core does not exist or is outside the process's cpuset).
pub fn pin_current_thread(core: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

/// Check that `cores` is not empty and names only cores this process may run
/// on (its affinity mask: `taskset -p $$` shows it), before any thread starts.
///
/// # Errors
/// A message naming the first core that is not allowed, with the allowed list.
pub fn check_cores(cores: &[usize]) -> Result<(), String> {
    if cores.is_empty() {
        return Err("no cores given".into());
    }
    let allowed: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    if let Some(bad) = cores.iter().find(|c| !allowed.contains(c)) {
        return Err(format!(
            "core {bad} is not available to this process (allowed: {allowed:?}; see `taskset -p $$`, cpusets, isolcpus)"
        ));
    }
    Ok(())
}

/// Run `work(queue)` on every queue of `dev`, queue `i` in a thread pinned to
/// `cores[i % cores.len()]`, and `report()` on the calling thread meanwhile;
/// returns each queue's result in queue order once all have returned.
///
/// `report()` starts only once every queue thread runs on its core and is
/// entering `work`, so traffic that `report` offers (a generator) does not
/// race the threads' creation. It does not promise that `work` has polled
/// yet: a caller that must not offer traffic before then waits for a signal
/// from `work` (as `compare` and `loopback` do; README, "Where the
/// loss came from, and a run without it").
///
/// Every queue runs in `mode` ([`Device::set_rx_mode`]): `work`'s loop calls
/// [`Queue::wait_rx`] after each burst, which busy-polls, sleeps on the
/// queue's interrupt, or adapts. The sleeping thread is the queue's pinned
/// thread, so its wake-up lands on the queue's core: pollnic's counterpart
/// of IRQ affinity.
///
/// # Errors
/// A message when `cores` is empty or names a core this process may not run
/// on ([`check_cores`], before any thread starts), or when `mode` needs
/// MSI-X and it cannot be enabled ([`crate::Error::Interrupts`]). A pin that
/// still fails at thread start is reported on stderr.
pub fn run_pinned<R, F, G>(
    dev: &mut Device,
    cores: &[usize],
    mode: RxMode,
    work: F,
    report: G,
) -> Result<Vec<R>, String>
where
    R: Send,
    F: Fn(&mut Queue) -> R + Sync,
    G: FnOnce(),
{
    check_cores(cores)?;
    dev.set_rx_mode(mode).map_err(|e| e.to_string())?;
    let work = &work;
    let started = AtomicUsize::new(0);
    let started = &started;
    std::thread::scope(|s| {
        let handles: Vec<_> = dev
            .queues_mut()
            .iter_mut()
            .enumerate()
            .map(|(i, q)| {
                let core = cores[i % cores.len()];
                std::thread::Builder::new()
                    .name(format!("pollnic-q{i}"))
                    .spawn_scoped(s, move || {
                        if !pin_current_thread(core) {
                            eprintln!("pollnic: queue {i}: could not pin to core {core}; running unpinned");
                        }
                        started.fetch_add(1, Ordering::Release);
                        work(q)
                    })
                    .expect("spawn queue thread")
            })
            .collect::<Vec<_>>();
        // Sleep between looks rather than spin: a spinning caller would
        // hold a core the queue threads may need to get going.
        while started.load(Ordering::Acquire) < handles.len() {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        report();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a queue thread panicked".to_string()))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn core_lists() {
        assert_eq!(parse_cores("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_cores("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert!(parse_cores("a").is_err());
        assert!(parse_cores("3-1").is_err());
        assert!(parse_cores("").is_err());
        assert!(parse_cores("0-10000000000").is_err());
        assert!(parse_cores("0-18446744073709551615").is_err());
    }
    #[test]
    fn core_check_uses_the_affinity_mask() {
        assert!(check_cores(&[]).is_err());
        let e = check_cores(&[100_000]).unwrap_err();
        assert!(e.contains("core 100000 is not available"), "{e}");
        let first = core_affinity::get_core_ids().unwrap()[0].id;
        check_cores(&[first]).unwrap();
    }
}
