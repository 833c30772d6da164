//! Real confined processes on this machine: what they can and cannot reach, and that nothing
//! they start outlives them or Warden.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use warden_sandbox::{Network, Profile, SANDBOX_UID, SandboxError, Scratch, confine, scrubbed_env};

const MARKER: &str = "WARDEN_SANDBOX_TEST_MARKER";

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A directory the unprivileged sandbox uid may traverse (mode 0755), removed on drop.
/// Fails the test when a program it runs inside the sandbox is missing: a check that is not
/// run is not a pass (`.ci/run` installs Debian's python3 and nodejs).
fn require(program: &str) {
    assert!(
        Path::new(program).exists(),
        "{program} is needed by this test: install it (Debian: python3, nodejs)"
    );
}

fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A scratch directory and the default profile for `program`.
struct Setup {
    _base: tempfile::TempDir,
    scratch: Scratch,
    profile: Profile,
}

fn setup(program: &str) -> Setup {
    let base = open_dir();
    let scratch = Scratch::create(base.path(), "test").unwrap();
    let profile = Profile::default_for(Path::new(program), scratch.path()).unwrap();
    Setup {
        _base: base,
        scratch,
        profile,
    }
}

fn unique_marker(name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{name}-{}-{n}", std::process::id())
}

struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn spawn(profile: &Profile, program: &str, args: &[&str], stdin: Stdio) -> Child {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = confine(&mut command, profile).unwrap();
    command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap()
}

fn finish(mut child: Child, limit: Duration) -> Output {
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
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the confined process did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn run(profile: &Profile, program: &str, args: &[&str]) -> Output {
    finish(
        spawn(profile, program, args, Stdio::null()),
        Duration::from_secs(60),
    )
}

fn sh(profile: &Profile, script: &str) -> Output {
    run(profile, "/bin/sh", &["-c", script])
}

/// Host pids whose environment carries `MARKER=value` (read from outside the sandbox).
fn marked(value: &str) -> Vec<i32> {
    let needle = format!("{MARKER}={value}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

fn wait_until_gone(value: &str, limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left = marked(value);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until at least `count` processes carry the marker (a process in the middle of an
/// exec briefly shows no environment).
fn wait_for_marked(value: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while marked(value).len() < count {
        assert!(
            Instant::now() < deadline,
            "fewer than {count} processes started: {:?}",
            marked(value)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Lines of `stdout`, delivered on a channel so that reads can time out.
fn lines(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_for_line(rx: &mpsc::Receiver<String>, wanted: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100))
            && line.trim().ends_with(wanted)
        {
            return;
        }
    }
    panic!("no line {wanted:?} within 30 s");
}

fn uid_line(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn reads_a_granted_file_but_not_a_home_outside_the_grant() {
    let mut s = setup("/bin/sh");
    let granted = open_dir();
    std::fs::write(granted.path().join("notes.txt"), "granted contents\n").unwrap();
    // A fake home with a key that ordinary permissions would let anyone read: only
    // Landlock stands between the server and it.
    let home = open_dir();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ssh.join("id_rsa"), "PRIVATE KEY\n").unwrap();
    std::fs::set_permissions(ssh.join("id_rsa"), std::fs::Permissions::from_mode(0o644)).unwrap();
    s.profile.read.push(granted.path().to_path_buf());

    let out = sh(
        &s.profile,
        &format!("cat {}/notes.txt", granted.path().display()),
    );
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout, "granted contents\n");

    // What is not granted does not exist in the sandbox's root.
    let key = ssh.join("id_rsa");
    let out = sh(&s.profile, &format!("cat {}", key.display()));
    assert!(!out.status.success(), "read the key: {}", out.stdout);
    assert!(out.stderr.contains("No such file"), "{}", out.stderr);
    let out = sh(&s.profile, &format!("ls {}", home.path().display()));
    assert!(!out.status.success(), "listed the home: {}", out.stdout);
    // The root holds only the grants: every mount point is one of them, or the sandbox's
    // own /, /proc and /dev.
    let out = sh(&s.profile, "cat /proc/self/mountinfo");
    let grants: Vec<&PathBuf> = s.profile.read.iter().chain(&s.profile.write).collect();
    for line in out.stdout.lines() {
        let point = Path::new(line.split(' ').nth(4).unwrap());
        assert!(
            point == Path::new("/")
                || point.starts_with("/proc")
                || point.starts_with("/dev")
                || grants.iter().any(|g| point.starts_with(g)),
            "unexpected mount {} in the sandbox",
            point.display()
        );
    }
    assert!(out.stdout.lines().count() >= 5, "{}", out.stdout);

    // Visible but not readable: Landlock alone refuses (an exec-only grant).
    let tools = open_dir();
    std::fs::write(tools.path().join("data"), "secret\n").unwrap();
    let mut profile = s.profile.clone();
    profile.exec.push(tools.path().to_path_buf());
    let out = sh(&profile, &format!("cat {}/data", tools.path().display()));
    assert!(
        !out.status.success(),
        "read an exec-only file: {}",
        out.stdout
    );
    assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);

    // A symlink inside a granted directory does not extend the grant.
    std::os::unix::fs::symlink(&key, granted.path().join("link")).unwrap();
    let out = sh(
        &s.profile,
        &format!("cat {}/link", granted.path().display()),
    );
    assert!(
        !out.status.success(),
        "followed the symlink: {}",
        out.stdout
    );
}

#[test]
fn writes_only_inside_the_write_list() {
    let mut s = setup("/bin/sh");
    // World-writable, and granted for reading only: Landlock must refuse the write.
    let readonly = open_dir();
    std::fs::set_permissions(readonly.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(readonly.path().join("existing"), "keep\n").unwrap();
    std::fs::set_permissions(
        readonly.path().join("existing"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    s.profile.read.push(readonly.path().to_path_buf());
    let dir = readonly.path().display();

    let out = sh(&s.profile, &format!("echo x > {dir}/new"));
    assert!(!out.status.success());
    assert!(!readonly.path().join("new").exists());
    let out = sh(&s.profile, &format!("echo x >> {dir}/existing"));
    assert!(!out.status.success());
    let out = sh(&s.profile, &format!(": > {dir}/existing"));
    assert!(!out.status.success(), "truncated a read-only file");
    assert_eq!(
        std::fs::read_to_string(readonly.path().join("existing")).unwrap(),
        "keep\n"
    );
    let out = sh(&s.profile, "echo x > /tmp/warden-sandbox-escape");
    assert!(!out.status.success());

    // The scratch directory is HOME and TMPDIR, and writable, renames included.
    let out = sh(
        &s.profile,
        "mkdir -p \"$HOME/a\" \"$TMPDIR/b\" && echo hi > \"$HOME/a/f\" && mv \"$HOME/a/f\" \"$TMPDIR/b/g\" && cat \"$TMPDIR/b/g\" && pwd",
    );
    assert!(out.status.success(), "{}", out.stderr);
    let scratch = s.scratch.path().display().to_string();
    assert_eq!(out.stdout, format!("hi\n{scratch}\n"));
    // It is the sandbox's own tmpfs: nothing reached the host's directory, and the next
    // run starts empty.
    assert_eq!(std::fs::read_dir(s.scratch.path()).unwrap().count(), 0);
    let out = sh(&s.profile, "ls -A \"$HOME\"");
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[test]
fn unix_sockets_outside_the_grants_are_unreachable() {
    // An agent socket that file permissions would let anyone use, and the network off: a
    // pathname socket is not covered by the network namespace, nor by Landlock's rules.
    let dir = open_dir();
    let path = dir.path().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let s = setup("/usr/bin/python3");
    require("/usr/bin/python3");
    let code = format!(
        "import socket; c = socket.socket(socket.AF_UNIX); c.connect({:?}); print('connected')",
        path.display().to_string()
    );
    let out = run(&s.profile, "/usr/bin/python3", &["-c", &code]);
    assert!(!out.status.success(), "connected to {}", path.display());
    assert!(out.stderr.contains("FileNotFoundError"), "{}", out.stderr);
    assert!(listener.accept().is_err(), "the agent saw a connection");
}

#[test]
fn etc_shadow_is_unreadable_while_etc_is_granted() {
    let s = setup("/bin/sh");
    let out = sh(&s.profile, "head -c0 /etc/passwd && cat /etc/shadow");
    assert!(!out.status.success(), "read /etc/shadow: {}", out.stdout);
    assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);
}

#[test]
fn runs_as_an_unprivileged_uid_inside_and_outside() {
    let mut s = setup("/bin/sh");
    let marker = unique_marker("uid");
    s.profile.env.insert(MARKER.to_owned(), marker.clone());
    let mut child = spawn(
        &s.profile,
        "/bin/sh",
        &[
            "-c",
            "id -u; id -G; grep -E '^(Uid|Gid|CapEff)' /proc/self/status; echo ready; read line; exit 0",
        ],
        Stdio::piped(),
    );
    let rx = lines(child.stdout.take().unwrap());
    let mut inside = Vec::new();
    loop {
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        if line == "ready" {
            break;
        }
        inside.push(line);
    }
    let expected = if is_root() {
        SANDBOX_UID
    } else {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() }
    };
    assert_eq!(inside[0], expected.to_string());
    assert_eq!(inside[1], expected.to_string(), "no supplementary groups");
    assert!(
        inside
            .iter()
            .any(|l| l.starts_with("CapEff:") && l.ends_with("0000000000000000")),
        "{inside:?}"
    );

    // Seen from outside: every process of the sandbox has the same, non-root uid.
    let pids = marked(&marker);
    assert!(!pids.is_empty());
    for pid in pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert_eq!(uid_line(&status), vec![expected; 4], "pid {pid}");
        if is_root() {
            assert_ne!(expected, 0);
        }
    }
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn no_network_unless_the_profile_asks_for_the_host() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let mut s = setup("/usr/bin/bash");
    let out = run(&s.profile, "/usr/bin/bash", &["-c", &connect]);
    assert!(!out.status.success(), "connected without network");
    assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);
    assert!(listener.accept().is_err(), "the listener saw a connection");
    // The namespace has nothing but a loopback that is down.
    let out = run(&s.profile, "/bin/cat", &["/proc/net/dev"]);
    assert!(!out.stdout.contains("eth"), "{}", out.stdout);

    s.profile.network = Network::Host;
    let out = run(&s.profile, "/usr/bin/bash", &["-c", &connect]);
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout, "connected\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while listener.accept().is_err() {
        assert!(Instant::now() < deadline, "no connection arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Network `proxy` (issue 14): the server's only reachable endpoint is the listener the
/// sandbox hands to Warden; the host's loopback stays out of reach (negative), while a
/// connection to the proxy port arrives at the listener this process holds (positive).
#[test]
fn network_proxy_reaches_only_the_listener_handed_to_warden() {
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    host.set_nonblocking(true).unwrap();
    let mut s = setup("/usr/bin/bash");
    let port = Network::DEFAULT_PROXY_PORT;
    s.profile.network = Network::Proxy { port };
    let script = format!(
        "echo \"proxy=$HTTPS_PROXY\"; \
         (exec 3<>/dev/tcp/127.0.0.1/{host_port}) 2>/dev/null && echo host-reached; \
         (exec 3<>/dev/tcp/10.0.0.1/80) 2>/dev/null && echo lan-reached; \
         exec 4<>/dev/tcp/127.0.0.1/{port} && echo -n through >&4 && echo proxied; \
         grep -c : /proc/net/dev"
    );
    let mut command = Command::new("/usr/bin/bash");
    command
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = confine(&mut command, &s.profile).unwrap();
    let child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    let listener = confinement
        .take_proxy_listener(Duration::from_secs(5))
        .unwrap()
        .expect("a listener for network proxy");
    let accepted = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut got = String::new();
        stream.read_to_string(&mut got).unwrap();
        got
    });
    let out = finish(child, Duration::from_secs(30));
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!("proxy=http://127.0.0.1:{port}\nproxied\n1\n"),
        "{}",
        out.stderr
    );
    assert_eq!(accepted.join().unwrap(), "through");
    assert!(
        host.accept().is_err(),
        "the host's listener saw a connection"
    );
    // Other settings hand over nothing.
    s.profile.network = Network::None;
    let mut command = Command::new("/bin/true");
    let confinement = confine(&mut command, &s.profile).unwrap();
    assert!(command.status().unwrap().success());
    assert!(
        confinement
            .take_proxy_listener(Duration::from_secs(1))
            .unwrap()
            .is_none()
    );
}

#[test]
fn host_processes_are_invisible_and_the_host_name_is_private() {
    let s = setup("/bin/sh");
    let out = sh(&s.profile, "ls /proc; echo; uname -n");
    assert!(out.status.success(), "{}", out.stderr);
    let (procs, host) = out.stdout.split_once("\n\n").unwrap();
    let pids: Vec<u32> = procs.lines().filter_map(|l| l.parse().ok()).collect();
    // init (1), the shell (2), ls (3): nothing of the host's hundreds.
    assert!(pids.len() <= 4, "{pids:?}");
    assert!(
        pids.contains(&1) && pids.iter().all(|&p| p < 10),
        "{pids:?}"
    );
    assert_eq!(host.trim(), "warden-sandbox");
}

#[test]
fn the_environment_is_built_from_scratch() {
    let mut s = setup("/usr/bin/env");
    let parent = [
        ("PATH", "/usr/bin:/bin:relative"),
        ("LANG", "C.UTF-8"),
        ("GITHUB_TOKEN", "ghp_parent_secret"),
        ("SSH_AUTH_SOCK", "/run/user/0/agent"),
        ("HOME", "/root"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let extra = BTreeMap::from([("SERVER_SETTING".to_owned(), "on".to_owned())]);
    s.profile.set_env(scrubbed_env(parent, &extra));

    let mut command = Command::new("/usr/bin/env");
    // Set on the command before confinement: must not survive it.
    command
        .env("LEAKED_BY_CALLER", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = confine(&mut command, &s.profile).unwrap();
    let child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    let out = finish(child, Duration::from_secs(30));
    let mut vars: Vec<&str> = out.stdout.lines().collect();
    vars.sort_unstable();
    let scratch = s.scratch.path().display();
    assert_eq!(
        vars,
        [
            format!("HOME={scratch}").as_str(),
            "LANG=C.UTF-8",
            "PATH=/usr/bin:/bin",
            "SERVER_SETTING=on",
            format!("TMPDIR={scratch}").as_str(),
        ]
    );
}

#[test]
fn a_minimal_dev_and_only_three_descriptors() {
    let s = setup("/bin/sh");
    // A descriptor Warden leaked without close-on-exec.
    let file = std::fs::File::open("/etc/hostname").unwrap();
    // SAFETY: dup2 onto an unused high number; closed below.
    let leaked = unsafe { libc::dup2(file.as_raw_fd(), 57) };
    assert_eq!(leaked, 57);
    let out = sh(
        &s.profile,
        "ls /dev | tr '\\n' ' '; echo; ls /proc/self/fd | tr '\\n' ' '; echo; \
         echo x > /dev/null && head -c 4 /dev/urandom | wc -c && echo shm > /dev/shm/f && cat /dev/shm/f",
    );
    // SAFETY: closing the descriptor dup2 created.
    unsafe { libc::close(57) };
    assert!(out.status.success(), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0].trim(),
        "fd full null random shm stderr stdin stdout urandom zero"
    );
    // ls itself holds one descriptor on the directory it lists.
    assert_eq!(lines[1].trim(), "0 1 2 3");
    assert_eq!(&lines[2..], ["4", "shm"]);
}

#[test]
fn a_double_forked_daemon_dies_with_the_server() {
    let mut s = setup("/bin/sh");
    let marker = unique_marker("daemon-exit");
    s.profile.env.insert(MARKER.to_owned(), marker.clone());
    let mut child = spawn(
        &s.profile,
        "/bin/sh",
        &[
            "-c",
            "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo ready; read line; exit 7",
        ],
        Stdio::piped(),
    );
    let rx = lines(child.stdout.take().unwrap());
    wait_for_line(&rx, "ready");
    wait_for_marked(&marker, 2);
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(7),
        "the server's exit code comes through"
    );
    let left = wait_until_gone(&marker, Duration::from_secs(5));
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[test]
fn killing_the_leader_or_signalling_the_group_takes_everything_down() {
    // SIGKILL to the process Warden holds (what tokio's Child::kill does).
    let mut s = setup("/bin/sh");
    let marker = unique_marker("kill-leader");
    s.profile.env.insert(MARKER.to_owned(), marker.clone());
    let script = "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo ready; exec sleep 600";
    let mut child = spawn(&s.profile, "/bin/sh", &["-c", script], Stdio::null());
    let rx = lines(child.stdout.take().unwrap());
    wait_for_line(&rx, "ready");
    wait_for_marked(&marker, 2);
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    let left = wait_until_gone(&marker, Duration::from_secs(5));
    assert!(left.is_empty(), "survivors after SIGKILL: {left:?}");

    // SIGTERM to the group (what ProcessGroup::stop does): the server's own handler runs,
    // its exit code comes back, and the daemon it left goes with the namespace.
    let marker = unique_marker("term-group");
    s.profile.env.insert(MARKER.to_owned(), marker.clone());
    let script = "trap 'exit 42' TERM; setsid sleep 600 </dev/null >/dev/null 2>&1 & \
                  sleep 600 & echo ready; wait";
    let mut child = spawn(&s.profile, "/bin/sh", &["-c", script], Stdio::null());
    let rx = lines(child.stdout.take().unwrap());
    wait_for_line(&rx, "ready");
    let pgid = child.id() as i32;
    // SAFETY: killpg has no memory effects.
    assert_eq!(unsafe { libc::killpg(pgid, libc::SIGTERM) }, 0);
    assert_eq!(child.wait().unwrap().code(), Some(42));
    let left = wait_until_gone(&marker, Duration::from_secs(5));
    assert!(left.is_empty(), "survivors after SIGTERM: {left:?}");

    // A server that dies of a signal: the waiter dies of the same one.
    let out = sh(&s.profile, "kill -TERM $$");
    assert_eq!(out.status.signal(), Some(libc::SIGTERM));
}

#[test]
fn nothing_survives_when_warden_is_sigkilled() {
    // `warden-sandbox-run` stands in for Warden: it confines a shell that double-forks a
    // daemon, and is then SIGKILLed without any chance to clean up.
    let marker = unique_marker("warden-killed");
    let script = "setsid sleep 600 </dev/null >/dev/null 2>&1 & exec sleep 600";
    let mut runner = Command::new(env!("CARGO_BIN_EXE_warden-sandbox-run"))
        .args([
            "--ready",
            "--env",
            &format!("{MARKER}={marker}"),
            "--",
            "/bin/sh",
            "-c",
            script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(runner.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    assert_eq!(first.trim(), "ready");
    wait_for_marked(&marker, 2);
    runner.kill().unwrap();
    assert_eq!(runner.wait().unwrap().signal(), Some(libc::SIGKILL));
    let left = wait_until_gone(&marker, Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "survivors after Warden's SIGKILL: {left:?}"
    );
}

/// Runs `python3 -c` with a syscall probe; returns its stdout.
fn python_probe(profile: &Profile, code: &str) -> Output {
    run(profile, "/usr/bin/python3", &["-c", code])
}

#[test]
fn seccomp_refuses_ptrace_io_uring_keyrings_and_new_namespaces() {
    require("/usr/bin/python3");
    let s = setup("/usr/bin/python3");
    let code = r#"
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, r, os.strerror(ctypes.get_errno()) if r < 0 else "ok")
buf = ctypes.create_string_buffer(256)
call("ptrace", 101, 0, 0, 0, 0)                 # PTRACE_TRACEME
call("process_vm_readv", 310, 1, 0, 0, 0, 0, 0)
call("io_uring_setup", 425, 1, buf)
call("keyctl", 250, 0, -3, 0)                    # KEYCTL_GET_KEYRING_ID
call("unshare", 272, 0x10000000)                 # CLONE_NEWUSER
call("mount", 165, 0, 0, 0, 0, 0)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    print("inet ok")
except OSError as e:
    print("inet", e.errno)
a, b = socket.socketpair()
print("unix ok")
"#;
    let out = python_probe(&s.profile, code);
    assert!(out.status.success(), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "ptrace -1 Operation not permitted",
            "process_vm_readv -1 Operation not permitted",
            "io_uring_setup -1 Operation not permitted",
            "keyctl -1 Operation not permitted",
            "unshare -1 Operation not permitted",
            "mount -1 Operation not permitted",
            "inet 13",
            "unix ok",
        ]
    );
}

#[test]
fn node_runs_under_the_default_profile() {
    require("/usr/bin/node");
    let node = std::fs::canonicalize("/usr/bin/node").unwrap();
    let node = node.to_str().unwrap().to_owned();
    let s = setup(&node);
    // A WebAssembly memory reserves ~10 GiB of address space (Node's fetch instantiates
    // one for its HTTP parser): the default limits must allow it. With no network, fetch
    // then fails on the socket, not on memory.
    let code = "const os = require('os');\
                new WebAssembly.Memory({ initial: 1 });\
                console.log(os.cpus().length > 0, process.getuid(), os.homedir() === process.env.HOME);\
                fetch('http://127.0.0.1:80/').then(() => console.log('reached'),\
                  e => console.log('fetch:', e.cause && e.cause.code));";
    let out = run(&s.profile, &node, &["-e", code]);
    assert!(out.status.success(), "{}", out.stderr);
    let uid = if is_root() {
        SANDBOX_UID
    } else {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() }
    };
    assert_eq!(out.stdout, format!("true {uid} true\nfetch: EACCES\n"));
}

#[test]
fn limits_are_applied() {
    let mut s = setup("/bin/sh");
    s.profile.limits.open_files = 64;
    s.profile.limits.processes = 16;
    s.profile.limits.cpu_seconds = Some(30);
    s.profile.limits.address_space = Some(1 << 31);
    s.profile.limits.memory = 1 << 30;
    // Without a cgroup, memory and processes are rlimits.
    s.profile.limits.cgroup = false;
    let out = sh(
        &s.profile,
        "ulimit -n; ulimit -p; ulimit -t; ulimit -v; ulimit -c; ulimit -d",
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        ["64", "16", "30", "2097152", "0", "1048576"],
        "{}",
        out.stderr
    );

    // 40 forks under a limit of 16 processes, which counts the sandbox's own waiter and
    // init too (the shell gives up on its first failed fork, so Python counts).
    require("/usr/bin/python3");
    let code = r#"
import os, time
started = refused = 0
for _ in range(40):
    try:
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
        started += 1
    except BlockingIOError:
        refused += 1
print(started, refused)
"#;
    // The same with the cgroup the machine may offer (pids.max then counts everything).
    for cgroup in [false, true] {
        s.profile.limits.cgroup = cgroup;
        let out = run(&s.profile, "/usr/bin/python3", &["-c", code]);
        assert!(out.status.success(), "{}", out.stderr);
        let counts: Vec<u32> = out
            .stdout
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        assert!(
            counts[0] < 16 && counts[1] > 20,
            "cgroup {cgroup}: started, refused: {counts:?}"
        );
    }
}

#[test]
fn a_limit_above_wardens_own_is_refused() {
    let mut s = setup("/bin/sh");
    s.profile.limits.open_files = u64::MAX - 1;
    let mut command = Command::new("/bin/sh");
    let err = confine(&mut command, &s.profile).unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::LimitAboveHard {
                limit: "RLIMIT_NOFILE",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn profile_errors_name_what_is_wrong() {
    let s = setup("/bin/sh");

    let mut profile = s.profile.clone();
    profile.read.push(PathBuf::from("/nonexistent/warden/data"));
    let err = confine(&mut Command::new("/bin/sh"), &profile).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/warden/data"),
        "{err}"
    );

    let mut profile = s.profile.clone();
    profile.write.push(PathBuf::from("relative/dir"));
    let err = confine(&mut Command::new("/bin/sh"), &profile).unwrap_err();
    assert!(err.to_string().contains("must be absolute"), "{err}");

    let outside = open_dir();
    let program = outside.path().join("server");
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = confine(&mut Command::new(&program), &s.profile).unwrap_err();
    assert!(
        err.to_string().contains("not inside any exec path"),
        "{err}"
    );

    let mut command = Command::new("/bin/sh");
    command.current_dir(outside.path());
    let err = confine(&mut command, &s.profile).unwrap_err();
    assert!(err.to_string().contains("working directory"), "{err}");
}

#[test]
fn an_exec_failure_is_reported_not_hung() {
    let mut s = setup("/bin/sh");
    // Inside an exec grant but not executable.
    let dir = open_dir();
    let program = dir.path().join("not-executable");
    std::fs::write(&program, "data").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o644)).unwrap();
    s.profile.read.push(dir.path().to_path_buf());
    s.profile.exec.push(dir.path().to_path_buf());
    let mut command = Command::new(&program);
    let confinement = confine(&mut command, &s.profile).unwrap();
    let started = Instant::now();
    let err = command.spawn().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    let err = confinement.spawn_error(err);
    assert!(matches!(err, SandboxError::Spawn { .. }), "{err}");
}

#[test]
fn works_through_tokio_and_outlives_the_spawning_thread() {
    let s = setup("/bin/cat");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let profile = s.profile.clone();
        // Spawned from a thread that ends right after: the sandbox is tied to the process's
        // life, not the thread's (PR_SET_PDEATHSIG on the waiter would have killed it).
        let handle = tokio::runtime::Handle::current();
        let (mut child, confinement) = std::thread::spawn(move || {
            let _runtime = handle.enter();
            let mut command = Command::new("/bin/cat");
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let confinement = confine(&mut command, &profile).unwrap();
            let mut command = tokio::process::Command::from(command);
            command.kill_on_drop(true);
            let child = command.spawn().map_err(|e| confinement.spawn_error(e));
            (child.unwrap(), confinement)
        })
        .join()
        .unwrap();
        drop(confinement);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the server died with its thread"
        );

        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1}\n")
            .await
            .unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).await.unwrap();
        assert_eq!(line, "{\"jsonrpc\":\"2.0\",\"id\":1}\n");
        drop(stdin);
        let status = child.wait().await.unwrap();
        assert!(status.success(), "{status:?}");
    });
}

#[test]
fn a_file_named_for_the_scratch_is_copied_in_and_runs_from_there() {
    let mut s = setup("/bin/sh");
    let source = std::fs::canonicalize("/bin/sh").unwrap();
    s.profile
        .scratch_files
        .push(("copied-sh".to_owned(), source));
    let copy = s.scratch.path().join("copied-sh");
    let copy = copy.to_str().unwrap();
    let out = run(
        &s.profile,
        copy,
        &["-c", "echo \"$0\"; ls -l \"$0\" | cut -c1-10"],
    );
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout, format!("{copy}\n-rwx------\n"));
    // Only inside the sandbox.
    assert!(!Path::new(copy).exists());

    // A path inside the scratch cannot be granted on its own.
    let mut profile = s.profile.clone();
    profile.read.push(s.scratch.path().join("sub"));
    std::fs::create_dir(s.scratch.path().join("sub")).unwrap();
    let err = confine(&mut Command::new("/bin/sh"), &profile).unwrap_err();
    assert!(
        err.to_string().contains("inside the scratch directory"),
        "{err}"
    );
}
