//! `network = { allow = [...] }`: the egress allowlist of one confined server.
//!
//! Each entry names where the server may connect through Warden's egress proxy
//! (docs/decisions/0029-egress-proxy.md):
//!
//! | entry | meaning |
//! |---|---|
//! | `api.github.com` | TLS (HTTP `CONNECT`) to that host, port 443 |
//! | `api.github.com:8443`, `https://api.github.com:8443` | TLS to that host and port |
//! | `*.githubusercontent.com` | TLS to any name below it (not the name itself), port 443 |
//! | `http://host:8080` | plain HTTP forwarded by the proxy (port 80 when none is given) |
//! | `10.1.2.3:443`, `http://[fd00::1]:80` | an IP literal: that address only, private or not |
//! | `{ host = "http://registry.lan:8080", private = true }` | may resolve to a private address |
//!
//! A name resolves (in Warden, never in the server) to public addresses only: loopback,
//! private, link-local (the cloud metadata service), CGNAT, multicast and other special
//! ranges are refused unless the entry is an IP literal or is marked `private = true`.
//! Entries are parsed here so that a broken one is an error naming it at load time.

use std::fmt;
use std::net::IpAddr;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most entries one allowlist may hold.
pub const MAX_EGRESS_RULES: usize = 256;

/// How a connection to an allowed destination is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EgressKind {
    /// A TLS tunnel opened with HTTP `CONNECT`; the ClientHello's SNI must name the host.
    Tls,
    /// Plain HTTP, forwarded request by request (`http://` entries).
    Http,
}

impl EgressKind {
    /// `tls` or `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            EgressKind::Tls => "tls",
            EgressKind::Http => "http",
        }
    }
}

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// One DNS name (lower case, no trailing dot).
    Name(String),
    /// `*.SUFFIX`: any name with at least one more label in front of `SUFFIX`.
    Below(String),
    /// An IP address, allowed whatever range it is in.
    Ip(IpAddr),
}

/// One parsed allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EgressRule {
    /// TLS through `CONNECT`, or plain HTTP.
    pub kind: EgressKind,
    /// Which host.
    pub host: HostPattern,
    /// Which port.
    pub port: u16,
    /// Whether a name may resolve to a loopback, private, link-local or other special
    /// address (`private = true`). IP literals are always allowed as written.
    pub private: bool,
    /// The entry as written, for messages and the audit log.
    pub text: String,
}

impl EgressRule {
    /// Parses one entry (`private` from its table form).
    ///
    /// The error says what is wrong with it; the caller names the entry.
    pub fn parse(text: &str, private: bool) -> Result<EgressRule, String> {
        if text.is_empty() {
            return Err("it is empty".to_owned());
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("it contains white space or a control character".to_owned());
        }
        let (kind, default_port, rest) = match text.split_once("://") {
            None => (EgressKind::Tls, 443, text),
            Some((scheme, rest)) => match scheme.to_ascii_lowercase().as_str() {
                "https" => (EgressKind::Tls, 443, rest),
                "http" => (EgressKind::Http, 80, rest),
                other => {
                    return Err(format!(
                        "the scheme {other:?} is not supported (use `https://`, `http://`, or \
                         a bare host for TLS)"
                    ));
                }
            },
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if let Some(bad) = rest.chars().find(|c| matches!(c, '/' | '?' | '#' | '@')) {
            return Err(format!(
                "an entry names a host and port only, and {bad:?} starts a path, query or user \
                 name"
            ));
        }
        let (host, port) = split_host_port(rest)?;
        let port = match port {
            None => default_port,
            Some(text) => parse_port(text)?,
        };
        let host = parse_host(host)?;
        if private && matches!(host, HostPattern::Ip(_)) {
            // Harmless, but says something the writer may not mean.
            return Err(
                "`private = true` is for names; an IP literal is always allowed as written"
                    .to_owned(),
            );
        }
        Ok(EgressRule {
            kind,
            host,
            port,
            private,
            text: text.to_owned(),
        })
    }

    /// Whether this entry covers a connection of `kind` to `host` (normalised with
    /// [`normalize_host`]) and `port`.
    pub fn matches(&self, kind: EgressKind, host: &Host, port: u16) -> bool {
        if self.kind != kind || self.port != port {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Name(name), Host::Name(wanted)) => name == wanted,
            (HostPattern::Below(suffix), Host::Name(wanted)) => wanted
                .strip_suffix(suffix.as_str())
                .and_then(|front| front.strip_suffix('.'))
                .is_some_and(|front| !front.is_empty()),
            (HostPattern::Ip(ip), Host::Ip(wanted)) => ip == wanted,
            _ => false,
        }
    }
}

impl fmt::Display for EgressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)?;
        if self.private {
            f.write_str(" (private addresses allowed)")?;
        }
        Ok(())
    }
}

/// A destination host as a client named it, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name, lower case, without a trailing dot.
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Normalises a host a client sent (`CONNECT` target, absolute URL): an IP literal
/// (IPv6 in brackets or not), or a valid DNS name in lower case without a trailing dot.
pub fn normalize_host(text: &str) -> Result<Host, String> {
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(Host::Ip(ip));
    }
    match parse_host(text)? {
        HostPattern::Name(name) => Ok(Host::Name(name)),
        HostPattern::Ip(ip) => Ok(Host::Ip(ip)),
        HostPattern::Below(_) => Err("a wildcard is not a host".to_owned()),
    }
}

/// Splits `host[:port]` and `[v6][:port]`.
fn split_host_port(text: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return Err("an IPv6 address opened with `[` has no `]`".to_owned());
        };
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{inside:?} in brackets is not an IPv6 address"));
        }
        return match after {
            "" => Ok((&text[..inside.len() + 2], None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((&text[..inside.len() + 2], Some(port))),
                None => Err(format!("unexpected {after:?} after the IPv6 address")),
            },
        };
    }
    if text.matches(':').count() > 1 {
        return Err("an IPv6 address must be written in brackets, as `[::1]:443`".to_owned());
    }
    Ok(match text.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    })
}

fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("{text:?} is not a port (1 to 65535)")),
        Ok(port) => Ok(port),
    }
}

/// A host pattern: an IP literal, `*.name`, or a DNS name.
fn parse_host(text: &str) -> Result<HostPattern, String> {
    if text.is_empty() {
        return Err("it names no host".to_owned());
    }
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(HostPattern::Ip(ip));
    }
    if text == "*" {
        return Err(
            "`*` would allow every host; the unfiltered network is `network = \"host\"`".to_owned(),
        );
    }
    let lower = text.to_ascii_lowercase();
    let lower = lower.strip_suffix('.').unwrap_or(&lower);
    let (below, name) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lower),
    };
    if name.contains('*') {
        return Err("a wildcard may only be a whole first label, as in `*.example.com`".to_owned());
    }
    if name.len() > 253 {
        return Err("the name is longer than 253 characters".to_owned());
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        let valid = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !valid {
            return Err(format!("{label:?} is not a valid label of a DNS name"));
        }
    }
    if labels
        .last()
        .is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(format!(
            "{text:?} is neither an IP address nor a DNS name (its last label is a number)"
        ));
    }
    if below && labels.len() < 2 {
        return Err(format!(
            "`*.{name}` is too broad: a wildcard needs at least two labels after it"
        ));
    }
    Ok(if below {
        HostPattern::Below(name.to_owned())
    } else {
        HostPattern::Name(name.to_owned())
    })
}

/// The parsed `allow` list of `network = { allow = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EgressAllowlist {
    /// The entries, in the order written.
    pub rules: Vec<EgressRule>,
}

impl EgressAllowlist {
    /// Parses entries given as `(text, private)`; the error names the entry.
    pub fn parse<'a>(
        entries: impl IntoIterator<Item = (&'a str, bool)>,
    ) -> Result<EgressAllowlist, String> {
        let mut rules = Vec::new();
        for (text, private) in entries {
            if rules.len() == MAX_EGRESS_RULES {
                return Err(format!(
                    "more than {MAX_EGRESS_RULES} entries in `network.allow`"
                ));
            }
            let rule = EgressRule::parse(text, private)
                .map_err(|why| format!("`network.allow` entry {text:?}: {why}"))?;
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
        Ok(EgressAllowlist { rules })
    }

    /// The first entry that covers a connection of `kind` to `host` and `port`.
    pub fn find(&self, kind: EgressKind, host: &Host, port: u16) -> Option<&EgressRule> {
        self.rules
            .iter()
            .find(|rule| rule.matches(kind, host, port))
    }
}

/// Network access for a confined server: `network = "none"`, `"host"`, or
/// `{ allow = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NetworkSpec {
    /// No network at all (the default).
    #[default]
    None,
    /// The host's network, unfiltered.
    Host,
    /// Only the listed destinations, through Warden's egress proxy.
    Allow(EgressAllowlist),
}

impl NetworkSpec {
    /// `none`, `host` or `allowlist`.
    pub fn word(&self) -> &'static str {
        match self {
            NetworkSpec::None => "none",
            NetworkSpec::Host => "host",
            NetworkSpec::Allow(_) => "allowlist",
        }
    }
}

impl Serialize for NetworkSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct Entries<'a>(&'a [EgressRule]);
        impl Serialize for Entries<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
                for rule in self.0 {
                    if rule.private {
                        seq.serialize_element(&serde_json::json!({
                            "host": rule.text, "private": true
                        }))?;
                    } else {
                        seq.serialize_element(&rule.text)?;
                    }
                }
                seq.end()
            }
        }
        match self {
            NetworkSpec::None => serializer.serialize_str("none"),
            NetworkSpec::Host => serializer.serialize_str("host"),
            NetworkSpec::Allow(list) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("allow", &Entries(&list.rules))?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for NetworkSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NetworkVisitor)
    }
}

struct NetworkVisitor;

impl<'de> Visitor<'de> for NetworkVisitor {
    type Value = NetworkSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"none\", \"host\" or a table `{ allow = [...] }`")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<NetworkSpec, E> {
        match value {
            "none" => Ok(NetworkSpec::None),
            "host" => Ok(NetworkSpec::Host),
            other => Err(E::custom(format!(
                "unknown network {other:?}: expected \"none\", \"host\" or \
                 `{{ allow = [\"host\", ...] }}`"
            ))),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NetworkSpec, A::Error> {
        let mut allow: Option<Vec<EntryText>> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "allow" => {
                    if allow.is_some() {
                        return Err(de::Error::duplicate_field("allow"));
                    }
                    allow = Some(map.next_value()?);
                }
                other => return Err(de::Error::unknown_field(other, &["allow"])),
            }
        }
        let Some(entries) = allow else {
            return Err(de::Error::missing_field("allow"));
        };
        if entries.is_empty() {
            return Err(de::Error::custom(
                "`network.allow` is empty; for no network at all write `network = \"none\"`",
            ));
        }
        EgressAllowlist::parse(entries.iter().map(|e| (e.host.as_str(), e.private)))
            .map(NetworkSpec::Allow)
            .map_err(de::Error::custom)
    }
}

/// One entry as written: a string, or `{ host = "...", private = true }`.
struct EntryText {
    host: String,
    private: bool,
}

impl<'de> Deserialize<'de> for EntryText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = EntryText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a host string or a table `{ host = \"...\", private = true }`")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<EntryText, E> {
        Ok(EntryText {
            host: value.to_owned(),
            private: false,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EntryText, A::Error> {
        let mut host = None;
        let mut private = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "host" => host = Some(map.next_value::<String>()?),
                "private" => private = Some(map.next_value::<bool>()?),
                other => return Err(de::Error::unknown_field(other, &["host", "private"])),
            }
        }
        Ok(EntryText {
            host: host.ok_or_else(|| de::Error::missing_field("host"))?,
            private: private.unwrap_or(false),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<EntryText, A::Error> {
        Err(de::Error::custom(
            "an allowlist entry is a string or a table, not a list",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> EgressRule {
        EgressRule::parse(text, false).unwrap()
    }

    fn name(text: &str) -> Host {
        normalize_host(text).unwrap()
    }

    #[test]
    fn entries_parse_into_kind_host_and_port() {
        let r = rule("api.github.com");
        assert_eq!(
            (r.kind, &r.host, r.port),
            (
                EgressKind::Tls,
                &HostPattern::Name("api.github.com".into()),
                443
            )
        );
        let r = rule("*.GitHubUserContent.com:443");
        assert_eq!(r.host, HostPattern::Below("githubusercontent.com".into()));
        let r = rule("http://host.test:8080");
        assert_eq!((r.kind, r.port), (EgressKind::Http, 8080));
        assert_eq!(rule("http://host.test/").port, 80);
        assert_eq!(rule("https://host.test:8443").port, 8443);
        let r = rule("[fd00::1]:8443");
        assert_eq!(r.host, HostPattern::Ip("fd00::1".parse().unwrap()));
        assert_eq!(
            rule("169.254.169.254:80").host,
            HostPattern::Ip("169.254.169.254".parse().unwrap())
        );
        assert!(EgressRule::parse("intranet.test", true).unwrap().private);
    }

    #[test]
    fn bad_entries_are_refused_with_a_reason() {
        for (text, says) in [
            ("", "empty"),
            ("ftp://host.test", "scheme"),
            ("host.test/path", "path"),
            ("user@host.test", "user"),
            ("host.test:0", "port"),
            ("host.test:99999", "port"),
            ("host.test:https", "port"),
            ("*", "every host"),
            ("*.com", "too broad"),
            ("api.*.com", "wildcard"),
            ("a..b", "label"),
            ("-bad.test", "label"),
            ("::1", "brackets"),
            ("[zz]:1", "IPv6"),
            ("1.2.3", "number"),
            ("host test", "white space"),
        ] {
            let error = EgressRule::parse(text, false).unwrap_err();
            assert!(error.contains(says), "{text:?}: {error}");
        }
        let error = EgressRule::parse("10.0.0.1", true).unwrap_err();
        assert!(error.contains("IP literal"), "{error}");
    }

    #[test]
    fn wildcards_match_names_below_only() {
        let r = rule("*.githubusercontent.com");
        assert!(r.matches(EgressKind::Tls, &name("raw.githubusercontent.com"), 443));
        assert!(r.matches(EgressKind::Tls, &name("a.b.githubusercontent.com."), 443));
        assert!(!r.matches(EgressKind::Tls, &name("githubusercontent.com"), 443));
        assert!(!r.matches(EgressKind::Tls, &name("evilgithubusercontent.com"), 443));
        assert!(!r.matches(EgressKind::Tls, &name("raw.githubusercontent.com"), 80));
        assert!(!r.matches(EgressKind::Http, &name("raw.githubusercontent.com"), 443));
        let exact = rule("api.github.com");
        assert!(exact.matches(EgressKind::Tls, &name("API.GitHub.com"), 443));
        assert!(!exact.matches(EgressKind::Tls, &name("x.api.github.com"), 443));
        // A name never matches an IP entry, nor an IP a name entry.
        let ip = rule("10.0.0.1:443");
        assert!(ip.matches(EgressKind::Tls, &name("10.0.0.1"), 443));
        assert!(!exact.matches(EgressKind::Tls, &name("140.82.112.5"), 443));
    }

    #[test]
    fn the_network_setting_parses_from_toml() {
        #[derive(Deserialize)]
        struct T {
            network: NetworkSpec,
        }
        let parse = |text: &str| toml::from_str::<T>(text).map(|t| t.network);
        assert_eq!(parse("network = \"none\"").unwrap(), NetworkSpec::None);
        assert_eq!(parse("network = \"host\"").unwrap(), NetworkSpec::Host);
        let NetworkSpec::Allow(list) = parse(
            r#"network = { allow = ["api.github.com", { host = "http://lan.test:8080", private = true }] }"#,
        )
        .unwrap() else {
            panic!("not an allowlist");
        };
        assert_eq!(list.rules.len(), 2);
        assert!(list.rules[1].private);
        let error = parse(r#"network = { allow = ["api.github.com", "ftp://x.test"] }"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"ftp://x.test\""), "{error}");
        let error = parse(r#"network = { allow = [] }"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("empty"), "{error}");
        let error = parse(r#"network = "lan""#).unwrap_err().to_string();
        assert!(error.contains("\"lan\""), "{error}");
        let error = parse(r#"network = { allowed = ["x.test"] }"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("allowed"), "{error}");
        // Round trip through the serialised form.
        let spec =
            parse(r#"network = { allow = ["a.test", { host = "b.test", private = true }] }"#)
                .unwrap();
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"allow": ["a.test", {"host": "b.test", "private": true}]})
        );
    }
}
