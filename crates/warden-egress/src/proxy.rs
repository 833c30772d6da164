//! The proxy itself: one per server, accepting on the listener the sandbox created inside
//! the server's network namespace.
//!
//! Each connection carries one request:
//! - `CONNECT host:port`: the destination must match a TLS entry of the allowlist; the name
//!   is resolved here and addresses in special ranges are dropped (unless the entry is an
//!   IP literal or says `private = true`); the proxy answers `200`, reads the first TLS
//!   record, and only when it is a ClientHello whose SNI equals the `CONNECT` host does it
//!   connect to the destination, send that record and relay bytes both ways.
//! - `METHOD http://host[:port]/path`: the destination must match an `http://` entry; the
//!   request is forwarded with its `Host` header set to the URL's authority and
//!   `Connection: close`, its body (`Content-Length` only) and nothing more, and the
//!   response relayed until the destination closes.
//!
//! Everything is bounded: the request head (16 KiB, and a time), concurrent connections per
//! server, bytes per connection, idle time and lifetime. Every attempt produces one
//! [`EgressEvent`], allowed or refused, when it ends, even when the proxy is dropped with
//! the connection still open.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use warden_config::egress::{EgressAllowlist, EgressKind, EgressRule, Host, normalize_host};

use crate::event::{Decision, EgressEvent, EgressSink};
use crate::resolve::Resolver;
use crate::sni::{Hello, MAX_RECORD, parse_client_hello};
use warden_net::special_range;

/// Largest request head the proxy reads.
pub const MAX_HEAD: usize = 16 * 1024;

/// Most addresses of one name the proxy tries.
const MAX_ADDRESSES: usize = 4;

/// Per-server limits of the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressLimits {
    /// Connections open at once (default 32); more are refused with `503`.
    pub max_connections: usize,
    /// Bytes one connection may carry, both ways together (default 256 MiB).
    pub max_bytes: u64,
    /// How long one connection may last (default 10 minutes).
    pub max_duration: Duration,
    /// How long a connection may carry nothing either way (default 2 minutes).
    pub idle_timeout: Duration,
    /// How long resolving and connecting to the destination may take (default 10 s).
    pub connect_timeout: Duration,
    /// How long the server may take to send its request head or ClientHello (default 10 s).
    pub head_timeout: Duration,
}

impl Default for EgressLimits {
    fn default() -> Self {
        Self {
            max_connections: 32,
            max_bytes: 256 << 20,
            max_duration: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            head_timeout: Duration::from_secs(10),
        }
    }
}

/// The egress proxy of one server.
#[derive(Debug)]
pub struct EgressProxy {
    server: Arc<str>,
    allowlist: EgressAllowlist,
    limits: EgressLimits,
    resolver: Arc<dyn Resolver>,
    sink: SinkHolder,
    permits: Arc<Semaphore>,
    /// Refusals for too many connections not reported yet, and when one last was.
    busy: Mutex<(u64, Option<Instant>)>,
    /// Refusals reported in the current second, and those folded since the last report.
    refusals: Mutex<Refusals>,
}

/// Most refused attempts reported one by one per second; beyond it they are counted and
/// the count rides on the next report, so a server looping on refused requests cannot
/// flood the audit log.
pub const MAX_REFUSALS_REPORTED_PER_SECOND: u32 = 20;

#[derive(Debug, Default)]
struct Refusals {
    window: Option<Instant>,
    reported: u32,
    folded: u64,
}

/// The sink, with a `Debug` that does not try to print a closure.
struct SinkHolder(EgressSink);

impl std::fmt::Debug for SinkHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EgressSink")
    }
}

/// The running proxy; dropping it stops accepting and cuts the open connections (each
/// still reported).
#[derive(Debug)]
pub struct ProxyTask {
    handle: JoinHandle<()>,
}

impl Drop for ProxyTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Why one request did not go through.
enum Stop {
    /// Refused before anything reached the destination: the status to answer with (none
    /// once `200` was sent) and the reason.
    Refused(Option<u16>, String),
    /// Allowed, then failed (the destination, a limit, the client).
    Failed(String),
}

impl EgressProxy {
    /// A proxy for `server` allowing what `allowlist` lists.
    pub fn new(
        server: &str,
        allowlist: EgressAllowlist,
        limits: EgressLimits,
        resolver: Arc<dyn Resolver>,
        sink: EgressSink,
    ) -> Arc<Self> {
        Arc::new(Self {
            server: Arc::from(server),
            allowlist,
            limits,
            resolver,
            sink: SinkHolder(sink),
            permits: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            busy: Mutex::new((0, None)),
            refusals: Mutex::new(Refusals::default()),
        })
    }

    /// Starts accepting on `listener` (from
    /// `warden_sandbox::Confinement::take_proxy_listener`). Needs a tokio runtime.
    pub fn serve(self: &Arc<Self>, listener: std::net::TcpListener) -> std::io::Result<ProxyTask> {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let proxy = Arc::clone(self);
        let handle = tokio::spawn(async move { proxy.accept_loop(listener).await });
        Ok(ProxyTask { handle })
    }

    async fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        let mut tasks = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => match Arc::clone(&self.permits).try_acquire_owned() {
                        Ok(permit) => {
                            let proxy = Arc::clone(&self);
                            tasks.spawn(async move {
                                proxy.handle(stream).await;
                                drop(permit);
                            });
                        }
                        Err(_) => self.refuse_busy(&stream),
                    },
                    Err(error) => {
                        tracing::warn!(server = %self.server, "egress proxy: accept failed: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
    }

    /// Answers `503` without blocking, and reports at most one such refusal a second (with
    /// the count of those folded into it).
    fn refuse_busy(&self, stream: &TcpStream) {
        let limit = self.limits.max_connections;
        let text = format!(
            "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\
             X-Warden-Egress: more than {limit} connections at once\r\n\r\n"
        );
        let _ = stream.try_write(text.as_bytes());
        let folded = {
            let mut busy = crate::lock(&self.busy);
            busy.0 += 1;
            let due = busy
                .1
                .is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
            if !due {
                return;
            }
            busy.1 = Some(Instant::now());
            std::mem::take(&mut busy.0)
        };
        let mut event = self.event();
        event.decision = Decision::Refused;
        event.error = Some(format!(
            "refused {folded} connection(s): more than {limit} open at once"
        ));
        (self.sink.0)(&event);
    }

    /// Whether a refusal is reported now (at most [`MAX_REFUSALS_REPORTED_PER_SECOND`]);
    /// when it is, the count of those folded since is added to its error.
    fn may_report_refusal(&self, event: &mut EgressEvent) -> bool {
        let mut refusals = crate::lock(&self.refusals);
        let now = Instant::now();
        if refusals
            .window
            .is_none_or(|start| now.duration_since(start) >= Duration::from_secs(1))
        {
            refusals.window = Some(now);
            refusals.reported = 0;
        }
        if refusals.reported >= MAX_REFUSALS_REPORTED_PER_SECOND {
            refusals.folded += 1;
            return false;
        }
        refusals.reported += 1;
        let folded = std::mem::take(&mut refusals.folded);
        if folded > 0
            && let Some(error) = event.error.as_mut()
        {
            error.push_str(&format!(
                " ({folded} earlier refusal(s) over {MAX_REFUSALS_REPORTED_PER_SECOND} a \
                 second were not reported one by one)"
            ));
        }
        true
    }

    fn event(&self) -> EgressEvent {
        EgressEvent::unread(Arc::clone(&self.server), now_ms())
    }

    async fn handle(&self, mut client: TcpStream) {
        let started = Instant::now();
        let mut report = Report {
            event: Some(self.event()),
            proxy: self,
            started,
            counters: Arc::new(Counters::default()),
        };
        let counters = Arc::clone(&report.counters);
        let outcome = match tokio::time::timeout(
            self.limits.max_duration,
            self.serve_one(&mut client, &mut report, &counters),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err(Stop::Failed(format!(
                "cut after its time limit of {} s",
                self.limits.max_duration.as_secs()
            ))),
        };
        let Some(event) = report.event.as_mut() else {
            return;
        };
        match outcome {
            Ok(()) => {}
            Err(Stop::Refused(status, reason)) => {
                event.decision = Decision::Refused;
                if let Some(status) = status {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(1),
                        respond(&mut client, status, &reason),
                    )
                    .await;
                }
                event.error = Some(reason);
            }
            Err(Stop::Failed(reason)) => event.error = Some(reason),
        }
    }

    async fn serve_one(
        &self,
        client: &mut TcpStream,
        report: &mut Report<'_>,
        counters: &Arc<Counters>,
    ) -> Result<(), Stop> {
        let (head, rest) = tokio::time::timeout(self.limits.head_timeout, read_head(client))
            .await
            .map_err(|_| {
                Stop::Refused(
                    Some(408),
                    format!(
                        "no complete request within {} s",
                        self.limits.head_timeout.as_secs()
                    ),
                )
            })??;
        let request = Request::parse(&head).map_err(|why| Stop::Refused(Some(400), why))?;
        let event = report.event_mut();
        event.method.clone_from(&request.method);
        event.host = request.host_text.clone();
        event.port = request.port;
        let host = normalize_host(&request.host_text)
            .map_err(|why| Stop::Refused(Some(400), format!("{:?}: {why}", request.host_text)))?;
        event.host = host.to_string();
        let kind = request.kind();
        let Some(rule) = self.allowlist.find(kind, &host, request.port) else {
            return Err(Stop::Refused(
                Some(403),
                self.not_listed(kind, &host, request.port),
            ));
        };
        event.rule = Some(rule.text.clone());
        let addresses = self.addresses(&host, rule).await?;
        match kind {
            EgressKind::Tls => {
                self.tunnel(
                    client,
                    rest,
                    &host,
                    request.port,
                    &addresses,
                    report,
                    counters,
                )
                .await
            }
            EgressKind::Http => {
                self.forward(client, &request, rest, &addresses, report, counters)
                    .await
            }
        }
    }

    fn not_listed(&self, kind: EgressKind, host: &Host, port: u16) -> String {
        let how = match kind {
            EgressKind::Tls => "TLS (CONNECT)",
            EgressKind::Http => "plain HTTP",
        };
        let hint = match host {
            Host::Ip(_) => " (an IP literal is refused unless an entry names that address)",
            Host::Name(_) => "",
        };
        format!(
            "{how} to {host}:{port} is not in the egress allowlist of server `{}`{hint}",
            self.server
        )
    }

    /// The addresses to try: the IP literal, or the name resolved here with special ranges
    /// dropped unless the entry allows them.
    async fn addresses(&self, host: &Host, rule: &EgressRule) -> Result<Vec<IpAddr>, Stop> {
        let name = match host {
            Host::Ip(ip) => return Ok(vec![*ip]),
            Host::Name(name) => name,
        };
        let resolved =
            tokio::time::timeout(self.limits.connect_timeout, self.resolver.resolve(name))
                .await
                .map_err(|_| Stop::Refused(Some(504), format!("resolving {name} timed out")))?
                .map_err(|error| {
                    Stop::Refused(Some(502), format!("resolving {name} failed: {error}"))
                })?;
        if rule.private {
            return Ok(resolved.into_iter().take(MAX_ADDRESSES).collect());
        }
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for ip in resolved {
            match special_range(ip) {
                None => kept.push(ip),
                Some(range) => dropped.push(format!("{ip} ({range})")),
            }
        }
        if kept.is_empty() {
            return Err(Stop::Refused(
                Some(403),
                if dropped.is_empty() {
                    format!("{name} has no address")
                } else {
                    format!(
                        "{name} resolves to {} only, which the allowlist entry does not allow \
                         (an entry with `private = true` would)",
                        dropped.join(", ")
                    )
                },
            ));
        }
        kept.truncate(MAX_ADDRESSES);
        Ok(kept)
    }

    async fn connect(
        &self,
        addresses: &[IpAddr],
        port: u16,
        report: &mut Report<'_>,
    ) -> Result<TcpStream, Stop> {
        let mut last = String::from("no address to try");
        for ip in addresses {
            let address = SocketAddr::new(*ip, port);
            report.event_mut().address = Some(address);
            match tokio::time::timeout(self.limits.connect_timeout, TcpStream::connect(address))
                .await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(error)) => last = format!("connecting to {address} failed: {error}"),
                Err(_) => last = format!("connecting to {address} timed out"),
            }
        }
        Err(Stop::Failed(last))
    }

    #[allow(clippy::too_many_arguments)]
    async fn tunnel(
        &self,
        client: &mut TcpStream,
        mut hello: Vec<u8>,
        host: &Host,
        port: u16,
        addresses: &[IpAddr],
        report: &mut Report<'_>,
        counters: &Arc<Counters>,
    ) -> Result<(), Stop> {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .map_err(|e| Stop::Refused(None, format!("the server went away: {e}")))?;
        let sni = tokio::time::timeout(self.limits.head_timeout, async {
            loop {
                match parse_client_hello(&hello) {
                    Hello::ClientHello(name) => return Ok(name),
                    Hello::Invalid(why) => return Err(why.to_owned()),
                    Hello::Incomplete(need) => {
                        let have = hello.len();
                        hello.resize(need.min(MAX_RECORD), 0);
                        let n = client
                            .read(&mut hello[have..])
                            .await
                            .map_err(|e| format!("reading the ClientHello failed: {e}"))?;
                        hello.truncate(have + n);
                        if n == 0 {
                            return Err("the server closed before its ClientHello".to_owned());
                        }
                    }
                }
            }
        })
        .await
        .map_err(|_| Stop::Refused(None, "no ClientHello in time".to_owned()))?
        .map_err(|why| Stop::Refused(None, why))?;
        match (host, sni.as_deref()) {
            (Host::Name(name), Some(sni)) if sni == name.as_str() => {}
            (Host::Ip(_), None) => {}
            (_, None) => {
                return Err(Stop::Refused(
                    None,
                    format!("the ClientHello names no server (SNI) for CONNECT {host}"),
                ));
            }
            (_, Some(sni)) => {
                return Err(Stop::Refused(
                    None,
                    format!("the ClientHello's SNI {sni:?} differs from the CONNECT host {host}"),
                ));
            }
        }
        let mut upstream = self.connect(addresses, port, report).await?;
        report.event_mut().decision = Decision::Allowed;
        upstream
            .write_all(&hello)
            .await
            .map_err(|e| Stop::Failed(format!("sending the ClientHello failed: {e}")))?;
        counters.up.fetch_add(hello.len() as u64, Ordering::Relaxed);
        self.relay(client, &mut upstream, counters, true).await
    }

    async fn forward(
        &self,
        client: &mut TcpStream,
        request: &Request,
        rest: Vec<u8>,
        addresses: &[IpAddr],
        report: &mut Report<'_>,
        counters: &Arc<Counters>,
    ) -> Result<(), Stop> {
        let body = request.body_length()?;
        if rest.len() as u64 > body {
            return Err(Stop::Refused(
                Some(400),
                "bytes after the request's body: one request per connection".to_owned(),
            ));
        }
        let mut upstream = self.connect(addresses, request.port, report).await?;
        report.event_mut().decision = Decision::Allowed;
        let head = request.forwarded_head();
        upstream
            .write_all(&head)
            .await
            .map_err(|e| Stop::Failed(format!("sending the request failed: {e}")))?;
        upstream
            .write_all(&rest)
            .await
            .map_err(|e| Stop::Failed(format!("sending the request failed: {e}")))?;
        counters
            .up
            .fetch_add((head.len() + rest.len()) as u64, Ordering::Relaxed);
        // The rest of the body, exactly, then nothing more from the server.
        let remaining = body - rest.len() as u64;
        let mut limited = (&mut *client).take(remaining);
        self.copy(&mut limited, &mut upstream, &counters.up, counters)
            .await?;
        self.copy(&mut upstream, client, &counters.down, counters)
            .await
    }

    /// Relays both ways until both sides are done, within the limits.
    async fn relay(
        &self,
        client: &mut TcpStream,
        upstream: &mut TcpStream,
        counters: &Arc<Counters>,
        _tunnel: bool,
    ) -> Result<(), Stop> {
        let (mut client_read, mut client_write) = client.split();
        let (mut up_read, mut up_write) = upstream.split();
        let up = async {
            let result = self
                .copy(&mut client_read, &mut up_write, &counters.up, counters)
                .await;
            let _ = up_write.shutdown().await;
            result
        };
        let down = async {
            let result = self
                .copy(&mut up_read, &mut client_write, &counters.down, counters)
                .await;
            let _ = client_write.shutdown().await;
            result
        };
        let (a, b) = tokio::join!(up, down);
        a.and(b)
    }

    /// Copies `from` to `to`, counting into `count`, within the byte and idle limits.
    async fn copy<R, W>(
        &self,
        from: &mut R,
        to: &mut W,
        count: &AtomicU64,
        counters: &Counters,
    ) -> Result<(), Stop>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match tokio::time::timeout(self.limits.idle_timeout, from.read(&mut buf)).await
            {
                Err(_) => {
                    return Err(Stop::Failed(format!(
                        "idle for {} s",
                        self.limits.idle_timeout.as_secs()
                    )));
                }
                Ok(Err(error)) => return Err(Stop::Failed(format!("relay failed: {error}"))),
                Ok(Ok(0)) => return Ok(()),
                Ok(Ok(n)) => n,
            };
            let allowed = self.limits.max_bytes.saturating_sub(counters.total());
            if n as u64 > allowed {
                // Up to the limit, then the cut.
                let part = usize::try_from(allowed).unwrap_or(n).min(n);
                if to.write_all(&buf[..part]).await.is_ok() {
                    count.fetch_add(part as u64, Ordering::Relaxed);
                }
                return Err(Stop::Failed(format!(
                    "cut at its byte limit of {} bytes",
                    self.limits.max_bytes
                )));
            }
            to.write_all(&buf[..n])
                .await
                .map_err(|error| Stop::Failed(format!("relay failed: {error}")))?;
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// Bytes relayed so far on one connection.
#[derive(Debug, Default)]
struct Counters {
    up: AtomicU64,
    down: AtomicU64,
}

impl Counters {
    fn total(&self) -> u64 {
        self.up
            .load(Ordering::Relaxed)
            .saturating_add(self.down.load(Ordering::Relaxed))
    }
}

/// The event of one connection, written when it is dropped: once, however it ends.
struct Report<'a> {
    event: Option<EgressEvent>,
    proxy: &'a EgressProxy,
    started: Instant,
    counters: Arc<Counters>,
}

impl Report<'_> {
    fn event_mut(&mut self) -> &mut EgressEvent {
        // Taken only in Drop.
        self.event
            .get_or_insert_with(|| EgressEvent::unread(Arc::from(""), now_ms()))
    }
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if let Some(mut event) = self.event.take() {
            event.bytes_up = self.counters.up.load(Ordering::Relaxed);
            event.bytes_down = self.counters.down.load(Ordering::Relaxed);
            event.duration = self.started.elapsed();
            if event.decision == Decision::Refused && event.error.is_none() {
                // Dropped before a decision (the proxy stopped): say so.
                event.error = Some("the proxy stopped before a decision".to_owned());
            }
            if event.decision == Decision::Refused && !self.proxy.may_report_refusal(&mut event) {
                return;
            }
            (self.proxy.sink.0)(&event);
        }
    }
}

/// One parsed request head.
#[derive(Debug)]
struct Request {
    method: String,
    /// The path and query for a forwarded request.
    path: String,
    version: String,
    host_text: String,
    port: u16,
    headers: Vec<(String, String)>,
}

impl Request {
    fn parse(head: &[u8]) -> Result<Request, String> {
        let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
        // A bare CR or LF inside a line could end it early for the destination (a header
        // smuggled past the rewrite): refused.
        if text
            .split("\r\n")
            .any(|line| line.contains(|c: char| c.is_control() && c != '\t'))
        {
            return Err("a bare CR, LF or control character in the request head".to_owned());
        }
        let mut lines = text.split("\r\n");
        let line = lines.next().unwrap_or_default();
        let mut parts = line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("malformed request line {line:?}"));
        };
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(format!("malformed method {method:?}"));
        }
        if version != "HTTP/1.1" && version != "HTTP/1.0" {
            return Err(format!("unsupported HTTP version {version:?}"));
        }
        let mut headers = Vec::new();
        for line in lines.filter(|l| !l.is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                return Err(format!("malformed header line {line:?}"));
            };
            if name.is_empty() || name.contains(|c: char| c.is_whitespace()) {
                return Err(format!("malformed header name {name:?}"));
            }
            headers.push((name.to_owned(), value.trim().to_owned()));
        }
        let (authority, path, default_port) = if method == "CONNECT" {
            (target, String::new(), None)
        } else {
            let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
                return Err(if strip_prefix_ignore_case(target, "https://").is_some() {
                    "an https:// URL goes through CONNECT, not as a forwarded request".to_owned()
                } else {
                    format!("the proxy forwards absolute http:// URLs only, not {target:?}")
                });
            };
            let split = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, path) = rest.split_at(split);
            let path = if path.starts_with('/') {
                path.to_owned()
            } else {
                format!("/{path}")
            };
            (authority, path, Some(80))
        };
        if authority.contains('@') {
            return Err("a user name in the destination is not accepted".to_owned());
        }
        let (host_text, port) = split_authority(authority, default_port)?;
        Ok(Request {
            method: method.to_owned(),
            path,
            version: version.to_owned(),
            host_text,
            port,
            headers,
        })
    }

    fn kind(&self) -> EgressKind {
        if self.method == "CONNECT" {
            EgressKind::Tls
        } else {
            EgressKind::Http
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body's length: `Content-Length`, or 0; a chunked upload is refused (the proxy
    /// forwards one request per connection and must know where it ends).
    fn body_length(&self) -> Result<u64, Stop> {
        if self.header("transfer-encoding").is_some() {
            return Err(Stop::Refused(
                Some(411),
                "a request body without Content-Length (chunked) is not forwarded".to_owned(),
            ));
        }
        let lengths: Vec<&str> = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.as_str())
            .collect();
        match lengths.as_slice() {
            [] => Ok(0),
            [one] => one
                .parse()
                .map_err(|_| Stop::Refused(Some(400), format!("bad Content-Length {one:?}"))),
            _ => Err(Stop::Refused(
                Some(400),
                "more than one Content-Length".to_owned(),
            )),
        }
    }

    /// The head sent to the destination: origin-form target, `Host` set to the URL's
    /// authority, hop-by-hop and proxy headers dropped, `Connection: close`.
    fn forwarded_head(&self) -> Vec<u8> {
        const DROPPED: [&str; 6] = [
            "host",
            "connection",
            "proxy-connection",
            "proxy-authorization",
            "keep-alive",
            "upgrade",
        ];
        let mut out = format!("{} {} {}\r\n", self.method, self.path, self.version);
        let host = if self.port == 80 {
            self.host_text.clone()
        } else {
            format!("{}:{}", self.host_text, self.port)
        };
        out.push_str(&format!("Host: {host}\r\n"));
        for (name, value) in &self.headers {
            if DROPPED.iter().any(|d| name.eq_ignore_ascii_case(d)) {
                continue;
            }
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    if text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix) {
        Some(&text[prefix.len()..])
    } else {
        None
    }
}

/// `host:port`, `[v6]:port`; the port is required unless `default` gives one.
fn split_authority(text: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("malformed destination {text:?}"))?;
        (format!("[{inside}]"), after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host.to_owned(), Some(port)),
            Some(_) => return Err(format!("an IPv6 destination needs brackets: {text:?}")),
            None => (text.to_owned(), None),
        }
    };
    let port = match (port, default) {
        (Some(port), _) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("bad port in {text:?}"))?,
        (None, Some(default)) => default,
        (None, None) => return Err(format!("CONNECT {text:?} names no port")),
    };
    if host.is_empty() {
        return Err(format!("no host in {text:?}"));
    }
    Ok((host, port))
}

/// Reads up to the end of the request head; returns the head and the bytes after it.
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), Stop> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| Stop::Refused(None, format!("reading the request failed: {e}")))?;
        if n == 0 {
            return Err(Stop::Refused(
                None,
                "the server closed before a complete request".to_owned(),
            ));
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + end + 4;
            let rest = buf.split_off(end);
            buf.truncate(end - 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(Stop::Refused(
                Some(431),
                format!("the request head is longer than {MAX_HEAD} bytes"),
            ));
        }
    }
}

async fn respond(client: &mut TcpStream, status: u16, reason: &str) -> std::io::Result<()> {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        411 => "Length Required",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let body = format!("warden egress proxy: {reason}\n");
    let text = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(text.as_bytes()).await?;
    client.shutdown().await
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_into_destination_and_kind() {
        let r = Request::parse(b"CONNECT api.example.test:443 HTTP/1.1\r\nHost: x").unwrap();
        assert_eq!(
            (r.kind(), r.host_text.as_str(), r.port),
            (EgressKind::Tls, "api.example.test", 443)
        );
        let r = Request::parse(b"GET http://h.test:8080/a?b HTTP/1.1\r\nHost: evil.test").unwrap();
        assert_eq!(
            (r.kind(), r.port, r.path.as_str()),
            (EgressKind::Http, 8080, "/a?b")
        );
        let head = String::from_utf8(r.forwarded_head()).unwrap();
        assert!(
            head.starts_with("GET /a?b HTTP/1.1\r\nHost: h.test:8080\r\n"),
            "{head}"
        );
        assert!(!head.contains("evil.test"), "{head}");
        assert!(head.ends_with("Connection: close\r\n\r\n"));
        let r = Request::parse(b"GET http://h.test HTTP/1.1").unwrap();
        assert_eq!((r.port, r.path.as_str()), (80, "/"));
        let r = Request::parse(b"CONNECT [::1]:443 HTTP/1.1").unwrap();
        assert_eq!(r.host_text, "[::1]");
        for bad in [
            &b"CONNECT host.test HTTP/1.1"[..],
            b"GET /relative HTTP/1.1",
            b"GET https://h.test/ HTTP/1.1",
            b"GET http://user@h.test/ HTTP/1.1",
            b"CONNECT ::1:443 HTTP/1.1",
            b"get http://h.test/ HTTP/1.1",
            b"GET http://h.test/ HTTP/2",
            b"GET http://h.test/ HTTP/1.1\r\nX-A: a\nHost: evil.test",
            b"GET http://h.test/ HTTP/1.1\r\nX-A: a\rHost: evil.test",
            b"GET http://h.test/ HTTP/1.1\r\n folded: value",
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
