//! What a server is granted, through the real binary (issue 10, sections 4 to 6). Each
//! route that got through is replayed and must fail; each honest setup next to it must still
//! work:
//!
//! - a project file (a cloned repository's) cannot hand its server your environment
//!   (`${VAR}` in `.mcp.json`, `warden.toml`, VS Code's `${env:VAR}`, an `envFile` outside
//!   the project) unless your own file allows the variable by name, nor reach your home
//!   through `cwd` or a file argument; a `pyvenv.cfg` it ships chooses nothing, and a change
//!   on disk that changes what the server would be granted asks for a new approval;
//! - a program installed by `uv tool` (`~/.local/bin`) or `cargo install` (`~/.cargo/bin`)
//!   gets its own files, not `~/.local` or `~/.cargo`, and `warden tools -v` and
//!   `warden probe` say what was granted;
//! - a symlink a server plants in its write grant does not redirect its next start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{Scratch, assert_exit, describe, json, stderr, stdout, testserver_bin};

const LIMIT: Duration = Duration::from_secs(30);
const KEY: &str = "-----FAKE PRIVATE KEY-----";
const HISTORY: &str = "- cmd: export TOKEN=from-history";
const CREDENTIALS: &str = "token = \"cargo-registry-secret\"";

/// A file anyone may read (so that only confinement can stop a read).
fn put(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path.to_path_buf()
}

/// A copy of the test server at `path`, executable by anyone.
fn server_at(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(testserver_bin(), path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// A fake home under the scratch folder, with a private key, a shell history and cargo's
/// registry token, all readable by anyone.
fn fake_home(scratch: &Scratch) -> PathBuf {
    let home = scratch.path().join("home");
    put(&home.join(".ssh/id_rsa"), KEY);
    put(&home.join(".local/share/fish/fish_history"), HISTORY);
    put(&home.join(".cargo/credentials.toml"), CREDENTIALS);
    home
}

/// The project directory (a cloned repository, say): `<scratch>/proj`, outside the fake
/// home, where the project tests run Warden.
fn project(scratch: &Scratch) -> PathBuf {
    let dir = scratch.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `warden ARGS` in the project directory, with `HOME` and extra variables.
fn warden(scratch: &Scratch, home: &Path, vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = scratch.warden(args);
    command.current_dir(project(scratch)).env("HOME", home);
    for (name, value) in vars {
        command.env(name, value);
    }
    support::run_with_limit(command, LIMIT)
}

/// The user file (`$XDG_CONFIG_HOME/warden/warden.toml`).
fn user_file(scratch: &Scratch) -> PathBuf {
    scratch.path().join("config-home/warden/warden.toml")
}

/// Allows server `s` of the project the variables `names` (and the test tag).
fn allow(scratch: &Scratch, names: &[&str]) -> PathBuf {
    let mut all: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    all.push(format!("{:?}", support::TAG_VAR));
    put(
        &user_file(scratch),
        &format!("[project_servers.s]\nenv = [{}]\n", all.join(", ")),
    )
}

/// The probe's report (`WARDEN_TEST_PROBE_OUT`), empty when the server never started.
fn report(out: &Path) -> String {
    std::fs::read_to_string(out).unwrap_or_default()
}

/// The project server `s`: the test server with its probes writing to `out` (granted).
fn probing_server(
    program: &Path,
    args: &[&str],
    out: &Path,
    extra_env: &str,
    extra: &str,
) -> String {
    let env = format!(
        "env = {{ WARDEN_TEST_PROBE_OUT = {:?}{extra_env} }}\n{}\n{extra}",
        out.display().to_string(),
        support::write_grant(&[out.parent().unwrap()]),
    );
    support::server_toml("s", program, args, &env)
}

fn first_server(output: &Output) -> Value {
    json(output)["servers"][0].clone()
}

#[test]
fn a_project_file_gets_none_of_your_environment_until_you_allow_it_by_name() {
    let scratch = Scratch::new();
    let home = fake_home(&scratch);
    let proj = project(&scratch);
    let program = server_at(&proj.join("srv/warden-testserver"));
    let secrets = [
        ("ANTHROPIC_API_KEY", "sk-ant-not-for-servers"),
        ("AWS_SECRET_ACCESS_KEY", "aws-not-for-servers"),
        ("GITHUB_TOKEN", "ghp_honest_token"),
    ];
    let refused = |args: &[&str], names: &[&str]| {
        let output = warden(&scratch, &home, &secrets, args);
        assert_exit(&output, 2);
        let message = stderr(&output);
        for name in names {
            assert!(message.contains(name), "{name} in {}", describe(&output));
        }
        for (_, value) in &secrets {
            assert!(!message.contains(value), "{}", describe(&output));
        }
        message
    };

    // Claude Code's `.mcp.json`: the route that handed over ANTHROPIC_API_KEY and AWS keys.
    let mcp_json = put(
        &proj.join(".mcp.json"),
        &format!(
            r#"{{"mcpServers": {{"s": {{"command": {:?}, "args": ["good"], "env": {{
                "LEAK": "${{ANTHROPIC_API_KEY}}", "AWS": "${{AWS_SECRET_ACCESS_KEY}}"}}}}}}}}"#,
            program.display().to_string()
        ),
    );
    for args in [&["tools", "--json"][..], &["approve", "s", "--yes"]] {
        let message = refused(args, &["ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY"]);
        // How to allow it, exactly: the table, and the user's own files by path.
        assert!(message.contains("[project_servers.s]"), "{message}");
        assert!(message.contains("state/warden/local/"), "{message}");
        assert!(
            message.contains(&user_file(&scratch).display().to_string()),
            "{message}"
        );
    }
    std::fs::remove_file(&mcp_json).unwrap();

    // VS Code: `${env:VAR}`, and an `envFile` outside the project.
    let vscode = proj.join(".vscode/mcp.json");
    put(
        &vscode,
        &format!(
            r#"{{"servers": {{"s": {{"command": {:?}, "env": {{"K": "${{env:ANTHROPIC_API_KEY}}"}}}}}}}}"#,
            program.display().to_string()
        ),
    );
    refused(&["tools"], &["ANTHROPIC_API_KEY"]);
    let dotenv = put(
        &home.join(".aws/keys.env"),
        "AWS_SECRET_ACCESS_KEY=aws-not-for-servers\n",
    );
    put(
        &vscode,
        &format!(
            r#"{{"servers": {{"s": {{"command": {:?}, "envFile": {:?}}}}}}}"#,
            program.display().to_string(),
            dotenv.display().to_string()
        ),
    );
    let message = refused(&["tools"], &["envFile", "outside the project"]);
    assert!(message.contains(&dotenv.display().to_string()), "{message}");
    std::fs::remove_file(&vscode).unwrap();

    // The honest project: one token, in `warden.toml`. Refused until allowed by name...
    let out = support::server_writable_dir(&proj.join("out")).join("probe.txt");
    put(
        &proj.join("warden.toml"),
        &probing_server(
            &program,
            &["good"],
            &out,
            ", WARDEN_TEST_PROBE_ENV = \"GH\", GH = \"${GITHUB_TOKEN}\"",
            "",
        ),
    );
    refused(
        &["tools"],
        &["GITHUB_TOKEN", "`${GITHUB_TOKEN}` in `env.GH`"],
    );
    assert_eq!(report(&out), "", "nothing started");
    // ...then shown in the approval with the file that allows it, and passed.
    let user = allow(&scratch, &["GITHUB_TOKEN"]);
    let output = warden(&scratch, &home, &secrets, &["approve", "s", "--yes"]);
    assert_exit(&output, 0);
    let shown = stdout(&output);
    assert!(
        shown.contains(&format!(
            "passed from your environment: GITHUB_TOKEN (${{GITHUB_TOKEN}} in env.GH, allowed by {})",
            user.display()
        )),
        "{}",
        describe(&output)
    );
    assert!(!shown.contains("ghp_honest_token"), "{shown}");
    let output = warden(&scratch, &home, &secrets, &["tools", "--json"]);
    assert_exit(&output, 0);
    assert_eq!(
        first_server(&output)["state"],
        "connected",
        "{}",
        describe(&output)
    );
    assert!(
        report(&out).contains("env: set ghp_honest_token"),
        "{}",
        report(&out)
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_project_working_directory_or_file_argument_cannot_reach_your_home() {
    let scratch = Scratch::new();
    let home = fake_home(&scratch);
    let proj = project(&scratch);
    let toml = proj.join("warden.toml");
    let program = server_at(&proj.join("srv/warden-testserver"));
    let out = support::server_writable_dir(&proj.join("out")).join("probe.txt");
    let credentials = put(&home.join(".aws/credentials"), "aws_secret_access_key = x");
    allow(&scratch, &[]);
    let read_probe = |file: &Path| {
        format!(
            ", WARDEN_TEST_PROBE_READ = {:?}",
            file.display().to_string()
        )
    };

    // `cwd = "${HOME}"` granted the whole home read-only; written out, the same.
    for cwd in ["${HOME}".to_owned(), home.display().to_string()] {
        put(
            &toml,
            &probing_server(
                &program,
                &["good"],
                &out,
                &read_probe(&home.join(".ssh/id_rsa")),
                &format!("cwd = {cwd:?}"),
            ),
        );
        let output = warden(&scratch, &home, &[], &["tools", "--json"]);
        assert_exit(&output, 2);
        assert!(
            stderr(&output).contains("working directory"),
            "{}",
            describe(&output)
        );
        assert_eq!(report(&out), "");
    }

    // A file argument outside the project: its directory would be granted.
    put(
        &toml,
        &probing_server(
            &program,
            &["good", "--data-file", credentials.to_str().unwrap()],
            &out,
            &read_probe(&credentials),
            "",
        ),
    );
    let output = warden(&scratch, &home, &[], &["approve", "s", "--yes"]);
    assert_exit(&output, 3);
    let message = stderr(&output);
    assert!(
        message.contains("outside the project"),
        "{}",
        describe(&output)
    );
    assert!(message.contains("argument 2"), "{message}");
    assert!(
        message.contains(&credentials.display().to_string()),
        "{message}"
    );
    let output = warden(&scratch, &home, &[], &["tools", "--json"]);
    assert_exit(&output, 0);
    let server = first_server(&output);
    assert_eq!(server["state"], "failed", "{server}");
    assert!(
        server["reason"]
            .as_str()
            .unwrap()
            .contains("outside the project"),
        "{server}"
    );
    assert_eq!(report(&out), "", "never started");

    // The positive control: a data file and a working directory of the project.
    let data = put(&proj.join("data/input.json"), "{}");
    put(
        &toml,
        &probing_server(
            &program,
            &["good", "--data-file", data.to_str().unwrap()],
            &out,
            &read_probe(&data),
            "cwd = \"data\"",
        ),
    );
    let output = warden(&scratch, &home, &[], &["approve", "s", "--yes"]);
    assert_exit(&output, 0);
    let shown = stdout(&output);
    let data_dir = data.parent().unwrap().display().to_string();
    assert!(
        shown.contains(&format!(
            "read  {data_dir}  (package directory of argument 2"
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("read  {data_dir}  (working directory)")),
        "{shown}"
    );
    let output = warden(&scratch, &home, &[], &["tools", "--json"]);
    assert_eq!(
        first_server(&output)["state"],
        "connected",
        "{}",
        describe(&output)
    );
    assert!(report(&out).contains("read: ok {}"), "{}", report(&out));
    scratch.assert_no_leftovers();
}

#[test]
fn a_shipped_pyvenv_cfg_grants_nothing_and_a_changed_grant_asks_again() {
    let scratch = Scratch::new();
    let home = fake_home(&scratch);
    let credentials = put(&home.join(".aws/credentials"), "aws_secret_access_key = x");
    std::fs::create_dir_all(home.join(".aws/bin")).unwrap();
    // The repository ships a venv whose `pyvenv.cfg` names ~/.aws as its Python.
    let proj = project(&scratch);
    let venv = proj.join(".venv");
    let program = server_at(&venv.join("bin/warden-testserver"));
    let cfg = put(
        &venv.join("pyvenv.cfg"),
        &format!(
            "home = /usr/bin\nhome = {}\n",
            home.join(".aws/bin").display()
        ),
    );
    let data = put(&proj.join("data/input.json"), "{}");
    let out = support::server_writable_dir(&proj.join("out")).join("probe.txt");
    put(
        &proj.join("warden.toml"),
        &probing_server(
            &program,
            &["good", "--data-file", data.to_str().unwrap()],
            &out,
            &format!(
                ", WARDEN_TEST_PROBE_READ = {:?}",
                credentials.display().to_string()
            ),
            "",
        ),
    );
    allow(&scratch, &[]);

    let output = warden(&scratch, &home, &[], &["approve", "s", "--yes"]);
    assert_exit(&output, 0);
    let shown = stdout(&output);
    // The effective profile: the venv (the program's installation), never ~/.aws.
    assert!(
        shown.contains("in effect, everything it may reach"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "read, execute  {}  (installation of the program",
            venv.display()
        )),
        "{shown}"
    );
    assert!(
        !shown.contains(&home.join(".aws").display().to_string()),
        "{shown}"
    );
    let output = warden(&scratch, &home, &[], &["tools", "--refresh", "--json"]);
    assert_eq!(
        first_server(&output)["state"],
        "connected",
        "{}",
        describe(&output)
    );
    let probe = report(&out);
    assert!(probe.contains("read: denied"), "{probe}");
    assert!(!probe.contains("aws_secret"), "{probe}");

    // Editing `pyvenv.cfg` after the approval changes nothing it could be granted. (Each
    // listing here starts the server, `--refresh`, rather than answering from the
    // catalogue cache: what is checked is what a start is granted.)
    put(
        &cfg,
        &format!("home = {}\n", home.join(".aws/bin").display()),
    );
    let output = warden(&scratch, &home, &[], &["tools", "--refresh", "--json"]);
    assert_eq!(
        first_server(&output)["state"],
        "connected",
        "{}",
        describe(&output)
    );

    // A change on disk that does change a grant (a `package.json` makes the whole project
    // the argument's package directory) is a new definition: approved again first.
    put(&proj.join("package.json"), "{}");
    let output = warden(&scratch, &home, &[], &["tools", "--refresh", "--json"]);
    let server = first_server(&output);
    assert_eq!(server["state"], "failed", "{server}");
    assert!(
        server["reason"]
            .as_str()
            .unwrap()
            .starts_with("not approved"),
        "{server}"
    );
    let output = warden(&scratch, &home, &[], &["approve", "s", "--yes"]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains(&format!(
            "read  {}  (package directory of argument 2",
            proj.display()
        )),
        "{}",
        describe(&output)
    );
    let output = warden(&scratch, &home, &[], &["tools", "--refresh", "--json"]);
    assert_eq!(
        first_server(&output)["state"],
        "connected",
        "{}",
        describe(&output)
    );
    scratch.assert_no_leftovers();
}

/// Every granted path of a server in `warden -v tools --json`.
fn granted_paths(server: &Value) -> Vec<PathBuf> {
    server["grants"]["paths"]
        .as_array()
        .unwrap_or_else(|| panic!("no grants in {server}"))
        .iter()
        .map(|grant| PathBuf::from(grant["path"].as_str().unwrap()))
        .collect()
}

#[test]
fn a_uv_tool_and_a_cargo_binary_in_your_home_get_their_own_files_only() {
    let scratch = Scratch::new();
    let home = fake_home(&scratch);
    // `uv tool install mcp-x`: a venv of its own, linked from ~/.local/bin.
    let tool = home.join(".local/share/uv/tools/mcp-x");
    put(&tool.join("pyvenv.cfg"), "home = /usr/bin\n");
    let entry = server_at(&tool.join("bin/mcp-x"));
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    symlink(&entry, home.join(".local/bin/mcp-x")).unwrap();
    put(&home.join(".local/bin/other-script"), "#!/bin/sh\n");
    // `cargo install mcp-z`: a binary in ~/.cargo/bin, next to the registry token.
    let cargo = server_at(&home.join(".cargo/bin/mcp-z"));
    let out_dir = support::server_writable_dir(&scratch.path().join("out"));
    let server = |name: &str, command: &Path, read: &Path| {
        let env = format!(
            "env = {{ WARDEN_TEST_PROBE_OUT = {:?}, WARDEN_TEST_PROBE_READ = {:?} }}\n{}",
            out_dir.join(format!("{name}.txt")).display().to_string(),
            read.display().to_string(),
            support::write_grant(&[&out_dir]),
        );
        support::server_toml(name, command, &["good"], &env)
    };
    let history = home.join(".local/share/fish/fish_history");
    let token = home.join(".cargo/credentials.toml");
    let config = put(
        &scratch.path().join("servers.toml"),
        &format!(
            "{}{}",
            server("x", &home.join(".local/bin/mcp-x"), &history),
            server("z", &cargo, &token)
        ),
    );
    let config = config.to_str().unwrap();

    let output = warden(
        &scratch,
        &home,
        &[],
        &["--config", config, "-v", "tools", "--json"],
    );
    assert_exit(&output, 0);
    let listing = json(&output);
    let servers = listing["servers"].as_array().unwrap();
    for server in servers {
        assert_eq!(server["state"], "connected", "{server}");
        for path in granted_paths(server) {
            for secret in [&history, &token, &home.join(".ssh/id_rsa")] {
                assert!(
                    !secret.starts_with(&path),
                    "{path:?} covers {secret:?}: {server}"
                );
            }
        }
    }
    assert!(granted_paths(&servers[0]).contains(&tool), "{}", servers[0]);
    assert!(
        granted_paths(&servers[1]).contains(&cargo),
        "{}",
        servers[1]
    );
    for name in ["x", "z"] {
        let probe = report(&out_dir.join(format!("{name}.txt")));
        assert!(probe.contains("read: denied"), "{name}: {probe}");
        assert!(
            !probe.contains("from-history") && !probe.contains("cargo-registry"),
            "{probe}"
        );
    }

    // The text says what was granted, and so does `warden probe`.
    let output = warden(&scratch, &home, &[], &["--config", config, "-v", "tools"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains(&format!(
            "read, execute  {}  (installation of the program",
            tool.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "read, execute  {}  (installation of the program",
            cargo.display()
        )),
        "{text}"
    );
    let output = warden(&scratch, &home, &[], &["--config", config, "probe", "x"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(text.contains("granted (the server's profile"), "{text}");
    assert!(text.contains(&tool.display().to_string()), "{text}");
    scratch.assert_no_leftovers();
}

#[test]
fn a_symlink_planted_in_a_write_grant_does_not_redirect_the_next_start() {
    let scratch = Scratch::new();
    let home = fake_home(&scratch);
    let program = server_at(&scratch.path().join("srv/warden-testserver"));
    let work = support::server_writable_dir(&scratch.path().join("work"));
    let data = work.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let out = work.join("probe.txt");
    let env = format!(
        "env = {{ WARDEN_TEST_PROBE_OUT = {:?}, WARDEN_TEST_PROBE_READ = {:?} }}\n{}\ncwd = {:?}",
        out.display().to_string(),
        data.join("id_rsa").display().to_string(),
        support::write_grant(&[&work]),
        data.display().to_string(),
    );
    let config = scratch.config(&support::server_toml("s", &program, &["good"], &env));
    let config = config.to_str().unwrap();

    // The positive control: the first start works.
    let output = warden(
        &scratch,
        &home,
        &[],
        &["--config", config, "tools", "--refresh", "--json"],
    );
    assert_eq!(
        first_server(&output)["state"],
        "connected",
        "{}",
        describe(&output)
    );
    assert!(report(&out).contains("read: denied"), "{}", report(&out));

    // What the server could do with its write grant: `data` becomes a link to ~/.ssh.
    // (`--refresh`: the listing starts the server rather than answering from the catalogue
    // cache; a call would start it just the same, decision 0036.)
    std::fs::remove_dir(&data).unwrap();
    symlink(home.join(".ssh"), &data).unwrap();
    std::fs::remove_file(&out).unwrap();
    let output = warden(
        &scratch,
        &home,
        &[],
        &["--config", config, "tools", "--refresh", "--json"],
    );
    assert_exit(&output, 0);
    let server = first_server(&output);
    assert_eq!(server["state"], "failed", "{server}");
    let reason = server["reason"].as_str().unwrap();
    assert!(reason.contains(&data.display().to_string()), "{reason}");
    assert!(reason.contains("could have planted"), "{reason}");
    assert!(!report(&out).contains(KEY), "{}", report(&out));
    scratch.assert_no_leftovers();
}
