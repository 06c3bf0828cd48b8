//! What `pktgen` sends: frame sizes (fixed, mixed, IMIX) and the optional
//! 802.1Q tag, over the test frames of [`crate::frame`].
//!
//! Sizes are on the wire, FCS included (64..=1518 bytes untagged at the
//! default MTU, up to 9018 at MTU 9000: [`check_frame_size`]), as
//! `--frame-size` everywhere in pollnic; the NIC appends the 4-byte FCS, so a
//! frame of size N is N − 4 bytes in the buffer. A VLAN tag (IEEE 802.1Q,
//! TPID 0x8100) adds 4 bytes: 1518 becomes 1522.

use crate::frame::{self, Flow, MAX_JUMBO_FRAME_LEN, MIN_FRAME_LEN};

/// Bytes of an 802.1Q tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = 4;
/// IEEE 802.1Q TPID.
pub const TPID_8021Q: u16 = 0x8100;

/// Simple IMIX: 7 frames of 64 bytes, 4 of 594, 1 of 1518 (wire sizes, FCS
/// included), sent in the order of this table, repeated.
pub const IMIX: [usize; 12] = [64, 64, 594, 64, 64, 594, 64, 64, 594, 64, 594, 1518];

/// How frame sizes are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSize {
    /// Every frame this many bytes on the wire (64..=9018, FCS included;
    /// above 1518 only with an MTU that allows it, [`check_frame_size`]).
    Fixed(usize),
    /// [`frame::mixed_len`]: 64..=1518 spread by the sequence number.
    Mixed,
    /// [`IMIX`].
    Imix,
}

impl std::str::FromStr for FrameSize {
    type Err = String;
    /// `64`..`9018`, `0` (mixed) or `imix`; whether the size fits the MTU
    /// is [`check_frame_size`]'s to say.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(FrameSize::Imix);
        }
        match s.parse::<usize>() {
            Ok(0) => Ok(FrameSize::Mixed),
            Ok(n) if (MIN_FRAME_LEN + 4..=MAX_JUMBO_FRAME_LEN + 4).contains(&n) => {
                Ok(FrameSize::Fixed(n))
            }
            _ => Err(format!(
                "--frame-size {s}: give a size from 64 to 1518 bytes (FCS included; up to 9018 with --mtu 9000), 0 for mixed sizes, or imix"
            )),
        }
    }
}

impl FrameSize {
    /// The largest frame this choice sends, on the wire (bytes, FCS
    /// included, without a VLAN tag).
    pub fn max_wire_len(&self) -> usize {
        match *self {
            FrameSize::Fixed(n) => n,
            FrameSize::Mixed => frame::MAX_FRAME_LEN + 4,
            FrameSize::Imix => 1518,
        }
    }

    /// Buffer length (no FCS, no VLAN tag) of frame `seq`.
    pub fn untagged_len(&self, seq: u64) -> usize {
        match *self {
            FrameSize::Fixed(n) => n - 4,
            FrameSize::Mixed => frame::mixed_len(seq),
            FrameSize::Imix => IMIX[(seq % IMIX.len() as u64) as usize] - 4,
        }
    }

    /// Buffer length of frame `seq` with `vlan` applied.
    pub fn len(&self, seq: u64, vlan: Option<u16>) -> usize {
        self.untagged_len(seq) + if vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }

    /// For the start line: `64-byte`, `mixed 64..1518-byte`, `IMIX 7:4:1 64/594/1518-byte`.
    pub fn describe(&self) -> String {
        match self {
            FrameSize::Fixed(n) => format!("{n}-byte"),
            FrameSize::Mixed => "mixed 64..1518-byte".into(),
            FrameSize::Imix => "IMIX 7:4:1 64/594/1518-byte".into(),
        }
    }
}

/// Checks that frames of up to `size` bytes on the wire (FCS included,
/// without the 4 bytes of a tag, added when `vlan`) fit the MTU `mtu`: at
/// most `mtu + 18` bytes untagged, `mtu + 22` tagged (Linux's arithmetic,
/// [`pollnic_hw::mtu::max_frame`]).
///
/// # Errors
/// The message for `--frame-size`, naming the limit and the `--mtu` that
/// would take the size.
pub fn check_frame_size(size: usize, mtu: u32, vlan: bool) -> Result<(), String> {
    use pollnic_hw::mtu::{max_frame, MAX_MTU, VLAN_HLEN};
    let tag = if vlan { VLAN_HLEN as usize } else { 0 };
    let max = max_frame(mtu) as usize;
    if size <= max {
        return Ok(());
    }
    let needed = size - (max_frame(0) as usize);
    let fix = if needed == MAX_MTU as usize {
        format!("pass --mtu {MAX_MTU} (the largest), or a smaller --frame-size")
    } else if needed < MAX_MTU as usize {
        format!("pass an --mtu of {needed} to {MAX_MTU}, or a smaller --frame-size")
    } else {
        format!(
            "the largest MTU is {MAX_MTU} ({} bytes): pass a smaller --frame-size",
            max_frame(MAX_MTU)
        )
    };
    Err(format!(
        "--frame-size {size} is above the largest frame at MTU {mtu}: {max} bytes with the FCS{}; {fix}",
        if vlan {
            format!(" ({} with the VLAN tag)", max + tag)
        } else {
            String::new()
        }
    ))
}

/// Checks an `--mtu` option: 1500..=9000 bytes.
///
/// # Errors
/// The message naming the range.
pub fn check_mtu(mtu: u32) -> Result<u32, String> {
    use pollnic_hw::mtu::{MAX_MTU, MIN_MTU};
    if pollnic_hw::mtu::valid_mtu(mtu) {
        Ok(mtu)
    } else {
        Err(format!(
            "--mtu {mtu}: give an MTU from {MIN_MTU} to {MAX_MTU} bytes (L3 payload, as Linux; 9000 means 9018-byte frames)"
        ))
    }
}

/// Checks a `--vlan` ID: 1..=4094 (0 means priority-tagged only and 4095 is
/// reserved, IEEE 802.1Q).
///
/// # Errors
/// The message for `--vlan` when out of range.
pub fn check_vlan(id: u16) -> Result<u16, String> {
    if (1..=4094).contains(&id) {
        Ok(id)
    } else {
        Err(format!("--vlan {id}: a VLAN ID is 1 to 4094"))
    }
}

/// Writes test frame `seq` of `flow` into `buf` (its whole length), with an
/// 802.1Q tag (priority 0) after the MAC addresses when `vlan` is given.
/// Returns false (nothing sensible written) when the length does not fit
/// a test frame.
pub fn write(buf: &mut [u8], flow: &Flow, seq: u64, tx_ns: u64, vlan: Option<u16>) -> bool {
    let Some(id) = vlan else {
        return frame::write(buf, flow, seq, tx_ns);
    };
    if buf.len() < VLAN_TAG_LEN || !frame::write(&mut buf[VLAN_TAG_LEN..], flow, seq, tx_ns) {
        return false;
    }
    buf.copy_within(VLAN_TAG_LEN..VLAN_TAG_LEN + 12, 0);
    buf[12..14].copy_from_slice(&TPID_8021Q.to_be_bytes());
    buf[14..16].copy_from_slice(&(id & 0x0fff).to_be_bytes());
    true
}

/// Bytes of a TSO test frame's headers, untagged: Ethernet (14), IPv4 (20)
/// and TCP (20), no options.
pub const TSO_HEADERS: usize = 54;

/// Check `pktgen --tso MSS` against the MTU: every segment the NIC cuts
/// carries IPv4 and TCP headers (40 bytes) and at most `mss` bytes of
/// payload, which must fit the MTU.
pub fn check_tso_mss(mss: u16, mtu: u32) -> Result<u16, String> {
    let max = mtu
        .saturating_sub(40)
        .min(pollnic::offload::TSO_MAX_MSS as u32);
    if mss == 0 || mss as u32 > max {
        return Err(format!(
            "--tso {mss}: an MSS must be 1..={max} bytes at --mtu {mtu} (the MTU less 40 bytes \
             of IPv4 and TCP headers): use --tso 1460, or raise --mtu"
        ));
    }
    Ok(mss)
}

/// Write a TCP/IPv4 frame for TCP segmentation (`pktgen --tso`) into all
/// of `buf`: the flow's MACs and addresses, its ports as TCP ports, IPv4 ID
/// `seq` (16 bits) with DF, TCP sequence number `tcp_seq`, ACK and PSH, and
/// a payload that starts with `seq` (8 bytes, big-endian) followed by a byte
/// pattern. The IPv4 total length and both checksums are left 0: with TSO
/// the NIC writes each segment's. `vlan` tags it in software (4 bytes more).
/// `false` when `buf` holds no payload byte after the headers.
pub fn write_tso(buf: &mut [u8], flow: &Flow, seq: u64, tcp_seq: u32, vlan: Option<u16>) -> bool {
    let l2 = if vlan.is_some() { 18 } else { 14 };
    if buf.len() <= l2 + 40 {
        return false;
    }
    buf[..6].copy_from_slice(&flow.dst_mac);
    buf[6..12].copy_from_slice(&flow.src_mac);
    if let Some(id) = vlan {
        buf[12..14].copy_from_slice(&TPID_8021Q.to_be_bytes());
        buf[14..16].copy_from_slice(&(id & 0x0fff).to_be_bytes());
    }
    buf[l2 - 2..l2].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut buf[l2..l2 + 20];
    ip.fill(0);
    ip[0] = 0x45;
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&flow.src_ip);
    ip[16..20].copy_from_slice(&flow.dst_ip);
    let tcp = &mut buf[l2 + 20..l2 + 40];
    tcp.fill(0);
    tcp[0..2].copy_from_slice(&flow.src_port.to_be_bytes());
    tcp[2..4].copy_from_slice(&flow.dst_port.to_be_bytes());
    tcp[4..8].copy_from_slice(&tcp_seq.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // ACK, PSH
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    let payload = &mut buf[l2 + 40..];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let head = seq.to_be_bytes();
    let n = head.len().min(payload.len());
    payload[..n].copy_from_slice(&head[..n]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_repeat() {
        assert_eq!("64".parse::<FrameSize>(), Ok(FrameSize::Fixed(64)));
        assert_eq!("0".parse::<FrameSize>(), Ok(FrameSize::Mixed));
        assert_eq!("IMIX".parse::<FrameSize>(), Ok(FrameSize::Imix));
        for bad in ["63", "9019", "x", "-1"] {
            assert!(bad.parse::<FrameSize>().unwrap_err().contains("64 to 1518"));
            assert!(bad.parse::<FrameSize>().unwrap_err().contains("--mtu 9000"));
        }
        let imix: Vec<usize> = (0..12)
            .map(|s| FrameSize::Imix.untagged_len(s) + 4)
            .collect();
        assert_eq!(imix.iter().filter(|&&n| n == 64).count(), 7);
        assert_eq!(imix.iter().filter(|&&n| n == 594).count(), 4);
        assert_eq!(imix.iter().filter(|&&n| n == 1518).count(), 1);
        assert_eq!(FrameSize::Imix.untagged_len(12), 60);
        assert_eq!(FrameSize::Fixed(1518).len(0, Some(7)), 1518);
        assert!((0..64).all(|s| (60..=1514).contains(&FrameSize::Mixed.untagged_len(s))));
    }

    #[test]
    fn frame_sizes_are_checked_against_the_mtu() {
        assert!(check_frame_size(1518, 1500, false).is_ok());
        assert!(check_frame_size(1518, 1500, true).is_ok(), "1522 tagged");
        let e = check_frame_size(1519, 1500, false).unwrap_err();
        assert!(
            e.contains("above the largest frame at MTU 1500: 1518 bytes"),
            "{e}"
        );
        assert!(e.contains("an --mtu of 1501 to 9000"), "{e}");
        assert!(check_frame_size(9018, 9000, true).is_ok());
        let e = check_frame_size(9018, 1500, false).unwrap_err();
        assert!(e.contains("pass --mtu 9000 (the largest)"), "{e}");
        assert!(!e.contains("or more"), "{e}");
        assert_eq!("9018".parse::<FrameSize>(), Ok(FrameSize::Fixed(9018)));
        assert!("9019".parse::<FrameSize>().is_err());
        assert_eq!(FrameSize::Imix.max_wire_len(), 1518);
        assert!(check_mtu(9000).is_ok());
        assert!(check_mtu(9001).unwrap_err().contains("1500 to 9000"));
    }

    #[test]
    fn vlan_tag_sits_after_the_macs() {
        let flow = Flow::between([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let plain = frame::expected(100, &flow, 5, 9);
        let mut tagged = vec![0; 104];
        assert!(write(&mut tagged, &flow, 5, 9, Some(100)));
        assert_eq!(&tagged[..12], &plain[..12]);
        assert_eq!(&tagged[12..16], &[0x81, 0x00, 0x00, 100]);
        assert_eq!(&tagged[16..], &plain[12..]);
        assert!(check_vlan(0).is_err() && check_vlan(4095).is_err());
        assert_eq!(check_vlan(4094), Ok(4094));
        let mut short = vec![0; 50];
        assert!(!write(&mut short, &flow, 0, 0, Some(1)));
    }
}
