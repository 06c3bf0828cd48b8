//! Forward a fixed number of packets through RX+TX on the software device
//! model, for instruction counting:
//!
//! ```text
//! cargo build --release -p pollnic-rings --example model_fwd
//! valgrind --tool=callgrind --toggle-collect='*forward_burst*' \
//!     target/release/examples/model_fwd 1000000 32
//! ```
//!
//! Callgrind then counts only the driver's side (`FwdRig::forward_burst`):
//! divide its total Ir by the packets printed here.

fn main() {
    let mut args = std::env::args().skip(1);
    let packets: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let batch: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(32)
        .clamp(1, 256);
    let mut rig = pollnic_rings::fwd::FwdRig::new(512, 60);
    let per_round = rig.bursts_per_round(batch);
    let mut done = 0u64;
    while done < packets {
        rig.deliver(per_round * batch);
        for _ in 0..per_round {
            done += rig.forward_burst(batch) as u64;
        }
        rig.complete_tx();
    }
    println!("forwarded {done} packets in bursts of {batch}");
}
