//! `pollnic doctor` in the testbed: it passes on the prepared guest, fails
//! with the hugepage fix when no hugepages are reserved, and names the other
//! member (and its driver) of an IOMMU group that is not viable.
//!
//! The shared group is the testbed's multi-function igb in slot 4
//! (`POLLNIC_SHARED_GROUP`, both functions without ACS, so one IOMMU group):
//! function 0 goes to vfio-pci while the kernel's igb keeps function 1.

use pollnic_tests::env;
use std::process::{Command, Output};

static POLLNIC: std::sync::LazyLock<String> = std::sync::LazyLock::new(pollnic_tests::pollnic_exe);
const NR_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

fn pollnic(args: &[&str]) -> (bool, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(&*POLLNIC)
        .args(args)
        .output()
        .expect("run pollnic");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    println!("$ pollnic {}\n{text}", args.join(" "));
    (status.success(), text)
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn doctor_passes_on_the_prepared_testbed() {
    let (p0, p1) = (pollnic_tests::port(0), pollnic_tests::port(1));
    let (ok, text) = pollnic(&["doctor", &p0, &p1, "--cores", "0,1"]);
    assert!(ok, "doctor failed on the testbed:\n{text}");
    assert!(text.contains(", 0 fail\n"), "{text}");
    for line in [
        "ok    iommu ",
        "ok    vfio-pci ",
        "ok    hugepages ",
        "ok    memlock ",
        "ok    /dev/vfio ",
    ] {
        assert!(text.contains(line), "no `{line}` line:\n{text}");
    }
    assert!(
        text.contains(&format!(
            "port {p0}  82576 Gigabit Network Connection: driver vfio-pci"
        )),
        "{text}"
    );
    assert!(text.contains("needs 6 per queue"), "{text}");
    // WAITPKG as the guest's kernel lists it (QEMU TCG `-cpu max` has none).
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
    let listed = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "waitpkg"));
    let want = format!(
        "this CPU offers WAITPKG (UMONITOR/UMWAIT): {};",
        if listed { "yes" } else { "no" }
    );
    assert!(
        text.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 2 && w[..2] == ["ok", "cpu-wait"] && l.contains(&want)
        }),
        "no `ok cpu-wait ... {want}` line:\n{text}"
    );
    assert!(text.contains("24 for 2 port(s) x 2 queue(s)"), "{text}");
    // The same as JSON.
    let (ok, json) = pollnic(&["doctor", &p0, "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    assert_eq!(v["fail"], 0);
    assert!(v["ok"].as_u64().unwrap() >= 8);
}

/// Puts `nr_hugepages` back when dropped, also when the test fails.
struct RestoreHugepages(String);

impl Drop for RestoreHugepages {
    fn drop(&mut self) {
        std::fs::write(NR_HUGEPAGES, &self.0).expect("restore nr_hugepages");
        let now = std::fs::read_to_string(NR_HUGEPAGES).unwrap();
        assert_eq!(now.trim(), self.0.trim(), "nr_hugepages not restored");
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn doctor_fails_with_the_hugepage_fix_when_none_are_reserved() {
    let before = std::fs::read_to_string(NR_HUGEPAGES).unwrap();
    assert_ne!(before.trim(), "0", "the testbed reserves hugepages");
    let restore = RestoreHugepages(before);
    std::fs::write(NR_HUGEPAGES, "0").unwrap();
    // Nothing holds hugepages between tests (testpmd runs with --in-memory,
    // pollnic maps anonymous hugepages): the kernel frees them all.
    let in_use: u64 = std::fs::read_to_string(NR_HUGEPAGES)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let files: Vec<String> = std::fs::read_dir("/dev/hugepages")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        (in_use, files.as_slice()),
        (0, &[][..]),
        "hugepages still in use after an earlier test, files in /dev/hugepages"
    );
    let p0 = pollnic_tests::port(0);
    let (ok, text) = pollnic(&["doctor", &p0]);
    assert!(!ok, "doctor must exit non-zero without hugepages:\n{text}");
    assert!(
        text.lines().any(|l| l.starts_with("fail  hugepages ")
            && l.contains(&format!("2 MiB hugepages: {in_use} total, 0 free"))),
        "{text}"
    );
    // One port, one queue: 6 pages on top of what is in use.
    let want = in_use + 6;
    assert!(
        text.contains(&format!(
            "fix: echo {want} | sudo tee /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
        )),
        "{text}"
    );
    drop(restore);
    let (ok, text) = pollnic(&["doctor", &p0]);
    assert!(ok, "doctor passes again once restored:\n{text}");
}

fn driver_of(addr: &str) -> Option<String> {
    std::fs::read_link(format!("/sys/bus/pci/devices/{addr}/driver"))
        .ok()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
}

fn group_of(addr: &str) -> String {
    std::fs::read_link(format!("/sys/bus/pci/devices/{addr}/iommu_group"))
        .expect("IOMMU group link")
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Gives both NICs of the shared group back to the kernel's igb when
/// dropped, also when the test fails.
struct BackToIgb<'a>(&'a str, &'a str);

impl Drop for BackToIgb<'_> {
    fn drop(&mut self) {
        if driver_of(self.0).as_deref() == Some("vfio-pci") {
            let _ = Command::new(&*POLLNIC).args(["unbind", self.0]).status();
        }
        for a in [self.0, self.1] {
            if driver_of(a).is_none() {
                let _ = std::fs::write("/sys/bus/pci/drivers/igb/bind", a);
            }
        }
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn doctor_names_the_other_member_of_a_non_viable_group() {
    let shared = env("POLLNIC_SHARED_GROUP");
    let (a, b) = shared.split_once(',').expect("two addresses");
    let g = group_of(a);
    assert_eq!(g, group_of(b), "{a} and {b} must share an IOMMU group");
    assert_eq!(
        driver_of(b).as_deref(),
        Some("igb"),
        "the kernel's igb holds {b}"
    );
    let _restore = BackToIgb(a, b);

    // `pollnic bind` refuses the port while the other member is in use by
    // igb, names it and says what to run; nothing is changed.
    let (ok, text) = pollnic(&["bind", a]);
    assert!(
        !ok,
        "bind must refuse a group with a member on igb:\n{text}"
    );
    assert!(
        text.contains(&format!(
            "{a}: refusing to bind: IOMMU group {g} also holds {b}, in use by the kernel driver igb"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("sudo pollnic bind {a} {b}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("pollnic bind --force {a}")),
        "{text}"
    );
    assert!(text.contains("nothing was bound"), "{text}");
    assert_eq!(driver_of(a).as_deref(), Some("igb"), "{a} left as it was");
    // --force binds it anyway (warning, naming the member), for doctor to judge.
    let (ok, text) = pollnic(&["bind", "--force", a]);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "warning (--force): {a}: refusing to bind: IOMMU group {g} also holds {b}"
        )),
        "{text}"
    );
    let (ok, text) = pollnic(&["doctor", a]);
    assert!(!ok, "a non-viable group is a fail:\n{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("fail  port {a} ")))
        .unwrap_or_else(|| panic!("no fail line for {a}:\n{text}"));
    assert!(
        line.contains(&format!(
            "IOMMU group {g} is not viable: {b} (igb) bound to a host driver (other members: "
        )),
        "{line}"
    );
    // Every other member is named with its driver: the two root ports too.
    for member in std::fs::read_dir(format!("/sys/kernel/iommu_groups/{g}/devices")).unwrap() {
        let m = member.unwrap().file_name().to_string_lossy().into_owned();
        if m != a {
            let d = driver_of(&m).unwrap_or_else(|| "no driver".into());
            assert!(
                line.contains(&format!("{m} ({d})")),
                "{m} ({d}) not named: {line}"
            );
        }
    }
    assert!(
        text.contains(&format!("fix: sudo pollnic bind {b}")),
        "{text}"
    );
    // pollnic itself refuses the port, naming the same member.
    let err = pollnic::Device::open(a, &pollnic::DeviceConfig::default())
        .err()
        .expect("open must fail")
        .to_string();
    assert!(
        err.contains(&format!("still bound elsewhere: {b} (igb)")),
        "{err}"
    );

    // Without a driver the member no longer blocks, and is still named.
    std::fs::write(format!("/sys/bus/pci/devices/{b}/driver/unbind"), b).unwrap();
    let (_, text) = pollnic(&["doctor", a]);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("ok    port {a} "))
                && l.contains(&format!("IOMMU group {g} is viable; other members: "))
                && l.contains(&format!("{b} (no driver)"))),
        "{text}"
    );
    assert!(!text.contains("not viable"), "{text}");

    // Give both functions back to the kernel's igb.
    let (ok, text) = pollnic(&["unbind", a]);
    assert!(ok, "{text}");
    std::fs::write("/sys/bus/pci/drivers/igb/bind", b).unwrap();
    assert_eq!(driver_of(a).as_deref(), Some("igb"));
    assert_eq!(driver_of(b).as_deref(), Some("igb"));
}

/// `pollnic doctor --selfcheck` on QEMU's igb: the igb equivalents of the
/// 82599's registers (CTRL, CTRL_EXT, STATUS, MTA, RAR 0..15) before and
/// after bring-up, with the link up at the end and the port given back to
/// vfio-pci as it was.
#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn doctor_selfcheck_reads_the_igb_registers_before_and_after_bring_up() {
    let p0 = pollnic_tests::port(0);
    let (ok, text) = pollnic(&["doctor", "--selfcheck", &p0]);
    assert!(ok, "selfcheck failed:\n{text}");
    assert!(
        text.starts_with(&format!("pollnic selfcheck {p0}: 82576")),
        "{text}"
    );
    for line in ["CTRL ", "CTRL_EXT ", "STATUS ", "MTA ", "RAR 1..15 "] {
        assert!(text.contains(line), "no `{line}` line:\n{text}");
    }
    assert!(text.contains("link after bring-up: up 1000 Mb/s"), "{text}");
    // Taken from the firmware while open (QEMU keeps the bit; it has no
    // firmware to tell).
    assert!(
        text.contains("DRV_LOAD") && text.contains("-> set"),
        "{text}"
    );
    assert!(text.contains("flow control after bring-up: full"), "{text}");
    assert!(text.lines().count() < 15, "{text}");
    assert_eq!(driver_of(&p0).as_deref(), Some("vfio-pci"));
}
