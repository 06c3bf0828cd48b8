//! Debian tools the guest tests call (the guest runs the host's root
//! filesystem, so installing them on the host is enough): `tcpdump`, which
//! reads back the capture files of `tests/guest_pcap.rs`.

use anyhow::{Context, Result};
use std::path::Path;

use crate::{apt, say};

/// Debian packages and a file each one installs.
pub const TEST_TOOLS: &[(&str, &str)] = &[("tcpdump", "/usr/bin/tcpdump")];

/// Installs whichever of [`TEST_TOOLS`] is missing.
///
/// # Errors
/// When apt cannot install them (the guest tests that need them would fail).
pub fn ensure() -> Result<()> {
    let missing: Vec<&str> = TEST_TOOLS
        .iter()
        .filter(|(_, file)| !Path::new(file).exists())
        .map(|(pkg, _)| *pkg)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    say!(
        "test: installing tools the guest tests use: {}",
        missing.join(" ")
    );
    apt::update()
        .and_then(|_| apt::install(&missing, None))
        .with_context(|| format!("installing {} for the guest tests", missing.join(" ")))
}
