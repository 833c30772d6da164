//! What the gateway has done, counted, and rendered as Prometheus text for `GET /metrics`.
//!
//! Written by hand (the exposition format is a few lines of text; no new dependency).
//! Every label value comes from a closed set or from the configuration, never from what a
//! client sends: a request's method is one of [`METHODS`] or `other`, a refusal's reason
//! one of a fixed list of words, an upstream call's server a configured server name. Tool
//! names and arguments are never labels. So the number of series is bounded by the
//! configuration, whatever clients do.
//!
//! Counters sit behind one mutex held only to add one or to render: an update is a map
//! lookup, far below a request's cost.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The request methods counted under their own name; anything else is `other`.
pub const METHODS: [&str; 18] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "subscriptions/listen",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "other",
];

/// Upper bounds of the latency buckets, in seconds.
pub const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

/// Why a request or a call was refused (the label values of
/// `warden_refusals_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// `Host` or `Origin` not allowed (DNS rebinding, a foreign page): 403.
    Forbidden,
    /// No or a wrong bearer token: 401.
    Unauthorized,
    /// A request the gate could not read (no `Host`): 400.
    BadRequest,
    /// Body too large: 413.
    BodyTooLarge,
    /// Past the client's request rate: 429.
    Rate,
    /// Past the client's requests in flight: 429.
    InFlight,
    /// Past the session cap: 503.
    Sessions,
    /// An unknown, expired or foreign session id: 404.
    UnknownSession,
    /// Headers disagreeing with the body (2026-07-28): -32020.
    HeaderMismatch,
    /// The policy denied a call.
    PolicyDenied,
    /// The policy asked and nobody approved.
    NotApproved,
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::Forbidden => "forbidden",
            Refusal::Unauthorized => "unauthorized",
            Refusal::BadRequest => "bad_request",
            Refusal::BodyTooLarge => "body_too_large",
            Refusal::Rate => "rate",
            Refusal::InFlight => "in_flight",
            Refusal::Sessions => "sessions",
            Refusal::UnknownSession => "unknown_session",
            Refusal::HeaderMismatch => "header_mismatch",
            Refusal::PolicyDenied => "policy_denied",
            Refusal::NotApproved => "not_approved",
        }
    }
}

/// How an upstream call ended (`warden_upstream_calls_total{outcome}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CallOutcome {
    /// A result.
    Ok,
    /// A result the tool marked `isError`.
    ToolError,
    /// No result (the server failed, timed out, or was gone).
    Failed,
}

impl CallOutcome {
    fn label(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::Failed => "failed",
        }
    }
}

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bound, count) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Default)]
struct Counters {
    /// (method, outcome) -> requests.
    requests: BTreeMap<(&'static str, &'static str), u64>,
    /// method -> latency.
    latency: BTreeMap<&'static str, Histogram>,
    /// (server, outcome) -> calls.
    upstream: BTreeMap<(String, &'static str), u64>,
    /// server -> latency of its calls.
    upstream_latency: BTreeMap<String, Histogram>,
    refusals: BTreeMap<Refusal, u64>,
}

/// The gateway's counters.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
}

/// The label of a request method: itself when it is one of [`METHODS`], else `other`.
pub fn method_label(method: &str) -> &'static str {
    METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other")
}

impl Metrics {
    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One request answered: its method, whether it succeeded, how long it took.
    pub fn request(&self, method: &str, ok: bool, took: Duration) {
        let method = method_label(method);
        let outcome = if ok { "ok" } else { "error" };
        let mut counters = self.counters();
        *counters.requests.entry((method, outcome)).or_default() += 1;
        counters
            .latency
            .entry(method)
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// One call sent to the upstream server `server` (a configured name).
    pub fn upstream(&self, server: &str, outcome: CallOutcome, took: Duration) {
        let mut counters = self.counters();
        *counters
            .upstream
            .entry((server.to_owned(), outcome.label()))
            .or_default() += 1;
        match counters.upstream_latency.get_mut(server) {
            Some(histogram) => histogram.observe(took.as_secs_f64()),
            None => {
                let mut histogram = Histogram::default();
                histogram.observe(took.as_secs_f64());
                counters
                    .upstream_latency
                    .insert(server.to_owned(), histogram);
            }
        }
    }

    /// One refusal.
    pub fn refused(&self, why: Refusal) {
        *self.counters().refusals.entry(why).or_default() += 1;
    }

    /// The Prometheus text exposition of every counter, with the gauges given (open
    /// 2025-11-25 sessions, stateless principals).
    pub fn render(&self, sessions: usize, stateless_clients: usize) -> String {
        let counters = self.counters();
        let mut out = String::new();
        header(
            &mut out,
            "warden_requests_total",
            "counter",
            "MCP requests answered, by method and outcome.",
        );
        for ((method, outcome), count) in &counters.requests {
            let _ = writeln!(
                out,
                "warden_requests_total{{method=\"{method}\",outcome=\"{outcome}\"}} {count}"
            );
        }
        header(
            &mut out,
            "warden_request_duration_seconds",
            "histogram",
            "Time to answer an MCP request, by method.",
        );
        for (method, histogram) in &counters.latency {
            histogram_lines(
                &mut out,
                "warden_request_duration_seconds",
                &format!("method=\"{method}\""),
                histogram,
            );
        }
        header(
            &mut out,
            "warden_upstream_calls_total",
            "counter",
            "Calls sent to upstream servers, by server and outcome.",
        );
        for ((server, outcome), count) in &counters.upstream {
            let _ = writeln!(
                out,
                "warden_upstream_calls_total{{server=\"{}\",outcome=\"{outcome}\"}} {count}",
                escape(server)
            );
        }
        header(
            &mut out,
            "warden_upstream_call_duration_seconds",
            "histogram",
            "Time an upstream server took to answer a call, by server.",
        );
        for (server, histogram) in &counters.upstream_latency {
            histogram_lines(
                &mut out,
                "warden_upstream_call_duration_seconds",
                &format!("server=\"{}\"", escape(server)),
                histogram,
            );
        }
        header(
            &mut out,
            "warden_refusals_total",
            "counter",
            "Requests and calls refused, by reason.",
        );
        for (why, count) in &counters.refusals {
            let _ = writeln!(
                out,
                "warden_refusals_total{{reason=\"{}\"}} {count}",
                why.label()
            );
        }
        header(
            &mut out,
            "warden_open_sessions",
            "gauge",
            "Open 2025-11-25 sessions.",
        );
        let _ = writeln!(out, "warden_open_sessions {sessions}");
        header(
            &mut out,
            "warden_stateless_clients",
            "gauge",
            "2026-07-28 clients (principals) with a policy context.",
        );
        let _ = writeln!(out, "warden_stateless_clients {stateless_clients}");
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn histogram_lines(out: &mut String, name: &str, labels: &str, histogram: &Histogram) {
    for (bound, count) in BUCKETS.iter().zip(histogram.counts.iter()) {
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
    }
    let _ = writeln!(
        out,
        "{name}_bucket{{{labels},le=\"+Inf\"}} {}",
        histogram.count
    );
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", histogram.sum);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", histogram.count);
}

/// A label value as the exposition format writes it (`\`, `"` and newlines escaped).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_strings_never_become_labels() {
        let metrics = Metrics::default();
        metrics.request("tools/call", true, Duration::from_millis(2));
        metrics.request("x-made-up/method\"}", false, Duration::from_millis(1));
        metrics.request("another/made-up", false, Duration::from_millis(1));
        let text = metrics.render(0, 0);
        assert!(text.contains("warden_requests_total{method=\"tools/call\",outcome=\"ok\"} 1"));
        assert!(text.contains("warden_requests_total{method=\"other\",outcome=\"error\"} 2"));
        assert!(!text.contains("made-up"), "{text}");
    }

    #[test]
    fn histograms_are_cumulative_and_end_in_inf() {
        let metrics = Metrics::default();
        metrics.upstream("time", CallOutcome::Ok, Duration::from_millis(3));
        metrics.upstream("time", CallOutcome::Failed, Duration::from_secs(2));
        let text = metrics.render(2, 1);
        assert!(text.contains(
            "warden_upstream_call_duration_seconds_bucket{server=\"time\",le=\"0.005\"} 1"
        ));
        assert!(
            text.contains(
                "warden_upstream_call_duration_seconds_bucket{server=\"time\",le=\"5\"} 2"
            )
        );
        assert!(text.contains(
            "warden_upstream_call_duration_seconds_bucket{server=\"time\",le=\"+Inf\"} 2"
        ));
        assert!(text.contains("warden_upstream_calls_total{server=\"time\",outcome=\"failed\"} 1"));
        assert!(text.contains("warden_open_sessions 2"));
        assert!(text.contains("warden_stateless_clients 1"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
