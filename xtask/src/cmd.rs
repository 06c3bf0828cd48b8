//! Running external programs with clear errors, and small process-level helpers.
//!
//! xtask's own messages go to stderr (prefixed `[xtask]`) so that stdout carries only what
//! the guest prints.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{bail, Context, Result};

/// Prints one progress line of xtask's own to stderr.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { eprintln!("[xtask] {}", format_args!($($arg)*)) };
}

/// A `cargo` command: the cargo that runs xtask (from `$CARGO`), else `cargo` on `PATH`.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Renders a command line for messages, e.g. `apt-get install -y kmod`.
pub fn describe(cmd: &Command) -> String {
    let mut text = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

fn spawn_output(cmd: &mut Command) -> Result<Output> {
    cmd.output().with_context(|| {
        format!(
            "cannot start `{}` (is {} installed?)",
            describe(cmd),
            cmd.get_program().to_string_lossy()
        )
    })
}

/// Runs `cmd` to completion with stdout captured; returns stdout, or fails showing stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = spawn_output(cmd.stdin(Stdio::null()))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}):\n{}{}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8", describe(cmd)))
}

/// Runs `cmd` with its output captured and shown only if it fails (for chatty tools like apt).
pub fn run_captured(cmd: &mut Command) -> Result<()> {
    output(cmd).map(drop)
}

/// Runs `cmd` with inherited stdio (its output goes straight to the user); fails on non-zero exit.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{}`", describe(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(cmd));
    }
    Ok(())
}

/// Looks a program up on `PATH` and in the sbin directories (which a non-root `PATH` may lack).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// True when the effective user id is 0 (read from `/proc/self/status`, no `unsafe` needed).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Fails with a clear message unless running as root; `what` says what needs root.
pub fn require_root(what: &str) -> Result<()> {
    if !is_root() {
        bail!(
            "{what} needs root: run `cargo xtask setup` as root (e.g. `sudo -E cargo xtask setup`)"
        );
    }
    Ok(())
}

/// Quotes one word for a POSIX shell (single quotes, with embedded `'` escaped).
pub fn shell_quote(word: impl AsRef<OsStr>) -> String {
    let word = word.as_ref().to_string_lossy();
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        return word.into_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Joins words into a shell command line, each quoted as needed.
pub fn shell_join<I, S>(words: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    words
        .into_iter()
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("plain-word_1.0"), "plain-word_1.0");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("exit 3"), "'exit 3'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_join(["sh", "-c", "exit 3"]), "sh -c 'exit 3'");
    }
}
