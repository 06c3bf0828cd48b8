//! A small HTTP/1.0 server on smoltcp over a pollnic port: every `GET`
//! gets the same body of `--size` bytes (a fixed pseudo-random stream,
//! `pollnic_tools::smol::http_body`), then the server closes the
//! connection. Up to `--sockets` connections are served at once.
//!
//! ```text
//! smol-http --port 0000:03:00.1 --ip 10.0.0.2/24 --size 16777216
//! wget -O out.bin http://10.0.0.2/file                 # from a host on 10.0.0.0/24
//! ```
//!
//! Prints `smol-http: up: ...` once the link is up, a line per response,
//! and at the end the device's counters and the mempool's occupancy after
//! the port was closed.

#[path = "common.rs"]
mod common;

use clap::Parser;
use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "HTTP server of one file of a given size: smoltcp on a pollnic port")]
struct Args {
    #[command(flatten)]
    net: common::NetArgs,
    /// Size of the body every GET gets, in bytes. [range: 0..=1073741824]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=1 << 30), long, default_value_t = 1 << 20)]
    size: u64,
    /// TCP port to listen on. [range: 1..=65535]
    #[arg(value_parser = clap::value_parser!(u16).range(1..), long, default_value_t = 80)]
    tcp_port: u16,
    /// Connections served at once (one listening socket each). [range: 1..=64]
    #[arg(value_parser = clap::value_parser!(u16).range(1..=64), long, default_value_t = 4)]
    sockets: u16,
    /// TCP send and receive buffer per socket, in KiB. [range: 4..=16384]
    #[arg(value_parser = clap::value_parser!(u32).range(4..=16384), long, default_value_t = 1024)]
    buffer_kib: u32,
    /// Stop after this many complete responses (0 = no limit). [range: 0..=1000000000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=1_000_000_000), long, default_value_t = 0)]
    requests: u64,
}

/// Where one connection is.
enum Conn {
    /// Reading the request head.
    Request(Vec<u8>),
    /// Sending the response: head and body, `sent` bytes of them so far.
    Sending { sent: usize, start: Instant },
    /// Response sent (or request refused), FIN queued.
    Closing,
}

struct Server {
    socks: Vec<(SocketHandle, Conn)>,
    port: u16,
    head: Vec<u8>,
    body: Vec<u8>,
    done: u64,
    refused: u64,
}

const NOT_GET: &[u8] =
    b"HTTP/1.0 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

fn main() {
    let result = run(pollnic_tools::args::parse("smol-http"));
    pollnic_tools::signal::exit_if_panicked("smol-http");
    if let Err(e) = result {
        pollnic_tools::args::exit_with("smol-http", &*e);
    }
}

impl Server {
    /// Bytes of the response from `off` on (head, then body).
    fn response_from(&self, off: usize) -> &[u8] {
        if off < self.head.len() {
            &self.head[off..]
        } else {
            &self.body[off - self.head.len()..]
        }
    }

    fn step(&mut self, sockets: &mut SocketSet<'static>) {
        let total = self.head.len() + self.body.len();
        for i in 0..self.socks.len() {
            let h = self.socks[i].0;
            let s = sockets.get_mut::<tcp::Socket>(h);
            if s.state() == tcp::State::Closed {
                // Closed (TIME-WAIT over, or reset): listen again.
                s.listen(self.port).expect("a closed socket listens");
                self.socks[i].1 = Conn::Request(Vec::new());
                continue;
            }
            let next = match &mut self.socks[i].1 {
                Conn::Request(_)
                    if matches!(
                        s.state(),
                        tcp::State::Listen | tcp::State::SynReceived | tcp::State::SynSent
                    ) =>
                {
                    None
                }
                Conn::Request(req) => {
                    while s.can_recv() && req.len() < 8192 {
                        s.recv(|b| {
                            req.extend_from_slice(b);
                            (b.len(), ())
                        })
                        .expect("can_recv said so");
                    }
                    if req.windows(4).any(|w| w == b"\r\n\r\n") {
                        if req.starts_with(b"GET ") {
                            Some(Conn::Sending {
                                sent: 0,
                                start: Instant::now(),
                            })
                        } else {
                            let _ = s.send_slice(NOT_GET);
                            s.close();
                            self.refused += 1;
                            Some(Conn::Closing)
                        }
                    } else if req.len() >= 8192 || !s.may_recv() {
                        // No complete head within 8 KiB, or the peer stopped sending.
                        s.close();
                        self.refused += 1;
                        Some(Conn::Closing)
                    } else {
                        None
                    }
                }
                Conn::Sending { sent, start } => {
                    let (sent0, start) = (*sent, *start);
                    let mut off = sent0;
                    while off < total && s.can_send() {
                        let chunk = self.response_from(off);
                        match s.send_slice(chunk) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => off += n,
                        }
                    }
                    if off == total {
                        s.close();
                        self.done += 1;
                        let secs = start.elapsed().as_secs_f64();
                        println!(
                            "smol-http: response {}: {} body bytes queued in {secs:.3} s ({:.1} Mbit/s)",
                            self.done,
                            self.body.len(),
                            self.body.len() as f64 * 8.0 / secs.max(1e-9) / 1e6
                        );
                        Some(Conn::Closing)
                    } else {
                        Some(Conn::Sending { sent: off, start })
                    }
                }
                Conn::Closing => None,
            };
            if let Some(c) = next {
                self.socks[i].1 = c;
            }
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let size = args.size as usize;
    let buf = args.buffer_kib as usize * 1024;
    let (port, n_socks, requests) = (args.tcp_port, args.sockets, args.requests);
    let mut done = (0, 0);
    let outcome = common::serve(
        "smol-http",
        &args.net,
        &format!("HTTP on port {port}, {size}-byte body, {n_socks} connection(s) at once"),
        |sockets| {
            let socks = (0..n_socks)
                .map(|_| {
                    let mut s = tcp::Socket::new(
                        tcp::SocketBuffer::new(vec![0; buf]),
                        tcp::SocketBuffer::new(vec![0; buf]),
                    );
                    s.listen(port).expect("a fresh socket listens");
                    (sockets.add(s), Conn::Request(Vec::new()))
                })
                .collect();
            Server {
                socks,
                port,
                head: format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
                )
                .into_bytes(),
                body: pollnic_tools::smol::http_body(size),
                done: 0,
                refused: 0,
            }
        },
        |srv, sockets, _| {
            srv.step(sockets);
            done = (srv.done, srv.refused);
            // Stop once the last response is sent and acknowledged, and the
            // peer has closed too (TIME-WAIT).
            requests > 0
                && srv.done >= requests
                && srv.socks.iter().all(|(h, _)| {
                    matches!(
                        sockets.get::<tcp::Socket>(*h).state(),
                        tcp::State::Listen | tcp::State::TimeWait | tcp::State::Closed
                    )
                })
        },
    )?;
    println!(
        "smol-http: http: {} responses of {size} bytes, {} requests refused",
        done.0, done.1
    );
    common::print_summary("smol-http", &outcome)?;
    Ok(())
}
