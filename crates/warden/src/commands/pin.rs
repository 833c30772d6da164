//! `warden pin SERVER`: shows how what a server executes differs from its pin, and
//! (without `--show`) records the current state as the new pin, once the user confirms on
//! the terminal or passed `--yes`: a change of what runs is at least as serious as a
//! changed definition, which `warden approve` also does not accept silently.
//!
//! It also says when a pinned file could be changed by someone other than the user (the
//! server would be refused at start for that, whatever the pin says).
//!
//! A relayed server (`relay = "NAME"`) runs inside a sandbox, where the brain cannot hash
//! its files: its pin is what the supervisor reported, and what `warden pin` accepts is the
//! state the sandbox last reported when it was refused (kept by the brain, shown here).

use warden_mcp::{ConfinedLauncher, LaunchRequest};
use warden_store::Store;

use crate::cli::{GlobalArgs, PinArgs};
use crate::exit::{Code, Failure};
use crate::untrusted::{Shape, inert};
use warden_host::{pins, relay_pins};

/// Runs `warden pin`.
pub fn run(global: &GlobalArgs, args: PinArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let spec = super::configured_server(&config, &args.server)?;
    if let Some(relay) = relay_pins::relay_of(spec) {
        return relayed(&env, &args, relay, spec);
    }
    let Some(request) = LaunchRequest::for_spec(spec) else {
        return Err(Failure::usage(anyhow::anyhow!(
            "server `{}` is remote; only local (stdio) servers are pinned",
            args.server
        )));
    };
    let launcher = ConfinedLauncher::from_env(super::scratch_dir(&env));
    let mut store = super::open_store(&env)?;
    let key = pins::key_for(spec);
    // A package server (`npx -y PKG`) runs its installed entry point: that is what is pinned.
    let request = warden_host::packages::installed_request(&store, &key, &request);
    let current = launcher.fingerprint(&request).map_err(|error| Failure {
        code: Code::Unavailable,
        error: anyhow::anyhow!("server `{}`: {error}", args.server),
    })?;
    let stored = store.pin_for(&key).map_err(unavailable)?;
    let name = inert(&args.server, Shape::Line);
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
                    println!("  - {}", inert(line, Shape::Line));
                }
                println!("it now runs:");
            }
            let dropped = pins::dropped_by_rule(pinned, &current);
            if !dropped.is_empty() {
                println!(
                    "{name}: pinned by an earlier rule that also pinned data files; these are \
                     not compared any more, and the next start records the pin again without \
                     them:"
                );
                for path in dropped {
                    println!("  - {}", inert(&path.display().to_string(), Shape::Line));
                }
            }
            !lines.is_empty()
        }
    };
    for line in pins::describe(&current) {
        println!("  {}", inert(&line, Shape::Line));
    }
    let grants = pins::write_grants(&config.servers, launcher.scratch_base());
    let exposed = pins::exposed(&current, &grants);
    if !exposed.is_empty() {
        println!(
            "{name}: WILL NOT START: what it runs can be changed by someone other than you, so \
             no pin can vouch for it:"
        );
        for line in &exposed {
            println!("  - {}", inert(line, Shape::Line));
        }
    }
    if args.show || !changed {
        return Ok(Code::Ok);
    }
    confirm(&args, &format!("Pin `{name}` to what it runs now?"))?;
    save(&mut store, &key, &pins::to_pin(&current))?;
    println!("{name}: pinned to what it runs now");
    Ok(Code::Ok)
}

/// `warden pin` of a relayed server: shows its pin and the state the sandbox last reported
/// that differed from it, and accepts that state once confirmed.
fn relayed(
    env: &warden_config::Environment,
    args: &PinArgs,
    relay: &str,
    spec: &warden_config::ServerSpec,
) -> Result<Code, Failure> {
    let mut store = super::open_store(env)?;
    let key = relay_pins::key(relay, spec);
    let name = inert(&args.server, Shape::Line);
    let relay_name = inert(relay, Shape::Line);
    let stored = store.pin_for(&key).map_err(unavailable)?;
    let pending = store
        .pin_for(&relay_pins::pending_key(relay, spec))
        .map_err(unavailable)?;
    let Some(stored) = stored else {
        println!(
            "{name}: not pinned yet; its first start inside relay `{relay_name}` pins what the \
             sandbox reports"
        );
        return Ok(Code::Ok);
    };
    let changed = pending
        .as_ref()
        .map(|pending| relay_pins::changes(&stored, pending))
        .unwrap_or_default();
    if changed.is_empty() {
        println!("{name}: runs inside relay `{relay_name}`; pinned to:");
        for line in pins::describe_pin(&stored) {
            println!("  {}", inert(&line, Shape::Line));
        }
        return Ok(Code::Ok);
    }
    println!(
        "{name}: inside relay `{relay_name}`, the sandbox reported a start that differs from \
         its pin:"
    );
    for line in &changed {
        println!("  - {}", inert(line, Shape::Line));
    }
    println!("it would run (as the sandbox's supervisor reports it):");
    let pending = pending.unwrap_or(stored);
    for line in pins::describe_pin(&pending) {
        println!("  {}", inert(&line, Shape::Line));
    }
    if args.show {
        return Ok(Code::Ok);
    }
    confirm(args, &format!("Pin `{name}` to what the sandbox reported?"))?;
    save(&mut store, &key, &pending)?;
    println!("{name}: pinned to what the sandbox reported");
    Ok(Code::Ok)
}

/// Asks `question` on the terminal; `--yes` answers it. Without a terminal and without
/// `--yes`, nothing is pinned.
fn confirm(args: &PinArgs, question: &str) -> Result<(), Failure> {
    crate::terminal::confirm(args.yes, question).map_err(|refusal| Failure {
        code: Code::Denied,
        error: match refusal {
            crate::terminal::Refusal::NoTerminal => anyhow::anyhow!(
                "nothing pinned: there is no terminal to ask on (use --yes after reviewing)"
            ),
            crate::terminal::Refusal::Declined => anyhow::anyhow!("nothing pinned"),
        },
    })
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
