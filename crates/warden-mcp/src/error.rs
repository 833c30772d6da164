//! Errors at this crate's boundary. Each one says what failed and, where a server is
//! involved, carries what the server printed last, so the user sees why without hunting
//! through log files.

use std::path::PathBuf;
use std::time::Duration;

/// Starting a server process failed.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A bare command name was not found in any absolute `PATH` entry.
    #[error("command `{command}` was not found in PATH (searched: {searched})")]
    NotFound {
        /// The command as configured.
        command: String,
        /// The `PATH` entries searched, joined with `:`.
        searched: String,
    },
    /// A command with a `/` that is relative: Warden never resolves programs against the
    /// working directory.
    #[error(
        "command `{command}` is a relative path; use an absolute path or a bare name found in PATH"
    )]
    RelativePath {
        /// The command as configured.
        command: String,
    },
    /// The resolved program exists but is not an executable file.
    #[error("`{}` is not an executable file", program.display())]
    NotExecutable {
        /// The resolved path.
        program: PathBuf,
    },
    /// The working directory given for the server does not exist or is not a directory.
    #[error("working directory `{}` is not a directory", cwd.display())]
    BadWorkingDirectory {
        /// The configured directory.
        cwd: PathBuf,
    },
    /// The operating system refused to start the process.
    #[error("could not start `{}`: {source}", program.display())]
    Spawn {
        /// The resolved program.
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The server could not be confined: its sandbox could not be prepared or set up (a
    /// granted path is missing, the kernel lacks a feature, the scratch directory could not
    /// be made), or the confined program failed to start.
    #[error("could not start `{}` confined: {source}", program.display())]
    Confinement {
        /// The resolved program.
        program: PathBuf,
        /// What the sandbox reported.
        #[source]
        source: warden_sandbox::SandboxError,
    },
    /// Warden runs as root, so the confined server runs as uid 65534, and a path the
    /// server needs lies under a directory that uid cannot enter (the sandbox binds granted
    /// paths with the server's uid).
    #[error(
        "could not start `{}` confined: it needs {}, but {} (mode {mode:o}) is not searchable \
         by uid 65534, the uid confined servers run as when Warden runs as root; install the \
         server elsewhere, open that directory (chmod o+x), or set `confine = false`",
        program.display(), path.display(), dir.display()
    )]
    Unreachable {
        /// The resolved program.
        program: PathBuf,
        /// The granted path.
        path: PathBuf,
        /// The ancestor that cannot be entered.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A pinned file is not the file that was hashed any more when the server is about to
    /// start (replaced or written in between): nothing was run.
    #[error(
        "{} changed between the check of its hash and the start (replaced or written since \
         it was hashed); nothing was run",
        path.display()
    )]
    PinnedFileChanged {
        /// The path the server would have used.
        path: PathBuf,
    },
    /// A server from a project file would be granted, by Warden's own rules (its working
    /// directory, the package directory of a file argument), a path outside the project and
    /// outside the system directories: a repository may only confine its servers more.
    #[error(
        "could not start `{}` confined: {what} would grant {}, which is outside the project {} \
         (a project file may not make Warden grant your files); define the server in your \
         local or user file to grant it (docs/config.md, \"Project files\")",
        program.display(), path.display(), project.display()
    )]
    ProjectGrant {
        /// The resolved program.
        program: PathBuf,
        /// What asked for the grant (`argument 2 (/home/me/.aws/credentials)`).
        what: String,
        /// The path that would be granted.
        path: PathBuf,
        /// The project directory.
        project: PathBuf,
    },
    /// The launcher does not handle this kind of server.
    #[error("{0}")]
    Unsupported(String),
    /// The launcher's caller refused the start (a pinned executable changed); the text
    /// says why and what to do.
    #[error("{0}")]
    Refused(String),
}

/// Connecting to a server failed: it could not be started, did not complete the handshake,
/// or broke the protocol while doing so.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The process could not be started.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// No handshake within the connect timeout.
    #[error("no handshake within {}", humanize(*after))]
    Timeout {
        /// The connect timeout that elapsed.
        after: Duration,
    },
    /// The server process exited before the connection was established.
    #[error("the server exited during the handshake ({status})")]
    Exited {
        /// How it exited, e.g. `exit code 3` or `killed by signal 9`.
        status: String,
    },
    /// The server broke the transport rules (oversized message, too many non-JSON lines).
    #[error("{reason}")]
    Fault {
        /// What went wrong.
        reason: String,
    },
    /// The handshake itself failed (bad answer, error reply, no shared protocol version).
    #[error("handshake failed: {reason}")]
    Handshake {
        /// The reason, in words.
        reason: String,
    },
    /// The server is of a kind this version of Warden does not connect to yet.
    #[error("{0}")]
    Unsupported(String),
    /// A remote server answered 401 or 403: it is up, but wants (other) credentials.
    #[error("{reason}")]
    NeedsAuthorization {
        /// The status and challenge, in words.
        reason: String,
    },
    /// A remote server could not be reached (transient failures on every attempt).
    #[error("down after {attempts} attempt(s): {reason}")]
    Down {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        reason: String,
    },
    /// A remote server refused the exchange for a reason retrying cannot fix.
    #[error("{reason}")]
    Remote {
        /// What was wrong.
        reason: String,
    },
}

/// A connection attempt that failed, with the last lines the server wrote to stderr.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ConnectFailure {
    /// What failed.
    pub error: ConnectError,
    /// The server's last stderr lines (oldest first), possibly empty.
    pub stderr_tail: Vec<String>,
}

/// A request on an established connection failed. A tool that ran and reported an error
/// is not a `CallError`: that is a [`crate::CallOutcome`] with `is_error` set.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer within the timeout; `notifications/cancelled` was sent.
    #[error("no answer within {} (the request was cancelled)", humanize(*after))]
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
    },
    /// The server answered with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Rejected {
        /// JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The server refused the request because the client behind it did not declare a
    /// capability it needs (2026-07-28, -32021).
    #[error("the server needs the client to declare {required}: {message}")]
    MissingCapability {
        /// The capabilities it needs (`requiredCapabilities`, a capabilities object).
        required: serde_json::Value,
        /// The server's message.
        message: String,
    },
    /// The connection is gone: the process exited, crashed or broke the protocol.
    #[error("the server is gone: {reason}")]
    ServerGone {
        /// Why, as far as Warden can tell (exit status, fault).
        reason: String,
        /// The server's last stderr lines.
        stderr_tail: Vec<String>,
    },
    /// The connection was gone before the request could be written: the server never got
    /// it (it had exited, or closed its stream, before this call).
    #[error("the server is gone, so the call was not sent: {reason}")]
    NotSent {
        /// Why, as far as Warden can tell (exit status, fault).
        reason: String,
        /// The server's last stderr lines.
        stderr_tail: Vec<String>,
    },
    /// The server's answer was not what the protocol allows here.
    #[error("unexpected answer from the server: {reason}")]
    Protocol {
        /// What was wrong.
        reason: String,
    },
    /// The server listed more tools (or pages) than Warden accepts from one server.
    #[error("the server listed more than {limit} {what}")]
    TooMany {
        /// The limit that was hit.
        limit: usize,
        /// What was counted (`tools`, `pages`).
        what: &'static str,
    },
}

impl CallError {
    /// Whether the request may have reached the server (and a tool call may have run):
    /// false only when it was never sent ([`CallError::NotSent`]). What the audit log's
    /// `executed` column records for a call that failed.
    pub fn may_have_reached_server(&self) -> bool {
        !matches!(self, CallError::NotSent { .. })
    }
}

/// Formats a duration the way a person writes it: `10s`, `1.5s`, `250ms`.
pub fn humanize(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{:.1}s", duration.as_secs_f64())
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humanize_reads_like_a_person_wrote_it() {
        assert_eq!(humanize(Duration::from_secs(10)), "10s");
        assert_eq!(humanize(Duration::from_millis(1500)), "1.5s");
        assert_eq!(humanize(Duration::from_millis(250)), "250ms");
    }
}
