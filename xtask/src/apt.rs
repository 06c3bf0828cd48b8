//! Debian's package tools: reading the machine's apt sources, adding a backports source
//! that uses the machine's own mirror, and thin wrappers over `apt-get` / `apt-cache`.
//!
//! No mirror host is ever written here: the backports source copies the URI (and signing
//! key) of the source that already serves the release.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{cmd, say};

/// One `deb` source entry, from either a one-line `.list` file or a deb822 `.sources` stanza.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Archive URIs (a deb822 stanza may list several).
    pub uris: Vec<String>,
    /// Suites, e.g. `bookworm`, `bookworm-updates`.
    pub suites: Vec<String>,
    /// The `Signed-By` value, if any.
    pub signed_by: Option<String>,
}

/// Reads every enabled `deb` source under `root` (`/` on a real machine).
pub fn read_sources(root: &Path) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    let list = root.join("etc/apt/sources.list");
    if list.exists() {
        sources.extend(parse_one_line(&read(&list)?));
    }
    let dir = root.join("etc/apt/sources.list.d");
    if dir.is_dir() {
        let mut entries: Vec<PathBuf> = fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for path in entries {
            match path.extension().and_then(|e| e.to_str()) {
                Some("list") => sources.extend(parse_one_line(&read(&path)?)),
                Some("sources") => sources.extend(parse_deb822(&read(&path)?)),
                _ => {}
            }
        }
    }
    Ok(sources)
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Parses `deb [opts] URI SUITE COMPONENT...` lines (the classic `sources.list` format).
pub fn parse_one_line(text: &str) -> Vec<Source> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(rest) = line.strip_prefix("deb ") else {
            continue;
        };
        let mut rest = rest.trim_start();
        let mut signed_by = None;
        if let Some(opts) = rest.strip_prefix('[') {
            let Some((opts, after)) = opts.split_once(']') else {
                continue;
            };
            signed_by = opts
                .split_whitespace()
                .find_map(|o| o.strip_prefix("signed-by="))
                .map(str::to_owned);
            rest = after.trim_start();
        }
        let mut words = rest.split_whitespace();
        if let (Some(uri), Some(suite)) = (words.next(), words.next()) {
            out.push(Source {
                uris: vec![uri.to_owned()],
                suites: vec![suite.to_owned()],
                signed_by,
            });
        }
    }
    out
}

/// Parses deb822 stanzas (`Types:`, `URIs:`, `Suites:`, `Enabled:`, `Signed-By:`).
///
/// Only single-line `Signed-By` values (a keyring path) are kept; an inline key block is
/// dropped rather than copied.
pub fn parse_deb822(text: &str) -> Vec<Source> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let mut types = Vec::new();
        let mut uris = Vec::new();
        let mut suites = Vec::new();
        let mut signed_by = None;
        let mut enabled = true;
        for line in stanza.lines() {
            if line.starts_with('#') || line.starts_with(' ') || line.starts_with('\t') {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let words = || {
                value
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "types" => types = words(),
                "uris" => uris = words(),
                "suites" => suites = words(),
                "enabled" => enabled = !value.trim().eq_ignore_ascii_case("no"),
                "signed-by" => {
                    let v = value.trim();
                    if !v.is_empty() {
                        signed_by = Some(v.to_owned());
                    }
                }
                _ => {}
            }
        }
        if enabled && types.iter().any(|t| t == "deb") && !uris.is_empty() && !suites.is_empty() {
            out.push(Source {
                uris,
                suites,
                signed_by,
            });
        }
    }
    out
}

/// The running release's codename (`VERSION_CODENAME` in `<root>/etc/os-release`).
pub fn codename(root: &Path) -> Result<String> {
    let text = read(&root.join("etc/os-release"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
        .context("/etc/os-release has no VERSION_CODENAME: is this Debian?")
}

/// The source serving `codename` itself (not its security archive): the machine's mirror.
fn release_source<'a>(
    sources: &'a [Source],
    root: &Path,
    codename: &str,
    wanted: &str,
) -> Result<&'a Source> {
    sources
        .iter()
        .find(|s| s.suites.iter().any(|x| x == codename))
        .with_context(|| {
            format!(
                "no apt source serves `{codename}` (looked in {}/etc/apt/sources.list and \
                 sources.list.d/), so there is no mirror to take {wanted} from",
                root.display()
            )
        })
}

/// The file xtask writes when the machine has no backports source.
pub const BACKPORTS_FILE: &str = "etc/apt/sources.list.d/pollnic-backports.sources";

/// Makes sure `<codename>-backports` is among the apt sources under `root`.
///
/// Returns `Ok(true)` if a source file was written (apt lists then need an update). The
/// mirror is the URI of the source serving `<codename>` itself (not the security archive).
pub fn ensure_backports(root: &Path, codename: &str) -> Result<bool> {
    let sources = read_sources(root)?;
    let backports = format!("{codename}-backports");
    if sources.iter().any(|s| s.suites.contains(&backports)) {
        return Ok(false);
    }
    let base = release_source(&sources, root, codename, &backports)?;
    let mut text = format!(
        "# Written by `cargo xtask setup` (pollnic): QEMU >= 8.1 comes from {backports}.\n\
         Types: deb\nURIs: {}\nSuites: {backports}\nComponents: main\n",
        base.uris[0]
    );
    if let Some(key) = &base.signed_by {
        text.push_str(&format!("Signed-By: {key}\n"));
    }
    let path = root.join(BACKPORTS_FILE);
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    say!("setup: wrote {} (mirror {})", path.display(), base.uris[0]);
    Ok(true)
}

fn apt_get() -> Command {
    let mut c = Command::new("apt-get");
    c.env("DEBIAN_FRONTEND", "noninteractive")
        .args(["-q", "-o", "DPkg::Lock::Timeout=300"]);
    c
}

/// `apt-get update`, output shown only on failure.
pub fn update() -> Result<()> {
    cmd::require_root("apt-get update")?;
    say!("setup: apt-get update");
    cmd::run_captured(apt_get().arg("update")).context("apt-get update failed")
}

/// `apt-get install -y --no-install-recommends [-t release] packages...`.
pub fn install(packages: &[&str], release: Option<&str>) -> Result<()> {
    cmd::require_root(&format!("installing {}", packages.join(" ")))?;
    let mut c = apt_get();
    c.args(["install", "-y", "--no-install-recommends"]);
    if let Some(release) = release {
        c.args(["-t", release]);
    }
    c.args(packages);
    say!("setup: {}", cmd::describe(&c));
    cmd::run_captured(&mut c).with_context(|| format!("installing {} failed", packages.join(" ")))
}

/// `apt-get download packages...` into `dir`.
pub fn download(packages: &[String], dir: &Path) -> Result<()> {
    say!(
        "setup: apt-get download {} (into {})",
        packages.join(" "),
        dir.display()
    );
    cmd::run_captured(apt_get().current_dir(dir).arg("download").args(packages))
        .with_context(|| format!("downloading {} failed", packages.join(" ")))?;
    check_downloaded(packages, dir)
}

fn check_downloaded(packages: &[String], dir: &Path) -> Result<()> {
    for package in packages {
        if find_deb(package, dir)?.is_none() {
            bail!(
                "apt-get download {package} succeeded but no {package}_*.deb is in {}",
                dir.display()
            );
        }
    }
    Ok(())
}

/// A private apt tree (its own sources, lists and cache under one directory) that reads one
/// suite from the machine's own mirror, so that packages of another Debian release can be
/// downloaded without adding that release to `/etc/apt` (where apt could upgrade the host
/// from it). Nothing is installed from it; it only ever downloads.
pub struct Private {
    root: PathBuf,
    suite: String,
    uri: String,
}

impl Private {
    /// Writes `<root>/sources.list` with `suite` on the mirror that serves the host's release
    /// (read from `<host_root>/etc/apt`), signed by the same keyring.
    pub fn new(root: &Path, suite: &str, host_root: &Path) -> Result<Private> {
        let sources = read_sources(host_root)?;
        let codename = codename(host_root)?;
        let base = release_source(&sources, host_root, &codename, suite)?;
        let keyring = base
            .signed_by
            .clone()
            .unwrap_or_else(|| "/usr/share/keyrings/debian-archive-keyring.gpg".to_owned());
        for dir in [
            "lists/partial",
            "cache/archives/partial",
            "preferences.d",
            "sources.list.d",
        ] {
            fs::create_dir_all(root.join(dir))
                .with_context(|| format!("creating {}", root.join(dir).display()))?;
        }
        let status = root.join("status");
        if !status.exists() {
            fs::write(&status, "")?;
        }
        let uri = base.uris[0].clone();
        let list = format!(
            "# Written by `cargo xtask setup` (pollnic): the guest kernel's packages.\n\
             deb [signed-by={keyring}] {uri} {suite} main\n"
        );
        let path = root.join("sources.list");
        if fs::read_to_string(&path).ok().as_deref() != Some(list.as_str()) {
            fs::write(&path, list).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(Private {
            root: root.to_path_buf(),
            suite: suite.to_owned(),
            uri,
        })
    }

    fn options(&self, c: &mut Command) {
        let r = |p: &str| format!("{}", self.root.join(p).display());
        for (key, value) in [
            ("Dir::Etc::SourceList", r("sources.list")),
            ("Dir::Etc::SourceParts", r("sources.list.d")),
            ("Dir::Etc::Preferences", r("preferences")),
            ("Dir::Etc::PreferencesParts", r("preferences.d")),
            ("Dir::State::Lists", r("lists")),
            ("Dir::State::status", r("status")),
            ("Dir::Cache", r("cache")),
            ("APT::Architecture", "amd64".to_owned()),
            // Downloads go to a directory the sandbox user cannot write; say so up front.
            ("APT::Sandbox::User", "root".to_owned()),
        ] {
            c.arg("-o").arg(format!("{key}={value}"));
        }
    }

    /// `apt-get update` on the private tree (needs no root: it writes only under the tree).
    pub fn update(&self) -> Result<()> {
        say!(
            "setup: reading {} from {} (private package lists)",
            self.suite,
            self.uri
        );
        let mut c = apt_get();
        self.options(&mut c);
        c.arg("update");
        cmd::run_captured(&mut c).with_context(|| {
            format!(
                "reading {suite} from {uri} failed. If apt says NO_PUBKEY, this machine's \
                 debian-archive-keyring predates the release's key: `apt-get install \
                 debian-archive-keyring`. Or boot the host release's own kernel: \
                 `--guest-kernel lts` (or POLLNIC_GUEST_KERNEL=lts)",
                suite = self.suite,
                uri = self.uri
            )
        })
    }

    /// How old the private package lists are (`None` if there are none yet).
    pub fn lists_age(&self) -> Option<std::time::Duration> {
        fs::read_dir(self.root.join("lists"))
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("_Packages"))
            .filter_map(|e| e.metadata().ok()?.modified().ok()?.elapsed().ok())
            .min()
    }

    /// `apt-cache depends package` on the private tree.
    pub fn depends(&self, package: &str) -> Result<Vec<String>> {
        let mut c = Command::new("apt-cache");
        self.options(&mut c);
        let out = c
            .args(["depends", package])
            .output()
            .context("cannot run apt-cache: this testbed needs a Debian machine")?;
        if !out.status.success() {
            return Ok(Vec::new());
        }
        Ok(parse_depends(&String::from_utf8_lossy(&out.stdout)))
    }

    /// `apt-get download packages...` from the private tree into `dir`.
    pub fn download(&self, packages: &[String], dir: &Path) -> Result<()> {
        say!(
            "setup: apt-get download {} from {} (into {})",
            packages.join(" "),
            self.suite,
            dir.display()
        );
        let mut c = apt_get();
        self.options(&mut c);
        c.current_dir(dir).arg("download").args(packages);
        cmd::run_captured(&mut c)
            .with_context(|| format!("downloading {} failed", packages.join(" ")))?;
        check_downloaded(packages, dir)
    }
}

/// An already downloaded `<package>_*.deb` in `dir`, if any.
pub fn find_deb(package: &str, dir: &Path) -> Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    let mut found = None;
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(&prefix) && name.ends_with(".deb") {
            found = Some(path);
        }
    }
    Ok(found)
}

/// The packages that `package` depends on (per `apt-cache depends`), e.g. the versioned
/// kernel image behind `linux-image-amd64`. Empty if apt knows nothing about it.
pub fn depends(package: &str) -> Result<Vec<String>> {
    let out = Command::new("apt-cache")
        .args(["depends", package])
        .output()
        .context("cannot run apt-cache: this testbed needs a Debian machine")?;
    if !out.status.success() {
        return Ok(Vec::new());
    }
    Ok(parse_depends(&String::from_utf8_lossy(&out.stdout)))
}

/// Parses `apt-cache depends` output, keeping the `Depends:` targets.
pub fn parse_depends(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(|p| p.trim().trim_matches(|c| c == '<' || c == '>').to_owned())
        .collect()
}

/// Fails unless this machine has Debian's tools (dpkg, apt).
pub fn require_debian() -> Result<()> {
    if cmd::find_program("apt-get").is_none() || cmd::find_program("dpkg-deb").is_none() {
        bail!("the pollnic testbed needs a Debian (bookworm) machine: apt-get/dpkg-deb not found");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIRROR: &str = "http://mirror.example.invalid/debian";

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-apt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("etc/apt/sources.list.d")).unwrap();
        dir
    }

    #[test]
    fn deb822_and_one_line() {
        let text = format!(
            "Types: deb\n# a comment\nURIs: {MIRROR}\nSuites: bookworm bookworm-updates\n\
             Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n\
             Types: deb-src\nURIs: {MIRROR}\nSuites: bookworm\n\n\
             Types: deb\nURIs: {MIRROR}-security\nSuites: bookworm-security\nEnabled: no\n"
        );
        let parsed = parse_deb822(&text);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].suites, ["bookworm", "bookworm-updates"]);
        assert_eq!(
            parsed[0].signed_by.as_deref(),
            Some("/usr/share/keyrings/debian-archive-keyring.gpg")
        );

        let lines = format!(
            "# comment\ndeb [arch=amd64 signed-by=/k.gpg] {MIRROR} bookworm main\n\
             deb-src {MIRROR} bookworm main\ndeb {MIRROR}-security bookworm-security main\n"
        );
        let parsed = parse_one_line(&lines);
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].uris, [MIRROR]);
        assert_eq!(parsed[0].signed_by.as_deref(), Some("/k.gpg"));
        assert_eq!(parsed[1].suites, ["bookworm-security"]);
    }

    #[test]
    fn backports_source_uses_the_release_mirror() {
        let root = tempdir("bp");
        fs::write(
            root.join("etc/apt/sources.list"),
            format!("deb {MIRROR}-security bookworm-security main\ndeb {MIRROR} bookworm main\n"),
        )
        .unwrap();
        assert!(ensure_backports(&root, "bookworm").unwrap());
        let written = fs::read_to_string(root.join(BACKPORTS_FILE)).unwrap();
        assert!(written.contains(&format!("URIs: {MIRROR}\n")), "{written}");
        assert!(written.contains("Suites: bookworm-backports\n"));
        // Second call: already present, nothing written.
        assert!(!ensure_backports(&root, "bookworm").unwrap());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn no_release_source_is_an_error() {
        let root = tempdir("none");
        assert!(ensure_backports(&root, "bookworm").is_err());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn private_tree_reads_the_suite_from_the_host_mirror() {
        let host = tempdir("private-host");
        fs::write(
            host.join("etc/os-release"),
            "PRETTY_NAME=\"Debian GNU/Linux 12\"\nVERSION_CODENAME=bookworm\n",
        )
        .unwrap();
        fs::write(
            host.join("etc/apt/sources.list"),
            format!("deb {MIRROR}-security bookworm-security main\ndeb [signed-by=/k.gpg] {MIRROR} bookworm main\n"),
        )
        .unwrap();
        let tree = host.join("tree");
        let private = Private::new(&tree, "trixie-backports", &host).unwrap();
        let list = fs::read_to_string(tree.join("sources.list")).unwrap();
        assert!(
            list.contains(&format!(
                "deb [signed-by=/k.gpg] {MIRROR} trixie-backports main\n"
            )),
            "{list}"
        );
        assert!(private.lists_age().is_none());
        // The host's own apt configuration is left alone.
        assert!(!host.join(BACKPORTS_FILE).exists());
        fs::remove_dir_all(host).unwrap();
    }

    #[test]
    fn depends_output() {
        let text = "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n  Recommends: x\n";
        assert_eq!(parse_depends(text), ["linux-image-6.1.0-57-amd64"]);
    }
}
