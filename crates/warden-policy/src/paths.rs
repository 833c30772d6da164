//! Paths for `under` constraints: lexical normalisation here, anything that needs the file
//! system (symlinks) behind the [`PathResolver`] trait that the caller injects.

use std::borrow::Cow;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Turns an absolute, lexically normal path into the path to compare with a rule's root:
/// the place to resolve symlinks. The policy calls it on every root when it is compiled and
/// on every argument path an `under` constraint looks at; it is the only way the policy
/// learns anything about the file system.
///
/// Return `None` when the path cannot be resolved: the constraint then counts as unknown
/// (an allow rule does not apply; a deny or ask rule does).
pub trait PathResolver: Send + Sync + fmt::Debug {
    /// The path to compare for `path` (absolute, without `.` or `..`).
    fn resolve<'p>(&self, path: &'p Path) -> Option<Cow<'p, Path>>;
}

/// Compares paths as written, after lexical normalisation only. Symlinks are not followed,
/// so `/allowed/link/secret` counts as under `/allowed` even when `link` points elsewhere;
/// use a resolver that canonicalises where that matters.
#[derive(Debug, Clone, Copy, Default)]
pub struct LexicalPaths;

impl PathResolver for LexicalPaths {
    fn resolve<'p>(&self, path: &'p Path) -> Option<Cow<'p, Path>> {
        Some(Cow::Borrowed(path))
    }
}

/// Removes `.` and `..` from an absolute path without touching the file system. `None` for
/// a relative path (its base is not known here) and for a `..` that would climb above `/`.
pub fn normalize_lexically(path: &Path) -> Option<Cow<'_, Path>> {
    if !path.has_root() {
        return None;
    }
    // `components` already drops `.` and repeated separators; only `..` needs work.
    if !path.components().any(|c| c == Component::ParentDir) {
        return Some(Cow::Borrowed(path));
    }
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || !out.has_root() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(Cow::Owned(out))
}

/// True when `path` is `root` or inside it, component by component (`/home/me2` is not
/// under `/home/me`).
pub(crate) fn is_under(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(p: &str) -> Option<String> {
        normalize_lexically(Path::new(p)).map(|c| c.to_string_lossy().into_owned())
    }

    #[test]
    fn lexical_normalisation() {
        assert_eq!(norm("/a/b/../c"), Some("/a/c".into()));
        assert_eq!(norm("/a/./b//c/"), Some("/a/./b//c/".into())); // borrowed: compares equal
        assert_eq!(norm("/a/.."), Some("/".into()));
        assert_eq!(norm("/.."), None);
        assert_eq!(norm("/a/../../etc"), None);
        assert_eq!(norm("a/b"), None);
        assert_eq!(norm("../x"), None);
    }

    #[test]
    fn under_is_by_component() {
        assert!(is_under(Path::new("/home/me/x"), Path::new("/home/me")));
        assert!(is_under(Path::new("/home/me"), Path::new("/home/me")));
        assert!(is_under(Path::new("/home/me/./x"), Path::new("/home/me")));
        assert!(!is_under(Path::new("/home/me2/x"), Path::new("/home/me")));
        assert!(!is_under(Path::new("/home"), Path::new("/home/me")));
    }
}
