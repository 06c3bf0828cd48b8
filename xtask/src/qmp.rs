//! QEMU's monitor for guest tests: QEMU listens for QMP on a unix socket on the host, and a
//! [`Relay`] thread carries `set_link` requests from the guest to it.
//!
//! The guest cannot reach a host socket, but it shares the repository over 9p. So the relay
//! is a directory on that share (`target/testbed/run/qmp-<nonce>/`, whose guest path the
//! guest script gets as `$POLLNIC_QMP_RELAY`):
//! 1. the guest writes one request line to `req-<id>.tmp` and renames it to `req-<id>`
//!    (a rename is atomic, so the relay never sees half a request);
//! 2. the relay (polling the directory every [`POLL`]) reads and deletes `req-<id>`, runs the
//!    request over QMP, and answers in `resp-<id>` the same way (`ok` or `error: <why>`);
//! 3. the guest waits for `resp-<id>`, reads and deletes it.
//!
//! One request form exists, `set_link <nic id> on|off` (QMP `set_link`, what the HMP command
//! of the same name does), and only for the testbed's igb NICs (`-device igb,id=...`): the
//! relay is not a general monitor. 9p with `cache=mmap` caches no directory entries, so a file
//! the host creates is seen by the guest's next lookup.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::say;

/// How often the relay looks for requests.
const POLL: Duration = Duration::from_millis(20);
/// How long one QMP command may take to answer.
const QMP_TIMEOUT: Duration = Duration::from_secs(10);

/// The relay thread; [`Relay::stop`] ends it and removes its directory.
pub struct Relay {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    dir: PathBuf,
}

impl Relay {
    /// Creates `dir` (empty) and starts serving requests found there, forwarding them to the
    /// QMP socket `socket` (connected on the first request, so QEMU may start after this).
    /// `nics` are the NIC ids a request may name.
    pub fn start(dir: &Path, socket: &Path, nics: Vec<String>) -> Result<Relay> {
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new()
            .name("qmp-relay".into())
            .spawn({
                let (stop, dir, socket) = (Arc::clone(&stop), dir.to_owned(), socket.to_owned());
                move || serve(&dir, &socket, &nics, &stop)
            })
            .context("starting the QMP relay thread")?;
        Ok(Relay {
            stop,
            thread: Some(thread),
            dir: dir.to_owned(),
        })
    }

    /// Stops the thread and removes the request directory.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn serve(dir: &Path, socket: &Path, nics: &[String], stop: &AtomicBool) {
    let mut qmp: Option<Qmp> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut names: Vec<String> = match fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("req-") && !n.ends_with(".tmp"))
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            let _ = fs::remove_file(&path);
            let request = text.trim();
            let answer = match parse(request, nics) {
                Ok((nic, up)) => run_set_link(&mut qmp, socket, &nic, up),
                Err(e) => Err(e),
            };
            let reply = match &answer {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("error: {e:#}"),
            };
            say!("qmp relay: {request} -> {reply}");
            let id = &name["req-".len()..];
            let tmp = dir.join(format!("resp-{id}.tmp"));
            if fs::write(&tmp, format!("{reply}\n")).is_ok() {
                let _ = fs::rename(&tmp, dir.join(format!("resp-{id}")));
            }
        }
        thread::sleep(POLL);
    }
}

/// `set_link <nic> on|off` -> (nic, up).
fn parse(request: &str, nics: &[String]) -> Result<(String, bool)> {
    let words: Vec<&str> = request.split_whitespace().collect();
    let [cmd, nic, state] = words[..] else {
        bail!("expected `set_link <nic id> on|off`, got {request:?}");
    };
    if cmd != "set_link" {
        bail!("only set_link is relayed, not {cmd:?}");
    }
    if !nics.iter().any(|n| n == nic) {
        bail!("unknown NIC id {nic:?} (known: {})", nics.join(", "));
    }
    let up = match state {
        "on" => true,
        "off" => false,
        _ => bail!("link state must be on or off, not {state:?}"),
    };
    Ok((nic.to_owned(), up))
}

fn run_set_link(qmp: &mut Option<Qmp>, socket: &Path, nic: &str, up: bool) -> Result<()> {
    if qmp.is_none() {
        *qmp = Some(Qmp::connect(socket)?);
    }
    let cmd = serde_json::json!({"execute": "set_link", "arguments": {"name": nic, "up": up}});
    let result = qmp.as_mut().expect("connected above").execute(&cmd);
    if result.is_err() {
        // A broken connection is re-opened by the next request.
        *qmp = None;
    }
    result
}

/// A QMP connection in command mode.
struct Qmp {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Qmp {
    fn connect(socket: &Path) -> Result<Qmp> {
        let deadline = Instant::now() + QMP_TIMEOUT;
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => {
                    return Err(e)
                        .with_context(|| format!("connecting to QMP at {}", socket.display()))
                }
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        };
        stream.set_read_timeout(Some(QMP_TIMEOUT))?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        };
        let greeting = qmp.read_message()?;
        if greeting.get("QMP").is_none() {
            bail!("QMP greeting expected, got {greeting}");
        }
        qmp.execute(&serde_json::json!({"execute": "qmp_capabilities"}))?;
        Ok(qmp)
    }

    /// Sends `cmd` and waits for its `return` (skipping asynchronous events).
    fn execute(&mut self, cmd: &serde_json::Value) -> Result<()> {
        writeln!(self.writer, "{cmd}").context("writing to QMP")?;
        loop {
            let msg = self.read_message()?;
            if msg.get("return").is_some() {
                return Ok(());
            }
            if let Some(err) = msg.get("error") {
                bail!("QMP {cmd}: {}", err["desc"].as_str().unwrap_or("error"));
            }
        }
    }

    fn read_message(&mut self) -> Result<serde_json::Value> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .context("reading from QMP")?;
        if n == 0 {
            bail!("QMP closed the connection");
        }
        serde_json::from_str(&line).with_context(|| format!("QMP sent {line:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_set_link_on_known_nics() {
        let nics = vec!["pollnic_port0".to_owned()];
        assert_eq!(
            parse("set_link pollnic_port0 off", &nics).unwrap(),
            ("pollnic_port0".to_owned(), false)
        );
        assert!(parse("set_link pollnic_port0 on\n", &nics).unwrap().1);
        assert!(parse("set_link pollnic_port9 on", &nics).is_err());
        assert!(parse("quit", &nics).is_err());
        assert!(parse("set_link pollnic_port0 maybe", &nics).is_err());
    }

    /// A fake QMP server: greeting, capabilities, an event, then the answer.
    #[test]
    fn relays_a_request_through_qmp() {
        let dir = std::env::temp_dir().join(format!("pollnic-qmp-test-{}", std::process::id()));
        let sock = dir.with_extension("sock");
        let _ = fs::remove_file(&sock);
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let server = thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            writeln!(w, r#"{{"QMP": {{"version": {{}}, "capabilities": []}}}}"#).unwrap();
            let mut got = Vec::new();
            for _ in 0..2 {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                got.push(line.trim().to_owned());
                writeln!(w, r#"{{"event": "NIC_RX_FILTER_CHANGED"}}"#).unwrap();
                writeln!(w, r#"{{"return": {{}}}}"#).unwrap();
            }
            got
        });
        let relay = Relay::start(&dir, &sock, vec!["pollnic_port1".into()]).unwrap();
        fs::write(dir.join("req-7.tmp"), "set_link pollnic_port1 off\n").unwrap();
        fs::rename(dir.join("req-7.tmp"), dir.join("req-7")).unwrap();
        fs::write(dir.join("req-8"), "set_link eth0 off\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(dir.join("resp-7").exists() && dir.join("resp-8").exists()) {
            assert!(Instant::now() < deadline, "no answer");
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(fs::read_to_string(dir.join("resp-7")).unwrap(), "ok\n");
        assert!(fs::read_to_string(dir.join("resp-8"))
            .unwrap()
            .starts_with("error: unknown NIC id"));
        relay.stop();
        let got = server.join().unwrap();
        assert_eq!(got[0], r#"{"execute":"qmp_capabilities"}"#);
        let cmd: serde_json::Value = serde_json::from_str(&got[1]).unwrap();
        assert_eq!(cmd["arguments"]["name"], "pollnic_port1");
        assert_eq!(cmd["arguments"]["up"], false);
        assert!(!dir.exists());
        let _ = fs::remove_file(&sock);
    }
}
