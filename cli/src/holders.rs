//! Which processes hold a port's VFIO group open (`/dev/vfio/<group>` among
//! their `/proc/<pid>/fd` links), so that `pollnic unbind` can say who the
//! kernel is about to ask for the port: the kernel's unbind waits until the
//! holder closes it (a pollnic program does at once, on VFIO's
//! device-release request; docs/design/device-release.md).

use std::path::Path;

/// `(pid, command name)` of every process with `node` open, by pid.
pub fn holders(proc: &Path, node: &Path) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return vec![];
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == node));
        if holds {
            let comm = std::fs::read_to_string(e.path().join("comm"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "?".into());
            out.push((pid, comm));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_processes_holding_a_node() {
        let root = tempfile::tempdir().unwrap();
        let proc = root.path();
        for (pid, comm, target) in [(41, "capture", "/dev/vfio/6"), (7, "other", "/dev/null")] {
            let d = proc.join(pid.to_string());
            std::fs::create_dir_all(d.join("fd")).unwrap();
            std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
            std::os::unix::fs::symlink(target, d.join("fd/3")).unwrap();
        }
        std::fs::create_dir_all(proc.join("self")).unwrap();
        assert_eq!(
            holders(proc, Path::new("/dev/vfio/6")),
            vec![(41, "capture".to_string())]
        );
        assert!(holders(proc, Path::new("/dev/vfio/9")).is_empty());
    }
}
