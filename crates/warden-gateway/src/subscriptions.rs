//! Resource subscriptions of the gateway's clients, multiplexed onto the one connection
//! Warden keeps per upstream server (decision 0039).
//!
//! An upstream server sees one client, Warden: it is subscribed to a URI while at least
//! one of the gateway's clients is, and its `notifications/resources/updated` for that URI
//! is handed to exactly the clients subscribed to that URI *of that server*, never to
//! another client, session or listen stream. Each client holds a [`Subscriber`]: a
//! 2025-11-25 session (stdio, or an HTTP `Mcp-Session-Id`) has one for its life, a
//! 2026-07-28 `subscriptions/listen` stream has one for as long as it is open. Dropping it
//! ends its subscriptions; the upstream subscription ends when nobody wants it any more
//! ([`crate::Backend::relay_notices`] reconciles).
//!
//! Bounded: [`MAX_PER_CLIENT`] subscriptions per subscriber, [`MAX_PER_SERVER`] distinct
//! URIs per upstream server, and a subscriber's undelivered updates are a set of its own
//! subscribed URIs (an update repeated before delivery is delivered once).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::Notify;

/// Resources one subscriber (a session, a listen stream) may be subscribed to at once.
pub const MAX_PER_CLIENT: usize = 64;
/// Distinct resources of one upstream server the clients may be subscribed to at once.
pub const MAX_PER_SERVER: usize = 1024;

/// A subscription's key: the server that owns the resource, and its URI.
type Key = (String, String);

/// Every client's subscriptions.
#[derive(Default)]
pub struct Registry {
    by_key: Mutex<BTreeMap<Key, BTreeMap<u64, Weak<Inbox>>>>,
    next: AtomicU64,
}

/// One subscriber's state: what it subscribes to and its undelivered updates.
pub struct Inbox {
    id: u64,
    keys: Mutex<BTreeSet<Key>>,
    pending: Mutex<BTreeSet<String>>,
    wake: Notify,
}

/// Why a subscription was refused by the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The subscriber has [`MAX_PER_CLIENT`] already.
    ClientFull,
    /// The server has [`MAX_PER_SERVER`] subscribed URIs already.
    ServerFull,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::ClientFull => write!(
                f,
                "this client is subscribed to {MAX_PER_CLIENT} resources, the most Warden \
                 allows; unsubscribe from one first"
            ),
            Refused::ServerFull => write!(
                f,
                "the server's resources have {MAX_PER_SERVER} subscriptions through Warden, \
                 the most it allows"
            ),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A client's subscriptions: they end when it is dropped (its session ended, its listen
/// stream closed).
pub struct Subscriber {
    inbox: Arc<Inbox>,
    registry: Arc<Registry>,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.registry.forget(&self.inbox);
    }
}

impl Subscriber {
    /// The updated URIs waiting for this subscriber, each once, clearing them.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.inbox.pending))
            .into_iter()
            .collect()
    }

    /// Waits for updates and takes them ([`take`](Subscriber::take)).
    pub async fn next(&self) -> Vec<String> {
        loop {
            let taken = self.take();
            if !taken.is_empty() {
                return taken;
            }
            self.inbox.wake.notified().await;
        }
    }

    /// The server this subscriber's subscription to `uri` is with, if it has one.
    pub fn server_of(&self, uri: &str) -> Option<String> {
        lock(&self.inbox.keys)
            .iter()
            .find(|(_, subscribed)| subscribed == uri)
            .map(|(server, _)| server.clone())
    }

    /// Ends every subscription now (its session ended), as dropping it would.
    pub fn end(&self) {
        self.registry.forget(&self.inbox);
    }

    /// How many resources it is subscribed to.
    pub fn count(&self) -> usize {
        lock(&self.inbox.keys).len()
    }
}

impl Registry {
    /// A new subscriber without subscriptions.
    pub fn subscriber(self: &Arc<Self>) -> Subscriber {
        Subscriber {
            inbox: Arc::new(Inbox {
                id: self.next.fetch_add(1, Ordering::Relaxed),
                keys: Mutex::new(BTreeSet::new()),
                pending: Mutex::new(BTreeSet::new()),
                wake: Notify::new(),
            }),
            registry: Arc::clone(self),
        }
    }

    /// Whether `subscriber` may subscribe to `uri` of `server`: `Ok(true)` when nobody is
    /// subscribed to it yet (the upstream subscription is needed), `Ok(false)` when it
    /// already is (by anyone, this subscriber included).
    pub fn admit(&self, subscriber: &Subscriber, server: &str, uri: &str) -> Result<bool, Refused> {
        let key = (server.to_owned(), uri.to_owned());
        let keys = lock(&subscriber.inbox.keys);
        if keys.contains(&key) {
            return Ok(false);
        }
        if keys.len() >= MAX_PER_CLIENT {
            return Err(Refused::ClientFull);
        }
        let by_key = lock(&self.by_key);
        let live = |subscribers: &BTreeMap<u64, Weak<Inbox>>| {
            subscribers.values().any(|inbox| inbox.strong_count() > 0)
        };
        if by_key.get(&key).is_some_and(live) {
            return Ok(false);
        }
        let of_server = by_key
            .iter()
            .filter(|((owner, _), subscribers)| owner == server && live(subscribers))
            .count();
        if of_server >= MAX_PER_SERVER {
            return Err(Refused::ServerFull);
        }
        Ok(true)
    }

    /// Records `subscriber`'s subscription to `uri` of `server` (after [`admit`]).
    ///
    /// [`admit`]: Registry::admit
    pub fn add(&self, subscriber: &Subscriber, server: &str, uri: &str) {
        let key = (server.to_owned(), uri.to_owned());
        lock(&subscriber.inbox.keys).insert(key.clone());
        lock(&self.by_key)
            .entry(key)
            .or_default()
            .insert(subscriber.inbox.id, Arc::downgrade(&subscriber.inbox));
    }

    /// Ends `subscriber`'s subscription to `uri`: the server it was with, and whether it
    /// was the last one to that resource (the upstream subscription can end). `None` when
    /// it had none.
    pub fn remove(&self, subscriber: &Subscriber, uri: &str) -> Option<(String, bool)> {
        let key = {
            let mut keys = lock(&subscriber.inbox.keys);
            let key = keys
                .iter()
                .find(|(_, subscribed)| subscribed == uri)?
                .clone();
            keys.remove(&key);
            key
        };
        lock(&subscriber.inbox.pending).remove(uri);
        let mut by_key = lock(&self.by_key);
        let last = match by_key.get_mut(&key) {
            Some(subscribers) => {
                subscribers.remove(&subscriber.inbox.id);
                subscribers.retain(|_, inbox| inbox.strong_count() > 0);
                subscribers.is_empty()
            }
            None => true,
        };
        if last {
            by_key.remove(&key);
        }
        Some((key.0, last))
    }

    /// Forgets every subscription of a subscriber that went away.
    fn forget(&self, inbox: &Inbox) {
        let keys = std::mem::take(&mut *lock(&inbox.keys));
        let mut by_key = lock(&self.by_key);
        for key in keys {
            if let Some(subscribers) = by_key.get_mut(&key) {
                subscribers.remove(&inbox.id);
                subscribers.retain(|_, other| other.strong_count() > 0);
                if subscribers.is_empty() {
                    by_key.remove(&key);
                }
            }
        }
    }

    /// The URIs of `server` some live subscriber wants.
    pub fn wanted(&self, server: &str) -> BTreeSet<String> {
        lock(&self.by_key)
            .iter()
            .filter(|((owner, _), subscribers)| {
                owner == server && subscribers.values().any(|inbox| inbox.strong_count() > 0)
            })
            .map(|((_, uri), _)| uri.clone())
            .collect()
    }

    /// Hands an update of `uri` from `server` to every subscriber of that very resource;
    /// returns how many.
    pub fn deliver(&self, server: &str, uri: &str) -> usize {
        let subscribers: Vec<Arc<Inbox>> = lock(&self.by_key)
            .get(&(server.to_owned(), uri.to_owned()))
            .into_iter()
            .flat_map(|subscribers| subscribers.values().filter_map(Weak::upgrade))
            .collect();
        for inbox in &subscribers {
            lock(&inbox.pending).insert(uri.to_owned());
            inbox.wake.notify_one();
        }
        subscribers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_update_reaches_exactly_the_subscribers_of_that_resource() {
        let registry = Arc::new(Registry::default());
        let a = registry.subscriber();
        let b = registry.subscriber();
        assert_eq!(registry.admit(&a, "s", "x://1"), Ok(true));
        registry.add(&a, "s", "x://1");
        assert_eq!(registry.admit(&b, "s", "x://2"), Ok(true));
        registry.add(&b, "s", "x://2");
        // Another server's resource of the same URI is another resource.
        assert_eq!(registry.admit(&b, "other", "x://1"), Ok(true));
        assert_eq!(registry.deliver("s", "x://1"), 1);
        assert_eq!(registry.deliver("other", "x://1"), 0);
        assert_eq!(a.take(), vec!["x://1".to_owned()]);
        assert!(b.take().is_empty(), "b never hears of a's resource");
        // Repeated updates before delivery are delivered once.
        registry.deliver("s", "x://2");
        registry.deliver("s", "x://2");
        assert_eq!(b.next().await, vec!["x://2".to_owned()]);
        assert!(b.take().is_empty());
    }

    #[test]
    fn the_last_subscriber_ends_the_upstream_subscription_and_a_drop_forgets() {
        let registry = Arc::new(Registry::default());
        let a = registry.subscriber();
        let b = registry.subscriber();
        registry.add(&a, "s", "x://1");
        assert_eq!(
            registry.admit(&b, "s", "x://1"),
            Ok(false),
            "already upstream"
        );
        registry.add(&b, "s", "x://1");
        assert_eq!(registry.remove(&a, "x://1"), Some(("s".to_owned(), false)));
        assert_eq!(
            registry.remove(&a, "x://1"),
            None,
            "not subscribed any more"
        );
        assert_eq!(registry.wanted("s").len(), 1);
        drop(b);
        assert!(registry.wanted("s").is_empty(), "b's session ended");
        assert_eq!(registry.deliver("s", "x://1"), 0);
    }

    #[test]
    fn subscriptions_are_capped_per_client_and_per_server() {
        let registry = Arc::new(Registry::default());
        let a = registry.subscriber();
        for n in 0..MAX_PER_CLIENT {
            let uri = format!("x://{n}");
            assert_eq!(registry.admit(&a, "s", &uri), Ok(true));
            registry.add(&a, "s", &uri);
        }
        assert_eq!(
            registry.admit(&a, "s", "x://more"),
            Err(Refused::ClientFull)
        );
        // Others fill the server up to its cap.
        let mut others = Vec::new();
        let mut n = MAX_PER_CLIENT;
        while n < MAX_PER_SERVER {
            let other = registry.subscriber();
            for _ in 0..MAX_PER_CLIENT.min(MAX_PER_SERVER - n) {
                let uri = format!("x://{n}");
                registry.add(&other, "s", &uri);
                n += 1;
            }
            others.push(other);
        }
        let late = registry.subscriber();
        assert_eq!(
            registry.admit(&late, "s", "x://late"),
            Err(Refused::ServerFull)
        );
        assert_eq!(registry.admit(&late, "t", "x://late"), Ok(true));
        assert_eq!(registry.admit(&late, "s", "x://0"), Ok(false), "shared");
        drop(others);
        assert_eq!(registry.admit(&late, "s", "x://late"), Ok(true));
    }
}
