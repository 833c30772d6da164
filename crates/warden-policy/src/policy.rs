//! Compiling the configuration into an immutable [`Policy`], and deciding calls with it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Number, Value};

use crate::args::{self, Folded, Pointer, Scalar};
use crate::autonomy;
use crate::caller::Caller;
use crate::config::{ArgConstraint, Effect, Mode, PolicyConfig, RuleConfig, ServerPolicy};
use crate::decision::{Decision, Reason, ReasonKind, Verdict};
use crate::glob::{ByteSet, Glob, RuleIndex};
use crate::label::{Basis, Hints, ToolFacts, Trust};
use crate::paths::{LexicalPaths, PathResolver, is_under, normalize_lexically};
use crate::provenance::Provenance;
use crate::roles::{ArgRoles, Role};

/// At most this many argument values are looked up in untrusted text per decision.
pub const MAX_VERBATIM_VALUES: usize = 64;
/// At most this many verbatim arguments are named in one verdict.
const MAX_VERBATIM_REASONS: usize = 8;
/// Regular expressions longer than this are refused.
const MAX_REGEX_LEN: usize = 4096;
/// Compiled size limit of one regular expression (and of its lazy DFA cache).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A compile error, naming the rule (`policy.rules[index]`, from 0) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A rule is malformed.
    #[error("policy.rules[{index}]: {problem}")]
    Rule {
        /// The rule's position in `policy.rules`, from 0.
        index: usize,
        /// What is wrong, in a sentence.
        problem: String,
    },
    /// A declaration of argument roles is malformed.
    #[error("policy.servers.{server}.tools.{tool}: {problem}")]
    Declaration {
        /// The server's name.
        server: String,
        /// The tool's raw name.
        tool: String,
        /// What is wrong, in a sentence.
        problem: String,
    },
}

/// The compiled policy: rules with their globs, regular expressions and roots compiled
/// once, and the per-server trust and labels. Immutable; share it behind an `Arc` and swap
/// it whole to change it.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Box<[Rule]>,
    index: RuleIndex,
    servers: BTreeMap<String, ServerPolicy>,
    paths: Arc<dyn PathResolver>,
    defaults: DefaultTexts,
    mode: Mode,
}

#[derive(Debug, Clone)]
struct Rule {
    globs: Box<[Glob]>,
    effect: Effect,
    when: Box<[Constraint]>,
    even_if_tainted: bool,
    even_if_private: bool,
    /// The callers (subjects) it is limited to; empty: any call.
    callers: Box<[String]>,
    /// The OAuth clients it is limited to; empty: any call.
    caller_clients: Box<[String]>,
    /// The issuers it is limited to; empty: any.
    caller_issuers: Box<[String]>,
    text: Arc<str>,
}

#[derive(Debug, Clone)]
struct Constraint {
    pointer: Pointer,
    test: Test,
}

#[derive(Debug, Clone)]
enum Test {
    Equals(Value),
    Matches(regex::Regex),
    Under(PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Holds,
    Fails,
    /// The value cannot be judged (wrong type, relative path, unresolvable).
    Unknown,
}

#[derive(Debug, Clone)]
struct DefaultTexts {
    read_only_hint: Arc<str>,
    read_only_declared: Arc<str>,
    untrusted_server: Arc<str>,
    writes_unsaid: Arc<str>,
    writes_hint: Arc<str>,
    writes_declared: Arc<str>,
}

impl DefaultTexts {
    fn new() -> DefaultTexts {
        DefaultTexts {
            read_only_hint: "no rule matches: read-only by its trusted server's readOnlyHint, \
                             so allowed by default"
                .into(),
            read_only_declared: "no rule matches: declared read-only in the policy, so \
                                 allowed by default"
                .into(),
            untrusted_server: "no rule matches: its server is untrusted, so the tool is taken \
                               to write and to reach outside; asking by default"
                .into(),
            writes_unsaid: "no rule matches: the tool may write (its trusted server does not \
                            say readOnlyHint: true); asking by default"
                .into(),
            writes_hint: "no rule matches: the tool writes (readOnlyHint: false from its \
                          trusted server); asking by default"
                .into(),
            writes_declared: "no rule matches: declared as writing in the policy; asking by \
                              default"
                .into(),
        }
    }
}

impl Default for Policy {
    /// No rules, no server settings: only the defaults and the flow floors.
    fn default() -> Policy {
        Policy {
            rules: Box::new([]),
            index: RuleIndex::build(std::iter::empty()),
            servers: BTreeMap::new(),
            paths: Arc::new(LexicalPaths),
            defaults: DefaultTexts::new(),
            mode: Mode::default(),
        }
    }
}

impl Policy {
    /// Compiles a configuration, comparing paths lexically ([`LexicalPaths`]).
    pub fn compile(config: &PolicyConfig) -> Result<Policy, PolicyError> {
        Policy::compile_with(config, Arc::new(LexicalPaths))
    }

    /// Compiles a configuration with a path resolver, which is applied to every `under`
    /// root now and to every argument path at decision time.
    pub fn compile_with(
        config: &PolicyConfig,
        paths: Arc<dyn PathResolver>,
    ) -> Result<Policy, PolicyError> {
        let rules = config
            .rules
            .iter()
            .enumerate()
            .map(|(index, rule)| {
                compile_rule(index, rule, paths.as_ref())
                    .map_err(|problem| PolicyError::Rule { index, problem })
            })
            .collect::<Result<Box<[Rule]>, PolicyError>>()?;
        let index = RuleIndex::build(
            rules
                .iter()
                .enumerate()
                .map(|(i, r)| (u32::try_from(i).unwrap_or(u32::MAX), &r.globs[..])),
        );
        for (server, settings) in &config.servers {
            for (tool, declared) in &settings.tools {
                for pointer in declared
                    .destinations
                    .iter()
                    .chain(&declared.targets)
                    .chain(&declared.grants)
                    .chain(&declared.payload)
                {
                    Pointer::parse(pointer).map_err(|problem| PolicyError::Declaration {
                        server: server.clone(),
                        tool: tool.clone(),
                        problem,
                    })?;
                }
            }
        }
        Ok(Policy {
            rules,
            index,
            servers: config.servers.clone(),
            paths,
            defaults: DefaultTexts::new(),
            mode: config.mode.unwrap_or_default(),
        })
    }

    /// The mode: what happens to calls the cautious policy would ask about.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Like [`tool_facts`](Policy::tool_facts), with argument roles read from the tool's
    /// input schema too (`format` of its properties; see [`ArgRoles::from_schema`]). The
    /// host calls this once per tool when it builds the catalogue.
    pub fn tool_facts_with_schema(
        &self,
        server: &str,
        tool: &str,
        qualified: &str,
        hints: Hints,
        input_schema: &Value,
    ) -> ToolFacts {
        self.facts(
            server,
            tool,
            qualified,
            hints,
            ArgRoles::from_schema(input_schema),
        )
    }

    /// The facts for one tool, with the configured trust, declarations and result label of
    /// its server and of the tool itself (by its raw name) applied over the defaults
    /// (untrusted; results untrusted and private).
    pub fn tool_facts(&self, server: &str, tool: &str, qualified: &str, hints: Hints) -> ToolFacts {
        self.facts(server, tool, qualified, hints, ArgRoles::default())
    }

    fn facts(
        &self,
        server: &str,
        tool: &str,
        qualified: &str,
        hints: Hints,
        mut roles: ArgRoles,
    ) -> ToolFacts {
        let mut facts = ToolFacts::new(server, qualified, Trust::Untrusted, hints);
        let Some(srv) = self.servers.get(server) else {
            if !roles.is_empty() {
                facts.roles = Arc::new(roles);
            }
            return facts;
        };
        let own = srv.tools.get(tool);
        facts.trust = own.and_then(|t| t.trust).or(srv.trust).unwrap_or_default();
        facts.label.integrity = own
            .and_then(|t| t.integrity)
            .or(srv.integrity)
            .unwrap_or_default();
        facts.label.confidentiality = own
            .and_then(|t| t.confidentiality)
            .or(srv.confidentiality)
            .unwrap_or_default();
        facts.declared.read_only = own.and_then(|t| t.read_only).or(srv.read_only);
        facts.declared.open_world = own.and_then(|t| t.open_world).or(srv.open_world);
        facts.scope = own.and_then(|t| t.scope).or(srv.scope);
        if let Some(own) = own {
            roles.declare(&own.destinations, Role::Destination);
            roles.declare(&own.targets, Role::Target);
            roles.declare(&own.grants, Role::Grant);
            roles.declare(&own.payload, Role::Payload);
        }
        if !roles.is_empty() {
            facts.roles = Arc::new(roles);
        }
        facts
    }

    /// True when a `hide` rule matches the tool: it must not be listed (and
    /// [`decide`](Policy::decide) denies it).
    pub fn is_hidden(&self, qualified: &str) -> bool {
        let name = qualified.as_bytes();
        let name_bytes = ByteSet::of(name);
        self.index.candidates(name).iter().any(|&i| {
            self.rules.get(i as usize).is_some_and(|rule| {
                rule.effect == Effect::Hide
                    && rule.globs.iter().any(|g| g.matches_with(name, name_bytes))
            })
        })
    }

    /// Decides one call of `tool` with `arguments` in a context with `context`'s
    /// provenance. See the crate documentation for the order of the steps.
    ///
    /// In [`Mode::Assisted`] and [`Mode::Autonomous`], a call that the steps above ask
    /// about (other than by an `ask` rule) is judged by the autonomy rules (see the crate
    /// documentation): allowed with the rule and the provenance of its values as reasons,
    /// or else asked about (assisted) or denied (autonomous) with the values that stood in
    /// the way. An `ask` rule asks in assisted mode and denies in autonomous mode.
    pub fn decide(&self, tool: &ToolFacts, arguments: &Value, context: &Provenance) -> Verdict {
        self.decide_as(tool, arguments, context, None)
    }

    /// [`decide`](Policy::decide) for a call made for `caller` (an authenticated caller of
    /// `warden serve --http`): rules limited to callers (`caller`, `caller_client`) match
    /// only when it is one of theirs; without a caller they never match.
    pub fn decide_as(
        &self,
        tool: &ToolFacts,
        arguments: &Value,
        context: &Provenance,
        caller: Option<&Caller>,
    ) -> Verdict {
        let (verdict, asked_by_rule) = self.decide_cautious(tool, arguments, context, caller);
        if self.mode == Mode::Cautious || verdict.decision != Decision::Ask {
            return verdict;
        }
        if asked_by_rule {
            return self.unattended(verdict);
        }
        match autonomy::assess(tool, arguments, context) {
            Ok(reasons) => Verdict {
                decision: Decision::Allow,
                reasons,
            },
            Err(mut refusals) => {
                let mut verdict = verdict;
                verdict.reasons.append(&mut refusals);
                self.unattended(verdict)
            }
        }
    }

    /// In autonomous mode, an ask becomes a deny, saying so.
    fn unattended(&self, mut verdict: Verdict) -> Verdict {
        if self.mode == Mode::Autonomous {
            verdict.decision = Decision::Deny;
            verdict.reasons.push(Reason {
                kind: ReasonKind::Unattended,
                text: Arc::from(
                    "policy mode \"autonomous\": no one is asked, so what the rules above would \
                     ask about is denied",
                ),
            });
        }
        verdict
    }

    /// The cautious decision, and whether an `ask` rule made it.
    fn decide_cautious(
        &self,
        tool: &ToolFacts,
        arguments: &Value,
        context: &Provenance,
        caller: Option<&Caller>,
    ) -> (Verdict, bool) {
        let name = tool.qualified.as_bytes();
        let name_bytes = ByteSet::of(name);
        let mut best: Option<Effect> = None;
        let mut reasons: Vec<Reason> = Vec::new();
        let mut waive_tainted = false;
        let mut waive_private = false;
        for &i in self.index.candidates(name) {
            let Some(rule) = self.rules.get(i as usize) else {
                continue;
            };
            // A weaker rule cannot change the outcome or its reasons.
            if best.is_some_and(|b| rule.effect < b)
                || !rule.globs.iter().any(|g| g.matches_with(name, name_bytes))
                || !for_caller(rule, caller)
                || !self.applies(rule, arguments)
            {
                continue;
            }
            if best.is_none_or(|b| rule.effect > b) {
                best = Some(rule.effect);
                reasons.clear();
                waive_tainted = false;
                waive_private = false;
            }
            waive_tainted |= rule.even_if_tainted;
            waive_private |= rule.even_if_private;
            let index = i as usize;
            reasons.push(Reason {
                kind: if rule.effect == Effect::Hide {
                    ReasonKind::HiddenTool { rule: index }
                } else {
                    ReasonKind::Rule { index }
                },
                text: Arc::clone(&rule.text),
            });
        }
        let asked_by_rule = best == Some(Effect::Ask);
        let decision = match best {
            Some(Effect::Hide | Effect::Deny) => {
                return (
                    Verdict {
                        decision: Decision::Deny,
                        reasons,
                    },
                    false,
                );
            }
            Some(Effect::Ask) => Decision::Ask,
            Some(Effect::Allow) => Decision::Allow,
            None => {
                let (decision, text) = self.default_for(tool);
                reasons.push(Reason {
                    kind: ReasonKind::Default,
                    text,
                });
                decision
            }
        };
        let label = context.label();
        if !label.is_untrusted() && !label.is_private() {
            return (Verdict { decision, reasons }, asked_by_rule);
        }
        let by_rule = best == Some(Effect::Allow);
        let verdict = self.apply_floors(
            tool,
            arguments,
            context,
            Verdict { decision, reasons },
            by_rule && waive_tainted,
            by_rule && waive_private,
        );
        (verdict, asked_by_rule)
    }

    fn default_for(&self, tool: &ToolFacts) -> (Decision, Arc<str>) {
        let t = &self.defaults;
        let text = match (tool.read_only_basis(), tool.may_write()) {
            (Basis::UntrustedServer, _) => &t.untrusted_server,
            (Basis::Unsaid, _) => &t.writes_unsaid,
            (Basis::TrustedHint, true) => &t.writes_hint,
            (Basis::Declared, true) => &t.writes_declared,
            (Basis::TrustedHint, false) => &t.read_only_hint,
            (Basis::Declared, false) => &t.read_only_declared,
        };
        let decision = if tool.may_write() {
            Decision::Ask
        } else {
            Decision::Allow
        };
        (decision, Arc::clone(text))
    }

    /// The flow floors, for a context that holds untrusted content or private data.
    fn apply_floors(
        &self,
        tool: &ToolFacts,
        arguments: &Value,
        context: &Provenance,
        mut verdict: Verdict,
        waive_tainted: bool,
        waive_private: bool,
    ) -> Verdict {
        let label = context.label();
        let tainted = label.is_untrusted();
        let write_floor = tainted && tool.may_write();
        let egress = if label.is_private() {
            egress_cause(tool, arguments)
        } else {
            None
        };
        if !write_floor && egress.is_none() {
            return verdict;
        }
        let write_blocks = write_floor && !waive_tainted;
        let egress_blocks = egress.is_some() && !waive_private;
        if write_blocks || egress_blocks {
            if verdict.decision == Decision::Allow {
                verdict.decision = Decision::Ask;
                verdict.reasons.clear();
            }
            if write_blocks {
                verdict.reasons.push(tainted_write_reason(tool, context));
            }
            if let Some(cause) = egress.filter(|_| egress_blocks) {
                verdict
                    .reasons
                    .push(private_egress_reason(tool, &cause, context));
            }
            if tainted {
                // Only to name them: the call is asked about already.
                self.verbatim(arguments, context, None, &mut verdict.reasons);
            }
            return verdict;
        }
        // Every floor that applied was waived by an opt-in allow rule. Untrusted text may
        // still have steered an argument the rule leaves free: that asks.
        if !tainted {
            return verdict;
        }
        let pins: Vec<&Pointer> = verdict
            .reasons
            .iter()
            .filter_map(|r| match r.kind {
                ReasonKind::Rule { index } => self.rules.get(index),
                _ => None,
            })
            .filter(|rule| rule.even_if_tainted || rule.even_if_private)
            .flat_map(|rule| rule.when.iter().map(|c| &c.pointer))
            .collect();
        let mut found = Vec::new();
        let complete = self.verbatim(arguments, context, Some(&pins), &mut found);
        if !found.is_empty() {
            return Verdict {
                decision: Decision::Ask,
                reasons: found,
            };
        }
        if !complete {
            return Verdict {
                decision: Decision::Ask,
                reasons: vec![Reason {
                    kind: ReasonKind::VerbatimUnchecked,
                    text: Arc::from(
                        "the allowing rule opts in to a tainted context only for arguments \
                         not copied from untrusted text, and that could not be checked \
                         (too much untrusted text kept, or too many argument values)",
                    ),
                }],
            };
        }
        verdict
    }

    /// Pushes a reason for each argument value that appears in untrusted text. With
    /// `pins` (the check decides, for an opt-in allow rule), values under one of the pinned
    /// pointers are skipped. Returns `false` when the check was cut short.
    fn verbatim(
        &self,
        arguments: &Value,
        context: &Provenance,
        pins: Option<&[&Pointer]>,
        out: &mut Vec<Reason>,
    ) -> bool {
        let mut folded = Folded::new();
        let mut checked = 0usize;
        let mut named = 0usize;
        let mut complete = context.keeps_all_text();
        let walked = args::walk(arguments, &mut |frame, scalar| {
            let Some(needle) = folded.fold(scalar) else {
                return true;
            };
            if checked == MAX_VERBATIM_VALUES {
                complete = false;
                return false;
            }
            checked += 1;
            if pins.is_some_and(|pins| pins.iter().any(|p| p.covers(frame))) {
                return true;
            }
            let mut hit = context.find_verbatim(needle).map(|source| (source, None));
            if hit.is_none()
                && let Scalar::Str(value) = scalar
            {
                // The value itself is new, but the place it points at may not be:
                // `https://evil.example/?d=...` built on a host named in the text.
                args::destinations(frame, value, &mut |dest| {
                    if hit.is_none()
                        && let Some(needle) = folded.fold(Scalar::Str(dest))
                        && let Some(source) = context.find_verbatim(needle)
                    {
                        hit = Some((source, Some(dest)));
                    }
                });
            }
            if let Some((source, dest)) = hit {
                let mut text = format!("argument {} = {} ", frame.pointer(), args::quote(scalar));
                if let Some(dest) = dest {
                    let _ = write!(text, "points at {}, which ", args::quote(Scalar::Str(dest)));
                }
                text.push_str("appears in ");
                match context.source(source) {
                    Some(s) => {
                        let _ = write!(text, "text from {} (turn {})", s.tool, s.turn);
                    }
                    None => text.push_str("untrusted text"),
                }
                if pins.is_some() {
                    text.push_str("; no opt-in allow rule constrains it");
                }
                out.push(Reason {
                    kind: ReasonKind::VerbatimArgument { source },
                    text: text.into(),
                });
                named += 1;
                if named == MAX_VERBATIM_REASONS {
                    return false;
                }
            }
            true
        });
        complete && walked
    }

    /// True when every constraint of `rule` is satisfied. For an allow rule each test must
    /// hold; for a deny, ask or hide rule a test that cannot be judged counts as satisfied
    /// (stricter rules fail closed). On an array argument (other than for `equals` with an
    /// array), an allow rule needs every element to hold, a stricter rule any element.
    fn applies(&self, rule: &Rule, arguments: &Value) -> bool {
        let allow = rule.effect == Effect::Allow;
        rule.when.iter().all(|c| {
            let Some(value) = c.pointer.get(arguments) else {
                return false;
            };
            match value {
                Value::Array(items) if !matches!(c.test, Test::Equals(Value::Array(_))) => {
                    if allow {
                        items
                            .iter()
                            .all(|v| self.test(&c.test, v) == Outcome::Holds)
                    } else {
                        items
                            .iter()
                            .any(|v| self.test(&c.test, v) != Outcome::Fails)
                    }
                }
                v => {
                    let outcome = self.test(&c.test, v);
                    if allow {
                        outcome == Outcome::Holds
                    } else {
                        outcome != Outcome::Fails
                    }
                }
            }
        })
    }

    fn test(&self, test: &Test, value: &Value) -> Outcome {
        let holds = |b: bool| if b { Outcome::Holds } else { Outcome::Fails };
        match (test, value) {
            (Test::Equals(expected), v) => holds(json_eq(v, expected)),
            (Test::Matches(re), Value::String(s)) => holds(re.is_match(s)),
            (Test::Matches(re), Value::Number(n)) if as_i128(n).is_some() => {
                holds(re.is_match(&n.to_string()))
            }
            (Test::Under(root), Value::String(s)) => {
                let Some(lexical) = normalize_lexically(Path::new(s)) else {
                    return Outcome::Unknown;
                };
                match self.paths.resolve(&lexical) {
                    Some(resolved) => holds(is_under(&resolved, root)),
                    None => Outcome::Unknown,
                }
            }
            _ => Outcome::Unknown,
        }
    }
}

/// Whether a rule limited to callers applies to a call made for `caller`.
fn for_caller(rule: &Rule, caller: Option<&Caller>) -> bool {
    if rule.callers.is_empty() && rule.caller_clients.is_empty() && rule.caller_issuers.is_empty() {
        return true;
    }
    let Some(caller) = caller else {
        return false;
    };
    // A token without `sub` has no subject: a rule naming subjects never matches it.
    (rule.callers.is_empty()
        || caller
            .subject
            .as_ref()
            .is_some_and(|subject| rule.callers.contains(subject)))
        && (rule.caller_issuers.is_empty() || rule.caller_issuers.contains(&caller.issuer))
        && (rule.caller_clients.is_empty()
            || caller
                .client_id
                .as_ref()
                .is_some_and(|client| rule.caller_clients.contains(client)))
}

fn compile_rule(index: usize, rule: &RuleConfig, paths: &dyn PathResolver) -> Result<Rule, String> {
    let globs = rule.tools.as_slice();
    if globs.is_empty() {
        return Err("`tools` is an empty list".to_owned());
    }
    let globs = globs
        .iter()
        .map(|g| Glob::new(g))
        .collect::<Result<Box<[Glob]>, String>>()?;
    if rule.effect == Effect::Hide && !rule.when.is_empty() {
        return Err(
            "a hide rule cannot have `when`: hiding removes whole tools from the \
                    catalogue, which is listed before any arguments exist"
                .to_owned(),
        );
    }
    if rule.effect != Effect::Allow {
        for (flag, set) in [
            ("even_if_tainted", rule.even_if_tainted),
            ("even_if_private", rule.even_if_private),
        ] {
            if set {
                return Err(format!("`{flag}` only applies to allow rules"));
            }
        }
    }
    let callers: Box<[String]> = rule
        .caller
        .as_ref()
        .map(|c| c.as_slice().into())
        .unwrap_or_default();
    let caller_clients: Box<[String]> = rule
        .caller_client
        .as_ref()
        .map(|c| c.as_slice().into())
        .unwrap_or_default();
    let caller_issuers: Box<[String]> = rule
        .caller_issuer
        .as_ref()
        .map(|c| c.as_slice().into())
        .unwrap_or_default();
    for (key, values, given) in [
        ("caller", &callers, rule.caller.is_some()),
        (
            "caller_client",
            &caller_clients,
            rule.caller_client.is_some(),
        ),
        (
            "caller_issuer",
            &caller_issuers,
            rule.caller_issuer.is_some(),
        ),
    ] {
        if given && (values.is_empty() || values.iter().any(String::is_empty)) {
            return Err(format!("`{key}` names no caller (an empty list or value)"));
        }
        if given && rule.effect == Effect::Hide {
            return Err(format!(
                "a hide rule cannot have `{key}`: the catalogue is listed the same for every \
                 caller; use `deny` for this caller instead"
            ));
        }
    }
    let when = rule
        .when
        .iter()
        .enumerate()
        .map(|(j, c)| compile_constraint(c, paths).map_err(|e| format!("when[{j}]: {e}")))
        .collect::<Result<Box<[Constraint]>, String>>()?;

    let mut text = match rule.effect {
        Effect::Hide => format!("hidden by policy.rules[{index}] ("),
        _ => format!("policy.rules[{index}] ("),
    };
    for (i, g) in globs.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(g.as_str());
    }
    text.push(')');
    if !callers.is_empty() {
        let _ = write!(text, " for caller {}", callers.join(", "));
    }
    if !caller_clients.is_empty() {
        let _ = write!(text, " via client {}", caller_clients.join(", "));
    }
    if !caller_issuers.is_empty() {
        let _ = write!(text, " from issuer {}", caller_issuers.join(", "));
    }
    match rule.effect {
        Effect::Allow => {
            text.push_str(" allows");
            match (rule.even_if_tainted, rule.even_if_private) {
                (true, true) => text.push_str(" even with untrusted content or private data"),
                (true, false) => text.push_str(" even with untrusted content"),
                (false, true) => text.push_str(" even with private data"),
                (false, false) => {}
            }
        }
        Effect::Ask => text.push_str(" asks"),
        Effect::Deny => text.push_str(" denies"),
        Effect::Hide => {}
    }
    if let Some(note) = rule.note.as_deref().filter(|n| !n.is_empty()) {
        let _ = write!(text, ": {note}");
    }
    Ok(Rule {
        globs,
        effect: rule.effect,
        when,
        even_if_tainted: rule.even_if_tainted,
        even_if_private: rule.even_if_private,
        callers,
        caller_clients,
        caller_issuers,
        text: text.into(),
    })
}

fn compile_constraint(c: &ArgConstraint, paths: &dyn PathResolver) -> Result<Constraint, String> {
    let pointer = Pointer::parse(&c.arg)?;
    let test = match (&c.equals, &c.matches, &c.under) {
        (Some(v), None, None) => Test::Equals(v.clone()),
        (None, Some(re), None) => Test::Matches(compile_regex(re)?),
        (None, None, Some(root)) => Test::Under(compile_root(root, paths)?),
        (None, None, None) => {
            return Err(format!(
                "argument {:?} has no test: give one of `equals`, `matches`, `under`",
                c.arg
            ));
        }
        _ => {
            return Err(format!(
                "argument {:?} has more than one test: give one of `equals`, `matches`, \
                 `under` per entry (entries of `when` must all hold)",
                c.arg
            ));
        }
    };
    Ok(Constraint { pointer, test })
}

fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > MAX_REGEX_LEN {
        return Err(format!(
            "regular expression is {} bytes, more than {MAX_REGEX_LEN}",
            pattern.len()
        ));
    }
    let build = |p: &str| {
        regex::RegexBuilder::new(p)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
    };
    // On its own first: a pattern that compiles alone has balanced groups, so wrapping it
    // cannot change what the anchors apply to.
    build(pattern).map_err(|e| format!("regular expression {pattern:?}: {e}"))?;
    build(&format!("^(?:{pattern})$")).map_err(|e| format!("regular expression {pattern:?}: {e}"))
}

fn compile_root(root: &str, paths: &dyn PathResolver) -> Result<PathBuf, String> {
    let path = Path::new(root);
    if !path.has_root() {
        return Err(format!(
            "`under` root {root:?} must be an absolute path (`~` and variables are not \
             expanded)"
        ));
    }
    let lexical = normalize_lexically(path)
        .ok_or_else(|| format!("`under` root {root:?} climbs above `/` with `..`"))?;
    let resolved = paths
        .resolve(&lexical)
        .ok_or_else(|| format!("`under` root {root:?} could not be resolved"))?;
    Ok(resolved.into_owned())
}

/// Why a call may reach the outside world.
enum Egress {
    Hint(Basis),
    Argument { pointer: String, value: String },
    Unchecked,
}

fn egress_cause(tool: &ToolFacts, arguments: &Value) -> Option<Egress> {
    if tool.open_world() {
        return Some(Egress::Hint(tool.open_world_basis()));
    }
    let mut found = None;
    let complete = args::walk(arguments, &mut |frame, scalar| match scalar {
        Scalar::Str(s) if args::names_outside(frame, s) => {
            found = Some(Egress::Argument {
                pointer: frame.pointer(),
                value: args::quote(scalar),
            });
            false
        }
        _ => true,
    });
    match found {
        Some(cause) => Some(cause),
        None if !complete => Some(Egress::Unchecked),
        None => None,
    }
}

fn tainted_write_reason(tool: &ToolFacts, context: &Provenance) -> Reason {
    let why = match tool.read_only_basis() {
        Basis::UntrustedServer => "its server is untrusted, so its annotations are not believed",
        Basis::Unsaid => "its trusted server does not say readOnlyHint: true",
        Basis::TrustedHint => "readOnlyHint: false from its trusted server",
        Basis::Declared => "declared as writing in the policy",
    };
    let text = format!(
        "{} may write ({why}) while the context holds untrusted content: {}",
        tool.qualified,
        context.untrusted_summary()
    );
    Reason {
        kind: ReasonKind::TaintedWrite,
        text: text.into(),
    }
}

fn private_egress_reason(tool: &ToolFacts, cause: &Egress, context: &Provenance) -> Reason {
    let mut text = format!("{} may reach outside (", tool.qualified);
    match cause {
        Egress::Hint(Basis::UntrustedServer) => {
            text.push_str("its server is untrusted, so its annotations are not believed");
        }
        Egress::Hint(Basis::Unsaid) => {
            text.push_str("its trusted server does not say openWorldHint: false");
        }
        Egress::Hint(Basis::TrustedHint) => {
            text.push_str("openWorldHint: true from its trusted server");
        }
        Egress::Hint(Basis::Declared) => text.push_str("declared open-world in the policy"),
        Egress::Argument { pointer, value } => {
            let _ = write!(text, "argument {pointer} = {value} names a place outside");
        }
        Egress::Unchecked => text.push_str("its arguments are too large to check for addresses"),
    }
    text.push_str(") while the context holds private data: ");
    text.push_str(context.private_summary());
    Reason {
        kind: ReasonKind::PrivateEgress,
        text: text.into(),
    }
}

fn as_i128(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// JSON equality, with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (as_i128(x), as_i128(y)) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64().zip(y.as_f64()).is_some_and(|(f, g)| f == g),
        },
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(k, x)| ys.get(k).is_some_and(|y| json_eq(x, y)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!({"a": [1, 2.5]}), &json!({"a": [1.0, 2.5]})));
        assert!(!json_eq(&json!(1), &json!("1")));
        assert!(json_eq(&json!(u64::MAX), &json!(u64::MAX)));
        assert!(!json_eq(&json!(-1), &json!(u64::MAX)));
    }

    #[test]
    fn regexes_match_whole_values_and_cannot_unanchor() {
        let re = compile_regex("a)|(b").err();
        assert!(re.is_some());
        let re = compile_regex(".*@me\\.org").unwrap_or_else(|e| panic!("{e}"));
        assert!(re.is_match("x@me.org"));
        assert!(!re.is_match("x@me.org.evil.com"));
        assert!(compile_regex(&"a".repeat(MAX_REGEX_LEN + 1)).is_err());
        assert!(compile_regex("(a{1000}){1000}").is_err());
    }
}
