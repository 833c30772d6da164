//! Retries of model requests: jittered exponential backoff, the provider's `retry-after`
//! honoured, within a budget of attempts and of total waiting.

use std::future::Future;
use std::time::Duration;

use super::ModelError;

/// How transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first backoff; each later one doubles, up to `max_delay`.
    pub base_delay: Duration,
    /// The longest single wait (also caps a provider's `retry-after`).
    pub max_delay: Duration,
    /// The most time spent waiting, over all retries of one request.
    pub max_total_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_total_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before attempt `attempt + 1` (from 1) after `error`: the provider's
    /// `retry-after` when it gave one, else full jitter over the doubled backoff.
    pub fn delay(&self, attempt: u32, error: &ModelError) -> Duration {
        if let Some(seconds) = error.retry_after() {
            return Duration::from_secs_f64(seconds).min(self.max_delay);
        }
        let ceiling = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max_delay);
        ceiling.mul_f64(jitter())
    }

    /// Starts counting the attempts of one request.
    pub fn start(&self) -> Attempts {
        Attempts {
            policy: *self,
            made: 0,
            waited: Duration::ZERO,
        }
    }

    /// Runs `attempt` until it succeeds, fails for good, or the budget is spent.
    pub async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ModelError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ModelError>>,
    {
        let mut attempts = self.start();
        loop {
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) => attempts.wait_or_fail(error).await?,
            }
        }
    }
}

/// The attempts made so far at one request.
#[derive(Debug)]
pub struct Attempts {
    policy: RetryPolicy,
    made: u32,
    waited: Duration,
}

impl Attempts {
    /// After a failed attempt: waits before the next one, or returns the error to give up
    /// with (not transient, or the budget of attempts or of waiting is spent).
    pub async fn wait_or_fail(&mut self, error: ModelError) -> Result<(), ModelError> {
        self.wait_or_fail_telling(error, &mut super::NoText).await
    }

    /// [`wait_or_fail`](Attempts::wait_or_fail), telling `sink` about each retry.
    pub async fn wait_or_fail_telling(
        &mut self,
        error: ModelError,
        sink: &mut dyn super::TextSink,
    ) -> Result<(), ModelError> {
        self.made += 1;
        let made = self.made;
        if !error.is_transient() || made >= self.policy.max_attempts {
            return Err(if made > 1 {
                ModelError::GaveUp {
                    attempts: made,
                    last: Box::new(error),
                }
            } else {
                error
            });
        }
        let delay = self.policy.delay(made, &error);
        if self.waited + delay > self.policy.max_total_wait {
            return Err(ModelError::GaveUp {
                attempts: made,
                last: Box::new(error),
            });
        }
        tracing::debug!("model request failed ({error}); retrying in {delay:?}");
        sink.retrying(&format!(
            "the model request failed ({error}); retry {} of {} in {:.1} s",
            made,
            self.policy.max_attempts - 1,
            delay.as_secs_f64()
        ));
        tokio::time::sleep(delay).await;
        self.waited += delay;
        Ok(())
    }
}

/// A number in [0, 1) from the clock's low bits: enough to spread retries of many clients,
/// without a random-number dependency.
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    // A multiplicative hash spreads nearby clock readings.
    let mixed = nanos.wrapping_mul(2_654_435_761);
    f64::from(mixed) / (f64::from(u32::MAX) + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn status(code: u16, retry_after: Option<f64>) -> ModelError {
        ModelError::Status {
            provider: "test",
            status: code,
            message: "x".into(),
            retry_after,
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay(1, &status(429, Some(2.0))),
            Duration::from_secs(2)
        );
        assert_eq!(policy.delay(1, &status(429, Some(1e6))), policy.max_delay);
        for attempt in 1..6 {
            let delay = policy.delay(attempt, &status(500, None));
            assert!(
                delay <= policy.base_delay * (1 << (attempt - 1)),
                "{delay:?}"
            );
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn transient_errors_are_retried_within_the_budget_and_others_are_not() {
        let policy = RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = policy
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(status(503, Some(0.1)))
            })
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert!(matches!(
            result,
            Err(ModelError::GaveUp { attempts: 3, .. })
        ));

        calls.store(0, Ordering::SeqCst);
        let result: Result<(), _> = policy
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(status(400, None))
            })
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(matches!(
            result,
            Err(ModelError::Status { status: 400, .. })
        ));

        calls.store(0, Ordering::SeqCst);
        let result = policy
            .run(|| async {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(status(429, Some(1.0)))
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(result.unwrap(), 7);
    }
}
