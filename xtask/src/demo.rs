//! `cargo xtask demo`: the loopback example between the guest's two igb ports.

use anyhow::{bail, Result};

use crate::cmd::shell_join;
use crate::layout::Layout;
use crate::qemu::{self, RunOutcome, VmOptions};
use crate::{cargo, guest};

/// Builds the release examples and the `pollnic` CLI (release, and debug for binding), boots
/// the guest, and runs `loopback --tx $POLLNIC_PORT0 --rx $POLLNIC_PORT1 --seconds N <extra>`.
pub fn run(
    layout: &Layout,
    opts: &VmOptions,
    seconds: u32,
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
    let script = format!(
        "{} --tx \"$POLLNIC_PORT0\" --rx \"$POLLNIC_PORT1\" {seconds_arg}{}\n",
        shell_join([&example]),
        shell_join(extra)
    );
    qemu::run_in_guest(layout, &image, &script, opts)
}
