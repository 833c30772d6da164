//! The policy's path checks (`under` constraints and `normalize_lexically`), on a path a
//! model or a server's result put into a call. Properties:
//!
//! - a normalised path is absolute, has no `.` or `..` left, and normalises to itself;
//! - a call is allowed by the `under = "/work/scratch/"` rule only when the normalised
//!   path really is at or under `/work/scratch`, and one whose normalised path is under
//!   `/home/me/.ssh` is always denied;
//! - the decision for a path equals the decision for its normalised form.
//!
//! Input: the path (any bytes, read as UTF-8 with replacement).

use std::path::{Component, Path};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::json;
use warden_policy::{
    Decision, Hints, Policy, PolicyConfig, Provenance, ToolFacts, Trust, normalize_lexically,
};

// Cautious mode: the property is about the rules' path matching; in the default (assisted)
// mode a trusted write with a clean context is allowed anywhere not denied (decision 0026).
const RULES: &str = r#"
[policy]
mode = "cautious"

[[policy.rules]]
tools = "fs__write"
effect = "allow"
when = [{ arg = "/path", under = "/work/scratch/" }]

[[policy.rules]]
tools = "fs__*"
effect = "deny"
when = [{ arg = "/path", under = "/home/me/.ssh" }]
"#;

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    policy: PolicyConfig,
}

/// Compiles a `warden.toml` fragment's `[policy]`.
pub fn compile(text: &str) -> Option<Policy> {
    let doc: Doc = toml::from_str(text).ok()?;
    Policy::compile(&doc.policy).ok()
}

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| compile(RULES).expect("the fixed rules compile"))
}

/// A trusted tool that writes, in a closed world.
pub fn writer(qualified: &str) -> ToolFacts {
    let hints = Hints {
        read_only: Some(false),
        open_world: Some(false),
        ..Hints::default()
    };
    let server = qualified.split("__").next().unwrap_or(qualified);
    ToolFacts::new(server, qualified, Trust::Trusted, hints)
}

/// Checks one path.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let path = Path::new(text.as_ref());
    let normal = normalize_lexically(path);
    if let Some(normal) = &normal {
        assert!(normal.has_root(), "{normal:?} is not absolute");
        assert!(
            normal
                .components()
                .all(|c| !matches!(c, Component::ParentDir | Component::CurDir)),
            "{normal:?} still has . or .."
        );
        assert_eq!(
            normalize_lexically(normal).as_deref(),
            Some(normal.as_ref()),
            "not idempotent"
        );
    }
    let tool = writer("fs__write");
    let decide = |p: &str| {
        policy()
            .decide(&tool, &json!({ "path": p }), &Provenance::new())
            .decision
    };
    let decision = decide(&text);
    let under = |root: &str| normal.as_deref().is_some_and(|n| n.starts_with(root));
    if decision == Decision::Allow {
        assert!(
            under("/work/scratch"),
            "{text:?} allowed outside /work/scratch"
        );
    }
    if under("/home/me/.ssh") {
        assert_eq!(decision, Decision::Deny, "{text:?} reaches ~/.ssh");
    }
    if let Some(normal) = &normal
        && let Some(shown) = normal.to_str()
    {
        assert_eq!(
            decide(shown),
            decision,
            "{text:?} and {shown:?} decided apart"
        );
    }
}
