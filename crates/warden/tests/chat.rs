//! `warden chat` as a person uses it: the real binary in a real terminal (a detached tmux
//! session), keys typed with `tmux send-keys`, the screen read with `tmux capture-pane`.
//! The model is the scripted `warden-model-server` (the Anthropic wire format), the tool
//! server Warden's own test server, whose `echo` the policy asks about. Two more tests run it
//! without a terminal (lines from a pipe, approvals refused) and without a model.
//!
//! Needs `tmux` on the PATH (`.ci/run` installs it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{ModelServer, Scratch, server_toml};

/// How long the screen is watched for something before the test fails.
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

/// A `warden chat` in a detached tmux session on a tmux server of its own (its socket in the
/// scratch folder). The tmux server is killed when this is dropped, whatever happened.
struct Terminal {
    socket: PathBuf,
    tag: String,
    /// Where the shell writes warden's exit status.
    exit_status: PathBuf,
}

impl Terminal {
    /// Starts `warden chat --config CONFIG` against `model`, in a 160×50 terminal.
    fn start(scratch: &Scratch, config: &Path, model: &ModelServer) -> Terminal {
        Terminal::start_with(scratch, config, model, &[])
    }

    /// [`start`](Terminal::start), with `VARIABLE=value` words added to warden's
    /// environment.
    fn start_with(
        scratch: &Scratch,
        config: &Path,
        model: &ModelServer,
        env: &[String],
    ) -> Terminal {
        Terminal::start_command(scratch, config, model, env, &["chat"])
    }

    /// [`start_with`](Terminal::start_with) for another command than `chat`: `command`'s
    /// words come first (`["run", "--prompt", "..."]`), the configuration and model after.
    fn start_command(
        scratch: &Scratch,
        config: &Path,
        model: &ModelServer,
        env: &[String],
        command: &[&str],
    ) -> Terminal {
        let tmux_conf = scratch.path().join("tmux.conf");
        // The pane stays after warden exits, so its exit status can be read.
        std::fs::write(
            &tmux_conf,
            "set -g remain-on-exit on\nset -g history-limit 10000\n",
        )
        .unwrap();
        let terminal = Terminal {
            socket: scratch.path().join("tmux.sock"),
            tag: scratch.tag.clone(),
            exit_status: scratch.path().join("exit-status"),
        };
        let state = scratch.path().join("state");
        let config_home = scratch.path().join("config-home");
        let warden = support::warden_bin();
        // The tag goes to warden only, not to the tmux server: the tmux server outlives
        // warden until it is killed, and must not count as a leftover.
        let extra: Vec<&str> = env.iter().map(String::as_str).collect();
        let words: Vec<String> = [
            "env",
            "-u",
            "WARDEN_LOG",
            &format!("{}={}", support::TAG_VAR, scratch.tag),
        ]
        .into_iter()
        .chain(extra)
        .chain([
            &format!("XDG_STATE_HOME={}", state.display()),
            &format!("XDG_CONFIG_HOME={}", config_home.display()),
            "ANTHROPIC_API_KEY=test-key",
            warden.to_str().unwrap(),
        ])
        .chain(command.iter().copied())
        .chain([
            "--config",
            config.to_str().unwrap(),
            "--provider",
            "anthropic",
            "--model",
            "m",
            "--base-url",
            &model.base_url,
        ])
        .map(shell_quote)
        .collect();
        let output = terminal
            .command(&tmux_conf)
            .args(["new-session", "-d", "-x", "160", "-y", "50", "-s", "chat"])
            .arg("-c")
            .arg(scratch.path())
            // The shell writes the status: tmux's own can be missing when the terminal
            // closes before the process is reaped.
            .arg(format!(
                "{}; echo \"$?\" >{}",
                words.join(" "),
                shell_quote(terminal.exit_status.to_str().unwrap())
            ))
            .output()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run tmux ({error}): install it (`apt-get install tmux`; .ci/run does)"
                )
            });
        assert!(output.status.success(), "tmux new-session: {output:?}");
        terminal
    }

    /// A tmux client command for this terminal's server, with a UTF-8 locale and nothing
    /// else from the test's environment.
    fn command(&self, conf: &Path) -> Command {
        let mut command = Command::new("tmux");
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C.UTF-8")
            .env("TERM", "xterm-256color")
            .arg("-u")
            .arg("-f")
            .arg(conf)
            .arg("-S")
            .arg(&self.socket)
            .stdin(Stdio::null());
        command
    }

    fn tmux(&self, args: &[&str]) -> Output {
        self.command(Path::new("/dev/null"))
            .args(args)
            .output()
            .unwrap()
    }

    /// Types `text` and presses Enter.
    fn type_line(&self, text: &str) {
        let typed = self.tmux(&["send-keys", "-t", "chat", "-l", text]);
        assert!(typed.status.success(), "{typed:?}");
        self.key("Enter");
    }

    /// Presses a key (`Enter`, `C-d`).
    fn key(&self, key: &str) {
        let pressed = self.tmux(&["send-keys", "-t", "chat", key]);
        assert!(pressed.status.success(), "{pressed:?}");
    }

    /// Everything the terminal shows and scrolled past, wrapped lines joined.
    fn screen(&self) -> String {
        let output = self.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "chat"]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits until `text` is on the screen `times` times; returns the screen.
    fn wait_for_count(&self, text: &str, times: usize) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if screen.matches(text).count() >= times {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("waited {WAIT:?} for {text:?} (×{times}); the screen:\n{screen}");
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until `text` is on the screen; returns the screen.
    fn wait_for(&self, text: &str) -> String {
        self.wait_for_count(text, 1)
    }

    /// Waits for warden to exit; returns its exit status.
    fn wait_for_exit(&self) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            let status = std::fs::read_to_string(&self.exit_status).unwrap_or_default();
            if status.ends_with('\n') {
                return status.trim().parse().unwrap();
            }
            if Instant::now() > deadline {
                let alive: Vec<String> = support::tagged_processes(&self.tag)
                    .iter()
                    .map(|pid| {
                        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
                        format!("{pid}: {}", stat.unwrap_or_default().trim())
                    })
                    .collect();
                panic!(
                    "warden chat did not exit within {WAIT:?} (still running: {alive:#?}); \
                     the screen:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Asserts that the terminal's program ended (within a short grace period).
    fn assert_ended(&self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while !self.pane_dead() {
            assert!(
                Instant::now() < deadline,
                "the pane is still alive: {}",
                self.screen()
            );
            std::thread::sleep(POLL);
        }
    }

    /// Whether the terminal's only program has ended (the pane is kept, dead, for reading).
    fn pane_dead(&self) -> bool {
        let output = self.tmux(&["display-message", "-p", "-t", "chat", "#{pane_dead}"]);
        String::from_utf8_lossy(&output.stdout).trim() == "1"
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// `word` as one shell word.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The test server as `good`, with `policy` appended to the configuration, in the cautious
/// mode: these sessions exercise the approval prompt, which the default (`assisted`,
/// decision 0026) would skip for a trusted server's write in a clean context.
fn config(scratch: &Scratch, policy: &str) -> PathBuf {
    let program = support::copied_server(scratch);
    scratch.config(&format!(
        "{}{policy}[policy]\nmode = \"cautious\"\n",
        server_toml("good", &program, &["good"], "")
    ))
}

/// The saved history: (role, text) per message, in order.
fn history(scratch: &Scratch) -> Vec<(String, String)> {
    let db = rusqlite::Connection::open(scratch.path().join("state/warden/state.db")).unwrap();
    let mut statement = db
        .prepare("SELECT role, content FROM session_messages ORDER BY session_id, seq")
        .unwrap();
    statement
        .query_map([], |row| {
            let content: String = row.get(1)?;
            let content: Value = serde_json::from_str(&content).unwrap();
            Ok((
                row.get::<_, String>(0)?,
                content["text"].as_str().unwrap_or_default().to_owned(),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_short_session_with_an_approval_and_the_slash_commands() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"text": "I will ask the echo tool.", "tool_calls": [
                {"name": "good__echo", "arguments": {"message": "hello from tmux"}}]},
             "expect": {"tools_include": ["good__echo"], "last_user_text_contains": ["say hello"]},
             "chunk_delay_ms": 20},
            {"reply": {"text": "The server answered: echo: hello from tmux."},
             "expect": {"last_tool_results_contain": ["echo: hello from tmux"]}},
            {"reply": {"text": "A fresh start."},
             "expect": {"last_user_text_contains": ["anyone there"]}}
        ]}),
    );
    let terminal = Terminal::start(&scratch, &config, &model);
    terminal.wait_for("1 of 1 servers connected, 3 tools");
    terminal.wait_for("› ");

    terminal.type_line("say hello through the server");
    // The streamed text, then the approval prompt: the tool, its arguments, the reasons.
    let screen = terminal.wait_for("needs your approval");
    assert!(screen.contains("I will ask the echo tool."), "{screen}");
    assert!(
        screen.contains("`good__echo` (server `good`) needs your approval"),
        "{screen}"
    );
    assert!(
        screen.contains(r#""message": "hello from tmux""#),
        "{screen}"
    );
    assert!(
        screen.contains("no rule matches: its server is untrusted"),
        "{screen}"
    );
    assert!(
        screen.contains("Run it? [y]es once, [s]ession, [N]o:"),
        "{screen}"
    );
    terminal.type_line("y");
    let screen = terminal.wait_for("The server answered: echo: hello from tmux.");
    assert!(
        screen.contains("⏵ good__echo [good] ask → ok (approved by user)"),
        "the call's line: {screen}"
    );

    terminal.type_line("/mcp");
    let screen = terminal.wait_for("p50 ms  p99 ms");
    let row = screen
        .lines()
        .find(|line| line.starts_with("good "))
        .unwrap_or_else(|| panic!("no row for `good`: {screen}"));
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns.len(), 7, "{row}");
    assert_eq!(
        &columns[..5],
        ["good", "connected", "legacy", "3", "1"],
        "{row}"
    );
    for latency in &columns[5..] {
        latency.parse::<u64>().unwrap();
    }
    assert!(
        screen.contains("server            state       era     tools  calls  p50 ms  p99 ms"),
        "{screen}"
    );

    terminal.type_line("/tools");
    let screen = terminal.wait_for("3 tools in the catalogue");
    assert!(
        screen.contains("good__echo  Returns the message"),
        "{screen}"
    );

    terminal.type_line("/audit");
    let screen = terminal.wait_for("chat  good__echo");
    let row = screen
        .lines()
        .find(|line| line.contains("chat  good__echo"))
        .unwrap();
    assert!(row.trim_end().ends_with("ask ok"), "{row}");

    terminal.type_line("/clear");
    terminal.wait_for("(conversation cleared");
    terminal.type_line("anyone there?");
    terminal.wait_for("A fresh start.");

    terminal.type_line("/exit");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    terminal.assert_ended();
    let requests = model.requests();
    drop(model);
    scratch.assert_no_leftovers();

    // After /clear the model saw only the new prompt.
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert_eq!(
        requests[2]["body"]["messages"].as_array().unwrap().len(),
        1,
        "{:#?}",
        requests[2]["body"]["messages"]
    );
    // The history is in the state store.
    let saved = history(&scratch);
    assert_eq!(
        saved,
        [
            ("user", "say hello through the server"),
            ("assistant", "The server answered: echo: hello from tmux."),
            ("user", "anyone there?"),
            ("assistant", "A fresh start."),
        ]
        .map(|(role, text)| (role.to_owned(), text.to_owned())),
    );
}

#[test]
fn a_tool_approved_for_the_session_is_not_asked_about_again() {
    let scratch = Scratch::new();
    // Trusted and clean: asked about only because it may write, so a session-wide yes
    // covers the next call too (results from an untrusted server would ask every time).
    let config = config(
        &scratch,
        "[policy.servers.good]\ntrust = \"trusted\"\nintegrity = \"trusted\"\nconfidentiality = \"public\"\n",
    );
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"tool_calls": [{"name": "good__echo", "arguments": {"message": "one"}}]}},
            {"reply": {"tool_calls": [{"name": "good__echo", "arguments": {"message": "two"}}]},
             "expect": {"last_tool_results_contain": ["echo: one"]}},
            {"reply": {"text": "Both were echoed."},
             "expect": {"last_tool_results_contain": ["echo: two"]}}
        ]}),
    );
    let terminal = Terminal::start(&scratch, &config, &model);
    terminal.wait_for("› ");
    terminal.type_line("echo twice");
    let screen = terminal.wait_for("needs your approval");
    assert!(screen.contains("[s]ession"), "{screen}");
    terminal.type_line("s");
    let screen = terminal.wait_for("Both were echoed.");
    assert_eq!(
        screen.matches("needs your approval").count(),
        1,
        "asked once: {screen}"
    );
    assert!(
        screen.contains("⏵ good__echo [good] ask → ok (approved by user-session)"),
        "{screen}"
    );
    // Ctrl-D at the prompt ends the session cleanly.
    terminal.wait_for_count("› ", 2);
    terminal.key("C-d");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    terminal.assert_ended();
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn a_refused_call_is_reported_to_the_model_and_a_failed_request_keeps_the_chat_alive() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"tool_calls": [{"name": "good__echo", "arguments": {"message": "secret"}}]}},
            {"reply": {"text": "Understood, I did not run it."},
             "expect": {"last_tool_results_contain": ["did not approve"]}},
            {"error": {"status": 400, "message": "a deliberately bad request"}},
            {"reply": {"text": "Still here."}}
        ]}),
    );
    let terminal = Terminal::start(&scratch, &config, &model);
    terminal.wait_for("› ");
    terminal.type_line("echo my secret");
    terminal.wait_for("needs your approval");
    terminal.type_line("n");
    let screen = terminal.wait_for("Understood, I did not run it.");
    assert!(
        screen.contains("⏵ good__echo [good] ask → not run"),
        "{screen}"
    );
    // The model refuses the next request: the chat says so and goes on.
    terminal.type_line("try again");
    let screen = terminal.wait_for("a deliberately bad request");
    assert!(screen.contains("warden: "), "{screen}");
    terminal.type_line("are you still there?");
    terminal.wait_for("Still here.");
    terminal.wait_for_count("› ", 4);
    terminal.key("C-d");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    terminal.assert_ended();
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn a_question_left_open_by_a_timed_out_turn_does_not_swallow_the_next_prompt() {
    let scratch = Scratch::new();
    let config = config(&scratch, "[agent]\nturn_timeout = \"2s\"\n");
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"tool_calls": [{"name": "good__echo", "arguments": {"message": "late"}}]}},
            {"reply": {"text": "Back with a fresh turn."},
             "expect": {"last_user_text_contains": ["hello again"]}}
        ]}),
    );
    let terminal = Terminal::start(&scratch, &config, &model);
    terminal.wait_for("› ");
    terminal.type_line("echo something");
    let screen = terminal.wait_for("Run it?");
    assert!(screen.contains(r#""message": "late""#), "{screen}");
    // Nobody answers: the turn times out, and the chat asks for the next prompt.
    let screen = terminal.wait_for("no final answer within the turn timeout");
    assert!(
        screen.contains("[N]o: \nwarden: no final answer"),
        "the error starts on its own line: {screen}"
    );
    terminal.wait_for_count("› ", 2);
    terminal.type_line("hello again");
    terminal.wait_for("Back with a fresh turn.");
    terminal.wait_for_count("› ", 3);
    terminal.key("C-d");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    terminal.assert_ended();
    drop(model);
    scratch.assert_no_leftovers();
}

/// `warden chat` with `input` piped to its stdin (no terminal), against `model`; waits at
/// most a minute for it to end.
fn piped_chat(
    scratch: &Scratch,
    config: &std::path::Path,
    model: &ModelServer,
    input: &[u8],
) -> std::process::Output {
    piped(scratch, config, model, &["chat"], input)
}

/// [`piped_chat`] for any command: `command`'s words first, the configuration and the
/// model after.
fn piped(
    scratch: &Scratch,
    config: &std::path::Path,
    model: &ModelServer,
    command: &[&str],
    input: &[u8],
) -> std::process::Output {
    use std::io::Write;
    let mut words = command.to_vec();
    words.extend([
        "--config",
        config.to_str().unwrap(),
        "--provider",
        "anthropic",
        "--model",
        "m",
        "--base-url",
        &model.base_url,
    ]);
    let mut command = scratch.warden(&words);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .stdin(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    support::wait_with_limit(child, Duration::from_secs(60))
}

#[test]
fn without_a_terminal_lines_are_read_from_stdin_and_approvals_are_refused() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"tool_calls": [{"name": "good__echo", "arguments": {"message": "x"}}]}},
            {"reply": {"text": "Nobody could approve it."},
             "expect": {"last_tool_results_contain": ["needs the user's approval"]}}
        ]}),
    );
    let output = piped_chat(&scratch, &config, &model, b"echo x\n/audit\n");
    support::assert_exit(&output, 0);
    assert!(
        support::stdout(&output).contains("Nobody could approve it."),
        "{}",
        support::describe(&output)
    );
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("⏵ good__echo [good] ask → not run"),
        "{stderr}"
    );
    assert!(stderr.contains("chat  good__echo"), "{stderr}");
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn no_model_configured_is_a_usage_error() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let output = scratch.run(
        &["chat", "--config", config.to_str().unwrap()],
        Duration::from_secs(60),
    );
    support::assert_exit(&output, 2);
    assert!(
        support::stderr(&output).contains("[model]"),
        "{}",
        support::describe(&output)
    );
}

#[test]
fn ctrl_c_during_a_turn_cancels_the_turn_and_its_calls_not_the_chat() {
    let scratch = Scratch::new();
    let program = support::copied_server(&scratch);
    let config = scratch.config(&format!(
        "{}[policy.servers.good]\ntrust = \"trusted\"\n\
         [[policy.rules]]\ntools = \"good__*\"\neffect = \"allow\"\n",
        server_toml(
            "good",
            &program,
            &["good"],
            "env = { WARDEN_TEST_SLEEP_TOOL = \"1\" }"
        )
    ));
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"tool_calls": [{"name": "good__sleep", "arguments": {"ms": 10000}}]}},
            // The cancelled turn is gone from the conversation: no call without its result
            // (the model server refuses that with a 400), only the new prompt.
            {"reply": {"text": "Back with you."},
             "expect": {"last_user_text_contains": ["again"]}}
        ]}),
    );
    let terminal = Terminal::start(&scratch, &config, &model);
    terminal.wait_for("› ");
    terminal.type_line("sleep for a while");
    terminal.wait_for("good__sleep");
    std::thread::sleep(Duration::from_millis(300));
    terminal.key("C-c");
    terminal.wait_for("the turn and its calls were cancelled");
    terminal.type_line("once again, hello");
    terminal.wait_for("Back with you.");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(requests[1]["status"], 200, "{:#}", requests[1]);
    assert_eq!(
        requests[1]["body"]["messages"].as_array().unwrap().len(),
        1,
        "only the new prompt: {:#}",
        requests[1]["body"]
    );
    terminal.key("C-d");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    terminal.assert_ended();
    drop(model);
    scratch.assert_no_leftovers();
}

/// Warden's test authorization server (`warden-auth-testserver good`, the real OAuth
/// protocol over loopback), killed when dropped. Its MCP endpoint offers one tool, `echo`,
/// which answers `ok` to a request carrying a token it issued.
struct AuthServer {
    child: std::process::Child,
    base: String,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AuthServer {
    fn start() -> AuthServer {
        use std::io::BufRead;
        let program = support::warden_bin().with_file_name("warden-auth-testserver");
        let mut child = Command::new(&program)
            .arg("good")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "{}: {error} (build it with `cargo build -p warden-testservers`)",
                    program.display()
                )
            });
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        AuthServer {
            child,
            base: line.trim().to_owned(),
        }
    }

    /// How many authorizations and code grants it made.
    fn grants(&self) -> (u64, u64) {
        let (_, _, body) = http_get(&format!("{}/admin/stats", self.base));
        let stats: Value = serde_json::from_str(&body).unwrap();
        (
            stats["authorizations"].as_u64().unwrap(),
            stats["code_grants"].as_u64().unwrap(),
        )
    }
}

/// A browser's `GET` of `url` (plain HTTP on loopback): the status line, the `Location`
/// header, the body.
fn http_get(url: &str) -> (String, Option<String>, String) {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (address, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let target = if target.is_empty() { "/" } else { target };
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text.lines().next().unwrap_or_default().to_owned();
    let location = text.lines().find_map(|line| {
        line.strip_prefix("location: ")
            .or(line.strip_prefix("Location: "))
            .map(|l| l.trim().to_owned())
    });
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, location, body)
}

/// The test server as `good` and the authorization server's MCP endpoint as `docs`.
fn config_with_docs(scratch: &Scratch, docs: &AuthServer) -> PathBuf {
    let program = support::copied_server(scratch);
    scratch.config(&format!(
        "{}[servers.docs]\nurl = \"{}/mcp\"\n\n[policy]\nmode = \"cautious\"\n",
        server_toml("good", &program, &["good"], ""),
        docs.base
    ))
}

const OFFER: &str = "Sign in to docs now? [y]es, [b]rowser";

/// A browser opener (`xdg-open`) of the test's own, first on the `PATH` it returns: it
/// writes the address it was asked to open to the returned file.
fn fake_opener(scratch: &Scratch) -> (String, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let bin = scratch.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opened = scratch.path().join("opened");
    let script = bin.join("xdg-open");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$1\" >{}\n",
            shell_quote(opened.to_str().unwrap())
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "PATH={}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (path, opened)
}

#[test]
fn chat_offers_a_sign_in_and_on_yes_the_server_is_connected_and_its_tool_used() {
    let docs = AuthServer::start();
    let scratch = Scratch::new();
    let config = config_with_docs(&scratch, &docs);
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"text": "Asking docs.", "tool_calls": [
                {"name": "docs__echo", "arguments": {}}]},
             "expect": {"tools_include": ["docs__echo", "good__echo"]}},
            {"reply": {"text": "Docs answered."},
             "expect": {"last_tool_results_contain": ["ok"]}}
        ]}),
    );
    let (path, opened) = fake_opener(&scratch);
    let terminal = Terminal::start_with(&scratch, &config, &model, &[path]);
    let screen = terminal.wait_for(OFFER);
    assert!(
        screen.contains("docs needs you to sign in (OAuth)"),
        "{screen}"
    );
    // Nothing was asked of the authorization server before the person said yes.
    assert_eq!(docs.grants(), (0, 0));
    terminal.type_line("y");
    let screen = terminal.wait_for("Waiting for the browser to come back");
    consent_on(&screen);
    terminal.wait_for("docs: connected; its tools are offered in this session.");
    terminal.wait_for("2 of 2 servers connected, 4 tools");
    assert_eq!(docs.grants(), (1, 1));
    // "y" shows the address only: no browser was opened unasked.
    assert!(!opened.exists(), "a browser was opened on a plain yes");

    terminal.type_line("ask docs");
    terminal.wait_for("needs your approval");
    terminal.type_line("y");
    let screen = terminal.wait_for("Docs answered.");
    assert!(
        screen.contains("⏵ docs__echo [docs] ask → ok"),
        "the call's line: {screen}"
    );
    // No token was shown.
    assert!(!screen.contains("at-"), "{screen}");
    terminal.type_line("/exit");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn chat_opens_a_browser_for_the_sign_in_only_when_asked_to() {
    let docs = AuthServer::start();
    let scratch = Scratch::new();
    let config = config_with_docs(&scratch, &docs);
    let model = ModelServer::start(&scratch, &json!({"steps": []}));
    let (path, opened) = fake_opener(&scratch);
    let terminal = Terminal::start_with(&scratch, &config, &model, &[path]);
    terminal.wait_for(OFFER);
    terminal.type_line("b");
    terminal.wait_for("Waiting for the browser to come back");
    // The opener got the authorization address, as one argument.
    let deadline = Instant::now() + WAIT;
    let url = loop {
        let text = std::fs::read_to_string(&opened).unwrap_or_default();
        if text.ends_with('\n') {
            break text.trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no browser was opened: {}",
            terminal.screen()
        );
        std::thread::sleep(POLL);
    };
    assert!(
        url.starts_with(&docs.base) && url.contains("code_challenge_method=S256"),
        "{url}"
    );
    let (_, location, _) = http_get(&url);
    http_get(&location.unwrap());
    terminal.wait_for("2 of 2 servers connected, 4 tools");
    terminal.type_line("/exit");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn chat_declining_the_sign_in_goes_on_without_the_server() {
    let docs = AuthServer::start();
    let scratch = Scratch::new();
    let config = config_with_docs(&scratch, &docs);
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"text": "Only good is here."},
             "expect": {"tools_include": ["good__echo"], "tools_exclude": ["docs__echo"]}}
        ]}),
    );
    let terminal = Terminal::start(&scratch, &config, &model);
    terminal.wait_for(OFFER);
    terminal.type_line("n");
    let screen = terminal.wait_for("1 of 2 servers connected, 3 tools");
    assert!(
        screen.contains("Going on without docs (`warden login docs` signs in to it later)"),
        "{screen}"
    );
    terminal.type_line("who is there?");
    terminal.wait_for("Only good is here.");
    terminal.type_line("/exit");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    assert_eq!(docs.grants(), (0, 0), "nothing was signed in");
    drop(model);
    scratch.assert_no_leftovers();
}

/// The browser's part of a sign-in: the last authorization address shown on `screen` is
/// consented to, and the redirect brought back to Warden's loopback listener.
fn consent_on(screen: &str) {
    let url = screen
        .lines()
        .map(str::trim)
        .rfind(|line| line.starts_with("http://") && line.contains("code_challenge_method=S256"))
        .unwrap_or_else(|| panic!("no authorization address: {screen}"))
        .to_owned();
    let (status, location, _) = http_get(&url);
    assert!(status.contains("302"), "{status}");
    let location = location.unwrap();
    assert!(location.starts_with("http://127.0.0.1:"), "{location}");
    let (status, _, _) = http_get(&location);
    assert!(status.contains("200"), "{status}");
}

/// Declined at the start, signed in later: `/login docs` runs the same sign-in, starts the
/// server in the running chat, and the model is offered its tools from the next prompt.
/// The controls: before it the model does not see them, and `/login` of a server that does
/// not sign in with OAuth (a local one) says so and asks nothing.
#[test]
fn chat_login_signs_in_later_and_the_servers_tools_join_the_session() {
    let docs = AuthServer::start();
    let scratch = Scratch::new();
    let config = config_with_docs(&scratch, &docs);
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"text": "Only good is here."},
             "expect": {"tools_include": ["good__echo"], "tools_exclude": ["docs__echo"]}},
            {"reply": {"text": "Docs is here now."},
             "expect": {"tools_include": ["docs__echo", "good__echo"]}}
        ]}),
    );
    let terminal = Terminal::start(&scratch, &config, &model);
    terminal.wait_for(OFFER);
    terminal.type_line("n");
    terminal.wait_for("1 of 2 servers connected, 3 tools");
    terminal.type_line("who is there?");
    terminal.wait_for("Only good is here.");

    terminal.type_line("/login good");
    terminal.wait_for("good does not sign in with OAuth");
    assert_eq!(docs.grants(), (0, 0), "nothing was asked");

    terminal.type_line("/login docs");
    let screen = terminal.wait_for("Waiting for the browser to come back");
    consent_on(&screen);
    terminal.wait_for("docs: connected; its tools are offered in this session.");
    assert_eq!(docs.grants(), (1, 1));
    terminal.type_line("and now?");
    terminal.wait_for("Docs is here now.");
    // Signed in again while it runs (a lapsed sign-in): it is started anew.
    terminal.type_line("/login docs");
    let screen = terminal.wait_for_count("Waiting for the browser to come back", 2);
    consent_on(&screen);
    terminal.wait_for_count("docs: connected; its tools are offered in this session.", 2);
    assert_eq!(docs.grants(), (2, 2));
    terminal.type_line("/exit");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    drop(model);
    scratch.assert_no_leftovers();
}

/// `warden run` in a terminal offers the sign-in as the chat does, and the task then uses
/// the server; without a terminal it says the server is not connected and why (naming
/// `warden login`), and the task goes on without it.
#[test]
fn run_offers_a_sign_in_in_a_terminal_and_reports_the_server_without_one() {
    let docs = AuthServer::start();
    let scratch = Scratch::new();
    let config = config_with_docs(&scratch, &docs);
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"text": "Docs is here."},
             "expect": {"tools_include": ["docs__echo", "good__echo"]}}
        ]}),
    );
    let terminal = Terminal::start_command(
        &scratch,
        &config,
        &model,
        &[],
        &["run", "--prompt", "who is there?"],
    );
    terminal.wait_for(OFFER);
    terminal.type_line("y");
    let screen = terminal.wait_for("Waiting for the browser to come back");
    consent_on(&screen);
    terminal.wait_for("docs: connected; its tools are offered in this session.");
    terminal.wait_for("Docs is here.");
    assert_eq!(terminal.wait_for_exit(), 0, "{}", terminal.screen());
    assert_eq!(docs.grants(), (1, 1));
    drop(model);

    // Without a terminal: reported, nothing asked, the task done without it.
    let scratch = Scratch::new();
    let config = config_with_docs(&scratch, &docs);
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"text": "Only good."},
             "expect": {"tools_exclude": ["docs__echo"]}}
        ]}),
    );
    let output = piped(
        &scratch,
        &config,
        &model,
        &["run", "--prompt", "who is there?"],
        b"y\n",
    );
    support::assert_exit(&output, 0);
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("warden: docs is not connected: needs authorization")
            && stderr.contains("warden login docs")
            && stderr.contains("going on without it"),
        "{stderr}"
    );
    assert!(!stderr.contains("Sign in to docs now?"), "{stderr}");
    assert!(
        support::stdout(&output).contains("Only good."),
        "{}",
        support::describe(&output)
    );
    assert_eq!(docs.grants(), (1, 1), "nothing more was signed in");
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn chat_without_a_terminal_offers_no_sign_in() {
    let docs = AuthServer::start();
    let scratch = Scratch::new();
    let config = config_with_docs(&scratch, &docs);
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            {"reply": {"text": "Still here."},
             "expect": {"tools_exclude": ["docs__echo"]}}
        ]}),
    );
    // A "y" first: were an offer made, it would take this line as the answer.
    let output = piped_chat(&scratch, &config, &model, b"y\n");
    support::assert_exit(&output, 0);
    let stderr = support::stderr(&output);
    assert!(!stderr.contains("Sign in to docs now?"), "{stderr}");
    assert!(stderr.contains("1 of 2 servers connected"), "{stderr}");
    assert!(
        support::stdout(&output).contains("Still here."),
        "{}",
        support::describe(&output)
    );
    assert_eq!(docs.grants(), (0, 0));
    drop(model);
    scratch.assert_no_leftovers();
}
