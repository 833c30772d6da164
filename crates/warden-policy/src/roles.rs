//! Argument roles: which arguments of a call say *where* its effect lands (a recipient, a
//! URL, a channel, an account), *what* it hits (an id, a path), or *grant* something (a
//! password, a permission), as opposed to the payload it carries (a body, a subject, a date).
//!
//! The autonomous rules ([`crate::autonomy`]) let a call through a tainted context only
//! when no injection can have chosen its destinations, targets and grants; payload may be
//! anything. So a role is only ever inferred as *payload* when the evidence is positive: a
//! declaration in the policy, a schema `format` that is a date or time, or an argument name
//! made of payload words. Every other argument, an unknown name included, is a destination.
//!
//! Sources, strongest first: the user's declarations (`destinations`, `targets`, `payload`
//! under `[policy.servers.X.tools.Y]`, JSON pointers); the tool's input schema (`format` of a
//! property: `email`, `uri`, `hostname` … are destinations, `date`, `date-time`, `time`,
//! `duration` are payload); the argument's own name, split into words (`new_start_time`,
//! `userEmail`, `file-id`). Names and schemas are believed from any server: a server that
//! misnames its own arguments only misdirects calls it receives in full anyway, and no
//! third-party text can change a schema.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::args::{Frame, Pointer};

/// What an argument is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Carried along: text, subject, dates, amounts, search words.
    Payload,
    /// What the action hits in the user's own space: an id, a path, a file name.
    Target,
    /// Where the effect lands or who it reaches: a recipient, a URL, a channel, an account.
    Destination,
    /// A value that grants something: a password, a token, a permission.
    Grant,
}

impl Role {
    /// `"payload"`, `"target"`, `"destination"`, `"grant"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Payload => "payload",
            Role::Target => "target",
            Role::Destination => "destination",
            Role::Grant => "grant",
        }
    }
}

/// Words that make a name a grant: an injection must never choose such a value.
const GRANT_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "credentials",
    "apikey",
    "pin",
    "otp",
    "permission",
    "permissions",
    "role",
    "roles",
    "scope",
    "scopes",
    "access",
    "api",
];

/// Destination words naming a person or a place: they stay destinations with an id suffix
/// (`user_id`, `channel_id`), where an item word does not (`email_id` is a target).
const PLACE_WORDS: &[&str] = &[
    "to",
    "cc",
    "bcc",
    "recipient",
    "recipients",
    "user",
    "users",
    "username",
    "member",
    "members",
    "participant",
    "participants",
    "attendee",
    "attendees",
    "invitee",
    "invitees",
    "guest",
    "guests",
    "channel",
    "channels",
    "account",
    "payee",
    "beneficiary",
    "contact",
    "contacts",
    "assignee",
    "assignees",
    "reviewer",
    "reviewers",
    "owner",
    "group",
    "team",
    "repo",
    "repository",
    "destination",
    "dest",
    "target",
    "host",
    "hostname",
    "server",
    "domain",
    "webhook",
    "endpoint",
    "phone",
    "sender",
    "iban",
    "remote",
    "website",
    "site",
];

/// Words that make a name a destination, besides the place words above (which are
/// destinations too; a word is listed once).
const DESTINATION_WORDS: &[&str] = &[
    "email",
    "emails",
    "mail",
    "address",
    "addresses",
    "url",
    "urls",
    "uri",
    "link",
    "href",
    "from",
    "share",
    "with",
    "number",
];

/// Words that, ending a name, make it a target in the user's own space.
const TARGET_WORDS: &[&str] = &[
    "id",
    "ids",
    "path",
    "paths",
    "file",
    "files",
    "filename",
    "filenames",
    "dir",
    "directory",
    "folder",
    "key",
    "uid",
    "uuid",
    "ref",
    "slug",
];

/// Words that make a name payload (when no destination, grant or target word is present).
const PAYLOAD_WORDS: &[&str] = &[
    "body",
    "content",
    "contents",
    "text",
    "message",
    "subject",
    "title",
    "summary",
    "description",
    "note",
    "notes",
    "comment",
    "caption",
    "query",
    "q",
    "search",
    "keyword",
    "keywords",
    "date",
    "time",
    "datetime",
    "timestamp",
    "start",
    "end",
    "day",
    "days",
    "hour",
    "hours",
    "duration",
    "timezone",
    "tz",
    "amount",
    "currency",
    "count",
    "limit",
    "n",
    "page",
    "offset",
    "format",
    "language",
    "lang",
    "location",
    "rating",
    "price",
    "quantity",
    "reason",
    "priority",
    "tag",
    "tags",
    "label",
    "labels",
    "kind",
    "type",
    "status",
    "recurring",
    "starred",
    "read",
    "unread",
    "name",
    "first",
    "last",
    "new",
    "old",
    "min",
    "max",
    "sort",
    "order",
    "size",
];

/// Schema formats that name a place.
const DESTINATION_FORMATS: &[&str] = &[
    "email",
    "idn-email",
    "uri",
    "iri",
    "uri-reference",
    "iri-reference",
    "url",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
];

/// Schema formats of payload.
const PAYLOAD_FORMATS: &[&str] = &["date", "date-time", "time", "duration"];

/// The roles of one tool's arguments: declarations by pointer, and what the input schema
/// says of each top-level property.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArgRoles {
    declared: Vec<(String, Role)>,
    schema: BTreeMap<String, Role>,
}

impl ArgRoles {
    /// Roles from a tool's input schema (`properties.*.format`, and `items.format` of a
    /// list); properties without a telling format are judged by name at decision time.
    pub fn from_schema(schema: &Value) -> ArgRoles {
        let mut roles = ArgRoles::default();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return roles;
        };
        for (name, property) in properties.iter().take(256) {
            let format = property
                .get("format")
                .or_else(|| property.get("items").and_then(|i| i.get("format")))
                .and_then(Value::as_str);
            let by_format = match format {
                Some(f) if DESTINATION_FORMATS.contains(&f) => Some(Role::Destination),
                Some(f) if PAYLOAD_FORMATS.contains(&f) => Some(Role::Payload),
                _ => None,
            };
            if let Some(role) = by_format {
                roles.schema.insert(name.clone(), role);
            }
        }
        roles
    }

    /// Adds the user's declarations (JSON pointers) of `role`; invalid pointers are
    /// reported by [`crate::Policy::compile`], so here they are skipped.
    pub(crate) fn declare(&mut self, pointers: &[String], role: Role) {
        for p in pointers {
            if Pointer::parse(p).is_ok() {
                self.declared.push((p.clone(), role));
            }
        }
    }

    /// True when nothing is declared or known from the schema.
    pub fn is_empty(&self) -> bool {
        self.declared.is_empty() && self.schema.is_empty()
    }

    /// The role of the value at `frame`, and where the role comes from.
    pub(crate) fn role_of(&self, frame: &Frame<'_, '_>) -> (Role, RoleBasis) {
        // The most specific declaration that covers the value.
        let mut best: Option<(usize, Role)> = None;
        for (pointer, role) in &self.declared {
            if let Ok(p) = Pointer::parse(pointer)
                && p.covers(frame)
                && best.is_none_or(|(len, _)| p.len() >= len)
            {
                best = Some((p.len(), *role));
            }
        }
        if let Some((_, role)) = best {
            return (role, RoleBasis::Declared);
        }
        if let Some(role) = frame.top_key().and_then(|k| self.schema.get(k)) {
            return (*role, RoleBasis::Schema);
        }
        match frame.nearest_key() {
            Some(key) => (role_of_name(key), RoleBasis::Name),
            // A bare element of a top-level list: nothing says what it is.
            None => (Role::Destination, RoleBasis::Unknown),
        }
    }
}

/// Where a role comes from, for reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoleBasis {
    Declared,
    Schema,
    Name,
    Unknown,
}

impl RoleBasis {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RoleBasis::Declared => "declared in the policy",
            RoleBasis::Schema => "by its schema format",
            RoleBasis::Name => "by its name",
            RoleBasis::Unknown => "unknown, so taken as a destination",
        }
    }
}

/// Words that make an argument's value a secret, never to be quoted in a reason (reasons go
/// to prompts, transcripts and the audit log, whose arguments are redacted by key).
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "secret",
    "token",
    "credential",
    "credentials",
    "apikey",
    "key",
    "pin",
    "otp",
    "auth",
    "authorization",
    "cookie",
    "session",
    "sid",
];

/// Whether the value of an argument of this name is a secret (its name has a word of
/// [`SECRET_WORDS`]: `password`, `api_key`, `sessionToken`).
pub(crate) fn is_secret_name(name: &str) -> bool {
    let words = words(name);
    words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
}

/// The role an argument name suggests: a grant word anywhere in it wins; then a target word
/// at its end (`event_id`) unless a person or place word is in it too (`user_id`); then a
/// destination word anywhere; then payload when every word is a payload word (or a
/// target word that does not end it: `file_content`); anything else is a destination.
pub(crate) fn role_of_name(name: &str) -> Role {
    let words = words(name);
    if words.is_empty() {
        return Role::Destination;
    }
    let has = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    if has(GRANT_WORDS) {
        return Role::Grant;
    }
    let ends_in_target = words
        .last()
        .is_some_and(|w| TARGET_WORDS.contains(&w.as_str()));
    if ends_in_target && !has(PLACE_WORDS) {
        return Role::Target;
    }
    if has(DESTINATION_WORDS) || has(PLACE_WORDS) {
        return Role::Destination;
    }
    if ends_in_target {
        return Role::Target;
    }
    if words
        .iter()
        .all(|w| PAYLOAD_WORDS.contains(&w.as_str()) || TARGET_WORDS.contains(&w.as_str()))
    {
        return Role::Payload;
    }
    Role::Destination
}

/// Lowercase words of a name: split at `_`, `-`, `.`, spaces and lower-to-upper case steps
/// (`userEmail` → `user`, `email`); digits stay with their word.
fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars().take(128) {
        if c == '_' || c == '-' || c == '.' || c.is_whitespace() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_give_roles_and_unknown_names_are_destinations() {
        for (name, role) in [
            ("to", Role::Destination),
            ("recipients", Role::Destination),
            ("userEmail", Role::Destination),
            ("channel", Role::Destination),
            ("url", Role::Destination),
            ("hotel", Role::Destination),
            ("restaurant", Role::Destination),
            ("participants", Role::Destination),
            ("new_password", Role::Grant),
            ("permission", Role::Grant),
            ("email_id", Role::Target),
            ("user_id", Role::Destination),
            ("api_key", Role::Grant),
            ("event_id", Role::Target),
            ("file_id", Role::Target),
            ("filename", Role::Target),
            ("path", Role::Target),
            ("body", Role::Payload),
            ("subject", Role::Payload),
            ("new_start_time", Role::Payload),
            ("amount", Role::Payload),
            ("query", Role::Payload),
            ("content", Role::Payload),
            ("file_content", Role::Payload),
            ("frobnicate", Role::Destination),
            ("", Role::Destination),
        ] {
            assert_eq!(role_of_name(name), role, "{name}");
        }
    }

    #[test]
    fn schema_formats_are_read() {
        let roles = ArgRoles::from_schema(&json!({"properties": {
            "when": {"type": "string", "format": "date-time"},
            "notify": {"type": "array", "items": {"type": "string", "format": "email"}},
            "body": {"type": "string"}
        }}));
        assert_eq!(roles.schema.get("when"), Some(&Role::Payload));
        assert_eq!(roles.schema.get("notify"), Some(&Role::Destination));
        assert_eq!(roles.schema.get("body"), None);
    }
}
