//! Executable pins of relayed servers (decision 0030, revision 1).
//!
//! The supervisor inside the sandbox has no state store, so it cannot pin what a server
//! runs by itself. Instead, before each start of a child it hashes what the start would
//! execute (the same [`warden_mcp::fingerprint`] the brain's host uses for its local
//! servers), reports it to the brain in a [`Kind::Pin`](crate::frame::Kind::Pin) frame, and
//! starts the child only once the brain answers with a [`Verdict`] that allows it. The
//! brain compares the report with the pin it stored for that (relay, server) pair, records
//! it on first use, and refuses a changed one until the user accepts it (`warden pin`).
//! The start that follows runs exactly the files that were hashed
//! ([`Executables::launch_pinned`]), so a file swapped between the report and the start
//! is refused too.
//!
//! Who is trusted: the report is the supervisor's word. It catches a server binary (or
//! script, or interpreter) that something inside the sandbox replaced while the supervisor
//! stayed honest (a task that wrote over it, an image updated under the session); it does
//! not protect against a supervisor that lies (a compromised `warden` inside, or root in
//! the box), which can report any digest it likes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use warden_config::ServerSpec;
use warden_mcp::{
    ConfinedLauncher, Fingerprint, FingerprintError, LaunchError, LaunchRequest, Launched,
};

/// What the supervisor hashes and starts children with when the brain asks for pins.
pub trait Executables: Send + Sync {
    /// What `request`'s start would execute, hashed.
    fn fingerprint(&self, request: &LaunchRequest) -> Result<Fingerprint, FingerprintError>;
    /// Starts `request`, running exactly the files of `fingerprint` (refused if one of
    /// them is no longer the file that was hashed).
    fn launch_pinned(
        &self,
        request: &LaunchRequest,
        fingerprint: &Fingerprint,
    ) -> Result<Launched, LaunchError>;
    /// Each file of `fingerprint` that someone other than the supervisor's user could
    /// change, with why (`PATH: reason`): inside the write grant of a server of
    /// `configured` (the sandbox's configuration) or of the scratch directories, or in a
    /// place other users may write ([`warden_mcp::exposure`], the host's own check for
    /// local servers). A start with such a file is refused before it is reported: no pin
    /// can vouch for a file that may be swapped between the check and the exec.
    fn exposed(&self, fingerprint: &Fingerprint, configured: &[ServerSpec]) -> Vec<String>;
}

impl Executables for ConfinedLauncher {
    fn fingerprint(&self, request: &LaunchRequest) -> Result<Fingerprint, FingerprintError> {
        ConfinedLauncher::fingerprint(self, request)
    }

    fn launch_pinned(
        &self,
        request: &LaunchRequest,
        fingerprint: &Fingerprint,
    ) -> Result<Launched, LaunchError> {
        ConfinedLauncher::launch_pinned(self, request, fingerprint)
    }

    fn exposed(&self, fingerprint: &Fingerprint, configured: &[ServerSpec]) -> Vec<String> {
        let grants = warden_mcp::exposure::write_grants(configured, self.scratch_base());
        warden_mcp::exposure::exposed(fingerprint, &grants)
    }
}

/// Whether every file `fingerprint` hashed is still there and still the file that was
/// hashed (device, inode, size, change time: a write moves the change time), looked at
/// with `stat` only, never read. What the supervisor asks before it reports a refused
/// start's fingerprint again instead of hashing anew.
pub fn still_hashed(fingerprint: &Fingerprint) -> bool {
    let pinned = fingerprint.pinned_files();
    // A file that is gone counts as changed (the launcher's own check leaves a missing
    // file to the exec, which fails).
    let present = pinned
        .iter()
        .filter(|pin| !pin.search)
        .all(|pin| pin.paths.iter().all(|path| path.is_file()));
    present && warden_mcp::fingerprint::check_unchanged(&pinned).is_ok()
}

/// Supervisor to brain: what one start of a server would execute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The start's number within the server's stream (the verdict names it).
    pub start: u64,
    /// The resolved program.
    pub program: PathBuf,
    /// Its sha256, lowercase hex.
    pub program_sha256: String,
    /// The other files the start executes.
    #[serde(default)]
    pub files: Vec<ReportedFile>,
    /// The package of a package launcher.
    #[serde(default)]
    pub package: Option<String>,
    /// What could not be pinned, for display.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One hashed file of a [`Report`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedFile {
    /// The file as the server names it.
    pub path: PathBuf,
    /// What it is to the start (`interpreter`, `script`, ...).
    pub role: String,
    /// Its sha256, lowercase hex.
    pub sha256: String,
}

impl Report {
    /// The report of start number `start`, hashed as `fingerprint`.
    pub fn of(start: u64, fingerprint: &Fingerprint) -> Self {
        Self {
            start,
            program: fingerprint.program.clone(),
            program_sha256: fingerprint.program_sha256.clone(),
            files: fingerprint
                .files
                .iter()
                .map(|file| ReportedFile {
                    path: file.path.clone(),
                    role: file.role.as_str().to_owned(),
                    sha256: file.sha256.clone(),
                })
                .collect(),
            package: fingerprint.package.clone(),
            notes: fingerprint.notes.clone(),
        }
    }
}

/// The largest report the brain reads (a real one is a few hundred bytes per file).
pub const MAX_REPORT_BYTES: usize = 256 * 1024;
/// The most files a report may name besides the program.
pub const MAX_REPORT_FILES: usize = 256;

/// Reads a report from the supervisor: `Err` (with why) for one over
/// [`MAX_REPORT_BYTES`] or that does not parse, which is left unanswered (the start then
/// times out inside, refused). A report naming more than [`MAX_REPORT_FILES`] files parses,
/// and is refused by [`over_limits`].
pub fn parse_report(payload: &[u8]) -> Result<Report, String> {
    if payload.len() > MAX_REPORT_BYTES {
        return Err(format!(
            "a report of {} bytes exceeds the cap of {MAX_REPORT_BYTES} bytes",
            payload.len()
        ));
    }
    serde_json::from_slice(payload)
        .map_err(|error| format!("a report that does not parse: {error}"))
}

/// Why `report` is refused before any pin is read or written, if it is.
pub fn over_limits(server: &str, report: &Report) -> Option<String> {
    (report.files.len() > MAX_REPORT_FILES).then(|| {
        format!(
            "`{server}` is not started: its report names {} files, more than the {MAX_REPORT_FILES} \
             a start may pin",
            report.files.len()
        )
    })
}

/// Brain to supervisor: whether start number `start` may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The start it answers.
    pub start: u64,
    /// Whether the start may run.
    pub allow: bool,
    /// Why not (shown to whoever made the request).
    #[serde(default)]
    pub reason: String,
}

/// Brain to supervisor, payload of an `Open` frame: how the stream runs.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OpenOptions {
    /// Every start of the server is reported and waits for the brain's [`Verdict`].
    #[serde(default)]
    pub pins: bool,
}

/// The brain's side: decides whether a reported start may run (the host implements it
/// over its state store).
pub trait PinCheck: Send + Sync {
    /// `Ok` when `report` matches the pin of `spec` (the brain's stub) behind relay
    /// `relay`, or was just recorded as its first pin; `Err` names what changed.
    fn check(&self, relay: &str, spec: &ServerSpec, report: &Report) -> Result<(), String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_round_trips_and_an_open_without_options_asks_for_none() {
        let report = Report {
            start: 3,
            program: "/opt/bin/server".into(),
            program_sha256: "ab".repeat(32),
            files: vec![ReportedFile {
                path: "/bin/sh".into(),
                role: "interpreter".into(),
                sha256: "cd".repeat(32),
            }],
            package: None,
            notes: Vec::new(),
        };
        let bytes = serde_json::to_vec(&report).unwrap();
        assert_eq!(serde_json::from_slice::<Report>(&bytes).unwrap(), report);
        let open: OpenOptions = serde_json::from_slice(b"{}").unwrap();
        assert!(!open.pins);
    }

    #[test]
    fn reports_over_the_limits_are_refused_before_any_pin_is_read() {
        let mut report = Report {
            start: 1,
            program: "/bin/server".into(),
            program_sha256: "a".repeat(64),
            files: Vec::new(),
            package: None,
            notes: Vec::new(),
        };
        // Control: an ordinary report is read and passes.
        let bytes = serde_json::to_vec(&report).unwrap();
        assert_eq!(parse_report(&bytes).unwrap(), report);
        assert!(over_limits("s", &report).is_none());
        // Too many files: refused, naming the server and the limit.
        report.files = (0..=MAX_REPORT_FILES)
            .map(|n| ReportedFile {
                path: format!("/lib/{n}").into(),
                role: "preload".into(),
                sha256: "b".repeat(64),
            })
            .collect();
        let why = over_limits("s", &report).unwrap();
        assert!(why.contains("`s`") && why.contains("257 files"), "{why}");
        // Too many bytes: not even parsed.
        let huge = vec![b' '; MAX_REPORT_BYTES + 1];
        assert!(parse_report(&huge).unwrap_err().contains("exceeds the cap"));
    }
}
