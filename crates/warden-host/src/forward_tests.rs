//! [`crate::Host::forward`] and [`crate::Host::servers_offering`]: a server whose transport
//! does not forward (the deprecated HTTP+SSE transport, a relay) is not offered for
//! resources, prompts or completion whatever it declared, and a method outside
//! [`warden_mcp::FORWARDED_METHODS`] is refused by the host before reaching any transport.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use warden_mcp::launcher::StopReport;
use warden_mcp::{CallError, CallOutcome, Connection, Era, ServerInfo, ToolDef};
use warden_policy::Policy;

use crate::test_support::spec_named as spec;

use crate::host::{HostError, test_host};

/// A server that declares resources and prompts and records every request that reached
/// it; `forwards` says whether its transport forwards them.
struct Declaring {
    name: String,
    info: ServerInfo,
    forwards: bool,
    reached: Arc<Mutex<Vec<String>>>,
}

impl Connection for Declaring {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn list_tools(&self, _timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn call_tool<'a>(
        &'a self,
        _name: &'a str,
        _arguments: Option<Map<String, Value>>,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        Box::pin(async {
            Err(CallError::Timeout {
                after: Duration::ZERO,
            })
        })
    }

    fn forwards(&self) -> bool {
        self.forwards
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        _params: Map<String, Value>,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        self.reached.lock().unwrap().push(method.to_owned());
        Box::pin(async { Ok(json!({"resources": []})) })
    }

    fn stderr_tail(&self, _count: usize) -> Vec<String> {
        Vec::new()
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(async {
            StopReport {
                status: "closed".into(),
                signals: Vec::new(),
            }
        })
    }
}

fn declaring(name: &str, forwards: bool, reached: &Arc<Mutex<Vec<String>>>) -> Box<dyn Connection> {
    Box::new(Declaring {
        name: name.into(),
        info: ServerInfo {
            era: Era::Legacy,
            protocol_version: "2025-11-25".into(),
            name: None,
            version: None,
            title: None,
            capabilities: json!({"tools": {}, "resources": {}, "prompts": {}}),
            instructions: None,
            program: None,
            connect_attempts: 1,
        },
        forwards,
        reached: Arc::clone(reached),
    })
}

fn refusal(result: Result<Value, HostError>) -> String {
    match result {
        Err(HostError::Call {
            source:
                CallError::Rejected {
                    code: -32601,
                    message,
                },
            ..
        }) => message,
        other => panic!("expected a -32601 refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_transport_that_does_not_forward_is_not_offered_and_not_sent_to() {
    let streamable = Arc::new(Mutex::new(Vec::new()));
    let sse = Arc::new(Mutex::new(Vec::new()));
    let policy = Arc::new(Policy::compile(&Default::default()).unwrap());
    let host = test_host(
        policy,
        vec![
            (spec("legacy"), declaring("legacy", false, &sse), Vec::new()),
            (
                spec("modern"),
                declaring("modern", true, &streamable),
                Vec::new(),
            ),
        ],
        None,
    );
    // Both declared resources; only the one whose transport forwards is offered.
    assert_eq!(host.servers_offering("resources"), ["modern"]);
    assert_eq!(host.servers_offering("prompts"), ["modern"]);
    let refused = refusal(host.forward("legacy", "resources/list", Map::new()).await);
    assert!(
        refused.contains("`legacy`") && refused.contains("transport"),
        "{refused}"
    );
    assert!(sse.lock().unwrap().is_empty());
    // Control: the forwarding server is read.
    let listed = host
        .forward("modern", "resources/list", Map::new())
        .await
        .unwrap();
    assert_eq!(listed, json!({"resources": []}));
    assert_eq!(*streamable.lock().unwrap(), ["resources/list"]);
}

#[tokio::test]
async fn a_method_outside_the_forwarded_reads_is_refused_by_the_host() {
    let reached = Arc::new(Mutex::new(Vec::new()));
    let policy = Arc::new(Policy::compile(&Default::default()).unwrap());
    let host = test_host(
        policy,
        vec![(spec("s"), declaring("s", true, &reached), Vec::new())],
        None,
    );
    for method in [
        "tools/call",
        "resources/subscribe",
        "sampling/createMessage",
    ] {
        let refused = refusal(host.forward("s", method, Map::new()).await);
        assert!(refused.contains(method), "{refused}");
    }
    // Nothing reached the transport; a forwarded read does.
    assert!(reached.lock().unwrap().is_empty());
    host.forward("s", "prompts/list", Map::new()).await.unwrap();
    assert_eq!(*reached.lock().unwrap(), ["prompts/list"]);
}
