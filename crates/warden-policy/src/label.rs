//! Trust in a server's metadata, labels of what its tools return, and the facts about one
//! tool that the decision core needs.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::Scope;
use crate::roles::ArgRoles;

/// Whether Warden believes a server's own description of its tools (the MCP annotations
/// `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`).
///
/// The default is [`Trust::Untrusted`]: a server can claim anything, so an untrusted
/// server's tools are all taken to write and to reach the outside world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// The annotations are believed.
    Trusted,
    /// The annotations are ignored (the default).
    #[default]
    Untrusted,
}

/// Whether text may have been written by someone other than the user or a vetted source.
///
/// Ordered so that the join of two labels is the maximum: untrusted dominates.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Deserialize, Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Integrity {
    /// Only the user or a source the user vouches for wrote it.
    Trusted,
    /// It may carry third-party text, like an inbox or a web page (the default for results).
    #[default]
    Untrusted,
}

/// Whether text may hold the user's private data.
///
/// Ordered so that the join of two labels is the maximum: private dominates.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Deserialize, Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Confidentiality {
    /// Nothing the user would mind the world seeing.
    Public,
    /// The user's mail, files, accounts (the default for results).
    #[default]
    Private,
}

/// The label of a piece of context: its integrity and its confidentiality.
///
/// Labels form a lattice; [`Label::join`] is its least upper bound, which is what a context
/// holding two pieces of text is labelled with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Label {
    /// Who may have written it.
    pub integrity: Integrity,
    /// Who may read it.
    pub confidentiality: Confidentiality,
}

impl Label {
    /// The user's own text: trusted and public. This is the label of an empty context.
    pub const USER: Label = Label {
        integrity: Integrity::Trusted,
        confidentiality: Confidentiality::Public,
    };

    /// The label of a tool result when nothing is configured: untrusted and private.
    pub const UNVETTED_RESULT: Label = Label {
        integrity: Integrity::Untrusted,
        confidentiality: Confidentiality::Private,
    };

    /// The least upper bound: untrusted if either is, private if either is.
    #[must_use]
    pub fn join(self, other: Label) -> Label {
        Label {
            integrity: self.integrity.max(other.integrity),
            confidentiality: self.confidentiality.max(other.confidentiality),
        }
    }

    /// True when the text may carry third-party instructions.
    pub fn is_untrusted(self) -> bool {
        self.integrity == Integrity::Untrusted
    }

    /// True when the text may hold private data.
    pub fn is_private(self) -> bool {
        self.confidentiality == Confidentiality::Private
    }
}

/// The MCP tool annotations, as reported by a server or as declared in the policy.
///
/// `None` means "not said". `read_only` and `open_world` take part in every decision;
/// `destructive` only in the autonomy rules ([`crate::Mode`]), where a write that may destroy
/// must not hit a target an injection chose; `idempotent` is carried for display and audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Hints {
    /// `readOnlyHint`: the tool does not modify its environment.
    pub read_only: Option<bool>,
    /// `destructiveHint`: a write may destroy data rather than only add.
    pub destructive: Option<bool>,
    /// `idempotentHint`: repeating the call has no further effect.
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool interacts with entities outside a closed domain.
    pub open_world: Option<bool>,
}

impl Hints {
    /// Each hint from `self` where it is said, else from `fallback`.
    #[must_use]
    pub fn or(self, fallback: Hints) -> Hints {
        Hints {
            read_only: self.read_only.or(fallback.read_only),
            destructive: self.destructive.or(fallback.destructive),
            idempotent: self.idempotent.or(fallback.idempotent),
            open_world: self.open_world.or(fallback.open_world),
        }
    }
}

/// Where a tool's effect-describing facts come from; used to explain a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Basis {
    /// Declared in the policy configuration (the user's word).
    Declared,
    /// Reported by a trusted server.
    TrustedHint,
    /// Not said by anyone believed: the MCP default applies.
    Unsaid,
    /// The server is untrusted, so its hints are ignored.
    UntrustedServer,
}

/// What the decision core knows about one tool. Built once per tool when the catalogue is
/// built (usually with [`Policy::tool_facts`](crate::Policy::tool_facts)), then borrowed by
/// every decision; the names are shared, so labelling a result with them does not copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFacts {
    /// The qualified name (`server__tool`) that rules match on.
    pub qualified: Arc<str>,
    /// The server's configured name.
    pub server: Arc<str>,
    /// Whether the server's annotations are believed.
    pub trust: Trust,
    /// The annotations as the server reported them.
    pub hints: Hints,
    /// Annotations declared in the policy configuration; believed whatever the trust.
    pub declared: Hints,
    /// The label of this tool's results.
    pub label: Label,
    /// The roles of its arguments, from its schema and the policy's declarations (empty:
    /// judged by name alone).
    pub roles: Arc<ArgRoles>,
    /// Where its writes land, when the policy declares it.
    pub scope: Option<Scope>,
}

impl ToolFacts {
    /// Facts with nothing declared and the default result label (untrusted, private).
    pub fn new(server: &str, qualified: &str, trust: Trust, hints: Hints) -> ToolFacts {
        ToolFacts {
            qualified: Arc::from(qualified),
            server: Arc::from(server),
            trust,
            hints,
            declared: Hints::default(),
            label: Label::UNVETTED_RESULT,
            roles: Arc::new(ArgRoles::default()),
            scope: None,
        }
    }

    /// True unless a believed `destructiveHint` says the tool's writes only add (MCP's
    /// default for a missing `destructiveHint` is `true`).
    pub fn destructive(&self) -> bool {
        self.believed().destructive != Some(false)
    }

    /// The annotations Warden believes: the declared ones, then the server's own when the
    /// server is trusted.
    pub fn believed(&self) -> Hints {
        match self.trust {
            Trust::Trusted => self.declared.or(self.hints),
            Trust::Untrusted => self.declared,
        }
    }

    /// True unless a believed `readOnlyHint` says the tool does not write (MCP's default
    /// for a missing `readOnlyHint` is `false`).
    pub fn may_write(&self) -> bool {
        self.believed().read_only != Some(true)
    }

    /// True unless a believed `openWorldHint` says the tool's domain is closed (MCP's
    /// default for a missing `openWorldHint` is `true`).
    pub fn open_world(&self) -> bool {
        self.believed().open_world != Some(false)
    }

    pub(crate) fn read_only_basis(&self) -> Basis {
        self.basis(self.declared.read_only, self.hints.read_only)
    }

    pub(crate) fn open_world_basis(&self) -> Basis {
        self.basis(self.declared.open_world, self.hints.open_world)
    }

    fn basis(&self, declared: Option<bool>, reported: Option<bool>) -> Basis {
        if declared.is_some() {
            Basis::Declared
        } else if self.trust == Trust::Untrusted {
            Basis::UntrustedServer
        } else if reported.is_some() {
            Basis::TrustedHint
        } else {
            Basis::Unsaid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_is_the_maximum_of_each_part() {
        let a = Label {
            integrity: Integrity::Untrusted,
            confidentiality: Confidentiality::Public,
        };
        let b = Label {
            integrity: Integrity::Trusted,
            confidentiality: Confidentiality::Private,
        };
        assert_eq!(a.join(b), Label::UNVETTED_RESULT);
        assert_eq!(Label::USER.join(Label::USER), Label::USER);
        assert_eq!(Label::USER.join(a), a);
    }

    #[test]
    fn untrusted_server_hints_are_ignored_but_declarations_are_not() {
        let hints = Hints {
            read_only: Some(true),
            open_world: Some(false),
            ..Hints::default()
        };
        let mut facts = ToolFacts::new("s", "s__t", Trust::Untrusted, hints);
        assert!(facts.may_write());
        assert!(facts.open_world());
        facts.trust = Trust::Trusted;
        assert!(!facts.may_write());
        assert!(!facts.open_world());
        facts.trust = Trust::Untrusted;
        facts.declared.read_only = Some(true);
        assert!(!facts.may_write());
        assert!(facts.open_world());
        // A declaration beats the trusted server's own hint.
        facts.trust = Trust::Trusted;
        facts.declared.open_world = Some(true);
        assert!(facts.open_world());
    }

    #[test]
    fn missing_hints_follow_the_mcp_defaults() {
        let facts = ToolFacts::new("s", "s__t", Trust::Trusted, Hints::default());
        assert!(facts.may_write());
        assert!(facts.open_world());
        assert_eq!(facts.read_only_basis(), Basis::Unsaid);
    }
}
