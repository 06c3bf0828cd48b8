//! The kernel's request for a device back (VFIO's device-release request,
//! sent when an administrator unbinds the device from vfio-pci or removes
//! it): one flag per device, set from the thread that receives the request,
//! read by the queue threads where they check their own stop flags, and the
//! callbacks a program registers with [`crate::Device::on_removal`].
//!
//! The hot path does not change: nothing here is read inside `rx_burst` or
//! `tx_burst`. A loop reads the flag (one relaxed load of a cache line that
//! is written once) where it already reads its stop flag, or a callback sets
//! that stop flag itself. Design: `docs/design/device-release.md`.

use crate::pci::PciAddress;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

/// A callback run when the request arrives, with the device's address.
pub(crate) type OnRemoval = Box<dyn Fn(PciAddress) + Send + Sync>;

/// One device's release-request state.
pub(crate) struct Removal {
    addr: PciAddress,
    /// Set on the first request; never cleared (the device is going away).
    requested: CachePadded<AtomicBool>,
    /// Requests received (the kernel repeats one every 10 s).
    count: AtomicU32,
    /// Whether requests are delivered at all (VFIO: yes; a model: no).
    watched: AtomicBool,
    callbacks: Mutex<Vec<OnRemoval>>,
}

impl Removal {
    pub(crate) fn new(addr: PciAddress) -> Removal {
        Removal {
            addr,
            requested: CachePadded::new(AtomicBool::new(false)),
            count: AtomicU32::new(0),
            watched: AtomicBool::new(false),
            callbacks: Mutex::new(Vec::new()),
        }
    }

    /// A request arrived: set the flag, then run the callbacks (on the
    /// first request only; later ones repeat the same question).
    ///
    /// The count goes up under the callbacks' lock, as `on_request` looks
    /// at it: a callback registered concurrently is either in the list when
    /// the first request runs them, or sees the request counted and runs at
    /// once, never both (each runs exactly once).
    pub(crate) fn request(&self) {
        let cbs = self.callbacks.lock().unwrap_or_else(|e| e.into_inner());
        let first = self.count.fetch_add(1, Ordering::AcqRel) == 0;
        self.requested.store(true, Ordering::Release);
        if first {
            for cb in cbs.iter() {
                cb(self.addr);
            }
        }
    }

    /// Whether the kernel asked for the device back.
    #[inline]
    pub(crate) fn requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed)
    }

    /// Requests received so far.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u32 {
        self.count.load(Ordering::Acquire)
    }

    pub(crate) fn set_watched(&self, on: bool) {
        self.watched.store(on, Ordering::Release);
    }

    pub(crate) fn watched(&self) -> bool {
        self.watched.load(Ordering::Acquire)
    }

    /// Run `cb` on the request; at once if it came already.
    pub(crate) fn on_request(&self, cb: OnRemoval) {
        let mut cbs = self.callbacks.lock().unwrap_or_else(|e| e.into_inner());
        // Under the lock, which `request` counts under too: either the
        // request comes after this (and runs `cb` from the list) or it was
        // counted before we look (and its callbacks already ran without `cb`).
        if self.count.load(Ordering::Acquire) > 0 {
            cb(self.addr);
        }
        cbs.push(cb);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn callbacks_run_once_before_or_after_the_request() {
        let addr: PciAddress = "0000:00:08.0".parse().unwrap();
        let r = Removal::new(addr);
        let early = Arc::new(AtomicUsize::new(0));
        let e = Arc::clone(&early);
        r.on_request(Box::new(move |a| {
            assert_eq!(a.to_string(), "0000:00:08.0");
            e.fetch_add(1, Ordering::SeqCst);
        }));
        assert!(!r.requested());
        r.request();
        r.request(); // the kernel's repeat, 10 s later
        assert!(r.requested());
        assert_eq!(r.count(), 2);
        assert_eq!(early.load(Ordering::SeqCst), 1);
        let late = Arc::new(AtomicUsize::new(0));
        let l = Arc::clone(&late);
        r.on_request(Box::new(move |_| {
            l.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(late.load(Ordering::SeqCst), 1);
    }

    /// A callback registered while the first request arrives runs exactly
    /// once. Before the fix `request` counted itself and only then took the
    /// lock: a registration in between saw the count, ran the callback at
    /// once and put it in the list, which the request then ran again.
    #[test]
    fn a_callback_registered_during_the_request_runs_exactly_once() {
        use std::sync::Barrier;
        let addr: PciAddress = "0000:00:08.0".parse().unwrap();
        const ROUNDS: usize = 20_000;
        const THREADS: usize = 4; // even: register; odd: request
        let removals: Vec<Removal> = (0..ROUNDS).map(|_| Removal::new(addr)).collect();
        let runs: Vec<Arc<AtomicUsize>> = (0..ROUNDS * THREADS)
            .map(|_| Arc::new(AtomicUsize::new(0)))
            .collect();
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (removals, runs, barrier) = (&removals, &runs, &barrier);
                s.spawn(move || {
                    for (i, r) in removals.iter().enumerate() {
                        barrier.wait();
                        if t % 2 == 0 {
                            let n = Arc::clone(&runs[i * THREADS + t]);
                            r.on_request(Box::new(move |_| {
                                n.fetch_add(1, Ordering::SeqCst);
                            }));
                        } else {
                            r.request();
                        }
                    }
                });
            }
        });
        let mut wrong = 0;
        for (i, n) in runs.iter().enumerate() {
            if i % THREADS % 2 == 0 && n.load(Ordering::SeqCst) != 1 {
                wrong += 1;
            }
        }
        assert_eq!(wrong, 0, "callbacks that did not run exactly once");
    }

    /// The interleaving of the race, forced: the lock is held while a
    /// registration queues for it first and a request second; the
    /// registration then gets the lock first (the kernel wakes a futex's
    /// waiters in order). Before the fix the request had counted itself
    /// before it queued, so the registration ran its callback at once and
    /// the request ran it again from the list.
    #[test]
    fn a_registration_queued_before_a_request_runs_once() {
        let addr: PciAddress = "0000:00:08.0".parse().unwrap();
        let pause = std::time::Duration::from_millis(20);
        for round in 0..10 {
            let r = Removal::new(addr);
            let runs = Arc::new(AtomicUsize::new(0));
            let guard = r.callbacks.lock().unwrap();
            std::thread::scope(|s| {
                let n = Arc::clone(&runs);
                s.spawn(|| {
                    r.on_request(Box::new(move |_| {
                        n.fetch_add(1, Ordering::SeqCst);
                    }))
                });
                std::thread::sleep(pause);
                s.spawn(|| r.request());
                std::thread::sleep(pause);
                drop(guard);
            });
            assert_eq!(runs.load(Ordering::SeqCst), 1, "round {round}");
            assert_eq!(r.count(), 1);
        }
    }
}
