//! The brain's side of a relay: one channel per `[relays.NAME]`, shared by its servers.
//!
//! The channel is the configured command (it enters the sandbox and runs the supervisor
//! there); Warden frames its stdin and stdout. Each relayed server gets a stream over it,
//! presented to the connection code as a pair of pipes, so the MCP handshake and calls run
//! exactly as for a local server. When the channel breaks, every stream ends (their
//! connections see the server gone) and the channel is opened again on demand, no sooner
//! than a jittered, bounded back-off after the failure: until then, opening a stream fails
//! at once with a message that says the relay is reconnecting.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The largest secrets file a relay reads for one server.
const MAX_SECRETS_BYTES: u64 = 64 * 1024;

use tokio::io::{AsyncWriteExt, BufReader, BufWriter, DuplexStream};
use tokio::process::Command;
use tokio::sync::mpsc;
use warden_config::RelayChannel;
use warden_mcp::lines::{LineRead, read_capped_line};

use crate::frame::{Frame, FrameError, Kind, read_frame, write_frame};
use crate::hello::{Hello, PINS_VERSION, Ready, VERSION};
use crate::pins::{OpenOptions, Report, Verdict, over_limits, parse_report};

/// Decides whether a start of one stream's server may run (the brain's pin check, bound to
/// the server's stub).
pub type StreamPins = Arc<dyn Fn(&Report) -> Result<(), String> + Send + Sync>;

/// Pin checks of one channel in flight at once.
const MAX_CHECKS: usize = 4;
/// Frames queued for the channel before writers wait.
const OUT_QUEUE: usize = 256;
/// Bytes buffered in each direction of a server's in-process pipe.
const PIPE_BYTES: usize = 256 * 1024;
/// Longest line of the channel command's own stderr kept in the log.
const MAX_LOG_LINE: usize = 8 * 1024;

/// Why a stream could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The channel is down and the next attempt is not due yet.
    #[error(
        "relay `{relay}` is reconnecting: the channel failed ({reason}); next attempt in {} ms \
         (attempt {attempt})",
        retry_in.as_millis()
    )]
    Reconnecting {
        /// The relay.
        relay: String,
        /// The last failure.
        reason: String,
        /// Time until the next attempt.
        retry_in: Duration,
        /// Failed attempts so far.
        attempt: u32,
    },
    /// Opening the channel failed just now.
    #[error("relay `{relay}`: the channel could not be opened: {reason}")]
    Open {
        /// The relay.
        relay: String,
        /// What went wrong.
        reason: String,
    },
    /// A secrets file could not be read.
    #[error("relay `{relay}`: {reason}")]
    Secrets {
        /// The relay.
        relay: String,
        /// What went wrong (the file, never its content).
        reason: String,
    },
}

/// The pipes of one server's stream, handed to the MCP connection code.
pub struct Stream {
    /// The channel epoch it belongs to (a new channel is a new epoch).
    pub epoch: u64,
    /// Where the connection writes requests (lines).
    pub stdin: DuplexStream,
    /// Where the server's messages arrive (lines).
    pub stdout: DuplexStream,
    /// Where its stderr lines arrive, tagged `[relay/server]`.
    pub stderr: DuplexStream,
}

/// Deadline stamped on each request of a server's stream, in milliseconds.
#[derive(Debug, Default)]
pub struct Deadlines {
    /// For `tools/call` and the reads a gateway forwards (resources, prompts, completion:
    /// [`warden_mcp::FORWARDED_METHODS`]): the timeout of the request being made.
    pub call_ms: AtomicU64,
    /// For everything else: the server's connect timeout.
    pub other_ms: AtomicU64,
}

struct Sinks {
    stdout: mpsc::Sender<Vec<u8>>,
    stderr: mpsc::Sender<Vec<u8>>,
    /// Checks the starts the supervisor reports; `None`: the stream did not ask for pins.
    pins: Option<StreamPins>,
}

struct Live {
    epoch: u64,
    /// The supervisor's relay protocol version.
    version: u32,
    out: mpsc::Sender<Frame>,
    streams: Mutex<HashMap<String, Sinks>>,
    alive: AtomicBool,
    /// Why the channel ended, once it has.
    ended: Mutex<Option<String>>,
    /// Pin checks in flight: a sandbox that floods reports waits for them (its frames are
    /// not read meanwhile) rather than piling work on the brain's store.
    checks: Arc<tokio::sync::Semaphore>,
}

enum State {
    Idle,
    Up(Arc<Live>),
    Down {
        reason: String,
        attempts: u32,
        retry_at: Instant,
    },
}

/// One relay's channel.
pub struct Channel {
    name: String,
    spec: RelayChannel,
    state: tokio::sync::Mutex<State>,
    epochs: AtomicU64,
    max_payload: usize,
    users: Mutex<usize>,
}

impl Channel {
    /// A channel for `[relays.name]`, not opened yet.
    pub fn new(name: &str, spec: RelayChannel, max_payload: usize) -> Self {
        Self {
            name: name.to_owned(),
            spec,
            state: tokio::sync::Mutex::new(State::Idle),
            epochs: AtomicU64::new(0),
            max_payload,
            users: Mutex::new(0),
        }
    }

    /// The relay's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The epoch of the live channel, if it is up.
    pub async fn live_epoch(&self) -> Option<u64> {
        match &*self.state.lock().await {
            State::Up(live) if live.alive.load(Ordering::SeqCst) => Some(live.epoch),
            _ => None,
        }
    }

    /// Opens `server`'s stream (a new session of it inside the sandbox), opening the
    /// channel first if needed; fails at once while the channel is down and its next
    /// attempt is not due. With `pins`, every start of the server inside is reported and
    /// runs only if `pins` allows it.
    pub async fn open(
        &self,
        server: &str,
        deadlines: Arc<Deadlines>,
        connect_limit: Duration,
        pins: Option<StreamPins>,
    ) -> Result<Stream, ChannelError> {
        let live = self.live(connect_limit).await?;
        if pins.is_some() && live.version < PINS_VERSION {
            return Err(ChannelError::Open {
                relay: self.name.clone(),
                reason: format!(
                    "the supervisor inside speaks relay protocol {}, which does not report \
                     what `{server}` runs, so its executable pin cannot be checked; update \
                     Warden inside the sandbox",
                    live.version.max(1)
                ),
            });
        }
        let open = OpenOptions {
            pins: pins.is_some(),
        };
        let (stdin, brain_writes) = tokio::io::duplex(PIPE_BYTES);
        let (mut stdout_in, stdout) = tokio::io::duplex(PIPE_BYTES);
        let (mut stderr_in, stderr) = tokio::io::duplex(PIPE_BYTES);
        let (stdout_tx, mut stdout_rx) = mpsc::channel::<Vec<u8>>(1024);
        let (stderr_tx, mut stderr_rx) = mpsc::channel::<Vec<u8>>(256);
        tokio::spawn(async move {
            while let Some(mut bytes) = stdout_rx.recv().await {
                bytes.push(b'\n');
                if stdout_in.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        let tag = format!("[{}/{}] ", self.name, server);
        tokio::spawn(async move {
            while let Some(bytes) = stderr_rx.recv().await {
                let mut line = tag.clone().into_bytes();
                line.extend_from_slice(&bytes);
                line.push(b'\n');
                if stderr_in.write_all(&line).await.is_err() {
                    break;
                }
            }
        });
        {
            let mut streams = match live.streams.lock() {
                Ok(streams) => streams,
                Err(poisoned) => poisoned.into_inner(),
            };
            streams.insert(
                server.to_owned(),
                Sinks {
                    stdout: stdout_tx,
                    stderr: stderr_tx,
                    pins,
                },
            );
        }
        let open = serde_json::to_vec(&open).unwrap_or_default();
        let _ = live.out.send(Frame::new(Kind::Open, server, open)).await;
        // The connection's requests, one per line, become Data frames with deadlines.
        let out = live.out.clone();
        let name = server.to_owned();
        let max_payload = self.max_payload;
        tokio::spawn(async move {
            let mut reader = BufReader::new(brain_writes);
            let mut line = Vec::new();
            loop {
                match read_capped_line(&mut reader, &mut line, max_payload, true).await {
                    Ok(LineRead::Line) => {
                        let payload = std::mem::take(&mut line);
                        let deadline_ms = deadline_of(&payload, &deadlines);
                        let frame = Frame {
                            kind: Kind::Data,
                            server: name.clone(),
                            deadline_ms,
                            payload,
                        };
                        if out.send(frame).await.is_err() {
                            break;
                        }
                    }
                    Ok(LineRead::TooLong) => {
                        tracing::warn!(server = %name, "a request over {max_payload} bytes was not relayed");
                    }
                    Ok(LineRead::Eof) | Err(_) => break,
                }
            }
        });
        Ok(Stream {
            epoch: live.epoch,
            stdin,
            stdout,
            stderr,
        })
    }

    /// Ends `server`'s stream: the supervisor stops its child.
    pub async fn close_stream(&self, server: &str) {
        if let State::Up(live) = &*self.state.lock().await {
            let removed = match live.streams.lock() {
                Ok(mut streams) => streams.remove(server),
                Err(poisoned) => poisoned.into_inner().remove(server),
            };
            drop(removed);
            let _ = live
                .out
                .send(Frame::new(Kind::Closed, server, Vec::new()))
                .await;
        }
    }

    /// Counts a connection using the channel.
    pub fn acquire(&self) {
        if let Ok(mut users) = self.users.lock() {
            *users += 1;
        }
    }

    /// A connection stopped using the channel; the last one ends the session: `Bye`, and
    /// the supervisor stops every child.
    pub async fn release(&self) {
        let last = match self.users.lock() {
            Ok(mut users) => {
                *users = users.saturating_sub(1);
                *users == 0
            }
            Err(_) => false,
        };
        if last {
            let mut state = self.state.lock().await;
            if let State::Up(live) = &*state {
                let _ = live.out.send(Frame::new(Kind::Bye, "", Vec::new())).await;
                // Wait (bounded) for the supervisor to stop its children and exit.
                let deadline = Instant::now() + Duration::from_secs(12);
                while live.alive.load(Ordering::SeqCst) && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            *state = State::Idle;
        }
    }

    async fn live(&self, connect_limit: Duration) -> Result<Arc<Live>, ChannelError> {
        let mut state = self.state.lock().await;
        let attempts = match &*state {
            State::Up(live) if live.alive.load(Ordering::SeqCst) => return Ok(Arc::clone(live)),
            State::Up(live) => {
                let reason = match live.ended.lock() {
                    Ok(ended) => ended.clone(),
                    Err(poisoned) => poisoned.into_inner().clone(),
                }
                .unwrap_or_else(|| "the channel ended".into());
                // Just found broken: the first attempt is after a back-off too.
                let retry_at = Instant::now() + backoff(&self.spec, 0);
                *state = State::Down {
                    reason,
                    attempts: 0,
                    retry_at,
                };
                return Err(self.reconnecting(&state));
            }
            State::Down {
                retry_at, attempts, ..
            } if Instant::now() < *retry_at => {
                let _ = attempts;
                return Err(self.reconnecting(&state));
            }
            State::Down { attempts, .. } => *attempts,
            State::Idle => 0,
        };
        match tokio::time::timeout(connect_limit, self.start()).await {
            Ok(Ok(live)) => {
                *state = State::Up(Arc::clone(&live));
                if attempts > 0 {
                    tracing::info!(relay = %self.name, attempts, "the channel is open again");
                }
                Ok(live)
            }
            result => {
                let reason = match result {
                    Ok(Err(error)) => error.to_string(),
                    _ => format!("no answer within {} ms", connect_limit.as_millis()),
                };
                let attempts = attempts.saturating_add(1);
                *state = State::Down {
                    reason: reason.clone(),
                    attempts,
                    retry_at: Instant::now() + backoff(&self.spec, attempts),
                };
                Err(ChannelError::Open {
                    relay: self.name.clone(),
                    reason,
                })
            }
        }
    }

    fn reconnecting(&self, state: &State) -> ChannelError {
        match state {
            State::Down {
                reason,
                attempts,
                retry_at,
            } => ChannelError::Reconnecting {
                relay: self.name.clone(),
                reason: reason.clone(),
                retry_in: retry_at.saturating_duration_since(Instant::now()),
                attempt: *attempts,
            },
            _ => ChannelError::Open {
                relay: self.name.clone(),
                reason: "the channel is not up".into(),
            },
        }
    }

    /// Runs the channel command, sends the session's secrets and waits for `Ready`.
    async fn start(&self) -> Result<Arc<Live>, ChannelError> {
        let open_error = |reason: String| ChannelError::Open {
            relay: self.name.clone(),
            reason,
        };
        let hello = Hello {
            version: VERSION,
            secrets: self.read_secrets()?,
        };
        let Some((program, args)) = self.spec.command.split_first() else {
            return Err(open_error("`command` is empty".into()));
        };
        // The channel command gets PATH only: the brain's environment (its model API key,
        // say) never crosses into the sandbox. Anything else it needs is written into the
        // command (`env NAME=value ...`).
        let mut child = Command::new(program)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| open_error(format!("could not run `{program}`: {error}")))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(open_error("the channel's pipes were not created".into()));
        };
        let relay = self.name.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            while let Ok(LineRead::Line | LineRead::TooLong) =
                read_capped_line(&mut reader, &mut line, MAX_LOG_LINE, true).await
            {
                tracing::info!(relay = %relay, "channel: {}", String::from_utf8_lossy(&line));
            }
        });
        let max_payload = self.max_payload;
        let mut writer = BufWriter::new(stdin);
        let payload = serde_json::to_vec(&hello).map_err(|error| open_error(error.to_string()))?;
        drop(hello);
        write_frame(
            &mut writer,
            &Frame::new(Kind::Hello, "", payload),
            max_payload,
        )
        .await
        .map_err(|error| open_error(error.to_string()))?;
        writer
            .flush()
            .await
            .map_err(|error| open_error(error.to_string()))?;
        let mut reader = BufReader::new(stdout);
        let ready = read_frame(&mut reader, max_payload)
            .await
            .map_err(|error| open_error(error.to_string()))?;
        if ready.kind != Kind::Ready {
            return Err(open_error(
                "the other end did not answer as a Warden relay supervisor".into(),
            ));
        }
        let ready: Ready = serde_json::from_slice(&ready.payload).unwrap_or_default();
        tracing::info!(relay = %self.name, servers = ?ready.servers, "the channel is open");
        let (out, mut out_rx) = mpsc::channel::<Frame>(OUT_QUEUE);
        let live = Arc::new(Live {
            epoch: self.epochs.fetch_add(1, Ordering::SeqCst) + 1,
            version: ready.version,
            checks: Arc::new(tokio::sync::Semaphore::new(MAX_CHECKS)),
            out,
            streams: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            ended: Mutex::new(None),
        });
        let writer_live = Arc::clone(&live);
        tokio::spawn(async move {
            while let Some(frame) = out_rx.recv().await {
                let bye = frame.kind == Kind::Bye;
                if write_frame(&mut writer, &frame, max_payload).await.is_err() {
                    break;
                }
                if (out_rx.is_empty() || bye) && writer.flush().await.is_err() {
                    break;
                }
                if bye {
                    break;
                }
            }
            let _ = writer.shutdown().await;
            drop(writer_live);
        });
        let reader_live = Arc::clone(&live);
        let relay = self.name.clone();
        tokio::spawn(async move {
            let reason = loop {
                match read_frame(&mut reader, max_payload).await {
                    Ok(frame) => route(&reader_live, frame).await,
                    Err(FrameError::Closed) => break "the channel closed".to_owned(),
                    Err(error) => break error.to_string(),
                }
            };
            // Reap the channel command (bounded), then mark the channel down: every
            // stream ends, so its connection sees the server gone.
            let status = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
            let clean = matches!(&status, Ok(Ok(status)) if status.success());
            let reason = match status {
                Ok(Ok(status)) => format!("{reason}; the channel command ended ({status})"),
                _ => reason,
            };
            if clean {
                tracing::info!(relay = %relay, "{reason}");
            } else {
                tracing::warn!(relay = %relay, "{reason}");
            }
            if let Ok(mut ended) = reader_live.ended.lock() {
                *ended = Some(reason);
            }
            reader_live.alive.store(false, Ordering::SeqCst);
            let streams = match reader_live.streams.lock() {
                Ok(mut streams) => std::mem::take(&mut *streams),
                Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
            };
            drop(streams);
        });
        Ok(live)
    }

    fn read_secrets(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>, ChannelError> {
        let mut all = BTreeMap::new();
        for (server, path) in &self.spec.secrets {
            let error = |reason: String| ChannelError::Secrets {
                relay: self.name.clone(),
                reason,
            };
            let meta = std::fs::metadata(path).map_err(|e| {
                error(format!(
                    "the secrets of `{server}` ({}): {e}",
                    path.display()
                ))
            })?;
            if meta.len() > MAX_SECRETS_BYTES {
                return Err(error(format!(
                    "the secrets of `{server}` ({}) are over 64 KiB",
                    path.display()
                )));
            }
            // Capped by the read itself too: the file may grow after the size check.
            let mut text = String::new();
            std::fs::File::open(path)
                .and_then(|file| file.take(MAX_SECRETS_BYTES + 1).read_to_string(&mut text))
                .map_err(|e| {
                    error(format!(
                        "the secrets of `{server}` ({}): {e}",
                        path.display()
                    ))
                })?;
            if text.len() as u64 > MAX_SECRETS_BYTES {
                return Err(error(format!(
                    "the secrets of `{server}` ({}) are over 64 KiB",
                    path.display()
                )));
            }
            let vars = warden_config::parse_env_file(&text, path)
                .map_err(|e| error(format!("the secrets of `{server}`: {e}")))?;
            all.insert(server.clone(), vars);
        }
        Ok(all)
    }
}

/// Routes one frame from the supervisor to its stream.
async fn route(live: &Live, frame: Frame) {
    // A reported start is always answered (refused on a stream that is gone), so the
    // supervisor never waits out its timeout for a stream the brain just closed.
    if frame.kind == Kind::Pin {
        let pins = match live.streams.lock() {
            Ok(streams) => streams.get(&frame.server).and_then(|s| s.pins.clone()),
            Err(poisoned) => poisoned
                .into_inner()
                .get(&frame.server)
                .and_then(|s| s.pins.clone()),
        };
        if let Ok(permit) = Arc::clone(&live.checks).acquire_owned().await {
            check_start(live.out.clone(), frame, pins, permit);
        }
        return;
    }
    let sender = {
        let streams = match live.streams.lock() {
            Ok(streams) => streams,
            Err(poisoned) => poisoned.into_inner(),
        };
        let Some(sinks) = streams.get(&frame.server) else {
            return;
        };
        match frame.kind {
            Kind::Data => Some((sinks.stdout.clone(), true)),
            Kind::Log => Some((sinks.stderr.clone(), false)),
            _ => None,
        }
    };
    match (frame.kind, sender) {
        (Kind::Data, Some((sender, _))) => {
            let _ = sender.send(frame.payload).await;
        }
        (Kind::Log, Some((sender, _))) => {
            // Log lines never hold up answers.
            let _ = sender.try_send(frame.payload);
        }
        (Kind::Closed, _) => {
            tracing::info!(server = %frame.server, "the sandbox closed the stream: {}", String::from_utf8_lossy(&frame.payload));
            let removed = match live.streams.lock() {
                Ok(mut streams) => streams.remove(&frame.server),
                Err(poisoned) => poisoned.into_inner().remove(&frame.server),
            };
            // The reason goes to the server's log too (its stderr tail, `warden tools -v`).
            if let Some(sinks) = removed {
                let mut line = b"the sandbox closed the stream: ".to_vec();
                line.extend_from_slice(&frame.payload);
                let _ = sinks.stderr.try_send(line);
            }
        }
        _ => {}
    }
}

/// Answers a start the supervisor reported, off the reader's task (the check reads the
/// brain's store): allowed when the stream's pin check passes. A stream that did not ask
/// for pins is never reported to; a report on it, or on a stream that is gone, is answered
/// with a refusal.
fn check_start(
    out: mpsc::Sender<Frame>,
    frame: Frame,
    pins: Option<StreamPins>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    tokio::spawn(async move {
        let server = frame.server.clone();
        let verdict = match parse_report(&frame.payload) {
            Err(error) => {
                tracing::warn!(server = %server, "an executable pin report was not answered: {error}");
                return;
            }
            Ok(report) => {
                let start = report.start;
                let decided = match (pins, over_limits(&server, &report)) {
                    (_, Some(refusal)) => Err(refusal),
                    (None, None) => Err(format!(
                        "`{server}` is not started: its stream is closed, or did not ask for \
                         executable pins"
                    )),
                    (Some(pins), None) => tokio::task::spawn_blocking(move || pins(&report))
                        .await
                        .unwrap_or_else(|error| {
                            Err(format!("the pin check of `{server}` failed: {error}"))
                        }),
                };
                match decided {
                    Ok(()) => Verdict {
                        start,
                        allow: true,
                        reason: String::new(),
                    },
                    Err(reason) => Verdict {
                        start,
                        allow: false,
                        reason,
                    },
                }
            }
        };
        drop(permit);
        let payload = serde_json::to_vec(&verdict).unwrap_or_default();
        let _ = out.send(Frame::new(Kind::Verdict, &server, payload)).await;
    });
}

/// The deadline stamped on one outgoing message: requests only.
fn deadline_of(payload: &[u8], deadlines: &Deadlines) -> u32 {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(borrow, default)]
        method: Option<&'a str>,
        #[serde(default)]
        id: Option<serde::de::IgnoredAny>,
    }
    let Ok(peek) = serde_json::from_slice::<Peek<'_>>(payload) else {
        return 0;
    };
    let (Some(method), Some(_)) = (peek.method, peek.id) else {
        return 0;
    };
    let ms = if method == "tools/call" || warden_mcp::FORWARDED_METHODS.contains(&method) {
        deadlines.call_ms.load(Ordering::Relaxed)
    } else {
        deadlines.other_ms.load(Ordering::Relaxed)
    };
    u32::try_from(ms).unwrap_or(u32::MAX)
}

/// The back-off before attempt `attempts + 1`: the initial delay doubled per failed
/// attempt, at most the maximum, with full jitter (a random point between half of it and
/// all of it, so many brains do not retry in step).
pub fn backoff(spec: &RelayChannel, attempts: u32) -> Duration {
    let base = spec
        .reconnect
        .initial_delay
        .saturating_mul(2u32.saturating_pow(attempts.min(16)))
        .min(spec.reconnect.max_delay);
    let half = base / 2;
    half + half.mul_f64(jitter())
}

/// A number in [0, 1) from the clock and a counter: jitter only, not for anything secret.
fn jitter() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()))
        .unwrap_or(0);
    let mut x = COUNTER.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ nanos;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_is_jittered_and_bounded() {
        let mut spec = RelayChannel {
            command: vec!["x".into()],
            secrets: BTreeMap::new(),
            reconnect: warden_config::ReconnectSpec::default(),
        };
        spec.reconnect.initial_delay = Duration::from_millis(100);
        spec.reconnect.max_delay = Duration::from_millis(1000);
        for attempts in 0..40 {
            let delay = backoff(&spec, attempts);
            let base = (100u64 << attempts.min(16)).min(1000);
            assert!(
                delay >= Duration::from_millis(base / 2),
                "{attempts}: {delay:?}"
            );
            assert!(
                delay <= Duration::from_millis(base),
                "{attempts}: {delay:?}"
            );
        }
    }

    #[test]
    fn only_requests_carry_a_deadline() {
        let deadlines = Deadlines::default();
        deadlines.call_ms.store(3000, Ordering::Relaxed);
        deadlines.other_ms.store(10_000, Ordering::Relaxed);
        let call = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#;
        let list = br#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#;
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let answer = br#"{"jsonrpc":"2.0","id":"g0:1","result":{}}"#;
        assert_eq!(deadline_of(call, &deadlines), 3000);
        assert_eq!(deadline_of(list, &deadlines), 10_000);
        assert_eq!(deadline_of(note, &deadlines), 0);
        assert_eq!(deadline_of(answer, &deadlines), 0);
    }
}
