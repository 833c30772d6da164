//! Text to the token ids of a BERT-style WordPiece vocabulary (`vocab.txt`, one token a
//! line, continuation pieces prefixed `##`), for the static embedding model.
//!
//! The steps follow the uncased BERT tokenizer closely enough for a bag of token vectors:
//! identifiers are first split where a search would split them (`readFile` → `read File`,
//! `_` and `-` are separators), the text is lowercased, cut at whitespace and punctuation
//! (every punctuation character is its own token, CJK ideographs too), and each word is
//! matched greedily, longest prefix first, against the vocabulary. A word that cannot be
//! matched whole (or is longer than [`MAX_WORD_CHARS`]) yields nothing. Accents are not
//! stripped (no Unicode normalisation table is carried); an accented word that the
//! vocabulary only knows unaccented is matched piecewise or not at all.

use std::collections::HashMap;

/// Words longer than this many characters are not matched (BERT's own limit is 100).
pub const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary: token text to id.
#[derive(Debug)]
pub(crate) struct Vocab {
    ids: HashMap<String, u32>,
    tokens: Vec<String>,
    /// Ids that are never embedded: `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`, `[unusedN]`.
    special: Vec<bool>,
}

impl Vocab {
    /// Reads `vocab.txt`'s text: line n (from 0) is the token with id n.
    pub(crate) fn parse(text: &str) -> Vocab {
        let mut ids = HashMap::new();
        let mut special = Vec::new();
        let mut tokens = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let token = line.trim_end_matches('\r');
            tokens.push(token.to_owned());
            let id = u32::try_from(n).unwrap_or(u32::MAX);
            special.push(token.starts_with('[') && token.ends_with(']'));
            ids.entry(token.to_owned()).or_insert(id);
        }
        Vocab {
            ids,
            tokens,
            special,
        }
    }

    /// The id of `token`, if the vocabulary has it.
    pub(crate) fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// The text of token `id` (empty when out of range).
    pub(crate) fn token(&self, id: u32) -> &str {
        self.tokens.get(id as usize).map_or("", String::as_str)
    }

    /// Per id: whether the token is special (never embedded).
    pub(crate) fn special(&self) -> &[bool] {
        &self.special
    }

    /// The number of tokens.
    pub(crate) fn len(&self) -> usize {
        self.special.len()
    }

    /// Calls `emit` with the id of every token of `text` that is neither special nor
    /// unknown, in order; stops when `emit` returns false. `skip_word` is asked about each
    /// lowercased word before it is matched (stopwords).
    pub(crate) fn for_each_id(
        &self,
        text: &str,
        skip_word: &dyn Fn(&str) -> bool,
        emit: &mut dyn FnMut(u32) -> bool,
    ) {
        let mut word = String::new();
        let mut prev: Option<char> = None;
        let flush = |word: &mut String, emit: &mut dyn FnMut(u32) -> bool| -> bool {
            let keep = !word.is_empty() && !skip_word(word);
            let going = !keep || self.match_word(word, emit);
            word.clear();
            going
        };
        for c in text.chars() {
            let separator = c.is_whitespace() || c == '_' || c == '-' || c.is_control();
            let camel =
                prev.is_some_and(|p| p.is_lowercase() || p.is_numeric()) && c.is_uppercase();
            if (separator || camel) && !flush(&mut word, emit) {
                return;
            }
            if !separator {
                if is_punctuation(c) || is_cjk(c) {
                    if !flush(&mut word, emit) {
                        return;
                    }
                    word.push(c);
                    if !flush(&mut word, emit) {
                        return;
                    }
                } else {
                    word.extend(c.to_lowercase());
                }
            }
            prev = Some(c);
        }
        flush(&mut word, emit);
    }

    /// Greedy longest-match WordPiece over one lowercased word. Returns false when `emit`
    /// asked to stop.
    fn match_word(&self, word: &str, emit: &mut dyn FnMut(u32) -> bool) -> bool {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > MAX_WORD_CHARS {
            return true;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut piece = String::new();
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while end > start {
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |(i, _)| *i);
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[from..to]);
                if let Some(&id) = self.ids.get(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => pieces.push(id),
                // One unmatched piece makes the whole word unknown, as in BERT.
                None => return true,
            }
            start = end;
        }
        for id in pieces {
            if self.special.get(id as usize).copied().unwrap_or(true) {
                continue;
            }
            if !emit(id) {
                return false;
            }
        }
        true
    }
}

/// BERT's punctuation: ASCII symbols and Unicode punctuation.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || (!c.is_alphanumeric() && !c.is_whitespace() && !c.is_control())
}

/// CJK ideographs, which BERT tokenizes one character at a time.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocab {
        Vocab::parse("[PAD]\n[UNK]\n[CLS]\nread\nfile\n##s\nget\ncurrent\ntime\n,\nweather\n中\n")
    }

    fn ids(text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        vocab().for_each_id(text, &|w| w == "the", &mut |id| {
            out.push(id);
            true
        });
        out
    }

    #[test]
    fn words_identifiers_and_pieces() {
        assert_eq!(ids("Read the files"), [3, 4, 5]);
        assert_eq!(ids("getCurrentTime"), [6, 7, 8]);
        assert_eq!(ids("get_current-time"), [6, 7, 8]);
        assert_eq!(ids("weather,time"), [10, 9, 8]);
        assert_eq!(ids("中文"), [11]);
    }

    #[test]
    fn unknown_and_special_words_yield_nothing() {
        assert!(ids("zebra").is_empty());
        assert!(ids("[CLS] [UNK]").is_empty());
        assert!(ids(&"a".repeat(MAX_WORD_CHARS + 1)).is_empty());
    }

    #[test]
    fn emit_can_stop_early() {
        let mut out = Vec::new();
        vocab().for_each_id("read file time", &|_| false, &mut |id| {
            out.push(id);
            out.len() < 2
        });
        assert_eq!(out, [3, 4]);
    }
}
