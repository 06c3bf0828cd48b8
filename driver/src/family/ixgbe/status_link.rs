//! The link for `pollnic status` from one read-only read of `LINKS`
//! (0x042A4; 82599 datasheet §8.2.3.22.20), for a port no kernel driver owns.

use crate::family::LinkState;

/// ixgbe `LINKS` register offset in BAR 0, bytes.
pub const LINKS: u32 = 0x042A4;
/// ixgbe `LINKS.LINK_UP` (bit 30).
pub const LINKS_UP: u32 = 1 << 30;
/// ixgbe `LINKS.LINK_SPEED` (bits 29:28): 01 = 100 Mb/s, 10 = 1 Gb/s, 11 = 10 Gb/s.
pub const LINKS_SPEED_SHIFT: u32 = 28;

/// Decodes an ixgbe (82599) `LINKS` register value.
pub fn decode_links(links: u32) -> LinkState {
    if links & LINKS_UP == 0 {
        return LinkState::Down;
    }
    let speed = match (links >> LINKS_SPEED_SHIFT) & 0b11 {
        0b01 => Some(100),
        0b10 => Some(1000),
        0b11 => Some(10_000),
        _ => None,
    };
    LinkState::Up { speed_mbps: speed }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_ixgbe_links() {
        assert_eq!(decode_links(0x3000_0000), LinkState::Down);
        assert_eq!(
            decode_links(0x7000_0000),
            LinkState::Up {
                speed_mbps: Some(10_000)
            }
        );
        assert_eq!(
            decode_links(0x6000_0000),
            LinkState::Up {
                speed_mbps: Some(1000)
            }
        );
        assert_eq!(
            decode_links(0x5000_0000),
            LinkState::Up {
                speed_mbps: Some(100)
            }
        );
        assert_eq!(
            decode_links(0x4000_0000),
            LinkState::Up { speed_mbps: None }
        );
    }
}
