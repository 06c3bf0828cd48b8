//! `cargo xtask demo`: the loopback example between the guest's two igb ports.

use anyhow::{bail, Result};

use crate::cmd::shell_join;
use crate::layout::Layout;
use crate::qemu::{self, RunOutcome, VmOptions};
use crate::{cargo, guest};

/// The demo's default offered rate, packets/s: the testbed sustains it
/// (QEMU/TCG on 2 cores: loopback lost nothing at 20 kpps, while at its
/// full speed of about 100-170 kpps the emulated RX ring overflows).
pub const DEMO_RATE: u32 = 20_000;

/// Builds the release loopback example and the `pollnic` CLI (debug, for binding), boots
/// the guest, and runs `loopback --tx $POLLNIC_PORT0 --rx $POLLNIC_PORT1 --seconds N
/// --rate DEMO_RATE <extra>` (no `--rate` with `full_speed` or when `extra` has one).
pub fn run(
    layout: &Layout,
    opts: &VmOptions,
    seconds: u32,
    full_speed: bool,
    extra: &[String],
) -> Result<RunOutcome> {
    let image = guest::prepare(layout)?;
    cargo::run(
        layout,
        &[
            "build",
            "--release",
            "-p",
            "pollnic-examples",
            "--example",
            "loopback",
        ],
    )?;
    cargo::build_pollnic_cli(layout)?;
    let example = layout.target.join("release/examples/loopback");
    if !example.is_file() {
        bail!(
            "{} was not built: is there an `examples/loopback.rs` in the pollnic-examples package?",
            example.display()
        );
    }
    // `cargo xtask demo -- --seconds 3` and `cargo xtask demo --seconds 3` both work:
    // the example's own flag wins when given.
    let seconds_arg = if extra
        .iter()
        .any(|a| a == "--seconds" || a.starts_with("--seconds="))
    {
        String::new()
    } else {
        format!("--seconds {seconds} ")
    };
    let given_rate = extra
        .iter()
        .any(|a| a == "--rate" || a.starts_with("--rate="));
    let rate_arg = if full_speed || given_rate {
        String::new()
    } else {
        format!("--rate {DEMO_RATE} ")
    };
    let script = format!(
        "{} --tx \"$POLLNIC_PORT0\" --rx \"$POLLNIC_PORT1\" {seconds_arg}{rate_arg}{}\n",
        shell_join([&example]),
        shell_join(extra)
    );
    qemu::run_in_guest(layout, &image, &script, opts)
}
