//! The steps of a request: the parts of one sentence that each ask for something.
//!
//! People ask for several things at once: "get Apple's stock for the past year and
//! summarise it in a PPT", "find the trending repositories. For the top one, read its
//! wiki". Ranked as one text, such a request is one bag of words (one averaged vector with
//! the model), and the tools of the step with the rarest words crowd out the others. The
//! search therefore also ranks each step on its own ([`crate::SearchIndex`] fuses them).
//!
//! A request is cut:
//!
//! 1. at the ends of sentences (`.`, `?`, `!` followed by a space or the end; `;`; a line
//!    break; `。`, `？`, `！`, `；`), so `report.pdf`, `www.example.com` and `3.5` stay
//!    whole;
//! 2. within a sentence, at commas (`,`, `，`, `、`) and before the words `and`, `then`,
//!    `also`, `plus`.
//!
//! A piece with fewer than [`STEP_MIN_TERMS`] index terms (after stopwords: "and then
//! save it" has one) is too small to rank on its own and is joined to the piece before it
//! (the first piece to the one after it). At most [`STEP_CAP`] steps are kept: the pieces
//! past that are joined to the last one, so a long request costs a bounded number of
//! rankings. A request that gives only one step is not split.

use crate::tokenize::for_each_term;

/// The fewest index terms a step has; smaller pieces are joined to a neighbour.
pub const STEP_MIN_TERMS: usize = 2;

/// The most steps one request is cut into.
pub const STEP_CAP: usize = 6;

/// Words before which a sentence is cut: they join what the request asks for.
const JOINERS: &[&str] = &["and", "then", "also", "plus"];

/// The steps of `request`, in order, each a slice of it; empty when the request is one
/// step (or none).
pub fn steps(request: &str) -> Vec<&str> {
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    for (start, end) in sentences(request) {
        clauses(request, start, end, &mut pieces);
    }
    // Join pieces that are too small to rank alone to the one before (or after).
    let mut merged: Vec<((usize, usize), usize)> = Vec::new();
    let mut pending: Option<(usize, usize)> = None;
    for (start, end) in pieces {
        let start = pending.take().map_or(start, |(s, _)| s);
        let terms = term_count(&request[start..end]);
        if terms >= STEP_MIN_TERMS {
            merged.push(((start, end), terms));
        } else if let Some(((_, last_end), last_terms)) = merged.last_mut() {
            *last_end = end;
            *last_terms += terms;
        } else {
            pending = Some((start, end));
        }
    }
    if let (Some((_, end)), Some(((_, last_end), _))) = (pending, merged.last_mut()) {
        *last_end = (*last_end).max(end);
    }
    if merged.len() > STEP_CAP {
        let end = merged[merged.len() - 1].0.1;
        merged.truncate(STEP_CAP);
        merged[STEP_CAP - 1].0.1 = end;
    }
    if merged.len() < 2 {
        return Vec::new();
    }
    merged
        .into_iter()
        .map(|((start, end), _)| request[start..end].trim())
        .collect()
}

/// Byte ranges of the sentences of `text`.
fn sentences(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let end = match c {
            ';' | '\n' | '\r' | '。' | '？' | '！' | '；' => true,
            '.' | '?' | '!' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if end {
            push_range(text, &mut out, start, i);
            start = i + c.len_utf8();
        }
    }
    push_range(text, &mut out, start, text.len());
    out
}

/// Cuts the sentence `text[start..end]` at commas and before joining words, adding the
/// pieces to `out`.
fn clauses(text: &str, start: usize, end: usize, out: &mut Vec<(usize, usize)>) {
    let sentence = &text[start..end];
    let mut piece = start;
    let mut word_start: Option<usize> = None;
    for (i, c) in sentence.char_indices().chain([(sentence.len(), ' ')]) {
        let at = start + i;
        if c.is_alphanumeric() || c == '_' || c == '-' || c == '\'' || c == '’' {
            word_start.get_or_insert(at);
            continue;
        }
        if let Some(word) = word_start.take() {
            let lower = text[word..at].to_lowercase();
            if JOINERS.contains(&lower.as_str()) {
                push_range(text, out, piece, word);
                piece = word;
            }
        }
        if matches!(c, ',' | '，' | '、') {
            push_range(text, out, piece, at);
            piece = at + c.len_utf8();
        }
    }
    push_range(text, out, piece, end);
}

/// Adds `start..end` to `out` unless it is blank.
fn push_range(text: &str, out: &mut Vec<(usize, usize)>, start: usize, end: usize) {
    if end > start && !text[start..end].trim().is_empty() {
        out.push((start, end));
    }
}

/// The number of index terms of `text` (stopwords left out), counting at most
/// [`STEP_MIN_TERMS`].
fn term_count(text: &str) -> usize {
    let mut n = 0;
    for_each_term(text, &mut |_| {
        n += 1;
        n < STEP_MIN_TERMS
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_step_request_gives_two_steps() {
        assert_eq!(
            steps("Analyze Apple's stock for the past year and summarize it in a PPT"),
            [
                "Analyze Apple's stock for the past year",
                "and summarize it in a PPT"
            ]
        );
    }

    #[test]
    fn sentences_and_commas_cut_but_dots_inside_words_do_not() {
        assert_eq!(
            steps("Read /root/pdf/report.pdf, find similar papers. Save them to www.example.com"),
            [
                "Read /root/pdf/report.pdf",
                "find similar papers",
                "Save them to www.example.com"
            ]
        );
    }

    #[test]
    fn short_pieces_join_a_neighbour_and_a_short_request_stays_whole() {
        assert!(steps("read a file").is_empty());
        assert!(steps("search flights and hotels").is_empty());
        // "and then save it" has one term: it stays with the step before.
        assert!(steps("Fetch the weather forecast for Paris, and then save it").is_empty());
        assert_eq!(
            steps("Hi. Fetch the weather forecast for Paris. Then draw a bar chart"),
            [
                "Hi. Fetch the weather forecast for Paris",
                "Then draw a bar chart"
            ]
        );
    }

    #[test]
    fn the_number_of_steps_is_capped() {
        let request = (0..20)
            .map(|i| format!("open window{i} quickly"))
            .collect::<Vec<_>>()
            .join(", ");
        let found = steps(&request);
        assert_eq!(found.len(), STEP_CAP);
        assert!(found[STEP_CAP - 1].ends_with("window19 quickly"));
    }
}
