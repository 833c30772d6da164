//! `warden-sandbox-run`: runs one program confined with the default profile, for trying the
//! sandbox by hand and for tests that need a separate process to stand in for Warden.
//!
//! ```text
//! warden-sandbox-run [--network host] [--read PATH]... [--write PATH]... [--env KEY=VALUE]...
//!                    [--memory BYTES] [--processes N] [--disk BYTES] [--ready]
//!                    -- PROGRAM [ARGS...]
//! ```
//!
//! The program's stdio is Warden's stdio. With `--ready` the runner prints `ready` on its
//! stderr once the program has started. It exits with the program's exit code (128 + the
//! signal number when the program was killed), or 125 when confinement failed; a limit the
//! program reached is named on stderr.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use warden_sandbox::{Network, Profile, Scratch, confine};

const SETUP_FAILED: u8 = 125;

struct Options {
    network: Network,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    env: BTreeMap<String, String>,
    limits: warden_sandbox::Limits,
    ready: bool,
    program: PathBuf,
    args: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        network: Network::None,
        read: Vec::new(),
        write: Vec::new(),
        env: BTreeMap::new(),
        limits: warden_sandbox::Limits::default(),
        ready: false,
        program: PathBuf::new(),
        args: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--network" => match value("--network")?.as_str() {
                "host" => options.network = Network::Host,
                "none" => options.network = Network::None,
                other => return Err(format!("--network is `none` or `host`, not `{other}`")),
            },
            "--read" => options.read.push(PathBuf::from(value("--read")?)),
            "--write" => options.write.push(PathBuf::from(value("--write")?)),
            "--env" => {
                let pair = value("--env")?;
                let (key, val) = pair
                    .split_once('=')
                    .ok_or(format!("--env takes KEY=VALUE, not `{pair}`"))?;
                options.env.insert(key.to_owned(), val.to_owned());
            }
            "--memory" | "--processes" | "--disk" => {
                let text = value(&arg)?;
                let number: u64 = text
                    .parse()
                    .map_err(|_| format!("{arg} takes a whole number, not `{text}`"))?;
                match arg.as_str() {
                    "--memory" => options.limits.memory = number,
                    "--processes" => options.limits.processes = number,
                    _ => options.limits.disk = number,
                }
            }
            "--ready" => options.ready = true,
            "--" => {
                let program = args.next().ok_or("no program after `--`")?;
                options.program = PathBuf::from(program);
                options.args = args.collect();
                return Ok(options);
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Err("usage: warden-sandbox-run [OPTIONS] -- PROGRAM [ARGS...]".into())
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("warden-sandbox-run: {message}");
            return ExitCode::from(2);
        }
    };
    match run(options) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("warden-sandbox-run: {message}");
            ExitCode::from(SETUP_FAILED)
        }
    }
}

fn run(options: Options) -> Result<ExitCode, String> {
    use std::os::unix::process::ExitStatusExt;
    // A private base of this user's below the temporary directory (refused if someone
    // else made it first).
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let base = std::env::temp_dir().join(format!("warden-sandbox-run-{uid}"));
    let scratch = Scratch::create(&base, "sandbox-run").map_err(|e| e.to_string())?;
    let mut profile =
        Profile::default_for(&options.program, scratch.path()).map_err(|e| e.to_string())?;
    profile.network = options.network;
    profile.limits = options.limits;
    profile.read.extend(options.read);
    profile.write.extend(options.write);
    let mut env = profile.env.clone();
    env.extend(options.env);
    profile.set_env(env);
    let mut command = Command::new(&options.program);
    command.args(&options.args);
    let confinement = confine(&mut command, &profile).map_err(|e| e.to_string())?;
    let mut child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e).to_string())?;
    if options.ready {
        eprintln!("ready");
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    for reached in confinement.limits_reached() {
        eprintln!("warden-sandbox-run: {reached}");
    }
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
