//! The sandbox's helper processes (the waiter and init, forks of Warden that never exec) let
//! go of the memory they inherited from Warden once their set-up is done (decision 0054), and
//! still do their jobs afterwards.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use warden_sandbox::{Profile, Scratch, confine};

/// The heap the test holds while it confines a server: what a helper would keep a copy of.
const HEAP: usize = 64 << 20;

/// The most anonymous memory a helper may hold once it has let go: its stack and TLS, and
/// the loaded objects' relocated data it still shares with Warden (a debug test binary's
/// is large).
const HELPER_LIMIT: u64 = 8 << 20;

struct Setup {
    _base: tempfile::TempDir,
    _scratch: Scratch,
    profile: Profile,
}

fn setup(program: &str) -> Setup {
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scratch = Scratch::create(base.path(), "test").unwrap();
    let profile = Profile::default_for(Path::new(program), scratch.path()).unwrap();
    Setup {
        _base: base,
        _scratch: scratch,
        profile,
    }
}

fn spawn(profile: &Profile, script: &str) -> Child {
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let confinement = confine(&mut command, profile).unwrap();
    command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap()
}

/// A field of `/proc/PID/status` in bytes (`RssAnon`, `VmPTE`): readable for any process,
/// also a non-dumpable one.
fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The live children of `pid`, from every process's parent in `/proc/*/stat`.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(pid) {
            found.push(child);
        }
    }
    found
}

fn read_line(reader: &mut impl BufRead) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line.trim().to_owned()
}

/// A plain fork of this process that waits, as the helpers did before they let go: the
/// control that shows the heap is really there to be inherited.
fn plain_fork_rss_anon() -> u64 {
    // SAFETY: the child only calls async-signal-safe functions (pause, _exit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::pause();
            libc::_exit(0);
        }
    }
    let rss = status_bytes(pid as u32, "RssAnon").unwrap();
    // SAFETY: our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    rss
}

#[test]
fn the_helpers_hold_none_of_wardens_heap_and_still_do_their_jobs() {
    let s = setup("/bin/sh");
    // A heap of Warden's, every page written (so every page is this process's own).
    let heap = vec![0x5au8; HEAP];
    let heap_at = std::hint::black_box(&heap).as_ptr() as usize;
    assert!(status_bytes(std::process::id(), "RssAnon").unwrap() >= HEAP as u64);
    // The control: a fork that does not let go holds all of it.
    assert!(plain_fork_rss_anon() >= HEAP as u64);

    let mut child = spawn(&s.profile, "echo ready; read line; exit 3");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(read_line(&mut stdout), "ready");
    let waiter = child.id();
    let init = {
        let found = children(waiter);
        assert_eq!(
            found.len(),
            1,
            "the waiter has init as its one child: {found:?}"
        );
        found[0]
    };
    // Both let go concurrently with the server's start: wait for it, within bounds.
    let deadline = Instant::now() + Duration::from_secs(10);
    let held = loop {
        let held = [waiter, init].map(|pid| status_bytes(pid, "RssAnon").unwrap());
        if held.iter().all(|&h| h <= HELPER_LIMIT) || Instant::now() > deadline {
            break held;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!(
        "helpers' anonymous memory: waiter {} KiB, init {} KiB; page tables {:?} / {:?} bytes",
        held[0] >> 10,
        held[1] >> 10,
        status_bytes(waiter, "VmPTE"),
        status_bytes(init, "VmPTE"),
    );
    assert!(
        held.iter().all(|&h| h <= HELPER_LIMIT),
        "the helpers still hold {held:?} bytes of anonymous memory (limit {HELPER_LIMIT})"
    );
    // Where the maps can be read (root, or a kernel that lets the same uid read them), the
    // heap's address is not even mapped in either helper.
    for pid in [waiter, init] {
        if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            for line in maps.lines() {
                let range = line.split_whitespace().next().unwrap();
                let (start, end) = range.split_once('-').unwrap();
                let start = usize::from_str_radix(start, 16).unwrap();
                let end = usize::from_str_radix(end, 16).unwrap();
                assert!(
                    !(start <= heap_at && heap_at < end),
                    "helper {pid} still maps the heap: {line}"
                );
            }
        }
    }

    // And they still do their jobs: the server's exit code comes back through them.
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    drop(heap);
}

#[test]
fn the_waiter_dies_of_the_servers_signal_even_one_warden_ignores_or_blocks() {
    let s = setup("/bin/sh");
    // This test process ignores SIGPIPE (Rust's runtime does), and the helpers block it.
    for signal in [libc::SIGPIPE, libc::SIGUSR1, libc::SIGTERM] {
        let mut child = spawn(&s.profile, &format!("kill -{signal} $$"));
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "{status:?}");
    }
}

#[test]
fn the_server_reads_nothing_of_init_but_its_name() {
    let s = setup("/bin/sh");
    let script = "for f in maps mem environ; do \
                    if head -c 1 /proc/1/$f >/dev/null 2>&1; then echo \"$f read\"; \
                    else echo \"$f refused\"; fi; \
                  done; tr -d '\\0' < /proc/1/cmdline; echo";
    let mut child = spawn(&s.profile, script);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let lines: Vec<String> = (0..4).map(|_| read_line(&mut stdout)).collect();
    assert_eq!(
        lines,
        [
            "maps refused",
            "mem refused",
            "environ refused",
            "warden-init"
        ]
    );
    assert!(child.wait().unwrap().success());
}

/// Waits for `child` at most `limit`.
fn wait_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the confined process was not seen to end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_server_that_ends_before_its_helpers_let_go_is_still_seen_to_end() {
    // The server often exits while init is still letting go of Warden's memory: its
    // SIGCHLD must not be lost on the way (resetting SIGCHLD's disposition would drop it).
    let s = setup("/bin/sh");
    for round in 0..50 {
        let mut child = spawn(&s.profile, "exit 5");
        let status = wait_within(&mut child, Duration::from_secs(20));
        assert_eq!(status.code(), Some(5), "round {round}: {status:?}");
    }
}
