//! Bounded waits on device registers: every poll in bring-up and shutdown
//! goes through [`wait_for`], so none can hang, and a timeout names what was
//! awaited (the driver turns it into [`crate::Error::Timeout`]).

use std::time::{Duration, Instant};

/// Why a bounded wait gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut {
    /// What was awaited, e.g. "device reset (CTRL.RST)".
    pub what: &'static str,
    /// How long, in ms.
    pub waited_ms: u64,
}

/// Poll `cond` every 100 µs until it holds or `limit` passes.
///
/// # Errors
/// [`TimedOut`] naming `what` once `limit` has passed with `cond` false.
pub fn wait_for(
    what: &'static str,
    limit: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<(), TimedOut> {
    let start = Instant::now();
    loop {
        if cond() {
            return Ok(());
        }
        if start.elapsed() >= limit {
            return Err(TimedOut {
                what,
                waited_ms: limit.as_millis() as u64,
            });
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}
