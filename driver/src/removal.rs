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
    pub(crate) fn request(&self) {
        let first = self.count.fetch_add(1, Ordering::AcqRel) == 0;
        self.requested.store(true, Ordering::Release);
        if first {
            let cbs = self.callbacks.lock().unwrap_or_else(|e| e.into_inner());
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
        // Under the lock: `request` either sees `cb` in the list or has
        // counted the request before we look.
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
}
