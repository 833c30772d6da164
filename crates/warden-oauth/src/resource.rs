//! Warden as an OAuth 2.1 resource server (`warden serve --http` with `[serve.auth]`): is
//! this bearer token meant for Warden, and who does it speak for?
//!
//! The MCP authorization specification (2025-11-25 and 2026-07-28) asks a server to
//! validate each access token for itself: issued by an authorization server it trusts,
//! for its own resource (the audience), in its time window, with the scopes it needs. Two
//! ways are offered, per issuer:
//!
//! - **JWT access tokens** (RFC 9068 shape): the signature by the issuer's keys (its JWKS,
//!   from `jwks_uri`, configured or read from its RFC 8414 metadata; see [`crate::jwt`] for
//!   the algorithms), then the claims. The key set is cached; a token naming an unknown
//!   `kid` makes Warden read the set again, at most once per `jwks_refresh` interval (a
//!   flood of made-up key ids cannot make Warden hammer the issuer), and a cached set is
//!   read again after `jwks_max_age`, in the background while its keys still judge the
//!   tokens that name them. A token without `kid` is checked only when exactly
//!   one key of the set serves its algorithm (otherwise refused, naming why): Warden does
//!   not try a token against every key. Every fetch is capped in size and time (warden-net,
//!   [`crate::fetch`]); redirects are refused.
//! - **Introspection** (RFC 7662) for opaque tokens, at the issuers that have it configured,
//!   authenticated with the client credentials configured for it. Answers are cached by the
//!   token's SHA-256 for a short time (never past the token's `exp`), in bounded maps:
//!   refusals apart, in an eighth of the room, so junk tokens cannot evict valid answers.
//!   At most `introspections_in_flight` requests run at once; past that a token that is
//!   not cached gets 503 rather than a queue.
//!
//! The claims, either way: `iss` equal to a configured issuer byte for byte; `aud` equal to
//! (or, as a list, containing) Warden's own resource URL, byte for byte (a token minted
//! for another server, including one of Warden's upstream servers, is refused); `exp`
//! required and in the future, `nbf` (when present) in the past, both with a small leeway;
//! `sub` or `client_id` present (a client's own token may lack `sub`: it then has no
//! subject, never the client id in its place, so a rule naming a subject cannot match a
//! client of that name); then the required scopes
//! (`scope`, space-separated, or `scp`). A token that fails any of these is `invalid_token`
//! (401); one that passes all but the scopes is `insufficient_scope` (403).
//!
//! Nothing here logs or returns a token; messages quote only claims, shortened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use url::Url;

use crate::error::OAuthError;
use crate::error::excerpt;
use crate::fetch::{Basic, Fetcher};
use crate::jwt::{self, Jwk, Jwt};
use crate::store::Secret;

/// Default allowance for clock differences on `exp` and `nbf`.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
/// Default shortest gap between two reads of an issuer's key set.
pub const DEFAULT_JWKS_REFRESH: Duration = Duration::from_secs(60);
/// Default age after which a cached key set is read again.
pub const DEFAULT_JWKS_MAX_AGE: Duration = Duration::from_secs(3600);
/// Default lifetime of a cached introspection answer.
pub const DEFAULT_INTROSPECTION_TTL: Duration = Duration::from_secs(60);
/// Default number of introspection answers kept.
pub const DEFAULT_INTROSPECTION_CACHE: usize = 1024;
/// Default number of introspection requests in flight at once; a request past it gets 503.
pub const DEFAULT_INTROSPECTIONS_IN_FLIGHT: usize = 16;
/// The share of the introspection cache refusals may take (one in eight entries): a flood
/// of junk tokens fills that share only, never the room of valid answers.
const REFUSED_SHARE: usize = 8;

/// The resource server's settings.
#[derive(Debug, Clone)]
pub struct ResourceSettings {
    /// Warden's own resource identifier: the URL clients reach the MCP endpoint at
    /// (`https://warden.example/mcp`). Tokens must name it in `aud`.
    pub resource: String,
    /// The authorization servers whose tokens are accepted.
    pub issuers: Vec<IssuerSettings>,
    /// Scopes every token must carry.
    pub required_scopes: Vec<String>,
    /// Allowance for clock differences.
    pub leeway: Duration,
    /// Shortest gap between two reads of one issuer's key set.
    pub jwks_refresh: Duration,
    /// Age after which a cached key set is read again.
    pub jwks_max_age: Duration,
    /// Lifetime of a cached introspection answer.
    pub introspection_ttl: Duration,
    /// Introspection answers kept at most (refusals: an eighth of them).
    pub introspection_cache: usize,
    /// Introspection requests in flight at once, at most; past it, 503.
    pub introspections_in_flight: usize,
}

impl ResourceSettings {
    /// Settings with the defaults for everything but the resource and issuers.
    pub fn new(resource: impl Into<String>, issuers: Vec<IssuerSettings>) -> ResourceSettings {
        ResourceSettings {
            resource: resource.into(),
            issuers,
            required_scopes: Vec::new(),
            leeway: DEFAULT_LEEWAY,
            jwks_refresh: DEFAULT_JWKS_REFRESH,
            jwks_max_age: DEFAULT_JWKS_MAX_AGE,
            introspection_ttl: DEFAULT_INTROSPECTION_TTL,
            introspection_cache: DEFAULT_INTROSPECTION_CACHE,
            introspections_in_flight: DEFAULT_INTROSPECTIONS_IN_FLIGHT,
        }
    }
}

/// One trusted authorization server.
#[derive(Debug, Clone)]
pub struct IssuerSettings {
    /// Its issuer identifier, exactly as its tokens and metadata say it.
    pub issuer: String,
    /// Its key set's URL; when unset, the `jwks_uri` of its metadata.
    pub jwks_uri: Option<String>,
    /// Introspection, for opaque tokens: where and as whom.
    pub introspection: Option<Introspection>,
}

/// How Warden introspects tokens at one issuer.
#[derive(Debug, Clone)]
pub struct Introspection {
    /// The endpoint; when unset, the `introspection_endpoint` of the issuer's metadata.
    pub endpoint: Option<String>,
    /// Warden's client id there.
    pub client_id: String,
    /// Its secret (HTTP Basic, `client_secret_basic`).
    pub client_secret: Secret,
}

/// Who a valid token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// The issuer.
    pub issuer: String,
    /// The subject (`sub`), if the token names one (a client's own token may not).
    pub subject: Option<String>,
    /// The client the token was issued to (`client_id`, else `azp`), if said.
    pub client_id: Option<String>,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// When it expires, in seconds since the Unix epoch.
    pub expires_at: Option<u64>,
}

/// Why a request's token is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Not a valid token for Warden (401, `error="invalid_token"`).
    Invalid(String),
    /// Valid, but without these required scopes (403, `error="insufficient_scope"`).
    InsufficientScope {
        /// The required scopes it lacks.
        missing: Vec<String>,
    },
    /// The token cannot be judged now: the issuer's keys or introspection could not be
    /// reached (503).
    Unavailable(String),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::Invalid(reason) => write!(f, "the bearer token is not valid: {reason}"),
            Rejection::InsufficientScope { missing } => write!(
                f,
                "the bearer token lacks the required scope(s): {}",
                missing.join(" ")
            ),
            Rejection::Unavailable(reason) => {
                write!(f, "the bearer token cannot be checked now: {reason}")
            }
        }
    }
}

/// Why a validator cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The resource or an issuer URL is not acceptable.
    #[error(transparent)]
    Url(#[from] OAuthError),
    /// No issuer is configured.
    #[error("no authorization server (issuer) is configured")]
    NoIssuer,
    /// The same issuer is configured twice.
    #[error("the issuer {0} is configured twice")]
    DuplicateIssuer(String),
}

/// Checks bearer tokens for one resource. Shared by every request (`&self`).
pub struct Validator {
    settings: ResourceSettings,
    fetcher: Fetcher,
    /// Shared with the background reads of their key sets.
    issuers: Vec<Arc<IssuerState>>,
    /// The issuers configured for introspection, in order (indices into `issuers`).
    introspecting: Vec<usize>,
    introspected: Mutex<IntrospectionCache>,
    /// One permit per introspection request in flight.
    introspection_permits: tokio::sync::Semaphore,
}

/// Introspection answers by the token's SHA-256: valid ones and refusals apart, so that
/// refusals (which anyone can cause with junk tokens) never take a valid answer's room.
#[derive(Default)]
struct IntrospectionCache {
    valid: HashMap<[u8; 32], Cached>,
    refused: HashMap<[u8; 32], Cached>,
}

struct IssuerState {
    settings: IssuerSettings,
    /// The cached key set; held only to copy or replace it, never across a fetch or a
    /// signature check.
    keys: Mutex<KeyCache>,
    /// Held while the key set is read, so one read is in flight per issuer.
    refresh: tokio::sync::Mutex<()>,
    /// Held while the issuer's metadata is read (once); keeps its endpoints. Apart from
    /// `refresh`, so that an introspection never waits behind a key-set read.
    discovery: tokio::sync::Mutex<Option<Discovered>>,
}

#[derive(Default)]
struct KeyCache {
    keys: Arc<Vec<Jwk>>,
    /// When the key set was last read successfully.
    fetched: Option<Instant>,
    /// When a read of the key set was last tried.
    tried: Option<Instant>,
}

impl KeyCache {
    /// Whether the set was never read, or was read `max_age` or longer ago.
    fn is_old(&self, now: Instant, max_age: Duration) -> bool {
        self.fetched
            .is_none_or(|at| now.duration_since(at) >= max_age)
    }

    /// Whether a read may be tried now: none was tried in the last `gap`.
    fn may_read(&self, now: Instant, gap: Duration) -> bool {
        self.tried.is_none_or(|at| now.duration_since(at) >= gap)
    }
}

/// A copy of the cached key set, and whether it should be read again now.
struct KeySnapshot {
    keys: Arc<Vec<Jwk>>,
    /// A key of the set fits the token.
    fits: bool,
    /// The set is old or lacks the token's key, and the refresh interval has passed.
    refetch: bool,
}

#[derive(Clone)]
struct Discovered {
    jwks_uri: Option<String>,
    introspection_endpoint: Option<String>,
}

struct Cached {
    until: Instant,
    answer: Result<TokenClaims, Rejection>,
}

/// Reads the key set again (the caller holds `state.refresh`) and caches it; on
/// failure the cached set stays in use, if there is one.
async fn refetch(fetcher: &Fetcher, state: &IssuerState) -> Result<Arc<Vec<Jwk>>, Rejection> {
    let poisoned = || Rejection::Unavailable("the key cache is unusable".into());
    state.keys.lock().map_err(|_| poisoned())?.tried = Some(Instant::now());
    let fetched = fetch_keys(fetcher, state).await;
    let mut cache = state.keys.lock().map_err(|_| poisoned())?;
    match fetched {
        Ok(keys) => {
            cache.keys = Arc::new(keys);
            cache.fetched = Some(Instant::now());
        }
        Err(error) if cache.keys.is_empty() => {
            return Err(Rejection::Unavailable(error.to_string()));
        }
        Err(error) => {
            tracing::warn!(
                issuer = %state.settings.issuer,
                "reading the key set again failed, the cached keys stay in use: {error}"
            );
        }
    }
    Ok(Arc::clone(&cache.keys))
}

async fn fetch_keys(fetcher: &Fetcher, state: &IssuerState) -> Result<Vec<Jwk>, OAuthError> {
    let uri = match &state.settings.jwks_uri {
        Some(uri) => uri.clone(),
        None => discover(fetcher, state)
            .await?
            .jwks_uri
            .ok_or_else(|| OAuthError::Malformed {
                what: "the authorization-server metadata",
                reason: format!(
                    "{} publishes no jwks_uri (configure `jwks_uri`, or introspection)",
                    state.settings.issuer
                ),
            })?,
    };
    let url = fetcher.check_url("the jwks_uri", &uri)?;
    match fetcher.get_json("the issuer's key set", &url).await? {
        Ok(document) => {
            let keys = jwt::parse_jwks(&document);
            if keys.is_empty() {
                return Err(OAuthError::Malformed {
                    what: "the issuer's key set",
                    reason: "it holds no RS256, ES256 or EdDSA signing key".into(),
                });
            }
            Ok(keys)
        }
        Err(status) => Err(OAuthError::Status {
            what: "the issuer's key set",
            status,
            detail: String::new(),
        }),
    }
}

/// The issuer's metadata endpoints (read once; the issuer is checked by discovery).
async fn discover(fetcher: &Fetcher, state: &IssuerState) -> Result<Discovered, OAuthError> {
    let mut discovered = state.discovery.lock().await;
    if let Some(found) = discovered.as_ref() {
        return Ok(found.clone());
    }
    let metadata = crate::discovery::server_metadata(fetcher, &state.settings.issuer).await?;
    let found = Discovered {
        jwks_uri: metadata.jwks_uri,
        introspection_endpoint: metadata.introspection_endpoint,
    };
    *discovered = Some(found.clone());
    Ok(found)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

impl Validator {
    /// A validator for `settings`; URLs are checked now (https, or http to loopback).
    pub fn new(settings: ResourceSettings) -> Result<Validator, SettingsError> {
        let fetcher = Fetcher::new(false)?;
        Url::parse(&settings.resource).map_err(|error| OAuthError::BadUrl {
            what: "Warden's resource URL",
            url: excerpt(settings.resource.as_bytes()),
            reason: error.to_string(),
        })?;
        if settings.issuers.is_empty() {
            return Err(SettingsError::NoIssuer);
        }
        let mut seen: Vec<&str> = Vec::new();
        for issuer in &settings.issuers {
            if seen.contains(&issuer.issuer.as_str()) {
                return Err(SettingsError::DuplicateIssuer(issuer.issuer.clone()));
            }
            seen.push(&issuer.issuer);
            fetcher.check_url("the issuer", &issuer.issuer)?;
            if let Some(uri) = &issuer.jwks_uri {
                fetcher.check_url("the jwks_uri", uri)?;
            }
            if let Some(endpoint) = issuer
                .introspection
                .as_ref()
                .and_then(|i| i.endpoint.as_ref())
            {
                fetcher.check_url("the introspection endpoint", endpoint)?;
            }
        }
        let issuers = settings
            .issuers
            .iter()
            .map(|issuer| {
                Arc::new(IssuerState {
                    settings: issuer.clone(),
                    keys: Mutex::new(KeyCache::default()),
                    refresh: tokio::sync::Mutex::new(()),
                    discovery: tokio::sync::Mutex::new(None),
                })
            })
            .collect();
        let introspecting = settings
            .issuers
            .iter()
            .enumerate()
            .filter(|(_, issuer)| issuer.introspection.is_some())
            .map(|(index, _)| index)
            .collect();
        let permits = settings.introspections_in_flight.max(1);
        Ok(Validator {
            settings,
            fetcher,
            issuers,
            introspecting,
            introspected: Mutex::new(IntrospectionCache::default()),
            introspection_permits: tokio::sync::Semaphore::new(permits),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &ResourceSettings {
        &self.settings
    }

    /// Checks `token` for this resource: who it speaks for, or why it is refused.
    pub async fn validate(&self, token: &str) -> Result<TokenClaims, Rejection> {
        let claims = if jwt::looks_like_jwt(token) {
            self.validate_jwt(token).await?
        } else {
            self.introspect(token).await?
        };
        self.check_scopes(&claims)?;
        Ok(claims)
    }

    async fn validate_jwt(&self, token: &str) -> Result<TokenClaims, Rejection> {
        let jwt = jwt::decode(token).map_err(|error| Rejection::Invalid(error.reason))?;
        let issuer = jwt
            .claims
            .get("iss")
            .and_then(Value::as_str)
            .ok_or_else(|| Rejection::Invalid("it names no issuer (`iss`)".into()))?;
        let Some(state) = self.issuers.iter().find(|s| s.settings.issuer == issuer) else {
            return Err(Rejection::Invalid(format!(
                "it was issued by `{}`, which is not an authorization server Warden trusts",
                excerpt(issuer.as_bytes())
            )));
        };
        if !self.verify_signature(state, &jwt).await? {
            return Err(Rejection::Invalid(format!(
                "its signature is not by a key of `{}`",
                excerpt(issuer.as_bytes())
            )));
        }
        self.check_claims(&state.settings.issuer, &jwt.claims, now_secs())
    }

    /// Whether a key of the issuer's set signed `jwt`; reads the set when it is not cached,
    /// when it is old, or when the token names a key id the cached set lacks (at most once
    /// per `jwks_refresh`). One read is in flight per issuer. A token that a cached key fits
    /// is checked with the cached set at once: an old set is read again in the background,
    /// so no request waits for a slow key-set endpoint when the keys it needs are known;
    /// one that no cached key fits waits for the read. Signatures are checked on a copy of
    /// the set, outside every lock.
    async fn verify_signature(
        &self,
        state: &Arc<IssuerState>,
        jwt: &Jwt,
    ) -> Result<bool, Rejection> {
        let mut snapshot = self.key_snapshot(state, jwt)?;
        if snapshot.refetch {
            if snapshot.fits && !snapshot.keys.is_empty() {
                self.refresh_in_background(state);
            } else {
                let _reading = state.refresh.lock().await;
                // Another request may have read the set while this one waited.
                snapshot = self.key_snapshot(state, jwt)?;
                if snapshot.refetch {
                    snapshot.keys = refetch(&self.fetcher, state).await?;
                }
            }
        }
        if snapshot.keys.is_empty() {
            // The last read failed and the next is not due yet: the token cannot be
            // judged, which is not the client's fault.
            return Err(Rejection::Unavailable(format!(
                "the key set of {} could not be read; Warden tries again at most every {}s",
                state.settings.issuer,
                self.settings.jwks_refresh.as_secs()
            )));
        }
        let fitting: Vec<&Jwk> = snapshot
            .keys
            .iter()
            .filter(|key| key.fits(jwt.kid.as_deref(), jwt.alg))
            .collect();
        if jwt.kid.is_none() && fitting.len() > 1 {
            // Without a key id the issuer leaves Warden to guess: one signature check per
            // token, not one per key of the set.
            return Err(Rejection::Invalid(format!(
                "it names no key id (`kid`), and {} keys of `{}` serve {}: Warden checks a \
                 token with one key only, so the issuer must name it",
                fitting.len(),
                state.settings.issuer,
                jwt.alg.as_str()
            )));
        }
        Ok(fitting.iter().any(|key| key.verify(jwt)))
    }

    /// The cached key set and whether to read it again, judged now.
    fn key_snapshot(&self, state: &IssuerState, jwt: &Jwt) -> Result<KeySnapshot, Rejection> {
        let cache = state
            .keys
            .lock()
            .map_err(|_| Rejection::Unavailable("the key cache is unusable".into()))?;
        let now = Instant::now();
        let fits = cache
            .keys
            .iter()
            .any(|key| key.fits(jwt.kid.as_deref(), jwt.alg));
        let (max_age, gap) = (self.settings.jwks_max_age, self.settings.jwks_refresh);
        Ok(KeySnapshot {
            keys: Arc::clone(&cache.keys),
            fits,
            refetch: (cache.is_old(now, max_age) || !fits) && cache.may_read(now, gap),
        })
    }

    /// Reads `state`'s key set again on a task of its own, unless a read is in flight or
    /// the set was read (or tried) meanwhile; the cached set stays in use until it is
    /// replaced, and a failure is logged. Without a runtime (never in Warden) nothing is
    /// read until a token needs it.
    fn refresh_in_background(&self, state: &Arc<IssuerState>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let state = Arc::clone(state);
        let fetcher = self.fetcher.clone();
        let (max_age, gap) = (self.settings.jwks_max_age, self.settings.jwks_refresh);
        runtime.spawn(async move {
            let Ok(_reading) = state.refresh.try_lock() else {
                return;
            };
            let due = state.keys.lock().is_ok_and(|cache| {
                let now = Instant::now();
                cache.is_old(now, max_age) && cache.may_read(now, gap)
            });
            if due && let Err(rejection) = refetch(&fetcher, &state).await {
                tracing::warn!(
                    issuer = %state.settings.issuer,
                    "reading the key set again failed: {rejection:?}"
                );
            }
        });
    }

    /// The claims checks shared by both ways, at `now` (seconds since the epoch).
    fn check_claims(
        &self,
        issuer: &str,
        claims: &Map<String, Value>,
        now: u64,
    ) -> Result<TokenClaims, Rejection> {
        let invalid = |reason: String| Err(Rejection::Invalid(reason));
        match claims.get("iss").and_then(Value::as_str) {
            Some(iss) if iss == issuer => {}
            Some(iss) => {
                return invalid(format!(
                    "its issuer `{}` is not `{issuer}`",
                    excerpt(iss.as_bytes())
                ));
            }
            None => return invalid("it names no issuer (`iss`)".into()),
        }
        let resource = self.settings.resource.as_str();
        let audience_ok = match claims.get("aud") {
            Some(Value::String(aud)) => aud == resource,
            Some(Value::Array(list)) => list.iter().any(|aud| aud.as_str() == Some(resource)),
            _ => false,
        };
        if !audience_ok {
            let named = match claims.get("aud") {
                Some(Value::String(aud)) => format!("`{}`", excerpt(aud.as_bytes())),
                Some(Value::Array(list)) => list
                    .iter()
                    .take(4)
                    .filter_map(Value::as_str)
                    .map(|aud| format!("`{}`", excerpt(aud.as_bytes())))
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => "no audience".into(),
            };
            return invalid(format!(
                "it is meant for {named}, not for this server ({resource}): Warden accepts \
                 only tokens issued for itself"
            ));
        }
        let leeway = self.settings.leeway.as_secs();
        let time = |name: &str| claims.get(name).and_then(Value::as_u64);
        let expires_at = match time("exp") {
            Some(exp) if exp.saturating_add(leeway) <= now => {
                return invalid(format!("it expired {}s ago", now - exp));
            }
            Some(exp) => Some(exp),
            None if claims.contains_key("exp") => {
                return invalid("its `exp` is not a number of seconds".into());
            }
            None => return invalid("it has no expiry (`exp`)".into()),
        };
        match time("nbf") {
            Some(nbf) if nbf > now.saturating_add(leeway) => {
                return invalid(format!("it is not valid for another {}s", nbf - now));
            }
            None if claims.contains_key("nbf") => {
                return invalid("its `nbf` is not a number of seconds".into());
            }
            _ => {}
        }
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
        };
        let client_id = text("client_id").or_else(|| text("azp"));
        // Never the client id in the subject's place: a client called `alice` is not
        // the user `alice`.
        let subject = text("sub");
        if subject.is_none() && client_id.is_none() {
            return invalid("it names neither a subject (`sub`) nor a client (`client_id`)".into());
        }
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(scope)), _) | (None, Some(Value::String(scope))) => scope
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            (None, Some(Value::Array(list))) => list
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        Ok(TokenClaims {
            issuer: issuer.to_owned(),
            subject,
            client_id,
            scopes,
            expires_at,
        })
    }

    fn check_scopes(&self, claims: &TokenClaims) -> Result<(), Rejection> {
        let missing: Vec<String> = self
            .settings
            .required_scopes
            .iter()
            .filter(|needed| !claims.scopes.contains(needed))
            .cloned()
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Rejection::InsufficientScope { missing })
        }
    }

    /// Introspects an opaque token at the issuers configured for it, in order; the first
    /// that calls it active decides. Answers are cached.
    async fn introspect(&self, token: &str) -> Result<TokenClaims, Rejection> {
        if token.len() > jwt::MAX_TOKEN_BYTES || token.is_empty() {
            return Err(Rejection::Invalid("it is empty or too long".into()));
        }
        if self.introspecting.is_empty() {
            return Err(Rejection::Invalid(
                "it is not a signed JWT, and no issuer is configured for introspection".into(),
            ));
        }
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(cached) = self.cached(&key, now) {
            return cached;
        }
        let Ok(_permit) = self.introspection_permits.try_acquire() else {
            return Err(Rejection::Unavailable(format!(
                "{} token introspections are in flight already (the most Warden makes at \
                 once); try again shortly",
                self.settings.introspections_in_flight.max(1)
            )));
        };
        // Another request may have introspected this token meanwhile.
        if let Some(cached) = self.cached(&key, Instant::now()) {
            return cached;
        }
        let mut answer = Err(Rejection::Invalid(
            "no trusted authorization server knows it as an active token".into(),
        ));
        for state in self
            .introspecting
            .iter()
            .filter_map(|&i| self.issuers.get(i))
        {
            match self.introspect_at(state, token).await {
                Ok(None) => continue,
                Ok(Some(claims)) => {
                    answer = self.check_claims(&state.settings.issuer, &claims, now_secs());
                    break;
                }
                Err(error) => {
                    // Not cached: the next request tries again.
                    return Err(Rejection::Unavailable(error.to_string()));
                }
            }
        }
        let mut until = now + self.settings.introspection_ttl;
        if let Ok(claims) = &answer
            && let Some(exp) = claims.expires_at
        {
            let left = Duration::from_secs(exp.saturating_sub(now_secs()));
            until = until.min(now + left);
        }
        self.remember(key, until, answer.clone(), now);
        answer
    }

    fn cached(&self, key: &[u8; 32], now: Instant) -> Option<Result<TokenClaims, Rejection>> {
        let cache = self.introspected.lock().ok()?;
        cache
            .valid
            .get(key)
            .or_else(|| cache.refused.get(key))
            .filter(|cached| cached.until > now)
            .map(|cached| cached.answer.clone())
    }

    fn remember(
        &self,
        key: [u8; 32],
        until: Instant,
        answer: Result<TokenClaims, Rejection>,
        now: Instant,
    ) {
        let Ok(mut cache) = self.introspected.lock() else {
            return;
        };
        let total = self.settings.introspection_cache.max(1);
        let (map, cap) = if answer.is_ok() {
            (&mut cache.valid, total)
        } else {
            (&mut cache.refused, (total / REFUSED_SHARE).max(1))
        };
        if map.len() >= cap {
            map.retain(|_, cached| cached.until > now);
        }
        if map.len() >= cap {
            // Still full of live answers: the one closest to its end makes room.
            if let Some(soonest) = map
                .iter()
                .min_by_key(|(_, cached)| cached.until)
                .map(|(key, _)| *key)
            {
                map.remove(&soonest);
            }
        }
        map.insert(key, Cached { until, answer });
    }

    /// One introspection request. `Ok(None)`: the issuer says the token is not active.
    async fn introspect_at(
        &self,
        state: &IssuerState,
        token: &str,
    ) -> Result<Option<Map<String, Value>>, OAuthError> {
        let Some(settings) = &state.settings.introspection else {
            return Ok(None);
        };
        let endpoint = match &settings.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => discover(&self.fetcher, state)
                .await?
                .introspection_endpoint
                .ok_or_else(|| OAuthError::Malformed {
                    what: "the authorization-server metadata",
                    reason: format!(
                        "{} publishes no introspection_endpoint",
                        state.settings.issuer
                    ),
                })?,
        };
        let url = self
            .fetcher
            .check_url("the introspection endpoint", &endpoint)?;
        let (_, body) = self
            .fetcher
            .post_form(
                "token introspection",
                &url,
                &[("token", token), ("token_type_hint", "access_token")],
                Basic::Credentials {
                    id: &settings.client_id,
                    secret: settings.client_secret.expose(),
                },
            )
            .await?;
        let Value::Object(mut claims) = body else {
            return Err(OAuthError::Malformed {
                what: "the introspection answer",
                reason: "not a JSON object".into(),
            });
        };
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Ok(None);
        }
        // RFC 7662: `iss` is optional; when absent it is the server asked.
        claims
            .entry("iss")
            .or_insert_with(|| Value::String(state.settings.issuer.clone()));
        Ok(Some(claims))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jwt::tests::Signer;
    use serde_json::json;

    const RESOURCE: &str = "https://warden.example/mcp";
    const ISSUER: &str = "https://as.example";

    fn validator(required: &[&str]) -> Validator {
        let mut settings = ResourceSettings::new(
            RESOURCE,
            vec![IssuerSettings {
                issuer: ISSUER.into(),
                jwks_uri: Some("https://as.example/jwks".into()),
                introspection: None,
            }],
        );
        settings.required_scopes = required.iter().map(|s| (*s).to_owned()).collect();
        Validator::new(settings).unwrap()
    }

    fn claims(extra: Value) -> Map<String, Value> {
        let now = now_secs();
        let mut base = json!({"iss": ISSUER, "aud": RESOURCE, "sub": "alice",
                              "client_id": "app", "exp": now + 300, "scope": "mcp:read"});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                if value.is_null() {
                    base.remove(key);
                } else {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        base.as_object().cloned().unwrap()
    }

    fn check(extra: Value) -> Result<TokenClaims, Rejection> {
        validator(&[]).check_claims(ISSUER, &claims(extra), now_secs())
    }

    fn invalid_because(extra: Value, word: &str) {
        match check(extra.clone()) {
            Err(Rejection::Invalid(reason)) => {
                assert!(reason.contains(word), "{extra}: {reason}");
            }
            other => panic!("{extra}: {other:?}"),
        }
    }

    #[test]
    fn good_claims_name_the_caller() {
        let claims = check(json!({"scope": "mcp:read mcp:write"})).unwrap();
        assert_eq!(claims.subject.as_deref(), Some("alice"));
        assert_eq!(claims.client_id.as_deref(), Some("app"));
        assert_eq!(claims.scopes, vec!["mcp:read", "mcp:write"]);
        let listed = check(json!({"aud": ["other", RESOURCE], "client_id": null,
                                  "azp": "web", "scope": null, "scp": ["a"]}))
        .unwrap();
        assert_eq!(listed.client_id.as_deref(), Some("web"));
        assert_eq!(listed.scopes, vec!["a"]);
        // Within the leeway.
        let now = now_secs();
        assert!(check(json!({"exp": now - 30, "nbf": now + 30})).is_ok());
    }

    #[test]
    fn foreign_expired_and_incomplete_claims_are_refused() {
        let now = now_secs();
        invalid_because(json!({"aud": "https://upstream.example/mcp"}), "meant for");
        invalid_because(
            json!({"aud": [ "https://warden.example/mcp/" ]}),
            "meant for",
        );
        invalid_because(json!({"aud": null}), "no audience");
        invalid_because(json!({"iss": "https://other.example"}), "issuer");
        invalid_because(json!({"iss": null}), "no issuer");
        invalid_because(json!({"exp": now - 61}), "expired");
        invalid_because(json!({"exp": null}), "no expiry");
        invalid_because(json!({"exp": "soon"}), "not a number");
        invalid_because(json!({"nbf": now + 3600}), "not valid for another");
        invalid_because(json!({"sub": null, "client_id": null}), "neither a subject");
        invalid_because(
            json!({"sub": "", "client_id": null, "azp": null}),
            "neither a subject",
        );
    }

    #[test]
    fn a_clients_own_token_without_sub_has_no_subject_not_the_client_id() {
        let claims = check(json!({"sub": null, "client_id": "alice"})).unwrap();
        assert_eq!(claims.subject, None);
        assert_eq!(claims.client_id.as_deref(), Some("alice"));
        // Control: with `sub`, the subject is the token's.
        let claims = check(json!({"sub": "alice", "client_id": "alice"})).unwrap();
        assert_eq!(claims.subject.as_deref(), Some("alice"));
    }

    #[test]
    fn missing_scopes_are_named() {
        let v = validator(&["mcp:read", "mcp:tools"]);
        let claims = v
            .check_claims(ISSUER, &claims(json!({})), now_secs())
            .unwrap();
        assert_eq!(
            v.check_scopes(&claims),
            Err(Rejection::InsufficientScope {
                missing: vec!["mcp:tools".into()]
            })
        );
    }

    #[tokio::test]
    async fn an_unreachable_key_set_makes_tokens_unjudgeable_not_invalid() {
        let settings = ResourceSettings::new(
            RESOURCE,
            vec![IssuerSettings {
                issuer: ISSUER.into(),
                jwks_uri: Some("http://127.0.0.1:9/jwks".into()),
                introspection: None,
            }],
        );
        let v = Validator::new(settings).unwrap();
        let token = Signer::ec().sign("k", &Value::Object(claims(json!({}))));
        // The first request tries to read the set; the second, within the refresh
        // interval, does not, and is still unavailable rather than invalid.
        for _ in 0..2 {
            assert!(matches!(
                v.validate(&token).await,
                Err(Rejection::Unavailable(_))
            ));
        }
    }

    #[tokio::test]
    async fn tokens_of_an_untrusted_issuer_or_algorithm_never_reach_a_key_fetch() {
        // The key set's URL is unreachable: these are refused before it is needed.
        let v = validator(&[]);
        let signer = Signer::ec();
        let token = signer.sign("k", &json!({"iss": "https://evil.example", "sub": "x"}));
        match v.validate(&token).await {
            Err(Rejection::Invalid(reason)) => assert!(reason.contains("not an authorization")),
            other => panic!("{other:?}"),
        }
        let none = format!(
            "{}.{}.",
            jwt::tests::enc(br#"{"alg":"none"}"#),
            jwt::tests::enc(json!({"iss": ISSUER}).to_string().as_bytes())
        );
        assert!(matches!(
            v.validate(&none).await,
            Err(Rejection::Invalid(_))
        ));
        assert!(matches!(
            v.validate("opaque").await,
            Err(Rejection::Invalid(reason)) if reason.contains("introspection")
        ));
    }

    /// A validator whose key set (at a loopback server) is `jwks`.
    async fn validator_with_keys(jwks: Value) -> Validator {
        let (url, _) = key_set_server(jwks, Duration::ZERO).await;
        let settings = ResourceSettings::new(
            RESOURCE,
            vec![IssuerSettings {
                issuer: ISSUER.into(),
                jwks_uri: Some(url),
                introspection: None,
            }],
        );
        Validator::new(settings).unwrap()
    }

    #[tokio::test]
    async fn a_token_without_kid_is_checked_only_when_one_key_serves_its_algorithm() {
        let signer = Signer::ec();
        let claims = Value::Object(claims(json!({})));
        let kidless = signer.sign("", &claims);
        assert!(jwt::decode(&kidless).unwrap().kid.is_none());
        // Control: one P-256 key (and an RSA key, which cannot serve ES256): accepted.
        let v =
            validator_with_keys(json!({"keys": [signer.jwk("k"), Signer::rsa().jwk("r")]})).await;
        let accepted = v.validate(&kidless).await.unwrap();
        assert_eq!(accepted.subject.as_deref(), Some("alice"));
        // Two P-256 keys: Warden would have to guess, and refuses, naming why; the
        // issuer's token naming its key is still accepted.
        let other = Signer::ec();
        let v = validator_with_keys(json!({"keys": [other.jwk("o"), signer.jwk("k")]})).await;
        match v.validate(&kidless).await {
            Err(Rejection::Invalid(reason)) => {
                assert!(reason.contains("names no key id"), "{reason}");
                assert!(reason.contains("2 keys"), "{reason}");
                assert!(
                    reason.contains("Warden checks a token with one key only"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(v.validate(&signer.sign("k", &claims)).await.is_ok());
    }

    /// A loopback introspection endpoint: `good` is active (for Warden, as `alice`), any
    /// other token is not; each answer is held `hold`. Counts the requests.
    async fn introspection_server(
        good: &'static str,
        hold: Duration,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::AsyncReadExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/introspect", listener.local_addr().unwrap());
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 4096];
                    // Read the head and the (short) form body.
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        request.extend_from_slice(&buf[..n]);
                        let text = String::from_utf8_lossy(&request);
                        if let Some((head, body)) = text.split_once("\r\n\r\n") {
                            let length = head
                                .lines()
                                .find_map(|l| {
                                    l.to_ascii_lowercase()
                                        .strip_prefix("content-length:")
                                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                                })
                                .unwrap_or(0);
                            if body.len() >= length {
                                break;
                            }
                        }
                    }
                    tokio::time::sleep(hold).await;
                    let text = String::from_utf8_lossy(&request);
                    let body = if text.contains(&format!("token={good}&"))
                        || text.ends_with(&format!("token={good}"))
                    {
                        json!({"active": true, "iss": ISSUER, "aud": RESOURCE, "sub": "alice",
                               "exp": now_secs() + 300, "scope": "mcp:read"})
                    } else {
                        json!({"active": false})
                    }
                    .to_string();
                    answer_json(&mut stream, &body).await;
                });
            }
        });
        (url, calls)
    }

    fn introspecting_validator(url: String, cache: usize, in_flight: usize) -> Validator {
        let mut settings = ResourceSettings::new(
            RESOURCE,
            vec![IssuerSettings {
                issuer: ISSUER.into(),
                jwks_uri: Some("http://127.0.0.1:9/jwks".into()),
                introspection: Some(Introspection {
                    endpoint: Some(url),
                    client_id: "warden".into(),
                    client_secret: Secret::new("s"),
                }),
            }],
        );
        settings.introspection_cache = cache;
        settings.introspections_in_flight = in_flight;
        Validator::new(settings).unwrap()
    }

    #[tokio::test]
    async fn junk_tokens_do_not_evict_a_valid_introspection_answer() {
        use std::sync::atomic::Ordering;
        let (url, calls) = introspection_server("good-token", Duration::ZERO).await;
        let v = introspecting_validator(url, 16, 4);
        assert!(v.validate("good-token").await.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A flood of junk: each is introspected once and refused.
        for i in 0..100 {
            let junk = format!("junk-{i}");
            assert!(matches!(
                v.validate(&junk).await,
                Err(Rejection::Invalid(_))
            ));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 101);
        // The valid answer is still cached: no new introspection.
        assert!(v.validate("good-token").await.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 101);
        // Refusals are cached too, within their share: the latest junk token is not
        // introspected again.
        assert!(v.validate("junk-99").await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 101);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn introspections_in_flight_are_bounded_and_the_rest_get_503() {
        use std::sync::atomic::Ordering;
        let (url, calls) = introspection_server("good-token", Duration::from_secs(2)).await;
        let v = Arc::new(introspecting_validator(url, 16, 2));
        let slow: Vec<_> = (0..2)
            .map(|i| {
                let v = Arc::clone(&v);
                tokio::spawn(async move { v.validate(&format!("slow-{i}")).await })
            })
            .collect();
        while calls.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Both permits taken: a third token is not queued, it gets 503 at once.
        let started = Instant::now();
        match v.validate("third").await {
            Err(Rejection::Unavailable(reason)) => {
                assert!(reason.contains("in flight"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        for task in slow {
            assert!(matches!(task.await.unwrap(), Err(Rejection::Invalid(_))));
        }
        // Control: with the permits back, a token is introspected again.
        assert!(v.validate("good-token").await.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn the_header_typ_is_not_required_and_id_tokens_are_refused_by_their_audience() {
        // RFC 9068 asks issuers for `typ: at+jwt`, but many honest ones send `JWT` or
        // nothing; requiring it would refuse them. What `at+jwt` guards against, an ID
        // token replayed as an access token, the audience check stops: an ID token's
        // `aud` is the client id, never Warden's resource.
        let signer = Signer::ec();
        let v = validator_with_keys(json!({"keys": [signer.jwk("k")]})).await;
        let claims = Value::Object(claims(json!({})));
        for typ in [Some("at+jwt"), Some("JWT"), Some("jwt"), None] {
            let mut header = json!({"alg": "ES256", "kid": "k"});
            if let Some(typ) = typ {
                header["typ"] = json!(typ);
            }
            let token = signer.sign_with_header(&header, &claims);
            assert!(v.validate(&token).await.is_ok(), "typ {typ:?}");
        }
        let id_token = Value::Object(super::tests::claims(
            json!({"aud": "app", "nonce": "n", "auth_time": now_secs()}),
        ));
        let token = signer.sign_with_header(
            &json!({"alg": "ES256", "kid": "k", "typ": "JWT"}),
            &id_token,
        );
        match v.validate(&token).await {
            Err(Rejection::Invalid(reason)) => assert!(reason.contains("meant for"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    /// Answers one request of a loopback test server with `body` as JSON, then closes.
    async fn answer_json(stream: &mut tokio::net::TcpStream, body: &str) {
        use tokio::io::AsyncWriteExt as _;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
    }

    /// A loopback key-set server: the first read is answered at once with `jwks`; every
    /// later read is held `hold` before it is answered. Counts the reads.
    async fn key_set_server(
        jwks: Value,
        hold: Duration,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::AsyncReadExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&reads);
        let body = jwks.to_string();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let body = body.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    if n > 0 {
                        tokio::time::sleep(hold).await;
                    }
                    answer_json(&mut stream, &body).await;
                });
            }
        });
        (url, reads)
    }

    /// A loopback authorization server at its own origin (its issuer): metadata naming its
    /// key set and introspection endpoint; the key set after the first read is held 10 s;
    /// `good-token` is active. Counts the key-set reads.
    async fn discovered_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::AsyncReadExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&reads);
        let issuer = base.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (issuer, counted) = (issuer.clone(), Arc::clone(&counted));
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    let request = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let body = if request.starts_with("GET /.well-known/") {
                        json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks"),
                               "authorization_endpoint": format!("{issuer}/authorize"),
                               "token_endpoint": format!("{issuer}/token"),
                               "introspection_endpoint": format!("{issuer}/introspect")})
                    } else if request.starts_with("GET /jwks") {
                        if counted.fetch_add(1, Ordering::SeqCst) > 0 {
                            tokio::time::sleep(Duration::from_secs(10)).await;
                        }
                        json!({"keys": []})
                    } else if request.contains("token=good-token") {
                        json!({"active": true, "iss": issuer, "aud": RESOURCE, "sub": "alice",
                               "exp": now_secs() + 300})
                    } else {
                        json!({"active": false})
                    }
                    .to_string();
                    answer_json(&mut stream, &body).await;
                });
            }
        });
        (base, reads)
    }

    /// An introspection at an endpoint found in the issuer's metadata does not wait
    /// behind a read of the same issuer's key set (they shared one lock before).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_introspection_does_not_wait_behind_a_key_set_read() {
        let (base, reads) = discovered_server().await;
        let mut settings = ResourceSettings::new(
            RESOURCE,
            vec![IssuerSettings {
                issuer: base.clone(),
                jwks_uri: None,
                introspection: Some(Introspection {
                    endpoint: None,
                    client_id: "warden".into(),
                    client_secret: Secret::new("s"),
                }),
            }],
        );
        settings.jwks_refresh = Duration::ZERO;
        let v = Arc::new(Validator::new(settings).unwrap());
        // The control: the endpoint is found and the token introspected.
        let found = v.validate("good-token").await;
        assert_eq!(found.unwrap().subject.as_deref(), Some("alice"));
        // A JWT of this issuer: its key set is read (at once), then read again for a key id
        // the set lacks, a read the server holds for 10 s.
        let signer = Signer::ec();
        let jwt = signer.sign("k", &Value::Object(claims(json!({"iss": base}))));
        let first = v.validate(&jwt).await;
        assert!(first.is_err(), "{first:?}");
        let held = {
            let v = Arc::clone(&v);
            tokio::spawn(async move { v.validate(&jwt).await })
        };
        while reads.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // A new opaque token (not in the answer cache) is introspected meanwhile, without
        // waiting for that read.
        let started = Instant::now();
        let answered = tokio::time::timeout(Duration::from_secs(3), v.validate("good-token-2"))
            .await
            .expect("an introspection waited behind the key-set read");
        assert!(answered.is_ok(), "{answered:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
        held.abort();
    }

    /// An old key set is read again in the background: a token that a cached key fits is
    /// answered at once while the key-set endpoint holds the read (it held the request for
    /// the whole read before), and the read does happen.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_key_set_is_read_again_in_the_background() {
        let signer = Signer::ec();
        let (url, reads) =
            key_set_server(json!({"keys": [signer.jwk("k")]}), Duration::from_secs(10)).await;
        let mut settings = ResourceSettings::new(
            RESOURCE,
            vec![IssuerSettings {
                issuer: ISSUER.into(),
                jwks_uri: Some(url),
                introspection: None,
            }],
        );
        // Every set is old at once, and may be read again at once.
        settings.jwks_max_age = Duration::ZERO;
        settings.jwks_refresh = Duration::ZERO;
        let v = Validator::new(settings).unwrap();
        let good = signer.sign("k", &Value::Object(claims(json!({}))));
        assert!(v.validate(&good).await.is_ok());
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
        for _ in 0..3 {
            let started = Instant::now();
            let checked = tokio::time::timeout(Duration::from_secs(3), v.validate(&good))
                .await
                .expect("a token of a cached key waited for the key set to be read again");
            assert_eq!(checked.unwrap().subject.as_deref(), Some("alice"));
            assert!(started.elapsed() < Duration::from_secs(3));
        }
        // The read was started, once: one is in flight per issuer.
        let deadline = Instant::now() + Duration::from_secs(5);
        while reads.load(std::sync::atomic::Ordering::SeqCst) < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_key_set_read_does_not_hold_up_tokens_the_cached_keys_judge() {
        let signer = Signer::ec();
        let (url, reads) =
            key_set_server(json!({"keys": [signer.jwk("k")]}), Duration::from_secs(10)).await;
        let mut settings = ResourceSettings::new(
            RESOURCE,
            vec![IssuerSettings {
                issuer: ISSUER.into(),
                jwks_uri: Some(url),
                introspection: None,
            }],
        );
        // Every unknown key id may make Warden read the set again.
        settings.jwks_refresh = Duration::ZERO;
        let v = Arc::new(Validator::new(settings).unwrap());
        let good = signer.sign("k", &Value::Object(claims(json!({}))));
        assert_eq!(
            v.validate(&good).await.unwrap().subject.as_deref(),
            Some("alice")
        );
        // A token naming an unknown key starts a read that the server holds for 10 s.
        let unknown = signer.sign("other", &Value::Object(claims(json!({}))));
        let slow = {
            let v = Arc::clone(&v);
            tokio::spawn(async move { v.validate(&unknown).await })
        };
        while reads.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Meanwhile tokens of the cached key are judged at once, and a second unknown key
        // does not start a second read.
        let started = Instant::now();
        let checked = tokio::time::timeout(Duration::from_secs(3), v.validate(&good)).await;
        assert_eq!(
            checked
                .expect("a cached key's token waited for the key-set read")
                .unwrap()
                .subject
                .as_deref(),
            Some("alice")
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        let second = signer.sign("third", &Value::Object(claims(json!({}))));
        let waiting = {
            let v = Arc::clone(&v);
            tokio::spawn(async move { v.validate(&second).await })
        };
        let slow = slow.await.unwrap();
        assert!(matches!(slow, Err(Rejection::Invalid(_))), "{slow:?}");
        let waiting = waiting.await.unwrap();
        assert!(matches!(waiting, Err(Rejection::Invalid(_))), "{waiting:?}");
        // The waiting request re-read the set after the first read (the interval is zero),
        // never two at once: at most three reads in all.
        assert!(reads.load(std::sync::atomic::Ordering::SeqCst) <= 3);
    }
}
