//! An ICMP and UDP echo responder on smoltcp over a pollnic port: the
//! stack answers ping (ICMP echo) itself, and a UDP socket sends every
//! datagram back to where it came from (the echo service, RFC 862).
//!
//! ```text
//! smol-echo --port 0000:03:00.1 --ip 10.0.0.2/24                 # until Ctrl-C
//! smol-echo --port 0000:03:00.1 --ip 10.0.0.2/24 --udp-port 7 --seconds 60
//! ```
//!
//! Prints `smol-echo: up: ...` once the link is up, and at the end the
//! datagrams echoed, the device's counters and the mempool's occupancy
//! after the port was closed.

#[path = "common.rs"]
mod common;

use clap::Parser;
use smoltcp::socket::udp;

#[derive(Parser, Debug)]
#[command(about = "ICMP and UDP echo responder: smoltcp on a pollnic port")]
struct Args {
    #[command(flatten)]
    net: common::NetArgs,
    /// UDP port to echo on. [range: 1..=65535]
    #[arg(value_parser = clap::value_parser!(u16).range(1..), long, default_value_t = 7)]
    udp_port: u16,
    /// Stop after echoing this many datagrams (0 = no limit). [range: 0..=1000000000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=1_000_000_000), long, default_value_t = 0)]
    count: u64,
}

#[derive(Default)]
struct Echoed {
    datagrams: u64,
    bytes: u64,
    /// Datagrams that could not be queued back (the TX buffer was full).
    dropped: u64,
}

fn main() {
    let result = run(pollnic_tools::args::parse("smol-echo"));
    pollnic_tools::signal::exit_if_panicked("smol-echo");
    if let Err(e) = result {
        pollnic_tools::args::exit_with("smol-echo", &*e);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let port = args.udp_port;
    let mut echoed = Echoed::default();
    let outcome = common::serve(
        "smol-echo",
        &args.net,
        &format!("ICMP echo and UDP echo on port {port}"),
        |sockets| {
            let buf =
                || udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 256], vec![0; 1 << 18]);
            let mut s = udp::Socket::new(buf(), buf());
            s.bind(port).expect("a fresh socket binds");
            sockets.add(s)
        },
        |h, sockets, _| {
            let s = sockets.get_mut::<udp::Socket>(*h);
            let mut scratch = [0u8; 9216];
            while let Ok((n, meta)) = s.recv_slice(&mut scratch) {
                if s.send_slice(&scratch[..n], meta.endpoint).is_ok() {
                    echoed.datagrams += 1;
                    echoed.bytes += n as u64;
                } else {
                    echoed.dropped += 1;
                }
            }
            args.count > 0 && echoed.datagrams >= args.count
        },
    )?;
    println!(
        "smol-echo: udp: {} datagrams ({} bytes) echoed, {} not queued back",
        echoed.datagrams, echoed.bytes, echoed.dropped
    );
    common::print_summary("smol-echo", &outcome)?;
    Ok(())
}
