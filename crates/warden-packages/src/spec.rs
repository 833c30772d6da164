//! Recognising a package launcher in a server's command: `npx -y PKG[@VERSION] ARGS...`,
//! `uvx PKG[==VERSION] ARGS...`, `uv tool run`, `pipx run`. What is recognised is
//! installed by Warden instead of by the launcher at every start; anything else (an option
//! this parser does not know, a git URL, a local path) is left alone and runs as written.

use std::path::Path;

/// Which registry a package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecosystem {
    /// npm (`npx`): registry.npmjs.org.
    Npm,
    /// PyPI (`uvx`, `pipx run`): pypi.org and files.pythonhosted.org.
    PyPi,
}

impl Ecosystem {
    /// The word stored and shown: `npm` or `pypi`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::PyPi => "pypi",
        }
    }

    /// The registry hosts an install may reach.
    pub fn registry_hosts(self) -> &'static [&'static str] {
        match self {
            Ecosystem::Npm => &["registry.npmjs.org"],
            Ecosystem::PyPi => &["pypi.org", "files.pythonhosted.org"],
        }
    }
}

/// A server command that runs a registry package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageSpec {
    /// Its registry.
    pub ecosystem: Ecosystem,
    /// The launcher as written (`npx`, `uvx`, `uv tool run`, `pipx run`).
    pub launcher: String,
    /// The package's name (`@modelcontextprotocol/server-everything`, `mcp-server-time`).
    pub name: String,
    /// The version asked for, as the registry's client understands it: npm `1.2.3`,
    /// `^1`, `latest`; PyPI `==1.2.3`, `>=1`. Empty when none was given (the latest).
    pub requested: String,
    /// The command the package provides that the server runs (npm: a `bin` entry; PyPI: a
    /// console script).
    pub bin: String,
    /// The server's own arguments, after the package.
    pub args: Vec<String>,
}

impl PackageSpec {
    /// Whether the version is left to the registry (`latest`, a range, nothing): it is
    /// resolved once at install and pinned; `warden update` resolves it again.
    pub fn floating(&self) -> bool {
        match self.ecosystem {
            Ecosystem::Npm => !is_exact_npm_version(&self.requested),
            Ecosystem::PyPi => !self
                .requested
                .strip_prefix("==")
                .is_some_and(|v| !v.is_empty() && !v.contains('*')),
        }
    }

    /// The requirement handed to the installer: `name@requested` (npm) or
    /// `name requested` (PyPI), with `latest` / no constraint when none was given.
    pub fn requirement(&self) -> String {
        match self.ecosystem {
            Ecosystem::Npm if self.requested.is_empty() => format!("{}@latest", self.name),
            Ecosystem::Npm => format!("{}@{}", self.name, self.requested),
            Ecosystem::PyPi => format!("{}{}", self.name, self.requested),
        }
    }

    /// `name@requested` for display.
    pub fn display(&self) -> String {
        match (self.ecosystem, self.requested.is_empty()) {
            (_, true) => format!("{} (latest)", self.name),
            (Ecosystem::Npm, false) => format!("{}@{}", self.name, self.requested),
            (Ecosystem::PyPi, false) => format!("{}{}", self.name, self.requested),
        }
    }
}

fn is_exact_npm_version(text: &str) -> bool {
    let core = text.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Why a server written with a package launcher Warden does not install is refused, or
/// `None`: `bunx PKG` and `bun x PKG` would fetch whatever the registry serves at every
/// start, and Warden neither installs nor pins bun packages (bun is not on the machines
/// Warden is tested on, and its lockfile is another format). The message names the
/// alternatives: the same package through `npx -y` (installed, pinned and run offline with
/// node), or a program the user installed (decision 0040).
pub fn refused_launcher(command: &str, args: &[String]) -> Option<String> {
    let name = Path::new(command).file_name()?.to_str()?;
    let rest = match name {
        "bunx" => args,
        "bun" if matches!(args.first().map(String::as_str), Some("x" | "exec")) => &args[1..],
        _ => return None,
    };
    let written = if name == "bunx" { "bunx" } else { "bun x" };
    let kept: Vec<&str> = rest
        .iter()
        .map(String::as_str)
        .filter(|arg| !matches!(*arg, "--bun" | "-y" | "--yes"))
        .collect();
    Some(format!(
        "it is written as `{written} PACKAGE`, which Warden does not run: `{written}` would \
         download and run whatever the registry serves at every start, and Warden does not \
         install or pin bun packages. Write it as `npx -y {}` (Warden installs it once, \
         confined, pins it and runs it offline with node), or install it yourself and set \
         `command` to the installed program",
        kept.join(" ")
    ))
}

/// The package launcher `command` with `args` runs, or `None` when it is not one Warden
/// installs itself (then the server runs as written).
pub fn parse(command: &str, args: &[String]) -> Option<PackageSpec> {
    let name = Path::new(command).file_name()?.to_str()?;
    match name {
        "npx" => parse_npx(args),
        "uvx" => parse_python("uvx", args),
        "uv" if args.first().map(String::as_str) == Some("tool")
            && args.get(1).map(String::as_str) == Some("run") =>
        {
            parse_python("uv tool run", &args[2..])
        }
        "pipx" if args.first().map(String::as_str) == Some("run") => {
            parse_python("pipx run", &args[1..])
        }
        _ => None,
    }
}

fn parse_npx(args: &[String]) -> Option<PackageSpec> {
    let mut package: Option<String> = None;
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        match arg.as_str() {
            "-y" | "--yes" | "--no-install" | "-q" | "--quiet" => index += 1,
            "-p" | "--package" => {
                if package.is_some() {
                    return None; // several packages: not a single package to pin
                }
                package = Some(args.get(index + 1)?.clone());
                index += 2;
            }
            "--" => {
                index += 1;
                break;
            }
            other if other.starts_with("--package=") => {
                if package.is_some() {
                    return None;
                }
                package = Some(other["--package=".len()..].to_owned());
                index += 1;
            }
            other if other.starts_with('-') => return None,
            _ => break,
        }
    }
    let first = args.get(index)?;
    let rest = args.get(index + 1..).unwrap_or_default().to_vec();
    let (spec, bin) = match package {
        Some(package) => (package, first.clone()),
        None => {
            let (name, _) = split_npm(first)?;
            let unscoped = name.rsplit('/').next().unwrap_or(name).to_owned();
            (first.clone(), unscoped)
        }
    };
    let (name, requested) = split_npm(&spec)?;
    if !valid_npm_name(name) || !valid_version(requested) || !valid_bin(&bin) {
        return None;
    }
    Some(PackageSpec {
        ecosystem: Ecosystem::Npm,
        launcher: "npx".to_owned(),
        name: name.to_owned(),
        requested: requested.to_owned(),
        bin,
        args: rest,
    })
}

/// `name[@version]`, a scope's leading `@` kept with the name.
fn split_npm(spec: &str) -> Option<(&str, &str)> {
    match spec.get(1..).and_then(|tail| tail.find('@')) {
        Some(at) => Some((&spec[..=at], &spec[at + 2..])),
        None => Some((spec, "")),
    }
}

fn valid_npm_name(name: &str) -> bool {
    let body = match name.strip_prefix('@') {
        Some(scoped) => {
            let Some((scope, rest)) = scoped.split_once('/') else {
                return false;
            };
            if !valid_npm_part(scope) {
                return false;
            }
            rest
        }
        None => name,
    };
    valid_npm_part(body) && name.len() <= 214
}

fn valid_npm_part(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && !part.starts_with('_')
        && part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._~".contains(&b))
}

fn valid_version(version: &str) -> bool {
    version.len() <= 128
        && !version.starts_with('-')
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.+~^<>=*_ ,!".contains(&b))
        && !version.contains(':')
}

fn valid_bin(bin: &str) -> bool {
    !bin.is_empty()
        && bin.len() <= 128
        && !bin.starts_with(['-', '.'])
        && bin
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
}

fn parse_python(launcher: &str, args: &[String]) -> Option<PackageSpec> {
    let mut from: Option<String> = None;
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        match arg.as_str() {
            "--from" | "--spec" => {
                from = Some(args.get(index + 1)?.clone());
                index += 2;
            }
            "-q" | "--quiet" => index += 1,
            "--" => {
                index += 1;
                break;
            }
            other if other.starts_with("--from=") || other.starts_with("--spec=") => {
                from = Some(other[7..].to_owned());
                index += 1;
            }
            other if other.starts_with('-') => return None,
            _ => break,
        }
    }
    let first = args.get(index)?;
    let rest = args.get(index + 1..).unwrap_or_default().to_vec();
    let (spec, bin) = match from {
        Some(from) => (from, first.clone()),
        None => {
            let (name, _) = split_python(first)?;
            (first.clone(), name.to_owned())
        }
    };
    let (name, requested) = split_python(&spec)?;
    if !valid_python_name(name) || !valid_bin(&bin) {
        return None;
    }
    Some(PackageSpec {
        ecosystem: Ecosystem::PyPi,
        launcher: launcher.to_owned(),
        name: name.to_owned(),
        requested,
        bin,
        args: rest,
    })
}

/// `name`, `name==1.2`, `name>=1`, `name@1.2` (uvx's form, read as `==1.2`).
fn split_python(spec: &str) -> Option<(&str, String)> {
    let cut = spec
        .find(['=', '<', '>', '!', '~', '@'])
        .unwrap_or(spec.len());
    let (name, tail) = spec.split_at(cut);
    let requested = match tail.strip_prefix('@') {
        Some("latest") => String::new(),
        Some(version) => format!("=={version}"),
        None => tail.to_owned(),
    };
    if !valid_version(&requested) || requested.contains(' ') {
        return None;
    }
    Some((name, requested))
}

fn valid_python_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
}

/// PyPI's normal form of a name (PEP 503): lower case, runs of `-`, `_`, `.` as one `-`.
pub fn normalize_python_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut dash = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            dash = true;
            continue;
        }
        if dash && !out.is_empty() {
            out.push('-');
        }
        dash = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn bunx_is_refused_naming_the_npx_form_and_npx_is_not() {
        for (command, list) in [
            ("bunx", &["@s/pkg@1.2.3", "--flag"][..]),
            (
                "/home/u/.bun/bin/bunx",
                &["--bun", "@s/pkg@1.2.3", "--flag"][..],
            ),
            ("bun", &["x", "@s/pkg@1.2.3", "--flag"][..]),
        ] {
            let why = refused_launcher(command, &args(list)).unwrap();
            assert!(why.contains("npx -y @s/pkg@1.2.3 --flag"), "{why}");
            assert!(
                why.contains("does not install or pin bun packages"),
                "{why}"
            );
            assert!(parse(command, &args(list)).is_none());
        }
        // Controls: npx, bun running a script, and any other program are not refused.
        assert!(refused_launcher("npx", &args(&["-y", "@s/pkg"])).is_none());
        assert!(refused_launcher("bun", &args(&["run", "server.ts"])).is_none());
        assert!(refused_launcher("bun", &args(&["server.ts"])).is_none());
        assert!(refused_launcher("node", &args(&["bunx"])).is_none());
    }

    #[test]
    fn npx_forms_are_recognised() {
        let spec = parse(
            "npx",
            &args(&[
                "-y",
                "@modelcontextprotocol/server-everything@2026.8.31",
                "stdio",
            ]),
        )
        .unwrap();
        assert_eq!(spec.ecosystem, Ecosystem::Npm);
        assert_eq!(spec.name, "@modelcontextprotocol/server-everything");
        assert_eq!(spec.requested, "2026.8.31");
        assert_eq!(spec.bin, "server-everything");
        assert_eq!(spec.args, ["stdio"]);
        assert!(!spec.floating());

        let spec = parse("/usr/bin/npx", &args(&["--yes", "pkg"])).unwrap();
        assert_eq!((spec.name.as_str(), spec.requested.as_str()), ("pkg", ""));
        assert!(spec.floating());
        assert_eq!(spec.requirement(), "pkg@latest");
        assert!(
            parse("npx", &args(&["-y", "pkg@latest"]))
                .unwrap()
                .floating()
        );
        assert!(
            parse("npx", &args(&["-y", "pkg@^1.2.0"]))
                .unwrap()
                .floating()
        );

        let spec = parse(
            "npx",
            &args(&["-y", "-p", "@s/tools@1.0.0", "tool-a", "--x"]),
        )
        .unwrap();
        assert_eq!(
            (spec.name.as_str(), spec.bin.as_str()),
            ("@s/tools", "tool-a")
        );
        assert_eq!(spec.args, ["--x"]);
    }

    #[test]
    fn what_is_not_a_registry_package_is_left_alone() {
        for list in [
            &["-y", "github:user/repo"][..],
            &["-y", "./local"],
            &["-y", "https://example.com/x.tgz"],
            &["--node-options=--inspect", "pkg"],
            &["-y"],
            &["-y", "Upper"],
            &["-y", "pkg@file:../x"],
        ] {
            assert_eq!(parse("npx", &args(list)), None, "{list:?}");
        }
        assert_eq!(parse("node", &args(&["pkg"])), None);
        assert_eq!(parse("uvx", &args(&["--python", "3.12", "pkg"])), None);
        assert_eq!(parse("uvx", &args(&["git+https://x/y"])), None);
        assert_eq!(parse("uvx", &args(&["pkg[extra]"])), None);
        assert_eq!(parse("pipx", &args(&["install", "pkg"])), None);
    }

    #[test]
    fn python_forms_are_recognised() {
        let spec = parse(
            "uvx",
            &args(&["mcp-server-time==2026.10.19", "--local-timezone", "UTC"]),
        )
        .unwrap();
        assert_eq!(spec.ecosystem, Ecosystem::PyPi);
        assert_eq!(spec.name, "mcp-server-time");
        assert_eq!(spec.requested, "==2026.10.19");
        assert_eq!(spec.bin, "mcp-server-time");
        assert_eq!(spec.args, ["--local-timezone", "UTC"]);
        assert!(!spec.floating());

        let spec = parse("uvx", &args(&["mcp-server-time@1.0"])).unwrap();
        assert_eq!(spec.requested, "==1.0");
        let spec = parse("uvx", &args(&["mcp-server-time"])).unwrap();
        assert!(spec.floating() && spec.requested.is_empty());
        let spec = parse("uvx", &args(&["--from", "pkg>=2", "pkg-cli", "a"])).unwrap();
        assert_eq!((spec.name.as_str(), spec.bin.as_str()), ("pkg", "pkg-cli"));
        assert!(spec.floating());
        let spec = parse("pipx", &args(&["run", "--spec", "pkg==1", "cli"])).unwrap();
        assert_eq!(
            (spec.launcher.as_str(), spec.bin.as_str()),
            ("pipx run", "cli")
        );
        let spec = parse("uv", &args(&["tool", "run", "pkg"])).unwrap();
        assert_eq!(spec.launcher, "uv tool run");
        assert_eq!(normalize_python_name("Mcp_Server.time"), "mcp-server-time");
    }
}
