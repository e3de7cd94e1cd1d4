//! Exponential backoff with jitter for the watchers (kube-rs's default: 0.8 s → 30 s,
//! factor 2). Pure: the caller passes the randomness seed and decides when to sleep;
//! nothing here reads a clock.

use std::time::Duration;

/// Backoff bounds; tests inject millisecond values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
        }
    }
}

/// Delays `initial·2ⁿ` capped at `max`, each scaled by a factor in [0.75, 1.25) so that
/// many watchers failing together do not retry in lockstep; `reset` after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    cfg: BackoffConfig,
    attempt: u32,
    rng: u64,
}

impl Backoff {
    pub fn new(cfg: BackoffConfig, seed: u64) -> Backoff {
        Backoff {
            cfg,
            attempt: 0,
            // xorshift must not start at zero.
            rng: seed | 1,
        }
    }

    /// The delay before the next attempt; grows until `max`.
    pub fn next_delay(&mut self) -> Duration {
        let base = self
            .cfg
            .initial
            .saturating_mul(1u32 << self.attempt.min(20))
            .min(self.cfg.max);
        self.attempt = self.attempt.saturating_add(1);
        // xorshift64 (Marsaglia 2003): enough to spread retries, no crate needed.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let permille = 750 + u32::try_from(self.rng % 500).unwrap_or(0);
        (base * permille / 1000).min(self.cfg.max)
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Failed attempts since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_jitters_and_resets() {
        let mut b = Backoff::new(BackoffConfig::default(), 42);
        let d: Vec<u128> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        let bases = [800u128, 1600, 3200, 6400, 12800, 25600, 30000, 30000];
        for (got, base) in d.iter().zip(bases) {
            assert!(
                *got >= base * 3 / 4 && *got <= base.min(30000) * 5 / 4,
                "{d:?}"
            );
            assert!(*got <= 30000);
        }
        assert_eq!(b.attempts(), 8);
        b.reset();
        let first = b.next_delay().as_millis();
        assert!((600..1000).contains(&first), "{first}");
    }
}
