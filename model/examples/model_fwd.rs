//! Forward a fixed number of packets through RX+TX on the software device
//! model, for instruction counting:
//!
//! ```text
//! cargo build --release -p pollnic-rings --example model_fwd
//! valgrind --tool=callgrind --toggle-collect='*forward_burst*' \
//!     target/release/examples/model_fwd 1000000 32 [vector|scalar] [offload]
//! ```
//!
//! Callgrind then counts only the driver's side (`FwdRig::forward_burst`):
//! divide its total Ir by the packets printed here. The third argument
//! picks the rings' burst loops (default: what this CPU runs, see
//! `DataPath::detect`). A fourth argument, `offload`, makes the RX ring keep
//! each frame's checksum status and VLAN tag (`RxRing::set_offload_status`).

use pollnic_rings::DataPath;

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
    let path = match args.next().as_deref() {
        None => DataPath::detect(),
        Some("vector") if DataPath::vector_supported() => DataPath::Vector,
        Some("vector") => {
            eprintln!("model_fwd: this CPU does not run the vector path (x86-64 SSE2); use scalar");
            std::process::exit(2);
        }
        Some("scalar") => DataPath::Scalar,
        Some(other) => {
            eprintln!("model_fwd: unknown data path {other:?}: use vector or scalar");
            std::process::exit(2);
        }
    };
    let offload = match args.next().as_deref() {
        None => false,
        Some("offload") => true,
        Some(other) => {
            eprintln!("model_fwd: unknown fourth argument {other:?}: use offload");
            std::process::exit(2);
        }
    };
    let mut rig = pollnic_model::fwd::FwdRig::new(512, 60);
    rig.set_data_path(path);
    rig.parts()
        .0
        .set_offload_status(offload, pollnic_hw::offload::IGB_L4E_BIT);
    let per_round = rig.bursts_per_round(batch);
    let mut done = 0u64;
    while done < packets {
        rig.deliver(per_round * batch);
        for _ in 0..per_round {
            done += rig.forward_burst(batch) as u64;
        }
        rig.complete_tx();
    }
    println!(
        "forwarded {done} packets in bursts of {batch} ({} path{})",
        path.name(),
        if offload { ", RX offload status" } else { "" }
    );
}
