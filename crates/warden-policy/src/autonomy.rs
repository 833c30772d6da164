//! The autonomy rules: when a call that the cautious policy would ask about may run with no
//! one to ask ([`Mode::Assisted`](crate::Mode) and [`Mode::Autonomous`](crate::Mode)).
//!
//! The trifecta stays the wall. What changes is that Warden looks at *which* values of the
//! call an injection could have chosen, instead of asking about every call made while
//! untrusted text or private data is in the context. The invariant: **an injection never
//! chooses where data goes, what a destructive action hits, or a value that grants
//! something.** Payload (a body, a subject, a date) may come from anywhere: carried to a
//! place the user chose, it is the user's intent.
//!
//! Each argument value gets a role ([`Role`], from [`crate::roles`]) and a provenance
//! ([`Found`]): named in the user's own messages, present in untrusted text, present only in
//! a trusted result, or nowhere. Then:
//!
//! In every write rule, the targets of a write that may destroy (MCP's default unless a
//! trusted server says `destructiveHint: false`) must be user-chosen like destinations; the
//! targets of a write that does not destroy may come from any result.
//!
//! - **clean context** (class 1): nothing but the user's words in the context and a trusted
//!   server: no injection can be at work, the call runs;
//! - **read-only query** (class 3): a tool believed read-only carries nothing out but its
//!   arguments, to its own server; it runs unless an argument points at a network place
//!   (a URL, a host) that the user did not name and no trusted result holds;
//! - **own-space write** (class 4): a tool believed closed-world (or declared
//!   `scope = "own"`) with no destination or grant among its arguments writes only in the
//!   user's space;
//! - **user-chosen destinations** (classes 2 and 5): every destination and grant is named
//!   in the user's own words, or found only in trusted results (never in untrusted text); a
//!   value found in
//!   untrusted text and not in the user's words is *injected* and refuses the call, as does
//!   a value named nowhere (an injection can spell an address so that no verbatim check
//!   finds it). An open-world write with no destination argument at all (the tool itself
//!   decides where its data goes) is refused in a tainted or private context. A payload of
//!   such a write that carries a link or address found only in untrusted text is refused
//!   too: the injection would choose where the reader goes.
//!
//! Every allow names its rule and, for each value that mattered, the role and where the
//! value was found; every refusal names the value and the source that holds it.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;

use crate::args::{self, Scalar};
use crate::config::Scope;
use crate::decision::{AutonomyRule, Reason, ReasonKind};
use crate::label::{ToolFacts, Trust};
use crate::provenance::{Found, Provenance};
use crate::roles::{self, Role};

/// At most this many argument values are judged per call; past it the call is refused.
const MAX_JUDGED_VALUES: usize = 128;
/// At most this many values are named in one reason.
const MAX_NAMED: usize = 8;

/// One value that mattered: where it is, its role, and where it was found.
struct Judged {
    pointer: String,
    value: String,
    role: Role,
    basis: &'static str,
    found: Found,
    /// The value is a link or address inside a payload text.
    embedded: bool,
    /// The value points at a network place (a URL, a host; not an email address).
    place: bool,
}

/// The autonomy rules' verdict on a call the cautious policy asks about: `Ok` with the
/// reasons of the allow, or `Err` with the reasons it is not allowed.
pub(crate) fn assess(
    tool: &ToolFacts,
    arguments: &Value,
    context: &Provenance,
) -> Result<Vec<Reason>, Vec<Reason>> {
    let label = context.label();
    let clean = !label.is_untrusted() && !label.is_private();
    if clean && tool.trust == Trust::Trusted {
        return Ok(vec![Reason {
            kind: ReasonKind::Autonomy {
                rule: AutonomyRule::CleanContext,
            },
            text: Arc::from(format!(
                "autonomy rule clean-context: {} is a trusted server's tool and the context \
                 holds only the user's own words, so no injection can have chosen this call",
                tool.qualified
            )),
        }]);
    }

    // Judge every value.
    let mut judged: Vec<Judged> = Vec::new();
    let mut complete = true;
    let mut count = 0usize;
    let mut has_destination = false;
    let walked = args::walk(arguments, &mut |frame, scalar| {
        count += 1;
        if count > MAX_JUDGED_VALUES {
            complete = false;
            return false;
        }
        let (mut role, basis) = tool.roles.role_of(frame);
        let text = match scalar {
            Scalar::Str(s) => s.to_owned(),
            Scalar::Int(i) => i.to_string(),
        };
        if text.trim().is_empty() {
            return true;
        }
        let mut basis = basis.as_str();
        if role == Role::Payload
            && let Scalar::Str(s) = scalar
            && args::names_outside(frame, s)
        {
            // A whole value that is a URL or an address is a place, whatever its name.
            role = Role::Destination;
            basis = "its value is an address";
        }
        if role == Role::Destination {
            has_destination = true;
        }
        if role == Role::Payload {
            if let Scalar::Str(s) = scalar {
                let pointer = frame.pointer();
                complete &= args::embedded(s, &mut |dest| {
                    judged.push(Judged {
                        pointer: pointer.clone(),
                        value: dest.to_owned(),
                        role: Role::Payload,
                        basis: "a link or address in the text",
                        found: find(context, dest),
                        embedded: true,
                        place: false,
                    });
                });
            }
            return true;
        }
        let mut found = find(context, &text);
        let mut place = false;
        if let Scalar::Str(s) = scalar {
            // `https://www.example.org/page`: the user named `www.example.org`.
            let mut all_user = true;
            let mut any = false;
            args::destinations(frame, s, &mut |dest| {
                any = true;
                place |= !dest.contains('@');
                all_user &= find(context, dest) == Found::User;
            });
            if any && all_user {
                found = Found::User;
            } else if found == Found::Nowhere {
                // New as a whole, but built on a place the untrusted text named:
                // `https://evil.example/?d=...`.
                args::destinations(frame, s, &mut |dest| {
                    if found == Found::Nowhere
                        && let Found::Untrusted(source) = find(context, dest)
                    {
                        found = Found::Untrusted(source);
                    }
                });
            }
        }
        judged.push(Judged {
            pointer: frame.pointer(),
            value: text,
            role,
            basis,
            found,
            embedded: false,
            place,
        });
        true
    });
    if !(complete && walked) {
        return Err(vec![Reason {
            kind: ReasonKind::UnnamedValue,
            text: Arc::from(format!(
                "{}: its arguments are too large to judge (more than {MAX_JUDGED_VALUES} \
                 values, or too deep, or a text too long to scan for links)",
                tool.qualified
            )),
        }]);
    }
    // Trusted text proves nothing when untrusted text had to be dropped: the value may be
    // in the part no longer kept.
    let trusted_counts = context.keeps_all_text();

    if !tool.may_write() {
        return read_only(tool, &judged, context);
    }

    let own_space = !has_destination
        && !judged.iter().any(|j| j.role == Role::Grant)
        && match tool.scope {
            Some(Scope::Own) => true,
            Some(Scope::Shared) => false,
            None => !tool.open_world(),
        };
    let destructive = tool.destructive();
    let mut refusals = Vec::new();
    for j in &judged {
        let matters = match j.role {
            Role::Destination | Role::Grant => true,
            // What a write hits matters when the write destroys; a non-destructive write
            // may act on any item a result listed (mark read, move an event, attach).
            Role::Target => destructive,
            Role::Payload => j.embedded && !own_space,
        };
        if !matters {
            continue;
        }
        match j.found {
            Found::User => {}
            Found::Trusted(_) if trusted_counts && !j.embedded => {}
            Found::Trusted(_) if j.embedded => {}
            Found::Nowhere if j.embedded => {}
            Found::Untrusted(source) => refusals.push(Reason {
                kind: ReasonKind::InjectedValue { source },
                text: Arc::from(describe_injected(j, context, source)),
            }),
            Found::Trusted(_) | Found::Nowhere => refusals.push(Reason {
                kind: ReasonKind::UnnamedValue,
                text: Arc::from(format!(
                    "{} = {} ({}, {}) is named neither in the user's own words nor only in a \
                     trusted result: no one the user vouches for chose it",
                    j.pointer,
                    shown(j),
                    j.role.as_str(),
                    j.basis
                )),
            }),
        }
        if refusals.len() == MAX_NAMED {
            break;
        }
    }
    if !own_space && !has_destination && tool.open_world() && refusals.is_empty() {
        refusals.push(Reason {
            kind: ReasonKind::UnnamedValue,
            text: Arc::from(format!(
                "{} may write to the outside world and no argument names where: the tool \
                 itself decides, so the user did not choose the place",
                tool.qualified
            )),
        });
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let (rule, mut text) = if own_space {
        (
            AutonomyRule::OwnSpace,
            format!(
                "autonomy rule own-space: {} writes only in the user's own space ({}), no \
                 argument names a destination or grants anything{}",
                tool.qualified,
                match tool.scope {
                    Some(Scope::Own) => "declared scope = \"own\"",
                    _ => "closed-world by its trusted server",
                },
                if destructive {
                    ", and what it destroys was chosen by the user"
                } else {
                    ", and it does not destroy"
                }
            ),
        )
    } else {
        (
            AutonomyRule::UserChosen,
            format!(
                "autonomy rule user-chosen: every destination, target and grant of {} was \
                 chosen by the user",
                tool.qualified
            ),
        )
    };
    name_values(&mut text, &judged, !destructive);
    Ok(vec![Reason {
        kind: ReasonKind::Autonomy { rule },
        text: Arc::from(text),
    }])
}

/// A tool believed read-only: it may run unless it would reach a network place that the
/// user did not choose.
fn read_only(
    tool: &ToolFacts,
    judged: &[Judged],
    context: &Provenance,
) -> Result<Vec<Reason>, Vec<Reason>> {
    let mut refusals = Vec::new();
    let mut places = Vec::new();
    // Only values that point at a network place matter: an email address is a filter to a
    // read, not a place it goes.
    for j in judged.iter().filter(|j| !j.embedded && j.place) {
        places.push(j);
        match j.found {
            Found::User => {}
            Found::Trusted(_) if context.keeps_all_text() => {}
            Found::Untrusted(source) => refusals.push(Reason {
                kind: ReasonKind::InjectedValue { source },
                text: Arc::from(describe_injected(j, context, source)),
            }),
            Found::Trusted(_) | Found::Nowhere => refusals.push(Reason {
                kind: ReasonKind::UnnamedValue,
                text: Arc::from(format!(
                    "{} = {} points at a place that neither the user named nor a trusted \
                     result holds",
                    j.pointer,
                    shown(j)
                )),
            }),
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let mut text = format!(
        "autonomy rule read-only: {} is read-only by {}, so it carries out nothing but its \
         arguments",
        tool.qualified,
        match tool.trust {
            Trust::Trusted => "its trusted server or the policy",
            Trust::Untrusted => "the policy",
        }
    );
    if places.is_empty() {
        text.push_str(", and none of them names a place outside");
    } else {
        text.push_str("; the places it reaches were chosen by the user:");
        for j in places.iter().take(MAX_NAMED) {
            let _ = write!(
                text,
                " {} = {} ({})",
                j.pointer,
                shown(j),
                found_text(j.found, context)
            );
        }
    }
    Ok(vec![Reason {
        kind: ReasonKind::Autonomy {
            rule: AutonomyRule::ReadOnly,
        },
        text: Arc::from(text),
    }])
}

fn find(context: &Provenance, value: &str) -> Found {
    let folded: Vec<u8> = value
        .trim()
        .bytes()
        .map(|b| b.to_ascii_lowercase())
        .collect();
    context.find_value(&folded)
}

/// A judged value as reasons show it: quoted, or `<redacted>` when its argument's name says
/// it is a secret (a password, a token, a key), so that a reason never carries what the
/// audit log's argument redaction hides.
fn shown(j: &Judged) -> String {
    let name = j.pointer.rsplit('/').next().unwrap_or(&j.pointer);
    if roles::is_secret_name(name) {
        "<redacted>".to_owned()
    } else {
        args::quote(Scalar::Str(&j.value))
    }
}

fn describe_injected(j: &Judged, context: &Provenance, source: crate::SourceId) -> String {
    let mut text = format!(
        "{} = {} ({}, {}) appears in untrusted text",
        j.pointer,
        shown(j),
        if j.embedded {
            "a link or address in the payload"
        } else {
            j.role.as_str()
        },
        j.basis
    );
    if let Some(s) = context.source(source) {
        let _ = write!(text, " from {} (turn {})", s.tool, s.turn);
    }
    text.push_str(
        " and not in the user's own words: an injection may have chosen it, and an \
         injection must never choose where data goes, what an action hits or what it grants",
    );
    text
}

fn found_text(found: Found, context: &Provenance) -> String {
    match found {
        Found::User => "named in the user's own words".into(),
        Found::Trusted(id) => match context.source(id) {
            Some(s) => format!(
                "found only in a trusted result of {} (turn {})",
                s.tool, s.turn
            ),
            None => "found only in a trusted result".into(),
        },
        Found::Untrusted(_) => "from untrusted text".into(),
        Found::Nowhere => "named nowhere".into(),
    }
}

/// Appends the values that mattered and their provenance; with `targets_free`, targets are
/// listed as coming from anywhere.
fn name_values(text: &mut String, judged: &[Judged], targets_free: bool) {
    for (named, j) in judged
        .iter()
        .filter(|j| !j.embedded && j.role != Role::Payload)
        .enumerate()
    {
        if named == MAX_NAMED {
            text.push_str("; …");
            break;
        }
        text.push_str(if named == 0 { ": " } else { "; " });
        let _ = write!(
            text,
            "{} = {} ({}, {}) ",
            j.pointer,
            shown(j),
            j.role.as_str(),
            j.basis
        );
        if targets_free && j.role == Role::Target {
            let _ = write!(
                text,
                "may come from any result, as the write does not destroy ({})",
                match j.found {
                    Found::User => "named in the user's own words",
                    Found::Untrusted(_) => "taken from untrusted text",
                    Found::Trusted(_) => "taken from a trusted result",
                    Found::Nowhere => "named nowhere",
                }
            );
        } else {
            text.push_str(match j.found {
                Found::User => "named in the user's own words",
                Found::Trusted(_) => "found only in a trusted result",
                Found::Untrusted(_) => "from untrusted text",
                Found::Nowhere => "named nowhere",
            });
        }
    }
}
