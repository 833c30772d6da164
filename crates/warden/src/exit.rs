//! Exit codes, and the error type that carries one to `main`.

use std::process::ExitCode;

use crate::untrusted::{Shape, inert};

/// Warden's exit codes. Documented in the README and in `warden --help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Success.
    Ok = 0,
    /// The tool ran and reported an error (`isError`).
    ToolError = 1,
    /// Bad usage, configuration, or arguments (nothing was sent).
    Usage = 2,
    /// A server could not be reached, failed, or timed out.
    Unavailable = 3,
    /// The policy denied the call, or it needed approval that was not given (nothing was
    /// sent).
    Denied = 4,
    /// `warden run` ended without a final answer (the turn limit or the turn timeout).
    NoAnswer = 5,
    /// Interrupted (Ctrl-C or SIGTERM).
    Interrupted = 130,
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> Self {
        ExitCode::from(code as u8)
    }
}

/// A command that failed: a message for the user and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// What to exit with.
    pub code: Code,
    /// The error, with its causes.
    pub error: anyhow::Error,
}

impl Failure {
    /// A usage or configuration error.
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: Code::Usage,
            error: error.into(),
        }
    }

    /// Prints the error on stderr and returns the exit code. The message may quote a
    /// server (its JSON-RPC error, the last lines of its stderr) or a model provider: it is
    /// made inert first.
    pub fn report(self) -> ExitCode {
        let message = format!("{:#}", self.error);
        eprintln!("warden: {}", inert(&message, Shape::Block));
        self.code.into()
    }
}
