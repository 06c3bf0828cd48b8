//! One interrupt vector's eventfd: VFIO signals it for an MSI-X vector
//! (`VFIO_DEVICE_SET_IRQS` with `VFIO_IRQ_SET_DATA_EVENTFD`), a software
//! model signals it itself, and the queue's thread blocks on it with a
//! timeout (`poll(2)`), then reads it to zero.
//!
//! Source: Linux `Documentation/driver-api/vfio.rst` ("VFIO_DEVICE_SET_IRQS"),
//! `eventfd(2)`, `poll(2)`.

use std::os::fd::AsRawFd;
use std::time::Duration;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

/// The eventfd of one MSI-X vector. Signalled by the device side (VFIO in
/// the kernel, or a software model), waited on by the queue's thread.
#[derive(Debug)]
pub struct IrqEvent {
    fd: EventFd,
}

impl IrqEvent {
    /// A new non-blocking eventfd.
    ///
    /// # Errors
    /// The `eventfd(2)` error (e.g. `EMFILE`, too many open files).
    pub fn new() -> std::io::Result<IrqEvent> {
        Ok(IrqEvent {
            fd: EventFd::new(EFD_NONBLOCK)?,
        })
    }

    /// The eventfd, for `VFIO_DEVICE_SET_IRQS`.
    pub(crate) fn eventfd(&self) -> &EventFd {
        &self.fd
    }

    /// Signal the vector once (what the kernel does on an MSI-X message; a
    /// software model calls this when it raises the vector).
    pub fn signal(&self) {
        // Fails only when the counter would overflow (2^64 - 2 signals
        // unread): it is then signalled anyway.
        let _ = self.fd.write(1);
    }

    /// Take the signals counted so far (0 when none), without blocking.
    pub fn take(&self) -> u64 {
        self.fd.read().unwrap_or(0)
    }

    /// Block until the vector is signalled or `timeout` passes; returns the
    /// number of signals taken (0 on timeout). A signal raised before the
    /// call is taken at once. `EINTR` returns 0 early (the caller polls its
    /// ring and comes back).
    pub fn wait(&self, timeout: Duration) -> u64 {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // Round a sub-millisecond timeout up: 0 would not block at all.
        let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid, initialised pollfd that lives across
        // the call, and the count passed is 1; the fd is owned by `self`.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n <= 0 {
            return 0;
        }
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    #[test]
    fn wait_times_out_then_takes_signals() {
        let e = IrqEvent::new().unwrap();
        let t = Instant::now();
        assert_eq!(e.wait(Duration::from_millis(20)), 0);
        assert!(t.elapsed() >= Duration::from_millis(15));
        e.signal();
        e.signal();
        assert_eq!(e.wait(Duration::from_secs(5)), 2);
        assert_eq!(e.take(), 0);
    }
}
