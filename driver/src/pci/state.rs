//! Remembers which kernel driver a device had before `pollnic bind`, so
//! `pollnic unbind` can give it back: one file `<dir>/<addr>.driver` holding
//! the driver name. The directory defaults to `/run/pollnic` (tmpfs: the
//! record does not outlive a reboot, and neither does the binding).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::address::PciAddress;
use super::error::{Error, Result};

const HINT: &str = "check that the state directory is writable (default /run/pollnic)";

/// The directory of previous-driver records.
#[derive(Clone, Debug)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Records live in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// `<dir>/<addr>.driver`.
    pub fn path(&self, addr: PciAddress) -> PathBuf {
        self.dir.join(format!("{addr}.driver"))
    }

    /// Remembers that `addr` was bound to `driver`.
    ///
    /// # Errors
    /// [`Error::PermissionDenied`] / [`Error::Io`] if the file cannot be written.
    pub fn record(&self, addr: PciAddress, driver: &str) -> Result<()> {
        fs::create_dir_all(&self.dir).map_err(|e| Error::io("creating", &self.dir, HINT, e))?;
        let path = self.path(addr);
        fs::write(&path, format!("{driver}\n")).map_err(|e| Error::io("writing to", &path, HINT, e))
    }

    /// The remembered driver of `addr`, if any. A record that is not a plain
    /// driver name is ignored (treated as absent).
    ///
    /// # Errors
    /// [`Error::PermissionDenied`] / [`Error::Io`] if it exists but cannot be read.
    pub fn recall(&self, addr: PciAddress) -> Result<Option<String>> {
        let path = self.path(addr);
        match fs::read_to_string(&path) {
            Ok(s) => Ok(Some(s.trim().to_owned()).filter(|d| is_driver_name(d))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("reading", &path, HINT, e)),
        }
    }

    /// Deletes the record of `addr` (no error if there is none).
    ///
    /// # Errors
    /// [`Error::PermissionDenied`] / [`Error::Io`] if it cannot be removed.
    pub fn forget(&self, addr: PciAddress) -> Result<()> {
        remove_if_exists(&self.path(addr))
    }
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("removing", path, HINT, e)),
    }
}

/// A driver name is used as a path component under `/sys/bus/pci/drivers`.
fn is_driver_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && !s.contains(['/', '\0'])
        && !s.contains(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_recall_forget() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path().join("run/pollnic"));
        let addr: PciAddress = "0000:01:00.0".parse().unwrap();
        assert_eq!(state.recall(addr).unwrap(), None);
        state.record(addr, "ixgbe").unwrap();
        assert_eq!(
            fs::read_to_string(tmp.path().join("run/pollnic/0000:01:00.0.driver")).unwrap(),
            "ixgbe\n"
        );
        assert_eq!(state.recall(addr).unwrap().as_deref(), Some("ixgbe"));
        state.forget(addr).unwrap();
        state.forget(addr).unwrap();
        assert_eq!(state.recall(addr).unwrap(), None);
    }

    #[test]
    fn ignores_records_that_are_not_driver_names() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path());
        let addr: PciAddress = "0000:01:00.0".parse().unwrap();
        for bad in ["", "../../evil", "a b", ".."] {
            fs::write(state.path(addr), bad).unwrap();
            assert_eq!(state.recall(addr).unwrap(), None, "{bad:?}");
        }
    }
}
