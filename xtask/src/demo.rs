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

/// The demo's RX and TX ring size, descriptors: at [`DEMO_RATE`] 2048
/// descriptors hold 102 ms of frames, where the testbed's longest vCPU stall
/// seen in a demo was 44 ms (512, loopback's default, holds 25 ms and lost
/// 0.2 % of a run to such stalls).
pub const DEMO_RING_SIZE: u32 = 2048;

/// Builds the release loopback example and the `pollnic` CLI (debug, for binding), boots
/// the guest, and runs `loopback --tx $POLLNIC_PORT0 --rx $POLLNIC_PORT1 --seconds N
/// --rate DEMO_RATE --ring-size DEMO_RING_SIZE <extra>` (no `--rate` with `full_speed`,
/// and neither flag when `extra` has it).
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
            "pollnic-tools",
            "--example",
            "loopback",
        ],
    )?;
    cargo::build_pollnic_cli(layout)?;
    let example = layout.target.join("release/examples/loopback");
    if !example.is_file() {
        bail!(
            "{} was not built: is there an `examples/loopback.rs` in the pollnic-tools package?",
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
    let ring_arg = if extra
        .iter()
        .any(|a| a == "--ring-size" || a.starts_with("--ring-size="))
    {
        String::new()
    } else {
        format!("--ring-size {DEMO_RING_SIZE} ")
    };
    let script = format!(
        "{} --tx \"$POLLNIC_PORT0\" --rx \"$POLLNIC_PORT1\" {seconds_arg}{rate_arg}{ring_arg}{}\n",
        shell_join([&example]),
        shell_join(extra)
    );
    qemu::run_in_guest(layout, &image, &script, opts)
}
