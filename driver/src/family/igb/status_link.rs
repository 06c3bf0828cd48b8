//! The link for `pollnic status` from one read-only read of `STATUS`
//! (0x0008; 82576/I350 datasheets §8.2.2), for a port no kernel driver owns.

use crate::family::LinkState;

/// igb `STATUS` register offset in BAR 0, bytes.
pub const STATUS: u32 = 0x0008;
/// igb `STATUS.LU`: link up.
pub const STATUS_LU: u32 = 1 << 1;
/// igb `STATUS.SPEED` (bits 7:6): 00 = 10, 01 = 100, 10/11 = 1000 Mb/s.
pub const STATUS_SPEED_SHIFT: u32 = 6;

/// Decodes an igb `STATUS` register value.
pub fn decode_status(status: u32) -> LinkState {
    if status & STATUS_LU == 0 {
        return LinkState::Down;
    }
    let speed = match (status >> STATUS_SPEED_SHIFT) & 0b11 {
        0b00 => 10,
        0b01 => 100,
        _ => 1000,
    };
    LinkState::Up {
        speed_mbps: Some(speed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_igb_status() {
        assert_eq!(decode_status(0), LinkState::Down);
        assert_eq!(decode_status(0x80), LinkState::Down);
        assert_eq!(
            decode_status(0x2),
            LinkState::Up {
                speed_mbps: Some(10)
            }
        );
        assert_eq!(
            decode_status(0x42),
            LinkState::Up {
                speed_mbps: Some(100)
            }
        );
        assert_eq!(
            decode_status(0x83),
            LinkState::Up {
                speed_mbps: Some(1000)
            }
        );
        assert_eq!(
            decode_status(0xC2),
            LinkState::Up {
                speed_mbps: Some(1000)
            }
        );
    }
}
