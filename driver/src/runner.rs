//! One RSS queue per pinned core: run a burst loop on every queue of a device,
//! each in its own thread pinned to a named core, while the caller's thread
//! is free to report. Threads are scoped, so the device (and its shutdown
//! order) outlives every queue thread by construction.

use crate::device::Device;
use crate::error::Error;
use crate::irq::RxMode;
use crate::queue::Queue;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Pin the calling thread to `core`; false when the OS refused.
fn pin_current_thread(core: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

/// Check that `cores` is not empty and names only cores this process may
/// run on (its affinity mask), before any thread starts.
fn check_cores(cores: &[usize]) -> Result<(), Error> {
    if cores.is_empty() {
        return Err(Error::NoCores);
    }
    let allowed: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    if let Some(&core) = cores.iter().find(|c| !allowed.contains(c)) {
        return Err(Error::CoreUnavailable { core, allowed });
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
/// [`Error::NoCores`] when `cores` is empty, [`Error::CoreUnavailable`] when
/// it names a core this process may not run on (its affinity mask: `taskset
/// -p $$` shows it), both before any thread starts; what
/// [`Device::set_rx_mode`] returns (e.g. [`Error::Interrupts`] when `mode`
/// needs MSI-X and it cannot be enabled); [`Error::Thread`] when a queue's
/// thread cannot be started; [`Error::QueuePanicked`] when `work` panicked
/// on a queue (the other queues' results are dropped then). A pin that
/// still fails at thread start is reported on stderr.
///
/// # Example
///
/// Count the frames each of four queues receives for ten seconds, one
/// thread per core, while the calling thread waits:
///
/// ```no_run
/// use pollnic::{run_pinned, Device, DeviceConfig, RxMode};
/// use std::time::{Duration, Instant};
///
/// let mut dev = Device::open("0000:03:00.0", &DeviceConfig::default().with_queues(4))?;
/// let until = Instant::now() + Duration::from_secs(10);
/// let counts = run_pinned(
///     &mut dev,
///     &[0, 1, 2, 3],
///     RxMode::BusyPoll,
///     |q| {
///         let (mut burst, mut n) = (Vec::with_capacity(32), 0u64);
///         while Instant::now() < until {
///             let got = q.rx_burst(&mut burst, 32);
///             n += got as u64;
///             q.free_bulk(&mut burst); // back to the queue's buffer cache
///             q.wait_rx(got);
///         }
///         n
///     },
///     || {}, // the caller's thread: a reporter would print here
/// )?;
/// println!("per queue: {counts:?}");
/// # Ok::<(), pollnic::Error>(())
/// ```
pub fn run_pinned<R, F, G>(
    dev: &mut Device,
    cores: &[usize],
    mode: RxMode,
    work: F,
    report: G,
) -> Result<Vec<R>, Error>
where
    R: Send,
    F: Fn(&mut Queue) -> R + Sync,
    G: FnOnce(),
{
    check_cores(cores)?;
    dev.set_rx_mode(mode)?;
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
                    .map_err(|source| Error::Thread {
                        what: format!("queue {i}"),
                        cause: source,
                    })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        // Sleep between looks rather than spin: a spinning caller would
        // hold a core the queue threads may need to get going.
        while started.load(Ordering::Acquire) < handles.len() {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        report();
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join()
                    .map_err(|_| Error::QueuePanicked { queue: i as u16 })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn core_check_uses_the_affinity_mask() {
        assert!(matches!(check_cores(&[]), Err(Error::NoCores)));
        match check_cores(&[100_000]) {
            Err(e @ Error::CoreUnavailable { core: 100_000, .. }) => {
                assert!(
                    e.to_string().contains("core 100000 is not available"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        let first = core_affinity::get_core_ids().unwrap()[0].id;
        check_cores(&[first]).unwrap();
    }
}
