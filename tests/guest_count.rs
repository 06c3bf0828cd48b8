//! The guest-work counter (the testbed's TCG plugin, docs/design/counting.md)
//! in the guest that `cargo xtask test` boots with it: the idle loop is left
//! out, the same compare row counted twice gives the same instructions per
//! packet within 2 %, whatever the host's load did to its timing, the
//! per-function profile holds the same instructions as the marked count, and
//! the transmit rows are counted per sent packet on the sending vCPU, and
//! MMIO accesses are counted one per register access.

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
        &[
            "--paths",
            "pollnic-1q",
            "--sizes",
            "64",
            "--seconds",
            "2",
            "--rate",
            "3000",
            "--top-functions",
            "0",
        ],
    );
    assert!(!text.contains("is not available"), "{text}");
    let received = rows[0]["received"].as_u64().unwrap_or(0);
    assert!(
        received > 1000,
        "pollnic-1q received {received}: {}",
        rows[0]
    );
    // The default `--pmu hardware` on a CPU without a PMU (TCG): the row
    // says so, with nothing in its figures, and nothing fails.
    let note = rows[0]["pmu_note"].as_str().unwrap_or("");
    assert!(note.contains("no PMU"), "pmu_note: {note:?}");
    assert_eq!(
        rows[0]["pmu_per_packet"],
        serde_json::json!([]),
        "{}",
        rows[0]
    );
    assert!(
        text.contains("CPU counters (--pmu): cycles on CPU 0: no PMU"),
        "{text}"
    );
}

/// The code that opens and reads the CPU's counters, with the kernel's
/// software events (`--pmu software`) where the CPU has no PMU: every CPU
/// but the generator's counted system-wide over the send window.
#[test]
#[ignore = "needs the QEMU testbed: run `cargo xtask test`"]
fn the_cpu_counters_are_read_per_row_with_software_events() {
    counter();
    let (text, rows) = run_compare(
        "pmu",
        &[
            "--paths",
            "pollnic-1q",
            "--sizes",
            "64",
            "--seconds",
            "1",
            "--rate",
            "3000",
            "--top-functions",
            "0",
            "--pmu",
            "software",
        ],
    );
    let r = &rows[0];
    let figures = r["pmu_per_packet"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    let f = |event: &str| {
        figures
            .iter()
            .find(|x| x["event"] == event)
            .and_then(|x| x["per_packet"].as_f64())
            .unwrap_or_else(|| panic!("no {event}: {r}"))
    };
    // A busy-polling receiver on vCPU 0: vCPU 0's clock ran for the whole
    // window (~1.2 s for ~3,000 packets: far above 10 µs a packet).
    let clock = f("cpu-clock");
    assert!(clock > 10_000.0, "cpu-clock {clock} ns per packet: {r}");
    f("context-switches");
    f("page-faults");
    f("cpu-migrations");
    assert!(
        r["pmu_note"]
            .as_str()
            .unwrap()
            .starts_with("cpu-clock, context-switches"),
        "{r}"
    );
    assert!(
        text.contains("CPU counters per packet: cpu-clock"),
        "{text}"
    );
}

/// The MMIO counts against work whose register accesses are known: one
/// `tx_burst` of 16 frames on an igb port makes exactly one MMIO write (the
/// tail, TDT(0) at BAR0 + 0xE018: 82576 datasheet §8.12.37) and no read; an
/// empty `rx_burst` (the poll path) and a loop over 1 MiB of RAM make none.
/// The profile names the site by register offset.
#[test]
#[ignore = "needs the QEMU igb testbed with the counter: run `cargo xtask test`"]
fn mmio_is_counted_per_register_access() {
    use pollnic::Device;
    use pollnic_tools::{marker, profile};
    let c = counter();
    // Markers count per vCPU: the regions must begin and end on one.
    assert!(pollnic_tools::cores::pin_current_thread(0), "pin to vCPU 0");
    // RAM first, before the device is open: an open device's statistics
    // thread reads its counter registers now and then (34 reads), and in
    // this process's address space it would count inside a long region.
    // A marked region counts everything vCPU 0 runs, the kernel included:
    // an interrupt taken inside it (a kernel driver's handler kicking its
    // device) adds that handler's MMIO. It happened once in CI (one write,
    // 2026-12-06), so the loop gets three tries and one must be clean; a
    // loop that itself touched a device would fail all three.
    let mut ram = vec![1u64; 1 << 17];
    let mut seen = Vec::new();
    for _ in 0..3 {
        let a = c.snapshot().unwrap();
        marker::begin();
        for (i, x) in ram.iter_mut().enumerate() {
            *x = std::hint::black_box(*x + i as u64);
        }
        marker::commit();
        let d = c.snapshot().unwrap().since(&a);
        seen.push((d[0].marked_mmio_reads, d[0].marked_mmio_writes, d[0].marks));
        if seen.last() == Some(&(0, 0, 1)) {
            break;
        }
    }
    assert_eq!(
        seen.last(),
        Some(&(0, 0, 1)),
        "1 MiB of RAM: no MMIO (reads, writes, regions in each try: {seen:?})"
    );
    let mut dev = Device::open(port(0), &small_config()).expect("open port 0");
    let q = dev.queue(0);
    let burst = |n: usize| {
        let mut v = Vec::new();
        for _ in 0..n {
            let mut p = q.mempool().alloc().expect("a buffer");
            p.set_len(60).unwrap();
            p.data_mut()[..6].copy_from_slice(&[0xff; 6]);
            v.push(p);
        }
        v
    };
    let mut pkts = burst(16);
    // The first burst of a fresh queue is not special, but warm up anyway.
    let mut warm = burst(4);
    q.tx_burst(&mut warm);
    assert!(q.flush_tx(Duration::from_secs(5)));
    let mut got = Vec::new();
    // (what, marked MMIO reads, marked MMIO writes, marked regions)
    let mut seen = Vec::new();
    profile::Profile::start().expect("profile");
    for what in ["tx_burst of 16", "empty rx_burst"] {
        let a = c.snapshot().unwrap();
        marker::begin();
        match what {
            "tx_burst of 16" => assert_eq!(q.tx_burst(&mut pkts), 16),
            _ => assert_eq!(q.rx_burst(&mut got, 32), 0),
        }
        marker::commit();
        let d = c.snapshot().unwrap().since(&a);
        seen.push((
            what,
            d[0].marked_mmio_reads,
            d[0].marked_mmio_writes,
            d[0].marks,
        ));
    }
    let prof = profile::Profile::take()
        .expect("profile")
        .expect("a counting guest");
    println!("marked MMIO (what, reads, writes, regions): {seen:?}");
    println!(
        "MMIO sites on vCPU 0 in the window: {:?}",
        prof.mmio
            .iter()
            .filter(|m| m.count[0] > 0)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        seen,
        vec![("tx_burst of 16", 0, 1, 1), ("empty rx_burst", 0, 0, 1)],
        "one TDT write for a burst, nothing for a poll"
    );
    // The profile's site: a write of TDT(0) on vCPU 0, by pollnic's code.
    let bar0 =
        std::fs::read_to_string(format!("/sys/bus/pci/devices/{}/resource", port(0))).unwrap();
    let start = u64::from_str_radix(
        bar0.split_whitespace()
            .next()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let tdt: Vec<_> = prof
        .mmio
        .iter()
        .filter(|m| m.phys == Some(start + 0xE018) && m.write)
        .collect();
    println!("TDT(0) sites: {tdt:?}");
    assert_eq!(
        tdt.iter().map(|m| m.count[0]).sum::<u64>(),
        1,
        "{:?}",
        prof.mmio
    );
    assert!(tdt.iter().all(|m| m.device.contains("igb")), "{tdt:?}");
    q.flush_tx(Duration::from_secs(5));
}

/// The plugin's cache model (`cache=marker` in the counting guest of
/// `cargo xtask test`; `cargo xtask vm --count-cache=marker` for this test
/// alone) on a known sweep: one read per 64-byte line of a buffer, twice,
/// each pass in a marked region on vCPU 0. A buffer well under L1D (16 KiB
/// of 48) misses every line once, then none; one well over L2 and the LLC
/// (8 MiB, above 1.25 MiB + 3 MiB) misses every line at every level in both
/// passes (LRU and a cyclic sweep). A CPU sweep writes nothing behind the
/// CPU's back: no line is taken for a device's. Then port 1 receives frames
/// in marked regions: the device's writes to descriptors and buffers are
/// found by the byte shadow, and with DDIO the LLC misses are no more than
/// without. User-mode counts only (an interrupt may fall into a region).
#[test]
#[ignore = "needs the QEMU igb testbed with the counter and its cache model: run `cargo xtask test`"]
fn the_cache_model_counts_a_known_sweep_and_sees_the_device_write() {
    use pollnic::Device;
    use pollnic_tools::counts::CacheCounts;
    use pollnic_tools::frame::{self, Flow};
    use pollnic_tools::marker;
    let c = counter();
    let model = c.snapshot().unwrap().cache_model;
    assert!(
        matches!(model.as_deref(), Some("marker") | Some("on")),
        "the counter has no cache model ({model:?}): boot with `cargo xtask vm --count-cache=marker`"
    );
    let exact = model.as_deref() == Some("marker");
    assert!(pollnic_tools::cores::pin_current_thread(0), "pin to vCPU 0");
    // In `marker` mode the model runs only while armed, so the suite's other
    // tests in this guest run at the counter's own speed; disarmed again
    // when this test ends, also by a panic.
    struct Armed;
    impl Drop for Armed {
        fn drop(&mut self) {
            marker::cache_disarm();
        }
    }
    marker::cache_arm();
    let _armed = Armed;
    const LINE: usize = 64;
    // One load per line, in a marked region; what the model counted on vCPU 0.
    let pass = |buf: &[u8]| -> CacheCounts {
        let a = c.snapshot().unwrap();
        marker::begin();
        let mut sum = 0u8;
        for i in (0..buf.len()).step_by(LINE) {
            sum = sum.wrapping_add(std::hint::black_box(buf[i]));
        }
        marker::commit();
        std::hint::black_box(sum);
        c.snapshot().unwrap().since(&a)[0].cache
    };
    let user = |x: &CacheCounts| {
        (
            x.user_l1d_misses,
            x.user_l2_misses,
            x.user_llc_misses,
            x.user_llc_misses_no_ddio,
            x.user_external_lines,
        )
    };
    // A page-aligned buffer, so the sweep touches exactly len / 64 lines.
    let aligned = |len: usize| {
        let v = vec![7u8; len + 4096];
        let off = v.as_ptr().align_offset(4096);
        (v, off)
    };
    let near = |got: u64, want: u64, tol: u64| got + tol >= want && got <= want + tol;

    // Large: 131,072 lines (first: it also empties L1D and L2 of whatever
    // earlier marked regions left there).
    let (large, off) = aligned(8 << 20);
    let large = &large[off..off + (8 << 20)];
    let n = (large.len() / LINE) as u64;
    let (first, second) = (pass(large), pass(large));
    println!(
        "8 MiB sweep, user: {:?} then {:?}",
        user(&first),
        user(&second)
    );
    for (what, x) in [("first", &first), ("second", &second)] {
        let tol = n / 100;
        assert!(
            near(x.user_l1d_misses, n, tol),
            "{what} pass, L1D: {:?}",
            user(x)
        );
        assert!(
            near(x.user_l2_misses, n, tol),
            "{what} pass, L2: {:?}",
            user(x)
        );
        assert!(
            x.user_llc_misses >= n - n / 10 && x.user_llc_misses <= n + tol,
            "{what} pass, LLC: {:?}",
            user(x)
        );
        assert_eq!(
            x.user_llc_misses, x.user_llc_misses_no_ddio,
            "no device: DDIO changes nothing"
        );
        assert_eq!(
            x.user_external_lines, 0,
            "{what} pass: a CPU sweep is no device write"
        );
    }

    // Small: 256 lines, after the large sweeps emptied L1D and L2 (and
    // while the large buffer lives: its pages are not these).
    let (small, off) = aligned(16 << 10);
    let small = &small[off..off + (16 << 10)];
    let n = (small.len() / LINE) as u64;
    let (first, second) = (pass(small), pass(small));
    println!(
        "16 KiB sweep (l1d, l2, llc, llc no ddio, ext), user: {:?} then {:?}",
        user(&first),
        user(&second)
    );
    if exact {
        // The model saw none of it before (marked regions only) and the
        // large sweeps emptied L1D and L2: cold, with a few stack lines
        // (263 lines in the first run of this test, a debug build).
        assert!(
            near(first.user_l1d_misses, n, 16),
            "first pass: {:?}",
            user(&first)
        );
        assert!(
            near(first.user_l2_misses, n, 16),
            "first pass: {:?}",
            user(&first)
        );
    }
    // A second pass over lines already in L1D: a timer interrupt or a
    // context switch between the passes evicts a few (13 of 256 in one CI
    // run, 0-4 in others), never most.
    assert!(
        second.user_l1d_misses <= n / 16,
        "16 KiB fits L1D: {:?}",
        user(&second)
    );
    assert_eq!(second.user_l2_misses, 0, "{:?}", user(&second));
    assert_eq!(
        (first.user_external_lines, second.user_external_lines),
        (0, 0)
    );

    // The device writes: 8 rounds of 16 frames from port 0 to port 1 (64
    // descriptors: the ring wraps after 4); each round is received in a
    // marked region, every byte of each frame read. The shadow learns the
    // descriptors and buffers in the first rounds and sees the device's
    // writes once they come round again.
    let mut tx = Device::open(port(0), &small_config()).expect("open port 0");
    let mut rx = Device::open(port(1), &small_config()).expect("open port 1");
    let flow = Flow::between(tx.mac(), rx.mac());
    let (txq, rxq) = (tx.queue(0), rx.queue(0));
    let mut rounds = Vec::new();
    let mut got = Vec::new();
    for round in 0..8u64 {
        let mut pending: Vec<_> = (0..16u64)
            .map(|i| {
                let mut p = txq.mempool().alloc().expect("a buffer");
                p.set_len(60).unwrap();
                assert!(frame::write(
                    p.data_mut(),
                    &flow,
                    round * 16 + i,
                    round * 16 + i
                ));
                p
            })
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !pending.is_empty() {
            txq.tx_burst(&mut pending);
            assert!(std::time::Instant::now() < deadline, "TX ring stuck");
        }
        let a = c.snapshot().unwrap();
        marker::begin();
        let mut received = 0;
        let mut sum = 0u8;
        while received < 16 && std::time::Instant::now() < deadline {
            rxq.rx_burst(&mut got, 32);
            for p in got.drain(..) {
                sum = p.data().iter().fold(sum, |s, b| s.wrapping_add(*b));
                received += 1;
            }
        }
        marker::commit();
        std::hint::black_box(sum);
        assert_eq!(received, 16, "round {round}: frames lost");
        rounds.push(c.snapshot().unwrap().since(&a)[0].cache);
    }
    assert!(txq.flush_tx(Duration::from_secs(5)));
    let late = rounds[4..]
        .iter()
        .fold(CacheCounts::default(), |s, x| s.plus(x));
    println!(
        "receive rounds (user: l1d, l2, llc, llc no ddio, ext): {:?}",
        rounds.iter().map(user).collect::<Vec<_>>()
    );
    // At least the descriptor lines: 16 descriptors of 16 bytes a round.
    assert!(
        late.user_external_lines >= 4 * 4,
        "rounds 4..8 found {} device-written lines",
        late.user_external_lines
    );
    assert!(
        late.user_llc_misses <= late.user_llc_misses_no_ddio,
        "{:?}",
        user(&late)
    );
    assert!(
        late.user_llc_misses_no_ddio >= late.user_external_lines,
        "without DDIO every device-written line misses the LLC: {:?}",
        user(&late)
    );
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
                "--paths",
                "pollnic-1q",
                "--sizes",
                "64",
                "--seconds",
                "2",
                "--rate",
                "3000",
                // The profile in the first run only (naming its functions
                // takes a debug build under TCG a while); the counts do not
                // change.
                "--top-functions",
                if run == 0 { "10" } else { "0" },
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
            assert!(
                r["top_functions"].as_array().is_some_and(|t| t.is_empty()),
                "{r}"
            );
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
        let listed: f64 = top
            .iter()
            .map(|t| t["instructions_per_packet"].as_f64().unwrap())
            .sum();
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
            "--paths",
            "tx-pollnic,tx-kernel-afpacket",
            "--sizes",
            "64",
            "--top-functions",
            "0",
            "--seconds",
            "1",
            "--rate",
            "5000",
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
