//! pollnic without root: `pollnic bind --user nobody` hands the two ports'
//! `/dev/vfio/N` to `nobody`, and `loopback` run as `nobody` (uid 65534,
//! through util-linux `setpriv`, no capabilities) moves traffic once
//! `RLIMIT_MEMLOCK` is raised (util-linux `prlimit`, as root, before the
//! privileges are dropped). With the default limit it fails with the
//! existing locked-memory error, and `doctor` run as `nobody` explains the
//! limit needed.

use pollnic_tests::{example_exe, port};
use std::os::unix::fs::MetadataExt;
use std::process::Command;

static POLLNIC: std::sync::LazyLock<String> = std::sync::LazyLock::new(pollnic_tests::pollnic_exe);
/// uid and gid of `nobody` / `nogroup` on Debian.
const NOBODY: u32 = 65534;

/// Runs `args` as nobody (no capabilities, no supplementary groups), with
/// `RLIMIT_MEMLOCK` set to `memlock` bytes first when given.
fn as_nobody(memlock: Option<u64>, args: &[&str]) -> (bool, String) {
    let mut cmd = match memlock {
        Some(b) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--memlock={b}:{b}")).arg("setpriv");
            c
        }
        None => Command::new("setpriv"),
    };
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .args(args);
    let out = cmd.output().expect("run prlimit/setpriv (util-linux)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("$ [nobody, memlock {memlock:?}] {}\n{text}", args.join(" "));
    (out.status.success(), text)
}

fn vfio_node(addr: &str) -> String {
    let g = std::fs::read_link(format!("/sys/bus/pci/devices/{addr}/iommu_group")).unwrap();
    format!("/dev/vfio/{}", g.file_name().unwrap().to_string_lossy())
}

/// Gives the nodes back to root (mode 0600) when dropped.
struct BackToRoot(Vec<String>);

impl Drop for BackToRoot {
    fn drop(&mut self) {
        let mut args = vec!["bind", "--user", "root"];
        args.extend(self.0.iter().map(String::as_str));
        let ok = Command::new(&*POLLNIC)
            .args(&args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "pollnic bind --user root failed");
    }
}

fn received(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("received "))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `received` line in:\n{text}"))
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn loopback_runs_as_nobody_with_memlock_raised() {
    let (p0, p1) = (port(0), port(1));
    let loopback = example_exe("loopback");
    let loopback = loopback.to_str().unwrap();
    let run = [
        "--tx",
        &p0,
        "--rx",
        &p1,
        "--count",
        "2000",
        "--rate",
        "20000",
        "--seconds",
        "5",
    ];
    let mut cmd = vec![loopback];
    cmd.extend(run.iter().copied());

    // Before the hand-over, nobody cannot open the group.
    let (ok, text) = as_nobody(Some(64 << 20), &cmd);
    assert!(
        !ok && text.contains("permission denied") && text.contains("pollnic bind --user"),
        "{text}"
    );

    let out = Command::new(&*POLLNIC)
        .args(["bind", "--user", "nobody", &p0, &p1])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}");
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _restore = BackToRoot(vec![p0.clone(), p1.clone()]);
    for p in [&p0, &p1] {
        let node = vfio_node(p);
        assert!(
            text.contains(&format!("{p}: {node} handed to user nobody (mode 600)")),
            "{text}"
        );
        let m = std::fs::metadata(&node).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (NOBODY, 0o600), "{node}");
    }

    // Default memlock (8 MiB in the guest): the existing clear error.
    let (ok, text) = as_nobody(None, &cmd);
    assert!(!ok, "loopback must fail with the default memlock:\n{text}");
    assert!(
        text.contains("the locked-memory limit is probably too low") && text.contains("ulimit -l"),
        "{text}"
    );
    // doctor, as nobody, explains the limit.
    let (ok, text) = as_nobody(None, &[&*POLLNIC, "doctor", &p0, &p1]);
    assert!(!ok, "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("fail  memlock ")
            && l.contains("is below the 24576 KiB needed")
            && l.contains("CAP_IPC_LOCK")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} mode 600 owner {NOBODY}:0: nobody can open it",
            vfio_node(&p0)
        )),
        "{text}"
    );

    // Raised: doctor is content and loopback moves traffic.
    let (ok, text) = as_nobody(Some(64 << 20), &[&*POLLNIC, "doctor", &p0, &p1]);
    assert!(ok, "{text}");
    let (ok, text) = as_nobody(Some(64 << 20), &cmd);
    assert!(ok, "loopback as nobody failed:\n{text}");
    let got = received(&text);
    assert!(got > 1000, "only {got} of 2000 frames arrived:\n{text}");
}
