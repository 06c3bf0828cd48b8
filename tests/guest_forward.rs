//! `compare --forward` runs end to end in the guest: frames from the
//! generator on port 0 come back through port 1's forwarder (pollnic's fwd
//! example, DPDK testpmd) with round-trip numbers. A binary of its own, so
//! that it has its own time limit in `cargo xtask test`.

use pollnic_tests::*;

/// `--forward`: pollnic's fwd (io mode) and testpmd (macswap mode) send the
/// generator's frames back through port 1 to port 0; every row has a round
/// trip, the forwarder's counts bound what came back, and every returned
/// frame carries the MACs its mode makes (io: untouched, macswap: swapped).
/// Two of the four forwarding paths, to keep CI short (each forwarder and
/// each mode once).
#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn forward_mode_bounces_frames_back_with_round_trip_numbers() {
    let out = std::env::temp_dir().join(format!("pollnic-forward-{}", std::process::id()));
    let run = std::process::Command::new(example_exe("compare"))
        .args(["--tx", &port(0), "--rx", &port(1), "--forward"])
        .args(["--paths", "pollnic-fwd-io,dpdk-testpmd-macswap"])
        .args(["--seconds", "1", "--rate", "5000", "--sizes", "64"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&run.stdout).to_string() + &String::from_utf8_lossy(&run.stderr);
    println!("{text}");
    assert!(run.status.success(), "compare --forward failed:\n{text}");
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("forward.json")).unwrap()).unwrap();
    let paths = [
        ("pollnic-fwd-io", "io"),
        ("dpdk-testpmd-macswap", "macswap"),
    ];
    assert_eq!(rows.len(), paths.len(), "one row per forwarding path");
    for (path, mode) in paths {
        let r = rows
            .iter()
            .find(|r| r["path"] == path)
            .unwrap_or_else(|| panic!("row {path} missing"));
        let what = format!("{path}: {r}");
        assert_eq!(r["valid"], true, "{what}");
        assert_eq!(r["mode"], mode, "{what}");
        let n = |k: &str| {
            r[k].as_u64()
                .unwrap_or_else(|| panic!("{k} missing: {what}"))
        };
        let (sent, back) = (n("sent"), n("received"));
        let (fwd_rx, fwd_tx) = (n("fwd_received"), n("fwd_sent"));
        assert!(back > 0, "nothing came back: {what}");
        // What returns was forwarded; what was forwarded was received; what
        // was received on port 1 was sent (the hub adds nothing).
        assert!(back <= fwd_tx && fwd_tx <= fwd_rx, "{what}");
        assert!(fwd_rx <= sent + 16, "{what}");
        assert_eq!(n("wrong_macs"), 0, "{what}");
        let p: Vec<f64> = ["p50_us", "p99_us", "max_us"]
            .iter()
            .map(|k| r[*k].as_f64().unwrap())
            .collect();
        assert!(
            p[0] > 0.0 && p[0] <= p[1] && p[1] <= p[2],
            "round-trip latency: {what}"
        );
    }
    assert!(out.join("forward.svg").is_file() && out.join("forward.csv").is_file());
}
