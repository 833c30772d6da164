//! The behaviours this server can be started in, and the command line that selects them.

use crate::server::Settings;

/// One behaviour; apart from its one deviation, every mode acts like [`Mode::Good`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A correct 2025-11-25 server that does not know `server/discover`.
    Good,
    /// A dual-era server: also answers `server/discover` and shapes 2026-07-28 results.
    Modern,
    /// Writes a plain-text log line to stdout before every response (a protocol fault).
    StdoutLogs,
    /// Writes a fake JSON-RPC response to stderr for every request.
    StderrJsonrpc,
    /// Answers `tools/call` with one line of about `--bytes` bytes.
    HugeLine,
    /// Reads its input and never writes anything.
    Silent,
    /// Sleeps `--delay-ms` before reading anything.
    SlowStart,
    /// Holds an exclusive lock on the file `$WARDEN_TEST_START_LOCK` for `--delay-ms` before
    /// reading anything: a start that needs a resource only one start can use at a time (a
    /// package cache's lock, the one core of a small machine). Started together, such servers
    /// wait for each other; started one at a time, each takes `--delay-ms`.
    SerialStart,
    /// Like `slow-start` (sleeps `--delay-ms` first), then a modern-only server in the way of
    /// the Python SDK: once `server/discover` was answered, `initialize` is refused with
    /// -32022.
    SlowModern,
    /// Never answers `tools/call`.
    HangOnCall,
    /// Exits with code 101 on `tools/call`, without answering.
    CrashMidCall,
    /// Exits with code 3 and an error on stderr before reading anything.
    ExitAtStart,
    /// Leaves a grandchild that ignores SIGTERM/SIGHUP; ignores them and stdin EOF itself.
    Grandchild,
    /// Sends `roots/list` and `ping` to the client and reports the answers through `echo`.
    Roots,
    /// Writes `--count` non-JSON lines right after the `initialize` response.
    BadJsonLines,
    /// Declares `tools.listChanged`; its first `tools/call` drops `fail` and adds `extra`,
    /// and it sends `notifications/tools/list_changed` right before answering that call.
    ListChange,
    /// `list-change` in both eras; in the 2026-07-28 era it announces the change only on an
    /// open `subscriptions/listen` (tagged with the listen's id), as that revision has it.
    ModernListChange,
    /// Declares `tools.listChanged`; its first `tools/call` changes `echo`'s description
    /// (a definition changed under the same name: drift a host must catch) and it sends
    /// `notifications/tools/list_changed` right before answering that call.
    Redefine,
    /// A dual-era server (like `modern`) whose `echo`, called in the 2026-07-28 era,
    /// first answers `input_required` with one form elicitation and `requestState`, then
    /// reports the `inputResponses` and `requestState` it was sent again.
    InputRequired,
    /// Every string it writes carries terminal control sequences (see [`crate::hostile`]):
    /// its name, tools, results, error messages and stderr.
    Hostile,
    /// On `tools/call`, allocates and touches `--bytes` of memory (see [`crate::hogs`]).
    MemoryHog,
    /// On `tools/call`, forks `--count` children that sleep.
    ForkBomb,
    /// On `tools/call`, writes `--bytes` into `$HOME` and `fallocate`s as many.
    DiskFiller,
    /// Answers `tools/call` with what it can read of `/proc/1` (cmdline, environ, exe).
    ReadProcOne,
    /// Before every `tools/call` answer, sends `--count` `notifications/message` lines (a
    /// server that floods notifications).
    NotifyFlood,
    /// The fixture for the conformance suite's server scenarios (see
    /// [`crate::conformance`]): its tools instead of `echo`, `add` and `fail`.
    Conformance,
    /// Lists, as its own resource, a URI the `conformance` fixture's template matches (see
    /// [`crate::claimant`]).
    UriClaimant,
    /// Resources and prompts that change, and resource subscriptions with updates, for the
    /// gateway's relaying (see [`crate::live`]).
    LiveResources,
}

const MODES: [(&str, Mode); 28] = [
    ("good", Mode::Good),
    ("modern", Mode::Modern),
    ("stdout-logs", Mode::StdoutLogs),
    ("stderr-jsonrpc", Mode::StderrJsonrpc),
    ("huge-line", Mode::HugeLine),
    ("silent", Mode::Silent),
    ("slow-start", Mode::SlowStart),
    ("serial-start", Mode::SerialStart),
    ("slow-modern", Mode::SlowModern),
    ("hang-on-call", Mode::HangOnCall),
    ("crash-mid-call", Mode::CrashMidCall),
    ("exit-at-start", Mode::ExitAtStart),
    ("grandchild", Mode::Grandchild),
    ("roots", Mode::Roots),
    ("bad-json-lines", Mode::BadJsonLines),
    ("list-change", Mode::ListChange),
    ("modern-list-change", Mode::ModernListChange),
    ("redefine", Mode::Redefine),
    ("input-required", Mode::InputRequired),
    ("hostile", Mode::Hostile),
    ("memory-hog", Mode::MemoryHog),
    ("fork-bomb", Mode::ForkBomb),
    ("disk-filler", Mode::DiskFiller),
    ("read-proc-one", Mode::ReadProcOne),
    ("conformance", Mode::Conformance),
    ("notify-flood", Mode::NotifyFlood),
    ("uri-claimant", Mode::UriClaimant),
    ("live-resources", Mode::LiveResources),
];

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    /// The selected behaviour.
    pub(crate) mode: Mode,
    /// `--page-size N`: page `tools/list` (any mode).
    pub(crate) page_size: Option<usize>,
    /// `--delay-ms N` for `slow-start`, `slow-modern` and `serial-start` (default 2000).
    pub(crate) delay_ms: u64,
    /// `--count N` for `bad-json-lines` and `fork-bomb` (default 1000).
    pub(crate) count: u64,
    /// `--bytes N`: length of the text in `huge-line`'s answer, or what `memory-hog` and
    /// `disk-filler` use (default 100 MiB).
    pub(crate) bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: Mode::Good,
            page_size: None,
            delay_ms: 2000,
            count: 1000,
            bytes: 100 * 1024 * 1024,
        }
    }
}

impl Config {
    /// The protocol settings this configuration implies.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            discover: matches!(
                self.mode,
                Mode::Modern
                    | Mode::InputRequired
                    | Mode::SlowModern
                    | Mode::Conformance
                    | Mode::ModernListChange
            ),
            modern_stays_modern: self.mode == Mode::SlowModern,
            page_size: self.page_size,
            probe_client: self.mode == Mode::Roots,
            list_change: matches!(self.mode, Mode::ListChange | Mode::ModernListChange),
            redefine: self.mode == Mode::Redefine,
            ask_input: self.mode == Mode::InputRequired,
            hostile: self.mode == Mode::Hostile,
            conformance: self.mode == Mode::Conformance,
            uri_claimant: self.mode == Mode::UriClaimant,
            live: self.mode == Mode::LiveResources,
        }
    }
}

/// The usage text printed on a bad command line.
pub(crate) fn usage() -> String {
    let names: Vec<&str> = MODES.iter().map(|(name, _)| *name).collect();
    format!(
        "usage: warden-testserver [MODE] [--page-size N] [--delay-ms N] [--count N] [--bytes N] [--data-file PATH]\n\
         modes: {}",
        names.join(", ")
    )
}

/// Parses the arguments after the program name. The mode comes first and defaults to `good`;
/// every option is accepted in every mode.
pub(crate) fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Config, String> {
    let mut config = Config::default();
    let mut args = args.into_iter().peekable();
    if let Some(first) = args.next_if(|a| !a.starts_with("--")) {
        config.mode = MODES
            .iter()
            .find(|(name, _)| *name == first)
            .map(|(_, mode)| *mode)
            .ok_or_else(|| format!("unknown mode: {first}"))?;
    }
    while let Some(flag) = args.next() {
        if !flag.starts_with("--") {
            return Err(format!("unexpected argument: {flag}"));
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag} needs a non-negative integer, got {v:?}"))
        };
        match flag.as_str() {
            "--page-size" => {
                let n = number(&value)?;
                if n == 0 {
                    return Err("--page-size must be at least 1".into());
                }
                config.page_size = Some(usize::try_from(n).map_err(|e| e.to_string())?);
            }
            // A file named in the arguments and not otherwise used: Warden grants read access
            // to its package directory, which is what the tests naming it look at.
            "--data-file" => {}
            "--delay-ms" => config.delay_ms = number(&value)?,
            "--count" => config.count = number(&value)?,
            "--bytes" => {
                config.bytes = usize::try_from(number(&value)?).map_err(|e| e.to_string())?
            }
            _ => return Err(format!("unknown option: {flag}")),
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn mode_defaults_to_good_and_every_name_parses() {
        assert_eq!(parse(&[]), Ok(Config::default()));
        for (name, mode) in MODES {
            assert_eq!(parse(&[name]).map(|c| c.mode), Ok(mode));
        }
    }

    #[test]
    fn options_set_their_values() {
        let c = parse(&["slow-start", "--delay-ms", "250", "--page-size", "1"]).unwrap();
        assert_eq!(
            (c.mode, c.delay_ms, c.page_size),
            (Mode::SlowStart, 250, Some(1))
        );
        let c = parse(&["--count", "5", "--bytes", "10"]).unwrap();
        assert_eq!((c.mode, c.count, c.bytes), (Mode::Good, 5, 10));
    }

    #[test]
    fn bad_command_lines_are_errors() {
        for args in [
            &["nonsense"][..],
            &["good", "extra"],
            &["good", "--delay-ms"],
            &["good", "--delay-ms", "-1"],
            &["good", "--page-size", "0"],
            &["good", "--frobnicate", "1"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn settings_follow_the_mode() {
        let settings = |args: &[&str]| parse(args).unwrap().settings();
        assert!(settings(&["modern"]).discover);
        assert!(!settings(&["good"]).discover);
        assert!(settings(&["roots"]).probe_client);
        assert_eq!(settings(&["--page-size", "2"]).page_size, Some(2));
        assert!(settings(&["list-change"]).list_change);
        assert!(!settings(&["good"]).list_change);
        assert!(settings(&["redefine"]).redefine);
        assert!(!settings(&["redefine"]).list_change);
        let input = settings(&["input-required"]);
        assert!(input.ask_input && input.discover);
    }
}
