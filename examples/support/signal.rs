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
//! - The kernel's request for a device back (an unbind from vfio-pci or a
//!   remove while the tool runs) sets it too, once [`stop_on_removal`] was
//!   called for that device: the loops end, the tool prints its summary,
//!   drops the device (which lets the unbind or remove finish), and exits
//!   [`REMOVED_EXIT`] with `pollnic::Error::DeviceRemoved`'s message.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Exit status after a thread panicked (the status of a panicking Rust main).
pub const PANIC_EXIT: i32 = 101;

/// Exit status when the kernel took a port back while the tool ran (an
/// unbind from vfio-pci or a remove): 69, `EX_UNAVAILABLE` of BSD
/// `sysexits.h`, "a service is unavailable".
pub const REMOVED_EXIT: i32 = 69;

/// The port whose release request stopped the run, if one did.
static REMOVED: OnceLock<String> = OnceLock::new();

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
/// (SIGINT)`, `SIGTERM`, the kernel's release request for a port, or
/// `None` when nothing did.
pub fn stopped_by() -> Option<String> {
    if let Some(addr) = REMOVED.get() {
        return Some(format!(
            "the kernel's request for {addr} (an unbind from vfio-pci or a remove)"
        ));
    }
    match FIRST_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(name(s).to_string()),
    }
}

/// The line a summary starts with after a signal, e.g. `(interrupted by
/// SIGTERM: the device was shut down cleanly)`; `None` without one.
pub fn interrupted_line(what: &str) -> Option<String> {
    stopped_by().map(|s| format!("(interrupted by {s}: {what} shut down cleanly)"))
}

/// Stop the tool when the kernel asks for `dev` back, as a signal does: the
/// [`stop_flag`] is set (from the device's `pollnic-release` thread), the
/// summary's first line names the request, and the tool then returns
/// `dev.check_removed()`'s error, which [`crate::args::exit_with`] turns
/// into [`REMOVED_EXIT`]. Call it right after opening each device.
///
/// # Errors
/// As [`stop_flag`] (when it was not called before).
pub fn stop_on_removal(dev: &pollnic::Device) -> std::io::Result<()> {
    let flag = stop_flag()?;
    dev.on_removal(move |addr| {
        let _ = REMOVED.set(addr.to_string());
        flag.store(true, Ordering::SeqCst);
    });
    Ok(())
}

/// Close `devs`, the ones the kernel asked for first (its unbind or remove
/// waits for their close, not for the others', whose close includes a
/// function reset), and return the first one's `Error::DeviceRemoved`.
///
/// # Errors
/// `pollnic::Error::DeviceRemoved` for the first device the kernel asked for.
pub fn close_removed_first(devs: Vec<pollnic::Device>) -> Result<(), pollnic::Error> {
    let (removed, others): (Vec<_>, Vec<_>) = devs.into_iter().partition(|d| d.is_removed());
    let err = removed.first().map(|d| d.check_removed());
    drop(removed);
    drop(others);
    err.unwrap_or(Ok(()))
}

/// Whether a port's release request stopped the run ([`stop_on_removal`]).
pub fn removed() -> bool {
    REMOVED.get().is_some()
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
