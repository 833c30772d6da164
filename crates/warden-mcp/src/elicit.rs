//! Elicitation: a server asking the user, through Warden, for input during a call.
//!
//! Two ways to ask, in Warden's own types so no SDK type leaks out of this crate:
//! a form (a flat object schema of strings, numbers, integers, booleans and enums) or a URL
//! the user should open. Both reach a front end's [`Elicitor`], which answers accept
//! (with the form's values), decline, or cancel. What the user types is the user's own
//! words: trusted input, not server content.
//!
//! Every connection declares the same capabilities, [`client_capabilities`]: `elicitation`
//! (form and URL), whatever the front end. A server may list other tools to a client that
//! declares elicitation (server-everything does), so declaring it only where someone can
//! answer would make the same server's definitions differ between `warden tools` and
//! `warden run` and trip their pins. Where [`ConnectOptions`](crate::ConnectOptions) carry
//! no elicitor, every request is declined ([`DeclineAll`]), which servers handle as "the
//! user said no". Sampling and roots are never offered (they are deprecated in 2026-07-28,
//! and Warden has no use for them in either era). See
//! docs/decisions/0021-terminal-and-capabilities.md.

use std::fmt::Debug;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

/// The capabilities Warden declares to every server, on every transport, in both eras
/// (`initialize`, and each 2026-07-28 request's `_meta`): `elicitation` with `form` and
/// `url`, nothing else.
pub fn client_capabilities() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}})
}

/// What a server asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationRequest {
    /// Fill in a form.
    Form {
        /// Why the server asks, in its words (untrusted text).
        message: String,
        /// The requested schema: `{"type": "object", "properties": {...}, "required": [...]}`.
        schema: Value,
    },
    /// Open a URL and do something there (sign in, pay, consent), out of Warden's sight.
    Url {
        /// Why the server asks, in its words (untrusted text).
        message: String,
        /// The URL, as sent; never opened without the user's explicit consent.
        url: String,
    },
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// Accepted: the form's values (`None` for a URL request: consent, not completion).
    Accept(Option<Map<String, Value>>),
    /// Declined: the server should go on without the input.
    Decline,
    /// Cancelled: the user dismissed the whole request.
    Cancel,
}

/// A front end's way of putting a server's request to the user.
pub trait Elicitor: Send + Sync + Debug {
    /// Asks the user on behalf of `server` (its configured name).
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitationRequest,
    ) -> BoxFuture<'a, ElicitationAnswer>;
}

/// Declines every request: for a front end with nobody to ask (`warden run`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeclineAll;

impl Elicitor for DeclineAll {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitationRequest,
    ) -> BoxFuture<'a, ElicitationAnswer> {
        let kind = match request {
            ElicitationRequest::Form { .. } => "form",
            ElicitationRequest::Url { .. } => "url",
        };
        tracing::info!(server = %server, kind, "elicitation declined: nobody to ask");
        Box::pin(std::future::ready(ElicitationAnswer::Decline))
    }
}
