//! `warden login SERVER` and `warden logout SERVER`, and the OAuth provider every command
//! connects remote servers with (docs/remote-servers.md, decision 0022).
//!
//! - Where tokens go (decision 0034): the operating system's credential store (the Secret
//!   Service on Linux), asked once per command whether it answers, every call timed. Where
//!   none answers: in memory (forgotten when the command ends), said once per server, or,
//!   only when the server's configuration says `token_store = "file"`, in
//!   `$XDG_STATE_HOME/warden/oauth-tokens.json` (mode 0600), said loudly. Records still in
//!   that file move to the credential store when it answers. `token_store = "memory"`
//!   keeps nothing.
//! - Who asks the user: `warden login`, and `warden chat` and `warden run` in a terminal,
//!   which offer the same sign-in ([`sign_in`]) for a server that needs one and connect it
//!   on yes (`super::sign_ins`; `/login NAME` in a chat later). Every other command
//!   connects with no user agent, so a server that needs a sign-in is reported ("needs
//!   sign-in: run `warden login NAME`") and the command goes on without it; a stored
//!   refresh token is still used without asking.
//! - `warden login` opens the browser (when it runs in a terminal and an opener exists;
//!   never through a shell) on a loopback redirect, prints the URL in any case, and also
//!   accepts the redirected-to URL pasted on standard input, for a machine without a
//!   browser.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::anyhow;
use warden_config::{Environment, ServerSpec, TokenStoreChoice, TransportSpec};
use warden_mcp::http::{OAuthProvider, Remote};
use warden_oauth::{
    AuthState, ClientSettings, FileStore, Loopback, MemoryStore, NoUserAgent, OAuthClient, OsStore,
    Preregistered, Secret, Store, UserAgent,
};

use crate::cli::{GlobalArgs, LoginArgs, LogoutArgs};
use crate::exit::{Code, Failure};
use crate::untrusted::{Shape, inert};

/// The token file under the state directory.
pub fn token_file(env: &Environment) -> PathBuf {
    env.state_home.join("warden").join("oauth-tokens.json")
}

/// Builds each remote server's OAuth client for the connections of one command, and
/// remembers them so `warden tools` can show how each sign-in stands.
#[derive(Debug)]
pub struct Provider {
    file: Arc<FileStore>,
    memory: Arc<MemoryStore>,
    os: Arc<OsStore>,
    /// Whether the credential store answered, asked once per process.
    os_answers: OnceLock<Result<(), String>>,
    /// Servers whose store was already announced.
    said: Mutex<BTreeSet<String>>,
    clients: Mutex<BTreeMap<String, Arc<OAuthClient>>>,
}

impl Provider {
    fn new(env: &Environment) -> Provider {
        let file = Arc::new(FileStore::new(token_file(env)));
        Provider {
            os: Arc::new(
                OsStore::with_service(warden_oauth::os_store::SERVICE, os_limit())
                    .with_file(file.clone()),
            ),
            file,
            memory: Arc::new(MemoryStore::default()),
            os_answers: OnceLock::new(),
            said: Mutex::new(BTreeSet::new()),
            clients: Mutex::new(BTreeMap::new()),
        }
    }

    /// The sign-in state of `server`, if it is remote and was connected.
    pub fn state(&self, server: &str) -> Option<AuthState> {
        lock(&self.clients).get(server).map(|client| client.state())
    }

    /// `Err` with the reason when the operating system's credential store does not answer.
    fn os_answers(&self) -> Result<(), String> {
        self.os_answers
            .get_or_init(|| self.os.probe().map_err(|error| error.to_string()))
            .clone()
    }

    /// Whether `store` is the one that keeps nothing after the command.
    fn forgets(&self, store: &Arc<dyn Store>) -> bool {
        let memory: Arc<dyn Store> = self.memory.clone();
        Arc::ptr_eq(store, &memory)
    }

    /// Where `name`'s tokens are kept; the first time for each server, a warning when that
    /// is not the credential store.
    fn store(&self, name: &str, choice: TokenStoreChoice) -> Arc<dyn Store> {
        let first = lock(&self.said).insert(name.to_owned());
        match choice {
            TokenStoreChoice::Memory => self.memory.clone(),
            TokenStoreChoice::Keyring | TokenStoreChoice::File => match self.os_answers() {
                Ok(()) => self.os.clone(),
                Err(reason) if choice == TokenStoreChoice::File => {
                    if first {
                        tracing::warn!(
                            server = %name,
                            "no credential store: {reason}. OAuth tokens for this server are kept in the FILE {} (mode 0600) because its configuration says token_store = \"file\": anything running as you can read them",
                            self.file.path().display()
                        );
                    }
                    self.file.clone()
                }
                Err(reason) => {
                    if first {
                        tracing::warn!(
                            server = %name,
                            "no credential store: {reason}. OAuth tokens for this server are kept in memory only and forgotten when this command ends; to keep them in a 0600 file instead, set token_store = \"file\" under [servers.{name}.oauth]"
                        );
                    }
                    self.memory.clone()
                }
            },
        }
    }

    fn build(
        &self,
        spec_name: &str,
        url: &str,
        allow_http: bool,
        oauth: &warden_config::OAuthSpec,
        agent: Arc<dyn UserAgent>,
    ) -> Result<Arc<OAuthClient>, warden_oauth::OAuthError> {
        let client = OAuthClient::new(
            spec_name,
            url,
            allow_http,
            settings(oauth),
            self.store(spec_name, oauth.token_store),
            agent,
        )?;
        Ok(Arc::new(client))
    }
}

/// How long one credential-store call may take: in a terminal a person may be unlocking the
/// keyring in a prompt the desktop shows, so a minute; otherwise the store's default.
fn os_limit() -> std::time::Duration {
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        std::time::Duration::from_secs(60)
    } else {
        warden_oauth::os_store::DEFAULT_LIMIT
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OAuthProvider for Provider {
    fn client(&self, remote: &Remote) -> Option<Arc<OAuthClient>> {
        match self.build(
            &remote.name,
            &remote.url,
            remote.settings.allow_http,
            &remote.settings.oauth,
            Arc::new(NoUserAgent),
        ) {
            Ok(client) => {
                lock(&self.clients).insert(remote.name.clone(), client.clone());
                Some(client)
            }
            Err(error) => {
                tracing::warn!(server = %remote.name, "no sign-in for this server: {error}");
                None
            }
        }
    }
}

static PROVIDER: OnceLock<Arc<Provider>> = OnceLock::new();

/// The process's provider.
pub fn provider(env: &Environment) -> Arc<Provider> {
    PROVIDER
        .get_or_init(|| Arc::new(Provider::new(env)))
        .clone()
}

/// How the sign-in of `server` stands, if this process connected it with OAuth.
pub fn auth_state(server: &str) -> Option<AuthState> {
    PROVIDER.get().and_then(|provider| provider.state(server))
}

fn settings(oauth: &warden_config::OAuthSpec) -> ClientSettings {
    ClientSettings {
        client_name: "Warden".into(),
        metadata_url: oauth.client_metadata_url.clone(),
        preregistered: oauth.client_id.clone().map(|client_id| Preregistered {
            client_id,
            client_secret: oauth.client_secret.clone().map(Secret::new),
            issuer: oauth.issuer.clone(),
            auth_method: None,
        }),
    }
}

/// How `state` reads in `warden tools`.
pub fn describe(state: &AuthState) -> String {
    match state {
        AuthState::NeedsSignIn => "needs sign-in".into(),
        AuthState::SignedIn {
            issuer,
            until,
            refreshable,
        } => {
            let until = until.map_or_else(
                || "until the server refuses it".to_owned(),
                |at| format!("until {}", rfc3339(at)),
            );
            let refresh = if *refreshable { ", refreshable" } else { "" };
            format!("signed in with {issuer} {until}{refresh}")
        }
        AuthState::Refused(reason) => format!("token refused: {reason}"),
    }
}

/// `at` (seconds since the epoch) as `YYYY-MM-DDTHH:MM:SSZ`.
fn rfc3339(at: u64) -> String {
    let days = at / 86_400;
    let rest = at % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

fn remote_spec<'a>(specs: &'a [ServerSpec], name: &str) -> Result<&'a ServerSpec, Failure> {
    let spec = specs
        .iter()
        .find(|spec| spec.name == name)
        .ok_or_else(|| Failure::usage(anyhow!("no server named {name:?} in the configuration")))?;
    if !matches!(spec.transport, TransportSpec::Http { .. }) {
        return Err(Failure::usage(anyhow!(
            "{name} is a local (stdio) server: it has no sign-in (OAuth is for remote servers)"
        )));
    }
    Ok(spec)
}

/// `warden login SERVER`.
pub async fn login(global: &GlobalArgs, args: LoginArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let spec = remote_spec(&config.servers, &args.server)?;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    // Lines typed on standard input: the paste-back fallback.
    let (send, receive) = tokio::sync::mpsc::channel::<String>(4);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        while stdin.read_line(&mut line).is_ok_and(|n| n > 0) {
            if send.blocking_send(std::mem::take(&mut line)).is_err() {
                break;
            }
        }
    });
    sign_in(
        &env,
        spec,
        SignIn {
            open_browser: interactive && !args.no_browser,
            pasted: receive,
            url_on_stdout: true,
        },
    )
    .await?;
    Ok(Code::Ok)
}

/// How a sign-in meets the person: whether the browser is opened, where pasted addresses
/// come from, and whether the address is also printed alone on stdout (for scripts).
pub struct SignIn {
    /// Open the authorization address with the platform's opener (never through a shell).
    pub open_browser: bool,
    /// Lines the person typed: the paste-back fallback for a machine without a browser.
    pub pasted: tokio::sync::mpsc::Receiver<String>,
    /// Print the address on stdout too, alone on its line.
    pub url_on_stdout: bool,
}

/// Signs in to the remote server `spec` (`warden login`, and `warden chat` when the
/// person accepts its offer): the authorization address shown on stderr, the loopback
/// redirect (or a pasted address) awaited within the consent limit, the tokens kept where
/// the server's `token_store` says. Says how it went on stderr; returns the sign-in state.
pub async fn sign_in(env: &Environment, spec: &ServerSpec, how: SignIn) -> Result<String, Failure> {
    let TransportSpec::Http { url, settings, .. } = &spec.transport else {
        return Err(Failure::usage(anyhow!(
            "{} is not a remote server",
            spec.name
        )));
    };
    let server = spec.name.clone();
    let (open_browser, url_on_stdout) = (how.open_browser, how.url_on_stdout);
    let show: warden_oauth::loopback::Show = Box::new(move |url| {
        let shown = inert(url.as_str(), Shape::Line);
        eprintln!("To sign in to {server}, open this address in a browser:\n\n  {shown}\n");
        eprintln!(
            "Waiting for the browser to come back. On a machine without a browser, open the \
             address elsewhere, then paste here the whole address the browser ends up at."
        );
        if url_on_stdout {
            // Printed on stdout too, alone on its line, for scripts.
            println!("{shown}");
        }
        if open_browser {
            open_in_browser(url);
        }
    });
    let agent = Loopback::bind(Some(how.pasted), show)
        .await
        .map_err(|error| unavailable(&spec.name, error))?;
    let provider = provider(env);
    let client = provider
        .build(
            &spec.name,
            url,
            settings.allow_http,
            &settings.oauth,
            Arc::new(agent),
        )
        .map_err(|error| unavailable(&spec.name, error))?;
    client
        .login()
        .await
        .map_err(|error| unavailable(&spec.name, error))?;
    let state = describe(&client.state());
    eprintln!("{}: {}", spec.name, inert(&state, Shape::Line));
    let store = provider.store(&spec.name, settings.oauth.token_store);
    if provider.forgets(&store) {
        eprintln!(
            "The tokens are NOT kept after this command ({}).",
            match settings.oauth.token_store {
                TokenStoreChoice::Memory => "the configuration says token_store = \"memory\"",
                _ => "no credential store answered: see the warning above",
            }
        );
    } else {
        eprintln!("The tokens are kept in {}.", store.describe());
    }
    Ok(state)
}

/// `warden logout SERVER`: forgets the server's record in the credential store (when it
/// answers) and in the token file (when there is one), whatever `token_store` says now.
pub fn logout(global: &GlobalArgs, args: LogoutArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let spec = remote_spec(&config.servers, &args.server)?;
    let file = FileStore::new(token_file(&env));
    let os = OsStore::with_service(warden_oauth::os_store::SERVICE, os_limit());
    let mut removed_from = Vec::new();
    let mut failures = Vec::new();
    match os.remove(&spec.name) {
        Ok(true) => removed_from.push(os.describe()),
        Ok(false) => {}
        // No credential store here (or it did not answer): said, but not a failure, since a
        // machine without one is common; whatever it may hold stays there.
        Err(error) => eprintln!(
            "{}: warning: {error}; anything kept there for it remains",
            spec.name
        ),
    }
    if file.path().exists() {
        match file.remove(&spec.name) {
            Ok(true) => removed_from.push(file.describe()),
            Ok(false) => {}
            Err(error) => failures.push(error.to_string()),
        }
    }
    if removed_from.is_empty() {
        eprintln!("{}: nothing was stored for it", spec.name);
    } else {
        eprintln!(
            "{}: signed out; its tokens and registrations were removed from {}",
            spec.name,
            removed_from.join(" and ")
        );
    }
    if failures.is_empty() {
        return Ok(Code::Ok);
    }
    Err(Failure {
        code: Code::Unavailable,
        error: anyhow!(
            "{}: the token file could not be changed, so its tokens may remain: {}",
            spec.name,
            failures.join("; ")
        ),
    })
}

fn unavailable(server: &str, error: warden_oauth::OAuthError) -> Failure {
    Failure {
        code: Code::Unavailable,
        error: anyhow!("{server}: {error}"),
    }
}

/// Opens `url` in the user's browser without a shell: only `https://` (or loopback
/// `http://`) URLs, handed as one argument to the platform's opener.
fn open_in_browser(url: &warden_oauth::Url) {
    if warden_oauth::check_url("the authorization URL", url.as_str(), false).is_err() {
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(error) = spawned {
        tracing::info!("could not open a browser ({opener}: {error}); use the address above");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_083_199), "2026-11-30T23:59:59Z");
    }
}
