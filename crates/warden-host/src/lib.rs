//! Warden's host core, shared by every front end (the command line today; the agent loop
//! and the gateway later), so that they cannot disagree about a tool or a call.
//!
//! - [`Host`] connects every configured server in parallel and routes calls.
//! - [`Catalogue`] holds every tool under a unique qualified name (`server__tool`) with its
//!   input schema compiled once; arguments are checked before anything is sent.
//! - [`naming`] and [`schema`] are the two rules the catalogue is built from.

pub mod catalogue;
pub mod host;
pub mod naming;
pub mod schema;

pub use catalogue::{Catalogue, CatalogueTool, RejectedTool};
pub use host::{Host, HostError, ServerEntry, ServerStatus};
pub use schema::{SchemaLimits, Violation};
