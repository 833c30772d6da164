//! Files that tests read afterwards to see what reached the server, named by environment
//! variables. Each is optional: when its variable is unset nothing is written.

use std::fs::OpenOptions;
use std::io::{self, Write};

use serde_json::Value;

/// Every received `tools/call` line is appended here verbatim (proves whether a call got
/// through the host).
pub(crate) const CALL_LOG_ENV: &str = "WARDEN_TEST_CALL_LOG";
/// Every received `notifications/cancelled` appends `cancelled <requestId as JSON>`.
pub(crate) const CANCEL_LOG_ENV: &str = "WARDEN_TEST_CANCEL_LOG";
/// `grandchild` mode writes its own pid and the grandchild's, one per line.
pub(crate) const PID_FILE_ENV: &str = "WARDEN_TEST_PID_FILE";
/// Every start appends the server's pid here (tests count the servers a command started).
pub(crate) const START_LOG_ENV: &str = "WARDEN_TEST_START_LOG";

/// Records that this server started (its pid).
pub(crate) fn record_start() -> io::Result<()> {
    append(START_LOG_ENV, std::process::id().to_string().as_bytes())
}

/// The file `serial-start` mode locks while it starts.
pub(crate) const START_LOCK_ENV: &str = "WARDEN_TEST_START_LOCK";

/// `serial-start`: holds an exclusive lock on `$WARDEN_TEST_START_LOCK` for `delay` (waiting
/// for it as long as it takes), then lets it go.
pub(crate) fn serial_start(delay: std::time::Duration) -> io::Result<()> {
    let Some(path) = std::env::var_os(START_LOCK_ENV) else {
        return Err(io::Error::other(format!(
            "serial-start needs {START_LOCK_ENV}"
        )));
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{START_LOCK_ENV}={}: {e}", path.display()),
            )
        })?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: `flock` on a descriptor this function owns and keeps open throughout.
    if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    std::thread::sleep(delay);
    // SAFETY: as above; closing the file would release the lock too.
    if unsafe { libc::flock(fd, libc::LOCK_UN) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn append(env: &str, bytes: &[u8]) -> io::Result<()> {
    let Some(path) = std::env::var_os(env) else {
        return Ok(());
    };
    let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
    // One write per record, so concurrent readers never see half a line.
    let mut record = Vec::with_capacity(bytes.len() + 1);
    record.extend_from_slice(bytes);
    record.push(b'\n');
    file.write_all(&record)
        .map_err(|e| io::Error::new(e.kind(), format!("{env}={}: {e}", path.display())))
}

/// Records one raw `tools/call` line.
pub(crate) fn record_call(raw_line: &[u8]) -> io::Result<()> {
    append(CALL_LOG_ENV, raw_line)
}

/// Records one `notifications/cancelled`, given its params.
pub(crate) fn record_cancel(params: &Value) -> io::Result<()> {
    let id = params.get("requestId").unwrap_or(&Value::Null);
    append(CANCEL_LOG_ENV, format!("cancelled {id}").as_bytes())
}

/// Records process ids, one per line.
pub(crate) fn record_pids(pids: &[u32]) -> io::Result<()> {
    let text: Vec<String> = pids.iter().map(u32::to_string).collect();
    append(PID_FILE_ENV, text.join("\n").as_bytes())
}

/// With `WARDEN_TEST_PROBE_OUT` set, the server tries at start what a confined server must
/// not be able to do, and appends one line per attempt to that file (the test reads it from
/// outside):
///
/// - `read: ok <contents>` / `read: denied <error>` for the file `WARDEN_TEST_PROBE_READ`;
/// - `env: set <value>` / `env: unset` for the variable named by `WARDEN_TEST_PROBE_ENV`;
/// - `connect: ok` / `connect: denied <error>` for the TCP address `WARDEN_TEST_PROBE_CONNECT`.
pub(crate) fn probe() -> io::Result<()> {
    const OUT: &str = "WARDEN_TEST_PROBE_OUT";
    if std::env::var_os(OUT).is_none() {
        return Ok(());
    }
    if let Some(path) = std::env::var_os("WARDEN_TEST_PROBE_READ") {
        let line = match std::fs::read_to_string(&path) {
            Ok(text) => format!("read: ok {}", text.trim()),
            Err(e) => format!("read: denied {e}"),
        };
        append(OUT, line.as_bytes())?;
    }
    if let Ok(name) = std::env::var("WARDEN_TEST_PROBE_ENV") {
        let line = match std::env::var(&name) {
            Ok(value) => format!("env: set {value}"),
            Err(_) => "env: unset".to_owned(),
        };
        append(OUT, line.as_bytes())?;
    }
    if let Ok(address) = std::env::var("WARDEN_TEST_PROBE_CONNECT") {
        let timeout = std::time::Duration::from_secs(2);
        let line = match address
            .parse()
            .map_err(io::Error::other)
            .and_then(|addr| std::net::TcpStream::connect_timeout(&addr, timeout))
        {
            Ok(_) => "connect: ok".to_owned(),
            Err(e) => format!("connect: denied {e}"),
        };
        append(OUT, line.as_bytes())?;
    }
    Ok(())
}
