//! Signal handling so that the device is shut down in order: SIGINT and
//! SIGTERM set a flag the busy-poll loops check, the loops end, the tool
//! prints its summary and the [`pollnic::Device`] is dropped normally (stop
//! DMA, reset, unmap, free).
//!
//! - Two signals within 1 s count as one: GNU `timeout` and process
//!   managers forward a Ctrl-C as a second signal, and the tool still gives
//!   its summary.
//! - A third signal, or another one more than 1 s after the first, ends the
//!   process at once with status 128 + the signal number, as a shell reports
//!   it.
//! - A panic in any thread also sets the flag (after the panic message), so
//!   every loop ends, the devices are shut down, and the tool exits with
//!   [`PANIC_EXIT`] instead of leaving a reporter thread printing.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Exit status after a thread panicked (the status of a panicking Rust main).
pub const PANIC_EXIT: i32 = 101;

/// The first signal, 0 before any.
static FIRST_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Set by the panic hook.
static PANICKED: AtomicBool = AtomicBool::new(false);
/// The flag [`stop_flag`] handed out.
static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// A flag that becomes true on the first SIGINT or SIGTERM, or on a panic
/// in any thread (see the module docs for a second and third signal).
/// Call it once, before the devices are opened; later calls return the
/// same flag.
///
/// # Errors
/// The error from registering the signal handler or starting its thread.
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    if let Some(f) = FLAG.get() {
        return Ok(Arc::clone(f));
    }
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let f = Arc::clone(&flag);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut first_at: Option<Instant> = None;
            let mut count = 0u32;
            for sig in signals.forever() {
                count += 1;
                let Some(at) = first_at else {
                    first_at = Some(Instant::now());
                    FIRST_SIGNAL.store(sig, Ordering::SeqCst);
                    f.store(true, Ordering::SeqCst);
                    continue;
                };
                if count >= 3 || at.elapsed() > Duration::from_secs(1) {
                    eprintln!("{} again: exiting now, without a summary", name(sig));
                    std::process::exit(128 + sig);
                }
            }
        })?;
    let p = Arc::clone(&flag);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        PANICKED.store(true, Ordering::SeqCst);
        p.store(true, Ordering::SeqCst);
    }));
    let _ = FLAG.set(Arc::clone(&flag));
    Ok(flag)
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "Ctrl-C (SIGINT)",
        SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// What stopped the run early, for the summary's first line: `Ctrl-C
/// (SIGINT)`, `SIGTERM`, or `None` when no signal came.
pub fn stopped_by() -> Option<&'static str> {
    match FIRST_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(name(s)),
    }
}

/// The line a summary starts with after a signal, e.g. `(interrupted by
/// SIGTERM: the device was shut down cleanly)`; `None` without one.
pub fn interrupted_line(what: &str) -> Option<String> {
    stopped_by().map(|s| format!("(interrupted by {s}: {what} shut down cleanly)"))
}

/// Whether a thread panicked since [`stop_flag`] (the panic hook ran).
pub fn panicked() -> bool {
    PANICKED.load(Ordering::SeqCst)
}

/// After the devices are closed: if a thread panicked, say so and exit
/// [`PANIC_EXIT`]; otherwise return.
pub fn exit_if_panicked(tool: &str) {
    if panicked() {
        eprintln!("{tool}: a thread panicked (message above); the devices were shut down cleanly");
        std::process::exit(PANIC_EXIT);
    }
}

/// For the test that a panic ends the run cleanly: panic here when the
/// environment variable `POLLNIC_INJECT_PANIC` names `place`.
pub fn inject_panic(place: &str) {
    if std::env::var("POLLNIC_INJECT_PANIC").is_ok_and(|v| v == place) {
        panic!("injected panic in {place} (POLLNIC_INJECT_PANIC={place})");
    }
}
