//! Who answers when the policy asks about a call.

use futures::future::BoxFuture;
use serde_json::Value;

/// A call put to a person.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The qualified tool name.
    pub tool: String,
    /// Its server.
    pub server: String,
    /// The arguments.
    pub arguments: Value,
    /// The policy's reasons, sources included.
    pub reasons: Vec<String>,
    /// True when a reason is about the flow of untrusted or private data: such a call is
    /// asked about every time, whatever was approved for the session.
    pub tainted: bool,
}

/// An answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run this call.
    Once,
    /// Run this call, and the same tool's later calls in this session (unless a later call
    /// is asked about for the flow of untrusted or private data).
    Session,
    /// Do not run it.
    No,
}

/// Answers approval requests.
pub trait Approver: Send + Sync {
    /// Answers `request`.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer>;
    /// The name recorded as the approver (`user`, `allow-all`).
    fn name(&self) -> &'static str;
    /// What the model is told when this approver says no.
    fn refusal(&self) -> &'static str {
        "The user did not approve this call; it was not run."
    }
}

/// Says no to everything: `--approvals deny`, the default without a terminal.
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve<'a>(&'a self, _request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async { ApprovalAnswer::No })
    }

    fn name(&self) -> &'static str {
        "deny"
    }

    fn refusal(&self) -> &'static str {
        "This call needs the user's approval, and none can be given in this \
         non-interactive run (approvals: deny); it was not run. Do not retry it; \
         finish without it or say what the user should run themselves."
    }
}

/// Says yes to everything the policy asks about (never to what it denies):
/// `--approvals allow-all`, for a sandbox or a test.
pub struct AllowAll;

impl Approver for AllowAll {
    fn approve<'a>(&'a self, _request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async { ApprovalAnswer::Once })
    }

    fn name(&self) -> &'static str {
        "allow-all"
    }
}
