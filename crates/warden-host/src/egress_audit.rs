//! Egress proxy events as audit rows: every connection a server with a network allowlist
//! attempts, allowed or refused, is one row of the audit log beside its tool calls, so
//! `warden audit --server NAME` shows what it tried to reach.
//!
//! The row reuses the tool-call columns: front end `egress`, tool `egress METHOD
//! HOST:PORT`, the destination and byte counts as its arguments, decision `allow` or
//! `deny`, approved by `allowlist` (the entry that matched is in the arguments), outcome
//! `ok`, `failed` (allowed, then cut or failed) or `denied`, the reason as its error, the
//! connection's duration as its latency and the bytes received as its result size.

use std::sync::Arc;

use serde_json::json;
use warden_egress::{Decision, EgressEvent, EgressSink};
use warden_store::AuditEntry;

use crate::audit::AuditLog;

/// The `front_end` of egress rows.
pub const FRONT_END: &str = "egress";

/// A sink that writes each event to `log`.
pub fn audit_sink(log: Arc<AuditLog>) -> EgressSink {
    Arc::new(move |event: &EgressEvent| log.write_entry(&entry(event)))
}

/// The audit row of one event.
pub fn entry(event: &EgressEvent) -> AuditEntry {
    let allowed = event.decision == Decision::Allowed;
    let destination = if event.host.is_empty() {
        "(unreadable request)".to_owned()
    } else {
        format!("{}:{}", event.host, event.port)
    };
    let method = if event.method.is_empty() {
        "?"
    } else {
        event.method.as_str()
    };
    AuditEntry {
        time_ms: event.time_ms,
        front_end: FRONT_END.to_owned(),
        client: None,
        server: event.server.to_string(),
        tool: format!("egress {method} {destination}"),
        arguments: json!({
            "method": event.method,
            "host": event.host,
            "port": event.port,
            "address": event.address.map(|a| a.to_string()),
            "rule": event.rule,
            "bytes_up": event.bytes_up,
            "bytes_down": event.bytes_down,
        }),
        decision: Some(event.decision.as_str().to_owned()),
        reasons: match (&event.rule, allowed) {
            (Some(rule), true) => {
                json!([{"kind": "egress", "text": format!("allowlist entry {rule:?}")}])
            }
            _ => json!([{"kind": "egress", "text": event.error.clone().unwrap_or_default()}]),
        },
        approved_by: allowed.then(|| "allowlist".to_owned()),
        executed: allowed,
        outcome: match (allowed, &event.error) {
            (true, None) => "ok",
            (true, Some(_)) => "failed",
            (false, _) => "denied",
        }
        .to_owned(),
        error: event.error.clone(),
        latency_ms: Some(i64::try_from(event.duration.as_millis()).unwrap_or(i64::MAX)),
        result_bytes: Some(i64::try_from(event.bytes_down).unwrap_or(i64::MAX)),
    }
}
