//! When to try a remote server again: only after transient failures (a 5xx, a refused or
//! reset connection, a timeout), a bounded number of times, backing off exponentially with
//! full jitter so many hosts do not hammer a recovering server in step.
//!
//! The policy's time and randomness are injected (decision 0031): a [`Clock`] that sleeps
//! and a [`SeededRng`] that draws the jitter. Production uses tokio's clock and a generator
//! seeded once from the process's entropy; the simulator (`crates/warden-sim`) uses a
//! virtual clock and the seed of the run, so a failing interleaving replays exactly. The
//! two retry loops ([`first_connect`] and [`reconnect`]) take the dialling step as a
//! closure, so the simulator drives the same loops the connections run.

use std::fmt::{self, Debug, Display};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use warden_config::ReconnectSpec;

/// Time as the reconnect policy sees it.
pub trait Clock: Send + Sync + Debug {
    /// Waits `duration`.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// The runtime's clock (tokio's timer).
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A small deterministic generator (SplitMix64): the same seed, the same draws.
#[derive(Debug, Clone)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> SeededRng {
        SeededRng(seed)
    }

    /// A generator seeded from the process's entropy (the standard library's randomly
    /// keyed hasher over the time), for production: hosts do not back off in step.
    pub fn from_entropy() -> SeededRng {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        SeededRng(hasher.finish())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniformly random fraction in `[0, 1)`.
    pub fn fraction(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniformly random number below `bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }
}

/// The longest back-off before retry number `attempt` (0-based):
/// `min(max_delay, initial_delay * 2^attempt)`.
pub fn ceiling(spec: &ReconnectSpec, attempt: u32) -> Duration {
    spec.initial_delay
        .checked_mul(1u32.checked_shl(attempt.min(30)).unwrap_or(u32::MAX))
        .unwrap_or(spec.max_delay)
        .min(spec.max_delay)
}

/// The back-off before retry number `attempt` (0-based) with the jitter drawn from `rng`:
/// a uniformly random duration between zero and [`ceiling`].
pub fn backoff_with(spec: &ReconnectSpec, attempt: u32, rng: &mut SeededRng) -> Duration {
    let ceiling = ceiling(spec, attempt);
    let delay = ceiling.mul_f64(rng.fraction());
    debug_assert!(delay <= ceiling, "a back-off over its ceiling");
    delay
}

/// The back-off before retry number `attempt` (0-based), from a process-wide generator
/// seeded once from entropy.
pub fn backoff(spec: &ReconnectSpec, attempt: u32) -> Duration {
    static RNG: Mutex<Option<SeededRng>> = Mutex::new(None);
    let mut rng = RNG.lock().unwrap_or_else(PoisonError::into_inner);
    backoff_with(
        spec,
        attempt,
        rng.get_or_insert_with(SeededRng::from_entropy),
    )
}

/// A clock and a generator: what waiting between tries needs.
#[derive(Clone)]
pub struct Backoff {
    clock: Arc<dyn Clock>,
    rng: Arc<Mutex<SeededRng>>,
}

impl Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::system()
    }
}

impl Backoff {
    /// tokio's clock and a generator seeded from entropy.
    pub fn system() -> Backoff {
        Backoff::new(Arc::new(TokioClock), SeededRng::from_entropy())
    }

    /// An injected clock and generator (the simulator's).
    pub fn new(clock: Arc<dyn Clock>, rng: SeededRng) -> Backoff {
        Backoff {
            clock,
            rng: Arc::new(Mutex::new(rng)),
        }
    }

    /// Draws the back-off before retry `attempt` (0-based).
    pub fn delay(&self, spec: &ReconnectSpec, attempt: u32) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        backoff_with(spec, attempt, &mut rng)
    }

    /// Waits `delay` on the clock.
    pub fn sleep(&self, delay: Duration) -> BoxFuture<'static, ()> {
        self.clock.sleep(delay)
    }
}

/// The first connect's loop: up to `connect_attempts` tries (at least one), backing off
/// between them, stopping at the first success or at an error `transient` says is not
/// worth another try. Returns what `open` gave and the number of tries made.
pub async fn first_connect<T, E, F, Fut>(
    server: &str,
    spec: &ReconnectSpec,
    backoff: &Backoff,
    mut open: F,
    transient: impl Fn(&E) -> bool,
) -> (Result<T, E>, u32)
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let attempts = spec.connect_attempts.max(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        debug_assert!(attempt <= attempts, "connect tries over their budget");
        match open().await {
            Ok(value) => return (Ok(value), attempt),
            Err(error) if transient(&error) && attempt < attempts => {
                let delay = backoff.delay(spec, attempt - 1);
                tracing::info!(server = %server, "attempt {attempt} of {attempts} failed: {error}; next in {delay:?}");
                backoff.sleep(delay).await;
            }
            Err(error) => return (Err(error), attempt),
        }
    }
}

/// Whether a request that failed with a transient error is sent again once the server is
/// back: only when it never reached the server (`undelivered`: a refused connection, a
/// 503) or when it only reads (anything but `tools/call`); a call that may have run is
/// never run twice.
pub fn resend_after_reconnect(method: &str, undelivered: bool) -> bool {
    undelivered || method != "tools/call"
}

/// Where a remote connection stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Reconnects made since the last success.
    pub reconnects: u32,
    /// Set once the reconnect budget is spent: the reason calls fail at once.
    pub failed: Option<String>,
}

/// A connection's current session and its reconnect state: the budget, and a gate so that
/// one reconnect runs at a time. Callers whose requests failed together wait at the gate;
/// the first reconnects, the others find the new session (or the verdict that the server
/// failed) instead of spending the budget again, or, worse, marking the server failed
/// while a reconnect that will succeed is still under way (found by the simulator,
/// `crates/warden-sim`: seed 1 of the first run).
#[derive(Debug)]
pub struct Link<S> {
    session: std::sync::RwLock<Arc<S>>,
    health: Mutex<Health>,
    gate: tokio::sync::Mutex<()>,
}

impl<S> Link<S> {
    /// A link over a freshly opened session.
    pub fn new(session: S) -> Link<S> {
        Link {
            session: std::sync::RwLock::new(Arc::new(session)),
            health: Mutex::new(Health::default()),
            gate: tokio::sync::Mutex::new(()),
        }
    }

    /// The session requests go to now.
    pub fn current(&self) -> Arc<S> {
        self.session
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The budget and the verdict.
    pub fn health(&self) -> Health {
        self.health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the session after a request on `failed` failed with `cause`: reconnects
    /// within the budget of `attempts` reconnects since the last success, or marks the
    /// server failed and returns the reason. When another caller replaced `failed`
    /// meanwhile, its session is returned without a new try. An error `transient` says is
    /// not worth another try (needs sign-in, not found) ends the tries at once.
    #[allow(clippy::too_many_arguments)]
    pub async fn reconnect<E, F, Fut>(
        &self,
        server: &str,
        spec: &ReconnectSpec,
        backoff: &Backoff,
        failed: &Arc<S>,
        cause: String,
        mut open: F,
        transient: impl Fn(&E) -> bool,
    ) -> Result<Arc<S>, String>
    where
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<S, E>>,
    {
        let _one_at_a_time = self.gate.lock().await;
        let now = self.current();
        if !Arc::ptr_eq(&now, failed) {
            return Ok(now);
        }
        if let Some(reason) = self.health().failed {
            return Err(reason);
        }
        let lock = || self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let mut last = cause;
        loop {
            let attempt = {
                let mut health = lock();
                if health.reconnects >= spec.attempts {
                    break;
                }
                health.reconnects += 1;
                debug_assert!(health.reconnects <= spec.attempts, "reconnects over budget");
                health.reconnects - 1
            };
            backoff.sleep(backoff.delay(spec, attempt)).await;
            match open().await {
                Ok(session) => {
                    let session = Arc::new(session);
                    *self.session.write().unwrap_or_else(PoisonError::into_inner) = session.clone();
                    let mut health = lock();
                    debug_assert!(health.failed.is_none(), "a failed server reconnected");
                    health.reconnects = 0;
                    tracing::info!(server = %server, "reconnected after {} attempt(s)", attempt + 1);
                    return Ok(session);
                }
                Err(error) if transient(&error) => last = error.to_string(),
                Err(error) => {
                    last = error.to_string();
                    break;
                }
            }
        }
        let mut health = lock();
        let reason = format!(
            "marked failed after {} reconnect attempt(s); last error: {last}",
            health.reconnects
        );
        tracing::warn!(server = %server, "{reason}");
        health.failed = Some(reason.clone());
        Err(reason)
    }
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

    #[test]
    fn a_seed_replays_the_same_jitter_and_another_seed_does_not() {
        let spec = ReconnectSpec::default();
        let draws = |seed| {
            let mut rng = SeededRng::new(seed);
            (0..8)
                .map(|attempt| backoff_with(&spec, attempt, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
    }

    fn spec(attempts: u32) -> ReconnectSpec {
        ReconnectSpec {
            connect_attempts: 1,
            attempts,
            initial_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(20),
        }
    }

    fn tokio_backoff() -> Backoff {
        Backoff::new(Arc::new(TokioClock), SeededRng::new(1))
    }

    /// Replays the simulator's first finding: with a budget of one reconnect, a second
    /// call failing while the first call's reconnect was under way found the budget spent
    /// and marked the server failed for good, though the reconnect then succeeded.
    #[tokio::test]
    async fn callers_that_fail_together_share_one_reconnect() {
        let link = Link::new(0u32);
        let failed = link.current();
        let opens = std::sync::atomic::AtomicU32::new(0);
        let open = || async {
            opens.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<u32, String>(1)
        };
        let (spec, backoff) = (spec(1), tokio_backoff());
        let (a, b) = tokio::join!(
            link.reconnect("s", &spec, &backoff, &failed, "reset".into(), open, |_| {
                true
            }),
            link.reconnect("s", &spec, &backoff, &failed, "reset".into(), open, |_| {
                true
            }),
        );
        assert_eq!(a.map(|s| *s), Ok(1));
        assert_eq!(b.map(|s| *s), Ok(1));
        assert_eq!(
            opens.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "one reconnect"
        );
        assert_eq!(link.health(), Health::default(), "not marked failed");
        assert_eq!(*link.current(), 1);
    }

    #[tokio::test]
    async fn a_spent_budget_or_a_permanent_error_marks_the_server_failed() {
        let (backoff, failing) = (tokio_backoff(), || async {
            Err::<u32, String>("HTTP 502".into())
        });
        let link = Link::new(0u32);
        let failed = link.current();
        let spent = link
            .reconnect(
                "s",
                &spec(2),
                &backoff,
                &failed,
                "reset".into(),
                failing,
                |_| true,
            )
            .await;
        assert!(spent.is_err_and(|reason| reason.contains("2 reconnect attempt(s)")));
        assert!(link.health().failed.is_some());
        // Later callers are told at once, without another try.
        let again = link
            .reconnect(
                "s",
                &spec(2),
                &backoff,
                &failed,
                "reset".into(),
                || async { Ok::<u32, String>(9) },
                |_| true,
            )
            .await;
        assert!(again.is_err());
        assert_eq!(*link.current(), 0);

        // 401: one try, then failed, though the budget had room.
        let link = Link::new(0u32);
        let failed = link.current();
        let tries = std::sync::atomic::AtomicU32::new(0);
        let refused = || async {
            tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err::<u32, String>("HTTP 401".into())
        };
        let stopped = link
            .reconnect(
                "s",
                &spec(5),
                &backoff,
                &failed,
                "reset".into(),
                refused,
                |_| false,
            )
            .await;
        assert!(stopped.is_err_and(|reason| reason.contains("HTTP 401")));
        assert_eq!(tries.load(std::sync::atomic::Ordering::SeqCst), 1);

        // Positive control: a server that comes back is reconnected.
        let link = Link::new(0u32);
        let failed = link.current();
        let back = link
            .reconnect(
                "s",
                &spec(1),
                &backoff,
                &failed,
                "reset".into(),
                || async { Ok::<u32, String>(2) },
                |_| true,
            )
            .await;
        assert_eq!(back.map(|s| *s), Ok(2));
    }
}
