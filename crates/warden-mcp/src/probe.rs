//! The stdio era probe of the 2026-07-28 revision: ask `server/discover` before anything
//! else, and decide from the answer which lifecycle to run.
//!
//! - a result, or a recognised modern error (unsupported version, missing capability,
//!   header mismatch), means the server is modern: run the discover lifecycle, which also
//!   retries with a version the server names;
//! - any other error, or silence for [`probe_limit`], means legacy: run `initialize`.
//!
//! The fallback never keys on one error code, as the revision asks, and the probe has its
//! own short limit, so a legacy server that ignores unknown requests still connects well
//! within the connect timeout.

use std::time::Duration;

use rmcp::model::{JsonRpcMessage, RequestId};
use serde_json::json;
use tokio::io::AsyncWrite;

use crate::stdio::StdioTransport;

/// The share of the connect timeout the probe may use; the rest is left for `initialize`.
/// Slow starters (a Python interpreter takes 1 to 3 s to import an SDK) must not be
/// mistaken for legacy servers, and a legacy server that ignores the probe must still have
/// time to connect.
pub fn probe_limit(connect_timeout: Duration) -> Duration {
    connect_timeout.mul_f64(0.7)
}
/// The probe's request id: a string, so it cannot collide with rmcp's numeric ids. A late
/// answer to it is dropped by the transport.
pub(crate) const PROBE_ID: &str = "warden-era-probe";
/// Error codes only a modern server sends.
pub(crate) const MODERN_ERRORS: [i32; 3] = [-32022, -32021, -32020];

/// What the probe concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Speak 2026-07-28.
    Modern,
    /// Run `initialize`; `why` says what the server did, `silent` whether it said nothing
    /// at all within the limit (a slow starter may still be a modern server).
    Legacy { why: String, silent: bool },
}

/// Sends `server/discover` and waits at most `limit` for its answer.
pub(crate) async fn probe<W>(transport: &mut StdioTransport<W>, limit: Duration) -> Verdict
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let request = json!({
        "jsonrpc": "2.0",
        "id": PROBE_ID,
        "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "warden", "version": env!("CARGO_PKG_VERSION")},
            "io.modelcontextprotocol/clientCapabilities": {},
        }},
    });
    if let Err(error) = transport.send_value(&request).await {
        return Verdict::Legacy {
            why: format!("server/discover could not be sent: {error}"),
            silent: false,
        };
    }
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let message = match tokio::time::timeout_at(deadline, transport.next_message()).await {
            Err(_) => {
                return Verdict::Legacy {
                    why: format!(
                        "no answer to server/discover within {}",
                        crate::error::humanize(limit)
                    ),
                    silent: true,
                };
            }
            Ok(None) => {
                return Verdict::Legacy {
                    why: "the server closed its output during server/discover".into(),
                    silent: false,
                };
            }
            Ok(Some(message)) => message,
        };
        match message {
            JsonRpcMessage::Response(response) if is_probe(&response.id) => return Verdict::Modern,
            JsonRpcMessage::Error(error) if error.id.as_ref().is_some_and(is_probe) => {
                let code = error.error.code.0;
                if MODERN_ERRORS.contains(&code) {
                    return Verdict::Modern;
                }
                return Verdict::Legacy {
                    why: format!(
                        "server/discover answered error {code}: {}",
                        error.error.message
                    ),
                    silent: false,
                };
            }
            other => {
                tracing::debug!("ignored during the era probe: {:?}", kind(&other));
            }
        }
    }
}

fn kind<A, B, C>(message: &JsonRpcMessage<A, B, C>) -> &'static str {
    match message {
        JsonRpcMessage::Request(_) => "a request",
        JsonRpcMessage::Response(_) => "a response to another id",
        JsonRpcMessage::Notification(_) => "a notification",
        JsonRpcMessage::Error(_) => "an error for another id",
    }
}

/// Whether a JSON-RPC id is the probe's.
pub(crate) fn is_probe(id: &RequestId) -> bool {
    matches!(id, RequestId::String(text) if &**text == PROBE_ID)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stdio::StdioLimits;
    use rmcp::transport::Transport;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A fake server on in-memory pipes: for every line it reads, `answer` gives the
    /// lines to write back.
    fn transport_with_server(
        answer: impl Fn(&serde_json::Value) -> Vec<String> + Send + 'static,
    ) -> StdioTransport<tokio::io::DuplexStream> {
        let (client_out, server_in) = tokio::io::duplex(64 * 1024);
        let (mut server_out, client_in) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let mut lines = BufReader::new(server_in).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let request: serde_json::Value = serde_json::from_str(&line).unwrap();
                for reply in answer(&request) {
                    server_out.write_all(reply.as_bytes()).await.unwrap();
                    server_out.write_all(b"\n").await.unwrap();
                }
            }
        });
        let (transport, _closer, _health) =
            StdioTransport::new("fake".into(), client_out, client_in, StdioLimits::default());
        transport
    }

    fn error_reply(request: &serde_json::Value, code: i32) -> Vec<String> {
        vec![json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": "no"}}).to_string()]
    }

    #[tokio::test]
    async fn a_discover_result_means_modern() {
        let mut transport = transport_with_server(|request| {
            vec![
                json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                "supportedVersions": ["2026-07-28"], "capabilities": {}, "resultType": "complete",
                "ttlMs": 0, "cacheScope": "private"}})
                .to_string(),
            ]
        });
        assert_eq!(
            probe(&mut transport, Duration::from_secs(2)).await,
            Verdict::Modern
        );
    }

    #[tokio::test]
    async fn a_modern_error_means_modern_and_any_other_error_means_legacy() {
        let mut transport = transport_with_server(|request| error_reply(request, -32022));
        assert_eq!(
            probe(&mut transport, Duration::from_secs(2)).await,
            Verdict::Modern
        );
        for code in [-32601, -32602, -32000] {
            let mut transport = transport_with_server(move |request| error_reply(request, code));
            let verdict = probe(&mut transport, Duration::from_secs(2)).await;
            assert!(
                matches!(&verdict, Verdict::Legacy { why, silent: false } if why.contains(&code.to_string())),
                "{verdict:?}"
            );
        }
    }

    #[tokio::test]
    async fn silence_means_legacy_and_a_late_answer_is_dropped() {
        let mut transport = transport_with_server(|request| {
            if request["method"] == "server/discover" {
                Vec::new()
            } else {
                // The late probe answer arrives first, then the real one.
                let mut late = error_reply(&json!({"id": PROBE_ID}), -32601);
                late.push(
                    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                        .to_string(),
                );
                late
            }
        });
        let verdict = probe(&mut transport, Duration::from_millis(200)).await;
        assert!(
            matches!(&verdict, Verdict::Legacy { why, silent: true } if why.contains("no answer")),
            "{verdict:?}"
        );
        transport
            .send_value(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
            .unwrap();
        let next = transport.receive().await.unwrap();
        assert!(
            matches!(next, JsonRpcMessage::Notification(_)),
            "the late answer must be skipped"
        );
    }
}
