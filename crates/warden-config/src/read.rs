//! Reading configuration files: size-capped, UTF-8, missing files told apart from broken ones.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use crate::error::{ConfigError, LineCol};

/// Largest configuration file Warden reads (4 MiB). Anything bigger is certainly not a
/// hand-written configuration, and reading it whole would be wasteful.
pub const MAX_CONFIG_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Reads `path` as text. `Ok(None)` means the file (or a directory on its way) does not
/// exist; every other failure is an error, so a broken file is never silently skipped.
pub(crate) fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
    let read_error = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(e) => return Err(read_error(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_CONFIG_FILE_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            limit: MAX_CONFIG_FILE_BYTES,
        });
    }
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    match std::str::from_utf8(body) {
        Ok(text) => Ok(Some(text.to_owned())),
        Err(e) => {
            let valid = String::from_utf8_lossy(&body[..e.valid_up_to()]);
            Err(ConfigError::NotUtf8 {
                path: path.to_owned(),
                at: Some(LineCol::at_offset(&valid, valid.len())),
            })
        }
    }
}

/// Like [`read_text`], but a missing file is an error too (for files named explicitly).
pub(crate) fn read_required(path: &Path) -> Result<String, ConfigError> {
    read_text(path)?.ok_or_else(|| ConfigError::Read {
        path: path.to_owned(),
        source: std::io::Error::from(ErrorKind::NotFound),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_is_none_but_other_failures_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_text(&dir.path().join("nope.toml")).unwrap().is_none());
        // A path through a regular file is "missing", not an error.
        std::fs::write(dir.path().join("file"), "x").unwrap();
        assert!(
            read_text(&dir.path().join("file/mcp.json"))
                .unwrap()
                .is_none()
        );
        // A directory where a file is expected cannot be read.
        let err = read_text(dir.path()).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err}");
        let err = read_required(&dir.path().join("nope.toml")).unwrap_err();
        assert!(
            err.to_string().contains("nope.toml: cannot read the file"),
            "{err}"
        );
    }

    #[test]
    fn size_cap_and_encoding() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_CONFIG_FILE_BYTES as usize + 1]).unwrap();
        let err = read_text(&big).unwrap_err();
        assert!(matches!(err, ConfigError::TooLarge { .. }), "{err}");

        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, b"a = 1\nb = \"\xff\"\n").unwrap();
        let err = read_text(&bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}:2:6: the file is not valid UTF-8 text", bad.display())
        );

        let bom = dir.path().join("bom.json");
        std::fs::write(&bom, b"\xEF\xBB\xBF{}").unwrap();
        assert_eq!(read_text(&bom).unwrap().as_deref(), Some("{}"));
    }
}
