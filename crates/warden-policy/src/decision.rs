//! What a decision says: the outcome and every reason that led to it.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::provenance::SourceId;

/// The outcome of a decision. Ordered by strictness: `Allow < Ask < Deny`, so combining
/// two outcomes is taking the maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run the call.
    Allow,
    /// Run it only if a human says yes.
    Ask,
    /// Do not run it.
    Deny,
}

impl Decision {
    /// `"allow"`, `"ask"` or `"deny"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decision with its reasons.
///
/// Every reason supports the decision itself: a reason that was outweighed (an allow rule
/// when the call is asked about, an ask when it is denied) is not listed. A verdict always
/// has at least one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The outcome.
    pub decision: Decision,
    /// Why, in a stable order: rule and default reasons first (by rule index), then the
    /// flow reasons.
    pub reasons: Vec<Reason>,
}

impl Verdict {
    /// The kinds of the reasons, in order.
    pub fn kinds(&self) -> impl Iterator<Item = ReasonKind> + '_ {
        self.reasons.iter().map(|r| r.kind)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.decision.as_str())?;
        for (i, reason) in self.reasons.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { "; " })?;
            f.write_str(&reason.text)?;
        }
        Ok(())
    }
}

/// One reason for a decision: a machine-readable kind and a sentence for people.
///
/// The text of a rule or default reason is built once when the policy is compiled and
/// shared, so naming it costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// What kind of reason this is.
    pub kind: ReasonKind,
    /// A sentence naming the rule, the sources or the argument concerned. Values taken
    /// from arguments are quoted as JSON strings and shortened.
    pub text: Arc<str>,
}

/// The kinds of reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReasonKind {
    /// A user rule with the decision's effect matched (`policy.rules[index]`).
    Rule {
        /// The rule's position in the configuration, from 0.
        index: usize,
    },
    /// No rule matched and the default applied.
    Default,
    /// A `hide` rule removes the tool from the catalogue, so it cannot be called.
    HiddenTool {
        /// The hiding rule's position in the configuration, from 0.
        rule: usize,
    },
    /// The call may write while the context holds untrusted content.
    TaintedWrite,
    /// The call may reach the outside world while the context holds private data.
    PrivateEgress,
    /// An argument value appears verbatim in untrusted text in the context.
    VerbatimArgument {
        /// The (most recent) source whose text holds it.
        source: SourceId,
    },
    /// An opt-in allow rule needed the verbatim check, and it could not be completed
    /// (too much untrusted text kept, or too many argument values).
    VerbatimUnchecked,
    /// An autonomy rule allowed a call the cautious policy would ask about
    /// ([`Mode::Assisted`](crate::Mode), [`Mode::Autonomous`](crate::Mode)).
    Autonomy {
        /// Which rule.
        rule: AutonomyRule,
    },
    /// A destination, target or grant (or a link in a payload) appears in untrusted text and
    /// not in the user's own words: an injection may have chosen it.
    InjectedValue {
        /// The (most recent) untrusted source whose text holds it.
        source: SourceId,
    },
    /// A destination, target or grant that neither the user named nor only a trusted result
    /// holds, or a call whose place nothing names, or arguments too large to judge.
    UnnamedValue,
    /// The autonomous mode denies what its rules do not allow: there is no one to ask.
    Unattended,
}

/// The autonomy rules that can allow a call (see the `autonomy` module of this crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AutonomyRule {
    /// Only the user's words in the context, and a trusted server.
    CleanContext,
    /// A read-only tool whose arguments reach no place the user did not choose.
    ReadOnly,
    /// A write that stays in the user's own space.
    OwnSpace,
    /// Every destination, target and grant was chosen by the user.
    UserChosen,
}

impl AutonomyRule {
    /// `"clean_context"`, `"read_only"`, `"own_space"`, `"user_chosen"`.
    pub fn as_str(self) -> &'static str {
        match self {
            AutonomyRule::CleanContext => "clean_context",
            AutonomyRule::ReadOnly => "read_only",
            AutonomyRule::OwnSpace => "own_space",
            AutonomyRule::UserChosen => "user_chosen",
        }
    }
}

impl ReasonKind {
    /// The kind as the audit log and transcripts name it: `rule:N`, `default`, `hidden:N`,
    /// `tainted_write`, `private_egress`, `verbatim_argument`, `verbatim_unchecked`,
    /// `autonomy:RULE`, `injected_value`, `unnamed_value`, `unattended`.
    pub fn tag(self) -> String {
        match self {
            ReasonKind::Rule { index } => format!("rule:{index}"),
            ReasonKind::Default => "default".into(),
            ReasonKind::HiddenTool { rule } => format!("hidden:{rule}"),
            ReasonKind::TaintedWrite => "tainted_write".into(),
            ReasonKind::PrivateEgress => "private_egress".into(),
            ReasonKind::VerbatimArgument { .. } => "verbatim_argument".into(),
            ReasonKind::VerbatimUnchecked => "verbatim_unchecked".into(),
            ReasonKind::Autonomy { rule } => format!("autonomy:{}", rule.as_str()),
            ReasonKind::InjectedValue { .. } => "injected_value".into(),
            ReasonKind::UnnamedValue => "unnamed_value".into(),
            ReasonKind::Unattended => "unattended".into(),
        }
    }

    /// True for reasons about the flow of untrusted or private data (as opposed to a rule
    /// or the default): a call asked about for such a reason is asked about every time.
    pub fn is_flow(self) -> bool {
        matches!(
            self,
            ReasonKind::TaintedWrite
                | ReasonKind::PrivateEgress
                | ReasonKind::VerbatimArgument { .. }
                | ReasonKind::VerbatimUnchecked
                | ReasonKind::InjectedValue { .. }
                | ReasonKind::UnnamedValue
                | ReasonKind::Autonomy { .. }
        )
    }
}
