//! Reading call arguments: compiled JSON pointers, a bounded walk over every scalar with its
//! path, and the test for values that name a place outside (URLs, email addresses, hosts).

use std::fmt::Write as _;

use serde_json::Value;

/// At most this many nodes of an argument tree are visited per check.
pub const MAX_VISITED_VALUES: usize = 1024;
/// Nesting deeper than this is not visited.
pub const MAX_DEPTH: usize = 32;

/// A JSON pointer (RFC 6901), parsed once.
#[derive(Debug, Clone)]
pub(crate) struct Pointer {
    segments: Box<[Segment]>,
}

#[derive(Debug, Clone)]
struct Segment {
    key: Box<str>,
    index: Option<usize>,
}

impl Pointer {
    pub(crate) fn parse(text: &str) -> Result<Pointer, String> {
        if text.is_empty() {
            return Ok(Pointer {
                segments: Box::new([]),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "argument pointer {text:?} must start with '/' (a JSON pointer, like \"/to\")"
            ));
        };
        let mut segments = Vec::new();
        for raw in rest.split('/') {
            let mut key = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => key.push('~'),
                        Some('1') => key.push('/'),
                        _ => {
                            return Err(format!(
                                "argument pointer {text:?} has a '~' not followed by 0 or 1"
                            ));
                        }
                    }
                } else {
                    key.push(c);
                }
            }
            let index = if key == "0" || (!key.starts_with('0') && !key.is_empty()) {
                key.parse::<usize>().ok()
            } else {
                None
            };
            segments.push(Segment {
                key: key.into_boxed_str(),
                index,
            });
        }
        Ok(Pointer {
            segments: segments.into_boxed_slice(),
        })
    }

    /// The number of steps.
    pub(crate) fn len(&self) -> usize {
        self.segments.len()
    }

    pub(crate) fn get<'v>(&self, mut value: &'v Value) -> Option<&'v Value> {
        for seg in &self.segments {
            value = match value {
                Value::Object(map) => map.get(&*seg.key)?,
                Value::Array(items) => items.get(seg.index?)?,
                _ => return None,
            };
        }
        Some(value)
    }

    /// True when this pointer names `path` or one of its ancestors.
    pub(crate) fn covers(&self, path: &Frame<'_, '_>) -> bool {
        let depth = path.depth();
        if self.segments.len() > depth {
            return false;
        }
        let mut frame = Some(path);
        for _ in 0..depth - self.segments.len() {
            frame = frame.and_then(|f| f.parent);
        }
        for seg in self.segments.iter().rev() {
            let Some(f) = frame else {
                return false;
            };
            let same = match f.step {
                Step::Key(k) => *seg.key == *k,
                Step::Index(i) => seg.index == Some(i),
            };
            if !same {
                return false;
            }
            frame = f.parent;
        }
        true
    }
}

/// One step from a value to a child.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step<'k> {
    Key(&'k str),
    Index(usize),
}

/// Where a value sits in the arguments, as a chain of steps kept on the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame<'p, 'k> {
    parent: Option<&'p Frame<'p, 'k>>,
    step: Step<'k>,
}

impl Frame<'_, '_> {
    fn depth(&self) -> usize {
        let mut n = 1;
        let mut at = self.parent;
        while let Some(f) = at {
            n += 1;
            at = f.parent;
        }
        n
    }

    /// Renders the JSON pointer of this frame.
    pub(crate) fn pointer(&self) -> String {
        let mut steps = Vec::with_capacity(self.depth());
        let mut at = Some(self);
        while let Some(f) = at {
            steps.push(f.step);
            at = f.parent;
        }
        let mut out = String::new();
        for step in steps.iter().rev() {
            out.push('/');
            match step {
                Step::Key(k) => {
                    for c in k.chars() {
                        match c {
                            '~' => out.push_str("~0"),
                            '/' => out.push_str("~1"),
                            c => out.push(c),
                        }
                    }
                }
                Step::Index(i) => {
                    let _ = write!(out, "{i}");
                }
            }
        }
        out
    }

    /// The key of the top-level argument this value sits in, if the arguments are an
    /// object.
    pub(crate) fn top_key(&self) -> Option<&str> {
        let mut at = self;
        while let Some(parent) = at.parent {
            at = parent;
        }
        match at.step {
            Step::Key(k) => Some(k),
            Step::Index(_) => None,
        }
    }

    /// The nearest key naming this value: its own, or its list's (`/to/0` is named `to`).
    pub(crate) fn nearest_key(&self) -> Option<&str> {
        self.key()
    }

    fn key(&self) -> Option<&str> {
        match self.step {
            Step::Key(k) => Some(k),
            // An element of a list named `hosts` is a host too.
            Step::Index(_) => self.parent.and_then(Frame::key),
        }
    }
}

/// A scalar found in the arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scalar<'v> {
    Str(&'v str),
    Int(i128),
}

/// Visits every string and integer in `value` (the top-level value itself has no frame and
/// is skipped unless it is a container), depth first, until `visit` returns `false`.
/// Returns `false` when the walk was cut short by [`MAX_VISITED_VALUES`] or [`MAX_DEPTH`].
pub(crate) fn walk<'v>(
    value: &'v Value,
    visit: &mut dyn FnMut(&Frame<'_, 'v>, Scalar<'v>) -> bool,
) -> bool {
    let mut budget = MAX_VISITED_VALUES;
    let mut complete = true;
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let frame = Frame {
                    parent: None,
                    step: Step::Key(k),
                };
                if !walk_in(v, &frame, 1, &mut budget, &mut complete, visit) {
                    break;
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let frame = Frame {
                    parent: None,
                    step: Step::Index(i),
                };
                if !walk_in(v, &frame, 1, &mut budget, &mut complete, visit) {
                    break;
                }
            }
        }
        _ => {}
    }
    complete
}

/// Returns `false` to stop the whole walk.
fn walk_in<'v>(
    value: &'v Value,
    frame: &Frame<'_, 'v>,
    depth: usize,
    budget: &mut usize,
    complete: &mut bool,
    visit: &mut dyn FnMut(&Frame<'_, 'v>, Scalar<'v>) -> bool,
) -> bool {
    if *budget == 0 || depth > MAX_DEPTH {
        *complete = false;
        return *budget != 0;
    }
    *budget -= 1;
    match value {
        Value::String(s) => visit(frame, Scalar::Str(s)),
        Value::Number(n) => match n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)) {
            Some(i) => visit(frame, Scalar::Int(i)),
            None => true,
        },
        Value::Object(map) => {
            for (k, v) in map {
                let child = Frame {
                    parent: Some(frame),
                    step: Step::Key(k),
                };
                if !walk_in(v, &child, depth + 1, budget, complete, visit) {
                    return false;
                }
            }
            true
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let child = Frame {
                    parent: Some(frame),
                    step: Step::Index(i),
                };
                if !walk_in(v, &child, depth + 1, budget, complete, visit) {
                    return false;
                }
            }
            true
        }
        Value::Null | Value::Bool(_) => true,
    }
}

/// Argument names whose bare dotted value (`evil.com`) is taken as a host name: these
/// words alone or ending a longer name (`base_url`, `target-host`, `webhookUrl`). Elsewhere
/// a bare dotted name cannot be told from a file name (`main.rs`, `notes.md`), so it is not.
const HOST_WORDS: [&str; 14] = [
    "host", "hostname", "domain", "server", "remote", "endpoint", "origin", "url", "uri", "link",
    "href", "website", "site", "address",
];

fn names_a_host(key: &str) -> bool {
    HOST_WORDS.iter().any(|word| {
        let Some(split) = key.len().checked_sub(word.len()) else {
            return false;
        };
        let (head, tail) = (&key.as_bytes()[..split], &key.as_bytes()[split..]);
        if !tail.eq_ignore_ascii_case(word.as_bytes()) {
            return false;
        }
        match head.last() {
            None => true,
            Some(b'_' | b'-' | b'.') => true,
            // camelCase: `webhookUrl`, `targetHost`
            Some(c) => c.is_ascii_lowercase() && tail[0].is_ascii_uppercase(),
        }
    })
}

/// True when an argument value names a place outside: a URL with a network scheme
/// (anything but `file:`), a `mailto:`-like URI, an email address (also `Name <addr>`, and
/// lists separated by `,` or `;`), an scp-style `user@host:path`, a UNC path `\\host`, an IP
/// address, or `host.tld:port` / `host.tld/path` / `www.host`; and, for arguments named like
/// a host ([`HOST_WORDS`]), a bare `host.tld`. The value is judged whole (trimmed): a long
/// text that merely mentions a URL is text, not a destination.
pub(crate) fn names_outside(frame: &Frame<'_, '_>, value: &str) -> bool {
    let mut any = false;
    destinations(frame, value, &mut |_| any = true);
    any
}

/// Calls `f` with what each outward-looking item of `value` points at: the host of a URL,
/// a network path or a bare host, or the address of an email (see [`names_outside`]).
pub(crate) fn destinations<'s>(frame: &Frame<'_, '_>, value: &'s str, f: &mut dyn FnMut(&'s str)) {
    let value = value.trim();
    if value.is_empty() {
        return;
    }
    let host_key = frame.key().is_some_and(names_a_host);
    for item in value.split([',', ';']) {
        let item = item.trim();
        // `Display Name <addr>`
        let inner = match item
            .strip_suffix('>')
            .and_then(|s| s.rfind('<').map(|at| &s[at + 1..]))
        {
            Some(inner) => inner.trim(),
            None if item.chars().any(char::is_whitespace) => continue,
            None => item,
        };
        if !inner.is_empty() && address(inner, host_key) {
            f(destination_of(inner));
        }
    }
}

/// At most this many words of one text are looked at by [`embedded`].
const MAX_EMBEDDED_WORDS: usize = 4096;

/// Calls `f` with what each outward-looking word of a free text points at: links, hosts
/// with a path or `www.`, email addresses. Returns `false` when the text was too long to
/// look at whole.
pub(crate) fn embedded<'s>(text: &'s str, f: &mut dyn FnMut(&'s str)) -> bool {
    let words = text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '<' | '>' | '(' | ')' | '[' | ']' | '"' | '\'' | ',' | ';'
            )
    });
    for (n, word) in words.enumerate() {
        if n == MAX_EMBEDDED_WORDS {
            return false;
        }
        let word = word.trim_end_matches(['.', ':', '!', '?']);
        if !word.is_empty() && word.len() < 2048 && address(word, false) {
            f(destination_of(word));
        }
    }
    true
}

/// The host (or, for an email, the address) that an outward-looking item points at.
fn destination_of(s: &str) -> &str {
    if let Some((scheme, rest)) = s.split_once(':')
        && is_scheme(scheme)
    {
        if let Some(authority) = rest.strip_prefix("//") {
            return host_of(authority);
        }
        if OPAQUE_SCHEMES
            .iter()
            .any(|o| scheme.eq_ignore_ascii_case(o))
        {
            // mailto:addr?subject=...
            return rest.split(['?', '#']).next().unwrap_or(rest);
        }
    }
    if let Some(unc) = s.strip_prefix("\\\\") {
        return unc.split(['\\', '/']).next().unwrap_or(unc);
    }
    if let Some(network) = s.strip_prefix("//") {
        return host_of(network);
    }
    if let Some((_, domain)) = s.rsplit_once('@')
        && domain.contains([':', '/'])
    {
        // scp-style `user@host:path`
        return domain.split([':', '/']).next().unwrap_or(domain);
    }
    if s.contains('@') {
        return s;
    }
    host_of(s)
}

/// The host of `[userinfo@]host[:port][/path]`.
fn host_of(authority: &str) -> &str {
    let end = authority.find(['/', '?', '#']).unwrap_or(authority.len());
    let host_port = &authority[..end];
    let host_port = host_port.rsplit_once('@').map_or(host_port, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port
            .find(']')
            .map_or(host_port, |at| &host_port[..=at]);
    }
    match host_port.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => host_port,
    }
}

/// Schemes that name a destination without `//`.
const OPAQUE_SCHEMES: [&str; 9] = [
    "mailto", "tel", "sms", "sip", "sips", "xmpp", "callto", "news", "irc",
];

fn address(s: &str, host_key: bool) -> bool {
    if let Some((scheme, rest)) = s.split_once(':')
        && is_scheme(scheme)
    {
        if let Some(after) = rest.strip_prefix("//") {
            return !scheme.eq_ignore_ascii_case("file")
                || !(after.is_empty() || after.starts_with('/'));
        }
        if OPAQUE_SCHEMES
            .iter()
            .any(|o| scheme.eq_ignore_ascii_case(o))
        {
            return true;
        }
    }
    if s.starts_with("\\\\") {
        return true;
    }
    if let Some(stripped) = s.strip_prefix("//") {
        // A network-path reference (`//host/path`); `//tmp/x` is just a path.
        return host_part_is_dotted(stripped);
    }
    if let Some((local, domain)) = s.rsplit_once('@')
        && !local.is_empty()
        && !local.contains('/')
    {
        // `user@host`, `user@host:path`, `user@host/path`
        let host = domain.split([':', '/']).next().unwrap_or("");
        return is_domain(host) || is_ipv4(host) || host.starts_with('[');
    }
    let (host, tail) = match s.find(['/', '?', '#']) {
        Some(at) => (&s[..at], &s[at..]),
        None => (s, ""),
    };
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !n.contains(':') => (n, Some(p)),
        _ => (host, None),
    };
    if host.starts_with('[') && host.contains(']') {
        return true; // [IPv6]:port
    }
    let port_ok = port.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if is_ipv4(name) {
        return true;
    }
    if !is_domain(name) {
        return false;
    }
    port_ok
        || name
            .get(..4)
            .is_some_and(|www| www.eq_ignore_ascii_case("www."))
        || (tail.len() > 1 && port.is_none())
        || host_key
}

fn host_part_is_dotted(s: &str) -> bool {
    let host = s.split(['/', ':']).next().unwrap_or("");
    is_domain(host) || is_ipv4(host)
}

fn is_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        // A one-letter "scheme" is a Windows drive (`C:`).
        && s.len() > 1
}

/// `label.label[.label...]` with a last label of at least two letters.
fn is_domain(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    let mut labels = 0;
    let mut last = "";
    for label in s.split('.') {
        if label.is_empty()
            || label.len() > 63
            || !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return false;
        }
        labels += 1;
        last = label;
    }
    labels >= 2 && last.len() >= 2 && last.bytes().all(|b| b.is_ascii_alphabetic())
}

fn is_ipv4(s: &str) -> bool {
    let mut parts = 0;
    for part in s.split('.') {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        parts += 1;
    }
    parts == 4
}

/// Values shorter than this (in characters) are not checked for verbatim copies: they are
/// too common to say anything. Nor are single words of letters only, for the same reason;
/// identifiers (addresses, URLs, paths, account numbers, `owner/repo`) and phrases are.
pub const MIN_VERBATIM_CHARS: usize = 4;

/// A value ASCII-lowercased for the verbatim check, on the stack when short.
pub(crate) struct Folded {
    inline: [u8; 128],
    len: usize,
    heap: Vec<u8>,
}

impl Folded {
    pub(crate) fn new() -> Folded {
        Folded {
            inline: [0; 128],
            len: 0,
            heap: Vec::new(),
        }
    }

    /// Folds a scalar; `None` when it is too short to check.
    pub(crate) fn fold(&mut self, scalar: Scalar<'_>) -> Option<&[u8]> {
        match scalar {
            Scalar::Str(s) => {
                // Too short to say anything: `None`.
                s.chars().nth(MIN_VERBATIM_CHARS - 1)?;
                // A single plain word ("invoices") is as likely to come from the user's
                // request or the model's own wording: it is no evidence of copying.
                if s.chars().all(char::is_alphabetic) {
                    return None;
                }
                let bytes = s.as_bytes();
                if bytes.len() <= self.inline.len() {
                    for (dst, src) in self.inline.iter_mut().zip(bytes) {
                        *dst = src.to_ascii_lowercase();
                    }
                    self.len = bytes.len();
                    Some(&self.inline[..self.len])
                } else {
                    self.heap.clear();
                    self.heap.extend(bytes.iter().map(u8::to_ascii_lowercase));
                    Some(&self.heap)
                }
            }
            Scalar::Int(i) => {
                let mut cursor = std::io::Cursor::new(&mut self.inline[..]);
                std::io::Write::write_fmt(&mut cursor, format_args!("{i}")).ok()?;
                let len = usize::try_from(cursor.position()).ok()?;
                let digits = self.inline[..len]
                    .iter()
                    .filter(|b| b.is_ascii_digit())
                    .count();
                if digits < MIN_VERBATIM_CHARS {
                    return None;
                }
                self.len = len;
                Some(&self.inline[..len])
            }
        }
    }
}

/// A value for a reason's text: quoted as a JSON string, at most 60 characters of it.
pub(crate) fn quote(scalar: Scalar<'_>) -> String {
    const SHOWN: usize = 60;
    match scalar {
        Scalar::Str(s) => {
            let shown: String = s.chars().take(SHOWN).collect();
            let mut out = serde_json::to_string(&shown).unwrap_or_default();
            if shown.len() < s.len() {
                out.insert(out.len().saturating_sub(1), '…');
            }
            out
        }
        Scalar::Int(i) => i.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outward(key: &str, value: &str) -> bool {
        let frame = Frame {
            parent: None,
            step: Step::Key(key),
        };
        names_outside(&frame, value)
    }

    #[test]
    fn addresses_are_recognised() {
        for v in [
            "https://evil.com/collect?d=1",
            "HTTP://x.y",
            "ftp://files.example.org",
            "wss://host:443/s",
            "s3://bucket/key",
            "mailto:someone@example.com",
            "evil@x.com",
            "  evil@x.com  ",
            "Eve <eve@x.com>",
            "me@mine.org, evil@x.com",
            "git@github.com:me/repo.git",
            "user@10.0.0.1",
            "10.0.0.1",
            "10.0.0.1:8080/path",
            "[::1]:8080",
            "evil.com:443",
            "evil.com/collect",
            "www.evil.com",
            "//evil.com/x",
            "\\\\fileserver\\share",
            "file://remotehost/share",
        ] {
            assert!(outward("x", v), "{v} should name a place outside");
        }
    }

    #[test]
    fn paths_names_and_text_are_not_addresses() {
        for v in [
            "main.rs",
            "notes.md",
            "report.pdf",
            "/home/me/notes.txt",
            "src/lib.rs",
            "conf.d/app.conf",
            "file:///etc/passwd",
            "C:/Users/me",
            "hello world",
            "see https://example.com for details",
            "1.2.3",
            "v1.2/notes",
            "//tmp/x",
            "me/warden",
            "",
        ] {
            assert!(!outward("x", v), "{v} should not name a place outside");
        }
    }

    fn dests(value: &str) -> Vec<&str> {
        let frame = Frame {
            parent: None,
            step: Step::Key("x"),
        };
        let mut out = Vec::new();
        destinations(&frame, value, &mut |d| out.push(d));
        out
    }

    #[test]
    fn destinations_are_hosts_or_addresses() {
        assert_eq!(
            dests("https://user:pw@Evil.example:8443/c?d=1"),
            vec!["Evil.example"]
        );
        assert_eq!(dests("mailto:eve@x.com?subject=hi"), vec!["eve@x.com"]);
        assert_eq!(
            dests("Eve <eve@x.com>; bob@y.org"),
            vec!["eve@x.com", "bob@y.org"]
        );
        assert_eq!(dests("git@github.com:me/repo.git"), vec!["github.com"]);
        assert_eq!(dests("evil.example:443/x"), vec!["evil.example"]);
        assert_eq!(dests("//evil.example/x"), vec!["evil.example"]);
        assert_eq!(dests("\\\\files\\share"), vec!["files"]);
        assert_eq!(dests("[::1]:8080/x"), vec!["[::1]"]);
        assert_eq!(dests("10.1.2.3"), vec!["10.1.2.3"]);
        assert_eq!(dests("main.rs"), Vec::<&str>::new());
    }

    #[test]
    fn host_like_keys() {
        for key in [
            "host",
            "URL",
            "base_url",
            "target-host",
            "webhookUrl",
            "callbackURI",
        ] {
            assert!(names_a_host(key), "{key}");
        }
        for key in ["ghost", "curl", "path", "hosts", "name", ""] {
            assert!(!names_a_host(key), "{key}");
        }
    }

    #[test]
    fn a_bare_domain_counts_only_under_a_host_like_key() {
        assert!(!outward("path", "evil.com"));
        assert!(outward("host", "evil.com"));
        assert!(outward("Domain", "evil.com"));
        let parent = Frame {
            parent: None,
            step: Step::Key("hosts"),
        };
        let element = Frame {
            parent: Some(&parent),
            step: Step::Index(0),
        };
        assert!(!names_outside(&element, "evil.com"));
        let parent = Frame {
            parent: None,
            step: Step::Key("host"),
        };
        let element = Frame {
            parent: Some(&parent),
            step: Step::Index(0),
        };
        assert!(names_outside(&element, "evil.com"));
    }

    #[test]
    fn pointers_parse_get_and_cover() {
        let v = json!({"a": {"b/c": [10, {"~d": "x"}]}});
        let p = Pointer::parse("/a/b~1c/1/~0d").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.get(&v), Some(&json!("x")));
        assert_eq!(
            Pointer::parse("").map(|p| p.get(&v).cloned()).ok(),
            Some(Some(v.clone()))
        );
        assert!(Pointer::parse("a").is_err());
        assert!(Pointer::parse("/a~2").is_err());
        assert_eq!(
            Pointer::parse("/a/01")
                .ok()
                .and_then(|p| p.get(&json!({"a": [1, 2]})).cloned()),
            None
        );

        let mut seen = Vec::new();
        let complete = walk(&v, &mut |frame, scalar| {
            let covered = Pointer::parse("/a/b~1c").is_ok_and(|p| p.covers(frame));
            let exact = Pointer::parse("/a/b~1c/1/~0d").is_ok_and(|p| p.covers(frame));
            let other = Pointer::parse("/a/x").is_ok_and(|p| p.covers(frame));
            seen.push((
                frame.pointer(),
                format!("{scalar:?}"),
                covered,
                exact,
                other,
            ));
            true
        });
        assert!(complete);
        assert_eq!(
            seen,
            vec![
                (
                    "/a/b~1c/0".to_owned(),
                    "Int(10)".to_owned(),
                    true,
                    false,
                    false
                ),
                (
                    "/a/b~1c/1/~0d".to_owned(),
                    "Str(\"x\")".to_owned(),
                    true,
                    true,
                    false
                ),
            ]
        );
    }

    #[test]
    fn walks_are_bounded() {
        let wide = Value::Array((0..2000).map(|i| json!(format!("v{i}"))).collect());
        let mut n = 0;
        assert!(!walk(&wide, &mut |_, _| {
            n += 1;
            true
        }));
        assert_eq!(n, MAX_VISITED_VALUES);

        let mut deep = json!("bottom");
        for _ in 0..40 {
            deep = json!([deep]);
        }
        let mut found = false;
        assert!(!walk(&deep, &mut |_, _| {
            found = true;
            true
        }));
        assert!(!found);
    }

    #[test]
    fn folding_and_quoting() {
        let mut f = Folded::new();
        assert_eq!(f.fold(Scalar::Str("AbC")), None);
        assert_eq!(f.fold(Scalar::Str("AbCd")), None, "a plain word");
        assert_eq!(f.fold(Scalar::Str("Ab-d")), Some(&b"ab-d"[..]));
        assert_eq!(f.fold(Scalar::Str("Ab d")), Some(&b"ab d"[..]));
        assert_eq!(f.fold(Scalar::Int(999)), None);
        assert_eq!(f.fold(Scalar::Int(-12345)), Some(&b"-12345"[..]));
        let long = "X-".repeat(150);
        assert_eq!(f.fold(Scalar::Str(&long)).map(<[u8]>::len), Some(300));
        assert_eq!(quote(Scalar::Str("a\"b")), "\"a\\\"b\"");
        assert_eq!(
            quote(Scalar::Str(&long)),
            format!("\"{}…\"", "X-".repeat(30))
        );
    }
}
