//! Packages of `npx`/`uvx` servers, installed and pinned by Warden (decision 0037), with
//! the real registries: server-everything through `npx -y` and mcp-server-time through
//! `uvx`, installed once (confined, registry hosts only) and reused by every assertion
//! here: a later start runs offline; a modified installed file, a changed lockfile and a
//! directory others may write are refused, each with an honest control; `warden update`
//! reports without a terminal and re-pins only with `--yes`; two processes installing at
//! once install once, and an update beside a running `warden serve` leaves the install it
//! runs from until `warden packages gc` after it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::{Scratch, assert_exit, json, server_toml, stdout};

/// server-everything and mcp-server-time at the versions tests/peers pins.
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
const TIME: &str = "mcp-server-time==2026.10.19";

/// An install from a real registry on a loaded machine.
const INSTALL_LIMIT: Duration = Duration::from_secs(600);
const LIMIT: Duration = Duration::from_secs(60);

fn states(listing: &serde_json::Value) -> Vec<(String, String, String)> {
    listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["state"].as_str().unwrap().to_owned(),
                s["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn state_of(listing: &serde_json::Value, name: &str) -> (String, String) {
    let (_, state, reason) = states(listing)
        .into_iter()
        .find(|(n, _, _)| n == name)
        .unwrap_or_else(|| panic!("no server {name} in {listing}"));
    (state, reason)
}

/// `warden tools --json --refresh` (every server really started, not answered from the
/// catalogue cache: what a start checks is what this test is about), optionally in a
/// network namespace of its own with nothing in it (no route anywhere: an install or a
/// registry lookup would fail).
fn tools(scratch: &Scratch, config: &str, offline: bool) -> serde_json::Value {
    let mut command = scratch.warden(&["--config", config, "tools", "--json", "--refresh"]);
    if offline {
        let inner = command;
        command = Command::new("unshare");
        // SAFETY: geteuid cannot fail and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            command.args(["--user", "--map-current-user"]);
        }
        command
            .arg("--net")
            .arg("--")
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(scratch.path())
            .envs(inner.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .env_remove("WARDEN_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
    }
    let output = support::run_with_limit(command, LIMIT);
    assert_exit(&output, 0);
    json(&output)
}

/// The one install directory under the package cache holding `marker`.
fn install_dir(scratch: &Scratch, marker: &str) -> PathBuf {
    let base = scratch.path().join("state/warden-packages");
    let mut found = Vec::new();
    for server in std::fs::read_dir(&base).unwrap() {
        let server = server.unwrap().path();
        if !server.is_dir() {
            continue; // the slots' install locks
        }
        for install in std::fs::read_dir(server).unwrap() {
            let install = install.unwrap().path();
            if install.join(marker).exists() {
                found.push(install);
            }
        }
    }
    assert_eq!(found.len(), 1, "installs holding {marker}: {found:?}");
    found.remove(0)
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

#[test]
fn npx_and_uvx_servers_are_installed_pinned_run_offline_and_refused_when_changed() {
    let scratch = Scratch::new();
    // The state home must be reachable by the sandbox's uid (Warden runs as root here):
    // the package cache is beside Warden's private state directory.
    std::fs::create_dir_all(scratch.path().join("state")).unwrap();
    std::fs::set_permissions(
        scratch.path().join("state"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let toml = server_toml(
        "everything",
        Path::new("npx"),
        &["-y", EVERYTHING, "stdio"],
        "",
    ) + &server_toml(
        "time",
        Path::new("uvx"),
        &[TIME, "--local-timezone", "UTC"],
        "",
    );
    let config = scratch.config(&toml);
    let config = config.to_str().unwrap();

    // `warden approve` installs (first start) and shows what was pinned.
    let output = scratch.run(
        &["--config", config, "approve", "everything", "--yes"],
        INSTALL_LIMIT,
    );
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains("package @modelcontextprotocol/server-everything@2026.8.31 (npm")
            && text.contains("lockfile sha256"),
        "{text}"
    );
    let npm = install_dir(&scratch, "package-lock.json");
    assert!(
        npm.join("node_modules/@modelcontextprotocol/server-everything/package.json")
            .is_file()
    );

    // The install was confined: its only connections went through the egress proxy, to
    // the registry, and are in the audit log.
    let audit = scratch.run(&["audit", "--json", "--server", "package-install"], LIMIT);
    assert_exit(&audit, 0);
    let rows = json(&audit);
    let rows = rows.as_array().unwrap();
    assert!(!rows.is_empty(), "no egress rows for the install");
    for row in rows {
        assert_eq!(row["front_end"], "egress", "{row}");
        assert_eq!(row["arguments"]["host"], "registry.npmjs.org", "{row}");
    }

    // The first `tools` installs the PyPI package; both connect.
    let output = scratch.run(&["--config", config, "tools", "--json"], INSTALL_LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    for name in ["everything", "time"] {
        assert_eq!(
            state_of(&listing, name).0,
            "connected",
            "{:?}",
            states(&listing)
        );
    }
    let pypi = install_dir(&scratch, "requirements.lock");
    let lock = std::fs::read_to_string(pypi.join("requirements.lock")).unwrap();
    assert!(
        lock.lines()
            .any(|l| l.starts_with("mcp-server-time==2026.10.19 --hash=sha256:")),
        "{lock}"
    );

    // A second start needs no network at all: Warden and both servers run in an empty
    // network namespace, and neither launcher nor registry is asked again.
    let listing = tools(&scratch, config, true);
    for name in ["everything", "time"] {
        assert_eq!(
            state_of(&listing, name).0,
            "connected",
            "{:?}",
            states(&listing)
        );
    }

    // Attack: a file of the installed npm package is modified. Refused, naming the file;
    // the untouched PyPI server still starts (control).
    let script = npm.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let original = std::fs::read(&script).unwrap();
    append(&script, "\n// changed after pinning\n");
    let listing = tools(&scratch, config, true);
    let (state, reason) = state_of(&listing, "everything");
    assert_eq!(state, "failed", "{:?}", states(&listing));
    assert!(
        reason.contains("changed since it was pinned")
            && reason.contains(
                "changed  node_modules/@modelcontextprotocol/server-everything/dist/index.js"
            )
            && reason.contains("warden update everything"),
        "{reason}"
    );
    assert_eq!(
        state_of(&listing, "time").0,
        "connected",
        "{:?}",
        states(&listing)
    );
    std::fs::write(&script, &original).unwrap();

    // Attack: the PyPI lockfile is changed. Refused until it is what was pinned again.
    let lock_path = pypi.join("requirements.lock");
    append(&lock_path, "evil==1.0 --hash=sha256:00\n");
    let (state, reason) = state_of(&tools(&scratch, config, true), "time");
    assert_eq!(state, "failed");
    assert!(
        reason.contains("lockfile") && reason.contains("requirements.lock changed"),
        "{reason}"
    );
    std::fs::write(&lock_path, &lock).unwrap();

    // Attack surface: a directory of the install that others may write (another local
    // user could swap code in). Refused, naming it; fixed permissions start again.
    let bin = pypi.join("venv/bin");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (state, reason) = state_of(&tools(&scratch, config, true), "time");
    assert_eq!(state, "failed");
    assert!(
        reason.contains("venv/bin is writable by its group or by others"),
        "{reason}"
    );
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let listing = tools(&scratch, config, true);
    for name in ["everything", "time"] {
        assert_eq!(
            state_of(&listing, name).0,
            "connected",
            "{:?}",
            states(&listing)
        );
    }

    // `warden update`: the pin says an older version with one file fewer (as if the
    // registry now served a new release), and the install on disk was tampered with.
    let db = scratch.path().join("state/warden/state.db");
    let key = warden_store::server_key("everything", "explicit", Path::new(config));
    {
        let mut store = warden_store::Store::open(&db).unwrap();
        let mut pin = store.package_pin_for(&key).unwrap().unwrap();
        pin.version = "2026.8.30".into();
        let mut manifest = warden_packages::Manifest::from_json(&pin.manifest);
        manifest
            .items
            .remove("node_modules/@modelcontextprotocol/server-everything/package.json")
            .unwrap();
        pin.manifest = manifest.to_json();
        pin.tree_sha256 = manifest.sha256();
        store.save_package_pin(&key, &pin).unwrap();
    }
    append(&script, "\n// tampered\n");
    // Without a terminal and without --yes: the diff is reported, nothing changes.
    let output = scratch.run(&["--config", config, "update", "everything"], INSTALL_LIMIT);
    assert_exit(&output, 4);
    let text = stdout(&output);
    assert!(
        text.contains("@modelcontextprotocol/server-everything 2026.8.30 -> 2026.8.31")
            && text.contains(
                "added    node_modules/@modelcontextprotocol/server-everything/package.json"
            ),
        "{text}"
    );
    assert!(
        support::stderr(&output).contains("nothing updated"),
        "{}",
        support::describe(&output)
    );
    let store = warden_store::Store::open(&db).unwrap();
    assert_eq!(
        store.package_pin_for(&key).unwrap().unwrap().version,
        "2026.8.30"
    );
    drop(store);
    assert_eq!(
        install_dir(&scratch, "package-lock.json"),
        npm,
        "the install was kept"
    );
    let (state, _) = state_of(&tools(&scratch, config, true), "everything");
    assert_eq!(state, "failed", "still refused");
    // With --yes: a fresh install is pinned, the tampered one removed, and it starts.
    let output = scratch.run(
        &["--config", config, "update", "everything", "--yes"],
        INSTALL_LIMIT,
    );
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("pinned to @modelcontextprotocol/server-everything@2026.8.31")
    );
    assert!(!npm.exists(), "the earlier install is removed");
    let listing = tools(&scratch, config, true);
    for name in ["everything", "time"] {
        assert_eq!(
            state_of(&listing, name).0,
            "connected",
            "{:?}",
            states(&listing)
        );
    }
    scratch.assert_no_leftovers();
}

/// A package pin of `dir` (what an install of `name` recorded).
fn pin_of(name: &str, dir: &Path) -> warden_store::packages::PackagePin {
    warden_store::packages::PackagePin {
        ecosystem: "npm".into(),
        name: name.into(),
        requested: "1.0.0".into(),
        version: "1.0.0".into(),
        dir: dir.to_string_lossy().into_owned(),
        lock_sha256: "0".repeat(64),
        tree_sha256: "0".repeat(64),
        manifest: "{}".into(),
    }
}

fn fake_install(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("node_modules/pkg")).unwrap();
    std::fs::write(dir.join("node_modules/pkg/index.js"), "x".repeat(1000)).unwrap();
    dir.to_path_buf()
}

#[test]
fn packages_gc_removes_only_unreferenced_installs_and_never_follows_a_link_out() {
    let scratch = Scratch::new();
    let state = scratch.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = scratch.config(&server_toml(
        "kept",
        Path::new("npx"),
        &["-y", "kept-pkg@1.0.0"],
        "",
    ));
    let config_text = config.to_str().unwrap();
    let base = state.join("warden-packages");
    let pinned = fake_install(&base.join("aaaa/2"));
    let replaced = fake_install(&base.join("aaaa/1"));
    let removed_server = fake_install(&base.join("bbbb/1"));
    let other_project = fake_install(&base.join("cccc/1"));
    let interrupted = fake_install(&base.join("dddd/1"));
    // Replays: links planted in the cache, in place of a slot and of an install, pointing
    // at a directory outside it.
    let victim = scratch.path().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    std::fs::write(victim.join("inner/keep"), "precious").unwrap();
    std::os::unix::fs::symlink(&victim, base.join("eeee")).unwrap();
    std::os::unix::fs::symlink(&victim, base.join("aaaa/3")).unwrap();
    let key = |name: &str, file: &Path| warden_store::server_key(name, "explicit", file);
    let db = state.join("warden/state.db");
    {
        let mut store = warden_store::Store::open(&db).unwrap();
        store
            .save_package_pin(&key("kept", &config), &pin_of("kept-pkg", &pinned))
            .unwrap();
        // A server since removed from this configuration.
        store
            .save_package_pin(&key("gone", &config), &pin_of("gone-pkg", &removed_server))
            .unwrap();
        // A server of a file this configuration does not read: not ours to judge.
        store
            .save_package_pin(
                &key("theirs", Path::new("/elsewhere/warden.toml")),
                &pin_of("their-pkg", &other_project),
            )
            .unwrap();
    }

    // The dry run lists and changes nothing.
    let output = scratch.run(
        &["--config", config_text, "packages", "gc", "--dry-run"],
        LIMIT,
    );
    assert_exit(&output, 0);
    let text = stdout(&output);
    for dir in [&replaced, &removed_server, &interrupted] {
        assert!(
            text.contains(&format!("would remove {}", dir.display())),
            "{text}"
        );
    }
    assert!(
        text.contains("would drop the package pin of explicit:"),
        "{text}"
    );
    assert!(text.contains("#gone (gone-pkg@1.0.0)"), "{text}");
    for dir in [&pinned, &other_project] {
        assert!(
            !text.contains(&format!("remove {}", dir.display())),
            "{text}"
        );
    }
    for dir in [
        &pinned,
        &replaced,
        &removed_server,
        &other_project,
        &interrupted,
    ] {
        assert!(dir.join("node_modules/pkg/index.js").is_file(), "{dir:?}");
    }
    let store = warden_store::Store::open(&db).unwrap();
    assert_eq!(
        store.package_pins().unwrap().len(),
        3,
        "dry run drops no pin"
    );
    drop(store);

    let output = scratch.run(&["--config", config_text, "packages", "gc"], LIMIT);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(text.contains("removed 3 install(s)"), "{text}");
    // Controls: installs a pin references are whole, this config's and another file's.
    for dir in [&pinned, &other_project] {
        assert!(
            dir.join("node_modules/pkg/index.js").is_file(),
            "{dir:?}: {text}"
        );
    }
    for dir in [&replaced, &removed_server, &interrupted] {
        assert!(!dir.exists(), "{dir:?}: {text}");
    }
    // Nothing outside the cache was touched; the links were reported, not followed.
    assert!(victim.join("inner/keep").is_file());
    assert!(base.join("eeee").is_symlink() && base.join("aaaa/3").is_symlink());
    assert!(text.contains("a symbolic link: not followed"), "{text}");
    let store = warden_store::Store::open(&db).unwrap();
    let keys: Vec<String> = store
        .package_pins()
        .unwrap()
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let mut expected = [
        key("kept", &config),
        key("theirs", Path::new("/elsewhere/warden.toml")),
    ];
    expected.sort();
    assert_eq!(keys, expected);
}

#[test]
fn two_processes_starting_a_missing_package_install_it_once() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.path().join("state")).unwrap();
    std::fs::set_permissions(
        scratch.path().join("state"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let config = scratch.config(&server_toml(
        "everything",
        Path::new("npx"),
        &["-y", EVERYTHING, "stdio"],
        "",
    ));
    let config = config.to_str().unwrap();
    // Two Warden processes at once, both finding the package missing.
    let spawn = || {
        let mut command = scratch.warden(&["--config", config, "tools", "--json", "--refresh"]);
        command.env("WARDEN_LOG", "info");
        command.spawn().unwrap()
    };
    let first = spawn();
    std::thread::sleep(Duration::from_millis(300));
    let second = spawn();
    let outputs = [
        support::wait_with_limit(first, INSTALL_LIMIT),
        support::wait_with_limit(second, INSTALL_LIMIT),
    ];
    for output in &outputs {
        assert_exit(output, 0);
        assert_eq!(
            state_of(&json(output), "everything").0,
            "connected",
            "{}",
            support::describe(output)
        );
    }
    // One install (`install_dir` asserts exactly one directory holds a lockfile): the
    // other process waited for the lock, then verified and used it.
    let npm = install_dir(&scratch, "package-lock.json");
    let logs: String = outputs.iter().map(support::stderr).collect();
    assert!(
        logs.contains("waiting for another install of this server's package to finish")
            && logs.contains("using the install another process just made"),
        "{logs}"
    );
    let db = scratch.path().join("state/warden/state.db");
    let key = warden_store::server_key("everything", "explicit", Path::new(config));
    let pin = warden_store::Store::open(&db)
        .unwrap()
        .package_pin_for(&key)
        .unwrap()
        .unwrap();
    assert_eq!(Path::new(&pin.dir), npm);

    // `warden update` beside a running `warden serve` (two real processes): the update
    // pins a fresh install, but the one the served server runs from is held, so it stays
    // (and the server keeps answering) until the gateway ends; `gc` then removes it.
    let text = std::fs::read_to_string(config).unwrap();
    std::fs::write(
        config,
        text.replace(
            "[servers.everything]\n",
            "[servers.everything]\nstart = \"eager\"\n",
        ),
    )
    .unwrap();
    let mut serve = Gateway::start(&scratch, config);
    assert!(serve.tools().contains(&"everything__echo".to_owned()));
    let output = scratch.run(
        &["--config", config, "update", "everything", "--yes"],
        INSTALL_LIMIT,
    );
    assert_exit(&output, 0);
    let store = warden_store::Store::open(&db).unwrap();
    let moved = store.package_pin_for(&key).unwrap().unwrap();
    drop(store);
    assert_ne!(
        Path::new(&moved.dir),
        npm,
        "the update pinned a fresh install"
    );
    assert!(
        npm.join("package-lock.json").is_file(),
        "the install the served server runs from was removed under it: {}",
        support::describe(&output)
    );
    assert!(
        support::stderr(&output).contains("in use by a running server"),
        "{}",
        support::describe(&output)
    );
    assert!(serve.tools().contains(&"everything__echo".to_owned()));
    serve.finish();
    let output = scratch.run(&["--config", config, "packages", "gc"], LIMIT);
    assert_exit(&output, 0);
    assert!(!npm.exists(), "{}", support::describe(&output));
    assert!(Path::new(&moved.dir).join("package-lock.json").is_file());
    scratch.assert_no_leftovers();
}

/// `warden serve` over stdio, driven line by line.
struct Gateway {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
}

impl Gateway {
    /// Starts `warden serve` and initialises a 2025-11-25 session with it.
    fn start(scratch: &Scratch, config: &str) -> Gateway {
        use std::io::BufRead;
        let mut child = scratch
            .warden(&["--config", config, "serve"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut gateway = Gateway {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        gateway.request(
            "initialize",
            serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}),
        );
        gateway.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        gateway
    }

    fn send(&mut self, message: &serde_json::Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its result (other messages are skipped).
    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let line = self
                .lines
                .recv_timeout(INSTALL_LIMIT)
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// The names `tools/list` shows.
    fn tools(&mut self) -> Vec<String> {
        let list = self.request("tools/list", serde_json::json!({}));
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Ends the session (stdin closed) and waits for the gateway to exit.
    fn finish(self) {
        drop(self.stdin);
        let output = support::wait_with_limit(self.child, LIMIT);
        assert_exit(&output, 0);
    }
}
