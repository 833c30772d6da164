//! What a server's command line executes: the files a pin must cover, and nothing else.
//!
//! A server's arguments name all sorts of files: the script an interpreter runs, but also
//! the database, log or state file the server works on. Only the former decide what code
//! runs, and the latter change as the server works, so pinning them refuses an honest
//! server on its next start. [`plan`] reads the command line the way the program will:
//!
//! - the program, resolved as the launcher resolves it;
//! - when the program is a `#!` script, its interpreter (and, through `env NAME`, the
//!   `NAME` a `PATH` search finds), to the kernel's depth of nested interpreters;
//! - for a program known to run code named by its arguments (by file name: `python*`,
//!   `pypy*`, `node`, `deno`, `bun`, `uv`, and the shells), the file it runs: the script,
//!   the `-m` module's file (found as Python's default path finder would, statically), the
//!   files `node --require` / `--import` preloads, the `uv.lock` of a `uv run` project;
//! - for a package launcher (`npx`, `pnpx`, `uvx`, `uv tool run`, `bunx`, `bun x`, `deno run
//!   npm:…`), the package spec as text.
//!
//! Every other argument is data and is not pinned. Reading the command line is pure apart
//! from looking at files (`#!` lines, whether a path exists); nothing is executed.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::error::LaunchError;
use crate::launcher::{LaunchRequest, resolve_program};

/// What a pinned file is to the server's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The interpreter of a `#!` line (or the program `env` finds for it).
    Interpreter,
    /// The script an interpreter runs.
    Script,
    /// The file a `python -m MODULE` runs.
    Module,
    /// A file an interpreter loads before the script (`node --require ./hook.js`).
    Preload,
    /// The lockfile that decides what `uv run` installs and runs.
    Lockfile,
}

impl Role {
    /// The role in words, for `warden pin` and refusals.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interpreter => "interpreter",
            Self::Script => "script",
            Self::Module => "module",
            Self::Preload => "preload",
            Self::Lockfile => "lockfile",
        }
    }
}

/// One file the start executes (or that decides what it executes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The file as the server will name it (absolute, not resolved through symlinks).
    pub path: PathBuf,
    /// What it is to the start.
    pub role: Role,
    /// For a name found through `PATH` (`#!/usr/bin/env node`): every candidate, in search
    /// order; `path` is the first that exists now. Empty otherwise.
    pub search: Vec<PathBuf>,
    /// How it was found, for display (`#! of /usr/bin/npx`, `module mcp_server_time`).
    pub origin: String,
}

/// What a server's command line executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The program, resolved as the launcher resolves it.
    pub program: PathBuf,
    /// The files besides the program, in the order they were found, without duplicates.
    pub files: Vec<Planned>,
    /// The package a package launcher fetches, as written (`pkg@1.2.3`).
    pub package: Option<String>,
    /// What could not be pinned and why (a module not found on disk, a command that comes
    /// from a `uv run` environment), for display.
    pub notes: Vec<String>,
}

/// Linux follows at most this many nested `#!` interpreters.
const MAX_SHEBANG_DEPTH: usize = 4;
/// Linux reads the `#!` line from the first 256 bytes of a file.
const SHEBANG_BYTES: usize = 256;
/// Directories walked up from a `uv run` project looking for its `uv.lock`.
const MAX_LOCK_ASCENT: usize = 32;
/// Directories listed under an interpreter's `lib/` looking for `pythonX.Y`.
const MAX_LIB_ENTRIES: usize = 256;
/// Most `PATH` entries considered for one `env NAME` search.
const MAX_SEARCH: usize = 64;

/// Reads `request`'s command line: see the module documentation.
pub fn plan(request: &LaunchRequest, search_path: &OsStr) -> Result<Plan, LaunchError> {
    let program = resolve_program(&request.command, search_path)?;
    let mut plan = Plan {
        program: program.clone(),
        files: Vec::new(),
        package: None,
        notes: Vec::new(),
    };
    // The `PATH` the server itself gets: its own `env` table's, else Warden's.
    let server_path: OsString = request
        .env
        .get("PATH")
        .map_or_else(|| search_path.to_os_string(), OsString::from);
    follow_shebangs(&mut plan, &program, &server_path);

    let cwd = request.cwd.as_deref();
    let Some(kind) = Kind::of(&program) else {
        return Ok(plan);
    };
    let args = &request.args;
    match kind {
        Kind::Python => python(&mut plan, args, cwd, request, Some(&program)),
        Kind::Node => node(&mut plan, args, cwd),
        Kind::Deno => deno(&mut plan, args, cwd),
        Kind::Bun => bun(&mut plan, args, cwd),
        Kind::Bunx => plan.package = first_positional(args, BUN_VALUE).map(str::to_owned),
        Kind::Uv => uv(&mut plan, args, cwd, request),
        Kind::Uvx => plan.package = uvx_package(args),
        Kind::Npx => plan.package = npx_package(args),
        Kind::Shell => shell(&mut plan, args, cwd),
    }
    Ok(plan)
}

/// The files the rule before this one pinned: every argument naming an existing file,
/// absolute or (not starting with `-`) relative to the configured `cwd`. Pins recorded by
/// that rule are compared on these only (see `warden`'s `pins` module).
pub fn legacy_argument_files(request: &LaunchRequest) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for arg in &request.args {
        let path = Path::new(arg);
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else if let Some(cwd) = &request.cwd
            && !arg.starts_with('-')
        {
            cwd.join(path)
        } else {
            continue;
        };
        if path.is_file() && !files.contains(&path) {
            files.push(path);
        }
    }
    files
}

/// The package the rule before this one pinned: for a program named `npx` or `uvx`, the
/// first argument that does not start with `-`.
pub fn legacy_package(request: &LaunchRequest, program: &Path) -> Option<String> {
    match program.file_name().and_then(OsStr::to_str) {
        Some("npx" | "uvx") => request.args.iter().find(|a| !a.starts_with('-')).cloned(),
        _ => None,
    }
}

impl Plan {
    fn push(&mut self, path: PathBuf, role: Role, search: Vec<PathBuf>, origin: String) {
        if path == self.program || self.files.iter().any(|f| f.path == path) {
            return;
        }
        self.files.push(Planned {
            path,
            role,
            search,
            origin,
        });
    }
}

/// Programs whose arguments name the code they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Python,
    Node,
    Deno,
    Bun,
    Bunx,
    Uv,
    Uvx,
    Npx,
    Shell,
}

impl Kind {
    /// By the program's file name as resolved, else by the file it resolves to
    /// (`/usr/bin/python3` -> `python3.11`).
    fn of(program: &Path) -> Option<Self> {
        let by_name = |path: &Path| {
            path.file_name()
                .and_then(OsStr::to_str)
                .and_then(Self::named)
        };
        by_name(program).or_else(|| {
            std::fs::canonicalize(program)
                .ok()
                .and_then(|real| by_name(&real))
        })
    }

    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "node" | "nodejs" => Self::Node,
            "deno" => Self::Deno,
            "bun" => Self::Bun,
            "bunx" => Self::Bunx,
            "uv" => Self::Uv,
            "uvx" => Self::Uvx,
            "npx" | "pnpx" => Self::Npx,
            "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" => Self::Shell,
            _ if is_python(name) => Self::Python,
            _ => return None,
        })
    }
}

/// `python`, `python3`, `python3.12`, `python3.13t`, `pypy3`, ...
fn is_python(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("python")
        .or_else(|| name.strip_prefix("pypy"))
    else {
        return false;
    };
    let rest = rest.strip_suffix(['t', 'd', 'm']).unwrap_or(rest);
    rest.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// The `#!` line of `file`: the interpreter and its single optional argument (Linux passes
/// the rest of the line as one argument).
pub(crate) fn shebang(file: &Path) -> Option<(PathBuf, Option<String>)> {
    use std::io::Read;
    let mut head = [0u8; SHEBANG_BYTES];
    let read = crate::fingerprint::open_regular(file, true)
        .and_then(|(mut f, _)| f.read(&mut head))
        .ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let line = line.trim_matches([' ', '\t', '\r']);
    let (interpreter, arg) = match line.split_once([' ', '\t']) {
        Some((interpreter, arg)) => (interpreter, Some(arg.trim().to_owned())),
        None => (line, None),
    };
    if !interpreter.starts_with('/') {
        return None;
    }
    Some((PathBuf::from(interpreter), arg.filter(|a| !a.is_empty())))
}

fn follow_shebangs(plan: &mut Plan, program: &Path, server_path: &OsStr) {
    let mut current = program.to_path_buf();
    for _ in 0..MAX_SHEBANG_DEPTH {
        let Some((interpreter, arg)) = shebang(&current) else {
            return;
        };
        let origin = format!("#! of {}", current.display());
        let is_env = interpreter.file_name().is_some_and(|n| n == "env");
        plan.push(interpreter.clone(), Role::Interpreter, Vec::new(), origin);
        if !is_env {
            current = interpreter;
            continue;
        }
        // `#!/usr/bin/env [-S] [VAR=value ...] NAME [args]`.
        let Some(name) = arg.as_deref().and_then(env_command) else {
            return;
        };
        let origin = format!("`env {name}` of {}", current.display());
        if name.contains('/') {
            if Path::new(&name).is_absolute() {
                plan.push(PathBuf::from(&name), Role::Interpreter, Vec::new(), origin);
                current = PathBuf::from(name);
                continue;
            }
            return;
        }
        let candidates: Vec<PathBuf> = std::env::split_paths(server_path)
            .filter(|dir| dir.is_absolute())
            .take(MAX_SEARCH)
            .map(|dir| dir.join(&name))
            .collect();
        let Some(found) = candidates.iter().find(|c| is_executable(c)).cloned() else {
            plan.notes.push(format!(
                "`{name}` (named by `env` in the #! line of {}) is not in PATH",
                current.display()
            ));
            return;
        };
        plan.push(found.clone(), Role::Interpreter, candidates, origin);
        current = found;
    }
}

/// The command `env` runs, from the single argument of a `#!/usr/bin/env` line.
fn env_command(arg: &str) -> Option<String> {
    let mut words = arg.split_whitespace();
    while let Some(word) = words.next() {
        match word {
            "-S" | "--split-string" => continue,
            "-u" | "--unset" | "-C" | "--chdir" => {
                words.next();
            }
            _ if word.starts_with('-') || word.contains('=') => {}
            _ => return Some(word.to_owned()),
        }
    }
    None
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `arg` as a path: absolute, or relative to `base` (none: the server's working directory
/// is its empty scratch directory, where nothing relative exists).
fn path_of(arg: &str, base: Option<&Path>) -> Option<PathBuf> {
    let path = Path::new(arg);
    if path.is_absolute() {
        Some(path.to_path_buf())
    } else {
        base.map(|base| base.join(path))
    }
}

/// The first argument that is not an option (skipping the values of `with_value` options).
fn first_positional<'a>(args: &'a [String], with_value: &[&str]) -> Option<&'a str> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            return iter.next().map(String::as_str);
        }
        if with_value.contains(&arg.as_str()) {
            iter.next();
            continue;
        }
        if !arg.starts_with('-') {
            return Some(arg);
        }
    }
    None
}

// ---- Python ----

fn python(
    plan: &mut Plan,
    args: &[String],
    cwd: Option<&Path>,
    request: &LaunchRequest,
    interpreter: Option<&Path>,
) {
    let mut ignore_env = false;
    let mut safe_path = false;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            i += 1;
            break;
        }
        if arg == "-" || !arg.starts_with('-') {
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            if long == "check-hash-based-pycs" {
                i += 1;
            }
            i += 1;
            continue;
        }
        // A cluster of short options: `-u`, `-uB`, `-c CODE`, `-mpkg`, `-W arg`, `-Xdev`.
        let cluster = &arg[1..];
        for (at, option) in cluster.char_indices() {
            let rest = &cluster[at + option.len_utf8()..];
            match option {
                'c' => return, // the code is in the arguments
                'm' => {
                    let module = if rest.is_empty() {
                        args.get(i + 1).map(String::as_str)
                    } else {
                        Some(rest)
                    };
                    if let Some(module) = module {
                        python_module(
                            plan,
                            module,
                            cwd,
                            request,
                            interpreter,
                            ignore_env,
                            safe_path,
                        );
                    }
                    return;
                }
                'W' | 'X' => {
                    if rest.is_empty() {
                        i += 1;
                    }
                    break;
                }
                'E' => ignore_env = true,
                'P' => safe_path = true,
                'I' => {
                    ignore_env = true;
                    safe_path = true;
                }
                _ => {}
            }
        }
        i += 1;
    }
    let Some(script) = args.get(i) else {
        return;
    };
    if script == "-" {
        return;
    }
    let Some(path) = path_of(script, cwd) else {
        return;
    };
    if path.is_file() {
        plan.push(path, Role::Script, Vec::new(), "python script".to_owned());
    } else if path.is_dir() && path.join("__main__.py").is_file() {
        plan.push(
            path.join("__main__.py"),
            Role::Script,
            Vec::new(),
            format!("__main__ of {}", path.display()),
        );
    }
}

fn python_module(
    plan: &mut Plan,
    module: &str,
    cwd: Option<&Path>,
    request: &LaunchRequest,
    interpreter: Option<&Path>,
    ignore_env: bool,
    safe_path: bool,
) {
    let mut dirs = Vec::new();
    if !safe_path && let Some(cwd) = cwd {
        dirs.push(cwd.to_path_buf());
    }
    if !ignore_env {
        let pythonpath = request.env.get("PYTHONPATH").cloned().or_else(|| {
            request
                .sandbox
                .env
                .iter()
                .any(|name| name == "PYTHONPATH")
                .then(|| std::env::var("PYTHONPATH").ok())
                .flatten()
        });
        for entry in pythonpath.iter().flat_map(|p| p.split(':')) {
            if let Some(dir) = path_of(entry, cwd).filter(|_| !entry.is_empty()) {
                dirs.push(dir);
            }
        }
    }
    if let Some(interpreter) = interpreter {
        dirs.extend(python_lib_dirs(interpreter));
    }
    match find_module(module, &dirs) {
        Some(file) => plan.push(file, Role::Module, Vec::new(), format!("module {module}")),
        None => plan.notes.push(format!(
            "module {module} was not found where Python looks by default (working directory, \
             PYTHONPATH, the interpreter's library and site-packages directories): only the \
             interpreter is pinned"
        )),
    }
}

/// Where an interpreter finds modules by default, in its order: the standard library,
/// then a virtualenv's `site-packages` (when the interpreter is in one), else the system's.
fn python_lib_dirs(interpreter: &Path) -> Vec<PathBuf> {
    let real = std::fs::canonicalize(interpreter).unwrap_or_else(|_| interpreter.to_path_buf());
    let prefix_of = |path: &Path| path.parent().and_then(Path::parent).map(Path::to_path_buf);
    let Some(base) = prefix_of(&real) else {
        return Vec::new();
    };
    let versions = real
        .file_name()
        .and_then(OsStr::to_str)
        .and_then(|name| name.strip_prefix("python"))
        .filter(|v| v.contains('.'))
        .map(|v| vec![v.trim_end_matches(['t', 'd', 'm']).to_owned()])
        .unwrap_or_else(|| lib_versions(&base.join("lib")));
    let mut dirs: Vec<PathBuf> = versions
        .iter()
        .map(|v| base.join(format!("lib/python{v}")))
        .collect();
    let venv = prefix_of(interpreter).filter(|v| v.join("pyvenv.cfg").is_file());
    let system_site = |dirs: &mut Vec<PathBuf>| {
        for v in &versions {
            dirs.push(base.join(format!("local/lib/python{v}/dist-packages")));
            dirs.push(base.join(format!("lib/python{v}/site-packages")));
            dirs.push(base.join(format!("lib64/python{v}/site-packages")));
        }
        dirs.push(base.join("lib/python3/dist-packages"));
    };
    match venv {
        Some(venv) => {
            for v in lib_versions(&venv.join("lib")) {
                dirs.push(venv.join(format!("lib/python{v}/site-packages")));
            }
            let system = read_small_text(&venv.join("pyvenv.cfg"), MAX_PYVENV_CFG_BYTES)
                .unwrap_or_default()
                .lines()
                .filter_map(|line| line.split_once('='))
                .filter(|(key, _)| key.trim() == "include-system-site-packages")
                .map(|(_, value)| value.trim().eq_ignore_ascii_case("true"))
                .next_back()
                .unwrap_or(false);
            if system {
                system_site(&mut dirs);
            }
        }
        None => system_site(&mut dirs),
    }
    dirs
}

/// `X.Y` of every `pythonX.Y` directory in `lib`, newest name last.
fn lib_versions(lib: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(lib)
        .map(|entries| {
            entries
                .flatten()
                .take(MAX_LIB_ENTRIES)
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter_map(|n| n.strip_prefix("python").map(str::to_owned))
                .filter(|v| v.contains('.'))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The file `python -m module` runs, found as the default path finder would: the first
/// directory holding the top-level package (`pkg/__init__.py`) or module (`pkg.py`), a
/// namespace directory only when no directory has either; then the rest of the dotted name
/// inside it; a package runs its `__main__.py`.
fn find_module(module: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let parts: Vec<&str> = module.split('.').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || p.contains(['/', '\\']) || *p == "..")
    {
        return None;
    }
    let (first, rest) = parts.split_first()?;
    let mut namespace = None;
    let mut top = None;
    for dir in dirs {
        let package = dir.join(first);
        if package.join("__init__.py").is_file() {
            top = Some(package);
            break;
        }
        let file = dir.join(format!("{first}.py"));
        if file.is_file() {
            return rest.is_empty().then_some(file);
        }
        if package.is_dir() && namespace.is_none() {
            namespace = Some(package);
        }
    }
    let mut current = top.or(namespace)?;
    for (index, part) in rest.iter().enumerate() {
        let sub = current.join(part);
        if sub.is_dir() {
            current = sub;
            continue;
        }
        let file = current.join(format!("{part}.py"));
        return (index + 1 == rest.len() && file.is_file()).then_some(file);
    }
    let main = current.join("__main__.py");
    main.is_file().then_some(main)
}

// ---- Node, Deno, Bun ----

/// Node options that take the next argument as their value.
const NODE_VALUE: &[&str] = &[
    "-C",
    "--conditions",
    "--input-type",
    "--env-file",
    "--env-file-if-exists",
    "--title",
    "--inspect-port",
    "--debug-port",
    "--redirect-warnings",
    "--report-dir",
    "--report-directory",
    "--report-filename",
    "--report-signal",
    "--diagnostic-dir",
    "--heapsnapshot-signal",
    "--secure-heap",
    "--secure-heap-min",
    "--unhandled-rejections",
    "--dns-result-order",
    "--icu-data-dir",
    "--openssl-config",
    "--tls-cipher-list",
    "--tls-keylog",
    "--use-largepages",
    "--disable-warning",
    "--watch-path",
    "--experimental-default-type",
    "--max-http-header-size",
    "--localstorage-file",
    "--experimental-config-file",
    "--stack-trace-limit",
];
/// Node options whose value is a module loaded before the script.
const NODE_PRELOAD: &[&str] = &[
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
];
/// Node options whose value is the code to run (no script file).
const NODE_CODE: &[&str] = &["-e", "--eval", "-p", "--print"];

fn node(plan: &mut Plan, args: &[String], cwd: Option<&Path>) {
    let mut code = false;
    let mut i = 0;
    let mut script = None;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            script = args.get(i + 1);
            break;
        }
        if arg == "-" {
            break;
        }
        if let Some((name, value)) = arg.split_once('=')
            && name.starts_with("--")
        {
            if NODE_PRELOAD.contains(&name) {
                node_preload(plan, value, cwd);
            }
            code |= NODE_CODE.contains(&name);
            i += 1;
            continue;
        }
        if NODE_PRELOAD.contains(&arg) {
            if let Some(value) = args.get(i + 1) {
                node_preload(plan, value, cwd);
            }
            i += 2;
            continue;
        }
        if NODE_CODE.contains(&arg) {
            code = true;
            i += 2;
            continue;
        }
        if NODE_VALUE.contains(&arg) {
            i += 2;
            continue;
        }
        if arg.starts_with('-') {
            i += 1;
            continue;
        }
        script = Some(&args[i]);
        break;
    }
    if code {
        return;
    }
    if let Some(path) = script
        .and_then(|s| path_of(s, cwd))
        .and_then(|p| js_file(&p))
    {
        plan.push(path, Role::Script, Vec::new(), "node script".to_owned());
    }
}

/// A preloaded module named by a path (`./hook.js`, `/abs/hook.mjs`); bare package names
/// are resolved by Node at run time and not pinned.
fn node_preload(plan: &mut Plan, value: &str, cwd: Option<&Path>) {
    let is_path = value.starts_with('/') || value.starts_with("./") || value.starts_with("../");
    if !is_path {
        return;
    }
    if let Some(path) = path_of(value, cwd).and_then(|p| js_file(&p)) {
        plan.push(
            path,
            Role::Preload,
            Vec::new(),
            format!("preloaded {value}"),
        );
    }
}

/// Largest `package.json` read to find a directory's `main`.
const MAX_PACKAGE_JSON_BYTES: u64 = 1024 * 1024;
/// Largest `pyvenv.cfg` read (a real one is a few hundred bytes).
const MAX_PYVENV_CFG_BYTES: u64 = 64 * 1024;

/// The file Node loads for a script path: the file itself, with `.js`, `.mjs` or `.cjs`
/// added, or for a directory the `main` of its `package.json`, else its `index.js`.
fn js_file(path: &Path) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path.to_path_buf());
    }
    if let Some(main) = package_main(path)
        && let Some(found) = js_file_or_index(&path.join(main))
    {
        return Some(found);
    }
    js_file_or_index(path)
}

/// `main` of `dir/package.json`, when there is one (relative, inside the package).
fn package_main(dir: &Path) -> Option<String> {
    let text = read_small_text(&dir.join("package.json"), MAX_PACKAGE_JSON_BYTES)?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let main = value.get("main")?.as_str()?;
    (!main.is_empty() && !Path::new(main).is_absolute()).then(|| main.to_owned())
}

/// The text of a small regular file, at most `max` bytes of it (`None`: missing, not a
/// regular file, unreadable or not UTF-8). Never waits on a FIFO a repository put there.
fn read_small_text(path: &Path, max: u64) -> Option<String> {
    use std::io::Read;
    let (file, _) = crate::fingerprint::open_regular(path, true).ok()?;
    let mut text = String::new();
    file.take(max).read_to_string(&mut text).ok()?;
    Some(text)
}

fn js_file_or_index(path: &Path) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path.to_path_buf());
    }
    let with = |ext: &str| {
        let mut name = path.as_os_str().to_os_string();
        name.push(ext);
        PathBuf::from(name)
    };
    [".js", ".mjs", ".cjs"]
        .into_iter()
        .map(with)
        .chain(
            ["index.js", "index.mjs", "index.cjs"]
                .into_iter()
                .map(|i| path.join(i)),
        )
        .find(|candidate| candidate.is_file())
}

/// Deno options that take the next argument as their value (those with an optional value
/// need `=`).
const DENO_VALUE: &[&str] = &[
    "-c",
    "--config",
    "--import-map",
    "--cert",
    "-L",
    "--log-level",
    "--location",
    "--seed",
    "--ext",
    "--v8-flags",
];
const DENO_PRELOAD: &[&str] = &["--preload", "--import"];

fn deno(plan: &mut Plan, args: &[String], cwd: Option<&Path>) {
    let rest = match args.first().map(String::as_str) {
        Some("run" | "serve") => &args[1..],
        Some(first) if !first.starts_with('-') && looks_like_script(first) => args,
        _ => return,
    };
    let mut i = 0;
    while i < rest.len() {
        let arg = rest[i].as_str();
        if let Some((name, value)) = arg.split_once('=')
            && DENO_PRELOAD.contains(&name)
        {
            node_preload(plan, value, cwd);
            i += 1;
            continue;
        }
        if DENO_PRELOAD.contains(&arg) {
            if let Some(value) = rest.get(i + 1) {
                node_preload(plan, value, cwd);
            }
            i += 2;
            continue;
        }
        if DENO_VALUE.contains(&arg) {
            i += 2;
            continue;
        }
        if arg.starts_with('-') {
            i += 1;
            continue;
        }
        remote_or_script(plan, arg, cwd, "deno");
        return;
    }
}

/// A script argument that may be a URL or a registry specifier instead of a file.
fn remote_or_script(plan: &mut Plan, arg: &str, cwd: Option<&Path>, runner: &str) {
    let remote = ["http://", "https://", "npm:", "jsr:"]
        .iter()
        .any(|scheme| arg.starts_with(scheme));
    if remote {
        plan.package = Some(arg.to_owned());
        return;
    }
    let arg = arg.strip_prefix("file://").unwrap_or(arg);
    if let Some(path) = path_of(arg, cwd).filter(|p| p.is_file()) {
        plan.push(path, Role::Script, Vec::new(), format!("{runner} script"));
    }
}

fn looks_like_script(arg: &str) -> bool {
    [".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"]
        .iter()
        .any(|ext| arg.ends_with(ext))
        || arg.starts_with("npm:")
        || arg.starts_with("jsr:")
        || arg.starts_with("https://")
        || arg.starts_with("http://")
}

/// Bun options that take the next argument as their value.
const BUN_VALUE: &[&str] = &[
    "--cwd",
    "--env-file",
    "-c",
    "--config",
    "--tsconfig-override",
    "-d",
    "--define",
    "-l",
    "--loader",
    "--main-fields",
    "--conditions",
    "--port",
    "--install",
    "--filter",
    "-F",
    "--shell",
    "--console-depth",
    "--dns-result-order",
    "--title",
    "-p",
    "--package",
];
const BUN_PRELOAD: &[&str] = &["-r", "--preload", "--require", "--import"];
/// Bun subcommands that do not run a script of the server's.
const BUN_OTHER: &[&str] = &[
    "install", "i", "add", "a", "remove", "rm", "update", "test", "build", "create", "init",
    "link", "unlink", "pm", "upgrade", "repl", "outdated", "publish", "patch", "audit", "info",
];

fn bun(plan: &mut Plan, args: &[String], cwd: Option<&Path>) {
    let mut base = cwd.map(Path::to_path_buf);
    let mut i = 0;
    let mut run = false;
    while i < args.len() {
        let arg = args[i].as_str();
        if BUN_PRELOAD.contains(&arg) {
            if let Some(value) = args.get(i + 1) {
                node_preload(plan, value, base.as_deref());
            }
            i += 2;
            continue;
        }
        if arg == "--cwd" {
            base = args
                .get(i + 1)
                .and_then(|dir| path_of(dir, base.as_deref()));
            i += 2;
            continue;
        }
        if BUN_VALUE.contains(&arg) {
            i += 2;
            continue;
        }
        if arg.starts_with('-') {
            i += 1;
            continue;
        }
        if !run && arg == "run" {
            run = true;
            i += 1;
            continue;
        }
        if !run && arg == "x" {
            plan.package = first_positional(&args[i + 1..], BUN_VALUE).map(str::to_owned);
            return;
        }
        if !run && BUN_OTHER.contains(&arg) {
            return;
        }
        // A file runs; any other name is a `package.json` script, run at run time.
        remote_or_script(plan, arg, base.as_deref(), "bun");
        return;
    }
}

// ---- uv, uvx, npx ----

/// `uv run` / `uvx` options that take the next argument as their value.
const UV_VALUE: &[&str] = &[
    "--with",
    "-w",
    "--with-editable",
    "--with-requirements",
    "-p",
    "--python",
    "--directory",
    "--project",
    "--package",
    "--extra",
    "--group",
    "--no-group",
    "--only-group",
    "--env-file",
    "--index",
    "--default-index",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--index-strategy",
    "--keyring-provider",
    "--resolution",
    "--prerelease",
    "--fork-strategy",
    "--exclude-newer",
    "--exclude-newer-package",
    "--link-mode",
    "-C",
    "--config-setting",
    "--no-build-isolation-package",
    "--no-binary-package",
    "--no-build-package",
    "--refresh-package",
    "--reinstall-package",
    "-P",
    "--upgrade-package",
    "--cache-dir",
    "--config-file",
    "--color",
    "--allow-insecure-host",
    "--python-preference",
    "--python-platform",
    "--from",
    "--torch-backend",
    "--no-extra",
];

fn uv(plan: &mut Plan, args: &[String], cwd: Option<&Path>, request: &LaunchRequest) {
    match args.first().map(String::as_str) {
        Some("run") => {}
        Some("tool") if args.get(1).is_some_and(|a| a == "run") => {
            plan.package = uvx_package(&args[2..]);
            return;
        }
        _ => return,
    }
    let args = &args[1..];
    let mut project: Option<PathBuf> = None;
    let mut i = 0;
    let mut module = false;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            i += 1;
            break;
        }
        if arg == "-m" || arg == "--module" {
            module = true;
            i += 1;
            break;
        }
        if let Some((name, value)) = arg.split_once('=')
            && (name == "--directory" || name == "--project")
        {
            project = path_of(value, cwd);
            i += 1;
            continue;
        }
        if arg == "--directory" || arg == "--project" {
            project = args.get(i + 1).and_then(|v| path_of(v, cwd));
            i += 2;
            continue;
        }
        if UV_VALUE.contains(&arg) {
            i += 2;
            continue;
        }
        if arg.starts_with('-') {
            i += 1;
            continue;
        }
        break;
    }
    let base = project.clone().or_else(|| cwd.map(Path::to_path_buf));
    if let Some(lock) = base.as_deref().and_then(find_uv_lock) {
        plan.push(
            lock,
            Role::Lockfile,
            Vec::new(),
            "uv run project".to_owned(),
        );
    }
    let Some(command) = args.get(i) else {
        return;
    };
    if module {
        plan.notes.push(format!(
            "`uv run -m {command}`: the module comes from the project's environment, which \
             uv prepares at run time; its lockfile is pinned"
        ));
        return;
    }
    if is_python(command) {
        python(plan, &args[i + 1..], base.as_deref(), request, None);
        return;
    }
    let script = path_of(command, base.as_deref()).filter(|p| p.is_file());
    match script {
        Some(path) => plan.push(path, Role::Script, Vec::new(), "uv run script".to_owned()),
        None => plan.notes.push(format!(
            "`uv run {command}`: the command comes from the project's environment, which uv \
             prepares at run time; its lockfile is pinned when there is one"
        )),
    }
}

/// The `uv.lock` of the project in `dir` or the nearest ancestor that has one.
fn find_uv_lock(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .take(MAX_LOCK_ASCENT)
        .map(|d| d.join("uv.lock"))
        .find(|lock| lock.is_file())
}

/// The package of `uvx ARGS` / `uv tool run ARGS`: `--from`'s value, else the command.
fn uvx_package(args: &[String]) -> Option<String> {
    let mut from = None;
    let mut with = Vec::new();
    let mut iter = args.iter();
    let mut command = None;
    while let Some(arg) = iter.next() {
        if let Some(value) = arg.strip_prefix("--from=") {
            from = Some(value.to_owned());
        } else if arg == "--from" {
            from = iter.next().cloned();
        } else if arg == "--with" || arg == "-w" {
            with.extend(iter.next().cloned());
        } else if UV_VALUE.contains(&arg.as_str()) {
            iter.next();
        } else if arg == "--" {
            command = iter.next().cloned();
            break;
        } else if !arg.starts_with('-') {
            command = Some(arg.clone());
            break;
        }
    }
    let mut package = match (from, command) {
        (Some(from), Some(command)) => format!("{from} (runs {command})"),
        (Some(from), None) => from,
        (None, Some(command)) => command,
        (None, None) => return None,
    };
    for extra in with {
        package.push_str(&format!(" with {extra}"));
    }
    Some(package)
}

/// `npx` options that take the next argument as their value.
const NPX_VALUE: &[&str] = &[
    "-p",
    "--package",
    "-c",
    "--call",
    "--cache",
    "--registry",
    "--userconfig",
    "-w",
    "--workspace",
    "--prefix",
];

/// The package of `npx ARGS`: the `--package` values and the command, else the command.
fn npx_package(args: &[String]) -> Option<String> {
    let mut packages = Vec::new();
    let mut iter = args.iter();
    let mut command = None;
    while let Some(arg) = iter.next() {
        if let Some(value) = arg.strip_prefix("--package=") {
            packages.push(value.to_owned());
        } else if arg == "-p" || arg == "--package" {
            packages.extend(iter.next().cloned());
        } else if NPX_VALUE.contains(&arg.as_str()) {
            iter.next();
        } else if arg == "--" {
            command = iter.next().cloned();
            break;
        } else if !arg.starts_with('-') {
            command = Some(arg.clone());
            break;
        }
    }
    match (packages.is_empty(), command) {
        (true, command) => command,
        (false, Some(command)) => Some(format!("{} (runs {command})", packages.join(" "))),
        (false, None) => Some(packages.join(" ")),
    }
}

// ---- shells ----

fn shell(plan: &mut Plan, args: &[String], cwd: Option<&Path>) {
    let mut iter = args.iter();
    let mut script = None;
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--" => {
                script = iter.next();
                break;
            }
            "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file" => {
                iter.next();
            }
            _ if arg.starts_with("--") => {}
            _ if arg.starts_with('-') || arg.starts_with('+') => {
                if arg[1..].contains(['c', 's']) {
                    return; // the code is an argument, or comes on stdin
                }
            }
            _ => {
                script = Some(arg);
                break;
            }
        }
    }
    if let Some(path) = script.and_then(|s| path_of(s, cwd)).filter(|p| p.is_file()) {
        plan.push(path, Role::Script, Vec::new(), "shell script".to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_fifo_where_a_script_or_config_is_expected_is_skipped_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["server.py", "pyvenv.cfg", "package.json"] {
            let path = std::ffi::CString::new(dir.path().join(name).as_os_str().as_encoded_bytes())
                .unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        }
        // Nobody ever writes to these FIFOs: a blocking open would hang the test.
        let started = std::time::Instant::now();
        assert_eq!(shebang(&dir.path().join("server.py")), None);
        assert_eq!(read_small_text(&dir.path().join("pyvenv.cfg"), 1024), None);
        assert_eq!(package_main(dir.path()), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    fn request(command: &Path, args: &[&str], cwd: Option<&Path>) -> LaunchRequest {
        LaunchRequest {
            server: "s".into(),
            command: command.display().to_string(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: BTreeMap::new(),
            cwd: cwd.map(Path::to_path_buf),
            sandbox: warden_config::SandboxSpec::default(),
        }
    }

    fn executable(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn paths(plan: &Plan) -> Vec<(PathBuf, Role)> {
        plan.files
            .iter()
            .map(|f| (f.path.clone(), f.role))
            .collect()
    }

    #[test]
    fn data_files_in_the_arguments_are_not_pinned_the_script_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let python = root.join("bin/python3");
        executable(&python, "\x7fELF");
        std::fs::write(root.join("server.py"), "").unwrap();
        std::fs::write(root.join("data.db"), "").unwrap();
        std::fs::write(root.join("server.log"), "").unwrap();
        let got = plan(
            &request(
                &python,
                &[
                    "-u",
                    "server.py",
                    "--db-path",
                    "data.db",
                    "--log",
                    "server.log",
                ],
                Some(root),
            ),
            OsStr::new(""),
        )
        .unwrap();
        assert_eq!(got.program, python);
        assert_eq!(paths(&got), [(root.join("server.py"), Role::Script)]);
        // The rule before this one pinned all three.
        let legacy = legacy_argument_files(&request(
            &python,
            &[
                "-u",
                "server.py",
                "--db-path",
                "data.db",
                "--log",
                "server.log",
            ],
            Some(root),
        ));
        assert_eq!(legacy.len(), 3);
    }

    #[test]
    fn a_console_script_pins_its_interpreter_not_its_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let python = root.join("venv/bin/python");
        executable(&python, "\x7fELF");
        let console = root.join("venv/bin/mcp-server-sqlite");
        executable(&console, &format!("#!{}\nimport sys\n", python.display()));
        std::fs::write(root.join("db.sqlite"), "").unwrap();
        let db = root.join("db.sqlite");
        let got = plan(
            &request(&console, &["--db-path", db.to_str().unwrap()], None),
            OsStr::new(""),
        )
        .unwrap();
        assert_eq!(paths(&got), [(python, Role::Interpreter)]);
    }

    #[test]
    fn env_shebangs_are_followed_through_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let node = root.join("b/node");
        executable(&node, "\x7fELF");
        let cli = root.join("lib/npx-cli.js");
        executable(&cli, "#!/usr/bin/env -S node --no-warnings\n");
        let npx = root.join("bin/npx");
        std::fs::create_dir_all(npx.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&cli, &npx).unwrap();
        let search = std::env::join_paths([root.join("a"), root.join("b")]).unwrap();
        let got = plan(
            &request(&npx, &["-y", "pkg@1.2.3", "--flag"], None),
            &search,
        )
        .unwrap();
        assert_eq!(
            paths(&got),
            [
                (PathBuf::from("/usr/bin/env"), Role::Interpreter),
                (node.clone(), Role::Interpreter)
            ]
        );
        assert_eq!(got.files[1].search, [root.join("a/node"), node]);
        assert_eq!(got.package.as_deref(), Some("pkg@1.2.3"));
    }

    #[test]
    fn python_modules_are_found_as_python_would() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let base = root.join("usr");
        executable(&base.join("bin/python3.11"), "\x7fELF");
        let venv = root.join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(base.join("bin/python3.11"), venv.join("bin/python")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = x\n").unwrap();
        let site = venv.join("lib/python3.11/site-packages");
        std::fs::create_dir_all(site.join("srv")).unwrap();
        std::fs::write(site.join("srv/__init__.py"), "").unwrap();
        std::fs::write(site.join("srv/__main__.py"), "").unwrap();
        std::fs::create_dir_all(base.join("lib/python3.11")).unwrap();
        std::fs::write(base.join("lib/python3.11/json.py"), "").unwrap();
        let python = venv.join("bin/python");
        let run = |args: &[&str], cwd: Option<&Path>| {
            plan(&request(&python, args, cwd), OsStr::new("")).unwrap()
        };
        assert_eq!(
            paths(&run(&["-m", "srv"], None)),
            [(site.join("srv/__main__.py"), Role::Module)]
        );
        assert_eq!(
            paths(&run(&["-um", "json"], None)),
            [(base.join("lib/python3.11/json.py"), Role::Module)]
        );
        // The working directory comes first, as it does for Python (unless -I / -P).
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("srv.py"), "").unwrap();
        assert_eq!(
            paths(&run(&["-m", "srv"], Some(&work))),
            [(work.join("srv.py"), Role::Module)]
        );
        assert_eq!(
            paths(&run(&["-I", "-m", "srv"], Some(&work))),
            [(site.join("srv/__main__.py"), Role::Module)]
        );
        let missing = run(&["-m", "nowhere", "data.db"], None);
        assert!(missing.files.is_empty());
        assert!(missing.notes[0].contains("nowhere"), "{:?}", missing.notes);
        // `-c`: the code is an argument; nothing else is pinned.
        std::fs::write(work.join("x.py"), "").unwrap();
        assert!(
            run(&["-c", "print(1)", "x.py"], Some(&work))
                .files
                .is_empty()
        );
    }

    #[test]
    fn node_deno_bun_and_uv_scripts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in ["node", "deno", "bun", "uv", "uvx", "bash"] {
            executable(&root.join("bin").join(name), "\x7fELF");
        }
        for file in [
            "server.js",
            "hook.js",
            "main.ts",
            "s.py",
            "data.json",
            "run.sh",
        ] {
            std::fs::write(root.join(file), "").unwrap();
        }
        std::fs::write(root.join("uv.lock"), "").unwrap();
        let run = |program: &str, args: &[&str]| {
            plan(
                &request(&root.join("bin").join(program), args, Some(root)),
                OsStr::new(""),
            )
            .unwrap()
        };
        assert_eq!(
            paths(&run(
                "node",
                &[
                    "--require",
                    "./hook.js",
                    "--title",
                    "x",
                    "server",
                    "data.json"
                ]
            )),
            [
                (root.join("hook.js"), Role::Preload),
                (root.join("server.js"), Role::Script)
            ]
        );
        assert!(run("node", &["-e", "1", "server.js"]).files.is_empty());
        // A package directory runs its `main`.
        std::fs::create_dir_all(root.join("pkg/dist")).unwrap();
        std::fs::write(root.join("pkg/package.json"), r#"{"main": "dist/srv"}"#).unwrap();
        std::fs::write(root.join("pkg/dist/srv.js"), "").unwrap();
        std::fs::write(root.join("pkg/index.js"), "").unwrap();
        assert_eq!(
            paths(&run("node", &["pkg"])),
            [(root.join("pkg/dist/srv.js"), Role::Script)]
        );
        assert_eq!(
            paths(&run(
                "deno",
                &["run", "-A", "--config", "data.json", "main.ts"]
            )),
            [(root.join("main.ts"), Role::Script)]
        );
        assert_eq!(
            run("deno", &["run", "npm:srv@1.0.0"]).package.as_deref(),
            Some("npm:srv@1.0.0")
        );
        assert_eq!(
            paths(&run("bun", &["run", "server.js", "data.json"])),
            [(root.join("server.js"), Role::Script)]
        );
        assert_eq!(
            run("bun", &["x", "pkg@2"]).package.as_deref(),
            Some("pkg@2")
        );
        assert_eq!(
            paths(&run("uv", &["run", "--with", "x", "s.py", "data.json"])),
            [
                (root.join("uv.lock"), Role::Lockfile),
                (root.join("s.py"), Role::Script)
            ]
        );
        assert_eq!(
            paths(&run("uv", &["run", "python", "-u", "s.py"])),
            [
                (root.join("uv.lock"), Role::Lockfile),
                (root.join("s.py"), Role::Script)
            ]
        );
        let tool = run("uv", &["run", "mcp-server-x", "data.json"]);
        assert_eq!(paths(&tool), [(root.join("uv.lock"), Role::Lockfile)]);
        assert_eq!(tool.notes.len(), 1);
        assert_eq!(
            run("uvx", &["--from", "srv==1.0", "srv-cli", "data.json"])
                .package
                .as_deref(),
            Some("srv==1.0 (runs srv-cli)")
        );
        assert_eq!(
            paths(&run("bash", &["-e", "run.sh", "data.json"])),
            [(root.join("run.sh"), Role::Script)]
        );
        assert!(run("bash", &["-ec", "run.sh"]).files.is_empty());
        // An unknown program: its arguments are its own business.
        executable(&root.join("bin/server"), "\x7fELF");
        assert!(run("server", &["server.js", "data.json"]).files.is_empty());
    }

    #[test]
    fn npx_packages_and_python_names() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            npx_package(&args(&["-y", "@scope/srv@1.2.3", "--port", "1"])).as_deref(),
            Some("@scope/srv@1.2.3")
        );
        assert_eq!(
            npx_package(&args(&["--package", "srv@1", "srv-cli"])).as_deref(),
            Some("srv@1 (runs srv-cli)")
        );
        for name in ["python", "python3", "python3.12", "python3.13t", "pypy3"] {
            assert!(is_python(name), "{name}");
        }
        for name in ["pythonista", "py", "python-config"] {
            assert!(!is_python(name), "{name}");
        }
    }
}
