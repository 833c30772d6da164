//! The configuration shapes (the `[policy]` table of `warden.toml`), as plain data;
//! [`Policy::compile`](crate::Policy::compile) checks and compiles them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::label::{Confidentiality, Integrity, Trust};

/// The whole `[policy]` table.
///
/// ```toml
/// [policy.servers.github]
/// trust = "trusted"
/// confidentiality = "public"
///
/// [[policy.rules]]
/// tools = "github__*"
/// effect = "allow"
/// when = [{ arg = "/repo", equals = "me/warden" }]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// What to do with calls that would be asked about: `assisted` (the default: apply the
    /// autonomy rules, ask about the rest), `cautious` (ask) or `autonomous` (apply the
    /// autonomy rules, deny the rest). See [`Mode`] and decision 0026.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Trust and result labels per server name.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerPolicy>,
    /// User rules, `policy.rules[0]` first; their order does not matter to decisions.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

/// What Warden believes about one server's tools and their results.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPolicy {
    /// Believe the server's annotations? Default `untrusted`.
    pub trust: Option<Trust>,
    /// Who may have written its results. Default `untrusted`.
    pub integrity: Option<Integrity>,
    /// Whether its results may hold private data. Default `private`.
    pub confidentiality: Option<Confidentiality>,
    /// Declares every tool read-only (or not), whatever the server says.
    pub read_only: Option<bool>,
    /// Declares every tool open-world (or closed), whatever the server says.
    pub open_world: Option<bool>,
    /// Declares where every tool's writes land: `own` (the user's own space: their drive,
    /// calendar, mailbox) or `shared` (may reach other people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// Refinements for single tools, by the tool's own (raw) name as the server lists it.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolPolicy>,
}

/// A refinement for one tool; each field set here replaces the server's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    /// Believe this tool's annotations?
    pub trust: Option<Trust>,
    /// Who may have written its results.
    pub integrity: Option<Integrity>,
    /// Whether its results may hold private data.
    pub confidentiality: Option<Confidentiality>,
    /// Declares the tool read-only (or not).
    pub read_only: Option<bool>,
    /// Declares the tool open-world (or closed).
    pub open_world: Option<bool>,
    /// Declares where the tool's writes land (see [`ServerPolicy::scope`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// Arguments (JSON pointers, `"/to"`) that say where the effect lands or who it
    /// reaches: an injection must never choose them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<String>,
    /// Arguments that say what the action hits in the user's own space (an id, a path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Arguments that grant something (a password, a permission).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    /// Arguments that are only carried along (a body, a subject): any value is fine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payload: Vec<String>,
}

/// What happens to a call the flow floors or the defaults would ask about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Ask a human about every call the flow floors or the defaults would ask about.
    Cautious,
    /// Apply the autonomy rules (argument roles, value provenance, scope of effect); ask a
    /// human about what they do not allow. The default (decision 0026): it asks about a
    /// fifth as much as `Cautious` and lets no more injected effects through.
    #[default]
    Assisted,
    /// Apply the autonomy rules and deny what they do not allow: for unattended runs and
    /// front ends that cannot show a prompt. Nothing is ever asked.
    Autonomous,
}

impl Mode {
    /// `"cautious"`, `"assisted"` or `"autonomous"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Cautious => "cautious",
            Mode::Assisted => "assisted",
            Mode::Autonomous => "autonomous",
        }
    }
}

/// Where a tool's writes land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Only the user's own space.
    Own,
    /// May reach other people or the world.
    Shared,
}

/// One user rule: `[[policy.rules]]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// One glob or a list of globs over qualified names (`server__tool`); `*` matches any
    /// run of characters, `?` one character.
    pub tools: Globs,
    /// What the rule does when it matches.
    pub effect: Effect,
    /// Argument constraints; all must hold for the rule to match. Not allowed on `hide`.
    #[serde(default)]
    pub when: Vec<ArgConstraint>,
    /// For `allow` only: still allow while the context holds untrusted content (the
    /// tainted-write floor is waived for this rule). Arguments the rule does not constrain
    /// that were copied from untrusted text still ask.
    #[serde(default)]
    pub even_if_tainted: bool,
    /// For `allow` only: still allow while the context holds private data, when the call may
    /// reach the outside world (the private-egress floor is waived for this rule).
    #[serde(default)]
    pub even_if_private: bool,
    /// A note shown with every decision this rule makes.
    pub note: Option<String>,
    /// Only for calls made for these authenticated callers of `warden serve --http`
    /// (`[serve.auth]`), by the subject (`sub`) of their access token, compared exactly.
    /// A rule with `caller` never matches a call without an authenticated caller (the
    /// command line, the agent loop, stdio and loopback clients). Not allowed on `hide`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<Globs>,
    /// Only for calls made through these OAuth clients (the token's `client_id` or `azp`),
    /// compared exactly; as `caller`, never matches a call without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_client: Option<Globs>,
    /// Only for calls made for callers whose token these authorization servers issued
    /// (`iss`, compared exactly, as in `[[serve.auth.issuers]]`); as `caller`, never
    /// matches a call without one. One subject at two issuers is two people: with several
    /// issuers configured, `warden serve` refuses a `caller` or `caller_client` rule
    /// without `caller_issuer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_issuer: Option<Globs>,
}

/// One glob or several (for `caller`, `caller_client` and `caller_issuer`: exact values).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Globs {
    /// `tools = "github__*"`
    One(String),
    /// `tools = ["github__*", "gitlab__*"]`
    Many(Vec<String>),
}

impl Globs {
    /// The globs as a slice.
    pub fn as_slice(&self) -> &[String] {
        match self {
            Globs::One(g) => std::slice::from_ref(g),
            Globs::Many(gs) => gs,
        }
    }
}

/// What a rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Allow the call (flow floors may still ask).
    Allow,
    /// Ask a human.
    Ask,
    /// Refuse the call.
    Deny,
    /// Remove the tool from the catalogue: it is neither listed nor callable.
    Hide,
}

/// A test on one argument: exactly one of `equals`, `matches`, `under`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ArgConstraint {
    /// A JSON pointer into the arguments: `"/to"`, `"/options/0/path"`; `""` is all of them.
    pub arg: String,
    /// The argument equals this JSON value (numbers compare by value: `1` equals `1.0`).
    pub equals: Option<Value>,
    /// The argument is a string matched whole by this regular expression (`regex` crate
    /// syntax; write `(?i)` for case-insensitive).
    pub matches: Option<String>,
    /// The argument is an absolute path at or under this absolute directory, after `.` and
    /// `..` are removed and the injected [`PathResolver`](crate::PathResolver) has resolved
    /// both.
    pub under: Option<String>,
}
