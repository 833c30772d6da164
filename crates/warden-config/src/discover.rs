//! Which files are read, in which order: the user, project and local scopes, or one file
//! named explicitly.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::environment::Environment;
use crate::error::ConfigError;
use crate::formats;
use crate::read::{read_required, read_text};
use crate::resolved::{ResolvedConfig, merge};
use crate::spec::{Format, Origin, Scope};

/// The project files, relative to the project root, lowest precedence first.
const PROJECT_FILES: [(&str, Format); 3] = [
    (".vscode/mcp.json", Format::VsCode),
    (".mcp.json", Format::ClaudeCode),
    ("warden.toml", Format::WardenToml),
];

/// Longest local-scope key kept as is; longer ones are shortened (see [`local_key`]).
const MAX_LOCAL_KEY_LEN: usize = 200;

/// Finds and merges every configuration file: user scope, then project, then local (later
/// wins; see [`ResolvedConfig`]). Missing files are skipped; unreadable or malformed ones
/// are errors.
pub fn discover(env: &Environment) -> Result<ResolvedConfig, ConfigError> {
    let walk = walk(env)?;
    let mut candidates = vec![
        (
            env.config_home
                .join("Claude")
                .join("claude_desktop_config.json"),
            Scope::User,
            Format::ClaudeDesktop,
        ),
        (
            env.config_home.join("warden").join("warden.toml"),
            Scope::User,
            Format::WardenToml,
        ),
    ];
    if let Some(root) = &walk.root {
        for (relative, format) in PROJECT_FILES {
            candidates.push((root.join(relative), Scope::Project, format));
        }
    }
    let local = local_path_for(env, &walk.anchor);
    let user = env.config_home.join("warden").join("warden.toml");
    candidates.push((local.clone(), Scope::Local, Format::WardenToml));

    let mut layers = Vec::new();
    for (path, scope, format) in candidates {
        let Some(text) = read_text(&path)? else {
            tracing::trace!(path = %path.display(), "no configuration file");
            continue;
        };
        tracing::debug!(path = %path.display(), ?scope, ?format, "reading configuration");
        let origin = Origin {
            scope,
            format,
            path,
        };
        let parsed = formats::parse(&text, &origin, env, &walk.anchor)?;
        layers.push((origin, parsed));
    }
    merge(layers, Some((local.as_path(), user.as_path())))
}

/// Loads a single file named by the user (`--config FILE`) instead of discovering any.
///
/// The format is recognised from the file name (`*.toml`, `claude_desktop_config.json`,
/// `.mcp.json`, `.vscode/mcp.json`), otherwise from the content. A relative path is taken
/// from `env.cwd`. The file must exist.
pub fn load_file(path: &Path, env: &Environment) -> Result<ResolvedConfig, ConfigError> {
    let path = env.cwd.join(path);
    let text = read_required(&path)?;
    parse_text(&path, &text, env)
}

/// Parses `text` as if it had been read from `path` (as [`load_file`] does once the file
/// is read): the format is recognised from the name, then the content. This is the whole
/// decoder of an untrusted configuration file without the file system read, so the fuzz
/// targets can drive it (`fuzz/`).
pub fn parse_text(
    path: &Path,
    text: &str,
    env: &Environment,
) -> Result<ResolvedConfig, ConfigError> {
    let path = env.cwd.join(path);
    let format = formats::detect(&path, text)?;
    let dir = formats::directory_of(&path);
    // `${workspaceFolder}` of a `.vscode/mcp.json` is the folder holding `.vscode`.
    let workspace = match dir.file_name() {
        Some(name) if name == ".vscode" => formats::directory_of(dir),
        _ => dir,
    }
    .to_owned();
    let origin = Origin {
        scope: Scope::Explicit,
        format,
        path,
    };
    let parsed = formats::parse(text, &origin, env, &workspace)?;
    merge(vec![(origin, parsed)], None)
}

/// The project root: the nearest directory, from `env.cwd` upwards, holding `warden.toml`,
/// `.mcp.json` or `.vscode/mcp.json`. The search stops after a directory containing `.git`,
/// at the home directory, and at the filesystem root.
pub fn project_root(env: &Environment) -> Result<Option<PathBuf>, ConfigError> {
    Ok(walk(env)?.root)
}

/// The local-scope file for the current project:
/// `$state_home/warden/local/<key>.toml`, where `<key>` encodes the project's absolute path
/// (see [`local_key`]). The project is the project root if there is one, else the nearest
/// directory containing `.git`, else `env.cwd`. The file may not exist.
pub fn local_config_path(env: &Environment) -> Result<PathBuf, ConfigError> {
    Ok(local_path_for(env, &walk(env)?.anchor))
}

fn local_path_for(env: &Environment, project: &Path) -> PathBuf {
    env.state_home
        .join("warden")
        .join("local")
        .join(format!("{}.toml", local_key(project)))
}

/// A file name standing for a project directory: every byte of the path other than ASCII
/// letters, digits, `.`, `_` and `-` is written `%XX` (so `/home/me/app` becomes
/// `%2Fhome%2Fme%2Fapp`, and distinct paths give distinct names). Keys longer than 200
/// bytes keep their last 160 bytes, prefixed with a 64-bit FNV-1a hash of the whole path.
pub fn local_key(project: &Path) -> String {
    let bytes = project.as_os_str().as_encoded_bytes();
    let mut key = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            key.push(char::from(b));
        } else {
            key.push_str(&format!("%{b:02X}"));
        }
    }
    if key.len() <= MAX_LOCAL_KEY_LEN {
        return key;
    }
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    // The key is ASCII, so any byte index is a character boundary.
    format!("{hash:016x}~{}", &key[key.len() - 160..])
}

/// What the upward search found.
struct Walk {
    /// The project root, if a directory with project files was found.
    root: Option<PathBuf>,
    /// The directory the local scope is keyed on (and `${workspaceFolder}`).
    anchor: PathBuf,
}

fn walk(env: &Environment) -> Result<Walk, ConfigError> {
    if !env.cwd.is_absolute() {
        return Err(ConfigError::Environment(format!(
            "the working directory {} is not an absolute path",
            env.cwd.display()
        )));
    }
    let mut dir = env.cwd.as_path();
    loop {
        for (relative, _) in PROJECT_FILES {
            if exists(&dir.join(relative))? {
                return Ok(Walk {
                    root: Some(dir.to_owned()),
                    anchor: dir.to_owned(),
                });
            }
        }
        if exists(&dir.join(".git"))? {
            return Ok(Walk {
                root: None,
                anchor: dir.to_owned(),
            });
        }
        if env.home.as_deref() == Some(dir) {
            break;
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => break,
        }
    }
    Ok(Walk {
        root: None,
        anchor: env.cwd.clone(),
    })
}

/// Whether something exists at `path`; errors other than "not there" are reported.
fn exists(path: &Path) -> Result<bool, ConfigError> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(false),
        Err(source) => Err(ConfigError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}
