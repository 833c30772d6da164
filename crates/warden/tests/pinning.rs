//! Pinned executables: the first start of a server records the sha256 of its program and
//! of the files its arguments name; a later start whose bytes differ is refused, with a
//! reason naming what changed, until `warden pin SERVER` accepts the new state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use support::{
    Scratch, assert_exit, copied_server, json, server_toml, stderr, stdout, testserver_bin,
};

const LIMIT: Duration = Duration::from_secs(30);

/// Appends bytes to a file: an ELF still runs, a shell script gets a comment.
fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

/// `warden tools --json`, starting every server (`--refresh`: these tests are about what a
/// start checks, not about the catalogue cache).
fn tools(scratch: &Scratch, config: &str) -> serde_json::Value {
    let output = scratch.run(&["--config", config, "tools", "--refresh", "--json"], LIMIT);
    assert_exit(&output, 0);
    json(&output)
}

fn call(scratch: &Scratch, config: &str, target: &str) -> std::process::Output {
    scratch.run(
        &[
            "--config",
            config,
            "call",
            "--yes",
            target,
            "--args",
            r#"{"message":"hi"}"#,
        ],
        LIMIT,
    )
}

#[test]
fn a_replaced_binary_is_refused_until_it_is_pinned_again() {
    let scratch = Scratch::new();
    let program = copied_server(&scratch);
    let config = scratch.config(&server_toml("good", &program, &["good"], ""));
    let config = config.to_str().unwrap();

    // First start: trust on first use, the program is pinned.
    let listing = tools(&scratch, config);
    assert_eq!(listing["servers"][0]["state"], "connected", "{listing}");
    assert!(scratch.path().join("state/warden/state.db").exists());
    let output = call(&scratch, config, "good/echo");
    assert_exit(&output, 0);

    // The call above was a second start with the same bytes. Different bytes: refused.
    append(&program, b"\0changed after pinning");
    let listing = tools(&scratch, config);
    let server = &listing["servers"][0];
    assert_eq!(server["state"], "failed", "{listing}");
    let reason = server["reason"].as_str().unwrap();
    assert!(reason.contains(&program.display().to_string()), "{reason}");
    assert!(reason.contains("changed"), "{reason}");
    assert!(reason.contains("warden pin good"), "{reason}");
    let output = call(&scratch, config, "good/echo");
    assert_exit(&output, 3);
    assert!(stderr(&output).contains("changed"), "{}", stderr(&output));

    // `--show` shows the change and records nothing.
    let output = scratch.run(&["--config", config, "pin", "good", "--show"], LIMIT);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("changed since it was pinned"),
        "{}",
        stdout(&output)
    );
    assert_exit(&call(&scratch, config, "good/echo"), 3);

    // Without a terminal, `warden pin` asks nobody and records nothing (like `warden
    // approve`): the server stays refused.
    let output = scratch.run(&["--config", config, "pin", "good"], LIMIT);
    assert_exit(&output, 4);
    assert!(
        stderr(&output).contains("no terminal") && stderr(&output).contains("--yes"),
        "{}",
        stderr(&output)
    );
    assert_exit(&call(&scratch, config, "good/echo"), 3);

    // Accepted after a look (`--yes`, as a script would): the next call works.
    let output = scratch.run(&["--config", config, "pin", "good", "--yes"], LIMIT);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("pinned to what it runs now"),
        "{}",
        stdout(&output)
    );
    let output = call(&scratch, config, "good/echo");
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "echo: hi\n");

    // An unknown server is a usage error.
    let output = scratch.run(&["--config", config, "pin", "nope", "--yes"], LIMIT);
    assert_exit(&output, 2);
    scratch.assert_no_leftovers();
}

#[test]
fn a_changed_script_argument_is_refused() {
    let scratch = Scratch::new();
    let scripts = scratch.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("server.sh");
    std::fs::write(
        &script,
        format!("exec {:?} good\n", testserver_bin().display().to_string()),
    )
    .unwrap();
    // The script runs the test server from the build folder, which a confined server
    // cannot reach; pinning is the same either way.
    let config = scratch.config(&server_toml(
        "scripted",
        Path::new("/bin/sh"),
        &[script.to_str().unwrap()],
        "confine = false",
    ));
    let config = config.to_str().unwrap();

    let listing = tools(&scratch, config);
    assert_eq!(listing["servers"][0]["state"], "connected", "{listing}");

    append(&script, b"# changed\n");
    let listing = tools(&scratch, config);
    let server = &listing["servers"][0];
    assert_eq!(server["state"], "failed", "{listing}");
    let reason = server["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("script {} changed", script.display())),
        "{reason}"
    );
    assert!(
        !reason.contains("program"),
        "the shell did not change: {reason}"
    );
    assert_exit(&call(&scratch, config, "scripted/echo"), 3);
    scratch.assert_no_leftovers();
}

/// A small MCP server in plain Python (no packages): one tool named `TOOL`; `--log FILE`
/// appends a line per start and per call; `MARKER`, when set, is created at start (the
/// evidence that this code ran).
const PY_SERVER: &str = r#"import json, sys
TOOL = "hello"
MARKER = None
args = sys.argv[1:]
log = args[args.index("--log") + 1] if "--log" in args else None
def note(line):
    if log:
        with open(log, "a") as f:
            f.write(line + "\n")
if MARKER:
    open(MARKER, "w").close()
note("started")
while True:
    raw = sys.stdin.readline()
    if not raw:
        break
    try:
        msg = json.loads(raw)
    except ValueError:
        continue
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fixture", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": TOOL, "description": "Answers with its name.",
                             "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        note("call")
        result = {"content": [{"type": "text", "text": TOOL}]}
    else:
        reply = {"jsonrpc": "2.0", "id": msg["id"],
                 "error": {"code": -32601, "message": "no such method"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"#;

const PYTHON: &str = "/usr/bin/python3";

/// The fixture server's code, with another tool name and a marker file it creates.
fn evil_server(marker: &Path) -> String {
    PY_SERVER
        .replace("TOOL = \"hello\"", "TOOL = \"evil\"")
        .replace(
            "MARKER = None",
            &format!("MARKER = {:?}", marker.display().to_string()),
        )
}

/// `dir/NAME` holding `text`, readable by a confined server.
fn write_script(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

/// An existing, empty file a confined server (another uid under root) may append to.
fn server_writable_file(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, "").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
}

fn state_of(listing: &serde_json::Value) -> (String, String) {
    let server = &listing["servers"][0];
    (
        server["state"].as_str().unwrap_or_default().to_owned(),
        server["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
fn a_server_that_writes_its_own_log_starts_again_and_again() {
    for confine in [true, false] {
        let scratch = Scratch::new();
        let script = write_script(&scratch.path().join("app"), "server.py", PY_SERVER);
        let data = support::server_writable_dir(&scratch.path().join("data"));
        let log = data.join("server.log");
        server_writable_file(&log);
        let extra = if confine {
            support::write_grant(&[&data])
        } else {
            "confine = false".to_owned()
        };
        let config = scratch.config(&server_toml(
            "logger",
            Path::new(PYTHON),
            &[script.to_str().unwrap(), "--log", log.to_str().unwrap()],
            &extra,
        ));
        let config = config.to_str().unwrap();
        // Every start and every call appends to the log named in the arguments.
        for round in 0..3 {
            let listing = tools(&scratch, config);
            assert_eq!(
                state_of(&listing).0,
                "connected",
                "confine = {confine}, start {round}: {listing}"
            );
            let output = scratch.run(
                &[
                    "--config",
                    config,
                    "call",
                    "--yes",
                    "logger/hello",
                    "--args",
                    "{}",
                ],
                LIMIT,
            );
            assert_exit(&output, 0);
        }
        let lines = std::fs::read_to_string(&log).unwrap();
        assert!(lines.lines().count() >= 9, "the log grew: {lines}");
        let output = scratch.run(&["--config", config, "pin", "logger", "--show"], LIMIT);
        assert_exit(&output, 0);
        let shown = stdout(&output);
        assert!(shown.contains("matches its pin"), "{shown}");
        assert!(
            shown.contains(&format!("script {}", script.display())),
            "{shown}"
        );
        assert!(
            !shown.contains("server.log"),
            "the log is not pinned: {shown}"
        );

        // The script itself is still pinned: a changed one is refused.
        append(&script, b"# changed\n");
        let (state, reason) = state_of(&tools(&scratch, config));
        assert_eq!(state, "failed", "confine = {confine}");
        assert!(
            reason.contains(&format!("script {} changed", script.display())),
            "{reason}"
        );
        scratch.assert_no_leftovers();
    }
}

/// Watches `file` with inotify; when a process closes it after reading (Warden hashing
/// it), renames `replacement` over it, once. Returns whether the swap happened.
fn swap_when_read(file: &Path, replacement: &Path) -> std::thread::JoinHandle<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let watched = CString::new(file.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain system calls on a NUL-terminated path; the descriptor is ours.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: as above.
    let wd = unsafe { libc::inotify_add_watch(fd, watched.as_ptr(), libc::IN_CLOSE_NOWRITE) };
    assert!(wd >= 0);
    let from = replacement.to_path_buf();
    let to = file.to_path_buf();
    std::thread::spawn(move || {
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd; at most 30 s.
        let ready = unsafe { libc::poll(&mut pollfd, 1, 30_000) };
        let swapped = ready == 1 && std::fs::rename(&from, &to).is_ok();
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(fd) };
        swapped
    })
}

#[test]
fn a_script_inside_a_write_grant_is_refused_one_beside_it_starts() {
    let scratch = Scratch::new();
    let app = scratch.path().join("app");
    let script = write_script(&app, "server.py", PY_SERVER);
    let data = support::server_writable_dir(&app.join("data"));
    support::open_to_servers(&app);
    // The server may write where its own code lies: it could replace the script between
    // the check of its pin and the start, so no pin can vouch for it.
    let exposed = |grant: &Path| {
        server_toml(
            "exposed",
            Path::new(PYTHON),
            &[script.to_str().unwrap()],
            &support::write_grant(&[grant]),
        )
    };
    let config = scratch.config(&exposed(&app));
    let config = config.to_str().unwrap();
    // The attack of a server that may write there: the moment Warden has read the
    // script, other code is renamed over it.
    let out = support::server_writable_dir(&scratch.path().join("out"));
    let marker = out.join("evil-ran");
    let staged = write_script(&app, ".staged.py", &evil_server(&marker));
    support::open_to_servers(&app);
    let swapper = swap_when_read(&script, &staged);
    let (state, reason) = state_of(&tools(&scratch, config));
    assert!(swapper.join().unwrap(), "the swap was made");
    assert!(!marker.exists(), "the swapped-in code ran");
    assert_eq!(state, "failed");
    assert!(
        reason.contains(&format!(
            "{}: it lies inside {}, which server `exposed` may write",
            script.display(),
            app.display()
        )),
        "{reason}"
    );
    let output = scratch.run(&["--config", config, "pin", "exposed", "--show"], LIMIT);
    assert!(
        stdout(&output).contains("WILL NOT START"),
        "{}",
        stdout(&output)
    );
    let output = scratch.run(&["--config", config, "probe", "exposed", "--json"], LIMIT);
    assert_exit(&output, 0);
    let probe = json(&output);
    let exposed_lines = probe["pins"]["exposed"].as_array().unwrap();
    assert_eq!(exposed_lines.len(), 1, "{probe}");
    assert!(!marker.exists());

    // The honest script back. `app` is writable by every user here: that alone exposes
    // it too.
    write_script(&app, "server.py", PY_SERVER);
    {
        // World-writable without the sticky bit: anyone could rename the script.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let config = scratch.config(&exposed(&data));
    let config = config.to_str().unwrap();
    let (state, reason) = state_of(&tools(&scratch, config));
    assert_eq!(state, "failed");
    assert!(reason.contains("writable by every user"), "{reason}");

    // The honest set-up: code in a directory only its owner writes, a data directory
    // granted.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (state, reason) = state_of(&tools(&scratch, config));
    assert_eq!(state, "connected", "{reason}");
    let output = scratch.run(&["--config", config, "probe", "exposed", "--json"], LIMIT);
    assert_exit(&output, 0);
    assert_eq!(json(&output)["pins"]["exposed"], serde_json::json!([]));
    scratch.assert_no_leftovers();
}

#[test]
fn a_pin_recorded_by_the_earlier_rule_with_a_data_file_keeps_working() {
    let scratch = Scratch::new();
    let script = write_script(&scratch.path().join("app"), "server.py", PY_SERVER);
    let data = support::server_writable_dir(&scratch.path().join("data"));
    let log = data.join("server.log");
    server_writable_file(&log);
    let config_path = scratch.config(&server_toml(
        "old",
        Path::new(PYTHON),
        &[script.to_str().unwrap(), "--log", log.to_str().unwrap()],
        &support::write_grant(&[&data]),
    ));
    let config = config_path.to_str().unwrap();
    assert_eq!(state_of(&tools(&scratch, config)).0, "connected");

    // Rewrite the stored pin as the earlier rule recorded it: every file argument, the
    // log included (with the hash it had then).
    let db = scratch.path().join("state/warden/state.db");
    let rewrite = |script_hash: Option<&str>| {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let (key, files): (String, String) = conn
            .query_row("SELECT server_key, files FROM pins", [], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        let mut files: Vec<(String, String)> = serde_json::from_str(&files).unwrap();
        if let Some(hash) = script_hash {
            files[0].1 = hash.to_owned();
        }
        files.push((log.display().to_string(), "0".repeat(64)));
        conn.execute(
            "UPDATE pins SET rule = 1, files = ?1 WHERE server_key = ?2",
            rusqlite::params![serde_json::to_string(&files).unwrap(), key],
        )
        .unwrap();
    };
    rewrite(None);
    // The log changed since (its hash is all zeros): not compared, no refusal.
    let output = scratch.run(&["--config", config, "pin", "old", "--show"], LIMIT);
    assert!(
        stdout(&output).contains("matches its pin"),
        "{}",
        stdout(&output)
    );
    assert!(
        stdout(&output).contains("earlier rule") && stdout(&output).contains("server.log"),
        "{}",
        stdout(&output)
    );
    assert_eq!(state_of(&tools(&scratch, config)).0, "connected");
    // ... and the start recorded the pin again under the current rule, without the log.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (rule, files): (i64, String) = conn
        .query_row("SELECT rule, files FROM pins", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    assert_eq!(rule, 2);
    assert!(!files.contains("server.log"), "{files}");
    drop(conn);

    // The script, which both rules pin, is still compared under the earlier rule.
    rewrite(Some(&"1".repeat(64)));
    let (state, reason) = state_of(&tools(&scratch, config));
    assert_eq!(state, "failed");
    assert!(reason.contains("script"), "{reason}");
    scratch.assert_no_leftovers();
}
