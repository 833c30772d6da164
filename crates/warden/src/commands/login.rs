//! `warden login SERVER` and `warden logout SERVER`, and the OAuth provider every command
//! connects remote servers with (docs/remote-servers.md, decision 0022).
//!
//! - Where tokens go: in memory (the default: forgotten when the command ends), or, only
//!   when the server's configuration says `token_store = "file"`, in
//!   `$XDG_STATE_HOME/warden/oauth-tokens.json` (mode 0600), with a warning every time the
//!   file is used. The operating system's credential store is not supported yet.
//! - Who asks the user: only `warden login`. Every other command connects with no user
//!   agent, so a server that needs a sign-in is reported ("needs sign-in: run `warden
//!   login NAME`") and the command goes on without it; a stored refresh token is still
//!   used without asking.
//! - `warden login` opens the browser (when it runs in a terminal and an opener exists;
//!   never through a shell) on a loopback redirect, prints the URL in any case, and also
//!   accepts the redirected-to URL pasted on standard input, for a machine without a
//!   browser.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::anyhow;
use warden_config::{Environment, ServerSpec, TokenStoreChoice, TransportSpec};
use warden_mcp::http::{OAuthProvider, Remote};
use warden_oauth::{
    AuthState, ClientSettings, FileStore, Loopback, MemoryStore, NoUserAgent, OAuthClient,
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
    clients: Mutex<BTreeMap<String, Arc<OAuthClient>>>,
}

impl Provider {
    fn new(env: &Environment) -> Provider {
        Provider {
            file: Arc::new(FileStore::new(token_file(env))),
            memory: Arc::new(MemoryStore::default()),
            clients: Mutex::new(BTreeMap::new()),
        }
    }

    /// The sign-in state of `server`, if it is remote and was connected.
    pub fn state(&self, server: &str) -> Option<AuthState> {
        lock(&self.clients).get(server).map(|client| client.state())
    }

    fn store(&self, name: &str, choice: TokenStoreChoice) -> Arc<dyn Store> {
        match choice {
            TokenStoreChoice::Memory => self.memory.clone(),
            TokenStoreChoice::File => {
                tracing::warn!(
                    server = %name,
                    "OAuth tokens for this server are kept in {} because its configuration says token_store = \"file\": anything running as you can read them",
                    self.file.path().display()
                );
                self.file.clone()
            }
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
    let TransportSpec::Http { url, settings, .. } = &spec.transport else {
        return Err(Failure::usage(anyhow!(
            "{} is not a remote server",
            spec.name
        )));
    };
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let open_browser = interactive && !args.no_browser;
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
    let server = spec.name.clone();
    let show: warden_oauth::loopback::Show = Box::new(move |url| {
        let shown = inert(url.as_str(), Shape::Line);
        eprintln!("To sign in to {server}, open this address in a browser:\n\n  {shown}\n");
        eprintln!(
            "Waiting for the browser to come back. On a machine without a browser, open the \
             address elsewhere, then paste here the whole address the browser ends up at."
        );
        // Printed on stdout too, alone on its line, for scripts.
        println!("{shown}");
        if open_browser {
            open_in_browser(url);
        }
    });
    let agent = Loopback::bind(Some(receive), show)
        .await
        .map_err(|error| unavailable(&spec.name, error))?;
    let provider = provider(&env);
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
    eprintln!(
        "{}: {}",
        spec.name,
        inert(&describe(&client.state()), Shape::Line)
    );
    match settings.oauth.token_store {
        TokenStoreChoice::File => eprintln!(
            "The tokens are kept in {} (mode 0600), as the configuration asks.",
            token_file(&env).display()
        ),
        TokenStoreChoice::Memory => eprintln!(
            "The tokens are NOT kept after this command: set token_store = \"file\" under \
             [servers.{}.oauth] to keep them in a 0600 file (the operating system's credential \
             store is not supported yet).",
            spec.name
        ),
    }
    Ok(Code::Ok)
}

/// `warden logout SERVER`.
pub fn logout(global: &GlobalArgs, args: LogoutArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let spec = remote_spec(&config.servers, &args.server)?;
    let store = FileStore::new(token_file(&env));
    let removed = store
        .remove(&spec.name)
        .map_err(|error| unavailable(&spec.name, error))?;
    if removed {
        eprintln!(
            "{}: signed out; its tokens and registrations were removed from {}",
            spec.name,
            store.path().display()
        );
    } else {
        eprintln!("{}: nothing was stored for it", spec.name);
    }
    Ok(Code::Ok)
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
