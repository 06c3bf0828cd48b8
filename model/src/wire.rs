//! Frame handling both modelled MACs do alike.

use pollnic_hw::rss::{FlowKey, L4};

/// FCS bytes the MAC counts in the octet counters (GORC/GOTC count from the
/// destination address through the CRC, in the 8257x and 82598 datasheets;
/// the 82599's is taken to be the same) and strips or appends.
pub(crate) const FCS_LEN: u64 = 4;

/// MRQC hash field bits, at the same positions on the 82576 and the 82599.
pub(crate) mod field {
    pub const TCP_IPV4: u32 = 1 << 16;
    pub const IPV4: u32 = 1 << 17;
    pub const IPV6: u32 = 1 << 20;
    pub const TCP_IPV6: u32 = 1 << 21;
    pub const UDP_IPV4: u32 = 1 << 22;
    pub const UDP_IPV6: u32 = 1 << 23;
}

/// RSS types written back in `pkt_info` bits 3:0 (same codes on both).
mod rsstype {
    pub const TCP_IPV4: u16 = 0x1;
    pub const IPV4: u16 = 0x2;
    pub const TCP_IPV6: u16 = 0x3;
    pub const IPV6: u16 = 0x5;
    pub const UDP_IPV4: u16 = 0x7;
    pub const UDP_IPV6: u16 = 0x8;
}

/// Whether a received `frame` (no FCS) is longer than `max_frame` bytes with
/// its FCS, allowing 4 more bytes when it carries an 802.1Q tag (EtherType
/// 0x8100 after the MACs: the VLAN EtherType both parts recognize by
/// default; an outer 802.1ad 0x88a8 tag is not one).
pub(crate) fn oversized(frame: &[u8], max_frame: u32) -> bool {
    let tagged = frame.get(12..14) == Some(&[0x81, 0x00][..]);
    let limit = max_frame as usize + if tagged { 4 } else { 0 };
    frame.len() + FCS_LEN as usize > limit
}

/// The station address in a RAL/RAH pair, if RAH.AV is set.
pub(crate) fn mac_of(ral: u32, rah: u32) -> Option<[u8; 6]> {
    let (a, b) = (ral.to_le_bytes(), rah.to_le_bytes());
    (rah & (1 << 31) != 0).then_some([a[0], a[1], a[2], a[3], b[0], b[1]])
}

/// Ethernet CRC-32 (IEEE 802.3), appended little-endian when the MAC does
/// not strip it.
pub(crate) fn fcs(frame: &[u8]) -> [u8; 4] {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in frame {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    (!crc).to_le_bytes()
}

/// The RSS type and hash input of `frame` under the MRQC field bits, or None
/// (hash 0, queue 0) when no enabled type matches (§7.1.2.8.1).
pub(crate) fn rss_flow(frame: &[u8], mrqc: u32) -> Option<(u16, FlowKey)> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let l3 = frame.get(14..)?;
    let (proto, l4_off, key) = match ethertype {
        0x0800 => {
            let ihl = (*l3.first()? & 0x0f) as usize * 4;
            let frag = u16::from_be_bytes(l3.get(6..8)?.try_into().ok()?) & 0x3fff != 0;
            let src: [u8; 4] = l3.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = l3.get(16..20)?.try_into().ok()?;
            let proto = if frag { 0 } else { l3[9] };
            (proto, ihl, (Some((src, dst)), None))
        }
        0x86DD => {
            let src: [u8; 16] = l3.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = l3.get(24..40)?.try_into().ok()?;
            (l3[6], 40, (None, Some((src, dst))))
        }
        _ => return None,
    };
    let ports = l3.get(l4_off..l4_off + 4).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    let l4 = match (proto, ports) {
        (6, Some(_)) => L4::Tcp,
        (17, Some(_)) => L4::Udp,
        _ => L4::Other,
    };
    let (sport, dport) = ports.unwrap_or((0, 0));
    match key {
        (Some((src, dst)), _) => {
            let (ty, l4) = match l4 {
                L4::Tcp if mrqc & field::TCP_IPV4 != 0 => (rsstype::TCP_IPV4, L4::Tcp),
                L4::Udp if mrqc & field::UDP_IPV4 != 0 => (rsstype::UDP_IPV4, L4::Udp),
                _ if mrqc & field::IPV4 != 0 => (rsstype::IPV4, L4::Other),
                _ => return None,
            };
            Some((
                ty,
                FlowKey::V4 {
                    src: src.into(),
                    dst: dst.into(),
                    sport,
                    dport,
                    l4,
                },
            ))
        }
        (_, Some((src, dst))) => {
            let (ty, l4) = match l4 {
                L4::Tcp if mrqc & field::TCP_IPV6 != 0 => (rsstype::TCP_IPV6, L4::Tcp),
                L4::Udp if mrqc & field::UDP_IPV6 != 0 => (rsstype::UDP_IPV6, L4::Udp),
                _ if mrqc & field::IPV6 != 0 => (rsstype::IPV6, L4::Other),
                _ => return None,
            };
            Some((
                ty,
                FlowKey::V6 {
                    src: src.into(),
                    dst: dst.into(),
                    sport,
                    dport,
                    l4,
                },
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn oversized_allows_one_8021q_tag() {
        let mut f = vec![0u8; 1514];
        assert!(!oversized(&f, 1518));
        f.push(0);
        assert!(oversized(&f, 1518), "1519 bytes with the FCS, untagged");
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f.resize(1518, 0);
        assert!(!oversized(&f, 1518), "1522 with one tag");
        f.push(0);
        assert!(oversized(&f, 1518));
        f[12..14].copy_from_slice(&[0x88, 0xa8]);
        f.resize(1518, 0);
        assert!(
            oversized(&f, 1518),
            "an 802.1ad outer tag is not recognized"
        );
    }
    #[test]
    fn fcs_matches_the_ethernet_check_value() {
        // CRC-32/IEEE of "123456789" is 0xCBF43926.
        assert_eq!(u32::from_le_bytes(fcs(b"123456789")), 0xCBF4_3926);
    }
    #[test]
    fn field_bits_are_the_families_own() {
        use pollnic_hw::{igb::bits as i, ixgbe::bits as x};
        for (f, a, b) in [
            (
                field::TCP_IPV4,
                i::MRQC_FIELD_TCP_IPV4,
                x::MRQC_FIELD_TCP_IPV4,
            ),
            (field::IPV4, i::MRQC_FIELD_IPV4, x::MRQC_FIELD_IPV4),
            (field::IPV6, i::MRQC_FIELD_IPV6, x::MRQC_FIELD_IPV6),
            (
                field::TCP_IPV6,
                i::MRQC_FIELD_TCP_IPV6,
                x::MRQC_FIELD_TCP_IPV6,
            ),
            (
                field::UDP_IPV4,
                i::MRQC_FIELD_UDP_IPV4,
                x::MRQC_FIELD_UDP_IPV4,
            ),
            (
                field::UDP_IPV6,
                i::MRQC_FIELD_UDP_IPV6,
                x::MRQC_FIELD_UDP_IPV6,
            ),
        ] {
            assert_eq!((f, f), (a, b));
        }
        assert_eq!(rsstype::UDP_IPV6, x::RSSTYPE_UDP_IPV6);
        assert_eq!(rsstype::TCP_IPV4, x::RSSTYPE_TCP_IPV4);
    }
}
