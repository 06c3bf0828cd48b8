//! The virtio-net control commands pollnic sends, as bytes: the
//! command-specific data that follows `class` and `command` on the control
//! queue (`pollnic_rings::VirtqCtrl`).
//!
//! Sources: virtio 1.2 §5.1.6.5.5 (automatic receive steering:
//! `VIRTIO_NET_CTRL_MQ`, `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET`), §5.1.6.5.7
//! (RSS: `VIRTIO_NET_CTRL_MQ_RSS_CONFIG`, `struct virtio_net_rss_config`),
//! §5.1.6.4.3.1 (the hash types); QEMU's `virtio_net_handle_mq` and
//! `virtio_net_handle_rss` parse the same layout, Linux
//! `virtnet_commit_rss_command` writes it.

use crate::family::HashTypes;

/// `VIRTIO_NET_CTRL_RX`: the receive filter's command class (§5.1.6.5.1).
pub(crate) const CLASS_RX: u8 = 0;
/// `VIRTIO_NET_CTRL_RX_PROMISC`: promiscuous mode on (1) or off (0).
pub(crate) const RX_PROMISC: u8 = 0;
/// `VIRTIO_NET_CTRL_RX_ALLMULTI`: all-multicast mode on (1) or off (0).
pub(crate) const RX_ALLMULTI: u8 = 1;
/// `VIRTIO_NET_CTRL_MQ`: the multi-queue command class.
pub(crate) const CLASS_MQ: u8 = 4;
/// `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET`: how many queue pairs are in use.
pub(crate) const MQ_VQ_PAIRS_SET: u8 = 0;
/// `VIRTIO_NET_CTRL_MQ_RSS_CONFIG`: the RSS configuration.
pub(crate) const MQ_RSS_CONFIG: u8 = 1;

/// `VIRTIO_NET_RSS_HASH_TYPE_*` bits (§5.1.6.4.3.1); the `_EX` types
/// (IPv6 extension headers) are not asked for.
pub(crate) mod hash_type {
    pub const IPV4: u32 = 1 << 0;
    pub const TCPV4: u32 = 1 << 1;
    pub const UDPV4: u32 = 1 << 2;
    pub const IPV6: u32 = 1 << 3;
    pub const TCPV6: u32 = 1 << 4;
    pub const UDPV6: u32 = 1 << 5;
}

/// The virtio hash-type bits of `t` (the same six types as igb's MRQC
/// fields).
pub(crate) fn hash_type_bits(t: &HashTypes) -> u32 {
    [
        (t.ipv4, hash_type::IPV4),
        (t.tcp_ipv4, hash_type::TCPV4),
        (t.udp_ipv4, hash_type::UDPV4),
        (t.ipv6, hash_type::IPV6),
        (t.tcp_ipv6, hash_type::TCPV6),
        (t.udp_ipv6, hash_type::UDPV6),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .fold(0, |acc, (_, bit)| acc | bit)
}

/// `struct virtio_net_ctrl_mq`: `virtqueue_pairs` (le16).
pub(crate) fn vq_pairs_set(pairs: u16) -> [u8; 2] {
    pairs.to_le_bytes()
}

/// `struct virtio_net_rss_config`, all little-endian: `hash_types` (le32),
/// `indirection_table_mask` (le16, table length − 1), `unclassified_queue`
/// (le16), `indirection_table[]` (le16 each), `max_tx_vq` (le16),
/// `hash_key_length` (u8), `hash_key_data[]`. Queue numbers are receive
/// queue pair indices (receiveq1 is 0).
///
/// # Panics
/// If `table` is empty, not a power of two long, or the key is longer than
/// 255 bytes (callers check against the device's limits first).
pub(crate) fn rss_config(
    hash_types: u32,
    table: &[u16],
    unclassified_queue: u16,
    max_tx_vq: u16,
    key: &[u8],
) -> Vec<u8> {
    assert!(table.len().is_power_of_two(), "indirection table length");
    let key_len = u8::try_from(key.len()).expect("key fits hash_key_length");
    let mut v = Vec::with_capacity(8 + 2 * table.len() + 3 + key.len());
    v.extend_from_slice(&hash_types.to_le_bytes());
    v.extend_from_slice(&((table.len() - 1) as u16).to_le_bytes());
    v.extend_from_slice(&unclassified_queue.to_le_bytes());
    for q in table {
        v.extend_from_slice(&q.to_le_bytes());
    }
    v.extend_from_slice(&max_tx_vq.to_le_bytes());
    v.push(key_len);
    v.extend_from_slice(key);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use pollnic_hw::rss::{Reta, MICROSOFT_KEY};

    #[test]
    fn rss_config_has_the_specs_layout() {
        let reta = Reta::round_robin(2);
        let table: Vec<u16> = reta.0.iter().map(|&q| q as u16).collect();
        let all = hash_type_bits(&HashTypes::default());
        assert_eq!(all, 0x3f);
        let v = rss_config(all, &table, 0, 2, &MICROSOFT_KEY);
        // 4 + 2 + 2 + 2 × 128 + 2 + 1 + 40 bytes.
        assert_eq!(v.len(), 307);
        assert_eq!(&v[0..4], &[0x3f, 0, 0, 0]);
        assert_eq!(&v[4..6], &[127, 0], "indirection_table_mask");
        assert_eq!(&v[6..8], &[0, 0], "unclassified_queue");
        assert_eq!(&v[8..14], &[0, 0, 1, 0, 0, 0], "entries 0, 1, 0 as le16");
        assert_eq!(&v[8 + 254..8 + 256], &[1, 0], "entry 127");
        assert_eq!(&v[264..266], &[2, 0], "max_tx_vq");
        assert_eq!(v[266], 40, "hash_key_length");
        assert_eq!(&v[267..], &MICROSOFT_KEY[..]);
    }

    #[test]
    fn hash_types_map_bit_by_bit() {
        let t = HashTypes::NONE.with_tcp_ipv4(true).with_udp_ipv6(true);
        assert_eq!(hash_type_bits(&t), hash_type::TCPV4 | hash_type::UDPV6);
        assert_eq!(hash_type_bits(&HashTypes::NONE), 0);
        assert_eq!(
            hash_type_bits(&HashTypes::NONE.with_ipv4(true).with_ipv6(true)),
            0b1001
        );
        assert_eq!(vq_pairs_set(3), [3, 0]);
    }
}
