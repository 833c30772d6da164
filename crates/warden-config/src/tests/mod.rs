//! Tests that go through the public entry points with real files in temporary directories.

mod agent;
mod discovery;
mod formats;
mod policy;
mod project;
mod serve_auth;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Environment;

/// A fake machine inside a temporary directory:
/// `<tmp>/home` is HOME, the working directory is `<tmp>/home/proj/sub`.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    env: Environment,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Canonical, so paths compare equal to what the code builds from them.
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let cwd = home.join("proj").join("sub");
        std::fs::create_dir_all(&cwd).unwrap();
        let env = Environment {
            cwd,
            home: Some(home.clone()),
            config_home: home.join(".config"),
            state_home: home.join(".local/state"),
            vars: BTreeMap::from([
                ("API_TOKEN".to_owned(), "tok123".to_owned()),
                ("REGION".to_owned(), "eu".to_owned()),
            ]),
        };
        Self {
            _dir: dir,
            root,
            env,
        }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn project(&self) -> PathBuf {
        self.home().join("proj")
    }

    /// Writes `text` at `path` (absolute), creating directories.
    fn write(&self, path: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        path.to_owned()
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
