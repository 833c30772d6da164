//! The relay of seed 000: MCP servers that must live inside a sandbox, reached from an
//! agent loop (the brain) outside it.
//!
//! - [`frame`]: the framing of the channel (per-server streams over one byte stream,
//!   length-prefixed, every size capped).
//! - [`supervisor`]: `warden relay supervise`, inside the sandbox: owns the children,
//!   restarts them, confines them, correlates, forwards stderr, enforces deadlines.
//! - [`correlate`]: the id rewriting that keeps a replaced child's late answer from ever
//!   answering a newer request.
//! - [`pins`]: executable pins of servers inside the sandbox, reported by the
//!   supervisor before each start and checked against the brain's store.
//! - [`channel`] and [`dialer`]: the brain's side: the channel command, one per relay, and
//!   a [`warden_mcp::Connection`] per relayed server over it.
//!
//! See docs/relay.md and decision 0030.

pub mod channel;
pub mod correlate;
pub mod dialer;
pub mod frame;
pub mod hello;
pub mod pins;
pub mod supervisor;

pub use dialer::{Dialer, PinnedDialer, RelayConnection};
pub use supervisor::{RestartPolicy, Supervisor};
