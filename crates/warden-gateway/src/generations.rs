//! The aggregated lists kept between requests, by generation (decision 0035).
//!
//! Each read of the upstream servers' lists of one kind is a new **generation**, numbered
//! from a per-start base so that a cursor from an earlier run of the gateway does not name
//! one of this run. A first page (no cursor) is answered from the newest generation while
//! it is younger than [`REUSE_FOR`], so clients listing together cause one read of the
//! upstream servers, not one each (the backend lets one first page read at a time, and
//! those that waited take its generation); after that a first page reads them again. A cursor
//! names its generation: the pages a client follows all come from the one list its first
//! page came from, whatever other clients did meanwhile. The newest [`KEPT`] generations
//! are kept; a cursor of an older one is refused with an error saying to list again.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::aggregate::{Aggregate, Kind};

/// How long the newest aggregate of a kind answers first pages before the upstream
/// servers are read again.
pub const REUSE_FOR: Duration = Duration::from_secs(5);
/// Generations kept per kind: the newest, and the one before it (a client paging through
/// it when another client's first page started a new one still gets its pages).
pub const KEPT: usize = 2;

struct Kept {
    generation: u64,
    aggregate: Arc<Aggregate>,
    read_at: Instant,
}

/// The aggregates kept, newest last per kind.
pub struct Generations {
    kept: HashMap<Kind, VecDeque<Kept>>,
    next: u64,
}

impl Generations {
    /// An empty store whose first generation is `base` (the gateway uses its start time,
    /// so generations of different runs differ).
    pub fn new(base: u64) -> Generations {
        Generations {
            kept: HashMap::new(),
            next: base,
        }
    }

    /// Keeps `aggregate`, read at `now`, as the newest generation of `kind`; returns its
    /// number. Generations past [`KEPT`] are dropped.
    pub fn keep(&mut self, kind: Kind, aggregate: Arc<Aggregate>, now: Instant) -> u64 {
        let generation = self.next;
        self.next = self.next.wrapping_add(1);
        let kept = self.kept.entry(kind).or_default();
        kept.push_back(Kept {
            generation,
            aggregate,
            read_at: now,
        });
        while kept.len() > KEPT {
            kept.pop_front();
        }
        generation
    }

    /// The newest generation of `kind` if it was read less than `reuse_for` before `now`.
    pub fn fresh(
        &self,
        kind: Kind,
        now: Instant,
        reuse_for: Duration,
    ) -> Option<(u64, Arc<Aggregate>)> {
        self.kept
            .get(&kind)
            .and_then(VecDeque::back)
            .filter(|kept| now.saturating_duration_since(kept.read_at) < reuse_for)
            .map(|kept| (kept.generation, Arc::clone(&kept.aggregate)))
    }

    /// The newest generation of `kind`, however old.
    pub fn newest(&self, kind: Kind) -> Option<Arc<Aggregate>> {
        self.kept
            .get(&kind)
            .and_then(VecDeque::back)
            .map(|kept| Arc::clone(&kept.aggregate))
    }

    /// Generation `generation` of `kind`, if it is still kept.
    pub fn get(&self, kind: Kind, generation: u64) -> Option<Arc<Aggregate>> {
        self.kept
            .get(&kind)?
            .iter()
            .find(|kept| kept.generation == generation)
            .map(|kept| Arc::clone(&kept.aggregate))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn list(uri: &str) -> Arc<Aggregate> {
        Arc::new(Aggregate {
            entries: vec![json!({"uri": uri})],
            origins: vec![("s".into(), uri.into())],
            left_out: Vec::new(),
        })
    }

    #[test]
    fn a_first_page_reuses_the_newest_generation_only_while_it_is_fresh() {
        let start = Instant::now();
        let mut kept = Generations::new(100);
        assert!(kept.fresh(Kind::Resources, start, REUSE_FOR).is_none());
        let first = kept.keep(Kind::Resources, list("a://1"), start);
        let (generation, reused) = kept
            .fresh(Kind::Resources, start + Duration::from_secs(4), REUSE_FOR)
            .unwrap();
        assert_eq!(generation, first);
        assert_eq!(reused.entries, [json!({"uri": "a://1"})]);
        // Past the window: the caller reads again.
        assert!(
            kept.fresh(Kind::Resources, start + REUSE_FOR, REUSE_FOR)
                .is_none()
        );
        // Kinds are separate.
        assert!(kept.fresh(Kind::Prompts, start, REUSE_FOR).is_none());
    }

    #[test]
    fn a_cursor_generation_is_served_while_kept_and_refused_after() {
        let now = Instant::now();
        let mut kept = Generations::new(7);
        let one = kept.keep(Kind::Prompts, list("p://1"), now);
        let two = kept.keep(Kind::Prompts, list("p://2"), now);
        assert_ne!(one, two);
        // A client paging through the previous generation still gets it, not the newer.
        assert_eq!(
            kept.get(Kind::Prompts, one).unwrap().entries[0]["uri"],
            "p://1"
        );
        assert_eq!(
            kept.newest(Kind::Prompts).unwrap().entries[0]["uri"],
            "p://2"
        );
        let three = kept.keep(Kind::Prompts, list("p://3"), now);
        assert!(kept.get(Kind::Prompts, one).is_none(), "dropped past KEPT");
        assert!(kept.get(Kind::Prompts, two).is_some());
        assert!(kept.get(Kind::Prompts, three).is_some());
        // Another kind's generation is not this kind's.
        assert!(kept.get(Kind::Resources, three).is_none());
    }
}
