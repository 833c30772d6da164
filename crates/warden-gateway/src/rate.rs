//! Per-client request rates: a token bucket per client, so one client cannot flood the
//! gateway (and through it the upstream servers) however few requests it keeps in flight.
//!
//! A client is a 2025-11-25 session (by its id, once the session exists) or, for requests
//! outside a session (`initialize`, 2026-07-28 requests), the principal: the bearer token's
//! name, or the one loopback principal. A bucket holds at most `burst` requests and refills
//! at `per_second`; a request that finds it empty is refused with how long to wait. The
//! map is bounded: buckets of sessions that no longer exist are dropped when it grows past
//! its bound.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How fast each client may send requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Requests per second, sustained.
    pub per_second: f64,
    /// Requests at once after a quiet time.
    pub burst: f64,
}

impl Default for Rate {
    fn default() -> Self {
        Rate {
            per_second: 50.0,
            burst: 100.0,
        }
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every client.
pub struct Limiter {
    rate: Rate,
    buckets: Mutex<HashMap<String, Bucket>>,
    /// Buckets kept before the ones of gone clients are dropped.
    bound: usize,
}

/// A refused request: how long until the client's bucket holds a request again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refused {
    /// The wait.
    pub retry_after: Duration,
}

impl Limiter {
    /// Buckets for clients sending at `rate`; at most about `bound` clients are tracked.
    pub fn new(rate: Rate, bound: usize) -> Limiter {
        Limiter {
            rate: Rate {
                per_second: rate.per_second.max(0.001),
                burst: rate.burst.max(1.0),
            },
            buckets: Mutex::new(HashMap::new()),
            bound: bound.max(16),
        }
    }

    /// The rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Takes one request from `client`'s bucket at `now`. `alive` says whether a tracked
    /// client still exists, asked only when the map has grown past its bound.
    pub fn take(
        &self,
        client: &str,
        now: Instant,
        alive: impl Fn(&str) -> bool,
    ) -> Result<(), Refused> {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= self.bound && !buckets.contains_key(client) {
            buckets.retain(|key, _| alive(key));
        }
        let bucket = buckets.entry(client.to_owned()).or_insert(Bucket {
            tokens: self.rate.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate.per_second).min(self.rate.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            // A bucket is never overdrawn nor over its burst (the simulator's HTTP clients
            // and the rate tests run with this checked).
            debug_assert!(
                (0.0..=self.rate.burst).contains(&bucket.tokens),
                "a rate bucket at {} tokens (burst {})",
                bucket.tokens,
                self.rate.burst
            );
            Ok(())
        } else {
            let missing = 1.0 - bucket.tokens;
            Err(Refused {
                retry_after: Duration::from_secs_f64(missing / self.rate.per_second),
            })
        }
    }

    /// Clients tracked now (for tests).
    pub fn tracked(&self) -> usize {
        self.buckets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_the_excess_is_refused_and_time_refills() {
        let limiter = Limiter::new(
            Rate {
                per_second: 2.0,
                burst: 3.0,
            },
            64,
        );
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.take("a", start, |_| true), Ok(()));
        }
        let refused = limiter.take("a", start, |_| true).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_millis(500));
        // Another client has a bucket of its own.
        assert_eq!(limiter.take("b", start, |_| true), Ok(()));
        // Half a second later one request has come back, not more.
        let later = start + Duration::from_millis(500);
        assert_eq!(limiter.take("a", later, |_| true), Ok(()));
        assert!(limiter.take("a", later, |_| true).is_err());
        // A long quiet time refills up to the burst only.
        let much_later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(limiter.take("a", much_later, |_| true), Ok(()));
        }
        assert!(limiter.take("a", much_later, |_| true).is_err());
    }

    #[test]
    fn buckets_of_gone_clients_are_dropped_past_the_bound() {
        let limiter = Limiter::new(Rate::default(), 16);
        let now = Instant::now();
        for n in 0..16 {
            limiter.take(&format!("s:{n}"), now, |_| true).unwrap();
        }
        assert_eq!(limiter.tracked(), 16);
        // Past the bound, only the clients still alive are kept.
        limiter.take("p:loopback", now, |key| key == "s:3").unwrap();
        assert_eq!(limiter.tracked(), 2);
    }
}
