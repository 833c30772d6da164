//! Scopes, precedence and shadowing, through `discover`.

use std::path::{Path, PathBuf};

use super::Fixture;
use crate::{
    ConfigError, Format, Origin, ResolvedConfig, Scope, Shadowed, TransportSpec, discover,
    load_file, local_config_path, local_key, project_root,
};

fn toml_server(name: &str, command: &str) -> String {
    format!("[servers.{name}]\ncommand = \"{command}\"\n")
}

fn json_servers(key: &str, servers: &[(&str, &str)]) -> String {
    let body: Vec<String> = servers
        .iter()
        .map(|(name, command)| format!("\"{name}\": {{\"command\": \"{command}\"}}"))
        .collect();
    format!("{{\"{key}\": {{{}}}}}", body.join(", "))
}

fn origin(scope: Scope, format: Format, path: &Path) -> Origin {
    Origin {
        scope,
        format,
        path: path.to_owned(),
    }
}

/// (name, command, origin path) of every server.
fn summary(config: &ResolvedConfig) -> Vec<(String, String, PathBuf)> {
    config
        .servers
        .iter()
        .map(|s| {
            let command = match &s.transport {
                TransportSpec::Stdio { command, .. } => command.clone(),
                TransportSpec::Http { url, .. } => url.clone(),
                TransportSpec::Relay { relay, .. } => relay.clone(),
            };
            (s.name.clone(), command, s.origin.path.clone())
        })
        .collect()
}

#[test]
fn scopes_merge_with_precedence_and_record_shadowing() {
    let fx = Fixture::new();
    let env = &fx.env;
    let desktop = fx.write(
        &env.config_home.join("Claude/claude_desktop_config.json"),
        &json_servers("mcpServers", &[("a", "desktop-a"), ("d", "desktop-d")]),
    );
    let user = fx.write(
        &env.config_home.join("warden/warden.toml"),
        &(toml_server("a", "user-a") + &toml_server("b", "user-b")),
    );
    let project = fx.project();
    let vscode = fx.write(
        &project.join(".vscode/mcp.json"),
        &json_servers("servers", &[("b", "vscode-b"), ("c", "vscode-c")]),
    );
    let claude_code = fx.write(
        &project.join(".mcp.json"),
        &json_servers("mcpServers", &[("c", "code-c")]),
    );
    let project_toml = fx.write(
        &project.join("warden.toml"),
        &(toml_server("c", "project-c") + &toml_server("e", "project-e")),
    );
    let local = fx.write(
        &local_config_path(env).unwrap(),
        &toml_server("e", "local-e"),
    );

    let config = discover(env).unwrap();
    assert_eq!(
        config.files,
        vec![
            origin(Scope::User, Format::ClaudeDesktop, &desktop),
            origin(Scope::User, Format::WardenToml, &user),
            origin(Scope::Project, Format::VsCode, &vscode),
            origin(Scope::Project, Format::ClaudeCode, &claude_code),
            origin(Scope::Project, Format::WardenToml, &project_toml),
            origin(Scope::Local, Format::WardenToml, &local),
        ]
    );
    assert_eq!(
        summary(&config),
        vec![
            ("a".into(), "user-a".into(), user.clone()),
            ("b".into(), "vscode-b".into(), vscode.clone()),
            ("c".into(), "project-c".into(), project_toml.clone()),
            ("d".into(), "desktop-d".into(), desktop.clone()),
            ("e".into(), "local-e".into(), local.clone()),
        ]
    );
    let shadow = |name: &str, hidden: Origin, winner: Origin| Shadowed {
        name: name.into(),
        hidden,
        winner,
    };
    assert_eq!(
        config.shadowed,
        vec![
            shadow(
                "a",
                origin(Scope::User, Format::ClaudeDesktop, &desktop),
                origin(Scope::User, Format::WardenToml, &user)
            ),
            shadow(
                "b",
                origin(Scope::User, Format::WardenToml, &user),
                origin(Scope::Project, Format::VsCode, &vscode)
            ),
            shadow(
                "c",
                origin(Scope::Project, Format::VsCode, &vscode),
                origin(Scope::Project, Format::WardenToml, &project_toml)
            ),
            shadow(
                "c",
                origin(Scope::Project, Format::ClaudeCode, &claude_code),
                origin(Scope::Project, Format::WardenToml, &project_toml)
            ),
            shadow(
                "e",
                origin(Scope::Project, Format::WardenToml, &project_toml),
                origin(Scope::Local, Format::WardenToml, &local)
            ),
        ]
    );
    // The JSON the CLI prints carries the same information.
    let json = serde_json::to_value(&config).unwrap();
    assert_eq!(json["shadowed"][0]["hidden"]["format"], "claude-desktop");
    assert_eq!(json["servers"][0]["transport"]["type"], "stdio");
    assert_eq!(json["servers"][0]["timeouts"]["connect"], 10_000);
}

#[test]
fn nothing_configured_is_an_empty_result() {
    let fx = Fixture::new();
    let config = discover(&fx.env).unwrap();
    assert_eq!(config.servers, vec![]);
    assert_eq!(config.files, vec![]);
    assert_eq!(config.shadowed, vec![]);
    assert_eq!(project_root(&fx.env).unwrap(), None);
}

#[test]
fn project_root_is_the_nearest_directory_with_files() {
    let fx = Fixture::new();
    // Files both in the project and above it: the nearest wins, the outer one is not read.
    fx.write(
        &fx.home().join(".mcp.json"),
        &json_servers("mcpServers", &[("outer", "x")]),
    );
    fx.write(
        &fx.project().join("warden.toml"),
        &toml_server("inner", "y"),
    );
    assert_eq!(project_root(&fx.env).unwrap(), Some(fx.project()));
    let config = discover(&fx.env).unwrap();
    assert_eq!(
        summary(&config),
        vec![("inner".into(), "y".into(), fx.project().join("warden.toml"))]
    );
}

#[test]
fn project_search_stops_at_the_repository_root() {
    let fx = Fixture::new();
    fx.write(
        &fx.project().join("warden.toml"),
        &toml_server("above", "x"),
    );
    std::fs::create_dir_all(fx.env.cwd.join(".git")).unwrap();
    assert_eq!(project_root(&fx.env).unwrap(), None);
    assert_eq!(discover(&fx.env).unwrap().servers, vec![]);
    // The local scope is then keyed on the repository directory.
    assert_eq!(
        local_config_path(&fx.env).unwrap(),
        fx.env
            .state_home
            .join("warden/local")
            .join(format!("{}.toml", local_key(&fx.env.cwd)))
    );
    // `.git` as a file (worktrees, submodules) counts too, and files beside it are found.
    std::fs::remove_dir(fx.env.cwd.join(".git")).unwrap();
    fx.write(&fx.env.cwd.join(".git"), "gitdir: elsewhere\n");
    fx.write(
        &fx.env.cwd.join(".mcp.json"),
        &json_servers("mcpServers", &[("here", "h")]),
    );
    assert_eq!(project_root(&fx.env).unwrap(), Some(fx.env.cwd.clone()));
}

#[test]
fn project_search_never_goes_above_home() {
    let fx = Fixture::new();
    // A file above home is ignored...
    fx.write(
        &fx.root.join("warden.toml"),
        &toml_server("above_home", "x"),
    );
    assert_eq!(project_root(&fx.env).unwrap(), None);
    // ...but when the working directory is outside home, the walk goes up to the root.
    let mut env = fx.env.clone();
    env.cwd = fx.root.join("elsewhere/deep");
    std::fs::create_dir_all(&env.cwd).unwrap();
    assert_eq!(project_root(&env).unwrap(), Some(fx.root.clone()));
}

#[test]
fn malformed_files_are_errors_not_skipped() {
    let fx = Fixture::new();
    let path = fx.write(&fx.env.config_home.join("warden/warden.toml"), "[servers\n");
    let err = discover(&fx.env).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
    assert_eq!(err.path(), Some(path.as_path()));
}

#[test]
fn explicit_file_replaces_discovery() {
    let fx = Fixture::new();
    fx.write(
        &fx.env.config_home.join("warden/warden.toml"),
        &toml_server("user", "u"),
    );
    fx.write(
        &fx.project().join(".mcp.json"),
        &json_servers("mcpServers", &[("proj", "p")]),
    );
    let explicit = fx.write(&fx.root.join("only.toml"), &toml_server("only", "o"));
    // A relative path is taken from the working directory.
    let relative = Path::new("../../../only.toml");
    let config = load_file(relative, &fx.env).unwrap();
    assert_eq!(config.servers.len(), 1);
    assert_eq!(config.servers[0].name, "only");
    assert_eq!(config.files.len(), 1);
    assert_eq!(config.files[0].scope, Scope::Explicit);
    assert_eq!(config.files[0].path, fx.env.cwd.join(relative));
    assert_eq!(config.files[0].path.canonicalize().unwrap(), explicit);
    let err = load_file(&fx.root.join("missing.toml"), &fx.env).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
}

#[test]
fn local_keys_are_reversible_and_bounded() {
    assert_eq!(
        local_key(Path::new("/home/me/my app")),
        "%2Fhome%2Fme%2Fmy%20app"
    );
    assert_eq!(local_key(Path::new("/a%b/c-d_e.f")), "%2Fa%25b%2Fc-d_e.f");
    let long = PathBuf::from(format!("/{}", "x".repeat(300)));
    let key = local_key(&long);
    assert_eq!(key.len(), 16 + 1 + 160);
    assert!(key.ends_with(&"x".repeat(160)));
    let other = local_key(&PathBuf::from(format!("/y{}", "x".repeat(300))));
    assert_ne!(key, other);
}
