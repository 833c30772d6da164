//! [`OAuthClient`]: one remote server's credentials, and what to do when the server
//! refuses them.
//!
//! - [`OAuthClient::bearer`] gives the access token to send (refreshing it first when it
//!   expires within a minute and a refresh token is at hand).
//! - [`OAuthClient::unauthorized`] handles a 401: discovery again (the server may have moved
//!   to another authorization server), a refresh when the grant is still from the right
//!   issuer, else a whole new authorization.
//! - [`OAuthClient::insufficient_scope`] handles a 403 `insufficient_scope`: a new
//!   authorization asking for the union of the scopes asked before and the challenged ones.
//!
//! Every refresh or authorization runs under one lock per client, and a caller that waited
//! for it checks first whether the token it was refused with is still the current one: so
//! a hundred requests refused at once lead to one refresh, not a hundred.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use url::Url;

use crate::agent::UserAgent;
use crate::challenge::Challenge;
use crate::discovery::{ProtectedResource, ServerMetadata, resource_metadata, server_metadata};
use crate::error::OAuthError;
use crate::fetch::Fetcher;
use crate::flow::{self, now};
use crate::identity::{ClientSettings, resolve};
use crate::store::{Grant, Registration, Secret, ServerRecord, Store};

/// An access token is refreshed when it expires within this many seconds.
const REFRESH_MARGIN: u64 = 60;
/// After a refresh that failed without being refused (the authorization server did not
/// answer, or answered 5xx), the next one waits this long; each such failure in a row
/// doubles the wait, up to [`REFRESH_PAUSE_MAX`]. A success or a refusal ends the pause.
pub const REFRESH_PAUSE_START: Duration = Duration::from_secs(2);
/// The longest pause between refreshes that fail without being refused.
pub const REFRESH_PAUSE_MAX: Duration = Duration::from_secs(60);

/// The pause after refreshes that failed without being refused.
struct Pause {
    until: tokio::time::Instant,
    length: Duration,
    last: String,
}

/// How a remote server's sign-in stands, for `warden tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthState {
    /// No token: the user must sign in.
    NeedsSignIn,
    /// A token, valid until the given time (seconds since the epoch), if known.
    SignedIn {
        /// The issuer.
        issuer: String,
        /// Expiry, if the server said.
        until: Option<u64>,
        /// Whether it can be refreshed without the user.
        refreshable: bool,
    },
    /// The last sign-in or token was refused, with the reason.
    Refused(String),
}

/// Counts of what the client did, for tests and status.
#[derive(Debug, Default)]
pub struct Counters {
    /// Refresh-token grants sent.
    pub refreshes: AtomicU32,
    /// Authorization requests started.
    pub authorizations: AtomicU32,
}

#[derive(Default)]
struct Current {
    grant: Option<Grant>,
    resource: Option<ProtectedResource>,
    metadata: Option<ServerMetadata>,
    registration: Option<Registration>,
    refused: Option<String>,
}

/// The OAuth side of one remote server.
pub struct OAuthClient {
    name: String,
    server_url: Url,
    fetcher: Fetcher,
    settings: ClientSettings,
    store: Arc<dyn Store>,
    agent: Arc<dyn UserAgent>,
    current: Arc<Mutex<Current>>,
    /// One refresh or authorization in flight. A refresh holds it on the task that
    /// carries its exchange, so a caller that gives up does not let another start.
    flight: Arc<tokio::sync::Mutex<()>>,
    /// No refresh before this, after failures that were not refusals.
    pause: Arc<Mutex<Option<Pause>>>,
    counters: Counters,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("server", &self.name)
            .field("url", &self.server_url.as_str())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OAuthClient {
    /// The client for server `name` at `server_url`, with the grant the store holds for it
    /// (used only if it is for a resource that covers `server_url`).
    pub fn new(
        name: &str,
        server_url: &str,
        allow_http: bool,
        settings: ClientSettings,
        store: Arc<dyn Store>,
        agent: Arc<dyn UserAgent>,
    ) -> Result<OAuthClient, OAuthError> {
        let server_url = Url::parse(server_url).map_err(|error| OAuthError::BadUrl {
            what: "the server URL",
            url: server_url.to_owned(),
            reason: error.to_string(),
        })?;
        let fetcher = Fetcher::for_server(allow_http, &server_url)?;
        OAuthClient::with_fetcher(name, server_url, fetcher, settings, store, agent)
    }

    /// [`OAuthClient::new`] with the given fetcher (tests judge a loopback server as public
    /// with [`Fetcher::judging_server_public`]).
    pub fn with_fetcher(
        name: &str,
        server_url: Url,
        fetcher: Fetcher,
        settings: ClientSettings,
        store: Arc<dyn Store>,
        agent: Arc<dyn UserAgent>,
    ) -> Result<OAuthClient, OAuthError> {
        let record = store.load(name)?;
        let grant = record
            .grants
            .iter()
            .rev()
            .find(|grant| crate::discovery::resource_covers(&grant.resource, &server_url))
            .cloned();
        Ok(OAuthClient {
            name: name.to_owned(),
            server_url,
            fetcher,
            settings,
            store,
            agent,
            current: Arc::new(Mutex::new(Current {
                grant,
                ..Current::default()
            })),
            flight: Arc::new(tokio::sync::Mutex::new(())),
            pause: Arc::new(Mutex::new(None)),
            counters: Counters::default(),
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the client did so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The access token held now, without refreshing.
    pub fn current_token(&self) -> Option<Secret> {
        lock(&self.current)
            .grant
            .as_ref()
            .map(|grant| grant.access_token.clone())
    }

    /// Whether a refresh token is held: the grant can be renewed without the user.
    pub fn refreshable(&self) -> bool {
        lock(&self.current)
            .grant
            .as_ref()
            .is_some_and(|grant| grant.refresh_token.is_some())
    }

    /// How the sign-in stands.
    pub fn state(&self) -> AuthState {
        let current = lock(&self.current);
        if let Some(reason) = &current.refused {
            return AuthState::Refused(reason.clone());
        }
        match &current.grant {
            None => AuthState::NeedsSignIn,
            Some(grant) => AuthState::SignedIn {
                issuer: grant.issuer.clone(),
                until: grant.expires_at,
                refreshable: grant.refresh_token.is_some(),
            },
        }
    }

    /// The access token to send, refreshed first when it is about to expire.
    pub async fn bearer(&self) -> Option<Secret> {
        let (token, due) = {
            let current = lock(&self.current);
            match &current.grant {
                None => return None,
                Some(grant) => (
                    grant.access_token.clone(),
                    grant.refresh_token.is_some()
                        && grant
                            .expires_at
                            .is_some_and(|at| at <= now().saturating_add(REFRESH_MARGIN)),
                ),
            }
        };
        if due {
            let mut flight = Some(Arc::clone(&self.flight).lock_owned().await);
            if self.current_token().as_ref() == Some(&token)
                && let Err(error) = self.refresh(None, &mut flight).await
            {
                tracing::info!(server = %self.name, "refreshing the access token failed: {error}");
            }
        }
        self.current_token()
    }

    /// Handles a 401 to a request sent with `used` (`None`: sent without a token). `round`
    /// counts the rounds of this request (1 for the first): only the first tries a refresh.
    pub async fn unauthorized(
        &self,
        used: Option<&Secret>,
        challenge: Option<&Challenge>,
        round: u32,
    ) -> Result<(), OAuthError> {
        let mut flight = Some(Arc::clone(&self.flight).lock_owned().await);
        if self.current_token().as_ref() != used {
            return Ok(()); // someone else already got a new token: try it
        }
        let result = self.renew(used, challenge, round, &mut flight).await;
        self.note(&result);
        result
    }

    async fn renew(
        &self,
        used: Option<&Secret>,
        challenge: Option<&Challenge>,
        round: u32,
        flight: &mut Option<Flight>,
    ) -> Result<(), OAuthError> {
        // The server may have moved to another authorization server: look again.
        let resource = resource_metadata(&self.fetcher, &self.server_url, challenge).await?;
        let grant = lock(&self.current).grant.clone();
        if round == 1
            && let Some(grant) = grant
            && grant.refresh_token.is_some()
            && resource.authorization_servers.first() == Some(&grant.issuer)
            && grant.resource == resource.resource
        {
            lock(&self.current).resource = Some(resource.clone());
            match self.refresh(used, flight).await {
                Ok(()) => return Ok(()),
                // Refused: the user must sign in again.
                Err(error) if !self.refreshable() => {
                    tracing::info!(server = %self.name, "refresh refused ({error}); signing in again");
                }
                // Not refused (the authorization server unreachable, unwell or answering
                // nonsense): the refresh token is kept for the next try, and the user is
                // not asked to sign in for the server's trouble.
                Err(error) => return Err(error),
            }
        }
        self.authorize_with(resource, challenge, Vec::new()).await
    }

    /// Handles a 403 `insufficient_scope`: a new authorization with the union of the
    /// scopes asked before and those the challenge names.
    pub async fn insufficient_scope(
        &self,
        used: Option<&Secret>,
        challenge: &Challenge,
    ) -> Result<(), OAuthError> {
        let _flight = self.flight.lock().await;
        if self.current_token().as_ref() != used {
            return Ok(());
        }
        let result = async {
            let resource =
                resource_metadata(&self.fetcher, &self.server_url, Some(challenge)).await?;
            let previous = lock(&self.current)
                .grant
                .as_ref()
                .map(|grant| grant.scopes.clone())
                .unwrap_or_default();
            self.authorize_with(resource, Some(challenge), previous)
                .await
        }
        .await;
        self.note(&result);
        result
    }

    /// Signs in now, whatever the current state (`warden login`).
    pub async fn login(&self) -> Result<(), OAuthError> {
        let _flight = self.flight.lock().await;
        let result = async {
            let resource = resource_metadata(&self.fetcher, &self.server_url, None).await?;
            self.authorize_with(resource, None, Vec::new()).await
        }
        .await;
        self.note(&result);
        result
    }

    /// Forgets everything stored for this server (`warden logout`).
    pub fn logout(&self) -> Result<bool, OAuthError> {
        *lock(&self.current) = Current::default();
        self.store.remove(&self.name)
    }

    fn note(&self, result: &Result<(), OAuthError>) {
        let mut current = lock(&self.current);
        current.refused = match result {
            Ok(()) => None,
            Err(OAuthError::NeedsSignIn { .. }) => None,
            Err(error) => Some(error.to_string()),
        };
    }

    /// Uses the refresh token for a new access token. `refused`: the access token a
    /// server just refused, which a new one must not be. A refresh token is dropped only
    /// when the authorization server refused it (a 4xx answer: `invalid_grant` and the
    /// like); on any other failure it is kept for the next try, which waits
    /// ([`REFRESH_PAUSE_START`], doubling).
    ///
    /// The exchange with the token endpoint runs on a task of its own holding `flight`
    /// (given back when it ends): a caller whose deadline passes does not cut it short,
    /// so a refresh token the authorization server rotated is never lost half-way (the
    /// old one sent again would be refused, and with reuse detection end the grant).
    async fn refresh(
        &self,
        refused: Option<&Secret>,
        flight: &mut Option<Flight>,
    ) -> Result<(), OAuthError> {
        if let Some(pause) = lock(&self.pause).as_ref() {
            let left = pause
                .until
                .saturating_duration_since(tokio::time::Instant::now());
            if !left.is_zero() {
                return Err(OAuthError::RefreshPaused {
                    last: pause.last.clone(),
                    secs: left.as_secs_f64().ceil() as u64,
                });
            }
        }
        let (grant, metadata, registration) = match self.refresh_inputs().await {
            Ok(inputs) => inputs,
            // Only a server that did not answer pauses the next try; a missing refresh
            // token or a store failure is not the authorization server's.
            Err(error @ (OAuthError::NeedsSignIn { .. } | OAuthError::Store(_))) => {
                return Err(error);
            }
            Err(error) => {
                settle_pause(&self.pause, Some(&error));
                return Err(error);
            }
        };
        self.counters.refreshes.fetch_add(1, Ordering::SeqCst);
        let task = {
            let keeper = self.keeper();
            let (fetcher, pause) = (self.fetcher.clone(), Arc::clone(&self.pause));
            let refused = refused.cloned();
            let guard = flight.take();
            tokio::spawn(async move {
                // Bounded as a whole (the send and the answer's body): the task holds the
                // flight lock, which every later refresh and sign-in waits for.
                let refreshed = tokio::time::timeout(
                    REFRESH_LIMIT,
                    flow::refresh(&fetcher, &metadata, &registration, &grant),
                )
                .await
                .unwrap_or(Err(OAuthError::Timeout {
                    what: "the token refresh",
                    secs: REFRESH_LIMIT.as_secs(),
                }));
                let result = keeper.settle(refreshed, refused.as_ref());
                settle_pause(&pause, result.as_ref().err());
                (result, guard)
            })
        };
        match task.await {
            Ok((result, guard)) => {
                *flight = guard;
                result
            }
            Err(error) => Err(OAuthError::Malformed {
                what: "the refresh",
                reason: format!("its task ended: {error}"),
            }),
        }
    }

    /// The grant to refresh, its authorization server's metadata and Warden's
    /// registration there.
    async fn refresh_inputs(
        &self,
    ) -> Result<(Grant, ServerMetadata, crate::store::Registration), OAuthError> {
        let grant = lock(&self.current)
            .grant
            .clone()
            .ok_or_else(|| OAuthError::NeedsSignIn {
                server: self.name.clone(),
            })?;
        let metadata = self.metadata_for(&grant.issuer).await?;
        let record = self.store.load(&self.name)?;
        let (registration, _) = resolve(
            &self.fetcher,
            &metadata,
            &self.settings,
            &record,
            &self.agent.redirect_uri(),
        )
        .await?;
        Ok((grant, metadata, registration))
    }

    async fn metadata_for(&self, issuer: &str) -> Result<ServerMetadata, OAuthError> {
        if let Some(metadata) = lock(&self.current)
            .metadata
            .clone()
            .filter(|metadata| metadata.issuer == issuer)
        {
            return Ok(metadata);
        }
        let metadata = server_metadata(&self.fetcher, issuer).await?;
        lock(&self.current).metadata = Some(metadata.clone());
        Ok(metadata)
    }

    async fn authorize_with(
        &self,
        resource: ProtectedResource,
        challenge: Option<&Challenge>,
        previous: Vec<String>,
    ) -> Result<(), OAuthError> {
        let Some(issuer) = resource.authorization_servers.first().cloned() else {
            return Err(OAuthError::Malformed {
                what: "the protected-resource metadata",
                reason: "it names no authorization server".into(),
            });
        };
        let metadata = self.metadata_for(&issuer).await?;
        flow::require_s256(&metadata)?;
        let mut record = self.store.load(&self.name)?;
        let redirect_uri = self.agent.redirect_uri();
        let (registration, fresh) = resolve(
            &self.fetcher,
            &metadata,
            &self.settings,
            &record,
            &redirect_uri,
        )
        .await?;
        if fresh {
            record.put_registration(registration.clone());
            self.store.save(&self.name, &record)?;
        }
        let scopes = choose_scopes(challenge, &resource, &metadata, previous);
        let (pending, url) = flow::begin(
            &metadata,
            &registration,
            &redirect_uri,
            &resource.resource,
            &scopes,
        )?;
        self.counters.authorizations.fetch_add(1, Ordering::SeqCst);
        tracing::info!(server = %self.name, issuer = %issuer, scopes = %scopes.join(" "), "authorization requested");
        let callback = self.agent.authorize(&self.name, &url).await?;
        let code = flow::finish(&pending, &callback)?;
        let grant =
            flow::exchange(&self.fetcher, &metadata, &registration, &pending, &code).await?;
        {
            let mut current = lock(&self.current);
            current.resource = Some(resource);
            current.registration = Some(registration);
        }
        self.keep(grant, Some(record))?;
        tracing::info!(server = %self.name, issuer = %issuer, "signed in");
        Ok(())
    }

    /// Makes `grant` current and stores it (under its issuer and resource). A new sign-in
    /// ends any pause of refreshes: its grant owes nothing to the failures before it.
    fn keep(&self, grant: Grant, record: Option<ServerRecord>) -> Result<(), OAuthError> {
        self.keeper().keep(grant, record)?;
        *lock(&self.pause) = None;
        Ok(())
    }

    /// What a refresh's task needs to keep its outcome.
    fn keeper(&self) -> Keeper {
        Keeper {
            name: self.name.clone(),
            current: Arc::clone(&self.current),
            store: Arc::clone(&self.store),
        }
    }
}

/// The longest one refresh (the token request and its answer) may take.
const REFRESH_LIMIT: std::time::Duration =
    std::time::Duration::from_secs(2 * crate::EXCHANGE_LIMIT.as_secs());

/// The flight lock as a refresh's task holds it.
type Flight = tokio::sync::OwnedMutexGuard<()>;

/// What a refresh's task needs of its client to keep the outcome.
struct Keeper {
    name: String,
    current: Arc<Mutex<Current>>,
    store: Arc<dyn Store>,
}

impl Keeper {
    /// Makes `grant` current and stores it (under its issuer and resource).
    fn keep(&self, grant: Grant, record: Option<ServerRecord>) -> Result<(), OAuthError> {
        let mut record = match record {
            Some(record) => record,
            None => self.store.load(&self.name)?,
        };
        record.put_grant(grant.clone());
        lock(&self.current).grant = Some(grant);
        self.store.save(&self.name, &record)
    }

    /// Keeps what a refresh gave: the new grant, unless it is the access token a server
    /// just refused (`refused`); on a refusal by the authorization server, drops the
    /// refresh token; on any other failure, keeps it for the next try.
    fn settle(
        &self,
        refreshed: Result<Grant, OAuthError>,
        refused: Option<&Secret>,
    ) -> Result<(), OAuthError> {
        match refreshed {
            Ok(new) if refused.is_some_and(|token| *token == new.access_token) => {
                // The access token is not taken; a refresh token the authorization server
                // rotated is (the old one is spent: sent again, it would be refused).
                if let Some(rotated) = new.refresh_token {
                    let kept = lock(&self.current).grant.clone();
                    if let Some(mut grant) = kept {
                        grant.refresh_token = Some(rotated);
                        self.keep(grant, None)?;
                    }
                }
                Err(OAuthError::Malformed {
                    what: "the token response",
                    reason: "it gave again the access token the server had just refused".into(),
                })
            }
            Ok(new) => {
                self.keep(new, None)?;
                tracing::info!(server = %self.name, "access token refreshed");
                Ok(())
            }
            Err(error) => {
                if refused_by_server(&error)
                    && let Some(current) = lock(&self.current).grant.as_mut()
                {
                    current.refresh_token = None;
                }
                Err(error)
            }
        }
    }
}

/// After a refresh: a failure that was not a refusal starts (or doubles) the pause before
/// the next; a success or a refusal ends it.
fn settle_pause(pause: &Mutex<Option<Pause>>, error: Option<&OAuthError>) {
    let mut pause = lock(pause);
    match error {
        Some(error) if !refused_by_server(error) => {
            let length = pause.as_ref().map_or(REFRESH_PAUSE_START, |p| {
                (p.length * 2).min(REFRESH_PAUSE_MAX)
            });
            *pause = Some(Pause {
                until: tokio::time::Instant::now() + length,
                length,
                last: error.to_string(),
            });
        }
        _ => *pause = None,
    }
}

/// Whether the token endpoint refused the grant (a 4xx answer other than 408 and 429:
/// `invalid_grant`, `invalid_client`, ...), rather than failing to answer.
fn refused_by_server(error: &OAuthError) -> bool {
    matches!(error, OAuthError::Status { status, .. }
        if (400..500).contains(status) && *status != 408 && *status != 429)
}

/// The scopes to ask for: the challenge's, else everything the resource lists, else none;
/// joined with those asked before (a step-up keeps what it had), plus `offline_access`
/// when the authorization server lists it (so a refresh token may be issued).
pub fn choose_scopes(
    challenge: Option<&Challenge>,
    resource: &ProtectedResource,
    metadata: &ServerMetadata,
    previous: Vec<String>,
) -> Vec<String> {
    let challenged = challenge.map(Challenge::scopes).unwrap_or_default();
    let base = if !challenged.is_empty() {
        challenged
    } else {
        resource.scopes_supported.clone().unwrap_or_default()
    };
    let mut scopes = previous;
    for scope in base {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    let offline = "offline_access".to_owned();
    if metadata.lists_scope(&offline) && !scopes.contains(&offline) {
        scopes.push(offline);
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(scopes: Option<Vec<&str>>) -> ProtectedResource {
        ProtectedResource {
            resource: "https://mcp.example/mcp".into(),
            authorization_servers: vec!["https://as.example".into()],
            scopes_supported: scopes.map(|s| s.into_iter().map(str::to_owned).collect()),
        }
    }

    fn metadata(scopes: Option<Vec<&str>>) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://as.example".into(),
            scopes_supported: scopes.map(|s| s.into_iter().map(str::to_owned).collect()),
            ..ServerMetadata::default()
        }
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_resource_then_nowhere() {
        let challenge = Challenge {
            scope: Some("mcp:basic".into()),
            ..Challenge::default()
        };
        assert_eq!(
            choose_scopes(
                Some(&challenge),
                &resource(Some(vec!["x"])),
                &metadata(None),
                vec![]
            ),
            vec!["mcp:basic"]
        );
        assert_eq!(
            choose_scopes(
                None,
                &resource(Some(vec!["a", "b"])),
                &metadata(None),
                vec![]
            ),
            vec!["a", "b"]
        );
        assert!(choose_scopes(None, &resource(None), &metadata(None), vec![]).is_empty());
    }

    #[test]
    fn step_up_keeps_earlier_scopes_and_offline_access_needs_the_server_to_list_it() {
        let challenge = Challenge {
            scope: Some("mcp:write".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        assert_eq!(
            choose_scopes(
                Some(&challenge),
                &resource(None),
                &metadata(Some(vec!["mcp:write", "offline_access"])),
                vec!["mcp:basic".into()]
            ),
            vec!["mcp:basic", "mcp:write", "offline_access"]
        );
        assert_eq!(
            choose_scopes(
                None,
                &resource(Some(vec!["a"])),
                &metadata(Some(vec!["a"])),
                vec![]
            ),
            vec!["a"]
        );
    }
}
