//! The one `subscriptions/listen` Warden keeps with a 2026-07-28 stdio server while it is
//! subscribed to some of the server's resources (2026-07-28 has no `resources/subscribe`:
//! the URIs travel in the listen's filter, decision 0039's revision).
//!
//! The listen carries the union of the connection's subscriptions
//! ([`ServerNotices::subscribed`]) and the list changes the server announces; when the
//! union changes it is replaced: the new listen is acknowledged first, then the old one is
//! dropped, which sends its `notifications/cancelled` (rmcp's `Subscription`), so no update
//! falls between the two. rmcp routes each notification to its listen by subscription id
//! and ends a listen whose server sends one outside the acknowledged filter. The updates
//! themselves are noted by the transport as they arrive, in order with the answers around
//! them (the `Watched` receive loop), and kept only for subscribed URIs; the task here
//! drains the listen so its buffer never fills. A listen that ends on its own (the server
//! ended it, or broke the rules) forgets the subscriptions it carried, so whoever keeps
//! them makes them again, and marks them updated.

use crate::connection::AbortOnDrop;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{Peer, Subscription};

use crate::error::CallError;
use crate::notices::ServerNotices;
use crate::subscription::ListenFilter;

/// The listen in force, if any: the task draining it (aborting it drops the listen,
/// which cancels it).
#[derive(Default)]
pub(crate) struct Listen {
    active: tokio::sync::Mutex<Option<AbortOnDrop>>,
}

impl Listen {
    /// Replaces the listen in force by one for `filter` (`None`: ends it), within
    /// `limit`; what the server's acknowledgement honours. On failure the old listen
    /// stays.
    pub(crate) async fn replace(
        &self,
        peer: &Peer<RoleClient>,
        filter: Option<ListenFilter>,
        notices: &Arc<ServerNotices>,
        limit: Duration,
    ) -> Result<ListenFilter, CallError> {
        let mut active = self.active.lock().await;
        let Some(filter) = filter else {
            *active = None;
            return Ok(ListenFilter::default());
        };
        let subscription = match tokio::time::timeout(limit, peer.listen(filter.to_rmcp())).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(error)) => {
                return Err(CallError::Protocol {
                    reason: format!("subscriptions/listen failed: {error}"),
                });
            }
            Err(_) => return Err(CallError::Timeout { after: limit }),
        };
        let acknowledged = subscription.acknowledged();
        let honoured = ListenFilter {
            tools: acknowledged.tools_list_changed == Some(true),
            resources: acknowledged.resources_list_changed == Some(true),
            prompts: acknowledged.prompts_list_changed == Some(true),
            uris: acknowledged
                .resource_subscriptions
                .clone()
                .unwrap_or_default(),
        };
        let task = tokio::spawn(drain(subscription, Arc::clone(notices)));
        // The old listen is dropped (cancelled) only now that the new one is acknowledged.
        *active = Some(AbortOnDrop::new(task));
        Ok(honoured)
    }

    /// Ends the listen in force, if any.
    pub(crate) async fn end(&self) {
        self.active.lock().await.take();
    }
}

/// Reads `subscription` until it ends (its notices were noted by the transport already);
/// an end Warden did not ask for loses its subscriptions, to be made again.
async fn drain(mut subscription: Subscription, notices: Arc<ServerNotices>) {
    loop {
        match subscription.next().await {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(error) => {
                tracing::info!("a subscriptions/listen ended: {error}");
                break;
            }
        }
    }
    tracing::info!(end = ?subscription.end(), "the server ended Warden's subscriptions/listen");
    notices.subscriptions_lost();
}
