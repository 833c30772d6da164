//! Where a request goes once it is built: reqwest's own connection pool in production, or
//! a [`Transport`] a test or the simulator controls (decision 0041, revision 2).
//!
//! reqwest's connector cannot be replaced by an in-memory one (its connector layer must
//! yield reqwest's private connection type), so the seam sits one step above it: the
//! finished [`reqwest::Request`] goes to the transport, which answers with a
//! [`reqwest::Response`]. An in-memory transport builds that response from an
//! `http::Response` (reqwest converts one) whose body is a stream it feeds
//! ([`reqwest::Body::wrap_stream`]), so everything above (status and
//! content-type checks, [`crate::read_capped`], [`crate::sse_events`]) runs unchanged. What
//! the seam leaves out is what reqwest's connector does: TLS, name lookups, the connect
//! and idle-read timeouts of [`crate::HttpOptions`].

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::NetError;

/// Sends built requests and returns the responses' heads (their bodies stream).
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Sends `request`. An error is one a real exchange could have met before a response
    /// head arrived (a refused or reset connection, a timeout), worded as
    /// [`NetError::from_reqwest`] words it, so [`NetError::is_transient`] reads it alike.
    fn send(
        &self,
        request: reqwest::Request,
    ) -> BoxFuture<'static, Result<reqwest::Response, NetError>>;
}

/// Sends `builder`'s request through `transport`, or through the builder's own client when
/// there is none.
pub async fn send(
    builder: reqwest::RequestBuilder,
    transport: Option<&Arc<dyn Transport>>,
) -> Result<reqwest::Response, NetError> {
    match transport {
        None => builder.send().await.map_err(NetError::from_reqwest),
        Some(transport) => {
            let request = builder.build().map_err(NetError::from_reqwest)?;
            transport.send(request).await
        }
    }
}
