//! The search behind a capacity sweep: the highest offered rate whose loss
//! stays within a tolerance, found by a binary search over the offered rate,
//! starting at the maximum (the throughput test of RFC 2544 §26.1, with a
//! stated loss tolerance instead of strict zero loss: emulation jitter makes
//! strict zero loss meaningless). The trials themselves are the caller's.

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepCfg {
    /// Lowest offered rate the search goes down to, packets/s.
    pub min_pps: u64,
    /// Highest offered rate, tried first, packets/s.
    pub max_pps: u64,
    /// Most trials (the first at `max_pps`).
    pub steps: u32,
    /// Loss allowed in a passing trial, percent of frames sent.
    pub tolerance_pct: f64,
}

/// What one trial showed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trial {
    /// Rate the generator achieved, packets/s.
    pub offered_pps: f64,
    /// Frames sent.
    pub sent: u64,
    /// Frames sent but not received.
    pub lost: u64,
    /// False when the trial produced no measurement (always fails).
    pub valid: bool,
}

impl Trial {
    /// Loss in percent of frames sent (100 for an invalid or empty trial).
    pub fn loss_pct(&self) -> f64 {
        if !self.valid || self.sent == 0 {
            return 100.0;
        }
        self.lost as f64 * 100.0 / self.sent as f64
    }
}

/// The outcome of a search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepResult {
    /// Highest achieved offered rate of a passing trial, packets/s; `None`
    /// when no trial passed.
    pub zero_loss_pps: Option<f64>,
    /// Trials run.
    pub trials: u32,
    /// A passing trial offered less than 95 % of the rate asked for: the
    /// generator, not the path, was the limit.
    pub generator_limited: bool,
}

/// Run `trial(target_pps)` up to `cfg.steps` times, halving the interval
/// between the highest passing and the lowest failing rate; returns each
/// trial's own result (in order) and the outcome. A trial that failed while
/// offering less than 95 % of its target failed at the rate it offered, so
/// that rate, not the target, bounds the search from above (a generator
/// that tops out at 30 kpps would otherwise spend every trial at 30 kpps
/// while the target halves from 400 kpps).
pub fn search<T>(cfg: SweepCfg, mut trial: impl FnMut(u64) -> (T, Trial)) -> (Vec<T>, SweepResult) {
    let (mut lo, mut hi) = (cfg.min_pps, cfg.max_pps.max(cfg.min_pps));
    let mut target = hi;
    let mut out = Vec::new();
    let mut best: Option<f64> = None;
    let mut limited = false;
    for step in 0..cfg.steps.max(1) {
        let (t, r) = trial(target);
        out.push(t);
        let pass = r.loss_pct() <= cfg.tolerance_pct;
        let short = r.valid && r.offered_pps < 0.95 * target as f64;
        if pass {
            best = Some(best.map_or(r.offered_pps, |b| b.max(r.offered_pps)));
            if step == 0 || short {
                // Passed at the top, or the generator is the limit: done.
                limited = short;
                break;
            }
            lo = target;
        } else if short {
            hi = (r.offered_pps as u64).clamp(lo, target);
        } else {
            hi = target;
        }
        let next = lo + (hi - lo) / 2;
        if next == target || hi <= lo {
            break;
        }
        target = next;
    }
    let trials = out.len() as u32;
    (
        out,
        SweepResult {
            zero_loss_pps: best,
            trials,
            generator_limited: limited,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(offered: f64, sent: u64, received: u64) -> Trial {
        Trial {
            offered_pps: offered,
            sent,
            lost: sent - received,
            valid: true,
        }
    }

    /// A path that loses 10 % above 100 kpps; the generator reaches any rate.
    fn knee_at_100k(target: u64) -> (u64, Trial) {
        let sent = target * 2;
        let received = if target <= 100_000 {
            sent
        } else {
            sent * 9 / 10
        };
        (target, trial(target as f64, sent, received))
    }

    #[test]
    fn finds_the_knee_within_the_resolution_starting_at_the_top() {
        let cfg = SweepCfg {
            min_pps: 10_000,
            max_pps: 250_000,
            steps: 8,
            tolerance_pct: 0.1,
        };
        let (tried, r) = search(cfg, knee_at_100k);
        assert_eq!(tried[0], 250_000, "RFC 2544: start at the maximum rate");
        assert_eq!(r.trials, 8);
        let k = r.zero_loss_pps.unwrap();
        // 240 kpps halved 7 times: within ~2 kpps below the knee.
        assert!((98_000.0..=100_000.0).contains(&k), "{k}");
        assert!(!r.generator_limited);
    }

    #[test]
    fn passing_at_the_top_stops_and_a_weak_generator_is_flagged() {
        let cfg = SweepCfg {
            min_pps: 10_000,
            max_pps: 50_000,
            steps: 6,
            tolerance_pct: 0.1,
        };
        let (tried, r) = search(cfg, knee_at_100k);
        assert_eq!((tried.len(), r.zero_loss_pps), (1, Some(50_000.0)));
        let cfg = SweepCfg {
            max_pps: 200_000,
            ..cfg
        };
        let (_, r) = search(cfg, |t| (t, trial(30_000.0, 60_000, 60_000)));
        assert!(r.generator_limited);
        assert_eq!(r.zero_loss_pps, Some(30_000.0));
    }

    #[test]
    fn a_failure_below_the_target_rate_bounds_the_search_at_the_rate_offered() {
        // The generator tops out at 30 kpps; the path loses above 20 kpps.
        let capped = |target: u64| {
            let offered = target.min(30_000);
            let sent = offered * 2;
            let received = if offered <= 20_000 {
                sent
            } else {
                sent * 8 / 10
            };
            (offered, trial(offered as f64, sent, received))
        };
        let cfg = SweepCfg {
            min_pps: 5_000,
            max_pps: 400_000,
            steps: 3,
            tolerance_pct: 0.1,
        };
        let (tried, r) = search(cfg, capped);
        // 400k asked, 30k offered and failed: next 5k + (30k - 5k) / 2.
        assert_eq!(tried, vec![30_000, 17_500, 23_750]);
        assert_eq!(r.zero_loss_pps, Some(17_500.0));
    }

    #[test]
    fn tolerance_and_invalid_trials() {
        assert!(trial(1.0, 10_000, 9_991).loss_pct() <= 0.1);
        assert!(trial(1.0, 10_000, 9_989).loss_pct() > 0.1);
        let mut t = trial(1.0, 10, 10);
        t.valid = false;
        assert_eq!(t.loss_pct(), 100.0);
        // Nothing passes: no knee.
        let cfg = SweepCfg {
            min_pps: 1_000,
            max_pps: 8_000,
            steps: 5,
            tolerance_pct: 0.1,
        };
        let (tried, r) = search(cfg, |x| (x, trial(x as f64, 100, 50)));
        assert_eq!(r.zero_loss_pps, None);
        assert_eq!(tried, vec![8_000, 4_500, 2_750, 1_875, 1_437]);
    }
}
