//! The catalogue: every tool of every connected server, under its qualified name, with its
//! input schema compiled and its policy facts computed. Built once from the servers' lists
//! and a policy, and not changed afterwards; a refresh (or a new policy) builds a new one.
//!
//! Tools a `hide` rule matches are left out: they are neither listed, nor resolved, nor
//! suggested, exactly like a tool the server never listed. They are named only in
//! [`Catalogue::hidden`], for the operator (`warden tools` counts them per server). Names
//! are given before hiding, and a name depends only on its own server and tool, so a hide
//! rule never renames another tool.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use warden_mcp::ToolDef;
use warden_policy::{Hints, Policy, Provenance, ReasonKind, ToolFacts};

use crate::naming::{SEPARATOR, qualify};
use crate::schema::{CompiledSchema, SchemaLimits};

/// A tool Warden can call.
#[derive(Debug, Serialize)]
pub struct CatalogueTool {
    /// The unique, model-safe name (`server__tool`).
    pub qualified: String,
    /// The server's configured name.
    pub server: String,
    /// The definition as the server sent it (its `name` is the raw wire name).
    #[serde(flatten)]
    pub def: ToolDef,
    /// What the policy takes the tool to be (trust, the hints it believes, the label of its
    /// results), computed once from the server's annotations and the policy's settings.
    #[serde(skip)]
    pub facts: ToolFacts,
    #[serde(skip)]
    schema: CompiledSchema,
}

impl CatalogueTool {
    /// Checks arguments against the tool's input schema.
    pub fn check(
        &self,
        arguments: &serde_json::Value,
    ) -> Result<(), Vec<crate::schema::Violation>> {
        self.schema.check(arguments)
    }
}

/// A tool a server listed that Warden does not offer, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedTool {
    /// The server's configured name.
    pub server: String,
    /// The tool's raw name.
    pub name: String,
    /// Why it was left out.
    pub reason: String,
}

/// A tool the policy hides: left out of the catalogue on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HiddenTool {
    /// The server's configured name.
    pub server: String,
    /// The tool's raw name.
    pub name: String,
    /// The qualified name the rule matched.
    pub qualified: String,
    /// The index of the (first) hiding rule in `policy.rules`.
    pub rule: Option<usize>,
    /// Which rule hides it (`hidden by policy.rules[3] (shell__*)`).
    pub reason: String,
}

/// The MCP annotations of a tool definition as [`Hints`]: `readOnlyHint`,
/// `destructiveHint`, `idempotentHint` and `openWorldHint`, each only when it is a boolean.
/// Whether they are believed is the policy's call ([`ToolFacts::believed`]).
pub fn hints_of(annotations: Option<&Value>) -> Hints {
    let flag = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    Hints {
        read_only: flag("readOnlyHint"),
        destructive: flag("destructiveHint"),
        idempotent: flag("idempotentHint"),
        open_world: flag("openWorldHint"),
    }
}

/// One tool of one catalogue, holding that catalogue (a snapshot) alive: what a prepared
/// call refers to, so that replacing the host's catalogue never changes the definition a
/// call was decided on.
#[derive(Clone)]
pub struct ToolRef {
    catalogue: Arc<Catalogue>,
    index: usize,
}

impl ToolRef {
    /// The catalogue this tool was resolved in.
    pub fn catalogue(&self) -> &Arc<Catalogue> {
        &self.catalogue
    }
}

impl std::ops::Deref for ToolRef {
    type Target = CatalogueTool;

    fn deref(&self) -> &CatalogueTool {
        // The index was found in this very catalogue, which never changes once built.
        &self.catalogue.tools[self.index]
    }
}

impl std::fmt::Debug for ToolRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ToolRef").field(&self.qualified).finish()
    }
}

/// Every callable tool, in a stable order: servers by name, then each server's own order.
#[derive(Debug, Default)]
pub struct Catalogue {
    tools: Vec<CatalogueTool>,
    by_qualified: HashMap<String, usize>,
    by_raw: HashMap<(String, String), usize>,
    rejected: Vec<RejectedTool>,
    hidden: Vec<HiddenTool>,
}

impl Catalogue {
    /// Builds the catalogue from each server's tool list under the default policy (no
    /// rules, every server untrusted), so nothing is hidden.
    pub fn build(lists: Vec<(String, Vec<ToolDef>)>, limits: SchemaLimits) -> Self {
        Self::build_with_policy(lists, limits, &Policy::default())
    }

    /// Builds the catalogue from each server's tool list: names every tool, compiles its
    /// schema, computes its [`ToolFacts`] with `policy`, and leaves out the tools `policy`
    /// hides.
    pub fn build_with_policy(
        mut lists: Vec<(String, Vec<ToolDef>)>,
        limits: SchemaLimits,
        policy: &Policy,
    ) -> Self {
        lists.sort_by(|a, b| a.0.cmp(&b.0));
        let mut rejected = Vec::new();
        let mut accepted: Vec<(String, ToolDef, CompiledSchema)> = Vec::new();
        for (server, tools) in lists {
            let mut seen = HashSet::new();
            for def in tools {
                if !seen.insert(def.name.clone()) {
                    rejected.push(RejectedTool {
                        server: server.clone(),
                        name: def.name,
                        reason: "listed twice by the server; the first definition is used".into(),
                    });
                    continue;
                }
                match CompiledSchema::compile(&def.input_schema, limits) {
                    Ok(schema) => accepted.push((server.clone(), def, schema)),
                    Err(error) => {
                        tracing::warn!(server = %server, tool = %def.name, "tool left out: {error}");
                        rejected.push(RejectedTool {
                            server: server.clone(),
                            name: def.name,
                            reason: error.to_string(),
                        });
                    }
                }
            }
        }
        let pairs: Vec<(&str, &str)> = accepted
            .iter()
            .map(|(server, def, _)| (server.as_str(), def.name.as_str()))
            .collect();
        let names = qualify(&pairs);
        let mut catalogue = Catalogue {
            rejected,
            ..Catalogue::default()
        };
        for ((server, def, schema), qualified) in accepted.into_iter().zip(names) {
            let hints = hints_of(def.annotations.as_ref());
            let facts = policy.tool_facts_with_schema(
                &server,
                &def.name,
                &qualified,
                hints,
                &def.input_schema,
            );
            if policy.is_hidden(&qualified) {
                // The hide rule's own reason; a hidden tool is denied whatever its arguments.
                let verdict = policy.decide(
                    &facts,
                    &Value::Object(serde_json::Map::new()),
                    &Provenance::new(),
                );
                let first = verdict.reasons.first();
                let rule = first.and_then(|r| match r.kind {
                    ReasonKind::HiddenTool { rule } => Some(rule),
                    _ => None,
                });
                let reason =
                    first.map_or_else(|| "hidden by policy".to_owned(), |r| r.text.to_string());
                tracing::debug!(tool = %qualified, "left out: {reason}");
                catalogue.hidden.push(HiddenTool {
                    server,
                    name: def.name,
                    qualified,
                    rule,
                    reason,
                });
                continue;
            }
            let index = catalogue.tools.len();
            catalogue.by_qualified.insert(qualified.clone(), index);
            catalogue
                .by_raw
                .insert((server.clone(), def.name.clone()), index);
            catalogue.tools.push(CatalogueTool {
                qualified,
                server,
                def,
                facts,
                schema,
            });
        }
        debug_assert!(
            catalogue.indexes_consistent(),
            "catalogue indexes out of step"
        );
        catalogue
    }

    /// True when both indexes point at every tool exactly once, under its own names
    /// (checked by `debug_assert!` wherever the catalogue is built).
    fn indexes_consistent(&self) -> bool {
        self.by_qualified.len() == self.tools.len()
            && self.by_raw.len() == self.tools.len()
            && self.tools.iter().enumerate().all(|(index, tool)| {
                self.by_qualified.get(&tool.qualified) == Some(&index)
                    && self
                        .by_raw
                        .get(&(tool.server.clone(), tool.def.name.clone()))
                        == Some(&index)
            })
    }

    /// Every tool, in the catalogue's stable order.
    pub fn tools(&self) -> &[CatalogueTool] {
        &self.tools
    }

    /// Tools that were listed but left out, with reasons.
    pub fn rejected(&self) -> &[RejectedTool] {
        &self.rejected
    }

    /// Tools the policy hides, with the rule that hides each. For the operator only: a
    /// model or client must not learn that they exist.
    pub fn hidden(&self) -> &[HiddenTool] {
        &self.hidden
    }

    /// The hidden tool `target` names (`server/tool` or a qualified name), if any.
    pub fn hidden_tool(&self, target: &str) -> Option<&HiddenTool> {
        self.hidden.iter().find(|tool| {
            tool.qualified == target
                || target
                    .split_once('/')
                    .is_some_and(|(server, raw)| tool.server == server && tool.name == raw)
        })
    }

    /// The tools of one server.
    pub fn tools_of<'a>(&'a self, server: &'a str) -> impl Iterator<Item = &'a CatalogueTool> {
        self.tools.iter().filter(move |tool| tool.server == server)
    }

    /// Looks a tool up by `server/tool` (raw name) or by qualified name.
    pub fn resolve(&self, target: &str) -> Option<&CatalogueTool> {
        self.position(target)
            .and_then(|index| self.tools.get(index))
    }

    /// Where `target` (as [`resolve`](Catalogue::resolve) takes it) is in [`tools`](Catalogue::tools).
    fn position(&self, target: &str) -> Option<usize> {
        if let Some(&index) = self.by_qualified.get(target) {
            return Some(index);
        }
        let (server, raw) = target.split_once('/')?;
        self.by_raw
            .get(&(server.to_owned(), raw.to_owned()))
            .copied()
    }

    /// Like [`resolve`](Catalogue::resolve), but the tool keeps this catalogue alive: a
    /// call decided on it is sent with exactly the definition it was decided on, even when
    /// the host's catalogue is replaced meanwhile.
    pub fn resolve_shared(self: &Arc<Self>, target: &str) -> Option<ToolRef> {
        let index = self.position(target)?;
        Some(ToolRef {
            catalogue: Arc::clone(self),
            index,
        })
    }

    /// The tool `qualified` names, offered with exactly `def`: whether a call decided on an
    /// older catalogue may still be sent under this one.
    pub fn still_offers(&self, qualified: &str, def: &ToolDef) -> bool {
        self.by_qualified
            .get(qualified)
            .and_then(|&index| self.tools.get(index))
            .is_some_and(|tool| &tool.def == def)
    }

    /// Up to `limit` qualified names that look like `target`, for "did you mean": tools whose
    /// name contains the asked-for name (or is contained in it), or is a small typo away,
    /// closest first.
    pub fn suggest(&self, target: &str, limit: usize) -> Vec<&str> {
        let mut scored: Vec<(usize, &str)> = self
            .tools
            .iter()
            .filter_map(|tool| {
                let asked = asked_tool_name(target, &tool.server).to_ascii_lowercase();
                let name = tool.def.name.to_ascii_lowercase();
                // A part of one or two letters is in too many names to mean anything.
                let contains =
                    |outer: &str, inner: &str| inner.chars().count() >= 2 && outer.contains(inner);
                if contains(&name, &asked) || (name.len() >= 3 && contains(&asked, &name)) {
                    return Some((0, tool.qualified.as_str()));
                }
                let allowed = ((name.chars().count() + 1) / 4).min(3);
                let distance = typo_distance(&asked, &name);
                (distance <= allowed).then_some((distance, tool.qualified.as_str()))
            })
            .collect();
        // Stable: equally close tools keep the catalogue's order.
        scored.sort_by_key(|(score, _)| *score);
        scored
            .into_iter()
            .take(limit)
            .map(|(_, name)| name)
            .collect()
    }
}

/// The tool part of `target` as it would be read for a tool of `server`: after `server/` or
/// `server__`, or the whole text (a name given without its server).
fn asked_tool_name<'a>(target: &'a str, server: &str) -> &'a str {
    target
        .strip_prefix(server)
        .and_then(|rest| {
            rest.strip_prefix('/')
                .or_else(|| rest.strip_prefix(SEPARATOR))
        })
        .or_else(|| target.split_once('/').map(|(_, tool)| tool))
        .unwrap_or(target)
}

/// Longest name compared letter by letter; longer ones only match by containment.
const MAX_TYPO_CHARS: usize = 128;

/// Edits (insert, delete, substitute, swap two neighbours) between two short names.
fn typo_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len() > MAX_TYPO_CHARS || b.len() > MAX_TYPO_CHARS {
        return usize::MAX;
    }
    // d[i][j]: the distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let substitution = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + substitution);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The servers a target may belong to, judged from its text alone: the part before `/`, or
/// every server whose name followed by `__` starts the qualified name. Empty when the text
/// does not tell (a shortened name): then every server is a candidate.
pub fn candidate_servers<'a>(target: &str, servers: &[&'a str]) -> Vec<&'a str> {
    if let Some((server, _)) = target.split_once('/') {
        return servers
            .iter()
            .copied()
            .filter(|name| *name == server)
            .collect();
    }
    servers
        .iter()
        .copied()
        .filter(|name| {
            target
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(SEPARATOR))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: serde_json::Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            title: None,
            description: None,
            input_schema: schema,
            output_schema: None,
            annotations: None,
        }
    }

    #[test]
    fn resolves_both_target_forms_and_keeps_a_stable_order() {
        let object = json!({"type": "object"});
        let catalogue = Catalogue::build(
            vec![
                (
                    "zeta".into(),
                    vec![tool("b", object.clone()), tool("a", object.clone())],
                ),
                ("alpha".into(), vec![tool("get-sum", object.clone())]),
            ],
            SchemaLimits::default(),
        );
        let order: Vec<&str> = catalogue
            .tools()
            .iter()
            .map(|t| t.qualified.as_str())
            .collect();
        assert_eq!(order, vec!["alpha__get-sum", "zeta__b", "zeta__a"]);
        assert_eq!(catalogue.resolve("zeta/a").unwrap().qualified, "zeta__a");
        assert_eq!(
            catalogue.resolve("alpha__get-sum").unwrap().def.name,
            "get-sum"
        );
        assert!(catalogue.resolve("alpha/nope").is_none());
    }

    #[test]
    fn duplicate_and_uncompilable_tools_are_rejected_with_reasons() {
        let catalogue = Catalogue::build(
            vec![(
                "s".into(),
                vec![
                    tool("a", json!({"type": "object"})),
                    tool("a", json!({"type": "object"})),
                    tool("bad", json!("not a schema")),
                ],
            )],
            SchemaLimits::default(),
        );
        assert_eq!(catalogue.tools().len(), 1);
        let reasons: Vec<(&str, &str)> = catalogue
            .rejected()
            .iter()
            .map(|r| (r.name.as_str(), r.reason.as_str()))
            .collect();
        assert!(reasons[0].0 == "a" && reasons[0].1.contains("listed twice"));
        assert!(reasons[1].0 == "bad" && reasons[1].1.contains("not a JSON object"));
    }

    #[test]
    fn suggestions_catch_parts_and_typos_but_not_noise() {
        let object = json!({"type": "object"});
        let catalogue = Catalogue::build(
            vec![
                (
                    "good".into(),
                    vec![
                        tool("echo", object.clone()),
                        tool("add", object.clone()),
                        tool("a", object.clone()),
                    ],
                ),
                (
                    "time".into(),
                    vec![tool("get_current_time", object.clone())],
                ),
            ],
            SchemaLimits::default(),
        );
        let suggest = |target| catalogue.suggest(target, 3);
        assert_eq!(suggest("good/ad"), ["good__add"]);
        assert_eq!(suggest("good__ehco"), ["good__echo"]);
        assert_eq!(suggest("good/echoo"), ["good__echo"]);
        assert_eq!(suggest("time/get_curent_time"), ["time__get_current_time"]);
        assert_eq!(suggest("current_time"), ["time__get_current_time"]);
        assert!(suggest("good/nothing_like_it").is_empty());
        assert!(suggest("good/").is_empty());
        assert_eq!(typo_distance("ehco", "echo"), 1);
        assert_eq!(typo_distance("", "abc"), 3);
    }

    /// Server `s` trusted (with `raw` declared open-world); `s__secret*` hidden; `s__a`
    /// denied.
    fn trusting_policy() -> Policy {
        let config: warden_policy::PolicyConfig = serde_json::from_value(json!({
            "servers": {"s": {"trust": "trusted", "tools": {"raw": {"open_world": true}}}},
            "rules": [
                {"tools": "s__secret*", "effect": "hide", "note": "not for models"},
                {"tools": "s__a", "effect": "deny"}
            ]
        }))
        .unwrap();
        Policy::compile(&config).unwrap()
    }

    #[test]
    fn facts_come_from_annotations_as_far_as_the_policy_believes_them() {
        let mut read_only = tool("raw", json!({"type": "object"}));
        read_only.annotations = Some(json!({
            "readOnlyHint": true, "openWorldHint": false, "destructiveHint": "yes"
        }));
        let lists = || {
            vec![(
                "s".to_owned(),
                vec![read_only.clone(), tool("a", json!({"type": "object"}))],
            )]
        };
        assert_eq!(
            hints_of(read_only.annotations.as_ref()),
            Hints {
                read_only: Some(true),
                open_world: Some(false),
                destructive: None,
                idempotent: None,
            }
        );
        // Untrusted (the default): the hints are carried but not believed.
        let catalogue = Catalogue::build(lists(), SchemaLimits::default());
        let facts = &catalogue.resolve("s/raw").unwrap().facts;
        assert_eq!(&*facts.qualified, "s__raw");
        assert_eq!(facts.hints.read_only, Some(true));
        assert!(facts.may_write() && facts.open_world());
        // Trusted: believed, except where the policy declares otherwise.
        let catalogue =
            Catalogue::build_with_policy(lists(), SchemaLimits::default(), &trusting_policy());
        let facts = &catalogue.resolve("s/raw").unwrap().facts;
        assert!(!facts.may_write());
        assert!(facts.open_world(), "declared open-world by the policy");
        let facts = &catalogue.resolve("s__a").unwrap().facts;
        assert!(facts.may_write(), "no readOnlyHint: it may write");
    }

    #[test]
    fn hidden_tools_are_left_out_without_renaming_others() {
        let object = json!({"type": "object"});
        let lists = vec![(
            "s".to_owned(),
            vec![
                tool("secret_key", object.clone()),
                tool("secret", object.clone()),
                tool("a", object.clone()),
                tool("secrets", object.clone()),
            ],
        )];
        let catalogue =
            Catalogue::build_with_policy(lists, SchemaLimits::default(), &trusting_policy());
        let names: Vec<&str> = catalogue
            .tools()
            .iter()
            .map(|t| t.qualified.as_str())
            .collect();
        assert_eq!(names, ["s__a"]);
        let hidden: Vec<(&str, &str)> = catalogue
            .hidden()
            .iter()
            .map(|h| (h.qualified.as_str(), h.reason.as_str()))
            .collect();
        assert_eq!(
            hidden,
            [
                (
                    "s__secret_key",
                    "hidden by policy.rules[0] (s__secret*): not for models"
                ),
                (
                    "s__secret",
                    "hidden by policy.rules[0] (s__secret*): not for models"
                ),
                (
                    "s__secrets",
                    "hidden by policy.rules[0] (s__secret*): not for models"
                ),
            ]
        );
        // Neither resolved nor suggested, by either form of the name.
        assert!(catalogue.resolve("s__secret").is_none());
        assert!(catalogue.resolve("s/secret").is_none());
        assert!(catalogue.suggest("s/secret", 3).is_empty());
        assert!(catalogue.suggest("s__secrte", 3).is_empty());
        assert_eq!(
            catalogue.hidden_tool("s/secret").unwrap().qualified,
            "s__secret"
        );
        assert_eq!(catalogue.hidden_tool("s/secret").unwrap().rule, Some(0));
        assert_eq!(catalogue.hidden_tool("s__secrets").unwrap().name, "secrets");
        assert!(catalogue.hidden_tool("s__a").is_none());
        // A deny rule does not hide: the tool is listed and refused when called.
        assert!(catalogue.resolve("s__a").is_some());
    }

    #[test]
    fn candidate_servers_read_both_forms() {
        let servers = ["time", "my__srv", "my"];
        assert_eq!(
            candidate_servers("time/get_current_time", &servers),
            vec!["time"]
        );
        assert_eq!(
            candidate_servers("my__srv__tool", &servers),
            vec!["my__srv", "my"]
        );
        assert!(candidate_servers("unknown__x", &servers).is_empty());
    }
}
