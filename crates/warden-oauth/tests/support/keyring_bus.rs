//! A real Secret Service for tests: a private D-Bus session bus (`dbus-daemon` with a
//! configuration of our own: no service activation, so nothing else starts on it) and, on
//! it, `gnome-keyring-daemon` with a fresh login keyring unlocked by a password given on
//! standard input. Everything lives in a temporary directory and is killed on drop; the
//! user's own session bus and keyrings are never touched.
//!
//! Shared by crates/warden-oauth/tests/secret_service.rs and crates/warden/tests/oauth.rs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the bus and the keyring daemon may take to come up.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A private session bus, with or without a Secret Service on it.
pub struct PrivateBus {
    dir: tempfile::TempDir,
    bus: Child,
    keyring: Option<Child>,
    /// The bus address, for `DBUS_SESSION_BUS_ADDRESS`.
    pub address: String,
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        if let Some(keyring) = self.keyring.as_mut() {
            let _ = keyring.kill();
            let _ = keyring.wait();
        }
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

impl PrivateBus {
    /// A session bus with nothing on it.
    pub fn bare() -> PrivateBus {
        let dir = tempfile::Builder::new()
            .prefix("warden-bus-")
            .tempdir_in("/tmp")
            .unwrap();
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n \
                 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
                 <busconfig>\n  <type>session</type>\n  <listen>unix:path={}</listen>\n  \
                 <auth>EXTERNAL</auth>\n  <policy context=\"default\">\n    \
                 <allow send_destination=\"*\" eavesdrop=\"true\"/>\n    \
                 <allow eavesdrop=\"true\"/>\n    <allow own=\"*\"/>\n  </policy>\n</busconfig>\n",
                dir.path().join("bus").display()
            ),
        )
        .unwrap();
        let mut bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon (Debian package dbus-daemon) must be installed");
        let mut address = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let address = address.trim().to_owned();
        assert!(
            address.starts_with("unix:"),
            "dbus-daemon printed {address:?}"
        );
        PrivateBus {
            dir,
            bus,
            keyring: None,
            address,
        }
    }

    /// A session bus with `gnome-keyring-daemon`'s Secret Service on it, its login keyring
    /// created and unlocked.
    pub fn with_keyring() -> PrivateBus {
        let mut bus = PrivateBus::bare();
        let home = bus.dir.path().join("home");
        let runtime = bus.dir.path().join("run");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&runtime).unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon (Debian package gnome-keyring) must be installed");
        {
            let mut stdin = keyring.stdin.take().unwrap();
            stdin.write_all(b"keyring-test-password").unwrap();
        }
        bus.keyring = Some(keyring);
        let deadline = Instant::now() + START_LIMIT;
        while !bus.has_owner("org.freedesktop.secrets") {
            assert!(
                Instant::now() < deadline,
                "gnome-keyring-daemon did not take org.freedesktop.secrets within {START_LIMIT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        bus
    }

    /// Whether `name` is owned on the bus (asked with `dbus-send`).
    fn has_owner(&self, name: &str) -> bool {
        let output = Command::new("dbus-send")
            .arg(format!("--bus={}", self.address))
            .args([
                "--dest=org.freedesktop.DBus",
                "--print-reply",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner",
            ])
            .arg(format!("string:{name}"))
            .stdin(Stdio::null())
            .output()
            .expect("dbus-send (Debian package dbus-bin) must be installed");
        String::from_utf8_lossy(&output.stdout).contains("boolean true")
    }

    /// The temporary directory (the keyring's files are under `home/data/keyrings`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The keyring files gnome-keyring wrote.
    pub fn keyring_files(&self) -> PathBuf {
        self.dir.path().join("home/data/keyrings")
    }
}

/// A Unix socket that accepts connections and never says a word: a session bus that hangs.
pub struct SilentBus {
    _dir: tempfile::TempDir,
    _listener: std::os::unix::net::UnixListener,
    /// Its address, for `DBUS_SESSION_BUS_ADDRESS`.
    pub address: String,
}

impl SilentBus {
    /// A listening socket nobody reads from.
    pub fn start() -> SilentBus {
        let dir = tempfile::Builder::new()
            .prefix("warden-silent-bus-")
            .tempdir_in("/tmp")
            .unwrap();
        let path = dir.path().join("bus");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        SilentBus {
            _dir: dir,
            _listener: listener,
            address: format!("unix:path={}", path.display()),
        }
    }
}
