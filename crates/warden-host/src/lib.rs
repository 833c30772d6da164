//! Warden's host core, shared by every front end (the command line today; the agent loop
//! and the gateway later), so that they cannot disagree about a tool or a call.
//!
//! - [`Host`] connects every configured server in parallel, decides every call with the
//!   policy (`warden-policy`) and routes it: [`Host::prepare`], then [`Host::send`].
//! - [`Catalogue`] holds every tool under a unique qualified name (`server__tool`) with its
//!   input schema compiled and its policy facts computed once; arguments are checked before
//!   anything is sent, and tools the policy hides are left out.
//! - [`ToolSearch`] ranks the catalogue's tools by words (`warden-search`), the one ranking
//!   `warden tools --search` prints and the agent loop's tool search returns.
//! - [`naming`] and [`schema`] are the two rules the catalogue is built from.

pub mod catalogue;
pub mod host;
pub mod naming;
pub mod schema;
pub mod search;

pub use catalogue::{Catalogue, CatalogueTool, HiddenTool, RejectedTool, hints_of};
pub use host::{
    Approval, DetachedCall, Host, HostError, NoReview, PreparedCall, Review, ServerEntry,
    ServerStatus, ToolsChange,
};
pub use schema::{SchemaLimits, Violation};
pub use search::{
    DEFAULT_SEARCH_LIMIT, Hit, MAX_SEARCH_LIMIT, Ranking, ToolSearch, server_instructions,
    tool_docs, tool_docs_with,
};
