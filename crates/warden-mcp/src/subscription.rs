//! How a connection keeps its resource subscriptions with its server, the same whatever
//! the transport (stdio through rmcp, Streamable HTTP) and era (decision 0039).
//!
//! - [`ListenFilter`]: what a 2026-07-28 `subscriptions/listen` asks for, or what its
//!   acknowledgement honours: the one reading and writing of that filter, used by Warden's
//!   listen to a server (either transport) and by the gateway's own listen for its
//!   clients.
//! - [`change`]: the bookkeeping around one `resources/subscribe` or
//!   `resources/unsubscribe`, whatever carries it: the connection's record of subscribed
//!   URIs ([`ServerNotices`]) is capped, a subscription counts only once the server
//!   accepted it, and an end is recorded at once and never undone. A server that fails to
//!   end one gets its error reported to the caller, but the URI stays forgotten: its
//!   updates are dropped from then on, nothing tries again, and a later subscription to
//!   the same URI is sent afresh (servers take a repeated subscribe as one).

use serde_json::{Map, Value, json};

use crate::error::CallError;
use crate::notices::{MAX_SUBSCRIBED, ServerNotices};

/// The notifications a `subscriptions/listen` stream carries (`params.notifications`):
/// the three list changes and the resources whose updates are wanted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenFilter {
    /// `toolsListChanged`.
    pub tools: bool,
    /// `resourcesListChanged`.
    pub resources: bool,
    /// `promptsListChanged`.
    pub prompts: bool,
    /// `resourceSubscriptions`.
    pub uris: Vec<String>,
}

/// The list kinds and their keys in a filter.
const LISTS: [(&str, &str); 3] = [
    ("tools", "toolsListChanged"),
    ("resources", "resourcesListChanged"),
    ("prompts", "promptsListChanged"),
];

impl ListenFilter {
    /// What Warden asks a server for: the list changes its `capabilities` say it
    /// announces (`listChanged: true`), and `uris` when it declared
    /// `resources.subscribe` (the union of the connection's subscriptions: one listen per
    /// server, its notifications demultiplexed by the gateway).
    pub fn upstream(capabilities: &Value, uris: Vec<String>) -> ListenFilter {
        let announces = |kind: &str| {
            capabilities.pointer(&format!("/{kind}/listChanged")) == Some(&Value::Bool(true))
        };
        ListenFilter {
            tools: announces("tools"),
            resources: announces("resources"),
            prompts: announces("prompts"),
            uris: if crate::rmcp_client::declares_subscribe(capabilities) {
                uris
            } else {
                Vec::new()
            },
        }
    }

    /// A filter as sent (`params.notifications`) or acknowledged: a key that is not
    /// `true` asks for nothing, and URIs that are not strings are left out.
    pub fn from_json(filter: Option<&Value>) -> ListenFilter {
        let asked = |key: &str| {
            filter
                .and_then(|filter| filter.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        ListenFilter {
            tools: asked(LISTS[0].1),
            resources: asked(LISTS[1].1),
            prompts: asked(LISTS[2].1),
            uris: filter
                .and_then(|filter| filter.get("resourceSubscriptions"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        }
    }

    /// As the wire carries it: only what is asked for (no `false` keys, no empty list).
    pub fn to_json(&self) -> Value {
        let mut filter = Map::new();
        for ((_, key), on) in LISTS.iter().zip([self.tools, self.resources, self.prompts]) {
            if on {
                filter.insert((*key).into(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            filter.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(filter)
    }

    /// As rmcp's type, for a stdio server.
    pub(crate) fn to_rmcp(&self) -> rmcp::model::SubscriptionFilter {
        let on = |on: bool| on.then_some(true);
        let mut filter = rmcp::model::SubscriptionFilter::new();
        filter.tools_list_changed = on(self.tools);
        filter.resources_list_changed = on(self.resources);
        filter.prompts_list_changed = on(self.prompts);
        filter.resource_subscriptions = (!self.uris.is_empty()).then(|| self.uris.clone());
        filter
    }

    /// Whether it asks for nothing at all.
    pub fn is_empty(&self) -> bool {
        !self.tools && !self.resources && !self.prompts && self.uris.is_empty()
    }

    /// Whether it names `uri` among its resources.
    pub fn names(&self, uri: &str) -> bool {
        self.uris.iter().any(|named| named == uri)
    }
}

/// A subscription to `uri` made (`on`) or ended through `send` (what the transport does:
/// the request, or a new listen), with the connection's record in `notices` kept the same
/// way for every transport:
///
/// - subscribing past [`MAX_SUBSCRIBED`] is refused without sending anything;
/// - a subscription is recorded before it is sent (so a listen opened for it carries
///   it), and forgotten again if the server refuses it or does not answer in time;
/// - an end is recorded at once, before it is sent (updates of a URI nobody wants are
///   dropped from now on), and stays recorded whatever the server says. Its failure is
///   returned for the caller to report; nothing is retried, and a later subscription to
///   the URI is sent again.
pub(crate) async fn change<F>(
    notices: &ServerNotices,
    uri: &str,
    on: bool,
    send: F,
) -> Result<(), CallError>
where
    F: std::future::Future<Output = Result<(), CallError>>,
{
    if on && !notices.set_subscribed(uri, true) {
        return Err(CallError::Rejected {
            code: -32602,
            message: format!(
                "this server already has {MAX_SUBSCRIBED} subscriptions, the most Warden keeps"
            ),
        });
    }
    if !on {
        notices.set_subscribed(uri, false);
    }
    let sent = send.await;
    if on && sent.is_err() {
        notices.set_subscribed(uri, false);
    }
    sent
}

/// A listen's acknowledgement, read for a subscription to `uri` (`on`): made only when the
/// server honoured its URI. An end needs nothing honoured.
pub(crate) fn honoured(acknowledged: &ListenFilter, uri: &str, on: bool) -> Result<(), CallError> {
    if on && !acknowledged.names(uri) {
        return Err(CallError::Rejected {
            code: -32602,
            message: format!(
                "the server did not honour a subscription to `{uri}` (its subscriptions/listen \
                 acknowledgement leaves it out)"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_carries_the_uris_and_the_announced_list_changes() {
        let caps = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}});
        let made = ListenFilter::upstream(&caps, vec!["x://1".into()]);
        assert_eq!(
            made.to_json(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["x://1"]})
        );
        let rmcp = made.to_rmcp();
        assert_eq!(rmcp.tools_list_changed, Some(true));
        assert_eq!(rmcp.resources_list_changed, None);
        assert_eq!(rmcp.prompts_list_changed, None);
        assert_eq!(rmcp.resource_subscriptions, Some(vec!["x://1".to_owned()]));
        // A server that did not declare subscriptions is asked for none.
        let caps = json!({"resources": {"listChanged": true}});
        let made = ListenFilter::upstream(&caps, vec!["x://1".into()]);
        assert!(made.uris.is_empty() && made.resources && !made.is_empty());
        assert!(ListenFilter::upstream(&json!({}), Vec::new()).is_empty());
    }

    #[test]
    fn a_filter_read_back_keeps_only_what_it_asks_for() {
        let read = ListenFilter::from_json(Some(&json!({
            "toolsListChanged": true, "promptsListChanged": "yes",
            "resourceSubscriptions": ["x://1", 7, "x://2"]})));
        assert_eq!(
            read,
            ListenFilter {
                tools: true,
                resources: false,
                prompts: false,
                uris: vec!["x://1".into(), "x://2".into()],
            }
        );
        assert_eq!(ListenFilter::from_json(Some(&read.to_json())), read);
        assert!(ListenFilter::from_json(None).is_empty());
        assert!(honoured(&read, "x://2", true).is_ok());
        assert!(honoured(&read, "x://3", true).is_err());
        assert!(honoured(&read, "x://3", false).is_ok());
    }

    /// The bookkeeping every transport shares: a refused subscription is not kept, an
    /// end is kept even when the server fails it (and the failure is returned), and a
    /// subscription past the cap is never sent.
    #[tokio::test]
    async fn a_refused_subscription_is_forgotten_and_a_failed_end_stays_ended() {
        let notices = ServerNotices::default();
        let refused = || async {
            Err(CallError::Rejected {
                code: -32603,
                message: "no".into(),
            })
        };
        assert!(change(&notices, "x://1", true, refused()).await.is_err());
        assert!(!notices.is_subscribed("x://1"));
        change(&notices, "x://1", true, async { Ok(()) })
            .await
            .unwrap_or_default();
        assert!(notices.is_subscribed("x://1"));
        assert!(change(&notices, "x://1", false, refused()).await.is_err());
        assert!(
            !notices.is_subscribed("x://1"),
            "an end is kept whatever the server said"
        );
        for n in 0..MAX_SUBSCRIBED {
            change(&notices, &format!("x://{n}"), true, async { Ok(()) })
                .await
                .unwrap_or_default();
        }
        let mut sent = false;
        let over = change(&notices, "x://over", true, async {
            sent = true;
            Ok(())
        })
        .await;
        assert!(over.is_err() && !sent, "past the cap nothing is sent");
    }
}
