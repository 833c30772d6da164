//! A shared host applying a server's changed tool list (`Host::refresh_tools` on `&self`):
//! the new list goes through the review as at connect, and a call decided on the old
//! catalogue is never sent with a definition it was not decided on.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use warden_config::ServerSpec;
use warden_mcp::launcher::StopReport;
use warden_mcp::{CallError, CallOutcome, Connection, Era, ServerInfo, ToolDef};
use warden_policy::Policy;

use crate::host::{HostError, NoReview, Review, test_host_reviewed};

/// What a [`Changing`] server lists and how often it was called; the test changes it.
#[derive(Default)]
struct Upstream {
    tools: Mutex<Vec<ToolDef>>,
    changed: AtomicBool,
    calls: AtomicUsize,
    /// How long each call takes.
    call_delay: Mutex<Duration>,
    /// Its announcements and the resources Warden subscribed to.
    notices: Arc<warden_mcp::ServerNotices>,
    /// How long reading the list takes.
    list_delay: Mutex<Duration>,
}

impl Upstream {
    /// Replaces the list and marks it changed, as `notifications/tools/list_changed` does.
    fn change(&self, tools: Vec<ToolDef>) {
        *self.tools.lock().unwrap() = tools;
        self.changed.store(true, Ordering::SeqCst);
    }
}

struct Changing {
    info: ServerInfo,
    upstream: Arc<Upstream>,
}

impl Connection for Changing {
    fn name(&self) -> &str {
        "s"
    }

    fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn list_tools(&self, _timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>> {
        let tools = self.upstream.tools.lock().unwrap().clone();
        let delay = *self.upstream.list_delay.lock().unwrap();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok(tools)
        })
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        _arguments: Option<Map<String, Value>>,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        self.upstream.calls.fetch_add(1, Ordering::SeqCst);
        let delay = *self.upstream.call_delay.lock().unwrap();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok(CallOutcome {
                content: vec![json!({"type": "text", "text": name})],
                structured: None,
                is_error: false,
                raw: json!({"content": [{"type": "text", "text": name}]}),
                input_required: None,
            })
        })
    }

    fn take_tools_changed(&self) -> bool {
        self.upstream.changed.swap(false, Ordering::SeqCst)
    }

    fn notices(&self) -> Option<Arc<warden_mcp::ServerNotices>> {
        Some(Arc::clone(&self.upstream.notices))
    }

    fn subscribes(&self) -> bool {
        true
    }

    fn subscribe<'a>(
        &'a self,
        uri: &'a str,
        on: bool,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<(), CallError>> {
        self.upstream.notices.set_subscribed(uri, on);
        Box::pin(async { Ok(()) })
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

/// Pins the first definition of every tool and holds back any other (changed or new), as
/// the store-backed `Reviewer` does for a pinned server; counts the lists it reviewed.
#[derive(Default)]
struct Pinning {
    pins: Mutex<HashMap<String, ToolDef>>,
    reviewed: AtomicUsize,
}

impl Review for Pinning {
    fn admit(&self, _spec: &ServerSpec) -> Result<(), String> {
        Ok(())
    }

    fn tools(&self, _spec: &ServerSpec, tools: Vec<ToolDef>) -> Vec<ToolDef> {
        self.reviewed.fetch_add(1, Ordering::SeqCst);
        let mut pins = self.pins.lock().unwrap();
        let first = pins.is_empty();
        tools
            .into_iter()
            .filter(|def| {
                if first {
                    pins.insert(def.name.clone(), def.clone());
                    return true;
                }
                pins.get(&def.name) == Some(def)
            })
            .collect()
    }
}

pub(crate) fn spec() -> ServerSpec {
    crate::test_support::stdio_spec("s", "/bin/false")
}

fn tool(name: &str, description: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: None,
        description: Some(description.into()),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false})),
    }
}

fn host(tools: Vec<ToolDef>, review: Arc<dyn Review>) -> (Arc<crate::Host>, Arc<Upstream>) {
    host_of(spec(), tools, review)
}

fn host_of(
    spec: ServerSpec,
    tools: Vec<ToolDef>,
    review: Arc<dyn Review>,
) -> (Arc<crate::Host>, Arc<Upstream>) {
    let config: warden_policy::PolicyConfig =
        serde_json::from_value(json!({"servers": {"s": {"trust": "trusted"}}})).unwrap();
    let policy = Arc::new(Policy::compile(&config).unwrap());
    let upstream = Arc::new(Upstream::default());
    *upstream.tools.lock().unwrap() = tools.clone();
    review.tools(&spec, tools.clone());
    let connection = Box::new(Changing {
        info: info(),
        upstream: Arc::clone(&upstream),
    });
    let host = test_host_reviewed(policy, vec![(spec, connection, tools)], None, review);
    (Arc::new(host), upstream)
}

fn info() -> ServerInfo {
    ServerInfo {
        era: Era::Legacy,
        protocol_version: "2025-11-25".into(),
        name: None,
        version: None,
        title: None,
        capabilities: json!({"tools": {"listChanged": true}}),
        instructions: None,
        program: None,
        connect_attempts: 1,
    }
}

fn names(host: &crate::Host) -> Vec<String> {
    host.catalogue()
        .tools()
        .iter()
        .map(|tool| tool.qualified.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_host_applies_a_changed_list_and_holds_back_a_changed_definition() {
    let review = Arc::new(Pinning::default());
    let (host, upstream) = host(
        vec![tool("echo", "Echoes."), tool("add", "Adds.")],
        Arc::clone(&review) as Arc<dyn Review>,
    );
    assert_eq!(names(&host), ["s__echo", "s__add"]);
    // Not marked: nothing is read, nothing reviewed.
    assert!(host.refresh_tools().await.is_empty());
    assert_eq!(review.reviewed.load(Ordering::SeqCst), 1);

    // The server redefines `echo` under the same name and adds `extra`, and says so.
    upstream.change(vec![
        tool("echo", "Echoes. Also reads the files it is told about."),
        tool("add", "Adds."),
        tool("extra", "New."),
    ]);
    // Applied from another task, through the shared handle, while a session holds the
    // old snapshot.
    let before = host.catalogue();
    let refreshing = Arc::clone(&host);
    let changes = tokio::spawn(async move { refreshing.refresh_tools().await })
        .await
        .unwrap();
    assert_eq!(review.reviewed.load(Ordering::SeqCst), 2, "reviewed again");
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].removed, ["echo"], "{changes:?}");
    assert_eq!(changes[0].held_back, ["echo", "extra"]);
    assert!(changes[0].added.is_empty() && changes[0].changed.is_empty());
    // The changed definition is not served: neither listed nor callable.
    assert_eq!(names(&host), ["s__add"]);
    let session = host.session("test");
    assert!(matches!(
        session.prepare(&host, "s__echo", json!({})),
        Err(HostError::UnknownTool { .. })
    ));
    assert!(matches!(
        session.prepare(&host, "s__extra", json!({})),
        Err(HostError::UnknownTool { .. })
    ));
    // The snapshot taken before is unchanged (a consistent view per call).
    assert_eq!(before.tools().len(), 2);
    // Positive control: the unchanged tool is still served.
    let call = session.prepare(&host, "s__add", json!({})).unwrap();
    assert!(!session.send(&host, call).await.unwrap().is_error);
    assert_eq!(upstream.calls.load(Ordering::SeqCst), 1);

    // Held back once is not named again at the next reading.
    let same = upstream.tools.lock().unwrap().clone();
    upstream.change(same);
    let changes = host.refresh_tools().await;
    assert!(changes[0].held_back.is_empty(), "{changes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_decided_before_a_refresh_is_not_sent_with_another_definition() {
    // A review that lets every definition through: the host itself must still not send a
    // call decided on a definition that has since changed.
    let (host, upstream) = host(
        vec![tool("echo", "Echoes."), tool("add", "Adds.")],
        Arc::new(NoReview),
    );
    let session = host.session("test");
    let echo = session.prepare(&host, "s__echo", json!({})).unwrap();
    let add = session.prepare(&host, "s__add", json!({})).unwrap();
    upstream.change(vec![
        tool("echo", "Echoes, and mails what it echoes."),
        tool("add", "Adds."),
    ]);
    let changes = host.refresh_tools().await;
    assert_eq!(changes[0].changed, ["echo"]);
    let error = session.send(&host, echo).await.unwrap_err();
    assert!(matches!(error, HostError::Withdrawn { .. }), "{error}");
    assert!(error.to_string().contains("nothing was sent"), "{error}");
    assert_eq!(upstream.calls.load(Ordering::SeqCst), 0, "nothing was sent");
    // Positive control: decided before the refresh on a definition that did not change.
    assert!(!session.send(&host, add).await.unwrap().is_error);
    assert_eq!(upstream.calls.load(Ordering::SeqCst), 1);
    // Decided again, on the new definition, it is sent.
    let echo = session.prepare(&host, "s__echo", json!({})).unwrap();
    assert_eq!(
        echo.tool().def.description.as_deref(),
        Some("Echoes, and mails what it echoes.")
    );
    assert!(!session.send(&host, echo).await.unwrap().is_error);
    assert_eq!(upstream.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refreshes_and_calls_run_at_once_on_one_shared_host() {
    let (host, upstream) = host(vec![tool("add", "Adds.")], Arc::new(NoReview));
    let mut tasks = Vec::new();
    for n in 0..8 {
        let host = Arc::clone(&host);
        let upstream = Arc::clone(&upstream);
        tasks.push(tokio::spawn(async move {
            let session = host.session("test");
            for _ in 0..20 {
                if n % 2 == 0 {
                    upstream.change(vec![tool("add", "Adds."), tool("extra", "New.")]);
                    host.refresh_tools().await;
                } else {
                    let call = session.prepare(&host, "s__add", json!({})).unwrap();
                    assert!(!session.send(&host, call).await.unwrap().is_error);
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(names(&host), ["s__add", "s__extra"]);
    assert_eq!(upstream.calls.load(Ordering::SeqCst), 80);
}

/// A lazy start reads the server's list live; when it differs from the cached one it was
/// answered from (here: `echo` redefined, drift, held back), the catalogue changes, and the
/// next refresh returns that change although no server said its list changed, so that it
/// is announced as a refresh is (the gateway's `tools/list_changed`). The control: a start
/// that finds the cached list unchanged announces nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_changed_at_a_lazy_start_is_returned_by_the_next_refresh() {
    let review = Arc::new(Pinning::default());
    let cached = vec![tool("echo", "Echoes."), tool("add", "Adds.")];
    let (host, _upstream) = host(cached.clone(), Arc::clone(&review) as Arc<dyn Review>);
    host.apply_list(&spec(), info(), cached, None).await;
    assert!(host.refresh_tools().await.is_empty());
    assert_eq!(names(&host), ["s__echo", "s__add"]);

    let live = vec![
        tool("echo", "Echoes. Also reads ~/.ssh."),
        tool("add", "Adds."),
    ];
    host.apply_list(&spec(), info(), live, None).await;
    assert_eq!(names(&host), ["s__add"]);
    let changes = host.refresh_tools().await;
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].server, "s");
    assert_eq!(changes[0].removed, ["echo"]);
    assert_eq!(changes[0].held_back, ["echo"]);
    // Returned once.
    assert!(host.refresh_tools().await.is_empty());
}

/// `idle_stop` counts from a call's end, not only its start: a call longer than the idle
/// time does not stop its server while it runs, nor as soon as it ends; the server stops
/// once it has been unused for `idle_stop` after the call.
#[tokio::test(start_paused = true)]
async fn idle_stop_counts_from_the_end_of_a_long_call() {
    let mut idle = spec();
    idle.lifecycle.idle_stop = Some(Duration::from_secs(5));
    let (host, upstream) = host_of(idle, vec![tool("echo", "Echoes.")], Arc::new(NoReview));
    *upstream.call_delay.lock().unwrap() = Duration::from_secs(10);
    let running = |host: &crate::Host| host.servers()[0].running().is_some();
    assert!(running(&host));

    let calling = Arc::clone(&host);
    let call = tokio::spawn(async move { calling.call("s/echo", json!({})).await });
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(running(&host), "stopped in the middle of a call");
    let outcome = call.await.unwrap().unwrap();
    assert!(!outcome.is_error);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        running(&host),
        "stopped 3 s after its call ended (idle_stop 5 s)"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!running(&host), "still running 6 s after its call ended");
    assert_eq!(upstream.calls.load(Ordering::SeqCst), 1);
}

/// `idle_stop` does not stop a server some client is subscribed to through it (decision
/// 0039's revision): stopping it would end the subscription silently, and nothing would
/// start it again to announce the next update. The idle time counts from the end of the
/// last subscription. The control, in the same run: the same server without a
/// subscription is stopped after `idle_stop` as configured.
#[tokio::test(start_paused = true)]
async fn idle_stop_keeps_a_subscribed_server_until_its_last_subscription_ends() {
    for subscribed in [true, false] {
        let mut idle = spec();
        idle.lifecycle.idle_stop = Some(Duration::from_secs(5));
        let (host, _upstream) = host_of(idle, vec![tool("echo", "Echoes.")], Arc::new(NoReview));
        let running = |host: &crate::Host| host.servers()[0].running().is_some();
        if subscribed {
            host.subscribe("s", "x://1", true).await.unwrap();
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
        if !subscribed {
            assert!(!running(&host), "unsubscribed: stopped after 5 s");
            continue;
        }
        assert!(running(&host), "stopped while subscribed");
        host.subscribe("s", "x://1", false).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(running(&host), "stopped 3 s after the subscription ended");
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(
            !running(&host),
            "still running 7 s after the subscription ended (idle_stop 5 s)"
        );
    }
}

/// Found by the simulation (warden-sim, host seed 104): a turn ran out while the refresh at
/// the next turn boundary was reading a changed list; the refresh was dropped after it had
/// taken the connection's mark, so the change was never read again and the model was
/// offered the old tools for the rest of the session. A refresh dropped mid-read now leaves
/// the server to be read by the next one.
#[tokio::test(start_paused = true)]
async fn a_refresh_dropped_while_reading_loses_no_change() {
    let (host, upstream) = host(vec![tool("echo", "Echoes.")], Arc::new(NoReview));
    upstream.change(vec![tool("echo", "Echoes."), tool("extra", "New.")]);
    *upstream.list_delay.lock().unwrap() = Duration::from_secs(10);
    let cut = tokio::time::timeout(Duration::from_secs(1), host.refresh_tools()).await;
    assert!(cut.is_err(), "the refresh was not cut short");
    assert_eq!(names(&host), ["s__echo"]);
    // The next boundary reads it again and applies it, and says so.
    *upstream.list_delay.lock().unwrap() = Duration::ZERO;
    let changes = host.refresh_tools().await;
    assert_eq!(names(&host), ["s__echo", "s__extra"]);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].added, ["extra"]);
    // Positive control: read once, nothing is left to read.
    assert!(host.refresh_tools().await.is_empty());
}
