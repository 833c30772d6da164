//! The protocol, independent of the transport: what each method does in each era.
//!
//! - 2025-11-25 ("legacy"): `initialize` opens a session ([`LegacySession`]) that fixes
//!   the negotiated version and whether the client can answer elicitations; then `ping`,
//!   `tools/list` (paginated), `tools/call`, and the resources, prompts and completion of
//!   the upstream servers (aggregated: [`crate::aggregate`]).
//! - 2026-07-28 ("modern"): stateless; every request carries its version and the client's
//!   capabilities in `_meta` ([`ModernRequest`]); `server/discover`; every result has a
//!   `resultType`; an approval question is an `InputRequiredResult` whose `requestState` is
//!   signed ([`crate::secret::StateSigner`]).
//!
//! A client's era is set by its first message and never changes; a message of the other era
//! is refused, never quietly served ([`era_of`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::aggregate::Kind;
use crate::backend::{AskAnswer, AskInfo, Asker, Backend, CallReply, ClientContext, UpstreamAsked};
use crate::jsonrpc::{
    INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, MISSING_CAPABILITY, RpcError,
    UNSUPPORTED_VERSION,
};
use crate::listener::Want;
use crate::parked::{AnswerSlot, CallTask, PARK_LIFETIME, ParkedCall, Parking};
use crate::relayed::RelayTo;
use crate::secret::{Issued, StateSigner};
use crate::subscriptions::Subscriber;
use warden_mcp::{InputRetry, ListenFilter};

/// The revisions served through `initialize`, newest first.
pub const LEGACY_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// The stateless revision served.
pub const MODERN_VERSION: &str = "2026-07-28";

pub use warden_mcp::jsonrpc::META_VERSION;
/// `_meta` key of the client's capabilities (2026-07-28).
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's self-description (2026-07-28).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the server's self-description (2026-07-28).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Tools per `tools/list` page by default.
pub const DEFAULT_PAGE_SIZE: usize = 100;
/// How long a person has to answer an approval elicitation.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest argument text shown in an approval question.
const SHOWN_ARGUMENTS_CHARS: usize = 2000;

/// `_meta` key of an aggregated list's first page naming the servers whose items are
/// missing from it, and why (`[{"server", "reason"}]`).
pub const META_LEFT_OUT: &str = "dev.warden/leftOut";

/// `_meta` key naming the `subscriptions/listen` stream a message belongs to (2026-07-28).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The notification that tells a client to read the tool list again.
pub fn tools_changed_notification() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
}

/// What a 2026-07-28 `subscriptions/listen` stream carries: the acknowledgement first (the
/// subset of the requested notifications Warden honours: tool list changes, resource and
/// prompt list changes when some server served here offers them, and the subscriptions
/// to `resourceSubscriptions` that could be made), then one notification per change, each
/// tagged with the stream's id. The stream's subscriptions are its own (made for `client`)
/// and end with it. `send` writes one message to the stream and says whether it is still
/// open; the stream ends when it is not, or when the caller drops this future (the client
/// closed the stream, or cancelled the request). Changes in quick succession coalesce.
pub async fn listen<F, Fut>(
    gateway: &Gateway,
    client: &ClientContext,
    id: &Value,
    params: &Value,
    mut send: F,
) where
    F: FnMut(Value) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let asked = ListenFilter::from_json(params.get("notifications"));
    let offers = gateway.backend.offers();
    let want = Want {
        tools: asked.tools,
        resources: asked.resources && offers.resources,
        prompts: asked.prompts && offers.prompts,
    };
    // Listened from before the subscriptions are made, so no change is missed between.
    let mut listener = gateway.backend.listener(want);
    let subscriber = gateway.backend.subscriber();
    let mut honoured = ListenFilter {
        tools: want.tools,
        resources: want.resources,
        prompts: want.prompts,
        uris: Vec::new(),
    };
    for uri in asked.uris.iter().take(crate::subscriptions::MAX_PER_CLIENT) {
        match gateway.backend.subscribe(client, &subscriber, uri).await {
            Ok(()) => honoured.uris.push(uri.clone()),
            Err(error) => {
                tracing::info!(
                    "subscriptions/listen: {uri} not subscribed: {}",
                    error.message
                );
            }
        }
    }
    let honoured = honoured.to_json();
    let meta = json!({META_SUBSCRIPTION_ID: id});
    let acknowledged = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": honoured, "_meta": meta},
    });
    if !send(acknowledged).await {
        return;
    }
    let subscriber = (subscriber.count() > 0).then_some(&subscriber);
    while let Some(notices) = listener.next(subscriber).await {
        for notice in notices {
            let mut notification = notice.message();
            match notification
                .get_mut("params")
                .and_then(Value::as_object_mut)
            {
                Some(params) => {
                    params.insert("_meta".into(), meta.clone());
                }
                None => notification["params"] = json!({"_meta": meta}),
            }
            if !send(notification).await {
                return;
            }
        }
    }
}

/// The protocol era of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier: `initialize`, sessions.
    Legacy,
    /// 2026-07-28: stateless, `_meta` on every request.
    Modern,
}

/// The era a first message opens: `initialize` is legacy, a request carrying the modern
/// `_meta` version is modern; anything else opens nothing.
pub fn era_of(method: &str, params: &Value) -> Option<Era> {
    if method == "initialize" {
        Some(Era::Legacy)
    } else if params
        .get("_meta")
        .and_then(|meta| meta.get(META_VERSION))
        .is_some()
    {
        Some(Era::Modern)
    } else {
        None
    }
}

/// Lets the protocol send a request to the client and wait for its answer (legacy
/// elicitation), and send it notifications about a request (progress, log messages); the
/// transport routes the client's response back.
pub trait Peer: Send + Sync {
    /// Sends `method` with `params` and waits at most `timeout` for the answer.
    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, String>>;
    /// Sends a notification (a whole JSON-RPC message) about the request this peer serves,
    /// without waiting: dropped when the way to the client is full or gone. A transport
    /// without a way back keeps the default: dropped.
    fn notify(&self, message: Value) {
        let _ = message;
    }
    /// Asks a 2026-07-28 client a 2025-11-25 server's question: the request this peer
    /// serves ends with the question as an input-required result, and the answer comes with
    /// the client's retry ([`crate::parked`]), within `timeout`. A transport that cannot
    /// keeps the default: refused (the server gets a decline).
    fn park<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, String>> {
        let _ = (params, timeout);
        Box::pin(async move {
            Err(format!(
                "{method}: this 2026-07-28 client cannot be asked during a call on this transport"
            ))
        })
    }
}

/// A peer that cannot send requests (a transport without a way back).
pub struct NoPeer;

impl Peer for NoPeer {
    fn request<'a>(
        &'a self,
        method: &'a str,
        _params: Value,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move { Err(format!("{method}: no way to reach the client")) })
    }
}

/// What `initialize` settled for one legacy client.
pub struct LegacySession {
    /// The negotiated revision.
    pub version: String,
    /// Whether the client declared form elicitation.
    pub elicitation: bool,
    /// What the client declared that a server may ask through Warden
    /// ([`crate::relayed::relayable`]).
    pub relayable: Value,
    /// The least severe server log message relayed (`logging/setLevel`; all until set).
    log_floor: std::sync::atomic::AtomicU8,
    /// The client's policy context.
    pub client: ClientContext,
    /// The session's resource subscriptions: they end with it.
    pub subscriber: Subscriber,
    initialized: AtomicBool,
}

impl LegacySession {
    /// Whether `notifications/initialized` arrived.
    pub fn initialized(&self) -> bool {
        self.initialized.load(Ordering::Relaxed)
    }
}

/// What a modern request declared about itself in `_meta`.
#[derive(Debug, Clone)]
pub struct ModernRequest {
    /// The protocol version (always [`MODERN_VERSION`] once checked).
    pub version: String,
    /// Whether the client declared form elicitation on this request.
    pub elicitation: bool,
    /// What the client declared on this request that a server may ask through Warden
    /// ([`crate::relayed::relayable`]).
    pub relayable: Value,
}

/// The gateway's protocol state shared by every client: the backend, who it says it is,
/// and the approval-state signer.
pub struct Gateway {
    backend: Backend,
    page_size: usize,
    signer: StateSigner,
    /// Calls waiting for a 2026-07-28 client's answer to a server's question.
    parking: Parking,
}

/// Options of the protocol layer.
#[derive(Debug, Clone)]
pub struct ProtocolOptions {
    /// Tools per `tools/list` page.
    pub page_size: usize,
}

impl Default for ProtocolOptions {
    fn default() -> Self {
        ProtocolOptions {
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

fn server_info() -> Value {
    json!({"name": "warden", "title": "Warden", "version": env!("CARGO_PKG_VERSION")})
}

fn client_name(info: Option<&Value>) -> String {
    let name = info
        .and_then(|info| info.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("unnamed-client");
    // Self-reported: kept short and printable, for audit rows only.
    name.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(64)
        .collect()
}

/// A client name for audit rows: what it calls itself, and a tag of its session.
pub fn audit_name(info: Option<&Value>, tag: &str) -> String {
    let tag: String = tag.chars().take(8).collect();
    format!("{}#{tag}", client_name(info))
}

fn has_form_elicitation(capabilities: &Value) -> bool {
    match capabilities.get("elicitation") {
        // `{}` means form only; `{"url": {}}` without `form` means URL only.
        Some(Value::Object(modes)) => modes.is_empty() || modes.contains_key("form"),
        _ => false,
    }
}

impl Gateway {
    /// The protocol over `backend`.
    pub fn new(backend: Backend, options: ProtocolOptions) -> std::io::Result<Gateway> {
        Ok(Gateway {
            backend,
            page_size: options.page_size.max(1),
            signer: StateSigner::new()?,
            parking: Parking::default(),
        })
    }

    /// The backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The backend, to shut the host down at exit.
    pub fn into_backend(self) -> Backend {
        self.backend
    }

    fn capabilities(&self) -> Value {
        // List changes are announced: 2025-11-25 as notifications (stdio, the HTTP GET
        // stream), 2026-07-28 on `subscriptions/listen` streams. Resources, prompts and
        // completion are declared when some upstream served here offers them (their lists
        // are read when asked for, and again when an upstream says they changed);
        // subscriptions when some such server keeps them (decision 0039).
        let offers = self.backend.offers();
        let mut capabilities = json!({"tools": {"listChanged": true}});
        if offers.resources {
            capabilities["resources"] = json!({"listChanged": true, "subscribe": offers.subscribe});
        }
        if offers.prompts {
            capabilities["prompts"] = json!({"listChanged": true});
        }
        if offers.completions {
            capabilities["completions"] = json!({});
        }
        capabilities
    }

    /// Answers the methods of resources, prompts and completion, the same in both eras.
    async fn offered(
        &self,
        client: &ClientContext,
        method: &str,
        params: &Value,
    ) -> Option<Result<Value, RpcError>> {
        let kind = match method {
            "resources/list" => Kind::Resources,
            "resources/templates/list" => Kind::Templates,
            "prompts/list" => Kind::Prompts,
            "resources/read" => return Some(self.backend.read_resource(client, params).await),
            "prompts/get" => return Some(self.backend.get_prompt(client, params).await),
            "completion/complete" => return Some(self.backend.complete(client, params).await),
            _ => return None,
        };
        Some(self.list_offered(kind, params).await)
    }

    /// One page of an aggregated list: the first page comes from a fresh generation of it
    /// ([`crate::generations`]: reused for a few seconds, then read again); the pages after
    /// it are slices of the generation their cursor names, so a client's pages agree
    /// whatever other clients list meanwhile. A cursor of a generation no longer kept is
    /// refused, saying to list again from the first page.
    async fn list_offered(&self, kind: Kind, params: &Value) -> Result<Value, RpcError> {
        let prefix = kind.cursor_prefix();
        let (generation, aggregate, start) = match params.get("cursor") {
            None | Some(Value::Null) => {
                let (generation, aggregate) = self.backend.first_page(kind).await;
                (generation, aggregate, 0)
            }
            Some(Value::String(cursor)) => {
                let (generation, start) = decode_list_cursor(prefix, cursor)
                    .ok_or_else(|| RpcError::new(INVALID_PARAMS, "invalid cursor"))?;
                let aggregate = self.backend.generation(kind, generation).ok_or_else(|| {
                    RpcError::new(
                        INVALID_PARAMS,
                        format!(
                            "this cursor is from an earlier `{}` listing that is no longer \
                             kept (the servers' lists were read again since); list again \
                             from the first page, without a cursor",
                            kind.method()
                        ),
                    )
                })?;
                if start >= aggregate.entries.len().max(1) {
                    return Err(RpcError::new(INVALID_PARAMS, "invalid cursor"));
                }
                (generation, aggregate, start)
            }
            Some(_) => return Err(RpcError::new(INVALID_PARAMS, "invalid cursor")),
        };
        let entries = &aggregate.entries;
        let end = start.saturating_add(self.page_size).min(entries.len());
        let page: Vec<Value> = entries.get(start..end).unwrap_or_default().to_vec();
        let mut result = json!({kind.key(): page});
        if end < entries.len() {
            result["nextCursor"] = Value::String(encode_list_cursor(prefix, generation, end));
        }
        if start == 0 && !aggregate.left_out.is_empty() {
            // Which servers' items are missing, and why: the client (and its user) can
            // tell a short list from a complete one.
            let left_out: Vec<Value> = aggregate
                .left_out
                .iter()
                .map(|(server, why)| json!({"server": server, "reason": why}))
                .collect();
            result["_meta"] = json!({META_LEFT_OUT: left_out});
        }
        Ok(result)
    }

    /// Answers `initialize`: the session it opens and the result. `tag` names the
    /// session in audit rows.
    pub fn initialize(
        &self,
        params: &Value,
        tag: &str,
    ) -> Result<(LegacySession, Value), RpcError> {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::new(INVALID_PARAMS, "initialize needs `protocolVersion`"))?;
        // The client's version if served, else the newest served (the client decides).
        let version = if LEGACY_VERSIONS.contains(&requested) {
            requested
        } else {
            LEGACY_VERSIONS[0]
        };
        let capabilities = params.get("capabilities").cloned().unwrap_or(Value::Null);
        let session = LegacySession {
            version: version.to_owned(),
            elicitation: has_form_elicitation(&capabilities),
            relayable: crate::relayed::relayable(&capabilities),
            log_floor: std::sync::atomic::AtomicU8::new(0),
            client: self
                .backend
                .client(audit_name(params.get("clientInfo"), tag)),
            subscriber: self.backend.subscriber(),
            initialized: AtomicBool::new(false),
        };
        self.backend
            .metrics()
            .request("initialize", true, std::time::Duration::ZERO);
        let result = json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": server_info(),
            "instructions": "Warden serves the tools of its configured MCP servers under one policy; \
                some calls need a person's approval.",
        });
        Ok((session, result))
    }

    /// Handles a notification of a legacy client (`notifications/initialized`; the
    /// transport handles `notifications/cancelled`).
    pub fn legacy_notification(&self, session: &LegacySession, method: &str) {
        if method == "notifications/initialized" {
            session.initialized.store(true, Ordering::Relaxed);
        }
    }

    /// Handles one request of a legacy client after `initialize` (counted for
    /// `/metrics`).
    pub async fn legacy(
        &self,
        session: &LegacySession,
        method: &str,
        params: Value,
        peer: Arc<dyn Peer>,
    ) -> Result<Value, RpcError> {
        let started = std::time::Instant::now();
        let answer = self.legacy_answer(session, method, params, peer).await;
        self.backend
            .metrics()
            .request(method, answer.is_ok(), started.elapsed());
        answer
    }

    async fn legacy_answer(
        &self,
        session: &LegacySession,
        method: &str,
        params: Value,
        peer: Arc<dyn Peer>,
    ) -> Result<Value, RpcError> {
        match method {
            "initialize" => Err(RpcError::new(
                INVALID_REQUEST,
                "this session is already initialized",
            )),
            "ping" => Ok(json!({})),
            "tools/list" => self.list_tools(&params),
            "tools/call" => {
                let (name, arguments) = call_params(&params)?;
                let asker = LegacyAsker {
                    elicitation: session.elicitation,
                    peer: &*peer,
                };
                let relay = RelayTo {
                    peer: Arc::clone(&peer),
                    capabilities: session.relayable.clone(),
                    progress_token: progress_token(&params),
                    modern: false,
                    log_floor: Some(session.log_floor.load(Ordering::Relaxed)),
                    retry: None,
                };
                match self
                    .backend
                    .call(&session.client, &name, arguments, &asker, Some(relay))
                    .await?
                {
                    CallReply::Result(result) => Ok(result),
                    CallReply::Input(_) | CallReply::Asked(_) => Err(RpcError::new(
                        crate::jsonrpc::INTERNAL_ERROR,
                        "an input-required result cannot reach a 2025-11-25 client",
                    )),
                }
            }
            "logging/setLevel" => {
                let level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .and_then(crate::relayed::severity)
                    .ok_or_else(|| {
                        RpcError::new(INVALID_PARAMS, "logging/setLevel needs a known `level`")
                    })?;
                session.log_floor.store(level, Ordering::Relaxed);
                Ok(json!({}))
            }
            "resources/subscribe" => {
                let uri = subscription_uri(method, &params)?;
                self.backend
                    .subscribe(&session.client, &session.subscriber, uri)
                    .await?;
                Ok(json!({}))
            }
            "resources/unsubscribe" => {
                let uri = subscription_uri(method, &params)?;
                self.backend.unsubscribe(&session.subscriber, uri).await;
                Ok(json!({}))
            }
            _ => match self.offered(&session.client, method, &params).await {
                Some(result) => result,
                None => Err(RpcError::new(
                    METHOD_NOT_FOUND,
                    format!("Method not found: {method}"),
                )),
            },
        }
    }

    /// Checks the `_meta` a modern request must carry: the version ([`UNSUPPORTED_VERSION`]
    /// otherwise, naming what is served) and the client's capabilities.
    pub fn modern_check(&self, params: &Value) -> Result<ModernRequest, RpcError> {
        let meta = params.get("_meta").unwrap_or(&Value::Null);
        let Some(version) = meta.get(META_VERSION).and_then(Value::as_str) else {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("`_meta` must carry `{META_VERSION}`"),
            ));
        };
        if version != MODERN_VERSION {
            return Err(RpcError::new(
                UNSUPPORTED_VERSION,
                format!("Unsupported protocol version: {version}"),
            )
            .with_data(json!({"supported": [MODERN_VERSION], "requested": version})));
        }
        let Some(capabilities) = meta.get(META_CAPABILITIES) else {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("`_meta` must carry `{META_CAPABILITIES}`"),
            ));
        };
        if !capabilities.is_object() {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("`{META_CAPABILITIES}` must be an object"),
            ));
        }
        Ok(ModernRequest {
            version: version.to_owned(),
            elicitation: has_form_elicitation(capabilities),
            relayable: crate::relayed::relayable(capabilities),
        })
    }

    /// Handles one modern request (already checked with [`modern_check`]) for `client`.
    /// The result carries `resultType` and the server's description in `_meta`. Counted
    /// for `/metrics`.
    pub async fn modern(
        &self,
        client: &ClientContext,
        request: &ModernRequest,
        method: &str,
        params: Value,
        peer: Arc<dyn Peer>,
    ) -> Result<Value, RpcError> {
        let started = std::time::Instant::now();
        let answer = self
            .modern_answer(client, request, method, params, peer)
            .await;
        self.backend
            .metrics()
            .request(method, answer.is_ok(), started.elapsed());
        answer
    }

    async fn modern_answer(
        &self,
        client: &ClientContext,
        request: &ModernRequest,
        method: &str,
        params: Value,
        peer: Arc<dyn Peer>,
    ) -> Result<Value, RpcError> {
        let mut result = match method {
            "server/discover" => {
                let mut result = json!({
                    "supportedVersions": [MODERN_VERSION],
                    "capabilities": self.capabilities(),
                    "serverInfo": server_info(),
                });
                cacheable(&mut result);
                result
            }
            "tools/list" => {
                let mut result = self.list_tools(&params)?;
                cacheable(&mut result);
                result
            }
            "tools/call" => self.modern_call(client, request, &params, peer).await?,
            _ => match self.offered(client, method, &params).await {
                Some(result) => {
                    let mut result = result?;
                    // Never cached by the client: a read's text is labelled into the
                    // client's context each time it is read through Warden.
                    if method.ends_with("/list") || method == "resources/read" {
                        cacheable(&mut result);
                    }
                    result
                }
                None => {
                    return Err(RpcError::new(
                        METHOD_NOT_FOUND,
                        format!("Method not found: {method}"),
                    ));
                }
            },
        };
        if result.get("resultType").is_none() {
            result["resultType"] = json!("complete");
        }
        // Warden's own `_meta` only: an upstream's (a read's result as sent) is dropped,
        // except what the aggregated lists say themselves.
        let left_out = method
            .ends_with("/list")
            .then(|| {
                result
                    .pointer("/_meta")
                    .and_then(|m| m.get(META_LEFT_OUT))
                    .cloned()
            })
            .flatten();
        result["_meta"] = json!({META_SERVER_INFO: server_info()});
        if let Some(left_out) = left_out {
            result["_meta"][META_LEFT_OUT] = left_out;
        }
        Ok(result)
    }

    /// A 2026-07-28 `tools/call`: a retry's `requestState` is checked first (one Warden
    /// issued, for this very call and client, unused and in time; anything else is an
    /// error, never a call), then the call is decided and sent as any other, with the
    /// answers of an earlier round for the server; a server's questions come back as an
    /// `InputRequiredResult` whose state continues the call.
    async fn modern_call(
        &self,
        client: &ClientContext,
        request: &ModernRequest,
        params: &Value,
        peer: Arc<dyn Peer>,
    ) -> Result<Value, RpcError> {
        let (name, arguments) = call_params(params)?;
        let earlier = match params.get("requestState") {
            None | Some(Value::Null) => None,
            Some(Value::String(state)) => Some(
                self.signer
                    .redeem(state, &name, &state_arguments(&arguments), client.name())
                    .map_err(|error| RpcError::new(INVALID_PARAMS, error.to_string()))?,
            ),
            Some(_) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "`requestState` must be the string Warden sent",
                ));
            }
        };
        if let Some(Issued::Parked { id }) = &earlier {
            return self
                .resume(id, &name, &arguments, client.name(), params, &peer)
                .await;
        }
        // The client's answers for the server (never Warden's own approval answer).
        let mut responses = match params.get("inputResponses") {
            None | Some(Value::Null) => None,
            Some(Value::Object(responses)) => Some(responses.clone()),
            Some(_) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "`inputResponses` must be an object of answers by key",
                ));
            }
        };
        let approval = responses
            .as_mut()
            .and_then(|responses| responses.remove(APPROVAL_KEY));
        let responses = responses.filter(|responses| !responses.is_empty());
        let upstream_state = match &earlier {
            Some(Issued::Continuation { upstream_state, .. }) => upstream_state.clone(),
            _ => None,
        };
        let retry = (responses.is_some() || upstream_state.is_some()).then_some(InputRetry {
            responses,
            state: upstream_state,
        });
        let asker = ModernAsker {
            gateway: self,
            request,
            earlier: earlier.as_ref(),
            approval,
            client: client.name(),
        };
        let relay = RelayTo {
            peer,
            capabilities: request.relayable.clone(),
            progress_token: progress_token(params),
            modern: true,
            log_floor: params
                .get("_meta")
                .and_then(|meta| meta.get(crate::relayed::META_LOG_LEVEL))
                .and_then(Value::as_str)
                .and_then(crate::relayed::severity),
            retry,
        };
        match self
            .backend
            .call(client, &name, arguments.clone(), &asker, Some(relay))
            .await?
        {
            CallReply::Result(result) | CallReply::Input(result) => Ok(result),
            CallReply::Asked(asked) => self.continuation(client, request, &name, &arguments, asked),
        }
    }

    /// A retry that answers a parked call's question: the answer goes to the waiting call,
    /// and this request carries the rest of the call ([`Gateway::follow`]).
    async fn resume(
        &self,
        id: &str,
        name: &str,
        arguments: &Value,
        client: &str,
        params: &Value,
        peer: &Arc<dyn Peer>,
    ) -> Result<Value, RpcError> {
        let Some(call) = self.parking.take(id) else {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "the call this requestState continues is no longer waiting (it was answered, \
                 or its time ran out); call the tool again",
            ));
        };
        // No answer under the key asked: the server hears a decline.
        let answer = params
            .get("inputResponses")
            .and_then(|responses| responses.get(&call.key))
            .filter(|answer| answer.is_object())
            .cloned()
            .unwrap_or_else(|| json!({"action": "decline"}));
        let ParkedCall {
            answer: to_call,
            rest,
            slot,
            task,
            ..
        } = call;
        let _ = to_call.send(answer);
        self.follow(rest, slot, task, name, arguments, client, peer)
            .await
    }

    /// Reads a resumed call's messages: notifications pass to this request's `peer`, a
    /// further question parks the call again, the answer ends it.
    #[allow(clippy::too_many_arguments)]
    async fn follow(
        &self,
        mut rest: tokio::sync::mpsc::Receiver<Value>,
        slot: AnswerSlot,
        task: CallTask,
        name: &str,
        arguments: &Value,
        client: &str,
        peer: &Arc<dyn Peer>,
    ) -> Result<Value, RpcError> {
        loop {
            let Some(message) = rest.recv().await else {
                return Err(RpcError::new(
                    crate::jsonrpc::INTERNAL_ERROR,
                    "the call ended without an answer",
                ));
            };
            if crate::parked::is_question(&message) {
                return self.park_question(&message, rest, slot, task, name, arguments, client);
            }
            if message.get("id").is_none() {
                peer.notify(message);
                continue;
            }
            let _ = task.disarm();
            return answer_of(&message);
        }
    }

    /// Turns a server's question during a call (its [`crate::parked::QUESTION_MARK`] message) into the
    /// input-required result this request ends with, and parks the call, its messages
    /// after the question, and its task, under a signed state for the client's retry.
    #[allow(clippy::too_many_arguments)]
    pub fn park_question(
        &self,
        question: &Value,
        rest: tokio::sync::mpsc::Receiver<Value>,
        slot: AnswerSlot,
        task: CallTask,
        name: &str,
        arguments: &Value,
        client: &str,
    ) -> Result<Value, RpcError> {
        let internal = |text: String| RpcError::new(crate::jsonrpc::INTERNAL_ERROR, text);
        let answer = slot
            .lock()
            .map_err(|_| internal("a question's answer slot was lost".into()))?
            .take()
            .ok_or_else(|| internal("a question came without a way to answer it".into()))?;
        let params = question.get("params").cloned().unwrap_or(Value::Null);
        let method = params
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let asked = params.get("params").cloned().unwrap_or_else(|| json!({}));
        let key = method.split('/').next().unwrap_or("input").to_owned();
        let id = crate::secret::session_id().map_err(|error| internal(error.to_string()))?;
        let state = self
            .signer
            .issue_as(
                name,
                &state_arguments(arguments),
                client,
                &Issued::Parked { id: id.clone() },
            )
            .map_err(|error| internal(error.to_string()))?;
        let call = ParkedCall {
            key: key.clone(),
            answer,
            rest,
            slot,
            task,
            until: std::time::Instant::now() + PARK_LIFETIME,
        };
        // Full: the call is dropped here, which aborts it.
        self.parking
            .park(id, call)
            .map_err(|error| RpcError::new(crate::jsonrpc::INTERNAL_ERROR, error.to_string()))?;
        Ok(json!({
            "resultType": "input_required",
            "inputRequests": {key: {"method": method, "params": asked}},
            "requestState": state,
            "_meta": {META_SERVER_INFO: server_info()},
        }))
    }

    /// The `InputRequiredResult` a 2026-07-28 client gets when a server asks it for input:
    /// the questions the client can answer (each naming the server), and a state of
    /// Warden's that carries the server's own.
    fn continuation(
        &self,
        client: &ClientContext,
        request: &ModernRequest,
        name: &str,
        arguments: &Value,
        asked: UpstreamAsked,
    ) -> Result<Value, RpcError> {
        let mut requests = serde_json::Map::new();
        for (key, question) in asked.asked.requests {
            let method = question
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            // A request without parameters (`roots/list`) still carries an object.
            let params = question
                .get("params")
                .filter(|params| params.is_object())
                .cloned()
                .unwrap_or_else(|| json!({}));
            if !crate::relayed::declares(&request.relayable, &method, &params) {
                tracing::info!(
                    server = %asked.server,
                    "input request `{key}` ({method}) left out: the client did not declare it"
                );
                continue;
            }
            let params = crate::relayed::attributed(&asked.server, &method, params);
            requests.insert(key, json!({"method": method, "params": params}));
        }
        if requests.is_empty() && asked.asked.state.is_none() {
            return Ok(json!({
                "content": [{"type": "text", "text": format!(
                    "The server `{}` asked for input this client did not declare it can give; \
                     the call did not finish.", asked.server)}],
                "isError": true,
            }));
        }
        let continuation = Issued::Continuation {
            upstream_state: asked.asked.state,
        };
        let state = self
            .signer
            .issue_as(
                name,
                &state_arguments(arguments),
                client.name(),
                &continuation,
            )
            .map_err(|error| RpcError::new(crate::jsonrpc::INTERNAL_ERROR, error.to_string()))?;
        let mut result = json!({"resultType": "input_required", "requestState": state});
        if !requests.is_empty() {
            result["inputRequests"] = Value::Object(requests);
        }
        Ok(result)
    }

    /// One page of the tools: `cursor` is the opaque position a previous page returned.
    fn list_tools(&self, params: &Value) -> Result<Value, RpcError> {
        let tools = self.backend.tools();
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(cursor)) => decode_cursor(cursor)
                .filter(|start| *start < tools.len().max(1))
                .ok_or_else(|| RpcError::new(INVALID_PARAMS, "invalid cursor"))?,
            Some(_) => return Err(RpcError::new(INVALID_PARAMS, "invalid cursor")),
        };
        let end = start.saturating_add(self.page_size).min(tools.len());
        let page: Vec<Value> = tools.get(start..end).unwrap_or_default().to_vec();
        let mut result = json!({"tools": page});
        if end < tools.len() {
            result["nextCursor"] = Value::String(encode_cursor(end));
        }
        Ok(result)
    }

    fn approval_question(info: &AskInfo) -> Value {
        json!({
            "mode": "form",
            "message": question_text(info),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Run this call?",
                        "description": "Yes runs the call once; no refuses it.",
                        "default": false,
                    }
                },
                "required": ["approve"],
            }
        })
    }
}

fn cacheable(result: &mut Value) {
    // The lists do not vary by connection, but do by configuration: never shared.
    result["ttlMs"] = json!(0);
    result["cacheScope"] = json!("private");
}

const CURSOR_PREFIX: &str = "warden-tools:";

fn encode_cursor(start: usize) -> String {
    encode_cursor_with(CURSOR_PREFIX, start)
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    decode_cursor_with(CURSOR_PREFIX, cursor)
}

/// A cursor of one list (`prefix` names it, so one list's cursor is refused by another).
fn encode_cursor_with(prefix: &str, start: usize) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{prefix}{start}"))
}

fn decode_cursor_with(prefix: &str, cursor: &str) -> Option<usize> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.strip_prefix(prefix)?.parse().ok()
}

/// A cursor of an aggregated list: its kind (`prefix`), generation and position.
fn encode_list_cursor(prefix: &str, generation: u64, start: usize) -> String {
    encode_cursor_with(&format!("{prefix}{generation}:"), start)
}

fn decode_list_cursor(prefix: &str, cursor: &str) -> Option<(u64, usize)> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (generation, start) = text.strip_prefix(prefix)?.split_once(':')?;
    Some((generation.parse().ok()?, start.parse().ok()?))
}

fn subscription_uri<'p>(method: &str, params: &'p Value) -> Result<&'p str, RpcError> {
    params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, format!("{method} needs a string `uri`")))
}

fn call_params(params: &Value) -> Result<(String, Value), RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call needs a string `name`"))?;
    let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
    Ok((name.to_owned(), arguments))
}

/// The outcome a JSON-RPC response message carries: its result, or its error.
pub(crate) fn answer_of(message: &Value) -> Result<Value, RpcError> {
    let Some(error) = message.get("error") else {
        return Ok(message.get("result").cloned().unwrap_or(Value::Null));
    };
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .unwrap_or(crate::jsonrpc::INTERNAL_ERROR);
    let text = error.get("message").and_then(Value::as_str).unwrap_or("");
    let mut failure = RpcError::new(code, text);
    if let Some(data) = error.get("data") {
        failure = failure.with_data(data.clone());
    }
    Err(failure)
}

/// The arguments a `requestState` is bound to: `null` (none sent) counts as `{}`, as it
/// does for the call itself.
fn state_arguments(arguments: &Value) -> Value {
    match arguments {
        Value::Null => json!({}),
        other => other.clone(),
    }
}

/// The progress token the client gave its request, if any.
fn progress_token(params: &Value) -> Option<Value> {
    params
        .get("_meta")
        .and_then(|meta| meta.get("progressToken"))
        .filter(|token| token.is_string() || token.is_number())
        .cloned()
}

fn shown_arguments(arguments: &Value) -> String {
    let text = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if text.chars().count() > SHOWN_ARGUMENTS_CHARS {
        let cut: String = text.chars().take(SHOWN_ARGUMENTS_CHARS).collect();
        format!("{cut}\n… ({} characters in all)", text.chars().count())
    } else {
        text
    }
}

fn reasons_text(info: &AskInfo) -> String {
    info.reasons
        .iter()
        .map(|reason| format!("  - {reason}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn question_text(info: &AskInfo) -> String {
    format!(
        "Warden: the tool `{}` (server `{}`) needs your approval.\nArguments:\n{}\nWhy Warden asks:\n{}",
        info.qualified,
        info.server,
        shown_arguments(&info.arguments),
        reasons_text(info)
    )
}

/// The result text of a call refused because nobody could be asked.
pub fn refusal_text(info: &AskInfo, why_nobody: &str) -> String {
    let arguments = serde_json::to_string(&info.arguments).unwrap_or_default();
    format!(
        "Warden did not run `{tool}` (server `{server}`); nothing was sent. Its policy asks a \
         person to approve this call, and {why_nobody}.\nArguments:\n{shown}\nWhy Warden asks:\n\
         {reasons}\nHow a person can allow it: run it once from a terminal with \
         `warden call {qualified} --args '{arguments}'`, or allow the tool with a rule in \
         Warden's policy (docs/policy.md), or connect with a client that supports elicitation \
         so Warden can ask.",
        tool = info.tool,
        server = info.server,
        shown = shown_arguments(&info.arguments),
        reasons = reasons_text(info),
        qualified = info.qualified,
    )
}

/// Legacy: asks through `elicitation/create` when the client declared it.
struct LegacyAsker<'p> {
    elicitation: bool,
    peer: &'p dyn Peer,
}

impl Asker for LegacyAsker<'_> {
    fn ask<'a>(&'a self, info: &'a AskInfo) -> BoxFuture<'a, AskAnswer> {
        Box::pin(async move {
            if !self.elicitation {
                return AskAnswer::Refused {
                    text: refusal_text(
                        info,
                        "this client cannot ask one (it did not declare the elicitation capability)",
                    ),
                };
            }
            let answer = self
                .peer
                .request(
                    "elicitation/create",
                    Gateway::approval_question(info),
                    ELICITATION_TIMEOUT,
                )
                .await;
            elicitation_verdict(info, answer)
        })
    }
}

fn elicitation_verdict(info: &AskInfo, answer: Result<Value, String>) -> AskAnswer {
    match answer {
        Ok(result)
            if result.get("action").and_then(Value::as_str) == Some("accept")
                && result
                    .get("content")
                    .and_then(|content| content.get("approve"))
                    == Some(&Value::Bool(true)) =>
        {
            AskAnswer::Approved {
                by: "client-elicitation".into(),
            }
        }
        Ok(result) => {
            let action = result
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or("no answer");
            AskAnswer::Refused {
                text: format!(
                    "Warden did not run `{}` (server `{}`): the person asked did not approve it \
                     ({action}); nothing was sent.",
                    info.tool, info.server
                ),
            }
        }
        Err(error) => AskAnswer::Refused {
            text: refusal_text(info, &format!("asking the client failed ({error})")),
        },
    }
}

/// Modern: an `InputRequiredResult` with a signed `requestState`; the retry carries the
/// answer and the state back (the state was checked before the call was decided).
struct ModernAsker<'g> {
    gateway: &'g Gateway,
    request: &'g ModernRequest,
    /// What the retry's `requestState` stood for, if it had one.
    earlier: Option<&'g Issued>,
    /// The answer to Warden's approval question, if the retry carries one.
    approval: Option<Value>,
    client: &'g str,
}

const APPROVAL_KEY: &str = "warden-approval";

impl Asker for ModernAsker<'_> {
    fn ask<'a>(&'a self, info: &'a AskInfo) -> BoxFuture<'a, AskAnswer> {
        Box::pin(async move {
            match self.earlier {
                Some(Issued::Approval) => {
                    let answer = self.approval.clone().ok_or_else(|| {
                        "the retry carries no answer to the approval question".to_owned()
                    });
                    return elicitation_verdict(info, answer);
                }
                // The same call, let run in its first round (the state is bound to the very
                // tool, arguments and client), continues: the server's own question, now in
                // the context, does not make it a new call to ask about. A call the policy
                // now denies is still denied (the asker is not consulted for a denial).
                // (A parked call's retry resumes the call before anything is decided.)
                Some(Issued::Continuation { .. } | Issued::Parked { .. }) => {
                    return AskAnswer::Approved {
                        by: "continuation".into(),
                    };
                }
                None => {}
            }
            if !self.request.elicitation {
                return AskAnswer::Refused {
                    text: refusal_text(
                        info,
                        "this request did not declare the elicitation capability, so Warden cannot ask",
                    ),
                };
            }
            match self.gateway.signer.issue(
                &info.tool,
                &state_arguments(&info.arguments),
                self.client,
            ) {
                Ok(state) => AskAnswer::Input(json!({
                    "resultType": "input_required",
                    "inputRequests": {APPROVAL_KEY: {
                        "method": "elicitation/create",
                        "params": Gateway::approval_question(info),
                    }},
                    "requestState": state,
                })),
                Err(error) => AskAnswer::Refused {
                    text: refusal_text(info, &format!("Warden cannot ask now: {error}")),
                },
            }
        })
    }
}

/// The error for a request that needs a capability the client did not declare.
pub fn missing_capability(what: &str) -> RpcError {
    RpcError::new(
        MISSING_CAPABILITY,
        format!("this request needs the `{what}` capability"),
    )
    .with_data(json!({"requiredCapabilities": {what: {}}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_message_sets_the_era() {
        assert_eq!(era_of("initialize", &Value::Null), Some(Era::Legacy));
        let modern = json!({"_meta": {META_VERSION: "2026-07-28"}});
        assert_eq!(era_of("server/discover", &modern), Some(Era::Modern));
        assert_eq!(era_of("tools/list", &json!({})), None);
    }

    #[test]
    fn list_cursors_carry_their_kind_and_generation() {
        let cursor = encode_list_cursor("warden-prompts:", 42, 100);
        assert_eq!(
            decode_list_cursor("warden-prompts:", &cursor),
            Some((42, 100))
        );
        assert_eq!(decode_list_cursor("warden-resources:", &cursor), None);
        // A cursor of the first version (no generation) is not one of these.
        assert_eq!(
            decode_list_cursor(
                "warden-prompts:",
                &encode_cursor_with("warden-prompts:", 100)
            ),
            None
        );
    }

    #[test]
    fn cursors_round_trip_and_foreign_ones_do_not_parse() {
        assert_eq!(decode_cursor(&encode_cursor(200)), Some(200));
        assert_eq!(decode_cursor("not-a-cursor"), None);
        assert_eq!(
            decode_cursor(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("x:1")),
            None
        );
    }

    #[test]
    fn elicitation_capability_shapes() {
        assert!(has_form_elicitation(&json!({"elicitation": {}})));
        assert!(has_form_elicitation(&json!({"elicitation": {"form": {}}})));
        assert!(!has_form_elicitation(&json!({"elicitation": {"url": {}}})));
        assert!(!has_form_elicitation(&json!({})));
    }
}
