//! Globs over qualified tool names, and an index that finds the rules whose globs can match
//! a name without trying every rule.

/// The longest qualified name Warden produces (see decision 0004).
const MAX_QUALIFIED_LEN: usize = 64;

/// A compiled glob: `*` matches any run of characters (also none), `?` exactly one; every
/// other character matches itself, case-sensitively.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    pattern: Box<[u8]>,
    /// How many leading bytes are literal (before the first wildcard).
    prefix: usize,
    /// Every literal byte of the pattern: a name lacking one of them cannot match.
    needs: ByteSet,
}

/// A set of bytes, for a quick test that a name has every byte a glob needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    pub(crate) fn of(bytes: &[u8]) -> ByteSet {
        let mut set = [0u64; 4];
        for &b in bytes {
            set[usize::from(b >> 6)] |= 1 << (b & 63);
        }
        ByteSet(set)
    }

    fn contains_all(self, other: ByteSet) -> bool {
        self.0
            .iter()
            .zip(other.0)
            .all(|(have, need)| have & need == need)
    }
}

impl Glob {
    /// Compiles a glob; the error says why it could never match a qualified name.
    pub(crate) fn new(pattern: &str) -> Result<Glob, String> {
        if pattern.is_empty() {
            return Err("a tool glob is empty".to_owned());
        }
        if let Some(c) = pattern
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '?')))
        {
            return Err(format!(
                "tool glob {pattern:?} holds {c:?}, which no qualified name has (they are \
                 `server__tool`, of A-Z a-z 0-9 _ - only; wildcards are * and ?)"
            ));
        }
        let fixed = pattern.bytes().filter(|b| *b != b'*').count();
        if fixed > MAX_QUALIFIED_LEN {
            return Err(format!(
                "tool glob {pattern:?} needs more than {MAX_QUALIFIED_LEN} characters, the \
                 longest a qualified name can be"
            ));
        }
        let prefix = pattern.find(['*', '?']).unwrap_or(pattern.len());
        let literal: Vec<u8> = pattern
            .bytes()
            .filter(|b| !matches!(b, b'*' | b'?'))
            .collect();
        Ok(Glob {
            pattern: pattern.as_bytes().into(),
            prefix,
            needs: ByteSet::of(&literal),
        })
    }

    pub(crate) fn literal_prefix(&self) -> &[u8] {
        &self.pattern[..self.prefix]
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.pattern).unwrap_or("")
    }

    #[cfg(test)]
    pub(crate) fn matches(&self, name: &[u8]) -> bool {
        self.matches_with(name, ByteSet::of(name))
    }

    /// [`matches`](Glob::matches) with the name's byte set computed by the caller, which
    /// tests many globs against one name.
    pub(crate) fn matches_with(&self, name: &[u8], name_bytes: ByteSet) -> bool {
        if self.prefix == self.pattern.len() {
            return *name == *self.pattern;
        }
        if !name_bytes.contains_all(self.needs) {
            return false;
        }
        let (prefix, rest) = self.pattern.split_at(self.prefix);
        match name.strip_prefix(prefix) {
            Some(tail) => wildcard(rest, tail),
            None => false,
        }
    }
}

/// Matches `text` against `pattern` (with `*` and `?`) in `O(len(pattern) * len(text))`
/// at worst: on a mismatch only the most recent `*` is retried, one character further on.
fn wildcard(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut retry: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                retry = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match retry {
                Some((star, from)) => {
                    p = star + 1;
                    t = from + 1;
                    retry = Some((star, from + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// A byte trie over the literal prefixes of every rule's globs. Each node lists, sorted by
/// rule index, the rules with a glob whose literal prefix is the path to that node or to
/// one of its ancestors; so walking a name down the trie as far as it goes gives every rule
/// that could match it, and no rule whose prefix the name does not start with.
#[derive(Debug, Clone)]
pub(crate) struct RuleIndex {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, Default)]
struct Node {
    children: Vec<(u8, u32)>,
    rules: Box<[u32]>,
}

impl RuleIndex {
    /// Builds the index from each rule's globs.
    pub(crate) fn build<'g>(rules: impl Iterator<Item = (u32, &'g [Glob])>) -> RuleIndex {
        let mut nodes = vec![Node::default()];
        let mut parents: Vec<u32> = vec![0];
        let mut own: Vec<Vec<u32>> = vec![Vec::new()];
        for (rule, globs) in rules {
            for glob in globs {
                let mut at = 0usize;
                for &b in glob.literal_prefix() {
                    let existing = nodes[at]
                        .children
                        .iter()
                        .find(|(c, _)| *c == b)
                        .map(|(_, n)| *n as usize);
                    at = match existing {
                        Some(n) => n,
                        None => {
                            let n = nodes.len();
                            nodes.push(Node::default());
                            parents.push(at as u32);
                            own.push(Vec::new());
                            nodes[at].children.push((b, n as u32));
                            n
                        }
                    };
                }
                own[at].push(rule);
            }
        }
        // Parents are created before their children, so one pass in order suffices.
        for n in 0..nodes.len() {
            let mut rules: Vec<u32> = if n == 0 {
                Vec::new()
            } else {
                nodes[parents[n] as usize].rules.to_vec()
            };
            rules.extend_from_slice(&own[n]);
            rules.sort_unstable();
            rules.dedup();
            nodes[n].rules = rules.into_boxed_slice();
        }
        RuleIndex { nodes }
    }

    /// The rules that may match `name`, sorted by index (their globs still need checking).
    pub(crate) fn candidates(&self, name: &[u8]) -> &[u32] {
        let mut at = 0usize;
        for &b in name {
            let Some(node) = self.nodes.get(at) else {
                break;
            };
            match node.children.iter().find(|(c, _)| *c == b) {
                Some((_, next)) => at = *next as usize,
                None => break,
            }
        }
        self.nodes.get(at).map_or(&[], |n| &n.rules)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(p: &str) -> Glob {
        match Glob::new(p) {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn wildcards() {
        let cases = [
            ("github__*", "github__create_issue", true),
            ("github__*", "github__", true),
            ("github__*", "gitlab__x", false),
            ("*__delete_*", "fs__delete_file", true),
            ("*__delete_*", "fs__remove_file", false),
            ("fs__read?", "fs__reads", true),
            ("fs__read?", "fs__read", false),
            ("fs__read", "fs__read", true),
            ("fs__read", "fs__reader", false),
            ("*", "anything", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
            ("?*", "", false),
        ];
        for (p, name, want) in cases {
            assert_eq!(glob(p).matches(name.as_bytes()), want, "{p} vs {name}");
        }
    }

    #[test]
    fn impossible_globs_are_refused() {
        assert!(Glob::new("").is_err());
        assert!(Glob::new("github/create_issue").is_err());
        assert!(Glob::new("fs__read file").is_err());
        assert!(Glob::new(&"a".repeat(65)).is_err());
        assert!(Glob::new(&format!("{}*", "a".repeat(64))).is_ok());
    }

    #[test]
    fn index_returns_rules_by_prefix_in_order() {
        let globs = [
            vec![glob("github__*")],
            vec![glob("*")],
            vec![glob("github__create_issue"), glob("fs__*")],
            vec![glob("gitlab__*")],
            vec![glob("github__create_*")],
        ];
        let index = RuleIndex::build(globs.iter().enumerate().map(|(i, g)| (i as u32, &g[..])));
        assert_eq!(index.candidates(b"github__create_issue"), &[0, 1, 2, 4]);
        assert_eq!(index.candidates(b"github__list"), &[0, 1]);
        assert_eq!(index.candidates(b"fs__read"), &[1, 2]);
        assert_eq!(index.candidates(b"git"), &[1]);
        assert_eq!(index.candidates(b"zzz"), &[1]);
    }
}
