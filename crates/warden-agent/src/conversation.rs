//! The conversation, in Warden's own provider-neutral form: each provider translates it to
//! its wire format on every request.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person (and tool results, which providers carry in user turns).
    User,
    /// The model.
    Assistant,
}

/// One message: a role and its blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it holds, in order.
    pub blocks: Vec<Block>,
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call the model made.
    ToolUse {
        /// The provider's call id.
        id: String,
        /// The tool's name as the model wrote it.
        name: String,
        /// The arguments (a string when the model wrote something that is not JSON).
        arguments: Value,
    },
    /// The result of a tool call, sent back to the model.
    ToolResult {
        /// The id of the call it answers.
        id: String,
        /// The result as text.
        content: String,
        /// Whether it reports an error.
        is_error: bool,
    },
}

impl Message {
    /// A user message of plain text.
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            blocks: vec![Block::Text { text: text.into() }],
        }
    }

    /// The estimated size of this message in tokens (see [`estimate_tokens`]).
    pub fn estimated_tokens(&self) -> usize {
        self.blocks
            .iter()
            .map(|block| match block {
                Block::Text { text } => estimate_tokens(text),
                Block::ToolUse {
                    name, arguments, ..
                } => estimate_tokens(name) + estimate_tokens(&arguments.to_string()) + 8,
                Block::ToolResult { content, .. } => estimate_tokens(content) + 8,
            })
            .sum::<usize>()
            + 4
    }

    /// True when this is a user message made only of tool results.
    pub fn is_tool_results(&self) -> bool {
        self.role == Role::User
            && !self.blocks.is_empty()
            && self
                .blocks
                .iter()
                .all(|block| matches!(block, Block::ToolResult { .. }))
    }
}

/// Estimates the tokens of `text` without a tokenizer: one token per 4 bytes of ASCII, one
/// per character beyond it (non-Latin scripts tokenise densely). Used only for budgets, so
/// it errs on the high side.
pub fn estimate_tokens(text: &str) -> usize {
    let ascii = text.bytes().filter(u8::is_ascii).count();
    let other = text.chars().filter(|c| !c.is_ascii()).count();
    ascii.div_ceil(4) + other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_estimates_err_high_for_dense_scripts() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("日本語"), 3);
        assert_eq!(estimate_tokens(&"x".repeat(40_000)), 10_000);
    }
}
