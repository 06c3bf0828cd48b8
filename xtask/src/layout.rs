//! Where things live: the workspace, cargo's target directory and the testbed's own files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cmd;
use crate::install::GuestKernel;

/// Paths shared by every subcommand.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The workspace root (the directory holding the top-level `Cargo.toml`).
    pub repo: PathBuf,
    /// Cargo's target directory (honours `CARGO_TARGET_DIR` and `build.target-dir`).
    pub target: PathBuf,
    /// `<target>/testbed`: downloaded kernel, initramfs, per-run scripts.
    pub testbed: PathBuf,
    /// Which Debian kernel the guest boots (`--guest-kernel` / `POLLNIC_GUEST_KERNEL`).
    pub guest_kernel: GuestKernel,
}

impl Layout {
    /// Finds the workspace and asks cargo for its target directory.
    pub fn discover() -> Result<Self> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("xtask's manifest directory has no parent")?
            .to_path_buf();
        let output = cmd::output(cmd::cargo().current_dir(&repo).args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
        ]))?;
        let meta: serde_json::Value =
            serde_json::from_str(&output).context("parsing `cargo metadata` output")?;
        let target = meta["target_directory"]
            .as_str()
            .map(PathBuf::from)
            .context("`cargo metadata` reported no target_directory")?;
        let testbed = target.join("testbed");
        Ok(Self {
            repo,
            target,
            testbed,
            guest_kernel: GuestKernel::Current,
        })
    }

    /// The debug build of the `pollnic` CLI, used in the guest to bind the NICs to vfio-pci.
    pub fn pollnic_debug_bin(&self) -> PathBuf {
        self.target.join("debug").join("pollnic")
    }

    /// Directories that the guest must be able to write, each shared read-write over 9p and
    /// mounted at the same absolute path inside the guest's view of the host root.
    ///
    /// The repository always is one; the target directory is a second one only when it lives
    /// outside the repository.
    pub fn rw_shares(&self) -> Result<Vec<PathBuf>> {
        let mut shares = vec![self.repo.clone()];
        if !self.target.starts_with(&self.repo) {
            shares.push(self.target.clone());
        }
        for share in &shares {
            check_plain_path(share)?;
        }
        Ok(shares)
    }
}

/// The guest receives paths on the kernel command line and in shell scripts: refuse the
/// characters that would need quoting there, with a clear message instead of a strange failure.
pub fn check_plain_path(path: &Path) -> Result<()> {
    let text = path
        .to_str()
        .with_context(|| format!("path {} is not valid UTF-8", path.display()))?;
    if !path.is_absolute() {
        bail!("path {text} is not absolute");
    }
    if let Some(bad) = text
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, ',' | ':' | '"' | '\'' | '\\'))
    {
        bail!(
            "path {text:?} contains {bad:?}, which the testbed cannot pass to the guest; \
             move the checkout (or CARGO_TARGET_DIR) to a plain path"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_pass_and_odd_ones_fail() {
        assert!(check_plain_path(Path::new("/work/main")).is_ok());
        assert!(check_plain_path(Path::new("/work/my repo")).is_err());
        assert!(check_plain_path(Path::new("/work/a,b")).is_err());
        assert!(check_plain_path(Path::new("relative")).is_err());
    }
}
