//! Ctrl-C handling so that the device is shut down in order: SIGINT and
//! SIGTERM set a flag the busy-poll loop checks, the loop ends, and the
//! [`crate::Device`] is dropped normally (stop DMA, reset, unmap, free).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A flag that becomes true on SIGINT or SIGTERM. A second signal while the
/// flag is already set terminates the process (exit status 130) in case the
/// program is stuck.
///
/// # Errors
/// The error from registering the signal handler.
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))?;
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
    }
    Ok(flag)
}
