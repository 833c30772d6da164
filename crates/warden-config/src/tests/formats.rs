//! Each format, read through `load_file`.

use std::path::PathBuf;
use std::time::Duration;

use super::{Fixture, map, strings};
use crate::{
    ConfigError, EnvReference, EraPreference, Format, HttpSettings, LineCol, NetworkSpec, Origin,
    RemoteTransport, SandboxSpec, Scope, ServerSpec, Timeouts, TransportSpec, load_file,
};

fn load_one(fx: &Fixture, name: &str, text: &str) -> Result<Vec<ServerSpec>, ConfigError> {
    let path = fx.write(&fx.project().join(name), text);
    load_file(&path, &fx.env).map(|c| c.servers)
}

fn load_err(fx: &Fixture, name: &str, text: &str) -> (PathBuf, ConfigError) {
    let path = fx.project().join(name);
    let err = load_one(fx, name, text).unwrap_err();
    (path, err)
}

#[test]
fn warden_toml_full_example() {
    let fx = Fixture::new();
    let text = r#"
[servers.time]
command = "uvx"
args = ["mcp-server-time", "--region=${REGION}"]
env = { TZ = "UTC", TOKEN = "${API_TOKEN}" }
cwd = "tools"
era = "legacy"
max_message_bytes = 1048576
[servers.time.timeout]
connect = "500ms"
call = 90

[servers.remote]
url = "https://example.com/${REGION}/mcp"
headers = { Authorization = "Bearer ${API_TOKEN}" }
"#;
    let path = fx.write(&fx.project().join("warden.toml"), text);
    let config = load_file(&path, &fx.env).unwrap();
    let origin = Origin {
        scope: Scope::Explicit,
        format: Format::WardenToml,
        path: path.clone(),
    };
    assert_eq!(config.files, vec![origin.clone()]);
    assert!(config.shadowed.is_empty());
    assert_eq!(
        config.servers,
        vec![
            ServerSpec {
                name: "remote".into(),
                transport: TransportSpec::Http {
                    url: "https://example.com/eu/mcp".into(),
                    headers: map(&[("Authorization", "Bearer tok123")]),
                    settings: HttpSettings::default(),
                },
                timeouts: Timeouts::default(),
                era: EraPreference::Auto,
                max_message_bytes: crate::DEFAULT_MAX_MESSAGE_BYTES,
                origin: origin.clone(),
                sandbox: SandboxSpec::default(),
                env_references: vec![
                    reference("API_TOKEN", "headers.Authorization"),
                    reference("REGION", "url"),
                ],
                lifecycle: Default::default(),
            },
            ServerSpec {
                name: "time".into(),
                transport: TransportSpec::Stdio {
                    command: "uvx".into(),
                    args: strings(&["mcp-server-time", "--region=eu"]),
                    env: map(&[("TZ", "UTC"), ("TOKEN", "tok123")]),
                    cwd: Some(fx.project().join("tools")),
                },
                timeouts: Timeouts {
                    connect: Duration::from_millis(500),
                    call: Duration::from_secs(90),
                },
                era: EraPreference::Legacy,
                max_message_bytes: 1_048_576,
                origin,
                sandbox: SandboxSpec::default(),
                env_references: vec![
                    reference("API_TOKEN", "env.TOKEN"),
                    reference("REGION", "args[1]"),
                ],
                lifecycle: Default::default(),
            },
        ]
    );
}

fn reference(variable: &str, field: &str) -> EnvReference {
    EnvReference {
        variable: variable.into(),
        field: field.into(),
    }
}

#[test]
fn warden_toml_sandbox_table_resolves_paths_against_the_file() {
    let fx = Fixture::new();
    let text = r#"
[servers.fs]
command = "server"
[servers.fs.sandbox]
read = ["docs", "/srv/data"]
write = ["${REGION}/out"]
network = "host"
env = ["GITHUB_TOKEN"]

[servers.loose]
command = "server"
confine = false

[servers.plain]
command = "server"
"#;
    let servers = load_one(&fx, "warden.toml", text).unwrap();
    let by_name = |name: &str| servers.iter().find(|s| s.name == name).unwrap();
    let project = fx.project();
    assert_eq!(
        by_name("fs").sandbox,
        SandboxSpec {
            confine: true,
            read: vec![project.join("docs"), PathBuf::from("/srv/data")],
            write: vec![project.join("eu/out")],
            network: NetworkSpec::Host,
            env: strings(&["GITHUB_TOKEN"]),
            project: None,
            memory: None,
            processes: None,
            disk: None,
        }
    );
    assert!(!by_name("loose").sandbox.confine);
    assert_eq!(by_name("loose").sandbox.read, Vec::<PathBuf>::new());
    assert_eq!(by_name("plain").sandbox, SandboxSpec::default());
    assert!(
        SandboxSpec::default().confine,
        "confined unless said otherwise"
    );
}

#[test]
fn warden_toml_sandbox_refuses_tilde_unknown_keys_and_remote_servers() {
    let fx = Fixture::new();
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\nsandbox = { read = [\"~/.config\"] }\n",
    );
    assert!(err.to_string().contains("`~` is not expanded"), "{err}");
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\nsandbox = { exec = [\"/opt\"] }\n",
    );
    assert!(err.to_string().contains("exec"), "{err}");
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\nsandbox = { network = \"lan\" }\n",
    );
    assert!(err.to_string().contains("lan"), "{err}");
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\nurl = \"https://example.com/mcp\"\nconfine = false\n",
    );
    assert!(err.to_string().contains("only apply to local"), "{err}");
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\nsandbox = { env = [\"A=B\"] }\n",
    );
    assert!(err.to_string().contains("A=B"), "{err}");
}

#[test]
fn other_formats_get_the_default_sandbox() {
    let fx = Fixture::new();
    let servers = load_one(
        &fx,
        ".mcp.json",
        r#"{"mcpServers": {"a": {"command": "a"}}}"#,
    )
    .unwrap();
    assert_eq!(servers[0].sandbox, SandboxSpec::default());
}

#[test]
fn warden_toml_timeouts_default_individually() {
    let fx = Fixture::new();
    let servers = load_one(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\ntimeout = { call = \"2m\" }\n",
    )
    .unwrap();
    assert_eq!(
        servers[0].timeouts,
        Timeouts {
            connect: crate::DEFAULT_CONNECT_TIMEOUT,
            call: Duration::from_secs(120),
        }
    );
}

#[test]
fn warden_toml_zero_timeout_is_an_error_at_its_value() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\n[servers.a.timeout]\nconnect = \"0s\"\n",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:4:11: a timeout must be greater than zero",
            path.display()
        )
    );
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\ntimeout = { call = 0 }\n",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3:20: a timeout must be greater than zero",
            path.display()
        )
    );
}

#[test]
fn warden_toml_syntax_error_has_line_and_column() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\nargs = []\n",
    );
    let ConfigError::Parse { at, message, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        *at,
        Some(LineCol {
            line: 2,
            column: 13
        }),
        "{message}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("{}:2:13: ", path.display())),
        "{err}"
    );
}

#[test]
fn warden_toml_unknown_key_is_named_with_position() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\n  comand = \"typo\"\n",
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}:3:3: unknown field `comand`", path.display())),
        "{text}"
    );
    // Top-level keys are checked too.
    let (_, err) = load_err(&fx, "warden.toml", "server = 1\n");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:1:1: unknown field `server`", path.display())),
        "{err}"
    );
}

#[test]
fn command_and_url_are_exclusive_and_one_is_required() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.both]\ncommand = \"a\"\nurl = \"https://x\"\n",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:10: server `both`: `command` and `url` are mutually exclusive: a server is either a local program or a remote endpoint",
            path.display()
        )
    );
    let (_, err) = load_err(&fx, "warden.toml", "[servers.none]\nargs = [\"x\"]\n");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:10: server `none`: needs either `command` (a local program) or `url` (a remote endpoint)",
            path.display()
        )
    );
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.r]\nurl = \"https://x\"\nargs = [\"x\"]\n",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:10: server `r`: `args` only applies to local (`command`) servers",
            path.display()
        )
    );
    let (_, err) = load_err(&fx, "warden.toml", "[servers.r]\nurl = \"ftp://x\"\n");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:10: server `r`: `url` must be an http:// or https:// URL, not \"ftp://x\"",
            path.display()
        )
    );
}

#[test]
fn warden_toml_expansion_default_escape_and_unset() {
    let fx = Fixture::new();
    let servers = load_one(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"${TOOL:-node}\"\nargs = [\"$${literal}\", \"${REGION}\"]\n",
    )
    .unwrap();
    assert_eq!(
        servers[0].transport,
        TransportSpec::Stdio {
            command: "node".into(),
            args: strings(&["${literal}", "eu"]),
            env: map(&[]),
            cwd: None,
        }
    );
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"x\"\nenv = { K = \"${NOT_SET}\" }\n",
    );
    let ConfigError::UnsetVariable {
        path: err_path,
        at,
        server,
        variable,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        (err_path, *at, server.as_str(), variable.as_str()),
        (
            &path,
            Some(LineCol {
                line: 1,
                column: 10
            }),
            "a",
            "NOT_SET"
        )
    );
}

#[test]
fn warden_toml_bad_era_and_message_size() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\nera = \"newest\"\n",
    );
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3:7: unknown variant `newest`", path.display())),
        "{err}"
    );
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\nmax_message_bytes = 0\n",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3:21: invalid value: integer `0`, expected a nonzero usize",
            path.display()
        )
    );
}

#[test]
fn relative_paths_resolve_against_the_file_or_cwd() {
    let fx = Fixture::new();
    let servers = load_one(
        &fx,
        "conf/warden.toml",
        r#"
[servers.a]
command = "./bin/server"
cwd = "../run"
[servers.b]
command = "bin/server"
[servers.c]
command = "/usr/bin/server"
cwd = "/srv"
"#,
    )
    .unwrap();
    let conf = fx.project().join("conf");
    let stdio = |s: &ServerSpec| match &s.transport {
        TransportSpec::Stdio { command, cwd, .. } => (command.clone(), cwd.clone()),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        stdio(&servers[0]),
        (
            conf.join("../run/./bin/server").display().to_string(),
            Some(conf.join("../run"))
        )
    );
    assert_eq!(
        stdio(&servers[1]),
        (conf.join("bin/server").display().to_string(), None)
    );
    assert_eq!(
        stdio(&servers[2]),
        ("/usr/bin/server".to_owned(), Some(PathBuf::from("/srv")))
    );
}

#[test]
fn server_names_are_validated_in_every_format() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.ok]\ncommand = \"a\"\n[servers.\"bad name\"]\ncommand = \"a\"\n",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3:10: invalid server name \"bad name\": ' ' is not allowed; use ASCII letters, digits, `_` and `-`",
            path.display()
        )
    );
    let (path, err) = load_err(
        &fx,
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"ok\": {\"command\": \"a\"},\n    \"a.b\": {\"command\": \"a\"}\n  }\n}\n",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:4:5: invalid server name \"a.b\": '.' is not allowed; use ASCII letters, digits, `_` and `-`",
            path.display()
        )
    );
    let (path, err) = load_err(
        &fx,
        ".vscode/mcp.json",
        "{\"servers\": {\"\": {\"command\": \"a\"}}}",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:14: invalid server name \"\": a server name cannot be empty",
            path.display()
        )
    );
}

#[test]
fn claude_code_file() {
    let fx = Fixture::new();
    let text = r#"{
  "mcpServers": {
    "files": {
      "command": "npx",
      "args": ["-y", "@scope/server", "${HOME_DIR:-/data}"],
      "env": {"TOKEN": "${API_TOKEN}"}
    },
    "api": {
      "type": "http",
      "url": "https://api.example.com/${REGION}/mcp",
      "headers": {"X-Key": "${API_TOKEN}"}
    }
  },
  "somethingElse": true
}"#;
    let path = fx.write(&fx.project().join(".mcp.json"), text);
    let config = load_file(&path, &fx.env).unwrap();
    let origin = Origin {
        scope: Scope::Explicit,
        format: Format::ClaudeCode,
        path: path.clone(),
    };
    let transports: Vec<_> = config
        .servers
        .iter()
        .map(|s| (s.name.as_str(), &s.transport, &s.origin))
        .collect();
    assert_eq!(
        transports,
        vec![
            (
                "api",
                &TransportSpec::Http {
                    url: "https://api.example.com/eu/mcp".into(),
                    headers: map(&[("X-Key", "tok123")]),
                    settings: HttpSettings::default(),
                },
                &origin
            ),
            (
                "files",
                &TransportSpec::Stdio {
                    command: "npx".into(),
                    args: strings(&["-y", "@scope/server", "/data"]),
                    env: map(&[("TOKEN", "tok123")]),
                    cwd: None,
                },
                &origin
            ),
        ]
    );
}

#[test]
fn claude_code_unset_variable_names_variable_server_and_file() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        ".mcp.json",
        "{\"mcpServers\": {\n  \"gh\": {\"command\": \"gh-mcp\", \"env\": {\"T\": \"${GITHUB_TOKEN}\"}}}}",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2:3: server `gh`: environment variable `GITHUB_TOKEN` is not set and the reference gives no default (write `${{GITHUB_TOKEN:-default}}` to provide one)",
            path.display()
        )
    );
}

#[test]
fn claude_desktop_file_is_literal_and_tolerant() {
    let fx = Fixture::new();
    let text = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time", "${NOT_EXPANDED}"], "env": {"N": 3}},
    "web": {"type": "streamable-http", "url": "https://x.example/mcp"}
  }
}"#;
    let path = fx.write(&fx.root.join("claude_desktop_config.json"), text);
    let config = load_file(&path, &fx.env).unwrap();
    assert_eq!(config.files[0].format, Format::ClaudeDesktop);
    assert_eq!(
        config.servers[0].transport,
        TransportSpec::Stdio {
            command: "uvx".into(),
            args: strings(&["mcp-server-time", "${NOT_EXPANDED}"]),
            env: map(&[("N", "3")]),
            cwd: None,
        }
    );
    assert_eq!(
        config.servers[1].transport,
        TransportSpec::Http {
            url: "https://x.example/mcp".into(),
            headers: map(&[]),
            settings: HttpSettings::default(),
        }
    );
}

#[test]
fn sse_is_accepted_only_when_named_in_json_formats() {
    let fx = Fixture::new();
    let servers = load_one(
        &fx,
        ".mcp.json",
        "{\"mcpServers\": {\"old\": {\"type\": \"sse\", \"url\": \"https://x/sse\", \"headers\": {\"A\": \"b\"}},\n \"new\": {\"url\": \"https://x/mcp\"}}}",
    )
    .unwrap();
    let transport = |name: &str| {
        let spec = servers.iter().find(|s| s.name == name).unwrap();
        let TransportSpec::Http {
            url,
            headers,
            settings,
        } = &spec.transport
        else {
            panic!("not http");
        };
        (url.clone(), headers.len(), settings.transport)
    };
    assert_eq!(
        transport("old"),
        ("https://x/sse".to_owned(), 1, RemoteTransport::Sse)
    );
    assert_eq!(
        transport("new"),
        ("https://x/mcp".to_owned(), 0, RemoteTransport::Http)
    );
    // "sse" is a remote transport: it needs a URL and refuses local-only settings.
    let (_, err) = load_err(
        &fx,
        ".mcp.json",
        "{\"mcpServers\": {\"old\": {\"type\": \"sse\", \"command\": \"x\"}}}",
    );
    assert!(err.to_string().contains("needs a `url`"), "{err}");
}

#[test]
fn json_syntax_error_has_line_and_column() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n",
    );
    assert_eq!(
        err.to_string(),
        format!("{}:4:5: expected `,` or `}}`", path.display())
    );
    let (path, err) = load_err(
        &fx,
        ".mcp.json",
        "{\"mcpServers\": {\"a\": {\"args\": \"x\"}}}",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:33: invalid type: string \"x\", expected a sequence",
            path.display()
        )
    );
}

#[test]
fn json_top_level_must_be_an_object() {
    let fx = Fixture::new();
    let (path, err) = load_err(&fx, ".mcp.json", "\n  [1]");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2:3: expected a JSON object (`{{ ... }}`) at the top level",
            path.display()
        )
    );
    let (path, err) = load_err(&fx, ".mcp.json", "");
    assert_eq!(
        err.to_string(),
        format!("{}:1:1: EOF while parsing a value", path.display())
    );
}

#[test]
fn duplicate_json_names_are_refused() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        ".mcp.json",
        "{\"mcpServers\": {\n\"a\": {\"command\": \"x\"},\n\"a\": {\"command\": \"y\"}}}",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3:1: server `a` is defined more than once in this file",
            path.display()
        )
    );
}

#[test]
fn vscode_jsonc_variables_and_env_file() {
    let fx = Fixture::new();
    fx.write(&fx.project().join(".env"), "FROM_FILE=1\nOVERRIDDEN=file\n");
    let text = r#"{
  // Servers for this workspace.
  "inputs": [{"type": "promptString", "id": "unused"}],
  "servers": {
    "local": {
      "type": "stdio",
      "command": "${workspaceFolder}/bin/server", /* absolute after expansion */
      "args": ["--region", "${env:REGION}",],
      "env": {"OVERRIDDEN": "inline", "HOME_IS": "${userHome}"},
      "envFile": "${workspaceFolder}/.env",
      "cwd": "sub",
    },
    "remote": {"type": "http", "url": "https://x.example/mcp", "headers": {"A": "b"},},
  },
}"#;
    let path = fx.write(&fx.project().join(".vscode/mcp.json"), text);
    let config = load_file(&path, &fx.env).unwrap();
    assert_eq!(config.files[0].format, Format::VsCode);
    let project = fx.project();
    assert_eq!(
        config.servers[0].transport,
        TransportSpec::Stdio {
            command: format!("{}/bin/server", project.display()),
            args: strings(&["--region", "eu"]),
            env: map(&[
                ("FROM_FILE", "1"),
                ("HOME_IS", &fx.home().display().to_string()),
                ("OVERRIDDEN", "inline"),
            ]),
            cwd: Some(project.join("sub")),
        }
    );
    assert_eq!(
        config.servers[1].transport,
        TransportSpec::Http {
            url: "https://x.example/mcp".into(),
            headers: map(&[("A", "b")]),
            settings: HttpSettings::default(),
        }
    );
}

#[test]
fn vscode_prompted_inputs_are_refused() {
    let fx = Fixture::new();
    let (path, err) = load_err(
        &fx,
        ".vscode/mcp.json",
        "{\"servers\": {\"s\": {\"url\": \"https://x\", \"headers\": {\"K\": \"${input:key}\"}}}}",
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:14: server `s`: `${{input:key}}` is a VS Code prompted input, which Warden does not support; put the value in an environment variable and write `${{env:NAME}}` instead",
            path.display()
        )
    );
    assert!(matches!(err, ConfigError::PromptedInput { ref id, .. } if id == "key"));
}

#[test]
fn vscode_unterminated_comment() {
    let fx = Fixture::new();
    let (path, err) = load_err(&fx, ".vscode/mcp.json", "{\n  /* never closed\n}");
    assert_eq!(
        err.to_string(),
        format!("{}:2:3: this `/*` comment is never closed", path.display())
    );
}

#[test]
fn explicit_format_detection_by_content() {
    let fx = Fixture::new();
    let claude = load_file(
        &fx.write(
            &fx.root.join("servers.json"),
            "// comment\n{\"mcpServers\": {\"a\": {\"command\": \"${REGION}\"}}}",
        ),
        &fx.env,
    )
    .unwrap();
    assert_eq!(claude.files[0].format, Format::ClaudeCode);
    assert_eq!(
        claude.servers[0].transport,
        TransportSpec::Stdio {
            command: "eu".into(),
            args: vec![],
            env: map(&[]),
            cwd: None,
        }
    );
    let vscode = load_file(
        &fx.write(&fx.root.join("other.json"), "{\"servers\": {}}"),
        &fx.env,
    )
    .unwrap();
    assert_eq!(vscode.files[0].format, Format::VsCode);
    let toml = load_file(
        &fx.write(
            &fx.root.join("servers.conf"),
            "[servers.a]\nurl = \"http://h\"\n",
        ),
        &fx.env,
    )
    .unwrap();
    assert_eq!(toml.files[0].format, Format::WardenToml);
    let path = fx.write(&fx.root.join("what.json"), "{\"x\": 1}");
    let err = load_file(&path, &fx.env).unwrap_err();
    assert!(matches!(err, ConfigError::UnknownFormat { .. }), "{err}");
}

#[test]
fn warden_toml_remote_settings() {
    let fx = Fixture::new();
    let text = r#"
[servers.remote]
url = "http://10.0.0.5:8080/mcp"
allow_http = true
era = "modern"
[servers.remote.reconnect]
connect_attempts = 1
attempts = 2
initial_delay = "250ms"
max_delay = "4s"

[servers.plain]
url = "https://x.example/mcp"
"#;
    let servers = load_one(&fx, "warden.toml", text).unwrap();
    let TransportSpec::Http { settings, .. } = &servers[1].transport else {
        panic!("not http: {:?}", servers[1]);
    };
    assert!(settings.allow_http);
    assert_eq!(servers[1].era, EraPreference::Modern);
    assert_eq!(
        settings.reconnect,
        crate::ReconnectSpec {
            connect_attempts: 1,
            attempts: 2,
            initial_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(4),
        }
    );
    let TransportSpec::Http { settings, .. } = &servers[0].transport else {
        panic!("not http");
    };
    assert_eq!(settings, &HttpSettings::default());
    assert_eq!(settings.reconnect.connect_attempts, 3);
    assert_eq!(settings.reconnect.attempts, 5);
}

#[test]
fn warden_toml_remote_settings_are_refused_on_local_servers_and_sse_is_accepted() {
    let fx = Fixture::new();
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.local]\ncommand = \"/bin/true\"\nallow_http = true\n",
    );
    assert!(err.to_string().contains("only apply to remote"), "{err}");
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.old]\nurl = \"https://x.example/sse\"\ntransport = \"sse\"\nera = \"modern\"\n",
    );
    assert!(
        err.to_string().contains("only speaks the legacy era"),
        "{err}"
    );
    // `transport = "sse"` is accepted, with the settings of any remote server.
    let servers = load_one(
        &fx,
        "warden.toml",
        "[servers.old]\nurl = \"http://x.example/sse\"\ntransport = \"sse\"\nallow_http = true\n\n[servers.old.reconnect]\nattempts = 2\n",
    )
    .unwrap();
    let TransportSpec::Http { settings, .. } = &servers[0].transport else {
        panic!("not http");
    };
    assert_eq!(settings.transport, RemoteTransport::Sse);
    assert!(settings.allow_http);
    assert_eq!(settings.reconnect.attempts, 2);
}

#[test]
fn warden_toml_sandbox_limits_parse_sizes_and_default_when_absent() {
    let fx = Fixture::new();
    let text = r#"
[servers.small]
command = "server"
[servers.small.sandbox]
memory = "512M"
processes = 64
disk = 67108864

[servers.plain]
command = "server"
"#;
    let servers = load_one(&fx, "warden.toml", text).unwrap();
    let small = &servers.iter().find(|s| s.name == "small").unwrap().sandbox;
    assert_eq!(
        (small.memory, small.processes, small.disk),
        (Some(512 << 20), Some(64), Some(64 << 20))
    );
    let plain = &servers.iter().find(|s| s.name == "plain").unwrap().sandbox;
    assert_eq!(
        (
            plain.memory_limit(),
            plain.process_limit(),
            plain.disk_limit()
        ),
        (
            crate::DEFAULT_MEMORY,
            crate::DEFAULT_PROCESSES,
            crate::DEFAULT_DISK
        )
    );
    // Absent limits leave the serialized spec (and so existing approvals) unchanged.
    let json = serde_json::to_value(plain).unwrap();
    assert!(json.get("memory").is_none(), "{json}");
}

#[test]
fn warden_toml_sandbox_limit_errors_name_the_file_and_the_key() {
    let fx = Fixture::new();
    for (table, key, what) in [
        (
            "memory = \"2 GB\"",
            "sandbox.memory",
            "invalid size \"2 GB\"",
        ),
        (
            "memory = \"1M\"",
            "sandbox.memory",
            "below the smallest accepted, 16M",
        ),
        ("disk = \"lots\"", "sandbox.disk", "invalid size \"lots\""),
        ("disk = -1", "sandbox.disk", "invalid size \"-1\""),
        (
            "processes = 1",
            "sandbox.processes",
            "below the smallest accepted, 4",
        ),
    ] {
        let (path, err) = load_err(
            &fx,
            "warden.toml",
            &format!("[servers.a]\ncommand = \"a\"\nsandbox = {{ {table} }}\n"),
        );
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("{}:1:", path.display())),
            "{message}"
        );
        assert!(message.contains("server `a`"), "{message}");
        assert!(message.contains(&format!("`{key}`")), "{message}");
        assert!(message.contains(what), "{message}\nexpected: {what}");
    }
    let (_, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.a]\ncommand = \"a\"\nsandbox = { processes = \"many\" }\n",
    );
    assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
}

/// Issue 14: `network = { allow = [...] }` loads into an allowlist; a bad entry is an error
/// naming the file, the position and the entry.
#[test]
fn warden_toml_network_allowlist_loads_and_bad_entries_are_named() {
    let fx = Fixture::new();
    let servers = load_one(
        &fx,
        "warden.toml",
        "[servers.fetch]\ncommand = \"x\"\n[servers.fetch.sandbox]\nnetwork = { allow = \
         [\"api.github.com\", \"*.githubusercontent.com:443\", \"http://host.test:8080\", \
         { host = \"lan.test\", private = true }] }\n",
    )
    .unwrap();
    let crate::NetworkSpec::Allow(list) = &servers[0].sandbox.network else {
        panic!("{:?}", servers[0].sandbox.network);
    };
    let written: Vec<&str> = list.rules.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(
        written,
        [
            "api.github.com",
            "*.githubusercontent.com:443",
            "http://host.test:8080",
            "lan.test"
        ]
    );
    assert!(list.rules[3].private);
    let (path, err) = load_err(
        &fx,
        "warden.toml",
        "[servers.fetch]\ncommand = \"x\"\n[servers.fetch.sandbox]\nnetwork = { allow = \
         [\"api.github.com\", \"api.github.com/repos\"] }\n",
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}:4:", path.display())),
        "{text}"
    );
    assert!(
        text.contains("`network.allow` entry \"api.github.com/repos\""),
        "{text}"
    );
}

#[test]
fn a_relayed_server_is_a_stub_with_a_route() {
    let fx = Fixture::new();
    let servers = load_one(
        &fx,
        "warden.toml",
        "[relays.box]\ncommand = [\"ip\", \"netns\", \"exec\", \"box\", \"warden\", \"relay\", \"supervise\"]\n\
         secrets = { git = \"secrets/git.env\" }\n\
         reconnect = { initial_delay = \"200ms\", max_delay = \"2s\" }\n\n\
         [servers.git]\nrelay = \"box\"\ntimeout = { call = \"5s\" }\n",
    )
    .unwrap();
    let TransportSpec::Relay { relay, channel } = &servers[0].transport else {
        panic!("not relayed: {:?}", servers[0].transport);
    };
    assert_eq!(relay, "box");
    assert_eq!(channel.command[0], "ip");
    // A relative secrets file is resolved against the configuration's directory.
    assert_eq!(channel.secrets["git"], fx.project().join("secrets/git.env"));
    assert_eq!(channel.reconnect.initial_delay, Duration::from_millis(200));
    assert_eq!(servers[0].timeouts.call, Duration::from_secs(5));
    // A stub with the real definition's parts, an empty command, or a missing relay is
    // refused, naming what is wrong.
    for (text, expected) in [
        (
            "[relays.box]\ncommand = [\"x\"]\n[servers.s]\nrelay = \"box\"\ncwd = \"/\"\n",
            "`cwd` belongs",
        ),
        (
            "[relays.box]\ncommand = [\"x\"]\n[servers.s]\nrelay = \"box\"\nconfine = false\n",
            "`confine or sandbox` belongs",
        ),
        (
            "[relays.box]\ncommand = []\n[servers.s]\nrelay = \"box\"\n",
            "`command` is empty",
        ),
        ("[servers.s]\nrelay = \"box\"\n", "names no `[relays.box]`"),
        (
            "[relays.b-x]\ncommand = [\"x\"]\nsecrets = { \"a/b\" = \"f\" }\n",
            "secrets.a/b",
        ),
    ] {
        let (_, err) = load_err(&fx, "warden.toml", text);
        assert!(err.to_string().contains(expected), "{text}: {err}");
    }
}
