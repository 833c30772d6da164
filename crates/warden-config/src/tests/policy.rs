//! The `[policy]` table: reading it with positions, the project-scope restriction, and the
//! merge across scopes.

use std::path::Path;

use warden_policy::{Effect, Globs, Integrity, Trust};

use super::Fixture;
use crate::{
    ConfigError, Format, LineCol, Origin, PolicySource, ResolvedPolicy, Scope, discover, load_file,
    local_config_path,
};

fn source(scope: Scope, path: &Path, line: usize, column: usize) -> PolicySource {
    PolicySource {
        origin: Origin {
            scope,
            format: Format::WardenToml,
            path: path.to_owned(),
        },
        at: Some(LineCol { line, column }),
    }
}

fn globs(policy: &ResolvedPolicy) -> Vec<(String, Effect)> {
    policy
        .config
        .rules
        .iter()
        .map(|rule| (rule.tools.as_slice().join(","), rule.effect))
        .collect()
}

const SERVER: &str = "[servers.mail]\ncommand = \"mail-server\"\n";

#[test]
fn the_policy_table_is_read_with_positions() {
    let fx = Fixture::new();
    let text = format!(
        "{SERVER}
[policy.servers.mail]
trust = \"trusted\"
integrity = \"trusted\"
[policy.servers.mail.tools.send]
read_only = false

[[policy.rules]]
tools = \"mail__send\"
effect = \"allow\"
even_if_private = true
when = [{{ arg = \"/to\", matches = '.*@mine\\.example' }}]

[[policy.rules]]
tools = [\"mail__delete_*\", \"shell__*\"]
effect = \"deny\"
note = \"never\"
"
    );
    let path = fx.write(&fx.project().join("warden.toml"), &text);
    let config = load_file(&path, &fx.env).unwrap();
    let policy = &config.policy;
    let mail = &policy.config.servers["mail"];
    assert_eq!(mail.trust, Some(Trust::Trusted));
    assert_eq!(mail.integrity, Some(Integrity::Trusted));
    assert_eq!(mail.tools["send"].read_only, Some(false));
    assert_eq!(
        globs(policy),
        vec![
            ("mail__send".to_owned(), Effect::Allow),
            ("mail__delete_*,shell__*".to_owned(), Effect::Deny),
        ]
    );
    assert!(policy.config.rules[0].even_if_private);
    assert_eq!(policy.config.rules[1].note.as_deref(), Some("never"));
    assert_eq!(
        policy.server_sources["mail"],
        source(Scope::Explicit, &path, 4, 17)
    );
    // A rule written as an array of tables is placed at its header.
    assert_eq!(
        policy.rule_sources,
        vec![
            source(Scope::Explicit, &path, 10, 1),
            source(Scope::Explicit, &path, 16, 1),
        ]
    );
    assert_eq!(
        policy.rule_source(1).unwrap().to_string(),
        format!("{}:16:1", path.display())
    );
    assert!(policy.not_applied.is_empty());
    // Inline tables work as well, and `warden config --json` shows the policy.
    let path = fx.write(
        &fx.project().join("inline.toml"),
        "policy = { rules = [{ tools = \"a__*\", effect = \"hide\" }] }\n",
    );
    let config = load_file(&path, &fx.env).unwrap();
    assert_eq!(
        globs(&config.policy),
        vec![("a__*".to_owned(), Effect::Hide)]
    );
    let json = serde_json::to_value(&config).unwrap();
    assert_eq!(json["policy"]["config"]["rules"][0]["effect"], "hide");
    assert_eq!(json["policy"]["rule_sources"][0]["scope"], "explicit");
    assert_eq!(json["policy"]["rule_sources"][0]["at"]["line"], 1);
}

#[test]
fn no_policy_table_is_an_empty_policy() {
    let fx = Fixture::new();
    let path = fx.write(&fx.project().join("warden.toml"), SERVER);
    let config = load_file(&path, &fx.env).unwrap();
    assert_eq!(config.policy, ResolvedPolicy::default());
    // Claude's and VS Code's formats carry no policy, whatever keys they hold.
    let path = fx.write(
        &fx.project().join(".mcp.json"),
        r#"{"mcpServers": {"a": {"command": "a"}}, "policy": {"rules": [{"tools": "*", "effect": "allow"}]}}"#,
    );
    let config = load_file(&path, &fx.env).unwrap();
    assert_eq!(config.policy, ResolvedPolicy::default());
}

#[test]
fn malformed_policies_are_errors_with_positions() {
    let fx = Fixture::new();
    let path = fx.project().join("warden.toml");
    let err = |text: &str| {
        fx.write(&path, text);
        load_file(&path, &fx.env).unwrap_err().to_string()
    };
    let at = |pos: &str, message: &str| format!("{}:{pos}: {message}", path.display());

    // Unknown keys, like everywhere in warden.toml.
    let message = err("[policy.servers.mail]\ntrust = \"trusted\"\ntrsut = 1\n");
    assert!(
        message.starts_with(&at("3:1", "unknown field `trsut`")),
        "{message}"
    );
    let message = err("[[policy.rules]]\ntools = \"a\"\neffect = \"permit\"\n");
    assert!(
        message.starts_with(&at("3:10", "unknown variant `permit`")),
        "{message}"
    );
    let message = err("[policy]\nrulez = []\n");
    assert!(
        message.starts_with(&at("2:1", "unknown field `rulez`")),
        "{message}"
    );
    // A rule that does not compile is named by its number in the file and placed.
    let message = err("[[policy.rules]]\ntools = \"a__*\"\neffect = \"deny\"\n\n\
         [[policy.rules]]\ntools = \"a__*\"\neffect = \"hide\"\nwhen = [{ arg = \"/x\", equals = 1 }]\n");
    assert_eq!(
        message,
        at(
            "5:1",
            "policy.rules[1]: a hide rule cannot have `when`: hiding removes whole tools from \
             the catalogue, which is listed before any arguments exist"
        )
    );
    let message = err("[[policy.rules]]\ntools = \"a__*\"\neffect = \"deny\"\n\
                       when = [{ arg = \"to\", equals = 1 }]\n");
    assert!(
        message.starts_with(&at(
            "1:1",
            "policy.rules[0]: when[0]: argument pointer \"to\""
        )),
        "{message}"
    );
    // A policy for a name no server can have is a typo.
    let message = err("[policy.servers.\"my server\"]\ntrust = \"trusted\"\n");
    assert!(
        message.starts_with(&at("1:17", "invalid server name \"my server\"")),
        "{message}"
    );
    let parsed = load_file(&path, &fx.env);
    assert!(matches!(parsed, Err(ConfigError::InvalidName { .. })));
}

#[test]
fn a_project_file_may_only_make_the_policy_stricter() {
    let fx = Fixture::new();
    let path = fx.project().join("warden.toml");
    let refused = |text: &str, pos: &str, what: &str| {
        fx.write(&path, &format!("{SERVER}{text}"));
        let err = discover(&fx.env).unwrap_err();
        assert!(matches!(err, ConfigError::ProjectPolicy { .. }), "{err}");
        let message = err.to_string();
        let expected = format!(
            "{}:{pos}: {what}, but project files cannot loosen policy",
            path.display()
        );
        assert!(
            message.starts_with(&expected),
            "{message}\nexpected: {expected}"
        );
        assert!(
            message.contains("may only add rules whose effect is \"deny\", \"ask\" or \"hide\""),
            "{message}"
        );
    };
    refused(
        "[[policy.rules]]\ntools = \"*\"\neffect = \"allow\"\n",
        "3:1",
        "policy.rules[0] is an allow rule",
    );
    refused(
        "[[policy.rules]]\ntools = \"mail__*\"\neffect = \"deny\"\n\
         [[policy.rules]]\ntools = \"mail__send\"\neffect = \"allow\"\n\
         when = [{ arg = \"/to\", equals = \"me@mine.example\" }]\n",
        "6:1",
        "policy.rules[1] is an allow rule",
    );
    refused(
        "[policy.servers.mail]\ntrust = \"trusted\"\n",
        "3:17",
        "`[policy.servers.mail]` sets trust, labels or declared hints",
    );
    // Even settings that look stricter: they would replace the user's own for that server.
    refused(
        "[policy.servers.mail]\nintegrity = \"untrusted\"\n",
        "3:17",
        "`[policy.servers.mail]` sets trust, labels or declared hints",
    );
    refused(
        "[[policy.rules]]\ntools = \"mail__*\"\neffect = \"ask\"\neven_if_tainted = true\n",
        "3:1",
        "policy.rules[0] sets the opt-in `even_if_tainted`",
    );
    // A repository must not switch its user to running calls unasked.
    refused(
        "[policy]\nmode = \"autonomous\"\n",
        "4:8",
        "`[policy] mode = \"autonomous\"` lets calls run without asking",
    );
    refused(
        "[policy]\nmode = \"assisted\"\n",
        "4:8",
        "`[policy] mode = \"assisted\"` lets calls run without asking",
    );

    // Rules that deny, ask or hide are welcome.
    fx.write(
        &path,
        &format!(
            "{SERVER}[[policy.rules]]\ntools = \"mail__delete_*\"\neffect = \"deny\"\n\
             [[policy.rules]]\ntools = \"mail__send\"\neffect = \"ask\"\n\
             [[policy.rules]]\ntools = \"mail__debug\"\neffect = \"hide\"\n"
        ),
    );
    let config = discover(&fx.env).unwrap();
    assert_eq!(
        globs(&config.policy),
        vec![
            ("mail__delete_*".to_owned(), Effect::Deny),
            ("mail__send".to_owned(), Effect::Ask),
            ("mail__debug".to_owned(), Effect::Hide),
        ]
    );
    assert_eq!(
        config.policy.rule_sources[2],
        source(Scope::Project, &path, 9, 1)
    );

    // The same allow rule is fine in the user's and in the local file.
    let allow = "[[policy.rules]]\ntools = \"*\"\neffect = \"allow\"\n";
    fx.write(&fx.env.config_home.join("warden/warden.toml"), allow);
    fx.write(&local_config_path(&fx.env).unwrap(), allow);
    let config = discover(&fx.env).unwrap();
    assert_eq!(config.policy.config.rules.len(), 5);
    assert_eq!(config.policy.config.mode, None);

    // The mode is the user's to choose; a project may only ask for the cautious one, and
    // the highest-precedence file that says it wins.
    fx.write(
        &fx.env.config_home.join("warden/warden.toml"),
        &format!("[policy]\nmode = \"autonomous\"\n{allow}"),
    );
    let config = discover(&fx.env).unwrap();
    assert_eq!(
        config.policy.config.mode,
        Some(warden_policy::Mode::Autonomous)
    );
    fx.write(&path, &format!("{SERVER}[policy]\nmode = \"cautious\"\n"));
    let config = discover(&fx.env).unwrap();
    assert_eq!(
        config.policy.config.mode,
        Some(warden_policy::Mode::Cautious)
    );
    assert_eq!(
        config.policy.mode_source.as_ref().map(|s| s.origin.scope),
        Some(Scope::Project)
    );
}

#[test]
fn scopes_merge_rules_in_order_and_server_settings_by_name() {
    let fx = Fixture::new();
    let user = fx.write(
        &fx.env.config_home.join("warden/warden.toml"),
        "[servers.mail]\ncommand = \"mail\"\n[servers.time]\ncommand = \"time\"\n\
         [policy.servers.mail]\ntrust = \"trusted\"\n\
         [policy.servers.time]\ntrust = \"trusted\"\nintegrity = \"trusted\"\n\
         [[policy.rules]]\ntools = \"mail__*\"\neffect = \"allow\"\n",
    );
    let project = fx.write(
        &fx.project().join("warden.toml"),
        "[[policy.rules]]\ntools = \"mail__delete\"\neffect = \"deny\"\n",
    );
    let local = fx.write(
        &local_config_path(&fx.env).unwrap(),
        "[policy.servers.mail]\ntrust = \"untrusted\"\n\
         [[policy.rules]]\ntools = \"time__*\"\neffect = \"ask\"\n",
    );
    let config = discover(&fx.env).unwrap();
    let policy = &config.policy;
    // Rules: user, then project, then local.
    assert_eq!(
        globs(policy),
        vec![
            ("mail__*".to_owned(), Effect::Allow),
            ("mail__delete".to_owned(), Effect::Deny),
            ("time__*".to_owned(), Effect::Ask),
        ]
    );
    assert_eq!(
        policy.rule_sources,
        vec![
            source(Scope::User, &user, 10, 1),
            source(Scope::Project, &project, 1, 1),
            source(Scope::Local, &local, 3, 1),
        ]
    );
    // Server settings: the local file's replace the user's whole (no field is combined).
    assert_eq!(
        policy.config.servers["mail"],
        warden_policy::ServerPolicy {
            trust: Some(Trust::Untrusted),
            ..Default::default()
        }
    );
    assert_eq!(
        policy.server_sources["mail"],
        source(Scope::Local, &local, 1, 17)
    );
    assert_eq!(policy.config.servers["time"].trust, Some(Trust::Trusted));
    assert_eq!(
        policy.server_sources["time"],
        source(Scope::User, &user, 7, 17)
    );
    assert!(policy.not_applied.is_empty());
    // The merged policy compiles, and decisions name rules by their merged number.
    let compiled = warden_policy::Policy::compile(&policy.config).unwrap();
    let facts = compiled.tool_facts("mail", "delete", "mail__delete", Default::default());
    let verdict = compiled.decide(
        &facts,
        &serde_json::json!({}),
        &warden_policy::Provenance::new(),
    );
    assert!(verdict.to_string().contains("policy.rules[1]"), "{verdict}");
}

#[test]
fn user_trust_is_not_given_to_a_server_the_project_defines() {
    let fx = Fixture::new();
    let user = fx.write(
        &fx.env.config_home.join("warden/warden.toml"),
        "[servers.github]\ncommand = \"github-mcp\"\n\
         [policy.servers.github]\ntrust = \"trusted\"\n\
         [policy.servers.time]\ntrust = \"trusted\"\n\
         [[policy.rules]]\ntools = \"github__*\"\neffect = \"allow\"\n",
    );
    // The repository puts its own program under the trusted name.
    let project_file = fx.write(
        &fx.project().join(".mcp.json"),
        r#"{"mcpServers": {"github": {"command": "./evil"}, "time": {"command": "./time"}}}"#,
    );
    let config = discover(&fx.env).unwrap();
    let policy = &config.policy;
    assert!(policy.config.servers.is_empty(), "{policy:?}");
    let names: Vec<&str> = policy
        .not_applied
        .iter()
        .map(|n| n.server.as_str())
        .collect();
    assert_eq!(names, ["github", "time"]);
    assert_eq!(
        policy.not_applied[0].source,
        source(Scope::User, &user, 3, 17)
    );
    assert!(
        policy.not_applied[0].reason.contains(&format!(
            "server `github` is defined by the project file {}",
            project_file.display()
        )),
        "{}",
        policy.not_applied[0].reason
    );
    // Rules are kept: they name tools, and the allow rule still needs every floor lifted.
    assert_eq!(policy.config.rules.len(), 1);

    // The user's local file for this project can vouch for the project's server.
    let local = fx.write(
        &local_config_path(&fx.env).unwrap(),
        "[policy.servers.github]\ntrust = \"trusted\"\n",
    );
    let config = discover(&fx.env).unwrap();
    let policy = &config.policy;
    assert_eq!(policy.config.servers["github"].trust, Some(Trust::Trusted));
    assert_eq!(
        policy.server_sources["github"],
        source(Scope::Local, &local, 1, 17)
    );
    let names: Vec<&str> = policy
        .not_applied
        .iter()
        .map(|n| n.server.as_str())
        .collect();
    assert_eq!(names, ["time"]);

    // A server the local file defines is the user's own again.
    fx.write(
        &local_config_path(&fx.env).unwrap(),
        "[servers.time]\ncommand = \"my-time\"\n",
    );
    let config = discover(&fx.env).unwrap();
    assert_eq!(
        config.policy.config.servers["time"].trust,
        Some(Trust::Trusted)
    );
    assert!(matches!(
        &config.policy.config.rules[0].tools,
        Globs::One(glob) if glob == "github__*"
    ));
}

#[test]
fn a_project_file_may_not_widen_a_servers_confinement() {
    let fx = Fixture::new();
    let path = fx.project().join("warden.toml");
    let home = fx.home();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(fx.project().join("data")).unwrap();
    // A symlink inside the project that points out of it is judged by its target.
    std::os::unix::fs::symlink(home.join(".ssh"), fx.project().join("keys")).unwrap();
    let refused = |extra: &str, what: &str| {
        fx.write(&path, &format!("{SERVER}{extra}\n"));
        let err = discover(&fx.env).unwrap_err();
        assert!(matches!(err, ConfigError::ProjectSandbox { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains("server `mail`"), "{message}");
        assert!(message.contains(what), "{message}\nexpected: {what}");
        assert!(message.contains("cannot loosen confinement"), "{message}");
    };
    refused("confine = false", "confine = false");
    refused("sandbox = { network = \"host\" }", "host network");
    // Issue 14: nor choose where its server may send data.
    refused(
        "sandbox = { network = { allow = [\"collector.example.org\"] } }",
        "network.allow",
    );
    refused(
        &format!(
            "sandbox = {{ read = [{:?}] }}",
            home.join(".ssh").display().to_string()
        ),
        "outside the project",
    );
    refused(
        "sandbox = { read = [\"data/../../..\"] }",
        "outside the project",
    );
    refused("sandbox = { write = [\"keys\"] }", "outside the project");

    // Grants inside the project are the project's to give.
    fx.write(
        &path,
        &format!("{SERVER}sandbox = {{ read = [\"data\"], write = [\".\"] }}\n"),
    );
    let config = discover(&fx.env).unwrap();
    assert_eq!(
        config.servers[0].sandbox.read,
        vec![fx.project().join("data")]
    );

    // The user's own file may grant anything.
    std::fs::remove_file(&path).unwrap();
    fx.write(
        &fx.env.config_home.join("warden/warden.toml"),
        &format!("{SERVER}confine = false\n"),
    );
    let config = discover(&fx.env).unwrap();
    assert!(!config.servers[0].sandbox.confine);
}

#[test]
fn a_project_file_may_lower_resource_limits_but_not_raise_them() {
    let fx = Fixture::new();
    let path = fx.project().join("warden.toml");
    for (extra, what) in [
        (
            "sandbox = { memory = \"64G\" }",
            "raises `sandbox.memory` to 64G",
        ),
        ("sandbox = { disk = \"2G\" }", "raises `sandbox.disk` to 2G"),
        (
            "sandbox = { processes = 100000 }",
            "raises `sandbox.processes` to 100000",
        ),
    ] {
        fx.write(&path, &format!("{SERVER}{extra}\n"));
        let err = discover(&fx.env).unwrap_err();
        assert!(matches!(err, ConfigError::ProjectSandbox { .. }), "{err}");
        assert!(err.to_string().contains(what), "{err}\nexpected: {what}");
    }
    fx.write(
        &path,
        &format!("{SERVER}sandbox = {{ memory = \"256M\", disk = \"16M\", processes = 32 }}\n"),
    );
    let config = discover(&fx.env).unwrap();
    let sandbox = &config.servers[0].sandbox;
    assert_eq!(
        (sandbox.memory, sandbox.disk, sandbox.processes),
        (Some(256 << 20), Some(16 << 20), Some(32))
    );
}
