//! A TCP stream between two smoltcp stacks, each on a pollnic queue of a
//! software 82576 (or of the software virtio-net device), for counting
//! what the stacks and the driver execute
//! with the checksums left to the NIC (TX insertion,
//! `QueueDevice::set_checksum_offload`, and RX status,
//! `DeviceConfig::with_rx_checksum`, as the `smol-*` examples do) and with
//! every checksum in software. The clock is simulated,
//! so a run does the same work whatever the host's load:
//!
//! ```text
//! cargo build --release -p pollnic-tests --example smol_cost
//! valgrind --tool=callgrind --toggle-collect='*QueueDevice*poll*' \
//!     --toggle-collect='*SoftBar*Regs*write32*' --toggle-collect='*SoftBar*Regs*read32*' \
//!     target/release/examples/smol_cost 16 offload      # or: software
//! ```
//!
//! The first pattern turns counting on inside both stacks' `poll`; the
//! other two turn it off again while the model handles a register access
//! (its own checksum insertion is the NIC's work, not the host's). RX
//! write-backs are made by the model outside `poll`, in the wire step.
//! Divide the total Ir by the KiB printed.
//!
//! A third argument, `virtio` (split virtqueues) or `virtio-packed`, puts
//! both stacks on the software virtio-net device instead: checksums then
//! go through the `virtio_net_hdr` (`VIRTIO_NET_F_CSUM` on transmit,
//! `GUEST_CSUM`'s `DATA_VALID` on receive). The device's work is its
//! handling of the doorbell write, left out with
//! `--toggle-collect='*virtio*State*write*'` in place of the two `SoftBar`
//! patterns:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='*QueueDevice*poll*' \
//!     --toggle-collect='*virtio*State*write*' \
//!     target/release/examples/smol_cost 16 offload virtio
//! ```

use pollnic::smoltcp::QueueDevice;
use pollnic::{Device, DeviceConfig};
use pollnic_model::igb::{ModelConfig, RxOutcome, Soft82576};
use pollnic_model::virtio::{feature, SoftVirtioNet, VirtioModelConfig, VirtioRx};
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

const IP_A: IpAddress = IpAddress::v4(10, 0, 0, 1);
const IP_B: IpAddress = IpAddress::v4(10, 0, 0, 2);

/// The software NIC under one stack.
enum Nic {
    Igb(Soft82576),
    Virtio(SoftVirtioNet),
}

impl Nic {
    fn take_tx_frames(&self) -> Vec<Vec<u8>> {
        match self {
            Nic::Igb(m) => m.take_tx_frames(),
            Nic::Virtio(m) => m.take_tx_frames(),
        }
    }
    fn receive(&self, f: &[u8]) -> bool {
        match self {
            Nic::Igb(m) => matches!(m.receive(f), RxOutcome::Delivered { .. }),
            Nic::Virtio(m) => matches!(m.receive(f), VirtioRx::Delivered { .. }),
        }
    }
    fn violations(&self) -> Vec<String> {
        match self {
            Nic::Igb(m) => m.violations(),
            Nic::Virtio(m) => m.violations(),
        }
    }
}

fn open(last: u8, offload: bool, nic: &str) -> (Nic, Device) {
    let mac = [0x52, 0x54, 0x00, 0x12, 0x34, last];
    let cfg = DeviceConfig::default()
        .with_rx_ring_size(512)
        .with_tx_ring_size(512)
        .with_mempool_size(4096)
        .with_link_timeout(std::time::Duration::from_secs(2))
        .with_rx_checksum(offload);
    match nic {
        "igb" => {
            let m = Soft82576::new(ModelConfig {
                mac,
                ..Default::default()
            });
            let dev = m.open(&cfg).expect("bring-up on the model");
            (Nic::Igb(m), dev)
        }
        _ => {
            let packed = if nic == "virtio-packed" {
                feature::RING_PACKED
            } else {
                0
            };
            let m = SoftVirtioNet::new(VirtioModelConfig {
                mac,
                features: feature::ALL | packed,
                ..Default::default()
            });
            let dev = m.open(&cfg).expect("bring-up on the virtio-net model");
            (Nic::Virtio(m), dev)
        }
    }
}

fn iface(dev: &mut QueueDevice<'_>, mac: [u8; 6], ip: IpAddress) -> Interface {
    let conf = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
    let mut iface = Interface::new(conf, dev, Instant::ZERO);
    iface.update_ip_addrs(|a| a.push(IpCidr::new(ip, 24)).unwrap());
    iface
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let offload = match args.next().as_deref() {
        None | Some("offload") => true,
        Some("software") => false,
        Some(other) => {
            eprintln!("smol_cost: {other:?}: say offload or software");
            std::process::exit(2);
        }
    };
    let nic = args.next().unwrap_or_else(|| "igb".into());
    if !["igb", "virtio", "virtio-packed"].contains(&nic.as_str()) {
        eprintln!("smol_cost: {nic:?}: say igb, virtio or virtio-packed");
        std::process::exit(2);
    }
    let len = mib << 20;
    let ((ma, mut da), (mb, mut db)) = (open(1, offload, &nic), open(2, offload, &nic));
    let (mac_a, mac_b) = (da.mac(), db.mac());
    let mut pa = QueueDevice::new(&mut da, 0);
    let mut pb = QueueDevice::new(&mut db, 0);
    pa.set_checksum_offload(offload);
    pb.set_checksum_offload(offload);
    let mut ia = iface(&mut pa, mac_a, IP_A);
    let mut ib = iface(&mut pb, mac_b, IP_B);
    let (mut sa, mut sb) = (SocketSet::new(vec![]), SocketSet::new(vec![]));
    let buf = || tcp::SocketBuffer::new(vec![0; 256 << 10]);
    let server = sa.add(tcp::Socket::new(buf(), buf()));
    sa.get_mut::<tcp::Socket>(server).listen(80).unwrap();
    let client = sb.add(tcp::Socket::new(buf(), buf()));
    sb.get_mut::<tcp::Socket>(client)
        .connect(ib.context(), (IP_A, 80), 49152)
        .unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let (mut off, mut got, mut frames) = (0, 0usize, 0usize);
    let mut now = Instant::ZERO;
    let mut same = true;
    for _ in 0..10_000_000 {
        now += Duration::from_micros(100);
        pa.poll(&mut ia, &mut sa, now);
        pb.poll(&mut ib, &mut sb, now);
        for (from, to) in [(&ma, &mb), (&mb, &ma)] {
            for f in from.take_tx_frames() {
                assert!(to.receive(&f), "a {}-byte frame was not delivered", f.len());
                frames += 1;
            }
        }
        let s = sa.get_mut::<tcp::Socket>(server);
        if s.may_send() && off < len {
            off += s.send_slice(&data[off..]).unwrap();
            if off == len {
                s.close();
            }
        }
        let c = sb.get_mut::<tcp::Socket>(client);
        while c.can_recv() {
            c.recv(|b| {
                same &= b == &data[got..got + b.len()];
                got += b.len();
                (b.len(), ())
            })
            .unwrap();
        }
        if got == len && !c.may_recv() {
            break;
        }
    }
    assert!(
        got == len && same,
        "got {got} of {len} bytes, or they differ"
    );
    let (a, b) = (pa.stats(), pb.stats());
    drop((pa, pb));
    assert!(ma.violations().is_empty() && mb.violations().is_empty());
    println!(
        "smol_cost: {} KiB moved on {nic}, checksums {}, {frames} frames on the wire, sender tx_frames {} receiver tx_frames {} rx_bad_checksum {}",
        len >> 10,
        if offload { "offloaded" } else { "in software" },
        a.tx_frames,
        b.tx_frames,
        a.rx_bad_checksum + b.rx_bad_checksum
    );
}
