//! The context budget: how big a tool result may be when it reaches the model, and what is
//! cleared when the conversation nears the model's window.

use std::path::{Path, PathBuf};

use crate::conversation::{Block, Message, estimate_tokens};

/// The limits, all configurable (`[agent]` and `[model]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// A result over this many (estimated) tokens is flagged.
    pub warn_tokens: usize,
    /// A result over this many tokens is cut, with a note saying so.
    pub cap_tokens: usize,
    /// A result over this many characters is written to a file; the model gets the path
    /// and a head.
    pub offload_chars: usize,
    /// Characters of an offloaded result given to the model.
    pub head_chars: usize,
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// Tokens kept free for the reply.
    pub reply_tokens: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            warn_tokens: 10_000,
            cap_tokens: 25_000,
            offload_chars: 50_000,
            head_chars: 2_000,
            context_window: 200_000,
            reply_tokens: 4_096,
        }
    }
}

/// A result as it goes to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaped {
    /// The text the model gets.
    pub text: String,
    /// Characters before shaping.
    pub chars: usize,
    /// Estimated tokens before shaping.
    pub tokens: usize,
    /// Over the warning size.
    pub flagged: bool,
    /// Cut to the cap.
    pub truncated: bool,
    /// Written to this file.
    pub offloaded_to: Option<PathBuf>,
}

impl Budget {
    /// Shapes `text`, the result of `call_id`, writing it under `folder` when it is too
    /// long to give whole. If the file cannot be written the result is cut instead.
    pub fn shape(&self, text: String, folder: &Path, call_id: &str) -> Shaped {
        let chars = text.chars().count();
        let tokens = estimate_tokens(&text);
        let flagged = tokens > self.warn_tokens;
        if chars > self.offload_chars {
            let name: String = call_id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(80)
                .collect();
            let path = folder.join(format!("result-{name}.txt"));
            if write_new(&path, &text).is_ok() {
                let head = head(&text, self.head_chars);
                return Shaped {
                    text: format!(
                        "[This result is {chars} characters (~{tokens} tokens), too long to \
                         include. The whole result was saved to {}. Its first {} characters:]\n{head}",
                        path.display(),
                        head.chars().count()
                    ),
                    chars,
                    tokens,
                    flagged,
                    truncated: false,
                    offloaded_to: Some(path),
                };
            }
        }
        if tokens > self.cap_tokens {
            let kept = cut_to_tokens(&text, self.cap_tokens);
            let note = format!(
                "\n[Result cut: it was ~{tokens} tokens, over the {}-token cap; the rest was dropped.]",
                self.cap_tokens
            );
            return Shaped {
                text: format!("{kept}{note}"),
                chars,
                tokens,
                flagged,
                truncated: true,
                offloaded_to: None,
            };
        }
        Shaped {
            text,
            chars,
            tokens,
            flagged,
            truncated: false,
            offloaded_to: None,
        }
    }

    /// Tokens the conversation may use: the window less the reply and what the system
    /// prompt and tool definitions take.
    pub fn room(&self, fixed_tokens: usize) -> usize {
        self.context_window
            .saturating_sub(self.reply_tokens)
            .saturating_sub(fixed_tokens)
    }
}

/// Writes `text` to a new file (never over an existing one), owner-only.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// The first `chars` characters of `text`.
fn head(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

/// The longest prefix of `text` whose estimate is at most `tokens`.
fn cut_to_tokens(text: &str, tokens: usize) -> &str {
    // The estimate only grows along the text, so the prefix can be found in one pass.
    let (mut ascii, mut other) = (0usize, 0usize);
    for (index, c) in text.char_indices() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
        if ascii.div_ceil(4) + other > tokens {
            return &text[..index];
        }
    }
    text
}

/// What [`fit`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Tool results replaced by a stub.
    pub cleared_results: usize,
    /// Messages dropped from the start.
    pub dropped_messages: usize,
    /// True when the conversation still does not fit.
    pub still_over: bool,
}

/// Brings `messages` within `room` tokens: first the oldest tool results are replaced by a
/// stub, then the oldest exchanges are dropped. Nothing at or after `protected_from` (the
/// current turn: what the user just wrote and what followed) is touched.
pub fn fit(messages: &mut Vec<Message>, room: usize, protected_from: usize) -> Trimmed {
    let mut trimmed = Trimmed::default();
    let total = |messages: &[Message]| {
        messages
            .iter()
            .map(Message::estimated_tokens)
            .sum::<usize>()
    };
    if total(messages) <= room {
        return trimmed;
    }
    let mut current = total(messages);
    for message in messages.iter_mut().take(protected_from) {
        if current <= room {
            break;
        }
        let before = message.estimated_tokens();
        for block in &mut message.blocks {
            if let Block::ToolResult { content, .. } = block
                && !content.starts_with(STUB_PREFIX)
            {
                *content = format!("{STUB_PREFIX} {} characters]", content.chars().count());
                trimmed.cleared_results += 1;
            }
        }
        current = current - before + message.estimated_tokens();
    }
    let mut protected_from = protected_from;
    while total(messages) > room {
        // Drop whole exchanges: from the start up to the next user message that is not
        // tool results, so every tool call keeps its result.
        // The current turn's own first message is a boundary too: everything before it
        // may go.
        let last = protected_from.min(messages.len().saturating_sub(1));
        let Some(next) = (1..=last).find(|&i| {
            messages[i].role == crate::conversation::Role::User && !messages[i].is_tool_results()
        }) else {
            break;
        };
        messages.drain(..next);
        trimmed.dropped_messages += next;
        protected_from -= next;
    }
    trimmed.still_over = total(messages) > room;
    trimmed
}

/// The stub a cleared tool result becomes.
pub const STUB_PREFIX: &str = "[Tool result cleared to save context; it was";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Role;

    fn folder() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn small_results_pass_unchanged() {
        let dir = folder();
        let shaped = Budget::default().shape("hello".into(), dir.path(), "c1");
        assert_eq!(shaped.text, "hello");
        assert!(!shaped.flagged && !shaped.truncated && shaped.offloaded_to.is_none());
    }

    #[test]
    fn a_long_result_is_offloaded_with_its_head() {
        let dir = folder();
        let text = "line of text\n".repeat(5_000);
        let shaped = Budget::default().shape(text.clone(), dir.path(), "toolu/../x");
        let path = shaped.offloaded_to.clone().unwrap();
        assert!(path.starts_with(dir.path()), "{path:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(shaped.text.contains(&path.display().to_string()));
        assert!(shaped.text.chars().count() < 2_400, "{}", shaped.text.len());
        assert!(shaped.flagged, "65,000 characters is over 10,000 tokens");
    }

    #[test]
    fn a_dense_result_over_the_cap_is_cut_with_a_note() {
        let dir = folder();
        // 30,000 non-ASCII characters: under the offload size, over the token cap.
        let text = "語".repeat(30_000);
        let shaped = Budget::default().shape(text, dir.path(), "c");
        assert!(shaped.truncated && shaped.flagged);
        assert!(
            shaped.text.ends_with("the rest was dropped.]"),
            "{}",
            &shaped.text[shaped.text.len() - 80..]
        );
        assert!(estimate_tokens(&shaped.text) < 25_100);
    }

    #[test]
    fn a_result_between_warning_and_cap_is_flagged_only() {
        let dir = folder();
        let text = "語".repeat(12_000);
        let shaped = Budget::default().shape(text.clone(), dir.path(), "c");
        assert!(shaped.flagged && !shaped.truncated);
        assert_eq!(shaped.text, text);
    }

    fn result(id: &str, size: usize) -> Message {
        Message {
            role: Role::User,
            blocks: vec![Block::ToolResult {
                id: id.into(),
                content: "x".repeat(size),
                is_error: false,
            }],
        }
    }

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            blocks: vec![Block::ToolUse {
                id: id.into(),
                name: "t".into(),
                arguments: serde_json::json!({}),
            }],
        }
    }

    #[test]
    fn old_results_are_cleared_before_turns_are_dropped_and_the_current_turn_is_kept() {
        let mut messages = vec![
            Message::user("first question"),
            call("a"),
            result("a", 40_000),
            Message::user("second question"),
            call("b"),
            result("b", 40_000),
        ];
        let trimmed = fit(&mut messages, 12_000, 3);
        assert_eq!(trimmed.cleared_results, 1);
        assert_eq!(trimmed.dropped_messages, 0);
        assert!(
            matches!(&messages[2].blocks[0], Block::ToolResult { content, .. } if content.starts_with(STUB_PREFIX))
        );
        assert!(
            matches!(&messages[5].blocks[0], Block::ToolResult { content, .. } if content.len() == 40_000)
        );

        // Still too big: old exchanges go, whole, and the current turn stays.
        let trimmed = fit(&mut messages, 10_050, 3);
        assert_eq!(trimmed.dropped_messages, 3);
        assert_eq!(messages[0], Message::user("second question"));
        assert!(!trimmed.still_over);

        // Nothing left to drop: reported, never the user's current words.
        let trimmed = fit(&mut messages, 100, 0);
        assert!(trimmed.still_over);
        assert_eq!(messages.len(), 3);
    }
}
