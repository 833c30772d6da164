//! What one client hears of changes, whatever its era and transport: the tool, resource
//! and prompt lists changed, and updates of the resources it subscribed to.
//!
//! A [`Listener`] watches the backend's three list generations (`watch` channels, which
//! coalesce: no queue grows with changes, whatever a client's speed) and, when given one,
//! a client's [`Subscriber`]. Each transport turns what it yields into messages: a
//! 2025-11-25 session's notifications (stdio, the HTTP GET stream), or a 2026-07-28
//! `subscriptions/listen` stream's, tagged with its id.

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::subscriptions::Subscriber;

/// Which changes a client asked to hear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    /// `notifications/tools/list_changed`.
    pub tools: bool,
    /// `notifications/resources/list_changed`.
    pub resources: bool,
    /// `notifications/prompts/list_changed`.
    pub prompts: bool,
}

impl Want {
    /// Every list change (a 2025-11-25 session hears them all).
    pub const ALL: Want = Want {
        tools: true,
        resources: true,
        prompts: true,
    };
}

/// One change a client hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The tools offered changed.
    Tools,
    /// The resources or templates offered changed.
    Resources,
    /// The prompts offered changed.
    Prompts,
    /// A subscribed resource was updated.
    Updated(String),
}

impl Notice {
    /// The notification, without `_meta`.
    pub fn message(&self) -> Value {
        match self {
            Notice::Tools => list_changed("tools"),
            Notice::Resources => list_changed("resources"),
            Notice::Prompts => list_changed("prompts"),
            Notice::Updated(uri) => json!({
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": uri},
            }),
        }
    }
}

fn list_changed(kind: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": format!("notifications/{kind}/list_changed")})
}

/// The three list generations, as a client's stream names its position (an SSE event id).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generations {
    /// Of the tools offered.
    pub tools: u64,
    /// Of the resources and templates offered.
    pub resources: u64,
    /// Of the prompts offered.
    pub prompts: u64,
}

impl Generations {
    /// As an SSE event id: `tools.resources.prompts`.
    pub fn event_id(&self) -> String {
        format!("{}.{}.{}", self.tools, self.resources, self.prompts)
    }

    /// An event id read back (`Last-Event-ID`): three numbers, or one (the tool generation
    /// alone, as the first version of the stream numbered its events).
    pub fn parse(id: &str) -> Option<Generations> {
        let mut parts = id.trim().split('.');
        let tools = parts.next()?.parse().ok()?;
        let (resources, prompts) = match (parts.next(), parts.next()) {
            (None, None) => (0, 0),
            (Some(resources), Some(prompts)) => (resources.parse().ok()?, prompts.parse().ok()?),
            _ => return None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Generations {
            tools,
            resources,
            prompts,
        })
    }

    /// The list changes `self` missed compared with `now` (a client reconnecting with an
    /// older event id is told of each list at once: the notices coalesce, so one of each
    /// is the whole replay).
    pub fn missed(&self, now: &Generations) -> Vec<Notice> {
        let mut missed = Vec::new();
        if self.tools < now.tools {
            missed.push(Notice::Tools);
        }
        if self.resources < now.resources {
            missed.push(Notice::Resources);
        }
        if self.prompts < now.prompts {
            missed.push(Notice::Prompts);
        }
        missed
    }
}

/// One client's view of the changes.
pub struct Listener {
    tools: watch::Receiver<u64>,
    resources: watch::Receiver<u64>,
    prompts: watch::Receiver<u64>,
    want: Want,
}

impl Listener {
    /// A listener of the three channels, hearing what `want` says from now on.
    pub(crate) fn new(
        mut tools: watch::Receiver<u64>,
        mut resources: watch::Receiver<u64>,
        mut prompts: watch::Receiver<u64>,
        want: Want,
    ) -> Listener {
        tools.mark_unchanged();
        resources.mark_unchanged();
        prompts.mark_unchanged();
        Listener {
            tools,
            resources,
            prompts,
            want,
        }
    }

    /// Where the three lists stand now.
    pub fn generations(&self) -> Generations {
        Generations {
            tools: *self.tools.borrow(),
            resources: *self.resources.borrow(),
            prompts: *self.prompts.borrow(),
        }
    }

    /// The next changes this client hears: list changes it wants, and updates of what
    /// `subscriber` subscribed to. `None` once the backend is gone.
    pub async fn next(&mut self, subscriber: Option<&Subscriber>) -> Option<Vec<Notice>> {
        let updates = async {
            match subscriber {
                Some(subscriber) => subscriber.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = self.tools.changed(), if self.want.tools => {
                changed.ok()?;
                Some(vec![Notice::Tools])
            }
            changed = self.resources.changed(), if self.want.resources => {
                changed.ok()?;
                Some(vec![Notice::Resources])
            }
            changed = self.prompts.changed(), if self.want.prompts => {
                changed.ok()?;
                Some(vec![Notice::Prompts])
            }
            uris = updates => Some(uris.into_iter().map(Notice::Updated).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip_and_old_ids_name_the_tools() {
        let now = Generations {
            tools: 4,
            resources: 2,
            prompts: 9,
        };
        assert_eq!(Generations::parse(&now.event_id()), Some(now));
        assert_eq!(
            Generations::parse("3"),
            Some(Generations {
                tools: 3,
                ..Generations::default()
            })
        );
        assert_eq!(Generations::parse("1.2"), None);
        assert_eq!(Generations::parse("1.2.3.4"), None);
        assert_eq!(Generations::parse("x"), None);
        let old = Generations::parse("4.1.9").unwrap_or_default();
        assert_eq!(old.missed(&now), vec![Notice::Resources]);
    }

    #[tokio::test]
    async fn a_listener_hears_what_it_wants() {
        let (tools, _) = watch::channel(0u64);
        let (resources, _) = watch::channel(0u64);
        let (prompts, _) = watch::channel(0u64);
        let mut listener = Listener::new(
            tools.subscribe(),
            resources.subscribe(),
            prompts.subscribe(),
            Want {
                tools: false,
                resources: true,
                prompts: false,
            },
        );
        tools.send_modify(|g| *g += 1);
        prompts.send_modify(|g| *g += 1);
        resources.send_modify(|g| *g += 1);
        assert_eq!(listener.next(None).await, Some(vec![Notice::Resources]));
        assert_eq!(listener.generations().tools, 1);
    }
}
