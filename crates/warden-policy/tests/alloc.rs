//! The common path allocates nothing but the verdict's reason list.
//!
//! A counting global allocator, and a single test in this binary so that no other test
//! thread allocates while it counts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use support::*;
use warden_policy::{Decision, Provenance, Trust};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only a counter is
// added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract, which is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`, and `new_size` is the caller's valid size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` once to warm up (a regular expression's first use on a thread builds its
/// matching cache, which is then reused), then counts the allocations of a second run.
fn allocations<T>(mut f: impl FnMut() -> T) -> (T, usize) {
    drop(f());
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let out = f();
    (out, ALLOCATIONS.load(Ordering::Relaxed) - before)
}

#[test]
fn common_paths_allocate_only_the_reason_list() {
    let policy = policy(
        r#"
        [[policy.rules]]
        tools = "github__*"
        effect = "allow"
        when = [{ arg = "/repo", equals = "me/warden" }, { arg = "/title", matches = '.{1,80}' }]

        [[policy.rules]]
        tools = "github__delete_*"
        effect = "deny"

        [[policy.rules]]
        tools = "fs__*"
        effect = "allow"
        when = [{ arg = "/path", under = "/work" }]
    "#,
    );
    let issue = trusted_writer("github__create_issue");
    let args = json!({"repo": "me/warden", "title": "a bug", "labels": ["x", "y"]});
    let clean = Provenance::new();

    let (verdict, n) = allocations(|| policy.decide(&issue, &args, &clean));
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(n, 1, "clean context, allow rule: only the reason list");
    drop(verdict);

    let write = trusted_writer("fs__write");
    let write_args = json!({"path": "/work/a/b.txt"});
    let (verdict, n) = allocations(|| policy.decide(&write, &write_args, &clean));
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(n, 1, "path under a root, already normal");
    drop(verdict);

    let delete = trusted_writer("github__delete_repo");
    let (verdict, n) = allocations(|| policy.decide(&delete, &args, &clean));
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(n, 1, "deny rule");
    drop(verdict);

    // Tainted and private: a trusted read-only closed-world tool is still allowed, after
    // walking its arguments for addresses, without allocating more.
    let tainted = tainted_private();
    let reader = tool("fs__read", Trust::Trusted, hints(Some(true), Some(false)));
    let read_args = json!({
        "path": "/work/notes.md",
        "opts": {"lines": [1, 2], "enc": "utf-8", "also": ["main.rs", "www", "file:///work/x"]},
    });
    let (verdict, n) = allocations(|| policy.decide(&reader, &read_args, &tainted));
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(n, 1, "tainted context, allowed read");
    drop(verdict);

    // Default allow in a clean context.
    let no_args = json!({});
    let (verdict, n) = allocations(|| policy.decide(&reader, &no_args, &clean));
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(n, 1, "default allow");
}
