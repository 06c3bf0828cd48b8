//! The guest's serial console: streamed to our stdout as it arrives, and watched for the
//! lines `/init` prints: `POLLNIC-READY-<nonce>` before the script starts,
//! `POLLNIC-EXIT-<nonce>=<code>` after it, `POLLNIC-INIT-FAILED-<nonce>: why`, and the
//! kernel's own `Kernel panic` line. The per-run nonce keeps the script's own output from
//! faking a sentinel.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::Sender;

/// What the console reader saw.
pub enum Event {
    /// `/init` is about to run the script.
    Ready,
    /// The guest kernel panicked (the line).
    Panic(String),
    /// The script finished with this status.
    Exit(i32),
    /// `/init` gave up before running the script (why).
    InitFailed(String),
}

/// Copies QEMU's stdout (the guest console) to our stdout, turning CRLF into LF, and reports
/// the sentinel lines. Partial lines are forwarded at once (prompts, progress dots).
pub fn forward_console(mut from: impl Read, mut out: impl Write, nonce: &str, tx: Sender<Event>) {
    let ready = format!("POLLNIC-READY-{nonce}");
    let exit = format!("POLLNIC-EXIT-{nonce}=");
    let failed = format!("POLLNIC-INIT-FAILED-{nonce}: ");
    let mut line = Vec::new();
    let mut buf = [0u8; 8192];
    let mut held_cr = false;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut cooked = Vec::with_capacity(n + 1);
        for &b in &buf[..n] {
            if held_cr && b != b'\n' {
                cooked.push(b'\r');
            }
            held_cr = b == b'\r';
            if !held_cr {
                cooked.push(b);
            }
        }
        let _ = out.write_all(&cooked);
        let _ = out.flush();
        for &b in &cooked {
            if b != b'\n' {
                line.push(b);
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            if text.contains(&ready) {
                let _ = tx.send(Event::Ready);
            } else if let Some(at) = text.find(&exit) {
                let code: String = text[at + exit.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let _ = tx.send(Event::Exit(code.parse().unwrap_or(255)));
            } else if let Some(at) = text.find(&failed) {
                let _ = tx.send(Event::InitFailed(
                    text[at + failed.len()..].trim().to_owned(),
                ));
            } else if let Some(at) = text.find("Kernel panic - not syncing") {
                let _ = tx.send(Event::Panic(text[at..].trim().to_owned()));
            }
            line.clear();
        }
    }
}

/// QEMU's complaint that the hub joining the two NICs reaches no host network: that is the
/// point of the back-to-back setup, so it is not shown.
const BENIGN_STDERR: &str = "is not connected to host network";

/// Copies QEMU's stderr to ours and returns its last lines (for error messages).
pub fn forward_stderr(from: impl Read) -> String {
    let mut tail: Vec<String> = Vec::new();
    for line in BufReader::new(from).lines() {
        let Ok(line) = line else { break };
        if line.contains(BENIGN_STDERR) {
            continue;
        }
        eprintln!("{line}");
        tail.push(line);
        if tail.len() > 20 {
            tail.remove(0);
        }
    }
    tail.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn events(console: &[u8], nonce: &str) -> Vec<String> {
        let (tx, rx) = mpsc::channel();
        let mut shown = Vec::new();
        forward_console(console, &mut shown, nonce, tx);
        assert!(!shown.contains(&b'\r'));
        rx.try_iter()
            .map(|e| match e {
                Event::Ready => "ready".to_owned(),
                Event::Exit(c) => format!("exit {c}"),
                Event::InitFailed(w) => format!("failed {w}"),
                Event::Panic(l) => format!("panic {l}"),
            })
            .collect()
    }

    #[test]
    fn sentinels_need_the_nonce() {
        let console = b"boot\r\nPOLLNIC-READY-abc\r\nPOLLNIC-EXIT-xyz=0\r\n[ 1.0] noise POLLNIC-EXIT-abc=3\r\n";
        assert_eq!(events(console, "abc"), ["ready", "exit 3"]);
        let failed = b"POLLNIC-INIT-FAILED-abc: insmod igb.ko failed\r\n";
        assert_eq!(events(failed, "abc"), ["failed insmod igb.ko failed"]);
        let panic = b"[ 2.3] Kernel panic - not syncing: VFS: Unable to mount root fs\r\n";
        assert_eq!(
            events(panic, "abc"),
            ["panic Kernel panic - not syncing: VFS: Unable to mount root fs"]
        );
    }
}
