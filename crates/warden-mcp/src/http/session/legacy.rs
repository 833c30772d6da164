//! The 2025-11-25 era: `initialize`, then `Mcp-Session-Id` and `MCP-Protocol-Version` on
//! every request; a 404 re-initialises once; the session's own event stream is listened
//! on; `notifications/cancelled` on timeout; `DELETE` on close.

use std::sync::Mutex;

use serde_json::{Map, Value, json};
use warden_net::reqwest::Method;
use warden_net::reqwest::header::{HeaderName, HeaderValue};

use super::{
    FAREWELL_LIMIT, LEGACY_VERSIONS, LISTEN_OPEN_LIMIT, MAX_SESSION_ID, Questions, Session, follow,
    header, lock, result_of, with_progress_token,
};
use crate::connection::Era;
use crate::http::error::HttpError;
use crate::http::exchange::StreamContext;
use crate::http::exchange::{ListenOpen, ListenState};

impl Session {
    pub(super) fn session_headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let state = lock(&self.state);
        let mut headers = Vec::new();
        if let Some(id) = &state.id {
            headers.extend(header("mcp-session-id", id));
        }
        headers.extend(header("mcp-protocol-version", &state.version));
        headers
    }

    pub(super) async fn legacy(
        &self,
        method: &str,
        params: Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
        questions: &Questions,
    ) -> Result<Value, HttpError> {
        let mut reinitialise = true;
        loop {
            // Not while the session is being opened again (it has no id meanwhile).
            drop(self.reopening.lock().await);
            let headers = self.session_headers();
            let used = lock(&self.state).id.clone();
            let had_session = used.is_some();
            let id = self.next_id();
            if let Some(current) = current {
                *lock(current) = Some(id.clone());
            }
            let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
            let mut params = params.clone();
            let progress_token = questions.progress_token(&id);
            if let Some(token) = &progress_token {
                with_progress_token(&mut params, token);
            }
            if !params.is_empty() {
                message["params"] = Value::Object(params);
            }
            let context = StreamContext {
                session_headers: &headers,
                resumable: true,
                requests: self.profile.requests.as_ref(),
                behind: questions.behind(progress_token.as_deref()),
            };
            let outcome = self
                .endpoint
                .post(&message, &headers, Some(&id), &context)
                .await
                .and_then(|(reply, _)| result_of(reply, 200));
            match outcome {
                Err(HttpError::Status { status: 404, .. } | HttpError::Rpc { status: 404, .. })
                    if had_session && reinitialise =>
                {
                    reinitialise = false;
                    let _reopening = self.reopening.lock().await;
                    // Another request may have opened it again already: then send anew.
                    if lock(&self.state).id == used {
                        tracing::info!(server = %self.endpoint.server, "the session expired (HTTP 404); initialising again");
                        lock(&self.state).id = None;
                        self.initialize().await?;
                    }
                }
                other => return other,
            }
        }
    }

    /// The `initialize` handshake and `notifications/initialized` (legacy era).
    pub(super) async fn initialize(&self) -> Result<Value, HttpError> {
        let id = self.next_id();
        let message = json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": self.profile.legacy_version,
                "capabilities": self.profile.capabilities,
                "clientInfo": {"name": self.profile.name, "version": self.profile.version},
            },
        });
        let context = StreamContext {
            session_headers: &[],
            resumable: false,
            requests: self.profile.requests.as_ref(),
            behind: None,
        };
        let (reply, headers) = self
            .endpoint
            .post(&message, &[], Some(&id), &context)
            .await?;
        let result = result_of(reply, 200)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !LEGACY_VERSIONS.contains(&version.as_str()) {
            return Err(HttpError::Era(format!(
                "the server answered initialize with protocol version {version:?}, which Warden \
                 does not speak (it speaks {})",
                LEGACY_VERSIONS.join(", ")
            )));
        }
        let session = match headers.get("mcp-session-id") {
            None => None,
            Some(value) => {
                let bytes = value.as_bytes();
                if bytes.is_empty()
                    || bytes.len() > MAX_SESSION_ID
                    || !bytes.iter().all(|b| (0x21..=0x7e).contains(b))
                {
                    return Err(HttpError::Malformed(
                        "the Mcp-Session-Id header is not 1 to 1024 visible ASCII characters"
                            .into(),
                    ));
                }
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
        };
        {
            let mut state = lock(&self.state);
            state.id = session;
            state.version = version;
            state.capabilities = result.get("capabilities").cloned().unwrap_or(Value::Null);
        }
        // A new session has none of the old one's resource subscriptions: they are made
        // again by whoever keeps them (the gateway's next tick), and their subscribers
        // told to read again (an update in between was not announced to anyone).
        self.profile.notices.lists().subscriptions_lost();
        let headers = self.session_headers();
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let context = StreamContext {
            session_headers: &headers,
            resumable: false,
            requests: self.profile.requests.as_ref(),
            behind: None,
        };
        self.endpoint
            .post(&notification, &headers, None, &context)
            .await?;
        self.listen(headers).await;
        Ok(result)
    }

    /// Starts (or restarts, after a new `initialize`) the task that follows the session's
    /// own event stream: it answers the requests the server sends there and notes its
    /// notices (tool list changes), and reopens the stream with `Last-Event-ID` when it
    /// ends, within a retry budget. The stream is open before this returns, so a request
    /// the server sends while answering the next call is not lost. A 405 means the server
    /// offers no such stream: nothing to follow.
    pub(super) async fn listen(&self, headers: Vec<(HeaderName, HeaderValue)>) {
        let response = match self
            .endpoint
            .open_listen(&headers, None, LISTEN_OPEN_LIMIT)
            .await
        {
            ListenOpen::Open(response, _) => response,
            ListenOpen::NotOffered => return,
            ListenOpen::Failed(reason) => {
                tracing::debug!(server = %self.endpoint.server, "no server event stream: {reason}");
                return;
            }
        };
        let endpoint = self.endpoint.clone();
        let requests = self.profile.requests.clone();
        let reopen_with = {
            let endpoint = self.endpoint.clone();
            let headers = headers.clone();
            move |last_id: Option<String>| {
                let endpoint = endpoint.clone();
                let headers = headers.clone();
                async move {
                    endpoint
                        .open_listen(&headers, last_id.as_deref(), LISTEN_OPEN_LIMIT)
                        .await
                }
            }
        };
        let task = tokio::spawn(follow(
            endpoint,
            response,
            ListenState::default(),
            headers,
            requests,
            reopen_with,
        ));
        if let Some(old) = lock(&self.listener).replace(task) {
            old.abort();
        }
    }

    /// Tells a legacy server to stop working on request `id` (the caller gave up). In the
    /// modern era closing the response stream is the cancellation, so nothing is sent.
    pub async fn cancel(&self, id: Value) {
        if self.era != Era::Legacy {
            return;
        }
        let headers = self.session_headers();
        let notification = json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the caller stopped waiting"},
        });
        let context = StreamContext {
            session_headers: &headers,
            resumable: false,
            requests: self.profile.requests.as_ref(),
            behind: None,
        };
        let send = self.endpoint.post(&notification, &headers, None, &context);
        let _ = tokio::time::timeout(FAREWELL_LIMIT, send).await;
    }

    /// Ends a legacy session with `DELETE` (a 405 means the server does not support it).
    pub async fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(task) = lock(&self.listener).take() {
            task.abort();
        }
        if self.era != Era::Legacy || lock(&self.state).id.is_none() {
            return;
        }
        let headers = self.session_headers();
        match self
            .endpoint
            .send_bodyless(Method::DELETE, &headers, FAREWELL_LIMIT)
            .await
        {
            Ok(status) => {
                tracing::debug!(server = %self.endpoint.server, %status, "session deleted")
            }
            Err(error) => {
                tracing::debug!(server = %self.endpoint.server, "DELETE of the session failed: {error}")
            }
        }
    }
}
