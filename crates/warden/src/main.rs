//! `warden`: the command line of the Warden MCP host.
//!
//! This binary only wires the crates together: configuration from `warden-config`, server
//! connections from `warden-mcp`, the catalogue and calls from `warden-host`. Each command
//! lives in its own module under [`commands`].

mod cli;
mod commands;
mod elicit;
mod exit;
mod probe_report;
mod render;
mod session;
mod signals;
mod terminal;
mod untrusted;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::exit::Failure;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The probe runs inside a server's confinement: no logging, no runtime, one report.
    if let Command::ProbeReport(args) = &cli.command {
        return probe_report::run(&args.input);
    }
    init_logging(cli.verbose);
    signals::install_panic_hook();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("warden: cannot start the async runtime: {error}");
            return exit::Code::Unavailable.into();
        }
    };
    let result = runtime.block_on(run(cli));
    // Anything still running after the command (a task stuck on a dead pipe) is abandoned,
    // but every server process group has been stopped by then.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => code.into(),
        Err(failure) => failure.report(),
    }
}

async fn run(cli: Cli) -> Result<exit::Code, Failure> {
    match cli.command {
        Command::Tools(args) => commands::tools::run(&cli.global, args, cli.verbose).await,
        Command::Call(args) => commands::call::run(&cli.global, args).await,
        Command::Scan(args) => commands::scan::run(&cli.global, args).await,
        Command::Config(args) => commands::config::run(&cli.global, args),
        Command::Probe(args) => commands::probe::run(&cli.global, args).await,
        Command::Pin(args) => commands::pin::run(&cli.global, args),
        Command::Approve(args) => commands::approve::run(&cli.global, args).await,
        Command::Update(args) => commands::update::run(&cli.global, args).await,
        Command::Packages(cli::PackagesCommand::Gc(args)) => {
            commands::packages::gc(&cli.global, &args)
        }
        Command::Audit(args) => commands::audit::run(&args),
        Command::Run(args) => commands::run::run(&cli.global, args).await,
        Command::Chat(args) => commands::chat::run(&cli.global, args).await,
        Command::Serve(args) => commands::serve::run(&cli.global, args).await,
        Command::Login(args) => commands::login::login(&cli.global, args).await,
        Command::Logout(args) => commands::login::logout(&cli.global, args),
        Command::ConformanceClient(args) => commands::conformance::run(&args).await,
        Command::Relay(cli::RelayCommand::Supervise(args)) => {
            commands::relay::supervise(&cli.global, args).await
        }
        Command::ProbeReport(args) => Ok(match probe_report::run(&args.input) {
            code if code == ExitCode::SUCCESS => exit::Code::Ok,
            _ => exit::Code::Unavailable,
        }),
    }
}

fn init_logging(verbose: u8) {
    // rmcp's own records are one step quieter than Warden's: they repeat what Warden says.
    let default = match verbose {
        0 => "warn",
        1 => "info,rmcp=warn",
        2 => "debug,rmcp=info",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("WARDEN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .fmt_fields(untrusted::log_fields())
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
