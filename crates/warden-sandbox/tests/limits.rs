//! Resource limits on real confined processes: memory, processes and the scratch disk, each
//! with the cgroup this machine offers (if any) and with rlimits only; and what a server can
//! learn of Warden from its `/proc/1`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use warden_sandbox::{LimitReached, Profile, Scratch, confine};

const PYTHON: &str = "/usr/bin/python3";

fn require(program: &str) {
    assert!(
        Path::new(program).exists(),
        "{program} is needed by this test: install it (Debian: python3)"
    );
}

struct Setup {
    _base: tempfile::TempDir,
    scratch: Scratch,
    profile: Profile,
}

fn setup(program: &str) -> Setup {
    let base = tempfile::tempdir().unwrap();
    let scratch = Scratch::create(base.path(), "limits").unwrap();
    let profile = Profile::default_for(Path::new(program), scratch.path()).unwrap();
    Setup {
        _base: base,
        scratch,
        profile,
    }
}

struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    reached: Vec<LimitReached>,
}

/// Runs `program args` confined by `profile`, to the end (at most a minute).
fn run(profile: &Profile, program: &str, args: &[&str]) -> Ran {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = confine(&mut command, profile).unwrap();
    let mut child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the confined process did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ran {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        reached: confinement.limits_reached(),
    }
}

/// Allocates and touches `mib` MiB, 1 MiB at a time; prints how far it got.
const MEMORY_HOG: &str = r#"
import sys
kept = []
try:
    for i in range(int(sys.argv[1])):
        kept.append(bytearray(b"x" * (1 << 20)))
    print("allocated", len(kept))
except MemoryError:
    print("refused after", len(kept), file=sys.stderr)
    sys.exit(70)
"#;

#[test]
fn a_memory_hog_hits_its_limit_with_and_without_a_cgroup() {
    require(PYTHON);
    for cgroup in [true, false] {
        let mut s = setup(PYTHON);
        s.profile.limits.memory = 96 << 20;
        s.profile.limits.cgroup = cgroup;
        // Positive control: 16 MiB under a 96 MiB limit.
        let ran = run(&s.profile, PYTHON, &["-c", MEMORY_HOG, "16"]);
        assert!(ran.status.success(), "cgroup {cgroup}: {}", ran.stderr);
        assert_eq!(ran.stdout, "allocated 16\n");
        assert!(ran.reached.is_empty(), "{:?}", ran.reached);

        // 2 GiB under the same limit: killed (cgroup) or refused (rlimit), and named.
        let ran = run(&s.profile, PYTHON, &["-c", MEMORY_HOG, "2048"]);
        assert!(!ran.status.success(), "cgroup {cgroup}: {}", ran.stdout);
        assert!(
            ran.status.signal() == Some(libc::SIGKILL) || ran.status.code() == Some(70),
            "cgroup {cgroup}: {:?} {}",
            ran.status,
            ran.stderr
        );
        let memory = ran
            .reached
            .iter()
            .find(|r| matches!(r, LimitReached::Memory { .. }))
            .unwrap_or_else(|| panic!("cgroup {cgroup}: not named: {:?}", ran.reached));
        let text = memory.to_string();
        assert!(text.contains("memory limit of 96M"), "{text}");
        assert_eq!(memory.name(), "memory");
        drop(s.scratch);
    }
}

/// Forks children that sleep until a fork is refused; prints how many it started.
const FORK_BOMB: &str = r#"
import os, sys, time
started = 0
try:
    for _ in range(int(sys.argv[1])):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        started += 1
except BlockingIOError:
    print("refused after", started, file=sys.stderr)
    sys.exit(70)
print("forked", started)
"#;

#[test]
fn a_fork_bomb_hits_its_limit_with_and_without_a_cgroup() {
    require(PYTHON);
    for cgroup in [true, false] {
        let mut s = setup(PYTHON);
        s.profile.limits.processes = 24;
        s.profile.limits.cgroup = cgroup;
        let ran = run(&s.profile, PYTHON, &["-c", FORK_BOMB, "4"]);
        assert_eq!(ran.stdout, "forked 4\n", "cgroup {cgroup}: {}", ran.stderr);
        assert!(ran.reached.is_empty(), "{:?}", ran.reached);

        let started = Instant::now();
        let ran = run(&s.profile, PYTHON, &["-c", FORK_BOMB, "10000"]);
        assert_eq!(
            ran.status.code(),
            Some(70),
            "cgroup {cgroup}: {}",
            ran.stderr
        );
        assert!(ran.stderr.starts_with("refused after"), "{}", ran.stderr);
        let count: u64 = ran
            .stderr
            .trim()
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(count < 24, "cgroup {cgroup}: {count} processes started");
        assert!(
            ran.reached.contains(&LimitReached::Processes { limit: 24 }),
            "cgroup {cgroup}: not named: {:?}",
            ran.reached
        );
        // The children died with the sandbox, at once (not after their 60 s sleep).
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}

#[test]
fn a_disk_filler_hits_the_scratch_limit_and_the_host_disk_is_untouched() {
    for cgroup in [true, false] {
        let mut s = setup("/bin/sh");
        s.profile.limits.disk = 8 << 20;
        s.profile.limits.cgroup = cgroup;
        // Positive control: 1 MiB in an 8 MiB scratch.
        let ran = run(
            &s.profile,
            "/bin/sh",
            &["-c", "head -c 1048576 /dev/zero > \"$HOME/f\" && echo ok"],
        );
        assert_eq!(ran.stdout, "ok\n", "{}", ran.stderr);
        assert!(ran.reached.is_empty(), "{:?}", ran.reached);

        // fallocate far beyond it is refused outright; writing stops at the limit.
        let script = "fallocate -l 20G \"$HOME/big\"; echo \"fallocate $?\"; \
                      head -c 67108864 /dev/zero > \"$HOME/fill\"; echo \"write $?\"; \
                      du -k \"$HOME/fill\"; exit 1";
        let ran = run(&s.profile, "/bin/sh", &["-c", script]);
        let lines: Vec<&str> = ran.stdout.lines().collect();
        assert_eq!(lines[0], "fallocate 1", "{}", ran.stderr);
        assert_eq!(lines[1], "write 1", "{}", ran.stderr);
        assert!(
            ran.stderr.contains("No space left on device"),
            "{}",
            ran.stderr
        );
        let kib: u64 = lines[2].split_whitespace().next().unwrap().parse().unwrap();
        assert!(kib <= 8 * 1024, "{kib} KiB written into an 8 MiB scratch");
        assert!(
            ran.reached.contains(&LimitReached::Disk { limit: 8 << 20 }),
            "cgroup {cgroup}: not named: {:?}",
            ran.reached
        );
        assert!(ran.reached[0].to_string().contains("disk limit of 8M"));
        // None of it is on the host.
        assert_eq!(std::fs::read_dir(s.scratch.path()).unwrap().count(), 0);
    }
}

#[test]
fn the_scratch_is_gone_when_warden_is_killed_and_its_directory_is_cleaned_next_time() {
    // `warden-sandbox-run` stands in for Warden: its server writes into its scratch tmpfs,
    // then the runner is SIGKILLed with no chance to clean up.
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let base = std::env::temp_dir().join(format!("warden-sandbox-run-{uid}"));
    let script = "head -c 1048576 /dev/zero > \"$HOME/data\" && echo written && exec sleep 600";
    let mut runner = Command::new(env!("CARGO_BIN_EXE_warden-sandbox-run"))
        .args(["--ready", "--", "/bin/sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = std::io::BufReader::new(runner.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line, "written\n");
    let pid = runner.id();
    let mine = |base: &Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(base)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .contains(&format!("-{pid}-"))
            })
            .collect()
    };
    let dirs = mine(&base);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    // What the server wrote is in its tmpfs, not on the host, even while it runs.
    assert_eq!(std::fs::read_dir(&dirs[0]).unwrap().count(), 0);
    runner.kill().unwrap();
    assert_eq!(runner.wait().unwrap().signal(), Some(libc::SIGKILL));
    // The empty mount point stays until the next scratch is made in the same base.
    assert!(dirs[0].exists());
    let next = Scratch::create(&base, "next").unwrap();
    assert!(
        !dirs[0].exists(),
        "the stale directory of a dead Warden was not removed"
    );
    drop(next);
}

/// Re-runs this test binary's `proc_one_child` test with a marker among its arguments and in
/// its environment: that process is then "Warden", whose command line init inherits.
#[test]
fn a_confined_server_sees_none_of_wardens_arguments_or_environment() {
    let marker = format!("warden-marker-{}", std::process::id());
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "proc_one_child", "--nocapture", &marker])
        .env("WARDEN_PROC_ONE_MARKER", &marker)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("checked /proc/1"),
        "the child test did not run: {text}"
    );
}

/// The half of the test above that runs as "Warden"; does nothing unless started by it.
#[test]
fn proc_one_child() {
    let Ok(marker) = std::env::var("WARDEN_PROC_ONE_MARKER") else {
        return;
    };
    assert!(
        std::env::args().any(|a| a == marker),
        "the marker is not among our arguments"
    );
    let s = setup("/bin/sh");
    let script = "tr -d '\\0' < /proc/1/cmdline; echo; \
                  if tr '\\0' ' ' < /proc/1/environ; then echo; echo 'environ read'; \
                  else echo 'environ refused'; fi; \
                  if readlink /proc/1/exe; then echo 'exe read'; else echo 'exe refused'; fi; \
                  cat /proc/1/comm; tr '\\0' ' ' < /proc/$$/cmdline";
    let ran = run(&s.profile, "/bin/sh", &["-c", script]);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    // Reading works (the server's own command line), and init shows only its name.
    // Exactly the name: not even the length of Warden's command line shows.
    assert_eq!(
        lines.first().copied(),
        Some("warden-init"),
        "{}",
        ran.stdout
    );
    assert!(ran.stdout.contains("environ refused"), "{}", ran.stdout);
    assert!(ran.stdout.contains("exe refused"), "{}", ran.stdout);
    assert!(ran.stdout.contains("warden-init\n"), "comm: {}", ran.stdout);
    assert!(ran.stdout.contains("/bin/sh -c"), "{}", ran.stdout);
    assert!(
        !ran.stdout.contains(&marker),
        "Warden's arguments or environment leaked: {}",
        ran.stdout
    );
    println!("checked /proc/1");
}
