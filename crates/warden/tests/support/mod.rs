//! Shared helpers for the end-to-end tests: running the real `warden` binary against real
//! servers, and proving afterwards that nothing it started is still running.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Environment variable carrying a per-test marker, so `/proc/*/environ` tells which
/// processes a test left behind. Warden gets it from the test; servers start with a scrubbed
/// environment, so [`server_toml`] passes it on explicitly through each server's `env`
/// table (`${WARDEN_TEST_TAG}`), and everything a server starts inherits it from there.
/// Warden's own helper processes of a confined server (the sandbox's waiter and init, forks
/// of Warden) carry it from Warden's environment.
pub const TAG_VAR: &str = "WARDEN_TEST_TAG";

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The installed npm and PyPI peers (`scripts/test` installs them).
pub fn peers_dir() -> PathBuf {
    let dir = std::env::var_os("WARDEN_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"));
    assert!(
        dir.join(".stamp").exists(),
        "real MCP peers are not installed in {}: run `scripts/test` (or `scripts/install-peers {}`)",
        dir.display(),
        dir.display()
    );
    dir
}

/// The `warden` binary under test.
pub fn warden_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_warden"))
}

/// The misbehaving test server, built by the workspace next to `warden`.
pub fn testserver_bin() -> PathBuf {
    let path = warden_bin().with_file_name("warden-testserver");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p warden-testservers` (scripts/test does)",
        path.display()
    );
    path
}

/// A copy of the test server in a folder a confined server (uid 65534 under root) may read
/// and execute, so that a test can change its bytes.
pub fn copied_server(scratch: &Scratch) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch.path().join("srv");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = dir.join("warden-testserver");
    std::fs::copy(testserver_bin(), &program).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    program
}

/// A scratch folder for one test, with a unique tag for its processes.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub tag: String,
}

impl Scratch {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Confined servers run as uid 65534 when the tests run as root: they must be able
        // to write the record files tests put here (the folder is granted to them
        // explicitly where needed).
        open_to_servers(dir.path());
        let tag = format!(
            "{}-{}",
            std::process::id(),
            dir.path().file_name().unwrap().to_string_lossy()
        );
        Self { dir, tag }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `warden.toml` in the scratch folder and returns its path.
    pub fn config(&self, toml: &str) -> PathBuf {
        let path = self.path().join("warden.toml");
        std::fs::write(&path, toml).unwrap();
        path
    }

    /// A `warden` command with a private state folder and this test's tag.
    pub fn warden(&self, args: &[&str]) -> Command {
        let mut command = Command::new(warden_bin());
        command
            .args(args)
            .current_dir(self.path())
            .env(TAG_VAR, &self.tag)
            .env("XDG_STATE_HOME", self.path().join("state"))
            .env("XDG_CONFIG_HOME", self.path().join("config-home"))
            // No credential store unless a test brings one (crates/warden/tests/oauth.rs):
            // never the session bus of whoever runs the tests.
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}", self.path().join("no-bus").display()),
            )
            .env_remove("WARDEN_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs `warden` with `args` to completion (at most `limit`), returning its output.
    pub fn run(&self, args: &[&str], limit: Duration) -> Output {
        run_with_limit(self.warden(args), limit)
    }

    /// Processes still alive that carry this test's tag.
    pub fn leftovers(&self) -> Vec<String> {
        tagged_processes(&self.tag)
    }

    /// Asserts, within a short grace period, that nothing this test started still runs.
    pub fn assert_no_leftovers(&self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let left = self.leftovers();
            if left.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                for pid in &left {
                    kill(pid);
                }
                panic!("processes left running after the test: {left:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for pid in self.leftovers() {
            kill(&pid);
        }
    }
}

fn kill(pid: &str) {
    let _ = Command::new("kill").args(["-9", pid]).status();
}

/// Runs a command, killing it if it outlives `limit`.
pub fn run_with_limit(mut command: Command, limit: Duration) -> Output {
    wait_with_limit(command.spawn().unwrap(), limit)
}

/// Waits for a started command, killing it if it outlives `limit`.
pub fn wait_with_limit(child: std::process::Child, limit: Duration) -> Output {
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    match receiver.recv_timeout(limit) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            kill(&pid.to_string());
            panic!("warden did not finish within {limit:?}: it hung");
        }
    }
}

/// Live (non-zombie) processes whose environment holds `TAG_VAR=tag`.
pub fn tagged_processes(tag: &str) -> Vec<String> {
    let needle = format!("{TAG_VAR}={tag}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let tagged = environ
            .split(|&byte| byte == 0)
            .any(|item| item == needle.as_bytes());
        if !tagged {
            continue;
        }
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'));
        if !zombie {
            found.push(name);
        }
    }
    found
}

/// Everything about a run, for assertion messages.
pub fn describe(output: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status.code(),
        stdout(output),
        stderr(output)
    )
}

/// Asserts the exit code, showing the whole run when it differs.
pub fn assert_exit(output: &Output, code: i32) {
    assert_eq!(output.status.code(), Some(code), "{}", describe(output));
}

/// stdout as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Parses stdout as JSON, with the whole output in the panic message if it is not.
pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "stdout is not JSON ({error}):\n{}\nstderr:\n{}",
            stdout(output),
            stderr(output)
        )
    })
}

/// Makes `path` (a directory) usable by a confined server: when the tests run as root,
/// servers run as uid 65534 and can neither enter nor write a root-owned 0700 directory.
/// Test folders only: everyone may then write there. Sticky, like `/tmp`, so that what lies
/// below (a non-root run's state and scratch base) cannot be replaced by another user, which
/// Warden checks.
pub fn open_to_servers(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o1777)).unwrap();
}

/// Creates `dir` for a confined server to write in (see [`open_to_servers`]).
pub fn server_writable_dir(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    open_to_servers(dir);
    dir.to_path_buf()
}

/// The `env` entry that hands the test's tag to a server (see [`TAG_VAR`]).
const TAG_ENTRY: &str = "WARDEN_TEST_TAG = \"${WARDEN_TEST_TAG}\"";

/// TOML for a stdio server entry. `extra` lines are appended inside the table. The test's
/// tag is added to the server's `env` (merged into an `env = { ... }` line of `extra`).
pub fn server_toml(name: &str, command: &Path, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let extra = if extra.contains("env = { ") {
        extra.replacen("env = { ", &format!("env = {{ {TAG_ENTRY}, "), 1)
    } else {
        format!("env = {{ {TAG_ENTRY} }}\n{extra}")
    };
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = [{}]\n{extra}\n",
        command.display().to_string(),
        args.join(", ")
    )
}

/// The user's permission for project servers named `servers` to get the test's tag from
/// Warden's environment (`[project_servers.NAME] env`, docs/config.md "Project files"):
/// [`server_toml`] passes it with `${WARDEN_TEST_TAG}`. Text for the user file.
pub fn project_tag_allowance(servers: &[&str]) -> String {
    servers
        .iter()
        .map(|name| format!("[project_servers.{name}]\nenv = [{TAG_VAR:?}]\n"))
        .collect()
}

/// `sandbox = { write = [...] }` granting `dirs` for writing.
pub fn write_grant(dirs: &[&Path]) -> String {
    let dirs: Vec<String> = dirs
        .iter()
        .map(|d| format!("{:?}", d.display().to_string()))
        .collect();
    format!("sandbox = {{ write = [{}] }}", dirs.join(", "))
}

/// A running `warden-model-server` (the scripted stand-in for a model API); stopped when
/// dropped (its stdin is closed, then it is killed).
pub struct ModelServer {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// The request log, one JSON object per request.
    pub log: PathBuf,
}

impl ModelServer {
    /// Starts the server with `script` (`{"steps": [...]}`), its files in `scratch`.
    pub fn start(scratch: &Scratch, script: &serde_json::Value) -> ModelServer {
        use std::io::BufRead;
        let name = format!("model-{}", std::process::id());
        let script_path = scratch.path().join(format!("{name}-script.json"));
        std::fs::write(&script_path, serde_json::to_vec_pretty(script).unwrap()).unwrap();
        let log = scratch.path().join(format!("{name}-requests.jsonl"));
        let mut child = Command::new(warden_bin().with_file_name("warden-model-server"))
            .arg("--script")
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .env(TAG_VAR, &scratch.tag)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("warden-model-server is built by `cargo test --workspace`");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        let base_url = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line from the model server: {line:?}"))
            .to_owned();
        ModelServer {
            child,
            base_url,
            log,
        }
    }

    /// The requests logged so far.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON lines of a `warden run --json` transcript.
pub fn transcript(output: &Output) -> Vec<serde_json::Value> {
    stdout(output)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| {
                panic!("not a JSON line ({error}): {line}\n{}", describe(output))
            })
        })
        .collect()
}

/// The path of an npm peer's entry point (`server-everything`, `server-filesystem`, ...).
pub fn node_server(package: &str) -> String {
    peers_dir()
        .join("node/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js")
        .display()
        .to_string()
}

/// The real peers of the foundation issue, configured for a scratch folder: their names and
/// TOML entries (everything, filesystem, memory, time, git, pysdk). The filesystem server
/// reads `files/` (holding `a.txt`), git serves an empty repository in `repo/`, memory
/// writes in `memory/`.
pub fn peer_entries(scratch: &Scratch) -> Vec<(&'static str, String)> {
    let peers = peers_dir();
    let files = scratch.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("a.txt"), "alpha\n").unwrap();
    let repo = scratch.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(init.success());
    // server-memory writes its file: it needs a directory it may write in.
    let memory_dir = server_writable_dir(&scratch.path().join("memory"));
    let memory_file = memory_dir.join("memory.jsonl");
    let venv = peers.join("venv/bin");
    let py_server = peers.join("py_sdk_server.py");
    vec![
        (
            "everything",
            server_toml(
                "everything",
                "node".as_ref(),
                &[&node_server("server-everything"), "stdio"],
                "",
            ),
        ),
        (
            "filesystem",
            server_toml(
                "filesystem",
                "node".as_ref(),
                &[&node_server("server-filesystem"), files.to_str().unwrap()],
                &format!("sandbox = {{ read = [{:?}] }}", files.display().to_string()),
            ),
        ),
        (
            "memory",
            server_toml(
                "memory",
                "node".as_ref(),
                &[&node_server("server-memory")],
                &format!(
                    "env = {{ MEMORY_FILE_PATH = {:?} }}\n{}",
                    memory_file.display().to_string(),
                    write_grant(&[&memory_dir])
                ),
            ),
        ),
        (
            "time",
            server_toml(
                "time",
                &venv.join("mcp-server-time"),
                &["--local-timezone", "UTC"],
                "",
            ),
        ),
        (
            "git",
            server_toml(
                "git",
                &venv.join("mcp-server-git"),
                &["--repository", repo.to_str().unwrap()],
                &write_grant(&[&repo]),
            ),
        ),
        (
            "pysdk",
            server_toml(
                "pysdk",
                &venv.join("python"),
                &[py_server.to_str().unwrap()],
                "",
            ),
        ),
    ]
}

/// A server process started by a test, killed when dropped.
pub struct HttpServer {
    child: std::process::Child,
    /// Where it listens.
    pub url: String,
    log: PathBuf,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HttpServer {
    /// The hostile test server in `mode`; it prints its URL first.
    pub fn hostile(scratch: &Scratch, mode: &str) -> HttpServer {
        HttpServer::hostile_with(scratch, mode, &[])
    }

    /// The hostile test server in `mode`, with `env` added to its environment.
    pub fn hostile_with(scratch: &Scratch, mode: &str, env: &[(&str, &str)]) -> HttpServer {
        let program = warden_bin().with_file_name("warden-http-testserver");
        assert!(
            program.exists(),
            "{} is missing: build it with `cargo build -p warden-testservers`",
            program.display()
        );
        let log = scratch.path().join(format!("{mode}-{}.log", env.len()));
        let mut child = Command::new(program)
            .arg(mode)
            .envs(env.iter().copied())
            .env(TAG_VAR, &scratch.tag)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        HttpServer {
            child,
            url: line.trim().to_owned(),
            log,
        }
    }

    /// A real peer started with `command`, listening on `port` at `path`.
    pub fn peer(scratch: &Scratch, mut command: Command, port: u16, path: &str) -> HttpServer {
        let log = scratch.path().join(format!("peer-{port}.log"));
        let child = command
            .env(TAG_VAR, &scratch.tag)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let server = HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}{path}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the peer did not listen on {port} within 30 s: {}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The requests it logged, one per line.
    pub fn requests(&self) -> Vec<String> {
        self.log_text().lines().map(str::to_owned).collect()
    }
}
