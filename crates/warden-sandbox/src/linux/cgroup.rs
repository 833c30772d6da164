//! Memory and process limits for one sandbox, through a cgroup leaf of its own.
//!
//! An rlimit binds one process; a server that forks multiplies it. A cgroup binds the
//! server and everything it starts (threads included) together, and counts what rlimits
//! cannot: page cache, and the server's scratch tmpfs, which is memory.
//! So each confined server gets a leaf `warden-PID-RANDOM` under Warden's own cgroup, with
//!
//! - `memory.max` (cgroup v2) or `memory.limit_in_bytes` (v1): the server is OOM-killed when
//!   it cannot stay under it (v2 also sets `memory.oom.group`, so all of the server goes at
//!   once, and `memory.swap.max = 0`, so the limit is not met by swapping);
//! - `pids.max`: `fork` and `clone` fail with `EAGAIN` beyond it (the server's processes and
//!   threads; the sandbox's two helpers are outside the leaf).
//!
//! The server process moves itself into the leaf (writing `0` to `tasks` on v1, which
//! moves the calling thread without waiting for an RCU grace period, or to `cgroup.procs`
//! on v2; the file is opened here, in the parent) before it does anything else, so all it
//! starts is born inside. The sandbox's waiter and init stay outside: the limits are the
//! server's, and init survives an OOM kill to report it.
//!
//! Where a leaf can be made depends on the machine. Each controller is looked up on its own:
//! cgroup v2 when Warden's cgroup lists it in `cgroup.controllers` and it is (or can be)
//! enabled in `cgroup.subtree_control` (the v2 rule "no internal processes" means that works
//! in the root cgroup or in a delegated subtree whose processes live in a leaf), else a
//! cgroup v1 hierarchy of that controller where Warden may create directories (root on a
//! machine with a v1 or hybrid layout). A controller found nowhere is replaced by an rlimit
//! (`RLIMIT_DATA` per process for memory, `RLIMIT_NPROC` for processes); see
//! `super::rlimits`.
//!
//! The leaf is removed when the [`Cgroup`] is dropped (once it is empty). Leaves left by a
//! Warden that died are removed by the next Warden that looks at the same parent.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Prefix of every leaf Warden creates.
const LEAF_PREFIX: &str = "warden-";

/// How long dropping a [`Cgroup`] waits for its last processes to finish exiting.
const REMOVE_WAIT: Duration = Duration::from_millis(100);

/// Largest cgroup control file read (`memory.events` and friends are a few lines).
const MAX_CONTROL_FILE: usize = 64 * 1024;

/// Where leaves for one controller go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    /// The directory of Warden's own cgroup in the hierarchy that has the controller.
    parent: PathBuf,
    /// Whether that hierarchy is cgroup v2.
    v2: bool,
}

/// Where each controller can be used, found once per process.
#[derive(Debug, Default)]
struct Places {
    memory: Option<Place>,
    pids: Option<Place>,
    /// Why a controller is not used, for the debug log.
    notes: Vec<String>,
}

/// One directory created for one sandbox (one per hierarchy used).
#[derive(Debug)]
struct Leaf {
    dir: PathBuf,
    v2: bool,
    memory: bool,
    pids: bool,
    procs: OwnedFd,
}

/// What the kernel counted in a sandbox's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Events {
    /// Processes the OOM killer killed for the memory limit.
    pub oom_kills: u64,
    /// Forks refused for the process limit.
    pub pids_refused: u64,
}

/// A sandbox's cgroup leaf (or leaves, one per v1 hierarchy).
#[derive(Debug)]
pub(crate) struct Cgroup {
    leaves: Vec<Leaf>,
}

impl Cgroup {
    /// Creates the leaf (or leaves) with these limits. `None` when no controller is usable
    /// here, or creating failed (logged at debug: the rlimits stand in).
    pub(crate) fn create(memory: u64, processes: u64) -> Option<Self> {
        let places = places();
        if places.memory.is_none() && places.pids.is_none() {
            return None;
        }
        let name = leaf_name();
        for place in [&places.memory, &places.pids].into_iter().flatten() {
            clean_orphans(&place.parent);
        }
        let mut leaves: Vec<Leaf> = Vec::new();
        let wanted = [
            (places.memory.as_ref(), true, false),
            (places.pids.as_ref(), false, true),
        ];
        for (place, memory_here, pids_here) in wanted {
            let Some(place) = place else { continue };
            if let Some(leaf) = leaves
                .iter_mut()
                .find(|l| l.dir.parent() == Some(&place.parent))
            {
                leaf.memory |= memory_here;
                leaf.pids |= pids_here;
                continue;
            }
            let dir = place.parent.join(&name);
            // Registered before it exists: another thread's `clean_orphans` must never see
            // this leaf unregistered and remove it before the server joins it (the join
            // then fails with ENODEV).
            register(&dir, true);
            if let Err(error) = fs::create_dir(&dir) {
                tracing::debug!(dir = %dir.display(), %error, "cannot create a cgroup leaf");
                register(&dir, false);
                continue;
            }
            // v1: `tasks` (see `super::join_cgroup` for why); v2: `cgroup.procs`.
            let file = if place.v2 { "cgroup.procs" } else { "tasks" };
            let procs = match open_write(&dir.join(file)) {
                Ok(fd) => fd,
                Err(error) => {
                    tracing::debug!(dir = %dir.display(), %error, "cannot open {file}");
                    let _ = fs::remove_dir(&dir);
                    register(&dir, false);
                    continue;
                }
            };
            leaves.push(Leaf {
                dir,
                v2: place.v2,
                memory: memory_here,
                pids: pids_here,
                procs,
            });
        }
        let mut cgroup = Self { leaves };
        // A limit that cannot be written is a controller not used (and so an rlimit).
        for leaf in &mut cgroup.leaves {
            if leaf.memory && !set_memory(leaf, memory) {
                leaf.memory = false;
            }
            if leaf.pids && !write_value(&leaf.dir.join("pids.max"), &processes.to_string()) {
                leaf.pids = false;
            }
        }
        if cgroup.leaves.iter().all(|l| !l.memory && !l.pids) {
            return None;
        }
        Some(cgroup)
    }

    /// Whether the memory limit is enforced by this cgroup.
    pub(crate) fn has_memory(&self) -> bool {
        self.leaves.iter().any(|l| l.memory)
    }

    /// Whether the process limit is enforced by this cgroup.
    pub(crate) fn has_pids(&self) -> bool {
        self.leaves.iter().any(|l| l.pids)
    }

    /// The descriptors (`tasks` on v1, `cgroup.procs` on v2) the server writes itself into.
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        self.leaves.iter().map(|l| l.procs.as_raw_fd()).collect()
    }

    /// What the kernel counted so far.
    pub(crate) fn events(&self) -> Events {
        let mut events = Events::default();
        for leaf in &self.leaves {
            if leaf.memory {
                let file = if leaf.v2 {
                    "memory.events"
                } else {
                    "memory.oom_control"
                };
                events.oom_kills += counter(&leaf.dir.join(file), "oom_kill");
            }
            if leaf.pids {
                events.pids_refused += counter(&leaf.dir.join("pids.events"), "max");
            }
        }
        events
    }

    /// The leaf directories (for tests and logs).
    #[cfg(test)]
    pub(crate) fn dirs(&self) -> Vec<PathBuf> {
        self.leaves.iter().map(|l| l.dir.clone()).collect()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for leaf in &self.leaves {
            remove_leaf(&leaf.dir);
            register(&leaf.dir, false);
        }
    }
}

/// The leaves of live [`Cgroup`]s of this process: any other leaf with this process's pid
/// in its name was left behind (its handle dropped while the sandbox still ran).
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn live<T>(f: impl FnOnce(&mut Vec<PathBuf>) -> T) -> T {
    let mut set = LIVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut set)
}

fn register(dir: &Path, alive: bool) {
    live(|set| {
        if alive {
            set.push(dir.to_path_buf());
        } else {
            set.retain(|d| d != dir);
        }
    });
}

/// Removes this process's own leaves that no live handle holds, once they are empty.
fn clean_orphans(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let own = std::process::id();
    for entry in entries.flatten().take(4096) {
        let name = entry.file_name();
        if name.to_str().and_then(owner_pid) != Some(own) {
            continue;
        }
        let dir = entry.path();
        if !live(|set| set.contains(&dir)) {
            // Succeeds only once the sandbox is empty.
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// Removes an empty leaf, waiting briefly for processes that are still exiting; a leaf
/// with live processes is left for the next Warden's clean-up.
fn remove_leaf(dir: &Path) {
    let deadline = std::time::Instant::now() + REMOVE_WAIT;
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return,
            Err(error) => {
                let busy = error.raw_os_error() == Some(libc::EBUSY);
                if !busy || std::time::Instant::now() >= deadline || !procs_empty(dir) {
                    tracing::debug!(dir = %dir.display(), %error, "cgroup leaf left behind");
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

fn procs_empty(dir: &Path) -> bool {
    read_small(&dir.join("cgroup.procs")).is_ok_and(|text| text.trim().is_empty())
}

/// Writes the memory limit into a leaf; `false` when the controller refused it.
fn set_memory(leaf: &Leaf, bytes: u64) -> bool {
    let value = bytes.to_string();
    if leaf.v2 {
        if !write_value(&leaf.dir.join("memory.max"), &value) {
            return false;
        }
        // Best effort: absent without swap accounting, and older kernels lack oom.group.
        let _ = write_value(&leaf.dir.join("memory.swap.max"), "0");
        let _ = write_value(&leaf.dir.join("memory.oom.group"), "1");
        true
    } else {
        if !write_value(&leaf.dir.join("memory.limit_in_bytes"), &value) {
            return false;
        }
        // Only present with swap accounting; memory plus swap then has the same bound.
        let _ = write_value(&leaf.dir.join("memory.memsw.limit_in_bytes"), &value);
        true
    }
}

fn write_value(path: &Path, value: &str) -> bool {
    match fs::write(path, value) {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(file = %path.display(), %error, "cannot write a cgroup limit");
            false
        }
    }
}

fn open_write(path: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a cgroup path"))?;
    // SAFETY: c_path is NUL-terminated and outlives the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads a small control file whole.
fn read_small(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    fs::File::open(path)?
        .take(MAX_CONTROL_FILE as u64)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The value of `key N` in a flat-keyed control file (`memory.events`, `pids.events`), 0
/// when absent.
fn counter(path: &Path, key: &str) -> u64 {
    read_small(path)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let (name, value) = line.split_once(' ')?;
                (name == key).then(|| value.trim().parse().ok())?
            })
        })
        .unwrap_or(0)
}

/// A fresh leaf name: `warden-PID-RANDOM`.
fn leaf_name() -> String {
    format!(
        "{LEAF_PREFIX}{}-{:012x}",
        std::process::id(),
        crate::scratch::random_u48()
    )
}

/// Where each controller can be used, looked up once (Warden's cgroup does not move).
fn places() -> &'static Places {
    static PLACES: OnceLock<Places> = OnceLock::new();
    PLACES.get_or_init(|| {
        let places = discover();
        for note in &places.notes {
            tracing::debug!("{note}");
        }
        for place in [&places.memory, &places.pids].into_iter().flatten() {
            clean_stale(&place.parent);
        }
        places
    })
}

fn discover() -> Places {
    let mut places = Places::default();
    let (Ok(own), Ok(mounts)) = (
        read_small(Path::new("/proc/self/cgroup")),
        read_small(Path::new("/proc/self/mountinfo")),
    ) else {
        places
            .notes
            .push("cgroups: /proc/self/cgroup or mountinfo unreadable".into());
        return places;
    };
    let memberships = parse_memberships(&own);
    let mounts = parse_mounts(&mounts);
    for controller in ["memory", "pids"] {
        let place = v2_place(controller, &memberships, &mounts, &mut places.notes)
            .or_else(|| v1_place(controller, &memberships, &mounts, &mut places.notes));
        match controller {
            "memory" => places.memory = place,
            _ => places.pids = place,
        }
    }
    places
}

/// One line of `/proc/self/cgroup`: the hierarchy's controllers (empty for v2) and path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    v2: bool,
    controllers: Vec<String>,
    path: String,
}

fn parse_memberships(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?.to_owned();
            Some(Membership {
                v2: id == "0" && controllers.is_empty(),
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path,
            })
        })
        .collect()
}

/// One cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// The mount's root inside the hierarchy.
    root: String,
    point: PathBuf,
    v2: bool,
    /// Super options (the controllers, for v1).
    options: Vec<String>,
}

fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split(' ').collect();
            let mut rest = after.split(' ');
            let fstype = rest.next()?;
            let _source = rest.next()?;
            let options = rest.next().unwrap_or("");
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                root: unescape(fields.get(3)?),
                point: PathBuf::from(OsString::from_vec(unescape(fields.get(4)?).into_bytes())),
                v2,
                options: options.split(',').map(str::to_owned).collect(),
            })
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(value).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of Warden's cgroup at `path` under a mount of that hierarchy.
fn own_dir(mount: &Mount, path: &str) -> Option<PathBuf> {
    let relative = if mount.root == "/" {
        path
    } else {
        path.strip_prefix(mount.root.as_str())?
    };
    let relative = relative.trim_start_matches('/');
    if relative.split('/').any(|part| part == "..") {
        return None;
    }
    Some(if relative.is_empty() {
        mount.point.clone()
    } else {
        mount.point.join(relative)
    })
}

fn v2_place(
    controller: &str,
    memberships: &[Membership],
    mounts: &[Mount],
    notes: &mut Vec<String>,
) -> Option<Place> {
    let membership = memberships.iter().find(|m| m.v2)?;
    let dir = mounts
        .iter()
        .filter(|m| m.v2)
        .find_map(|m| own_dir(m, &membership.path))?;
    let available = read_small(&dir.join("cgroup.controllers")).unwrap_or_default();
    if !available.split_whitespace().any(|c| c == controller) {
        notes.push(format!(
            "cgroups: v2 {} does not offer `{controller}`",
            dir.display()
        ));
        return None;
    }
    let enabled = read_small(&dir.join("cgroup.subtree_control")).unwrap_or_default();
    if !enabled.split_whitespace().any(|c| c == controller)
        && let Err(error) = fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}"))
    {
        notes.push(format!(
            "cgroups: cannot enable `{controller}` for children of v2 {}: {error}",
            dir.display()
        ));
        return None;
    }
    Some(Place {
        parent: dir,
        v2: true,
    })
}

fn v1_place(
    controller: &str,
    memberships: &[Membership],
    mounts: &[Mount],
    notes: &mut Vec<String>,
) -> Option<Place> {
    let membership = memberships
        .iter()
        .find(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))?;
    let dir = mounts
        .iter()
        .filter(|m| !m.v2 && m.options.iter().any(|o| o == controller))
        .find_map(|m| own_dir(m, &membership.path))?;
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: c_dir is NUL-terminated and outlives the call.
    if unsafe { libc::access(c_dir.as_ptr(), libc::W_OK) } != 0 {
        notes.push(format!(
            "cgroups: v1 {} is not writable for `{controller}`",
            dir.display()
        ));
        return None;
    }
    Some(Place {
        parent: dir,
        v2: false,
    })
}

/// Removes the empty leaves of Warden processes that are gone.
fn clean_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten().take(4096) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        if crate::scratch::process_gone(pid) {
            // Succeeds only when empty, which a leaf of a dead Warden is once its
            // sandboxes are gone (they die with it).
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// The Warden pid in a leaf name `warden-PID-RANDOM`.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(LEAF_PREFIX)?;
    let (pid, random) = rest.split_once('-')?;
    if random.len() != 12 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memberships_and_mounts_of_a_hybrid_machine() {
        let own = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n0::/\n";
        let memberships = parse_memberships(own);
        assert_eq!(memberships.len(), 4);
        assert!(memberships[3].v2);
        assert_eq!(memberships[2].controllers, ["memory"]);
        assert_eq!(memberships[2].path, "/process_api/abc");

        let mounts = "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
                      35 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                      36 25 0:32 /inner /srv/my\\040cg rw - cgroup cgroup rw,pids\n\
                      40 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
        let mounts = parse_mounts(mounts);
        assert_eq!(mounts.len(), 3);
        assert!(!mounts[0].v2 && mounts[0].options.contains(&"memory".to_owned()));
        assert!(mounts[1].v2);
        assert_eq!(mounts[2].point, PathBuf::from("/srv/my cg"));
        assert_eq!(
            own_dir(&mounts[0], "/process_api/abc"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"))
        );
        assert_eq!(
            own_dir(&mounts[2], "/inner/x"),
            Some(PathBuf::from("/srv/my cg/x"))
        );
        assert_eq!(own_dir(&mounts[2], "/other"), None);
        assert_eq!(
            own_dir(&mounts[1], "/"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn leaf_names_carry_the_owner_pid() {
        let name = leaf_name();
        assert_eq!(owner_pid(&name), Some(std::process::id()));
        assert_eq!(owner_pid("warden-12-xyz"), None);
        assert_eq!(owner_pid("other-12-0123456789ab"), None);
    }

    #[test]
    fn counters_are_read_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.events");
        fs::write(&file, "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n").unwrap();
        assert_eq!(counter(&file, "oom_kill"), 1);
        assert_eq!(counter(&file, "max"), 12);
        assert_eq!(counter(&file, "absent"), 0);
    }

    /// On a machine with a usable memory or pids controller (root on this hybrid layout),
    /// the leaf exists with its limits while the handle lives, and is gone after.
    #[test]
    fn a_leaf_holds_the_limits_and_is_removed_on_drop() {
        let Some(cgroup) = Cgroup::create(64 << 20, 32) else {
            // No controller: `super::rlimits` covers this machine; the tests in
            // tests/confine.rs check that the limits hold either way.
            assert!(places().memory.is_none() && places().pids.is_none());
            return;
        };
        let dirs = cgroup.dirs();
        for leaf in &cgroup.leaves {
            if leaf.pids {
                assert_eq!(read_small(&leaf.dir.join("pids.max")).unwrap().trim(), "32");
            }
            if leaf.memory {
                let file = if leaf.v2 {
                    "memory.max"
                } else {
                    "memory.limit_in_bytes"
                };
                let value: u64 = read_small(&leaf.dir.join(file))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                assert_eq!(value, 64 << 20);
            }
        }
        assert_eq!(cgroup.events(), Events::default());
        drop(cgroup);
        for dir in dirs {
            assert!(!dir.exists(), "{} left behind", dir.display());
        }
    }
}
