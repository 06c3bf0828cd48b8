//! A projection, not a measurement: a row's counts (instructions, MMIO,
//! interrupts and the cache model's misses, all counted under QEMU/TCG)
//! turned into nanoseconds per packet on one core of a named CPU, the Intel
//! Xeon Platinum 8380 (Ice Lake-SP), the part the cache model is sized as.
//!
//! Each constant below has the value the middle figure uses and a range;
//! the low figure takes every constant at the end that gives the shorter
//! time, the high figure every constant at the end that gives the longer one.
//! Which constants are published and which assumed, with sources:
//! docs/design/projection.md (a host test checks that page lists them all).

use crate::report::Row;

/// One constant of the projection: the middle figure's value and the range
/// the low and high figures use (`min <= value <= max`, in the constant's unit).
#[derive(Clone, Copy, Debug)]
pub struct Constant {
    /// The value the middle figure uses.
    pub value: f64,
    /// The smallest value of the range.
    pub min: f64,
    /// The largest value of the range.
    pub max: f64,
}

/// Core clock, GHz. Value: the Xeon Platinum 8380's base frequency, 2.3 GHz;
/// range up to its single-core maximum turbo, 3.4 GHz (Intel ARK). Published.
pub const CLOCK_GHZ: Constant = Constant {
    value: 2.3,
    min: 2.3,
    max: 3.4,
};

/// Instructions per cycle of the counted instructions, cache misses apart
/// (they are charged below). **Assumed**; the range stays under the
/// Sunny Cove core's width of 5 (Intel's optimization reference manual).
pub const IPC: Constant = Constant {
    value: 2.0,
    min: 1.0,
    max: 3.0,
};

/// Load-to-use latency of an L1D miss that hits L2, core cycles. Published:
/// Intel's optimization reference manual (Sunny Cove, 13 cycles) and the
/// Ice Lake-SP measurements of AnandTech and Chips and Cheese (about 14).
pub const L2_HIT_CYCLES: Constant = Constant {
    value: 14.0,
    min: 13.0,
    max: 16.0,
};

/// Load-to-use latency of an L2 miss that hits the LLC (the mesh's L3), ns.
/// Measured by others: AnandTech's and Chips and Cheese's Xeon 8380
/// latency sweeps; the range is this project's rounding of their figures.
pub const LLC_HIT_NS: Constant = Constant {
    value: 22.0,
    min: 18.0,
    max: 30.0,
};

/// Load-to-use latency of an LLC miss served by local DRAM (DDR4-3200), ns.
/// Measured by others, idle: AnandTech's Xeon 8380 review; the top of the
/// range allows for a loaded memory system.
pub const DRAM_NS: Constant = Constant {
    value: 100.0,
    min: 80.0,
    max: 130.0,
};

/// One MMIO read: a non-posted PCIe round trip the core waits for, ns.
/// Measured by others: Neugebauer et al., "Understanding PCIe performance
/// for end host networking", SIGCOMM 2018 (pcie-bench).
pub const MMIO_READ_NS: Constant = Constant {
    value: 700.0,
    min: 500.0,
    max: 1000.0,
};

/// One MMIO write as the core sees it, ns: posted (no completion awaited),
/// but uncached and strongly ordered. **Assumed** (no direct published
/// measurement used; PCIe posted-write semantics, Intel SDM vol. 3 on UC memory).
pub const MMIO_WRITE_NS: Constant = Constant {
    value: 50.0,
    min: 20.0,
    max: 150.0,
};

/// One hard interrupt's entry and exit beyond its handler's instructions
/// (which are counted), ns. **Assumed**, of the order Tsafrir,
/// "The context-switch overhead inflicted by hardware interrupts", ExpCS 2007,
/// reports for the direct cost.
pub const INTERRUPT_NS: Constant = Constant {
    value: 1000.0,
    min: 300.0,
    max: 2000.0,
};

/// The CPU the projection is for, as the table and chart name it.
pub const CPU: &str = "one Xeon Platinum 8380 core (Ice Lake-SP, 2.3 GHz base)";

/// Which end of each range a figure takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Every constant at the end that gives the shorter time.
    Low,
    /// Every constant at its value.
    Mid,
    /// Every constant at the end that gives the longer time.
    High,
}

impl Constant {
    /// For a cost (a larger value is a longer time): min, value or max.
    fn cost(self, b: Bound) -> f64 {
        match b {
            Bound::Low => self.min,
            Bound::Mid => self.value,
            Bound::High => self.max,
        }
    }

    /// For a rate (a larger value is a shorter time: clock, IPC): max, value or min.
    fn rate(self, b: Bound) -> f64 {
        match b {
            Bound::Low => self.max,
            Bound::Mid => self.value,
            Bound::High => self.min,
        }
    }
}

/// The per-packet counts the projection needs, from one row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Counts {
    /// Instructions per packet (the work figure where the row has one).
    pub instructions: f64,
    /// MMIO reads per packet.
    pub mmio_reads: f64,
    /// MMIO writes per packet.
    pub mmio_writes: f64,
    /// Hard interrupts per packet.
    pub interrupts: f64,
    /// Cache model: L1D misses per packet.
    pub l1d_misses: f64,
    /// Cache model: L2 misses per packet.
    pub l2_misses: f64,
    /// Cache model: LLC misses per packet with DDIO.
    pub llc_misses: f64,
    /// Cache model: LLC misses per packet without DDIO.
    pub llc_misses_no_ddio: f64,
}

/// Projected ns per packet at `bound`. Time in the core (instructions over
/// IPC and clock), plus each L1D miss served by L2, each L2 miss served by
/// the LLC and each LLC miss served by DRAM at that level's load-to-use
/// latency, plus MMIO and interrupts at their costs, all summed as if serial.
/// LLC misses: with DDIO at `Low` and `Mid`, without DDIO at `High`.
pub fn ns_per_packet(c: &Counts, b: Bound) -> f64 {
    let ghz = CLOCK_GHZ.rate(b);
    let llc_misses = if b == Bound::High {
        c.llc_misses_no_ddio
    } else {
        c.llc_misses
    };
    // The latencies are load-to-use, each including the levels above it, so
    // a miss is charged once, at the level that served it.
    let l2_hits = (c.l1d_misses - c.l2_misses).max(0.0);
    let llc_hits = (c.l2_misses - llc_misses).max(0.0);
    c.instructions / IPC.rate(b) / ghz
        + l2_hits * L2_HIT_CYCLES.cost(b) / ghz
        + llc_hits * LLC_HIT_NS.cost(b)
        + llc_misses * DRAM_NS.cost(b)
        + c.mmio_reads * MMIO_READ_NS.cost(b)
        + c.mmio_writes * MMIO_WRITE_NS.cost(b)
        + c.interrupts * INTERRUPT_NS.cost(b)
}

/// The row's counts, or a note naming the JSON fields it lacks.
///
/// # Errors
/// The note, when any count is absent.
pub fn counts(r: &Row) -> Result<Counts, String> {
    let instructions = r.work_instructions_per_packet.or(r.instructions_per_packet);
    let fields = [
        ("instructions_per_packet", instructions),
        ("mmio_reads_per_packet", r.mmio_reads_per_packet),
        ("mmio_writes_per_packet", r.mmio_writes_per_packet),
        ("interrupts_per_packet", r.interrupts_per_packet),
        ("l1d_misses_per_packet", r.l1d_misses_per_packet),
        ("l2_misses_per_packet", r.l2_misses_per_packet),
        ("llc_misses_per_packet", r.llc_misses_per_packet),
        (
            "llc_misses_no_ddio_per_packet",
            r.llc_misses_no_ddio_per_packet,
        ),
    ];
    let missing: Vec<&str> = fields
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        let cache = if r.l1d_misses_per_packet.is_none() {
            " (cache figures need compare --count-cache)"
        } else {
            ""
        };
        return Err(format!(
            "no projection: the row has no {}{cache}",
            missing.join(", ")
        ));
    }
    let v = |i: usize| fields[i].1.unwrap_or_default();
    Ok(Counts {
        instructions: v(0),
        mmio_reads: v(1),
        mmio_writes: v(2),
        interrupts: v(3),
        l1d_misses: v(4),
        l2_misses: v(5),
        llc_misses: v(6),
        llc_misses_no_ddio: v(7),
    })
}

/// Fill the row's projection fields from its counts, or leave them `None`
/// with a note naming the missing counts.
pub fn apply(r: &mut Row) {
    let (ns, low, high) = match counts(r) {
        Ok(c) => {
            let basis = if r.work_instructions_per_packet.is_some() {
                "work instructions"
            } else {
                "all instructions (the row has no work figure, so empty polls or background are in)"
            };
            r.projection_note = format!(
                "projected, not measured: {CPU}, from counts under QEMU/TCG ({basis}); \
                 LLC misses with DDIO (low, mid), without DDIO (high); docs/design/projection.md"
            );
            (
                Some(ns_per_packet(&c, Bound::Mid)),
                Some(ns_per_packet(&c, Bound::Low)),
                Some(ns_per_packet(&c, Bound::High)),
            )
        }
        Err(note) => {
            r.projection_note = note;
            (None, None, None)
        }
    };
    let mpps = |ns: Option<f64>| ns.filter(|n| *n > 0.0).map(|n| 1000.0 / n);
    r.projected_ns_per_packet = ns;
    r.projected_ns_per_packet_low = low;
    r.projected_ns_per_packet_high = high;
    r.projected_mpps_per_core = mpps(ns);
    // The fewest packets per second go with the most ns per packet.
    r.projected_mpps_per_core_low = mpps(high);
    r.projected_mpps_per_core_high = mpps(low);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> Counts {
        Counts {
            instructions: 460.0,
            mmio_reads: 0.5,
            mmio_writes: 0.25,
            interrupts: 0.1,
            l1d_misses: 10.0,
            l2_misses: 4.0,
            llc_misses: 1.0,
            llc_misses_no_ddio: 3.0,
        }
    }

    #[test]
    fn a_hand_computed_row_gives_the_hand_computed_ns() {
        // Mid, by hand: 460 / 2.0 / 2.3 = 100; (10 - 4) L2 hits x 14 / 2.3
        // = 36.5217...; (4 - 1) LLC hits x 22 = 66; 1 DRAM x 100 = 100;
        // 0.5 x 700 = 350; 0.25 x 50 = 12.5; 0.1 x 1000 = 100.
        let mid = 100.0 + 6.0 * 14.0 / 2.3 + 66.0 + 100.0 + 350.0 + 12.5 + 100.0;
        assert!((ns_per_packet(&counts(), Bound::Mid) - mid).abs() < 1e-9);
        // High, by hand: 460 / 1.0 / 2.3 = 200; 6 x 16 / 2.3; (4 - 3) x 30;
        // 3 DRAM (no DDIO) x 130; 0.5 x 1000; 0.25 x 150; 0.1 x 2000.
        let high = 200.0 + 6.0 * 16.0 / 2.3 + 30.0 + 390.0 + 500.0 + 37.5 + 200.0;
        assert!((ns_per_packet(&counts(), Bound::High) - high).abs() < 1e-9);
    }

    #[test]
    fn low_is_at_most_mid_is_at_most_high() {
        let c = counts();
        let (low, mid, high) = (
            ns_per_packet(&c, Bound::Low),
            ns_per_packet(&c, Bound::Mid),
            ns_per_packet(&c, Bound::High),
        );
        assert!(low <= mid && mid <= high, "{low} {mid} {high}");
        for k in [
            CLOCK_GHZ,
            IPC,
            L2_HIT_CYCLES,
            LLC_HIT_NS,
            DRAM_NS,
            MMIO_READ_NS,
            MMIO_WRITE_NS,
            INTERRUPT_NS,
        ] {
            assert!(k.min <= k.value && k.value <= k.max, "{k:?}");
        }
    }

    #[test]
    fn a_row_missing_a_count_gets_no_projection_and_a_note() {
        let mut r: Row = serde_json::from_str(
            r#"{"path": "pollnic-1q", "frame_size": 64, "offered_pps": 1000.0,
                "sent": 10, "received": 10, "lost": 0, "rx_pps": 1000.0,
                "payload_mbps": 0.5, "l1_mbps": 0.7, "cpu_ns_per_pkt": null,
                "p50_us": null, "p99_us": null, "p999_us": null, "max_us": null,
                "note": "", "valid": true,
                "instructions_per_packet": 460.0, "mmio_reads_per_packet": 0.5,
                "mmio_writes_per_packet": 0.25, "interrupts_per_packet": 0.1}"#,
        )
        .unwrap();
        apply(&mut r);
        assert_eq!(r.projected_ns_per_packet, None);
        assert_eq!(r.projected_ns_per_packet_low, None);
        assert_eq!(r.projected_mpps_per_core_high, None);
        assert!(
            r.projection_note.contains("l1d_misses_per_packet")
                && r.projection_note.contains("llc_misses_no_ddio_per_packet")
                && !r.projection_note.contains("mmio_reads_per_packet"),
            "{}",
            r.projection_note
        );
        // With the cache figures it gets one, and mpps is 1000 / ns.
        r.l1d_misses_per_packet = Some(10.0);
        r.l2_misses_per_packet = Some(4.0);
        r.llc_misses_per_packet = Some(1.0);
        r.llc_misses_no_ddio_per_packet = Some(3.0);
        apply(&mut r);
        let ns = r.projected_ns_per_packet.unwrap();
        assert!((ns - ns_per_packet(&counts(), Bound::Mid)).abs() < 1e-9);
        assert!((r.projected_mpps_per_core.unwrap() - 1000.0 / ns).abs() < 1e-12);
        assert!(r.projected_mpps_per_core_low <= r.projected_mpps_per_core_high);
    }
}
