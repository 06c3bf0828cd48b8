//! The model's rules, each broken once by a hand-played driver: every MUST
//! the model checks is seen as a violation naming its clause (and a
//! correct sequence gives none).

use super::*;

/// A driver played by hand: the model's state, and 64 KiB of DMA memory
/// mapped in its IOMMU. The memory is only ever touched through the
/// model's translation (`dma_write`), as the device would.
struct Rig {
    s: State,
    iova: u64,
    _mem: Vec<u8>,
}

const DESC: u64 = 0x0000;
const AVAIL: u64 = 0x1000;
const USED: u64 = 0x2000;
const BUFS: u64 = 0x4000;

impl Rig {
    fn new(cfg: VirtioModelConfig) -> Rig {
        let mut mem = vec![0u8; 64 << 10];
        let mut s = State::new(cfg);
        let iova = s.iommu.add(mem.as_mut_ptr(), mem.len());
        Rig { s, iova, _mem: mem }
    }
    fn w8(&mut self, o: u32, v: u8) {
        self.s.write(o, 1, u32::from(v))
    }
    fn w16(&mut self, o: u32, v: u16) {
        self.s.write(o, 2, u32::from(v))
    }
    fn w32(&mut self, o: u32, v: u32) {
        self.s.write(o, 4, v)
    }
    fn r8(&mut self, o: u32) -> u8 {
        self.s.read(o, 1) as u8
    }
    fn mem(&self, off: u64, bytes: &[u8]) {
        assert!(self.s.iommu.dma_write(self.iova + off, bytes));
    }
    fn mem_u16(&self, off: u64) -> u16 {
        let mut b = [0u8; 2];
        assert!(self.s.iommu.dma_read(self.iova + off, &mut b));
        u16::from_le_bytes(b)
    }
    /// Reset, ACKNOWLEDGE, DRIVER, `features`, FEATURES_OK, and read it back
    /// when `read_back`.
    fn negotiate(&mut self, features: u64, read_back: bool) {
        self.w8(0x14, 0);
        self.w8(0x14, status::ACKNOWLEDGE);
        self.w8(0x14, status::ACKNOWLEDGE | status::DRIVER);
        self.w32(0x08, 0);
        self.w32(0x0c, features as u32);
        self.w32(0x08, 1);
        self.w32(0x0c, (features >> 32) as u32);
        self.w8(
            0x14,
            status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK,
        );
        if read_back {
            assert_ne!(self.r8(0x14) & status::FEATURES_OK, 0);
        }
    }
    /// Queue `q` with 8 entries at the rig's rings, enabled.
    fn queue(&mut self, q: u16) {
        self.w16(0x16, q);
        self.w16(0x18, 8);
        for (o, a) in [(0x20, DESC), (0x28, AVAIL), (0x30, USED)] {
            let a = self.iova + a;
            self.w32(o, a as u32);
            self.w32(o + 4, (a >> 32) as u32);
        }
        self.w16(0x1c, 1);
    }
    fn driver_ok(&mut self) {
        let s = self.r8(0x14);
        self.w8(0x14, s | status::DRIVER_OK);
    }
    /// Post one receive chain (descriptor 0, `len` bytes, device-writable)
    /// on the rig's rings.
    fn post_rx(&mut self, len: u32) {
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&(self.iova + BUFS).to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&2u16.to_le_bytes()); // WRITE
        self.mem(DESC, &d);
        self.mem(AVAIL + 4, &0u16.to_le_bytes());
        self.mem(AVAIL + 2, &1u16.to_le_bytes());
    }
    fn violations(&self) -> String {
        self.s.violations.join("\n")
    }
}

const BASIC: u64 = feature::VERSION_1 | feature::ACCESS_PLATFORM | feature::EVENT_IDX;

fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x52, 0x54, 0, 0x12, 0x34, 0x56]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f
}

#[test]
fn the_specs_sequence_leaves_no_violation_and_a_frame_arrives() {
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, true);
    r.queue(0);
    r.driver_ok();
    r.post_rx(2048);
    assert_eq!(
        r.s.receive(&frame(60)),
        VirtioRx::Delivered { queue: 0, hash: 0 }
    );
    assert_eq!(r.mem_u16(USED + 2), 1, "used.idx published");
    assert!(r.s.violations.is_empty(), "{}", r.violations());
}

#[test]
fn a_queue_field_written_after_queue_enable_is_a_violation() {
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, true);
    r.queue(0);
    r.w16(0x1a, 0); // queue_msix_vector after enable
    assert!(r.violations().contains("§4.1.4.3.2"), "{}", r.violations());
    assert_eq!(r.s.queues[0].vector, NO_VECTOR, "the write was not taken");
}

#[test]
fn zero_written_to_queue_enable_is_a_violation() {
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, true);
    r.queue(0);
    r.w16(0x1c, 0);
    assert!(
        r.violations().contains("MUST NOT write a 0"),
        "{}",
        r.violations()
    );
}

#[test]
fn driver_ok_without_reading_features_ok_back_is_a_violation() {
    // A driver that writes the bits blind, never reading FEATURES_OK back.
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, false);
    r.w8(
        0x14,
        status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK | status::DRIVER_OK,
    );
    assert!(
        r.violations().contains("§3.1.1 step 6"),
        "{}",
        r.violations()
    );
}

#[test]
fn a_notification_before_driver_ok_is_a_violation() {
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, true);
    r.queue(1);
    r.w16(NOTIFY + NOTIFY_MULT, 1);
    assert!(
        r.violations().contains("before setting DRIVER_OK"),
        "{}",
        r.violations()
    );
}

#[test]
fn a_feature_the_device_did_not_offer_is_a_violation() {
    let mut r = Rig::new(VirtioModelConfig {
        features: BASIC,
        ..Default::default()
    });
    r.negotiate(BASIC | feature::NET_MQ, true);
    assert!(r.violations().contains("§2.2.1"), "{}", r.violations());
}

#[test]
fn a_field_accessed_at_the_wrong_width_is_a_violation() {
    let mut r = Rig::new(VirtioModelConfig::default());
    let _ = r.s.read(0x14, 4); // device_status is one byte
    assert!(r.violations().contains("§4.1.3.1"), "{}", r.violations());
}

#[test]
fn receive_buffers_smaller_than_a_frame_of_the_mtu_are_a_violation() {
    let mut r = Rig::new(VirtioModelConfig {
        mtu: 9000,
        ..Default::default()
    });
    r.negotiate(BASIC | feature::NET_MTU, true);
    r.queue(0);
    r.driver_ok();
    r.post_rx(2048);
    // The frame fits, but the buffer could not take one of the MTU.
    assert!(matches!(
        r.s.receive(&frame(60)),
        VirtioRx::Delivered { .. }
    ));
    assert!(r.violations().contains("§5.1.4.2"), "{}", r.violations());
}

#[test]
fn a_ring_outside_the_mapping_is_refused_at_enable() {
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, true);
    r.w16(0x16, 0);
    r.w16(0x18, 8);
    r.w32(0x20, 0x1000); // not mapped
    r.w32(0x24, 0);
    r.w16(0x1c, 1);
    assert!(r.violations().contains("not mapped"), "{}", r.violations());
    assert!(!r.s.queues[0].enabled);
}

#[test]
fn a_looping_chain_is_refused_not_followed() {
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, true);
    r.queue(0);
    r.driver_ok();
    let mut d = [0u8; 16];
    d[..8].copy_from_slice(&(r.iova + BUFS).to_le_bytes());
    d[8..12].copy_from_slice(&64u32.to_le_bytes());
    d[12..14].copy_from_slice(&3u16.to_le_bytes()); // NEXT | WRITE
    d[14..16].copy_from_slice(&0u16.to_le_bytes()); // next: itself
    r.mem(DESC, &d);
    r.mem(AVAIL + 2, &1u16.to_le_bytes());
    assert_eq!(r.s.receive(&frame(60)), VirtioRx::Fault(0));
    assert!(r.violations().contains("loop"), "{}", r.violations());
}

// ---- packed virtqueues (virtio 1.2 §2.8) -------------------------------------

const PACKED: u64 = BASIC | feature::RING_PACKED;
/// `VIRTQ_DESC_F_AVAIL`, `VIRTQ_DESC_F_USED`, `NEXT`, `WRITE`.
const P_AVAIL: u16 = 1 << 7;
const P_USED: u16 = 1 << 15;
const P_NEXT: u16 = 1;
const P_WRITE: u16 = 2;

impl Rig {
    fn packed_rig() -> Rig {
        Rig::new(VirtioModelConfig {
            features: feature::ALL | feature::RING_PACKED,
            ..Default::default()
        })
    }
    /// Queue `q` with `size` entries, packed: ring at DESC, driver event
    /// suppression at AVAIL, device's at USED.
    fn packed_queue(&mut self, q: u16, size: u16) {
        self.w16(0x16, q);
        self.w16(0x18, size);
        for (o, a) in [(0x20, DESC), (0x28, AVAIL), (0x30, USED)] {
            let a = self.iova + a;
            self.w32(o, a as u32);
            self.w32(o + 4, (a >> 32) as u32);
        }
        self.w16(0x1c, 1);
    }
    /// Write packed descriptor `pos` (buffer at BUFS + 4 KiB × pos).
    fn pdesc(&self, pos: u16, len: u32, id: u16, flags: u16) {
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&(self.iova + BUFS + 0x1000 * u64::from(pos)).to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&id.to_le_bytes());
        d[14..16].copy_from_slice(&flags.to_le_bytes());
        self.mem(DESC + 16 * u64::from(pos), &d);
    }
    /// Post a receive chain at `pos` (header 12 bytes, then 2048, buffer
    /// id `id`, wrap counter 1), the first descriptor's flags last.
    fn post_packed_rx(&self, pos: u16, id: u16) {
        self.pdesc(pos + 1, 2048, id, P_WRITE | P_AVAIL);
        self.pdesc(pos, 12, id, P_NEXT | P_WRITE | P_AVAIL);
    }
}

#[test]
fn a_packed_sequence_leaves_no_violation_and_the_used_descriptor_is_right() {
    let mut r = Rig::packed_rig();
    r.negotiate(PACKED, true);
    // No power of two: fine on a packed ring.
    r.packed_queue(0, 7);
    r.driver_ok();
    r.post_packed_rx(0, 3);
    assert_eq!(
        r.s.receive(&frame(60)),
        VirtioRx::Delivered { queue: 0, hash: 0 }
    );
    // One used descriptor at the chain's first slot: id 3, 12 + 60 bytes,
    // AVAIL = USED = 1.
    assert_eq!(r.mem_u16(DESC + 12), 3);
    assert_eq!(r.mem_u16(DESC + 8), 72);
    assert_eq!(r.mem_u16(DESC + 14), P_AVAIL | P_USED);
    // With EVENT_IDX the device asks for a kick at its next descriptor.
    assert_eq!(
        r.mem_u16(USED),
        2 | 1 << 15,
        "off_wrap: descriptor 2, wrap 1"
    );
    assert_eq!(r.mem_u16(USED + 2), 2, "RING_EVENT_FLAGS_DESC");
    assert!(r.s.violations.is_empty(), "{}", r.violations());
}

#[test]
fn a_packed_chain_whose_first_descriptor_is_available_before_the_rest_is_a_violation() {
    let mut r = Rig::packed_rig();
    r.negotiate(PACKED, true);
    r.packed_queue(0, 8);
    r.driver_ok();
    // The head says available and NEXT; the second descriptor is still 0.
    r.pdesc(0, 12, 0, P_NEXT | P_WRITE | P_AVAIL);
    assert_eq!(r.s.receive(&frame(60)), VirtioRx::Fault(0));
    assert!(
        r.violations()
            .contains("MUST NOT make the first descriptor in the list available"),
        "{}",
        r.violations()
    );
}

#[test]
fn a_packed_buffer_id_made_available_twice_is_a_violation() {
    let mut r = Rig::packed_rig();
    r.negotiate(PACKED, true);
    r.packed_queue(1, 8);
    r.driver_ok();
    // Two TX chains (a readable header, then the frame; wrap counter 1)
    // with the same buffer id 5. The device takes the first and holds it
    // (taken by hand, not completed): the second reuses an id it holds.
    for pos in [0u16, 2] {
        r.pdesc(pos + 1, 60, 5, P_AVAIL);
        r.pdesc(pos, 12, 5, P_NEXT | P_AVAIL);
    }
    let vq = &mut r.s.queues[1];
    assert!(matches!(vq.take(&r.s.iommu), Take::Chain(_)));
    match vq.take(&r.s.iommu) {
        Take::Broken(why) => assert!(why.contains("buffer id 5"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_packed_ring_with_misaligned_event_suppression_is_refused_at_enable() {
    let mut r = Rig::packed_rig();
    r.negotiate(PACKED, true);
    r.w16(0x16, 0);
    r.w16(0x18, 8);
    for (o, a) in [(0x20, DESC), (0x28, AVAIL + 2), (0x30, USED)] {
        let a = r.iova + a;
        r.w32(o, a as u32);
        r.w32(o + 4, (a >> 32) as u32);
    }
    r.w16(0x1c, 1);
    assert!(r.violations().contains("§2.8.10.1"), "{}", r.violations());
    assert!(!r.s.queues[0].enabled);
}

#[test]
fn a_split_queue_size_that_is_no_power_of_two_is_still_a_violation() {
    let mut r = Rig::new(VirtioModelConfig::default());
    r.negotiate(BASIC, true);
    r.w16(0x16, 0);
    r.w16(0x18, 7);
    assert!(r.violations().contains("power of 2"), "{}", r.violations());
}

/// A TCP/IPv4 frame ready for segmentation as §5.1.6.2 asks (its own
/// total length, the TCP field seeded with the pseudo-header's sum over
/// the whole TCP length) with `payload` bytes, and its header: NEEDS_CSUM,
/// TCPV4, `hdr_len` 54, `gso_size` 1000, the checksum at 34 + 16.
fn gso_frame(payload: usize) -> (Vec<u8>, Vec<u8>) {
    let mut f = vec![0u8; 54 + payload];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
    f[14 + 9] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34 + 12] = 5 << 4;
    f[34 + 13] = 0x18; // ACK, PSH
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let seed = fold(sum16(&f[26..34]) + 6 + (20 + payload) as u64);
    f[34 + 16..34 + 18].copy_from_slice(&seed.to_be_bytes());
    let mut h = vec![0u8; 12];
    h[0] = NEEDS_CSUM;
    h[1] = GSO_TCPV4;
    h[2..4].copy_from_slice(&54u16.to_le_bytes());
    h[4..6].copy_from_slice(&1000u16.to_le_bytes());
    h[6..8].copy_from_slice(&34u16.to_le_bytes());
    h[8..10].copy_from_slice(&16u16.to_le_bytes());
    (h, f)
}

#[test]
fn a_segmentation_request_is_cut_and_each_broken_rule_is_a_violation() {
    let tso = feature::NET_CSUM | feature::NET_HOST_TSO4 | feature::NET_HOST_TSO6;
    let (h, f) = gso_frame(2500);
    let segs = gso_segments(&h, &f, tso).expect("a correct request");
    assert_eq!(
        segs.iter().map(Vec::len).collect::<Vec<_>>(),
        [1054, 1054, 554]
    );
    for (k, s) in segs.iter().enumerate() {
        assert_eq!(!fold(sum16(&s[14..34])), 0, "segment {k}: IPv4 checksum");
        let tcp_len = s.len() - 34;
        assert_eq!(
            !fold(sum16(&s[26..34]) + 6 + tcp_len as u64 + sum16(&s[34..])),
            0,
            "segment {k}: TCP checksum"
        );
        assert_eq!(
            s[34 + 13] & 0x08 != 0,
            k == 2,
            "segment {k}: PSH on the last only"
        );
    }
    type Break = fn(&mut Vec<u8>, &mut Vec<u8>);
    let cases: [(&str, u64, Break); 10] = [
        ("HOST_TSO4 was not negotiated", feature::NET_CSUM, |_, _| {}),
        ("GSO_ECN", tso, |h, _| h[1] |= GSO_ECN),
        ("TCPV4 (1) and TCPV6 (4) only", tso, |h, _| h[1] = 3),
        ("MUST also set NEEDS_CSUM", tso, |h, _| h[0] = 0),
        ("MUST also set NEEDS_CSUM", tso, |h, _| h[4..6].fill(0)),
        ("EtherType 0x0800", tso, |h, _| h[1] = GSO_TCPV6),
        ("the TCP checksum is at 34 + 16", tso, |h, _| h[8] = 6),
        ("hdr_len 40 below", tso, |h, _| {
            h[2..4].copy_from_slice(&40u16.to_le_bytes())
        }),
        ("IP length field says", tso, |_, f| f[17] ^= 1),
        ("not the pseudo-header's sum", tso, |_, f| f[51] ^= 1),
    ];
    for (want, features, brk) in cases {
        let (mut h, mut f) = gso_frame(2500);
        brk(&mut h, &mut f);
        match gso_segments(&h, &f, features) {
            Err(why) => assert!(why.contains(want), "{want}: {why}"),
            Ok(_) => panic!("{want}: no violation"),
        }
    }
    let (h, mut f) = gso_frame(2500);
    f[34 + 13] |= 0x80;
    let why = gso_segments(&h, &f, tso).unwrap_err();
    assert!(why.contains("CWR"), "{why}");
    assert!(gso_segments(&h, &f, tso | feature::NET_HOST_ECN).is_ok());
}
