//! When to try a remote server again: only after transient failures (a 5xx, a refused or
//! reset connection, a timeout), a bounded number of times, backing off exponentially with
//! full jitter so many hosts do not hammer a recovering server in step.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use warden_config::ReconnectSpec;

/// The back-off before retry number `attempt` (0-based): a uniformly random duration
/// between zero and `min(max_delay, initial_delay * 2^attempt)`.
pub fn backoff(spec: &ReconnectSpec, attempt: u32) -> Duration {
    let ceiling = spec
        .initial_delay
        .checked_mul(1u32.checked_shl(attempt.min(30)).unwrap_or(u32::MAX))
        .unwrap_or(spec.max_delay)
        .min(spec.max_delay);
    ceiling.mul_f64(jitter())
}

/// A random fraction in `[0, 1)`, from the standard library's randomly keyed hasher.
fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_its_ceiling_and_caps() {
        let spec = ReconnectSpec {
            connect_attempts: 3,
            attempts: 5,
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(8),
        };
        for attempt in 0..40 {
            let ceiling = Duration::from_secs(1 << attempt.min(3));
            for _ in 0..50 {
                assert!(backoff(&spec, attempt) <= ceiling, "attempt {attempt}");
            }
        }
        // Full jitter: not always the ceiling.
        let samples: Vec<_> = (0..50).map(|_| backoff(&spec, 3)).collect();
        assert!(samples.iter().any(|d| *d < Duration::from_secs(7)));
    }
}
