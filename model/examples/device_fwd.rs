//! Forward a fixed number of packets through a whole `Device` (open, then
//! `Queue::rx_burst` and `Queue::tx_burst`) on a software model, for
//! instruction counting with callgrind:
//!
//! ```text
//! cargo build --release -p pollnic-model --example device_fwd
//! valgrind --tool=callgrind --toggle-collect='*forward_burst*' \
//!     target/release/examples/device_fwd virtio 200000 32
//! ```
//!
//! The first argument picks the model: `virtio` (the strict virtio-net
//! device, `pollnic_model::virtio`), `virtio-packed` (the same device
//! offering packed virtqueues, which the driver then takes),
//! `virtio-inorder` and `virtio-packed-inorder` (the same two offering
//! `VIRTIO_F_IN_ORDER` too: the model then completes each transmit kick's
//! chains with one used entry) or `igb` (the 82576). Unlike
//! `model_fwd`, which drives the rings alone, this counts everything a
//! program's burst calls run: `Queue`'s forwarding to the rings, the
//! virtqueue or descriptor ring code, the refill, the doorbell or kick, and
//! the model's handling of that doorbell (a lock and a ring walk, where a
//! real device does it in silicon). So its figure is not the driver's
//! alone; it is for comparing two commits of the driver on the same model.
//! Frames are put on the wire outside `forward_burst`, and sent frames are
//! taken off it outside too.

use pollnic::{Device, DeviceConfig, Packet};
use pollnic_model::igb::{ModelConfig, Soft82576};
use pollnic_model::virtio::{SoftVirtioNet, VirtioModelConfig};
use std::time::Duration;

/// The model a run forwards on, kept alive beside its `Device`.
enum Model {
    Virtio(SoftVirtioNet),
    Igb(Soft82576),
}

impl Model {
    fn receive(&self, frame: &[u8]) -> bool {
        match self {
            Model::Virtio(m) => matches!(
                m.receive(frame),
                pollnic_model::virtio::VirtioRx::Delivered { .. }
            ),
            Model::Igb(m) => matches!(
                m.receive(frame),
                pollnic_model::igb::RxOutcome::Delivered { .. }
            ),
        }
    }

    fn take_tx_frames(&self) -> usize {
        match self {
            Model::Virtio(m) => m.take_tx_frames().len(),
            Model::Igb(m) => m.take_tx_frames().len(),
        }
    }
}

/// One burst: receive up to `burst` frames on queue 0 and send them back
/// out of it (what l2fwd does per burst). Returns the frames received.
#[inline(never)]
fn forward_burst(dev: &mut Device, bufs: &mut Vec<Packet>, burst: usize) -> usize {
    let q = dev.queue(0);
    let n = q.rx_burst(bufs, burst);
    let mut sent = 0;
    while sent < n {
        let k = q.tx_burst(bufs);
        if k == 0 {
            break;
        }
        sent += k;
    }
    bufs.clear();
    n
}

fn usage() -> ! {
    eprintln!(
        "usage: device_fwd virtio|virtio-packed|virtio-inorder|virtio-packed-inorder|igb \
         [packets] [burst]"
    );
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| usage());
    let packets: u64 = args
        .next()
        .map(|a| a.parse().unwrap_or_else(|_| usage()))
        .unwrap_or(200_000);
    let burst: usize = args
        .next()
        .map(|a| a.parse().unwrap_or_else(|_| usage()))
        .unwrap_or(32)
        .clamp(1, 64);
    let cfg = DeviceConfig::default()
        .with_rx_ring_size(256)
        .with_tx_ring_size(256)
        .with_mempool_size(2048)
        .with_link_timeout(Duration::from_secs(2));
    let (model, mut dev) = match which.as_str() {
        "virtio" | "virtio-packed" | "virtio-inorder" | "virtio-packed-inorder" => {
            let mut mc = VirtioModelConfig::default();
            if which.starts_with("virtio-packed") {
                mc.features |= pollnic_model::virtio::feature::RING_PACKED;
            }
            if which.ends_with("-inorder") {
                mc.features |= pollnic_model::virtio::feature::IN_ORDER;
            }
            let m = SoftVirtioNet::new(mc);
            let dev = m.open(&cfg).expect("open on the virtio-net model");
            (Model::Virtio(m), dev)
        }
        "igb" => {
            let m = Soft82576::new(ModelConfig::default());
            let dev = m.open(&cfg).expect("open on the 82576 model");
            (Model::Igb(m), dev)
        }
        _ => usage(),
    };
    // 60 bytes: to the port's MAC, from a locally administered one, IPv4's
    // EtherType, zeros after.
    let mut frame = [0u8; 60];
    frame[..6].copy_from_slice(&dev.mac());
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let mut bufs = Vec::with_capacity(64);
    let (mut forwarded, mut wire) = (0u64, 0usize);
    while forwarded < packets {
        for _ in 0..burst {
            assert!(model.receive(&frame), "the model refused a frame");
        }
        let n = forward_burst(&mut dev, &mut bufs, burst);
        assert_eq!(n, burst, "a burst received fewer frames than were offered");
        forwarded += n as u64;
        wire += model.take_tx_frames();
    }
    assert_eq!(
        wire as u64, forwarded,
        "every frame forwarded reached the wire"
    );
    println!("{which}: forwarded {forwarded} packets in bursts of {burst}");
}
