//! Host-side cargo invocations: building what the guest runs, finding test executables.

use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{bail, Context, Result};

use crate::layout::Layout;
use crate::{cmd, say};

/// Runs `cargo <args>` in the workspace with output shown; fails if cargo fails.
pub fn run(layout: &Layout, args: &[&str]) -> Result<()> {
    say!("cargo {}", args.join(" "));
    cmd::run(cmd::cargo().current_dir(&layout.repo).args(args))
}

/// The three crates published for library users.
const LIBRARY: [&str; 6] = ["-p", "pollnic-hw", "-p", "pollnic-rings", "-p", "pollnic"];

/// What a crates.io user of `pollnic-hw`, `pollnic-rings` and `pollnic`
/// relies on, checked on every test run:
/// - `RUSTDOCFLAGS="-D warnings" cargo doc --no-deps`: no broken intra-doc link;
/// - `cargo clippy --all-targets --all-features -- -D warnings`, which also
///   holds the crates to their `rust-version` (clippy's `incompatible_msrv`
///   refuses a std API newer than it; this machine has one toolchain, so
///   the oldest compiler itself cannot be run here);
/// - `cargo publish --dry-run` of the three together: each packages and
///   builds from its own tarball, with versions on its path dependencies
///   (in `target/publish-check/`, emptied first).
pub fn check_library(layout: &Layout) -> Result<()> {
    say!(
        "RUSTDOCFLAGS=\"-D warnings\" cargo doc --no-deps --all-features {}",
        LIBRARY.join(" ")
    );
    cmd::run(
        cmd::cargo()
            .current_dir(&layout.repo)
            .env("RUSTDOCFLAGS", "-D warnings")
            .args(["doc", "--no-deps", "--all-features"])
            .args(LIBRARY),
    )
    .context(
        "the library's rustdoc has warnings (broken intra-doc links?); run the command above",
    )?;
    let mut clippy = vec!["clippy", "--all-targets", "--all-features"];
    clippy.extend(LIBRARY);
    clippy.extend(["--", "-D", "warnings"]);
    run(layout, &clippy)
        .context("clippy found warnings in the library crates; run the command above")?;
    // A fresh target directory: cargo never rebuilds a registry crate of an
    // unchanged version, so the shared one would verify `pollnic` against
    // the `pollnic-hw` built by an earlier run.
    forget_packaged_sources();
    let fresh = layout.target.join("publish-check");
    let _ = std::fs::remove_dir_all(&fresh);
    let fresh = fresh.display().to_string();
    let mut publish = vec![
        "publish",
        "--dry-run",
        "--allow-dirty",
        "--target-dir",
        &fresh,
    ];
    publish.extend(LIBRARY);
    run(layout, &publish)
        .context("a library crate would not publish (metadata, path dependency versions, or its packaged build)")
}

/// `cargo publish --dry-run` verifies each crate against the others through a
/// temporary registry, whose crates cargo unpacks under
/// `$CARGO_HOME/registry/src/` and reuses while the version is unchanged:
/// a second run would build `pollnic` against the `pollnic-hw` of the first.
/// Remove those unpacked copies (crates.io never supplies these names to
/// this workspace) so every run verifies what is checked out.
fn forget_packaged_sources() {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(src) = home.map(|h| h.join("registry/src")) else {
        return;
    };
    let Ok(registries) = std::fs::read_dir(&src) else {
        return;
    };
    for registry in registries.flatten() {
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for c in crates.flatten() {
            let name = c.file_name().to_string_lossy().into_owned();
            let ours = ["pollnic-hw-", "pollnic-rings-", "pollnic-"]
                .iter()
                .any(|p| {
                    name.strip_prefix(p)
                        .is_some_and(|v| v.starts_with(|ch: char| ch.is_ascii_digit()))
                });
            if ours {
                let _ = std::fs::remove_dir_all(c.path());
            }
        }
    }
}

/// Builds the debug `pollnic` CLI, which the guest uses to bind the NICs to vfio-pci.
pub fn build_pollnic_cli(layout: &Layout) -> Result<()> {
    run(layout, &["build", "-p", "pollnic-cli", "--bin", "pollnic"])
        .context("building the `pollnic` CLI (cli/src/main.rs) failed")
}

/// Builds the debug examples the guest tests run (`target/debug/examples/*`):
/// the tools (package pollnic-tools) and the library's own examples
/// (driver/examples), which `cargo test -p pollnic-tests` does not build.
pub fn build_examples(layout: &Layout) -> Result<()> {
    run(
        layout,
        &[
            "build",
            "-p",
            "pollnic-tools",
            "-p",
            "pollnic",
            "--examples",
        ],
    )
    .context("building the examples (packages pollnic-tools and pollnic) failed")
}

/// An integration-test executable built by cargo.
#[derive(Debug, Clone)]
pub struct TestExe {
    /// The test target's name, e.g. `guest_link`.
    pub name: String,
    /// The built executable.
    pub path: PathBuf,
}

/// Builds the `pollnic` crate's tests without running them and returns the integration test
/// targets whose name starts with `prefix`, sorted by name.
pub fn build_tests(layout: &Layout, package: &str, prefix: &str) -> Result<Vec<TestExe>> {
    let mut c = cmd::cargo();
    c.current_dir(&layout.repo)
        .args([
            "test",
            "-p",
            package,
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit());
    say!("{}", cmd::describe(&c));
    let out = cmd::output(&mut c).context("building the guest tests failed")?;
    parse_test_artifacts(&out, prefix)
}

/// Picks `compiler-artifact` messages of test targets (kind `test`) named `prefix*`.
pub fn parse_test_artifacts(json_lines: &str, prefix: &str) -> Result<Vec<TestExe>> {
    let mut found = Vec::new();
    for line in json_lines.lines().filter(|l| l.starts_with('{')) {
        let msg: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("cargo printed bad JSON: {line}"))?;
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let target = &msg["target"];
        let is_test = target["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "test"));
        let name = target["name"].as_str().unwrap_or_default();
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        if is_test && name.starts_with(prefix) {
            found.push(TestExe {
                name: name.to_owned(),
                path: exe.into(),
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found.dedup_by(|a, b| a.name == b.name);
    for exe in &found {
        if !exe.path.is_file() {
            bail!(
                "cargo reported {} but it does not exist",
                exe.path.display()
            );
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_guest_test_targets() {
        let me = std::env::current_exe().unwrap();
        let me = me.display();
        let lines = format!(
            r#"{{"reason":"compiler-artifact","target":{{"name":"guest_link","kind":["test"]}},"executable":"{me}"}}
{{"reason":"compiler-artifact","target":{{"name":"host_rings","kind":["test"]}},"executable":"{me}"}}
{{"reason":"compiler-artifact","target":{{"name":"guest_helper","kind":["lib"]}},"executable":null}}
{{"reason":"compiler-artifact","target":{{"name":"pollnic","kind":["lib"]}},"executable":"{me}"}}
{{"reason":"build-finished","success":true}}"#
        );
        let found = parse_test_artifacts(&lines, "guest_").unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "guest_link");
    }
}
