//! Warden's host core, shared by every front end (`warden run`, `chat`, `call`, `tools`,
//! `scan`, `approve`, and the gateway), so that they cannot disagree about a server, a
//! tool or a call: they differ only in how they talk to their user.
//!
//! - [`HostBuilder`] ([`Host::builder`]) is the one way to make a host: it takes the
//!   policy, the state store and the front end's hooks (elicitation, OAuth, audit
//!   failures), and starts every configured server in parallel through the guards below.
//! - [`Host`] holds the connected servers and the [`Catalogue`] of their tools; it is
//!   shared (`Arc<Host>`) by every session of a front end.
//! - [`Session`] owns the provenance of one conversation (or one gateway client): a front
//!   end hands it a call and gets a decision ([`Session::prepare`]) and then a result
//!   ([`Session::send`]); the session labels every result into its context and writes
//!   every attempt's audit row itself.
//! - [`audit`]: the one audit writer, with typed outcomes.
//! - [`approvals`]: project-server approvals, pinned tool definitions and their drift, and
//!   the quarantine of definitions the description scan flags ([`Reviewer`]).
//! - [`pins`]: pinned executables, checked at the launcher seam ([`PinningLauncher`]);
//!   [`relay_pins`]: the same for servers inside a sandbox, on the supervisor's report.
//! - [`ToolSearch`] ranks the catalogue's tools by words (`warden-search`), the one ranking
//!   `warden tools --search` prints and the agent loop's tool search returns.
//! - [`naming`], [`schema`] and [`result_text`] are the rules the catalogue and the
//!   sessions are built from.
//!
//! The guards live here rather than in the binary so that a new front end (the gateway)
//! gets them by building a host, and cannot start a server or send a call around them.

pub mod approvals;
pub mod audit;
pub mod builder;
pub mod cache;
pub mod catalogue;
pub mod egress_audit;
pub mod host;
pub mod naming;
pub mod packages;
pub mod pins;
pub mod relay_pins;
pub mod result_text;
pub mod schema;
pub mod search;
pub mod session;
pub mod starts;

#[cfg(test)]
mod forward_tests;
#[cfg(test)]
mod refresh_tests;
#[cfg(test)]
mod test_support;

pub use approvals::{Reviewer, ToolScan};
pub use audit::{ApprovedBy, Attempt, AuditError, AuditLog, COMMIT_DEADLINE, Outcome, WriteError};
pub use builder::HostBuilder;
pub use catalogue::{Catalogue, CatalogueTool, HiddenTool, RejectedTool, ToolRef, hints_of};
pub use host::{
    Host, HostError, NoReview, Review, ServerEntry, ServerStatus, StartFailed, ToolsChange,
};
pub use pins::PinningLauncher;
pub use schema::{SchemaLimits, Violation};
pub use search::{
    DEFAULT_SEARCH_LIMIT, Hit, MAX_SEARCH_LIMIT, Ranking, ToolSearch, pending_search_vectors,
    server_instructions, settle_search_vectors, tool_docs, tool_docs_with,
};
pub use session::{Delivery, DetachedCall, PreparedCall, Session};
pub use starts::{StartCounts, StartGate, StartState, default_parallel_starts};
