//! The guest-work counter (the testbed's TCG plugin, docs/design/counting.md)
//! in the guest that `cargo xtask test` boots with it: the idle loop is left
//! out, the same compare row counted twice gives the same instructions per
//! packet within 2 %, whatever the host's load did to its timing, the
//! per-function profile holds the same instructions as the marked count, and
//! the transmit rows are counted per sent packet on the sending vCPU.

use pollnic_tests::*;
use pollnic_tools::counts::Counter;
use std::time::Duration;

/// Run `compare` between ports 0 and 1 with the generator on vCPU 1 and the
/// path on vCPU 0, with `args` added; its output (printed) and its rows.
fn run_compare(tag: &str, args: &[&str]) -> (String, Vec<serde_json::Value>) {
    run_compare_on(tag, &["--gen-core", "1", "--cores", "0"], args)
}

/// Run `compare` between ports 0 and 1 with `cores` (its core options, or
/// none for its defaults) and `args`; its output (printed) and its rows.
fn run_compare_on(tag: &str, cores: &[&str], args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let out = std::env::temp_dir().join(format!("pollnic-count-{}-{tag}", std::process::id()));
    let cmd = std::process::Command::new(example_exe("compare"))
        .args(["--tx", &port(0), "--rx", &port(1)])
        .args(cores)
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&cmd.stdout).to_string() + &String::from_utf8_lossy(&cmd.stderr);
    println!("{text}");
    assert!(cmd.status.success(), "compare failed:\n{text}");
    let rows =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    (text, rows)
}

/// The compare page's first command, as written (`cargo xtask compare --
/// --seconds 3`: no --cores, no --gen-core), gives pollnic rows in the
/// counting guest: its default receive cores keep off the generator's
/// vCPU, which counting reserves (it once asked for core 1 and every
/// pollnic row said "core 1 is not available").
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn the_default_cores_give_pollnic_rows_in_the_counting_guest() {
    counter();
    let (text, rows) = run_compare_on(
        "defaults",
        &[],
        &["--paths", "pollnic-1q", "--sizes", "64", "--seconds", "2", "--rate", "3000", "--top-functions", "0"],
    );
    assert!(!text.contains("is not available"), "{text}");
    let received = rows[0]["received"].as_u64().unwrap_or(0);
    assert!(received > 1000, "pollnic-1q received {received}: {}", rows[0]);
}

fn counter() -> Counter {
    Counter::from_env().expect(
        "no $POLLNIC_COUNTS: this test runs in the counting guest of `cargo xtask test` \
         (or `cargo xtask vm --count`)",
    )
}

#[test]
#[ignore = "needs the QEMU igb testbed with the counter: run `cargo xtask test`"]
fn an_idle_guest_spends_its_instructions_in_the_idle_loop_and_they_are_kept_apart() {
    let c = counter();
    let a = c.snapshot().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let b = c.snapshot().unwrap();
    let d = b.since(&a);
    assert!(d.len() >= 2, "one line per vCPU: {d:?}");
    // `idle=poll`: an idle vCPU spins in .cpuidle.text; counted as idle, its
    // work (ticks, RCU, this test's reads) is a small fraction of that.
    let idle: u64 = d.iter().map(|v| v.idle_insns).sum();
    let work: u64 = d.iter().map(|v| v.insns()).sum();
    println!("2 s idle: {idle} idle-loop instructions, {work} others: {d:?}");
    assert!(
        idle > 0,
        "no instruction counted in the idle loop: is the idle range right? {d:?}"
    );
    assert!(
        work * 4 < idle,
        "an idle guest did more work ({work}) than a quarter of its idle-loop instructions ({idle}): \
         the idle loop is not left out"
    );
    assert!(
        d.iter().all(|v| v.loaded() > 0 && v.stored() > 0),
        "every vCPU loads and stores something (ticks): {d:?}"
    );
}

#[test]
#[ignore = "needs the QEMU igb testbed with the counter: run `cargo xtask test`"]
fn the_same_row_counted_twice_agrees_within_two_percent() {
    counter();
    let mut work = Vec::new();
    for run in 0..2 {
        let (text, rows) = run_compare(
            &format!("{run}"),
            &[
                "--paths", "pollnic-1q", "--sizes", "64", "--seconds", "2", "--rate", "3000",
                // The profile in the first run only (naming its functions
                // takes a debug build under TCG a while); the counts do not
                // change.
                "--top-functions", if run == 0 { "10" } else { "0" },
            ],
        );
        assert!(text.contains("counting: generator on vCPU 1"), "{text}");
        let r = &rows[0];
        println!("row: {r}");
        let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {r}"));
        let (all, w) = (
            f("instructions_per_packet"),
            f("work_instructions_per_packet"),
        );
        assert!(
            w > 0.0 && w <= all,
            "work {w} must be within all {all}: {r}"
        );
        assert!(
            (f("user_instructions_per_packet") + f("kernel_instructions_per_packet") - all).abs()
                < 1e-6 * all,
            "user + kernel = all: {r}"
        );
        assert!(
            f("bytes_loaded_per_packet") > 0.0 && f("bytes_stored_per_packet") > 0.0,
            "{r}"
        );
        assert!(
            r["work_method"].as_str().unwrap().starts_with("marked"),
            "busy polling counts its marked bursts: {r}"
        );
        assert!(
            f("burst1_user_instructions_per_packet") <= f("burst1_instructions_per_packet"),
            "{r}"
        );
        work.push(f("burst1_user_instructions_per_packet"));
        if run == 1 {
            assert!(r["top_functions"].as_array().is_some_and(|t| t.is_empty()), "{r}");
            continue;
        }
        // The per-function profile of the same bursts: it holds what the
        // marked count holds (both are taken at the same markers), and it
        // names the driver's and the loop's functions.
        let cover = f("top_functions_coverage");
        assert!(
            (0.995..=1.005).contains(&cover),
            "the profile holds {cover} of the marked instructions: {}",
            r["top_functions_basis"]
        );
        let top = r["top_functions"].as_array().expect("top_functions");
        assert!(!top.is_empty() && top.len() <= 10, "{r}");
        let named = |s: &str| {
            top.iter()
                .any(|t| t["function"].as_str().unwrap_or("").contains(s))
        };
        assert!(
            named("pollnic") || named("compare"),
            "no function of pollnic or compare among the top: {top:?}"
        );
        let listed: f64 = top.iter().map(|t| t["instructions_per_packet"].as_f64().unwrap()).sum();
        assert!(
            listed <= w * 1.006 && listed > 0.3 * w,
            "the top functions ({listed}) are part of the work ({w}): {top:?}"
        );
    }
    let spread = (work[0] - work[1]).abs() / work[0].min(work[1]);
    println!(
        "work instructions per packet: {work:?}, spread {:.2} %",
        spread * 100.0
    );
    assert!(
        spread <= 0.02,
        "two runs of one row differ by {:.2} % (> 2 %): {work:?}",
        spread * 100.0
    );
}

#[test]
#[ignore = "needs the QEMU igb testbed with the counter: run `cargo xtask test`"]
fn transmit_rows_are_counted_per_sent_packet() {
    counter();
    let (_, rows) = run_compare(
        "tx",
        &[
            "--paths", "tx-pollnic,tx-kernel-afpacket", "--sizes", "64", "--top-functions", "0",
            "--seconds", "1", "--rate", "5000",
        ],
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        println!("row: {r}");
        assert_eq!(r["valid"], true, "{r}");
        assert_eq!(r["direction"], "tx", "{r}");
        let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} missing: {r}"));
        assert!(n("sent") > 0 && n("received") > 0, "{r}");
        let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {r}"));
        let (all, w) = (
            f("instructions_per_packet"),
            f("work_instructions_per_packet"),
        );
        assert!(
            w > 0.0 && w <= all,
            "work {w} must be within all {all}: {r}"
        );
        assert!(
            f("bytes_loaded_per_packet") > 0.0 && f("bytes_stored_per_packet") > 0.0,
            "{r}"
        );
        assert!(
            r["work_method"].as_str().unwrap().starts_with("marked"),
            "user-space senders mark their sending turns: {r}"
        );
        assert!(r["gen_instructions_per_sent"].is_null(), "{r}");
    }
}
