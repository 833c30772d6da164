//! The policy's argument matching (`Policy::compile` on a project's `[policy]` table and
//! `Policy::decide` on a model's arguments). Properties: compiling refuses or accepts
//! (never panics); deciding is deterministic (a decision never depends on timing or on
//! anything but its inputs); and untrusted text in the context never relaxes a decision
//! (what is denied or asked about with a clean context is not allowed once the context
//! holds the arguments' own text as an untrusted result).
//!
//! Input: a `warden.toml` fragment, a NUL, then the arguments as JSON. When the fragment
//! does not compile, a fixed set of rules from the policy's tests is used.

use std::sync::OnceLock;

use serde_json::Value;
use warden_policy::{Decision, Hints, Policy, Provenance, ToolFacts, Trust};

use crate::policy_paths::{compile, writer};

const RULES: &str = r#"
[policy.servers.mail]
trust = "trusted"

[[policy.rules]]
tools = "mail__send"
effect = "allow"
when = [{ arg = "/to", matches = "[a-z]+@mine\\.org" }]

[[policy.rules]]
tools = "mail__send"
effect = "deny"
when = [{ arg = "/to", matches = "(?i).*@evil\\.com" }]

[[policy.rules]]
tools = "*__delete_*"
effect = "deny"

[[policy.rules]]
tools = "calc__*"
effect = "allow"
when = [{ arg = "/n", equals = 5 }]
"#;

fn fallback() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| compile(RULES).expect("the fixed rules compile"))
}

fn rank(decision: Decision) -> u8 {
    match decision {
        Decision::Allow => 0,
        Decision::Ask => 1,
        Decision::Deny => 2,
    }
}

/// Decides one call.
pub fn run(data: &[u8]) {
    let (rules, arguments) = crate::split2(data);
    let compiled = std::str::from_utf8(rules).ok().and_then(compile);
    let policy: &Policy = match &compiled {
        Some(policy) => policy,
        None => fallback(),
    };
    let Ok(arguments) = serde_json::from_slice::<Value>(arguments) else {
        return;
    };
    let tools: [ToolFacts; 4] = [
        writer("mail__send"),
        writer("calc__add"),
        writer("gh__delete_repo"),
        ToolFacts::new("web", "web__fetch", Trust::Untrusted, Default::default()),
    ];
    let clean = Provenance::new();
    let mut tainted = Provenance::new();
    let web = policy.tool_facts("web", "fetch", "web__fetch", Hints::default());
    let _ = tainted.add_result(&web, 1, &arguments.to_string());
    for tool in &tools {
        let first = policy.decide(tool, &arguments, &clean);
        let again = policy.decide(tool, &arguments, &clean);
        assert_eq!(first.decision, again.decision, "not deterministic");
        let _ = first.to_string();
        let worse = policy.decide(tool, &arguments, &tainted);
        assert!(
            rank(worse.decision) >= rank(first.decision),
            "untrusted context relaxed {} on {}: {} -> {}",
            tool.qualified,
            arguments,
            first.decision,
            worse.decision
        );
    }
}
