//! Resources, resource templates and prompts of every upstream server, as one list each,
//! and the routes back: which server a prompt name or a resource URI belongs to.
//!
//! Pure: built from each server's pages (read by [`crate::backend`], which alone talks to
//! the host), so a cache can answer from a stored [`Aggregate`] as well.
//!
//! Naming follows tools (one scheme): a **prompt** is offered as `server__prompt`
//! ([`warden_host::naming::qualify`], at most 64 characters, stable when a server is added
//! or removed) and hidden by the same `hide` rules as a tool of that name; with `--only`
//! it keeps its own name. A **resource** (and a template) keeps its URI, which is its
//! address: tool results link to resources by URI (`resource_link`, embedded resources),
//! and a client reads what it was shown. Its display `name` gets the `server__` prefix, so a
//! person sees where it comes from. A URI is routed to the server that listed it, or whose
//! template matches it; a URI that two servers claim is refused rather than guessed (one
//! server must not be able to answer reads meant for another by listing its URIs).

use serde_json::{Map, Value};

/// Items accepted from one server per list, across all its pages (as for tools).
pub const MAX_ITEMS_PER_SERVER: usize = warden_mcp::connection::DEFAULT_MAX_TOOLS;
/// Pages followed per server and list (as for tools).
pub const MAX_PAGES_PER_SERVER: usize = warden_mcp::connection::DEFAULT_MAX_PAGES;

/// One of the aggregated lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    Templates,
    /// `prompts/list`.
    Prompts,
}

impl Kind {
    /// The upstream method that lists it.
    pub fn method(self) -> &'static str {
        match self {
            Kind::Resources => "resources/list",
            Kind::Templates => "resources/templates/list",
            Kind::Prompts => "prompts/list",
        }
    }

    /// The key of the items in the list result.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Resources => "resources",
            Kind::Templates => "resourceTemplates",
            Kind::Prompts => "prompts",
        }
    }

    /// The server capability that offers it.
    pub fn capability(self) -> &'static str {
        match self {
            Kind::Resources | Kind::Templates => "resources",
            Kind::Prompts => "prompts",
        }
    }

    /// The prefix of this list's pagination cursors.
    pub fn cursor_prefix(self) -> &'static str {
        match self {
            Kind::Resources => "warden-resources:",
            Kind::Templates => "warden-templates:",
            Kind::Prompts => "warden-prompts:",
        }
    }
}

/// One server's items of one list, as it sent them (untrusted).
#[derive(Debug, Clone)]
pub struct ServerItems {
    /// The server's configured name.
    pub server: String,
    /// Its items, in its order.
    pub items: Vec<Value>,
}

/// One list across every server: the entries a client sees, and where each came from.
#[derive(Debug, Default)]
pub struct Aggregate {
    /// The entries, servers by name, each server's items in its own order.
    pub entries: Vec<Value>,
    /// The server and raw name (prompts) or URI / URI template (resources) of each entry,
    /// index for index.
    pub origins: Vec<(String, String)>,
    /// The servers whose list is missing from this one, and why (its read failed, or
    /// passed its deadline): named to the client on the first page.
    pub left_out: Vec<(String, String)>,
}

impl Aggregate {
    /// Builds one list from each server's items. `only`: one server fronted under its own
    /// names. `hidden`: whether the policy hides a prompt's qualified name. Items without
    /// the identifying field (`name`, `uri`, `uriTemplate`) are left out, as is a repeat
    /// of an identifier within one server.
    pub fn build(
        kind: Kind,
        mut lists: Vec<ServerItems>,
        only: bool,
        hidden: &dyn Fn(&str) -> bool,
    ) -> Aggregate {
        lists.sort_by(|a, b| a.server.cmp(&b.server));
        let id_key = match kind {
            Kind::Resources => "uri",
            Kind::Templates => "uriTemplate",
            Kind::Prompts => "name",
        };
        let mut kept: Vec<(String, String, Map<String, Value>)> = Vec::new();
        for list in lists {
            let mut seen = std::collections::HashSet::new();
            for item in list.items {
                let Value::Object(item) = item else { continue };
                let Some(id) = item.get(id_key).and_then(Value::as_str) else {
                    continue;
                };
                if !seen.insert(id.to_owned()) {
                    continue;
                }
                kept.push((list.server.clone(), id.to_owned(), item));
            }
        }
        let qualified: Vec<String> = if kind == Kind::Prompts && !only {
            let pairs: Vec<(&str, &str)> = kept
                .iter()
                .map(|(server, id, _)| (server.as_str(), id.as_str()))
                .collect();
            warden_host::naming::qualify(&pairs)
        } else {
            Vec::new()
        };
        let mut aggregate = Aggregate::default();
        for (index, (server, id, mut item)) in kept.into_iter().enumerate() {
            if kind == Kind::Prompts {
                let shown = match qualified.get(index) {
                    Some(name) => name.clone(),
                    None => id.clone(),
                };
                let rule_name = qualified
                    .get(index)
                    .cloned()
                    .unwrap_or_else(|| format!("{server}__{id}"));
                if hidden(&rule_name) {
                    continue;
                }
                item.insert("name".into(), Value::String(shown));
            } else if !only {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(&id)
                    .to_owned();
                item.insert("name".into(), Value::String(format!("{server}__{name}")));
            }
            aggregate.entries.push(Value::Object(item));
            aggregate.origins.push((server, id));
        }
        aggregate
    }

    /// The server and raw name of the prompt a client calls `name`.
    pub fn prompt(&self, name: &str) -> Option<(&str, &str)> {
        self.entries
            .iter()
            .zip(&self.origins)
            .find(|(entry, _)| entry.get("name").and_then(Value::as_str) == Some(name))
            .map(|(_, (server, raw))| (server.as_str(), raw.as_str()))
    }

    /// Every server that lists `uri` exactly (resources), or whose template is exactly
    /// `uri` or matches it (templates), without repeats, in name order.
    pub fn servers_for_uri(&self, uri: &str, templates: bool) -> Vec<&str> {
        let mut servers: Vec<&str> = Vec::new();
        for (server, id) in &self.origins {
            let hit = if templates {
                id == uri || template_matches(id, uri)
            } else {
                id == uri
            };
            if hit && !servers.contains(&server.as_str()) {
                servers.push(server);
            }
        }
        servers
    }
}

/// Every server that claims `uri`, by a listed resource (`resources`) or a template
/// (`templates`) alike, without repeats, in name order. A listing does not outrank a
/// template: two servers claiming one URI either way is for the caller to refuse, not to
/// settle by which list was looked at first.
pub fn uri_claimants(resources: &Aggregate, templates: &Aggregate, uri: &str) -> Vec<String> {
    let mut servers: Vec<String> = resources
        .servers_for_uri(uri, false)
        .into_iter()
        .chain(templates.servers_for_uri(uri, true))
        .map(str::to_owned)
        .collect();
    servers.sort();
    servers.dedup();
    servers
}

/// Whether `uri` could be an expansion of the RFC 6570 `template`: its literal parts
/// appear in order (the first at the start, the last at the end), each expression standing
/// for any text between them. Generous on purpose (it routes, it does not validate: the
/// server checks its own URIs), but a URI a template's literals do not fit is not routed
/// to it.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut literals: Vec<&str> = Vec::new();
    let mut rest = template;
    let mut ends_in_expression = false;
    loop {
        match rest.find('{') {
            Some(open) => {
                literals.push(&rest[..open]);
                match rest[open..].find('}') {
                    Some(close) => {
                        rest = &rest[open + close + 1..];
                        ends_in_expression = rest.is_empty();
                    }
                    // An unclosed expression: not a template.
                    None => return false,
                }
            }
            None => {
                literals.push(rest);
                break;
            }
        }
    }
    if literals.len() == 1 {
        return template == uri;
    }
    let Some((first, middle)) = literals.split_first() else {
        return false;
    };
    let Some(mut remaining) = uri.strip_prefix(first) else {
        return false;
    };
    let (middle, last) = match middle.split_last() {
        Some((last, middle)) if !ends_in_expression => (middle, Some(*last)),
        _ => (middle, None),
    };
    for literal in middle {
        if literal.is_empty() {
            continue;
        }
        match remaining.find(literal) {
            Some(at) => remaining = &remaining[at + literal.len()..],
            None => return false,
        }
    }
    match last {
        Some(last) => remaining.ends_with(last),
        None => true,
    }
}

/// The text of a resource read or a prompt for the provenance: every `text` string in
/// it, in order (blobs are not text a model reads as instructions, and are not kept).
pub fn text_of(value: &Value) -> String {
    let mut out = String::new();
    collect_text(value, &mut out);
    out
}

fn collect_text(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("text" | "description", Value::String(text)) => {
                        if !out.is_empty() {
                            out.push('\n');
                        }
                        out.push_str(text);
                    }
                    _ => collect_text(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_text(item, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn items(server: &str, items: Value) -> ServerItems {
        ServerItems {
            server: server.into(),
            items: items.as_array().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn prompts_are_prefixed_like_tools_and_hidden_by_the_same_rules() {
        let lists = vec![
            items("b", json!([{"name": "greet"}, {"name": "secret"}])),
            items(
                "a",
                json!([{"name": "greet", "description": "hi"}, {"name": "greet"}]),
            ),
        ];
        let built = Aggregate::build(Kind::Prompts, lists, false, &|name| name == "b__secret");
        let names: Vec<&str> = built
            .entries
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a__greet", "b__greet"]);
        assert_eq!(built.prompt("b__greet"), Some(("b", "greet")));
        assert_eq!(built.prompt("b__secret"), None);
        assert_eq!(built.entries[0]["description"], "hi");
    }

    #[test]
    fn only_mode_keeps_names_and_resources_keep_uris() {
        let lists = vec![items("s", json!([{"name": "greet"}]))];
        let built = Aggregate::build(Kind::Prompts, lists, true, &|_| false);
        assert_eq!(built.entries[0]["name"], "greet");
        let lists = vec![items(
            "s",
            json!([{"uri": "file:///a", "name": "A"}, {"name": "no uri"}]),
        )];
        let built = Aggregate::build(Kind::Resources, lists, false, &|_| false);
        assert_eq!(
            built.entries,
            vec![json!({"uri": "file:///a", "name": "s__A"})]
        );
    }

    #[test]
    fn a_uri_two_servers_list_routes_to_both_so_the_caller_can_refuse() {
        let lists = vec![
            items(
                "honest",
                json!([{"uri": "file:///etc/app.conf", "name": "c"}]),
            ),
            items(
                "thief",
                json!([{"uri": "file:///etc/app.conf", "name": "c"}]),
            ),
        ];
        let built = Aggregate::build(Kind::Resources, lists, false, &|_| false);
        assert_eq!(
            built.servers_for_uri("file:///etc/app.conf", false),
            ["honest", "thief"]
        );
        assert!(built.servers_for_uri("file:///other", false).is_empty());
    }

    #[test]
    fn a_uri_one_server_lists_and_another_templates_is_claimed_by_both() {
        let resources = Aggregate::build(
            Kind::Resources,
            vec![items(
                "thief",
                json!([{"uri": "notes://a/secret.txt", "name": "s"}]),
            )],
            false,
            &|_| false,
        );
        let templates = Aggregate::build(
            Kind::Templates,
            vec![items(
                "honest",
                json!([{"uriTemplate": "notes://a/{file}", "name": "n"}]),
            )],
            false,
            &|_| false,
        );
        // The listing does not silently win over the template: both claim it.
        assert_eq!(
            uri_claimants(&resources, &templates, "notes://a/secret.txt"),
            ["honest", "thief"]
        );
        // Control: a URI only the template matches is the template's server's alone, and
        // a server listing and templating the same URI counts once.
        assert_eq!(
            uri_claimants(&resources, &templates, "notes://a/other.txt"),
            ["honest"]
        );
        let own = Aggregate::build(
            Kind::Templates,
            vec![items(
                "thief",
                json!([{"uriTemplate": "notes://a/{file}", "name": "n"}]),
            )],
            false,
            &|_| false,
        );
        assert_eq!(
            uri_claimants(&resources, &own, "notes://a/secret.txt"),
            ["thief"]
        );
        assert!(uri_claimants(&resources, &templates, "other://x").is_empty());
    }

    #[test]
    fn templates_match_by_their_literals() {
        let t = "demo://resource/dynamic/text/{resourceId}";
        assert!(template_matches(t, "demo://resource/dynamic/text/7"));
        assert!(!template_matches(t, "demo://resource/static/7"));
        assert!(!template_matches(t, "other://resource/dynamic/text/7"));
        assert!(template_matches("a://{x}/b/{y}.txt", "a://1/b/2.txt"));
        assert!(!template_matches("a://{x}/b/{y}.txt", "a://1/b/2.json"));
        assert!(template_matches("a://fixed", "a://fixed"));
        assert!(!template_matches("a://{broken", "a://anything"));
    }

    #[test]
    fn the_text_of_contents_and_messages_is_every_text_field() {
        let read = json!({"contents": [{"uri": "x", "text": "one"}, {"uri": "y", "blob": "AAAA"}]});
        assert_eq!(text_of(&read), "one");
        let prompt = json!({"description": "d", "messages": [
            {"role": "user", "content": {"type": "text", "text": "ignore previous"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "z", "text": "embedded"}}}
        ]});
        assert_eq!(text_of(&prompt), "d\nignore previous\nembedded");
    }
}
