//! What a server announces besides its tool list, kept for a gateway to relay: that its
//! resource list or prompt list changed (`notifications/resources/list_changed`,
//! `notifications/prompts/list_changed`), and which subscribed resources it says were
//! updated (`notifications/resources/updated`).
//!
//! One [`ServerNotices`] per connection, filled by the transport as messages arrive and
//! read by whoever relays them ([`crate::Connection::notices`]). Bounded: an update is kept
//! only for a URI this connection subscribed to ([`crate::Connection::subscribe`]), once
//! however often it is repeated before it is taken, and the subscriptions themselves are
//! capped ([`MAX_SUBSCRIBED`]). A server cannot grow Warden's memory by announcing.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

/// Resources one connection may be subscribed to at once, at most.
pub const MAX_SUBSCRIBED: usize = 4096;

/// A server's announcements, waiting to be taken.
#[derive(Debug, Default)]
pub struct ServerNotices {
    resources_changed: AtomicBool,
    prompts_changed: AtomicBool,
    state: Mutex<Subscribed>,
}

#[derive(Debug, Default)]
struct Subscribed {
    /// The URIs this connection is subscribed to.
    uris: BTreeSet<String>,
    /// The subscribed URIs the server said were updated since the last take.
    updated: BTreeSet<String>,
}

impl ServerNotices {
    fn state(&self) -> std::sync::MutexGuard<'_, Subscribed> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes note of a notification the server sent (`method`, `params`); anything but the
    /// three kinds kept here is ignored.
    pub fn note(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/resources/list_changed" => {
                self.resources_changed.store(true, Ordering::SeqCst);
            }
            "notifications/prompts/list_changed" => {
                self.prompts_changed.store(true, Ordering::SeqCst);
            }
            "notifications/resources/updated" => {
                let Some(uri) = params.and_then(|p| p.get("uri")).and_then(Value::as_str) else {
                    return;
                };
                self.updated(uri);
            }
            _ => {}
        }
    }

    /// Records that the server said `uri` was updated (kept only when subscribed).
    pub fn updated(&self, uri: &str) {
        let mut state = self.state();
        if state.uris.contains(uri) && !state.updated.contains(uri) {
            state.updated.insert(uri.to_owned());
        }
    }

    /// Marks the resource and prompt lists as possibly changed (a gap in a stream that
    /// may have lost a notice).
    pub fn mark_lists_changed(&self) {
        self.resources_changed.store(true, Ordering::SeqCst);
        self.prompts_changed.store(true, Ordering::SeqCst);
    }

    /// Marks every subscribed resource as updated (a gap in the stream its updates come on
    /// may have lost one).
    pub fn mark_subscribed_updated(&self) {
        let mut state = self.state();
        let uris: Vec<String> = state.uris.iter().cloned().collect();
        state.updated.extend(uris);
    }

    /// The server forgot this connection's subscriptions (a new upstream session): they
    /// are no longer recorded, so whoever keeps them makes them again
    /// ([`subscribed`](ServerNotices::subscribed) no longer lists them), and each is
    /// marked updated (what changed in between was not announced).
    pub fn subscriptions_lost(&self) {
        let mut state = self.state();
        let uris = std::mem::take(&mut state.uris);
        if !uris.is_empty() {
            tracing::info!(
                "{} resource subscriptions lost with the server's session; they are made again",
                uris.len()
            );
        }
        state.updated.extend(uris);
    }

    /// True once after the server said its resource list changed, clearing the mark.
    pub fn take_resources_changed(&self) -> bool {
        self.resources_changed.swap(false, Ordering::SeqCst)
    }

    /// True once after the server said its prompt list changed, clearing the mark.
    pub fn take_prompts_changed(&self) -> bool {
        self.prompts_changed.swap(false, Ordering::SeqCst)
    }

    /// The subscribed URIs the server said were updated since the last take, each once.
    pub fn take_updated(&self) -> Vec<String> {
        std::mem::take(&mut self.state().updated)
            .into_iter()
            .collect()
    }

    /// Records a subscription (`on`) or its end; `false` when subscribing would pass
    /// [`MAX_SUBSCRIBED`].
    pub fn set_subscribed(&self, uri: &str, on: bool) -> bool {
        let mut state = self.state();
        if on {
            if !state.uris.contains(uri) && state.uris.len() >= MAX_SUBSCRIBED {
                return false;
            }
            state.uris.insert(uri.to_owned());
        } else {
            state.uris.remove(uri);
            state.updated.remove(uri);
        }
        true
    }

    /// The URIs this connection is subscribed to.
    pub fn subscribed(&self) -> Vec<String> {
        self.state().uris.iter().cloned().collect()
    }

    /// Whether this connection is subscribed to `uri`.
    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.state().uris.contains(uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_subscribed_updates_are_kept_once_each() {
        let notices = ServerNotices::default();
        let updated = |uri: &str| json!({"uri": uri});
        notices.note("notifications/resources/updated", Some(&updated("a://1")));
        assert!(notices.take_updated().is_empty(), "not subscribed: dropped");
        assert!(notices.set_subscribed("a://1", true));
        for _ in 0..3 {
            notices.note("notifications/resources/updated", Some(&updated("a://1")));
        }
        notices.note("notifications/resources/updated", Some(&updated("a://2")));
        assert_eq!(notices.take_updated(), vec!["a://1".to_owned()]);
        assert!(notices.take_updated().is_empty());
        notices.note("notifications/resources/updated", Some(&updated("a://1")));
        assert!(notices.set_subscribed("a://1", false));
        assert!(notices.take_updated().is_empty(), "unsubscribed: forgotten");
    }

    #[test]
    fn a_lost_session_forgets_its_subscriptions_and_marks_them_updated() {
        let notices = ServerNotices::default();
        assert!(notices.set_subscribed("a://1", true));
        assert!(notices.set_subscribed("a://2", true));
        notices.subscriptions_lost();
        assert!(notices.subscribed().is_empty(), "to be made again");
        assert_eq!(notices.take_updated(), vec!["a://1", "a://2"]);
        // A gap in a stream marks what is subscribed, and keeps it subscribed.
        assert!(notices.set_subscribed("a://3", true));
        notices.mark_subscribed_updated();
        assert_eq!(notices.take_updated(), vec!["a://3"]);
        assert_eq!(notices.subscribed(), vec!["a://3"]);
    }

    #[test]
    fn list_changes_are_taken_once() {
        let notices = ServerNotices::default();
        assert!(!notices.take_resources_changed());
        notices.note("notifications/resources/list_changed", None);
        notices.note("notifications/prompts/list_changed", None);
        assert!(notices.take_resources_changed());
        assert!(!notices.take_resources_changed());
        assert!(notices.take_prompts_changed());
        assert!(!notices.take_prompts_changed());
    }

    #[test]
    fn subscriptions_are_capped() {
        let notices = ServerNotices::default();
        for n in 0..MAX_SUBSCRIBED {
            assert!(notices.set_subscribed(&format!("a://{n}"), true));
        }
        assert!(!notices.set_subscribed("a://one-more", true));
        assert!(notices.set_subscribed("a://0", true), "already subscribed");
    }
}
