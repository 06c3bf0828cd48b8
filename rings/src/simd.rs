//! The vector data path's SIMD steps (`std::arch`, x86-64 SSE2): four RX
//! write-backs checked with one compare, four TX descriptors built from
//! four packets with a handful of shuffles. The rings call these from their
//! burst loops when the ring runs [`DataPath::Vector`]; everything else
//! (ownership of buffers, counters, the tail) stays in [`crate::rx`] and
//! [`crate::tx`], shared with the scalar path.
//!
//! The technique is the one of DPDK's vector PMDs (`ixgbe_rxtx_vec_sse.c`)
//! and the ixy paper (§5.1): status words of several descriptors in one
//! register, one compare and one mask for DD, EOP and the error bits;
//! descriptors assembled in registers and stored whole. Only SSE2 is used:
//! it is part of the x86-64 baseline, so the steps inline into the burst
//! loops (a `#[target_feature]` function cannot be inlined into a caller
//! without the feature, and the call would cost more than it saves at small
//! bursts).
//!
//! Every access to descriptor memory is volatile, as in [`crate::descring`]:
//! the device may write it at any time.

use pollnic_hw::desc::RawDesc;

/// Which burst loops a ring runs. Both give the same packets, counters and
/// ring state for the same write-backs (the differential test in
/// `rings/tests/differential.rs` checks it); the vector loops handle four
/// descriptors per step where they can.
/// Non-exhaustive: match with a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DataPath {
    /// One descriptor at a time: the reference, and the fallback on CPUs
    /// without the vector instructions.
    Scalar,
    /// Four descriptors per step with SSE2 where four in a row are ordinary
    /// (good frames of the ring's own pool), one at a time otherwise.
    Vector,
}

impl DataPath {
    /// The fastest path this CPU runs: [`DataPath::Vector`] on x86-64 when
    /// SSE2 is detected (always, on x86-64), [`DataPath::Scalar`] elsewhere.
    pub fn detect() -> DataPath {
        if Self::vector_supported() {
            DataPath::Vector
        } else {
            DataPath::Scalar
        }
    }

    /// Whether this CPU runs [`DataPath::Vector`].
    pub fn vector_supported() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("sse2")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// `"scalar"` or `"vector"`.
    pub fn name(self) -> &'static str {
        match self {
            DataPath::Scalar => "scalar",
            DataPath::Vector => "vector",
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{rx_quad, tx_quad};

#[cfg(not(target_arch = "x86_64"))]
pub(crate) use other::{rx_quad, tx_quad};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::RawDesc;
    use crate::mempool::{BufIovas, Packet, PACKET_IDX_OFFSET, PACKET_LEN_OFFSET};
    use crate::mempool::{Shared, PACKET_POOL_OFFSET};
    use pollnic_hw::desc::{
        RXD_STAT_DD, RXD_STAT_EOP, TXD_DCMD_DEXT, TXD_DCMD_EOP, TXD_DCMD_IFCS, TXD_DTYP_DATA,
        TXD_PAYLEN_SHIFT,
    };
    use std::arch::x86_64::*;

    /// Check the write-backs of the four descriptors at `d` (contiguous):
    /// returns their lengths in bytes when all four are good frames (DD and
    /// EOP set, none of the error bits in `check_bits`, `1 <= len <=
    /// max_len`), `None` otherwise (the caller then looks at them one by one,
    /// as the scalar path does). Only the `hi` words (status, length) are
    /// used; the caller reads the `lo` words (RSS hash) afterwards.
    ///
    /// `check_bits` is EOP plus the family's error mask; `max_len` is the
    /// buffer size in bytes, at most `u16::MAX` counts. With `OL`, the
    /// second array holds the four RX status words
    /// (`pollnic_hw::offload::rx_status_word`, `l4e_bit` the family's L4
    /// checksum error bit), built in the same registers; without, zeros.
    ///
    /// # Safety
    /// `d .. d + 4` are descriptors of a live ring (in bounds, 16-byte
    /// aligned).
    #[inline(always)]
    pub(crate) unsafe fn rx_quad<const OL: bool>(
        d: *const RawDesc,
        check_bits: u32,
        max_len: u32,
        l4e_bit: u32,
    ) -> Option<([u32; 4], [u32; 4])> {
        // SAFETY: the caller's promise: four aligned descriptors in bounds;
        // volatile because the device writes them. SSE2 is enabled on every
        // x86-64 target, so the intrinsics are available.
        unsafe {
            let d = d.cast::<__m128i>();
            let d0 = d.read_volatile();
            let d1 = d.add(1).read_volatile();
            let d2 = d.add(2).read_volatile();
            let d3 = d.add(3).read_volatile();
            // The `hi` words: [hi0, hi1] and [hi2, hi3].
            let h01 = _mm_unpackhi_epi64(d0, d1);
            let h23 = _mm_unpackhi_epi64(d2, d3);
            // status_error of each (low dword of hi), and length|vlan.
            let st = _mm_castps_si128(_mm_shuffle_ps::<0x88>(
                _mm_castsi128_ps(h01),
                _mm_castsi128_ps(h23),
            ));
            let lv = _mm_castps_si128(_mm_shuffle_ps::<0xdd>(
                _mm_castsi128_ps(h01),
                _mm_castsi128_ps(h23),
            ));
            let want = (check_bits | RXD_STAT_DD) as i32;
            let good_status = _mm_cmpeq_epi32(
                _mm_and_si128(st, _mm_set1_epi32(want)),
                _mm_set1_epi32((RXD_STAT_EOP | RXD_STAT_DD) as i32),
            );
            let len = _mm_and_si128(lv, _mm_set1_epi32(0xffff));
            // 0 < len < max_len + 1, both sides small non-negative i32.
            let limit = max_len.min(0xffff) as i32 + 1;
            let good_len = _mm_and_si128(
                _mm_cmpgt_epi32(len, _mm_setzero_si128()),
                _mm_cmpgt_epi32(_mm_set1_epi32(limit), len),
            );
            let good = _mm_and_si128(good_status, good_len);
            if _mm_movemask_ps(_mm_castsi128_ps(good)) != 0xf {
                return None;
            }
            let mut out = [0u32; 4];
            _mm_storeu_si128(out.as_mut_ptr().cast(), len);
            let mut ols = [0u32; 4];
            if OL {
                // rx_status_word: VP, UDPCS, L4CS, IPCS where they are; the
                // two checksum errors shifted down to bits 0 and 1; the
                // VLAN tag (the top half of length|vlan) kept in 16..32.
                let keep = _mm_and_si128(st, _mm_set1_epi32(0x78));
                let errs = _mm_and_si128(
                    _mm_srl_epi32(st, _mm_cvtsi32_si128(l4e_bit as i32)),
                    _mm_set1_epi32(3),
                );
                let tag = _mm_and_si128(lv, _mm_set1_epi32(0xffff_0000u32 as i32));
                let ol = _mm_or_si128(_mm_or_si128(keep, errs), tag);
                _mm_storeu_si128(ols.as_mut_ptr().cast(), ol);
            }
            Some((out, ols))
        }
    }

    /// Queue four packets at once: when all four are buffers of the pool
    /// `own` with `1..=65535` bytes, write their four TX data descriptors
    /// (EOP, IFCS, DEXT; no RS, which the caller sets on the burst's batch
    /// ends once the burst is queued) to `d`, their buffer indices
    /// to `idx`, and return their bytes; otherwise write nothing and return
    /// `None` (the caller then queues them one by one).
    ///
    /// # Safety
    /// `p` points at four initialised packets the caller owns; `d .. d + 4`
    /// are descriptors of a live ring that software owns (in bounds,
    /// aligned, not given to the device), `idx .. idx + 4` in bounds of the
    /// ring's index array; `iovas` is of the pool at `own`, which is alive.
    #[inline(always)]
    pub(crate) unsafe fn tx_quad(
        p: &[Packet; 4],
        own: *const Shared,
        iovas: BufIovas,
        d: *mut RawDesc,
        idx: *mut u32,
    ) -> Option<u64> {
        let p = p.as_ptr().cast::<u8>();
        // SAFETY: the caller's promises: `p` holds four `repr(C)` packets
        // (24 bytes each; pool, index and length in their first 16 bytes,
        // see `PACKET_*_OFFSET`), `d` four software-owned descriptors, `idx`
        // four slots; `iovas.get` is given only indices of packets checked
        // to be of the pool `iovas` came from. SSE2 is baseline on x86-64.
        unsafe {
            const _: () = assert!(PACKET_POOL_OFFSET == 0 && PACKET_IDX_OFFSET == 8);
            const _: () = assert!(PACKET_LEN_OFFSET == 12);
            let a0 = _mm_loadu_si128(p.cast());
            let a1 = _mm_loadu_si128(p.add(24).cast());
            let a2 = _mm_loadu_si128(p.add(48).cast());
            let a3 = _mm_loadu_si128(p.add(72).cast());
            // Pools: all four must be `own` (both 32-bit halves equal).
            let want = _mm_set1_epi64x(own as i64);
            let same = _mm_and_si128(
                _mm_cmpeq_epi32(_mm_unpacklo_epi64(a0, a1), want),
                _mm_cmpeq_epi32(_mm_unpacklo_epi64(a2, a3), want),
            );
            // [idx, len] of each.
            let il01 = _mm_unpackhi_epi64(a0, a1);
            let il23 = _mm_unpackhi_epi64(a2, a3);
            let ids = _mm_castps_si128(_mm_shuffle_ps::<0x88>(
                _mm_castsi128_ps(il01),
                _mm_castsi128_ps(il23),
            ));
            let len = _mm_castps_si128(_mm_shuffle_ps::<0xdd>(
                _mm_castsi128_ps(il01),
                _mm_castsi128_ps(il23),
            ));
            // Sendable: len - 1 < 0xffff as unsigned (flip the sign bit for
            // a signed compare).
            let sign = _mm_set1_epi32(i32::MIN);
            let lm1 = _mm_xor_si128(_mm_sub_epi32(len, _mm_set1_epi32(1)), sign);
            let sendable = _mm_cmpgt_epi32(_mm_set1_epi32(0xffff ^ i32::MIN), lm1);
            if _mm_movemask_epi8(same) != 0xffff
                || _mm_movemask_ps(_mm_castsi128_ps(sendable)) != 0xf
            {
                return None;
            }
            // cmd_type_len (RS is the caller's, after the burst);
            // olinfo_status = PAYLEN.
            let fixed = (TXD_DTYP_DATA | TXD_DCMD_EOP | TXD_DCMD_IFCS | TXD_DCMD_DEXT) as i32;
            let cmd = _mm_or_si128(len, _mm_set1_epi32(fixed));
            let ol = _mm_slli_epi32::<{ TXD_PAYLEN_SHIFT as i32 }>(len);
            let hi01 = _mm_unpacklo_epi32(cmd, ol);
            let hi23 = _mm_unpackhi_epi32(cmd, ol);
            let b = |k: usize| p.add(24 * k + PACKET_IDX_OFFSET).cast::<u32>().read();
            let io01 = _mm_set_epi64x(iovas.get(b(1)) as i64, iovas.get(b(0)) as i64);
            let io23 = _mm_set_epi64x(iovas.get(b(3)) as i64, iovas.get(b(2)) as i64);
            let d = d.cast::<__m128i>();
            d.write_volatile(_mm_unpacklo_epi64(io01, hi01));
            d.add(1).write_volatile(_mm_unpackhi_epi64(io01, hi01));
            d.add(2).write_volatile(_mm_unpacklo_epi64(io23, hi23));
            d.add(3).write_volatile(_mm_unpackhi_epi64(io23, hi23));
            _mm_storeu_si128(idx.cast(), ids);
            // Bytes: horizontal sum of four lengths (each < 2^16).
            let s = _mm_add_epi32(len, _mm_shuffle_epi32::<0x4e>(len));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0xb1>(s));
            Some(_mm_cvtsi128_si32(s) as u32 as u64)
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod other {
    //! No vector path here: [`super::DataPath::detect`] gives `Scalar`, so
    //! these are never called; they decline every group.
    use super::RawDesc;
    use crate::mempool::{BufIovas, Packet, Shared};

    #[inline(always)]
    pub(crate) unsafe fn rx_quad<const OL: bool>(
        _: *const RawDesc,
        _: u32,
        _: u32,
        _: u32,
    ) -> Option<([u32; 4], [u32; 4])> {
        None
    }

    #[inline(always)]
    pub(crate) unsafe fn tx_quad(
        _: &[Packet; 4],
        _: *const Shared,
        _: BufIovas,
        _: *mut RawDesc,
        _: *mut u32,
    ) -> Option<u64> {
        None
    }
}
