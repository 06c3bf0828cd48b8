//! pktgen, capture, loopback (sizes and MTU) and `pollnic doctor`/`bind --user` refuse bad arguments
//! with a clear message before touching any NIC (no hardware needed), and an
//! unwritable capture file leaves nothing behind.

use std::process::Command;

fn refuses(exe: &std::path::Path, cases: &[(&str, &str)]) {
    for (args, want) in cases {
        let out = Command::new(exe).args(args.split(' ')).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args}: succeeded");
        assert!(err.contains(want), "{args}: {err}");
        assert!(!err.contains("panicked"), "{args}: {err}");
    }
}

#[test]
fn pktgen_refuses_bad_arguments_clearly() {
    refuses(
        &pollnic_tests::example_exe("pktgen"),
        &[
            (
                "--port 00:08.0 --frame-size 1519",
                "--frame-size 1519 is above the largest frame at MTU 1500: 1518 bytes",
            ),
            (
                "--port 00:08.0 --frame-size 9018 --mtu 4000",
                "pass --mtu 9000 (the largest)",
            ),
            (
                "--port 00:08.0 --frame-size 9019 --mtu 9000",
                "give a size from 64 to 1518 bytes (FCS included; up to 9018 with --mtu 9000)",
            ),
            (
                "--port 00:08.0 --mtu 9001",
                "for '--mtu <MTU>': 9001 is not in 1500..=9000",
            ),
            (
                "--port 00:08.0 --frame-size 63",
                "0 for mixed sizes, or imix",
            ),
            (
                "--port 00:08.0 --vlan 4095",
                "for '--vlan <VLAN>': 4095 is not in 1..=4094",
            ),
            ("--port 00:08.0 --vlan 0", "0 is not in 1..=4094"),
            (
                "--port 00:08.0 --dst 52:54:00",
                "--dst 52:54:00: expected a MAC",
            ),
            (
                "--port 00:08.0 --batch 0",
                "for '--batch <BATCH>': 0 is not in 1..=512",
            ),
            (
                "--port 00:08.0 --flows 0",
                "for '--flows <FLOWS>': 0 is not in 1..=65536",
            ),
            (
                "--port 00:08.0 --ring-size 100",
                "power of two between 32 and 4096",
            ),
            (
                "--port 00:08.0 --write /nonexistent-dir/x.pcap",
                "cannot write /nonexistent-dir/x.pcap",
            ),
            ("--port 0000:7f:1f.7", "no such PCI device"),
        ],
    );
}

#[test]
fn capture_refuses_bad_arguments_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.pcap");
    let out = out.to_str().unwrap();
    refuses(
        &pollnic_tests::example_exe("capture"),
        &[
            (
                "--port 00:0a.0 --out /nonexistent-dir/x.pcap",
                "cannot write /nonexistent-dir/x.pcap",
            ),
            (
                &format!("--port 00:0a.0 --out {out} --snaplen 0"),
                "for '--snaplen <SNAPLEN>': 0 is not in 1..=262144",
            ),
            (
                &format!("--port 00:0a.0 --out {out} --cores x"),
                "bad core `x`",
            ),
            (
                &format!("--port 00:0a.0 --out {out} --ring-size 100"),
                "power of two between 32 and 4096",
            ),
            (
                &format!("--port 00:0a.0 --out {out} --mtu 100"),
                "for '--mtu <MTU>': 100 is not in 1500..=9000",
            ),
            (
                &format!("--port 0000:7f:1f.7 --out {out}"),
                "no such PCI device",
            ),
        ],
    );
    // A failed run leaves no file, partial or otherwise.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn loopback_refuses_frames_above_the_mtu_clearly() {
    refuses(
        &pollnic_tests::example_exe("loopback"),
        &[
            (
                "--tx 00:08.0 --rx 00:0a.0 --frame-size 9018",
                "--frame-size 9018 is above the largest frame at MTU 1500: 1518 bytes with the FCS; pass --mtu 9000",
            ),
            (
                "--tx 00:08.0 --rx 00:0a.0 --frame-size 9019 --mtu 9000",
                "for '--frame-size <FRAME_SIZE>': 9019 is not in 0..=9018",
            ),
            (
                "--tx 00:08.0 --rx 00:0a.0 --mtu 9200",
                "for '--mtu <MTU>': 9200 is not in 1500..=9000",
            ),
            (
                "--tx 00:08.0 --rx 00:0a.0 --frame-size 63",
                "below 64 bytes",
            ),
        ],
    );
}

#[test]
fn pollnic_cli_refuses_bad_doctor_and_owner_arguments() {
    let exe = pollnic_tests::pollnic_exe();
    refuses(
        std::path::Path::new(&exe),
        &[
            ("doctor --cores x", "--cores x: bad core `x`"),
            (
                "doctor --queues 17",
                "for '--queues <QUEUES>': 17 is not in 1..=16",
            ),
            (
                "bind --user no-such-user-pollnic 00:08.0",
                "no user `no-such-user-pollnic`",
            ),
            (
                "bind --group no-such-group-pollnic 00:08.0",
                "no group `no-such-group-pollnic`",
            ),
            // Named twice (the short and the long form of one address):
            // a bad command line, said before any guard or check.
            (
                "bind 00:08.0 0000:00:08.0",
                "0000:00:08.0 is given twice: give each port once",
            ),
            ("unbind 00:08.0 00:08.0", "0000:00:08.0 is given twice"),
        ],
    );
    // A bad address or a negative number is a bad command line too: status
    // 2, and the message names the option (docs/tools/command-lines.md).
    for (exe, args, want) in [
        (
            pollnic_tests::example_exe("loopback"),
            "--tx bogus --rx 00:0a.0",
            "invalid value 'bogus' for '--tx <ADDR>'",
        ),
        (
            pollnic_tests::example_exe("pktgen"),
            "--port 00:08.0 --rate -5",
            "invalid value '-5' for '--rate <RATE>'",
        ),
        (
            pollnic_tests::example_exe("capture"),
            "--port 00:08.0x",
            "invalid value '00:08.0x' for '--port <ADDR>'",
        ),
    ] {
        let out = Command::new(&exe).args(args.split(' ')).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args}: {err}");
        assert!(err.contains(want), "{args}: {err}");
    }
    for args in ["bind 00:08.0 00:08.0", "unbind 00:08.0 00:08.0"] {
        let out = Command::new(&exe).args(args.split(' ')).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args}: a bad command line is status 2"
        );
    }
}

/// `pollnic --help` and `pollnic status --help` name the three families
/// pollnic drives (issue 46, item 8): igb (82576/I350), ixgbe (82599/X520)
/// and virtio-net, not Intel alone.
#[test]
fn pollnic_help_names_all_three_families() {
    let exe = pollnic_tests::pollnic_exe();
    for args in [&["--help"][..], &["status", "--help"]] {
        let out = Command::new(&exe).args(args).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {out:?}");
        for (family, names) in [
            ("igb", &["igb", "I350"][..]),
            ("ixgbe", &["ixgbe", "82599"]),
            ("virtio-net", &["virtio-net"]),
        ] {
            assert!(
                names.iter().any(|n| help.contains(n)),
                "`pollnic {}` does not name {family} (any of {names:?}):\n{help}",
                args.join(" ")
            );
        }
    }
}
