//! `cargo xtask soak --minutes N`: the soak test (`tests/guest_soak.rs`) for N minutes in the
//! guest. `cargo xtask test` runs the same test for 60 s.

use anyhow::{bail, Result};

use crate::cmd::shell_quote;
use crate::layout::Layout;
use crate::qemu::{self, RunOutcome, VmOptions};
use crate::{cargo, guest, say};

/// The soak test target.
const SOAK_TEST: &str = "guest_soak";

/// Builds the guest tests, boots the guest and runs `guest_soak` with
/// `POLLNIC_SOAK_SECONDS = minutes * 60`. The guest's overall timeout is raised to cover it.
pub fn run(layout: &Layout, opts: &VmOptions, minutes: u64) -> Result<RunOutcome> {
    if minutes == 0 {
        bail!("--minutes must be at least 1");
    }
    let image = guest::prepare(layout)?;
    cargo::build_pollnic_cli(layout)?;
    let exes = cargo::build_tests(layout, crate::tests::PACKAGE, SOAK_TEST)?;
    let Some(exe) = exes.iter().find(|e| e.name == SOAK_TEST) else {
        bail!("the `{SOAK_TEST}` test target was not built (tests/{SOAK_TEST}.rs in the pollnic-tests package)");
    };
    let seconds = minutes * 60;
    let mut opts = opts.clone();
    // Boot, the soak itself, the re-open and the final checks.
    let needed = std::time::Duration::from_secs(seconds + 600);
    if opts.timeout < needed {
        opts.timeout = needed;
    }
    say!(
        "soak: {minutes} minute(s) of traffic in the guest (guest timeout {}s)",
        opts.timeout.as_secs()
    );
    let script = format!(
        "POLLNIC_SOAK_SECONDS={seconds} {} --ignored --nocapture --test-threads=1\n",
        shell_quote(&exe.path)
    );
    qemu::run_in_guest(layout, &image, &script, &opts)
}
