//! Words to index terms: split, lowercase, drop stopwords, stem.
//!
//! See [`tokenize`] for the steps.

/// Terms longer than this many characters are dropped.
pub const MAX_TERM_CHARS: usize = 64;

/// English function words that carry no meaning for tool selection. Kept short on purpose:
/// a word like `all`, `not` or `new` can separate two tools, and IDF already discounts
/// words that every tool uses.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do",
    "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its",
    "me", "my", "of", "on", "or", "our", "please", "should", "so", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "to", "us", "was", "we", "were",
    "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// Whether a lowercased word is in the stopword list.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// The terms of `text`, in order, with repeats.
///
/// The same function turns tool definitions and queries into terms, so whatever it does to
/// one it does to the other. Steps:
///
/// 1. **Groups.** The text is cut into groups: maximal runs of alphanumeric characters,
///    `_` and `-` (Unicode-aware: `char::is_alphanumeric`). Everything else separates,
///    except apostrophes (`'`, `’`), which are skipped so `user's` reads as `users`.
/// 2. **Parts.** A group is split into parts at `_` and `-`, at a lower-to-upper case change
///    (`readFile`), before the last capital of a capital run followed by a lowercase letter
///    (`HTTPServer` → `HTTP`, `Server`), and between letters and digits (`side1`). Parts are
///    lowercased (`char::to_lowercase`).
/// 3. **Stopwords.** Parts in a short list of English function words ([`is_stopword`]) are
///    dropped.
/// 4. **Stemming.** Each remaining part goes through [`stem`], a few suffix rules.
/// 5. **Compound.** A group of two parts or more also yields its parts joined (stopwords
///    included, unless the whole is one) and stemmed, so `read_file`, `readFile` and `ReadFile` all give the term
///    `readfil` as well as `read` and `fil`, and a query that spells an identifier matches
///    it whole.
///
/// Terms longer than [`MAX_TERM_CHARS`] characters are dropped: they are hashes, encoded
/// blobs or padding, not words anyone searches for.
///
/// ```
/// use warden_search::tokenize;
/// assert_eq!(tokenize("getCurrentTime"), ["get", "current", "tim", "getcurrenttim"]);
/// assert_eq!(tokenize("List the files"), ["list", "fil"]);
/// ```
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, &mut |term| {
        out.push(term);
        true
    });
    out
}

/// Calls `emit` with every term of `text` in order; stops early when `emit` returns false.
pub(crate) fn for_each_term(text: &str, emit: &mut dyn FnMut(String) -> bool) {
    let mut group: Vec<char> = Vec::new();
    for c in text.chars() {
        if is_apostrophe(c) {
            continue;
        }
        if c.is_alphanumeric() || c == '_' || c == '-' {
            group.push(c);
        } else if !group.is_empty() {
            if !emit_group(&group, emit) {
                return;
            }
            group.clear();
        }
    }
    if !group.is_empty() {
        emit_group(&group, emit);
    }
}

fn is_apostrophe(c: char) -> bool {
    c == '\'' || c == '\u{2019}'
}

/// Splits one group into parts and emits their terms, then the compound. Returns false
/// when `emit` asked to stop.
fn emit_group(group: &[char], emit: &mut dyn FnMut(String) -> bool) -> bool {
    let parts = split_parts(group);
    for part in &parts {
        if is_stopword(part) {
            continue;
        }
        let term = stem(part);
        if term.chars().count() <= MAX_TERM_CHARS && !emit(term) {
            return false;
        }
    }
    if parts.len() >= 2 {
        let joined = parts.concat();
        if is_stopword(&joined) {
            return true;
        }
        let compound = stem(&joined);
        if compound.chars().count() <= MAX_TERM_CHARS && !emit(compound) {
            return false;
        }
    }
    true
}

/// Splits a group (alphanumerics, `_`, `-`) into lowercased parts.
fn split_parts(group: &[char]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for (i, &c) in group.iter().enumerate() {
        if c == '_' || c == '-' {
            flush(&mut current, &mut parts);
            continue;
        }
        if i > 0 && is_boundary(group[i - 1], c, group.get(i + 1).copied()) {
            flush(&mut current, &mut parts);
        }
        current.extend(c.to_lowercase());
    }
    flush(&mut current, &mut parts);
    parts
}

fn flush(current: &mut String, parts: &mut Vec<String>) {
    if !current.is_empty() {
        parts.push(std::mem::take(current));
    }
}

/// Whether a new part starts at `c`, given the character before it and the one after.
fn is_boundary(prev: char, c: char, next: Option<char>) -> bool {
    if prev == '_' || prev == '-' {
        return false;
    }
    let camel = prev.is_lowercase() && c.is_uppercase();
    let acronym_end =
        prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
    let digits = prev.is_numeric() != c.is_numeric();
    camel || acronym_end || digits
}

/// A light, deterministic English stemmer: a few suffix rules, applied to lowercase ASCII
/// words of four letters or more (anything else is returned as it is).
///
/// At most one of these applies, the first that fits:
///
/// | rule | example |
/// |---|---|
/// | `-ies` → `-y` (5+ letters) | `queries` → `query` |
/// | `-sses`, `-xes`, `-ches`, `-shes`, `-zes` → drop `es` | `boxes` → `box` |
/// | `-s` → drop, unless `-ss`, `-us`, `-is` | `files` → `file` |
/// | `-ing` → drop, when 3+ letters with a vowel remain | `listing` → `list` |
/// | `-ed` → drop, when 3+ letters with a vowel remain, not `-eed` | `created` → `creat` |
///
/// After `-ing` or `-ed`, a doubled final consonant other than `l`, `s`, `z` is undoubled
/// when 4+ letters remain (`running` → `run`, but `added` → `add`). Last, a final `e` is
/// dropped from a word of 4+ letters not ending in `ee`, so `create`, `created` and
/// `creating` meet at `creat`, and `file`, `files` at `fil`.
///
/// ```
/// use warden_search::stem;
/// assert_eq!(stem("directories"), "directory");
/// assert_eq!(stem("writing"), stem("write"));
/// assert_eq!(stem("status"), "status");
/// ```
pub fn stem(word: &str) -> String {
    if word.len() < 4 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_owned();
    }
    let mut w = word.to_owned();
    if w.len() >= 5 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if ["sses", "xes", "ches", "shes", "zes"]
        .iter()
        .any(|s| w.ends_with(s))
    {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !["ss", "us", "is"].iter().any(|s| w.ends_with(s)) {
        w.truncate(w.len() - 1);
    } else if let Some(base) = strip_verb_suffix(&w, "ing") {
        w = undouble(base);
    } else if !w.ends_with("eed")
        && let Some(base) = strip_verb_suffix(&w, "ed")
    {
        w = undouble(base);
    }
    if w.len() >= 4 && w.ends_with('e') && !w.ends_with("ee") {
        w.truncate(w.len() - 1);
    }
    w
}

/// `word` without `suffix` when at least three letters remain and one of them is a vowel.
fn strip_verb_suffix<'a>(word: &'a str, suffix: &str) -> Option<&'a str> {
    let base = word.strip_suffix(suffix)?;
    let has_vowel = base.bytes().any(|b| b"aeiouy".contains(&b));
    (base.len() >= 3 && has_vowel).then_some(base)
}

fn undouble(base: &str) -> String {
    let b = base.as_bytes();
    let n = b.len();
    if n >= 4 && b[n - 1] == b[n - 2] && !b"aeiouylsz".contains(&b[n - 1]) {
        base[..n - 1].to_owned()
    } else {
        base.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_and_pascal_case_split_and_keep_the_compound() {
        assert_eq!(tokenize("readFile"), ["read", "fil", "readfil"]);
        assert_eq!(tokenize("ReadFile"), ["read", "fil", "readfil"]);
        assert_eq!(
            tokenize("HTTPServerList"),
            ["http", "server", "list", "httpserverlist"]
        );
    }

    #[test]
    fn snake_kebab_and_digit_boundaries() {
        assert_eq!(
            tokenize("list_directory"),
            ["list", "directory", "listdirectory"]
        );
        assert_eq!(tokenize("fetch-url"), ["fetch", "url", "fetchurl"]);
        assert_eq!(tokenize("side1"), ["sid", "1", "side1"]);
        assert_eq!(tokenize("v2Api"), ["v", "2", "api", "v2api"]);
        assert_eq!(tokenize("__x__"), ["x"]);
        assert!(tokenize("__a__").is_empty());
    }

    #[test]
    fn punctuation_separates_and_apostrophes_are_skipped() {
        assert_eq!(tokenize("git.status, (now)!"), ["git", "status", "now"]);
        assert_eq!(tokenize("user's files"), ["user", "fil"]);
        assert_eq!(
            tokenize("math_toolkit.sum_of_multiples"),
            [
                "math",
                "toolkit",
                "mathtoolkit",
                "sum",
                "multipl",
                "sumofmultipl"
            ]
        );
    }

    #[test]
    fn stopwords_are_dropped_but_kept_inside_compounds() {
        assert_eq!(tokenize("What is the time in Paris?"), ["tim", "paris"]);
        assert!(tokenize("the of and to").is_empty());
        assert_eq!(tokenize("get_the_time"), ["get", "tim", "getthetim"]);
        assert!(tokenize("IN_TO").is_empty());
    }

    #[test]
    fn unicode_is_lowercased_and_split_safely() {
        assert_eq!(tokenize("Größe ÄNDERN"), ["größe", "ändern"]);
        assert_eq!(tokenize("naïveCafé"), ["naïve", "café", "naïvecafé"]);
        assert_eq!(tokenize("東京の天気"), ["東京の天気"]);
        assert_eq!(tokenize("ΣΊΣΥΦΟΣ"), ["σίσυφοσ"]);
        assert_eq!(tokenize("emoji 🚀 rocket"), ["emoji", "rocket"]);
        // Digits of other scripts count as digits.
        assert_eq!(tokenize("page٣"), ["pag", "٣", "page٣"]);
    }

    #[test]
    fn overlong_terms_are_dropped() {
        let blob = "x".repeat(MAX_TERM_CHARS + 1);
        assert_eq!(tokenize(&format!("keep {blob} also")), ["keep", "also"]);
    }

    #[test]
    fn stemmer_rules() {
        let cases = [
            ("queries", "query"),
            ("directories", "directory"),
            ("addresses", "address"),
            ("boxes", "box"),
            ("matches", "match"),
            ("files", "fil"),
            ("file", "fil"),
            ("tools", "tool"),
            ("status", "status"),
            ("analysis", "analysis"),
            ("access", "access"),
            ("listing", "list"),
            ("running", "run"),
            ("string", "string"),
            ("created", "creat"),
            ("creating", "creat"),
            ("create", "creat"),
            ("added", "add"),
            ("adding", "add"),
            ("called", "call"),
            ("stopped", "stop"),
            ("need", "need"),
            ("speed", "speed"),
            ("employee", "employee"),
            ("use", "use"),
            ("git", "git"),
            ("url", "url"),
            ("größe", "größe"),
        ];
        for (word, want) in cases {
            assert_eq!(stem(word), want, "stem({word})");
        }
        assert_eq!(stem("writing"), stem("write"));
        assert_eq!(stem("values"), stem("value"));
    }

    #[test]
    fn emit_can_stop_early() {
        let mut seen = Vec::new();
        for_each_term("one two three four", &mut |t| {
            seen.push(t);
            seen.len() < 2
        });
        assert_eq!(seen, ["one", "two"]);
    }
}
