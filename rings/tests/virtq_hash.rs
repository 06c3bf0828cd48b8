//! The 20-byte `virtio_net_hdr_v1_hash` (`VIRTIO_NET_F_HASH_REPORT`): the
//! header descriptors of both directions carry its length, a received
//! frame's `Packet::rss_hash` is the header's `hash_value` when
//! `hash_report` names a type and 0 when it says none, and the frame length
//! is the used length minus 20.

use pollnic_rings::virtq::device::DeviceView;
use pollnic_rings::{Doorbell, IdentityMapper, Mempool, NetHdr, PageSize, VirtqRx, VirtqTx};
use std::sync::Arc;

struct Nop;
impl Doorbell for Nop {
    fn ring(&mut self, _: u16) {}
}

#[test]
fn the_hash_header_is_20_bytes_and_its_hash_reaches_the_packet() {
    assert_eq!((NetHdr::V1.bytes(), NetHdr::V1Hash.bytes()), (12, 20));
    let pool = Mempool::new(64, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    let mut rx = VirtqRx::new(16, PageSize::Small4K, Arc::new(IdentityMapper), &pool, Nop).unwrap();
    rx.set_net_hdr(NetHdr::V1Hash);
    rx.start();
    // SAFETY: identity-mapped; the queue lives until the end of the test.
    let dev = unsafe { DeviceView::new(rx.addrs()) };
    // Two frames: chain 0 with a TCPv4 hash (report 2), chain 2 with none.
    for (slot, report, value) in [(0u16, 2u16, 0xdead_beefu32), (1, 0, 0x1234_5678)] {
        let id = dev.avail_entry(slot);
        let (hdr, hlen, _, next) = dev.desc(id);
        assert_eq!((hlen, next), (20, id + 1));
        // SAFETY: identity-mapped header slot of 20 writable bytes.
        unsafe {
            let h = hdr as usize as *mut u8;
            h.add(12).cast::<u32>().write_unaligned(value.to_le());
            h.add(16).cast::<u16>().write_unaligned(report.to_le());
        }
        dev.put_used(slot, id as u32, 20 + 60);
    }
    dev.set_used_idx(2);
    let mut got = Vec::new();
    assert_eq!(rx.rx_burst(&mut got, 8), 2);
    assert_eq!((got[0].len(), got[0].rss_hash()), (60, 0xdead_beef));
    assert_eq!((got[1].len(), got[1].rss_hash()), (60, 0));
    assert_eq!(rx.stats().rx_errors, 0);

    let mut tx = VirtqTx::new(16, PageSize::Small4K, Arc::new(IdentityMapper), Nop).unwrap();
    tx.set_net_hdr(NetHdr::V1Hash);
    // SAFETY: as above.
    let tdev = unsafe { DeviceView::new(tx.addrs()) };
    for k in 0..8 {
        let (_, hlen, flags, next) = tdev.desc(2 * k);
        assert_eq!((hlen, flags, next), (20, 1, 2 * k + 1));
    }
}
