//! The stdio transport's reader and its JSON-RPC classification: a server's stdout goes
//! through `StdioTransport` (line cap, fault count, rmcp's message types). Every message
//! that comes out must survive a round trip through its encoder (serialise, parse again:
//! the same value), no more messages may come out than there were lines, and a transport
//! that failed must say why.
//!
//! Input: byte 0 picks the fault limit, the rest is the server's stdout.

use rmcp::RoleClient;
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::Transport;
use warden_mcp::stdio::{StdioLimits, StdioTransport};

/// Decodes one input and checks the messages.
pub fn run(data: &[u8]) {
    let Some((&faults, stdout)) = data.split_first() else {
        return;
    };
    let limits = StdioLimits {
        max_message_bytes: 4096,
        max_protocol_faults: u64::from(faults % 8),
    };
    let lines = stdout.split(|&b| b == b'\n').count();
    let stdout = std::io::Cursor::new(stdout.to_vec());
    crate::block_on(async move {
        let (mut transport, _closer, health) =
            StdioTransport::new("fuzz".into(), tokio::io::sink(), stdout, limits);
        let mut received = 0;
        while let Some(message) = transport.receive().await {
            received += 1;
            assert!(received <= lines, "more messages than lines");
            // rmcp's result types are untagged: an ambiguous result (a call result with an
            // empty `content` beside a duplicate key) may be classified once more on the
            // first re-parse. So the property is that a re-encoded message parses, and that
            // from the second encoding on, the round trip is exact.
            let first = serde_json::to_value(&message).unwrap();
            let again: RxJsonRpcMessage<RoleClient> = serde_json::from_value(first.clone())
                .unwrap_or_else(|e| panic!("re-encoded message does not parse: {e}: {first}"));
            let value = serde_json::to_value(&again).unwrap();
            let third: RxJsonRpcMessage<RoleClient> = serde_json::from_value(value.clone())
                .unwrap_or_else(|e| panic!("re-encoded message does not parse: {e}: {value}"));
            assert_eq!(serde_json::to_value(&third).unwrap(), value, "round trip");
        }
        if let Some(reason) = health.fatal() {
            assert!(
                reason.contains("fuzz"),
                "a failure names the server: {reason}"
            );
        }
        assert!(health.protocol_faults() <= limits.max_protocol_faults + 1);
    });
}
