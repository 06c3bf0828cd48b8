//! `pollnic bind --user NAME` / `--group NAME`: hand a port's VFIO group
//! node `/dev/vfio/<group>` to an unprivileged user or group, so pollnic can
//! run without root (`Documentation/driver-api/vfio.rst`: access to a group
//! is access to its devices; `/dev/vfio/vfio`, the container, is mode 0666
//! by default).
//!
//! The node is recreated (root-owned, 0600) whenever the group leaves
//! vfio-pci and comes back, so re-run `bind --user` after `unbind`/`bind`, or
//! add a udev rule (`SUBSYSTEM=="vfio", OWNER="NAME"`) for a lasting setup.
//! The unprivileged user also needs `RLIMIT_MEMLOCK` above what VFIO pins
//! (`pollnic doctor` says how much).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Who gets the node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    /// User name or numeric UID: becomes the owner (mode 0600, or 0660 with a group).
    pub user: Option<String>,
    /// Group name or numeric GID: becomes the group, mode 0660.
    pub group: Option<String>,
}

/// Why a hand-over failed.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    /// No such user in the user database.
    #[error("no user `{0}` (see `getent passwd {0}`; a numeric UID works too)")]
    NoUser(String),
    /// No such group.
    #[error("no group `{0}` (see `getent group {0}`; a numeric GID works too)")]
    NoGroup(String),
    /// chown/chmod failed.
    #[error("cannot hand {path} over ({source}): run `pollnic bind --user` as root")]
    Io {
        /// The node.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl Owner {
    /// `true` if neither a user nor a group was given.
    pub fn is_empty(&self) -> bool {
        self.user.is_none() && self.group.is_none()
    }

    /// Resolves the names to `(uid, gid)`.
    ///
    /// # Errors
    /// [`OwnerError::NoUser`] / [`OwnerError::NoGroup`] for unknown names.
    pub fn resolve(&self) -> Result<(Option<u32>, Option<u32>), OwnerError> {
        let uid = match &self.user {
            None => None,
            Some(u) => Some(match u.parse::<u32>() {
                Ok(n) => n,
                Err(_) => nix::unistd::User::from_name(u)
                    .ok()
                    .flatten()
                    .ok_or_else(|| OwnerError::NoUser(u.clone()))?
                    .uid
                    .as_raw(),
            }),
        };
        let gid = match &self.group {
            None => None,
            Some(g) => Some(match g.parse::<u32>() {
                Ok(n) => n,
                Err(_) => nix::unistd::Group::from_name(g)
                    .ok()
                    .flatten()
                    .ok_or_else(|| OwnerError::NoGroup(g.clone()))?
                    .gid
                    .as_raw(),
            }),
        };
        Ok((uid, gid))
    }

    /// The mode the node gets: owner read/write, plus the group with `--group`.
    pub fn mode(&self) -> u32 {
        if self.group.is_some() {
            0o660
        } else {
            0o600
        }
    }

    /// Changes the owner and mode of `node` (e.g. `/dev/vfio/7`); returns a
    /// line saying what it did.
    ///
    /// # Errors
    /// As [`Owner::resolve`]; [`OwnerError::Io`] when chown/chmod fail (not root).
    pub fn apply(&self, node: &Path) -> Result<String, OwnerError> {
        let (uid, gid) = self.resolve()?;
        let io = |source| OwnerError::Io {
            path: node.to_owned(),
            source,
        };
        std::os::unix::fs::chown(node, uid, gid).map_err(io)?;
        std::fs::set_permissions(node, std::fs::Permissions::from_mode(self.mode())).map_err(io)?;
        let mut who = Vec::new();
        if let Some(u) = &self.user {
            who.push(format!("user {u}"));
        }
        if let Some(g) = &self.group {
            who.push(format!("group {g}"));
        }
        Ok(format!(
            "{} handed to {} (mode {:o})",
            node.display(),
            who.join(" and "),
            self.mode()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_modes() {
        let o = Owner {
            user: Some("root".into()),
            group: None,
        };
        assert_eq!(o.resolve().unwrap(), (Some(0), None));
        assert_eq!(o.mode(), 0o600);
        let o = Owner {
            user: Some("1234".into()),
            group: Some("0".into()),
        };
        assert_eq!(o.resolve().unwrap(), (Some(1234), Some(0)));
        assert_eq!(o.mode(), 0o660);
        let e = Owner {
            user: Some("no-such-user-pollnic".into()),
            group: None,
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("getent passwd no-such-user-pollnic"));
        assert!(Owner::default().is_empty());
    }

    #[test]
    fn applies_to_a_file_it_owns() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("7");
        std::fs::write(&node, "").unwrap();
        let me = nix::unistd::geteuid().as_raw().to_string();
        let o = Owner {
            user: Some(me.clone()),
            group: Some(nix::unistd::getegid().as_raw().to_string()),
        };
        let line = o.apply(&node).unwrap();
        assert!(line.contains(&format!("user {me}")), "{line}");
        let mode = std::fs::metadata(&node).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
    }
}
