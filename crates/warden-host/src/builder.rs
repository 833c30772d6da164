//! The one way to make a [`Host`]: every front end (`warden run`, `chat`, `call`, `tools`,
//! `scan`, `approve`, and the gateway) builds its host here, so every server is started
//! through the same guards.
//!
//! Given a state store, the builder puts in place what guards a server, whichever front end
//! asks: project servers start only once approved, tool definitions are pinned and a drifted
//! or flagged one is held back ([`Reviewer`]), every stdio server's executable is checked
//! against its pin before it is spawned ([`PinningLauncher`]), and every session's calls
//! are written to the audit log ([`AuditLog`]). A front end adds only its hooks: who answers
//! servers' elicitation requests, the OAuth client for remote servers, and what to do when
//! an audit row cannot be written. Without a store (tests, benchmarks) none of the guards
//! is in place: every server starts, every tool is offered, nothing is audited.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use warden_config::ServerSpec;
use warden_mcp::{ConfinedLauncher, ConnectOptions, Elicitor, Launcher};
use warden_policy::Policy;
use warden_store::Store;

use crate::approvals::Reviewer;
use crate::audit::{AuditFailureHook, AuditLog, warn_on_failure};
use crate::cache::Cached;
use crate::host::{Guard, Host, NoReview, Review, Starter};
use crate::pins::PinningLauncher;
use crate::starts::{StartGate, default_parallel_starts};

/// Settings and hooks for a [`Host`]; [`connect`](HostBuilder::connect) starts it.
pub struct HostBuilder {
    policy: Arc<Policy>,
    store: Option<Store>,
    configured: Option<Vec<ServerSpec>>,
    scratch_dir: PathBuf,
    options: ConnectOptions,
    review: Option<Arc<dyn Review>>,
    launcher: Option<Arc<dyn Launcher>>,
    on_audit_failure: AuditFailureHook,
    starts: Option<Arc<StartGate>>,
    from_cache: bool,
    idle_stop: Option<std::time::Duration>,
    packages_dir: Option<PathBuf>,
}

impl HostBuilder {
    /// A host deciding calls under `policy` ([`Host::builder`]).
    pub fn new(policy: Arc<Policy>) -> HostBuilder {
        HostBuilder {
            policy,
            store: None,
            configured: None,
            scratch_dir: PathBuf::new(),
            options: ConnectOptions::default(),
            review: None,
            launcher: None,
            on_audit_failure: warn_on_failure(),
            starts: None,
            from_cache: false,
            idle_stop: None,
            packages_dir: None,
        }
    }

    /// The state store: approvals, tool definition pins, executable pins and the audit log
    /// are read and written there. Without one, nothing is checked or recorded.
    pub fn store(mut self, store: Store) -> HostBuilder {
        self.store = Some(store);
        self
    }

    /// Every server of the configuration (not only those connected): their write grants
    /// decide which pinned files someone other than the user could change. Defaults to the
    /// servers connected.
    pub fn configured(mut self, servers: &[ServerSpec]) -> HostBuilder {
        self.configured = Some(servers.to_vec());
        self
    }

    /// The base of confined servers' private scratch directories.
    pub fn scratch_dir(mut self, dir: PathBuf) -> HostBuilder {
        self.scratch_dir = dir;
        self
    }

    /// Where packages of `npx`/`uvx` servers are installed ([`crate::packages`]); without
    /// one (or without a store) such servers run their launcher as written.
    pub fn packages_dir(mut self, dir: PathBuf) -> HostBuilder {
        self.packages_dir = Some(dir);
        self
    }

    /// Where per-server stderr logs go (`NAME.log`); none keeps them in memory only.
    pub fn log_dir(mut self, dir: PathBuf) -> HostBuilder {
        self.options.log_dir = Some(dir);
        self
    }

    /// Who answers servers' elicitation requests (without one, every request is declined).
    pub fn elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> HostBuilder {
        self.options.elicitor = Some(elicitor);
        self
    }

    /// The OAuth client remote servers get.
    pub fn oauth(mut self, oauth: Arc<dyn warden_mcp::http::OAuthProvider>) -> HostBuilder {
        self.options.oauth = Some(oauth);
        self
    }

    /// Connection limits other than the hooks above (tests, benchmarks).
    pub fn options(mut self, options: ConnectOptions) -> HostBuilder {
        self.options = options;
        self
    }

    /// Replaces the review built from the store (which servers start, which tools are
    /// offered): `warden approve` offers every tool of the server it pins.
    pub fn review(mut self, review: Arc<dyn Review>) -> HostBuilder {
        self.review = Some(review);
        self
    }

    /// Replaces the launcher (by default a confined launcher that checks every stdio
    /// server against its pin when there is a store): for tests and benchmarks.
    pub fn launcher(mut self, launcher: Arc<dyn Launcher>) -> HostBuilder {
        self.launcher = Some(launcher);
        self
    }

    /// What to do when an audit row cannot be written (by default, a warning in the log);
    /// called once per host: later failures are only logged.
    pub fn on_audit_failure(
        mut self,
        hook: impl Fn(&crate::audit::AuditError) + Send + Sync + 'static,
    ) -> HostBuilder {
        self.on_audit_failure = Arc::new(hook);
        self
    }

    /// At most `limit` servers start at once (at least 1); the others wait their turn in
    /// the order they asked. Defaults to [`default_parallel_starts`].
    pub fn max_parallel_starts(mut self, limit: usize) -> HostBuilder {
        self.starts = Some(Arc::new(StartGate::new(limit)));
        self
    }

    /// Uses `gate` for the turns of server starts: a front end keeps it to watch the
    /// queue ([`StartGate::on_progress`]).
    pub fn start_gate(mut self, gate: Arc<StartGate>) -> HostBuilder {
        self.starts = Some(gate);
        self
    }

    /// Answers from the catalogue cache where it is valid ([`crate::cache`]): a server whose
    /// cached catalogue matches what it is now (its approved definition and executable
    /// pin, every tool still pinned as cached) is not started, and its entry says so
    /// ([`ServerEntry::cached_at`](crate::ServerEntry::cached_at)); the others are started.
    /// Needs a store; without one every server is started.
    pub fn from_cache(mut self, yes: bool) -> HostBuilder {
        self.from_cache = yes;
        self
    }

    /// Stops a server unused for `idle` (one whose definition sets no `idle_stop`); its next
    /// call starts it again. `None` (the default) keeps servers running until shutdown.
    pub fn idle_stop(mut self, idle: Option<std::time::Duration>) -> HostBuilder {
        self.idle_stop = idle;
        self
    }

    /// Starts every server in `specs`, at most the start limit at once
    /// ([`max_parallel_starts`](HostBuilder::max_parallel_starts)), and builds the catalogue
    /// (see [`Host::servers`] for each one's state): a server that fails or is slow costs
    /// only itself, each bounded by its connect timeout counted from its own start.
    pub async fn connect(self, specs: Vec<ServerSpec>) -> Host {
        let HostBuilder {
            policy,
            store,
            configured,
            scratch_dir,
            options,
            review,
            launcher,
            on_audit_failure,
            starts,
            from_cache,
            idle_stop,
            packages_dir,
        } = self;
        let starts = starts.unwrap_or_else(|| Arc::new(StartGate::new(default_parallel_starts())));
        let store = store.map(|store| Arc::new(Mutex::new(store)));
        let mut guard = Guard::default();
        let review: Arc<dyn Review> = match (review, &store) {
            (Some(review), _) => review,
            (None, Some(store)) => {
                let reviewer = Arc::new(Reviewer::shared(Arc::clone(store)));
                guard.reviewer = Some(Arc::clone(&reviewer));
                guard.cache = Some(Arc::clone(store));
                reviewer
            }
            (None, None) => Arc::new(NoReview),
        };
        let audit = store
            .as_ref()
            .map(|store| Arc::new(AuditLog::new(Arc::clone(store), on_audit_failure)));
        // Egress proxy events (servers with a network allowlist) go to the audit log too.
        let confined = |scratch_dir: PathBuf| match &audit {
            Some(log) => ConfinedLauncher::from_env(scratch_dir)
                .with_egress_sink(crate::egress_audit::audit_sink(Arc::clone(log))),
            None => ConfinedLauncher::from_env(scratch_dir),
        };
        let launcher: Arc<dyn Launcher> = match (launcher, &store) {
            (Some(launcher), _) => launcher,
            (None, Some(store)) => {
                let configured = configured.as_deref().unwrap_or(&specs);
                let inner = confined(scratch_dir);
                let pinning =
                    PinningLauncher::shared(inner.clone(), Arc::clone(store), &specs, configured);
                let pinning = Arc::new(match packages_dir {
                    // Installs run confined like servers, through the same launcher.
                    Some(dir) => pinning.with_packages(warden_packages::Packages::new(
                        dir,
                        Arc::new(warden_packages::ConfinedRunner::new(inner)),
                    )),
                    None => pinning,
                });
                // Only servers that may start (a project server once approved) get their
                // package installed.
                let admitted: Vec<ServerSpec> = specs
                    .iter()
                    .filter(|spec| review.admit(spec).is_ok())
                    .cloned()
                    .collect();
                pinning.install_missing(&admitted).await;
                pinning
            }
            (None, None) => Arc::new(confined(scratch_dir)),
        };
        guard.audit = audit;
        // Relayed servers (`relay = "NAME"`) go through the process's relay channels; with
        // a store, every start inside the sandbox is checked against its executable pin.
        let mut options = options;
        if options.relay.is_none() {
            options.relay = Some(match &store {
                Some(store) => Arc::new(warden_relay::PinnedDialer::new(
                    warden_relay::Dialer::global(),
                    Arc::new(crate::relay_pins::RelayPins::new(Arc::clone(store))),
                )),
                None => warden_relay::Dialer::global(),
            });
        }
        let (specs, cached) = match (&store, from_cache && guard.cache.is_some()) {
            (Some(store), true) => read_cache(Arc::clone(store), Arc::clone(&review), specs).await,
            _ => (specs, Vec::new()),
        };
        let starter = Starter {
            launcher,
            options,
            starts,
            idle_stop,
        };
        Host::connect_all(specs, cached, policy, review, guard, starter).await
    }
}

/// Splits `specs` into the servers to start and those answered from the catalogue cache,
/// reading the store on a blocking thread. A server whose row cannot be read is started,
/// and so is a project server the review does not admit now (its approval covers files on
/// disk the cache key does not: starting it says why it is refused).
async fn read_cache(
    store: Arc<Mutex<Store>>,
    review: Arc<dyn Review>,
    specs: Vec<ServerSpec>,
) -> (Vec<ServerSpec>, Vec<(ServerSpec, Cached)>) {
    let fallback = specs.clone();
    let read = tokio::task::spawn_blocking(move || {
        let mut start = Vec::new();
        let mut candidates = Vec::new();
        for spec in specs {
            // Kept warm: started with the host whatever the cache holds. A relayed server
            // is not cached (its start is its relay's); a remote one is answered from the
            // cache only while its server's list lifetime lasts (`cache::lifetime`).
            let warm = spec.lifecycle.start == warden_config::StartMode::Eager
                || !crate::cache::cacheable(&spec);
            // The review reads the store itself, so it is asked before the lock is taken.
            if warm || (crate::approvals::needs_approval(&spec) && review.admit(&spec).is_err()) {
                start.push(spec);
            } else {
                candidates.push(spec);
            }
        }
        let store = store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // One snapshot for every row: a hundred servers make a few hundred reads, and the
        // scan's part of each key is the same for all of them.
        let scan = crate::cache::scan_version();
        let (more, cached) = store
            .read(|store| split_by_cache(store, &scan, candidates))
            .inspect_err(|error| tracing::warn!("the catalogue cache cannot be read: {error}"))
            .ok()?;
        start.extend(more);
        Some((start, cached))
    })
    .await;
    read.ok().flatten().unwrap_or((fallback, Vec::new()))
}

/// The servers of `specs` whose catalogue `store` holds for what they are now, and the
/// rest (to be started); a row that cannot be read means a start.
fn split_by_cache(
    store: &Store,
    scan: &serde_json::Value,
    specs: Vec<ServerSpec>,
) -> (Vec<ServerSpec>, Vec<(ServerSpec, Cached)>) {
    let mut start = Vec::new();
    let mut cached = Vec::new();
    for spec in specs {
        match crate::cache::load_scanned(store, &spec, scan) {
            Ok(Some(entry)) => cached.push((spec, entry)),
            Ok(None) => start.push(spec),
            Err(error) => {
                tracing::warn!(server = %spec.name, "its catalogue cache cannot be read: {error}");
                start.push(spec);
            }
        }
    }
    (start, cached)
}
