//! Who a call is made for, when a front end knows more than "the user at this terminal":
//! the authenticated caller of `warden serve --http` with `[serve.auth]` (decision 0033).
//!
//! Rules may name callers (`caller`: subjects, `caller_client`, `caller_issuer`); a rule
//! that names one never matches a call without a caller (the command line, the agent loop, stdio and loopback clients),
//! so such a rule can only narrow what an authenticated caller may do, or widen it for that
//! caller alone.

/// An authenticated caller, as its access token says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's issuer.
    pub issuer: String,
    /// The subject (`sub`), if the token names one. Never filled from the client id: a
    /// client's own token (client credentials) without `sub` has no subject, and rules
    /// naming subjects (`caller`) do not match it.
    pub subject: Option<String>,
    /// The client the token was issued to (`client_id` or `azp`), if said.
    pub client_id: Option<String>,
    /// The scopes the token grants.
    pub scopes: Vec<String>,
}

/// The longest subject or client id shown in a label.
const MAX_SHOWN: usize = 128;

fn shown(value: &str) -> String {
    value
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_SHOWN)
        .collect()
}

impl Caller {
    /// Whether two callers are the same identity: issuer, subject and client (scopes may
    /// differ between two tokens of one caller).
    pub fn same_identity(&self, other: &Caller) -> bool {
        self.issuer == other.issuer
            && self.subject == other.subject
            && self.client_id == other.client_id
    }

    /// A one-line label for logs and audit rows: `caller:SUBJECT via CLIENT (ISSUER)`
    /// (`caller:- via CLIENT (ISSUER)` without a subject), control characters removed and
    /// each part shortened. Not unique: never a key.
    pub fn label(&self) -> String {
        let via = self
            .client_id
            .as_deref()
            .map(|client| format!(" via {}", shown(client)))
            .unwrap_or_default();
        format!(
            "caller:{}{via} ({})",
            self.subject
                .as_deref()
                .map_or_else(|| "-".to_owned(), shown),
            shown(&self.issuer)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Decision, Hints, Policy, PolicyConfig, Provenance, Trust};
    use serde_json::json;

    fn policy(rules: serde_json::Value) -> Result<Policy, crate::PolicyError> {
        let config: PolicyConfig = serde_json::from_value(json!({ "rules": rules })).unwrap();
        Policy::compile(&config)
    }

    fn alice(client: Option<&str>) -> Caller {
        Caller {
            issuer: "https://as.example".into(),
            subject: Some("alice".into()),
            client_id: client.map(str::to_owned),
            scopes: Vec::new(),
        }
    }

    #[test]
    fn caller_rules_match_only_their_callers_and_never_a_call_without_one() {
        let policy = policy(json!([
            {"tools": "fs__*", "effect": "allow"},
            {"tools": "fs__*", "effect": "deny", "caller": "alice"},
            {"tools": "mail__*", "effect": "allow", "caller": ["bob"], "caller_client": "cli"},
        ]))
        .unwrap();
        let fs = ToolFactsFor::new("fs", "fs__read");
        let mail = ToolFactsFor::new("mail", "mail__send");
        let args = json!({});
        let clean = Provenance::new();
        let decide = |facts: &crate::ToolFacts, caller: Option<&Caller>| {
            policy.decide_as(facts, &args, &clean, caller).decision
        };
        assert_eq!(decide(&fs.0, None), Decision::Allow);
        assert_eq!(decide(&fs.0, Some(&alice(None))), Decision::Deny);
        let verdict = policy.decide_as(&fs.0, &args, &clean, Some(&alice(None)));
        assert!(verdict.reasons[0].text.contains("for caller alice denies"));
        let bob = |client: Option<&str>| Caller {
            subject: Some("bob".into()),
            ..alice(client)
        };
        assert_eq!(decide(&fs.0, Some(&bob(None))), Decision::Allow);
        // mail__send writes (untrusted server): asked, unless bob calls through `cli`.
        assert_eq!(decide(&mail.0, Some(&bob(Some("cli")))), Decision::Allow);
        assert_ne!(decide(&mail.0, Some(&bob(Some("web")))), Decision::Allow);
        assert_ne!(decide(&mail.0, Some(&bob(None))), Decision::Allow);
        assert_ne!(decide(&mail.0, None), Decision::Allow);
    }

    #[test]
    fn caller_limits_are_refused_on_hide_and_when_empty() {
        let hide = policy(json!([{"tools": "x__*", "effect": "hide", "caller": "a"}]));
        assert!(
            hide.unwrap_err()
                .to_string()
                .contains("hide rule cannot have `caller`")
        );
        let empty = policy(json!([{"tools": "x__*", "effect": "deny", "caller_client": []}]));
        assert!(empty.unwrap_err().to_string().contains("names no caller"));
        let empty = policy(json!([{"tools": "x__*", "effect": "deny", "caller_issuer": ""}]));
        assert!(empty.unwrap_err().to_string().contains("names no caller"));
    }

    #[test]
    fn caller_rules_can_name_the_issuer_and_never_match_a_token_without_a_subject() {
        let policy = policy(json!([
            {"tools": "mail__*", "effect": "allow", "caller": "alice",
             "caller_issuer": "https://as.example"},
        ]))
        .unwrap();
        // mail__send writes (untrusted server): asked unless a rule allows it.
        let fs = ToolFactsFor::new("mail", "mail__send");
        let args = json!({});
        let clean = Provenance::new();
        let decide = |caller: &Caller| {
            policy
                .decide_as(&fs.0, &args, &clean, Some(caller))
                .decision
        };
        // Control: Alice of the named issuer is allowed, and the reason says the issuer.
        assert_eq!(decide(&alice(Some("app"))), Decision::Allow);
        let verdict = policy.decide_as(&fs.0, &args, &clean, Some(&alice(None)));
        assert!(
            verdict.reasons[0]
                .text
                .contains("from issuer https://as.example"),
            "{:?}",
            verdict.reasons
        );
        // Another issuer's `alice` is someone else.
        let elsewhere = Caller {
            issuer: "https://other.example".into(),
            ..alice(Some("app"))
        };
        assert_ne!(decide(&elsewhere), Decision::Allow);
        // A client-credentials token of the client `alice`, without `sub`, has no subject:
        // it is not the caller `alice`.
        let client_alice = Caller {
            subject: None,
            ..alice(Some("alice"))
        };
        assert_ne!(decide(&client_alice), Decision::Allow);
        // Nor does a subject rule without an issuer match it.
        let any_issuer = policy_any_issuer();
        assert_ne!(
            any_issuer
                .decide_as(&fs.0, &args, &clean, Some(&client_alice))
                .decision,
            Decision::Allow
        );
        assert_eq!(
            any_issuer
                .decide_as(&fs.0, &args, &clean, Some(&alice(None)))
                .decision,
            Decision::Allow
        );
        assert_eq!(
            client_alice.label(),
            "caller:- via alice (https://as.example)"
        );
    }

    fn policy_any_issuer() -> Policy {
        policy(json!([
            {"tools": "mail__*", "effect": "allow", "caller": "alice"},
        ]))
        .unwrap()
    }

    struct ToolFactsFor(crate::ToolFacts);

    impl ToolFactsFor {
        fn new(server: &str, qualified: &str) -> ToolFactsFor {
            ToolFactsFor(crate::ToolFacts::new(
                server,
                qualified,
                Trust::Untrusted,
                Hints::default(),
            ))
        }
    }

    #[test]
    fn labels_are_one_line_and_identity_ignores_scopes() {
        let alice = Caller {
            issuer: "https://as.example".into(),
            subject: Some("alice\nadmin".into()),
            client_id: Some("app".into()),
            scopes: vec!["a".into()],
        };
        assert_eq!(
            alice.label(),
            "caller:aliceadmin via app (https://as.example)"
        );
        let same = Caller {
            scopes: vec![],
            ..alice.clone()
        };
        assert!(alice.same_identity(&same));
        let other_client = Caller {
            client_id: None,
            ..alice.clone()
        };
        assert!(!alice.same_identity(&other_client));
    }
}
