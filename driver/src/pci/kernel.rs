//! The side effects of binding: sysfs attribute writes and `modprobe`.
//!
//! Behind a trait so the bind/unbind sequences can be tested against a fake
//! sysfs tree whose "kernel" reacts to the writes like Linux does.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::process::Command;

/// What bind/unbind ask of the kernel.
pub trait Kernel {
    /// Writes `value` to the sysfs attribute at `path` in a single `write(2)`
    /// (sysfs store methods see one buffer). The file must exist.
    ///
    /// # Errors
    /// The `open`/`write` error; sysfs store methods report failures
    /// (`ENODEV`, `EBUSY`, `EINVAL`, ...) through `write`.
    fn write_attr(&self, path: &Path, value: &str) -> io::Result<()>;

    /// Loads kernel module `module` and its dependencies.
    ///
    /// # Errors
    /// A one-line description of the failure (exit status and stderr).
    fn modprobe(&self, module: &str) -> Result<(), String>;
}

/// The running Linux kernel: real sysfs writes and `/sbin/modprobe`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinuxKernel;

impl Kernel for LinuxKernel {
    fn write_attr(&self, path: &Path, value: &str) -> io::Result<()> {
        let mut file = OpenOptions::new().write(true).open(path)?;
        let n = file.write(value.as_bytes())?;
        if n != value.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {n} of {} bytes", value.len()),
            ));
        }
        Ok(())
    }

    fn modprobe(&self, module: &str) -> Result<(), String> {
        let out = Command::new("modprobe")
            .arg(module)
            .output()
            .map_err(|e| format!("cannot run `modprobe`: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        Err(if stderr.is_empty() {
            format!("`modprobe {module}` exited with {}", out.status)
        } else {
            format!("`modprobe {module}` exited with {}: {stderr}", out.status)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_existing_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let attr = dir.path().join("driver_override");
        std::fs::write(&attr, "").unwrap();
        LinuxKernel.write_attr(&attr, "vfio-pci").unwrap();
        assert_eq!(std::fs::read_to_string(&attr).unwrap(), "vfio-pci");
        let missing = dir.path().join("nope");
        assert_eq!(
            LinuxKernel.write_attr(&missing, "x").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
