//! Warden's agent loop: a language model connected to every configured server, under the
//! policy.
//!
//! - [`model`]: providers behind one trait (Anthropic Messages, OpenAI Chat Completions and
//!   compatible endpoints), streamed, with retries under a budget.
//! - [`conversation`]: the conversation in a provider-neutral form.
//!
//! The loop itself sends the conversation and the exposed tools to the model, routes each
//! tool call through the host's session (`warden_host::Session`: schema validation, the
//! policy in the conversation's context, the result labelled into that context, the audit
//! row) and, when the policy asks, a person; it caps each result, and goes on until the
//! model answers or a turn limit.

pub mod agent;
pub mod approval;
pub mod budget;
pub mod conversation;
pub mod events;
pub mod exposure;
pub mod model;
pub mod result_text;

pub use agent::{Agent, AgentError, AgentSettings};
pub use approval::{AllowAll, ApprovalAnswer, ApprovalRequest, Approver, DenyAll};
pub use events::{Event, Observer, Recorder, ToolCallEvent};
