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
use rmcp::model::SubscriptionFilter;
use rmcp::service::{Peer, Subscription};
use serde_json::Value;

use crate::error::CallError;
use crate::notices::ServerNotices;

/// The listen in force, if any: the task draining it (aborting it drops the listen,
/// which cancels it).
#[derive(Default)]
pub(crate) struct Listen {
    active: tokio::sync::Mutex<Option<AbortOnDrop>>,
}

/// What a listen asks for: the list changes `capabilities` say the server announces, and
/// `uris`; `None` when there are no URIs (no listen is kept without subscriptions).
pub(crate) fn filter(capabilities: &Value, uris: Vec<String>) -> Option<SubscriptionFilter> {
    if uris.is_empty() {
        return None;
    }
    let announces = |kind: &str| {
        (capabilities.pointer(&format!("/{kind}/listChanged")) == Some(&Value::Bool(true)))
            .then_some(true)
    };
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = announces("tools");
    filter.resources_list_changed = announces("resources");
    filter.prompts_list_changed = announces("prompts");
    filter.resource_subscriptions = Some(uris);
    Some(filter)
}

impl Listen {
    /// Replaces the listen in force by one for `filter` (`None`: ends it), within
    /// `limit`; the URIs the server's acknowledgement honours. On failure the old listen
    /// stays.
    pub(crate) async fn replace(
        &self,
        peer: &Peer<RoleClient>,
        filter: Option<SubscriptionFilter>,
        notices: &Arc<ServerNotices>,
        limit: Duration,
    ) -> Result<Vec<String>, CallError> {
        let mut active = self.active.lock().await;
        let Some(filter) = filter else {
            *active = None;
            return Ok(Vec::new());
        };
        let subscription = match tokio::time::timeout(limit, peer.listen(filter)).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(error)) => {
                return Err(CallError::Protocol {
                    reason: format!("subscriptions/listen failed: {error}"),
                });
            }
            Err(_) => return Err(CallError::Timeout { after: limit }),
        };
        let honoured = subscription
            .acknowledged()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_filter_carries_the_uris_and_the_announced_list_changes() {
        assert!(filter(&json!({"resources": {"subscribe": true}}), Vec::new()).is_none());
        let caps = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}});
        let made = filter(&caps, vec!["x://1".into()]).unwrap_or_default();
        assert_eq!(made.tools_list_changed, Some(true));
        assert_eq!(made.resources_list_changed, None);
        assert_eq!(made.prompts_list_changed, None);
        assert_eq!(made.resource_subscriptions, Some(vec!["x://1".to_owned()]));
    }
}
