//! `warden pin SERVER`: shows how a server's program, file arguments and package differ
//! from its pin, and (without `--show`) records the current state as the new pin.

use warden_mcp::{ConfinedLauncher, LaunchRequest};
use warden_store::Store;

use crate::cli::{GlobalArgs, PinArgs};
use crate::exit::{Code, Failure};
use crate::pins;

/// Runs `warden pin`.
pub fn run(global: &GlobalArgs, args: PinArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let Some(spec) = config.servers.iter().find(|spec| spec.name == args.server) else {
        return Err(Failure::usage(anyhow::anyhow!(
            "no server `{}` is configured (see `warden config`)",
            args.server
        )));
    };
    let Some(request) = LaunchRequest::for_spec(spec) else {
        return Err(Failure::usage(anyhow::anyhow!(
            "server `{}` is remote; only local (stdio) servers are pinned",
            args.server
        )));
    };
    let launcher = ConfinedLauncher::from_env(super::scratch_dir(&env));
    let current = launcher
        .fingerprint(&request)
        .map(pins::to_pin)
        .map_err(|error| Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("server `{}`: {error}", args.server),
        })?;
    let mut store = super::open_store(&env)?;
    let key = pins::key_for(spec);
    let stored = store.pin_for(&key).map_err(unavailable)?;
    let name = &args.server;
    let changed = match &stored {
        None => {
            println!("{name}: not pinned yet; it runs:");
            true
        }
        Some(pinned) => {
            let lines = pins::changes(pinned, &current);
            if lines.is_empty() {
                println!("{name}: matches its pin; it runs:");
            } else {
                println!("{name}: changed since it was pinned:");
                for line in &lines {
                    println!("  - {line}");
                }
                println!("it now runs:");
            }
            !lines.is_empty()
        }
    };
    for line in pins::describe(&current) {
        println!("  {line}");
    }
    if args.show || !changed {
        return Ok(Code::Ok);
    }
    save(&mut store, &key, &current)?;
    println!("{name}: pinned to what it runs now");
    Ok(Code::Ok)
}

fn save(store: &mut Store, key: &str, pin: &warden_store::Pin) -> Result<(), Failure> {
    store.save_pin(key, pin).map_err(unavailable)
}

fn unavailable(error: warden_store::StoreError) -> Failure {
    Failure {
        code: Code::Unavailable,
        error: error.into(),
    }
}
