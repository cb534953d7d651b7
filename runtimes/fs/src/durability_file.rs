//! The `DURABILITY` file: the durability a data directory was last served with.
//!
//! A directory served under log-sync may hold acknowledged records past the ends its
//! journal holds, and only a start under log-sync keeps them. So the setting belongs
//! to the directory, not to one process: every command starts the broker as the file
//! says, and `serve --durability` changes it (once the broker serves, when every kept
//! end is journaled). No file means journaled, the default.
//!
//! The file is one line, `journaled` or `log-sync <ms>`, replaced atomically
//! (`DURABILITY.tmp`, fsync, rename, directory fsync).

use crate::realfs::sync_directory;
use crate::report::DriverError;
use broker_core::Durability;
use std::io::Write;
use std::path::Path;

/// The file's name at the top of the data directory.
pub const DURABILITY_FILE: &str = "DURABILITY";
/// The file being written, renamed over [`DURABILITY_FILE`] once synced.
pub const DURABILITY_TMP_FILE: &str = "DURABILITY.tmp";

/// The setting's text in the file, and in `status`.
pub fn durability_text(d: Durability) -> String {
    match d {
        Durability::Journaled => "journaled".into(),
        Durability::LogSync { journal_ends_ms } => format!("log-sync {journal_ends_ms}"),
    }
}

/// Parses the file's text (or `--durability`'s value: `journaled`, `log-sync`, or
/// `log-sync:<ms>` and `log-sync <ms>`).
pub fn parse_durability(text: &str) -> Result<Durability, String> {
    let words: Vec<&str> = text.split(|c: char| c.is_whitespace() || c == ':').filter(|w| !w.is_empty()).collect();
    match words.as_slice() {
        ["journaled"] => Ok(Durability::Journaled),
        ["log-sync"] => Ok(Durability::LOG_SYNC),
        ["log-sync", ms] => match ms.parse::<u64>() {
            Ok(ms) if (1..=3_600_000).contains(&ms) => Ok(Durability::LogSync { journal_ends_ms: ms }),
            _ => Err(format!("{ms:?} is not an interval of 1 to 3600000 milliseconds")),
        },
        _ => Err(format!("{:?} is not a durability: journaled, log-sync, or log-sync:<ms>", text.trim())),
    }
}

/// The durability `dir` was last served with: journaled if it never chose one.
pub fn read_durability(dir: &Path) -> Result<Durability, DriverError> {
    let path = dir.join(DURABILITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_durability(&text).map_err(|e| DriverError::Directory {
            dir: dir.to_path_buf(),
            detail: format!(
                "{DURABILITY_FILE} is damaged ({e}); write `log-sync` into it if the directory was ever served \
                 with --durability log-sync, else `journaled`"
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Durability::Journaled),
        Err(e) => Err(DriverError::Directory {
            dir: dir.to_path_buf(),
            detail: format!("cannot read {DURABILITY_FILE}: {e}"),
        }),
    }
}

/// Records `d` as `dir`'s durability, durably.
pub fn write_durability(dir: &Path, d: Durability) -> Result<(), DriverError> {
    let err = |what: &str, e: std::io::Error| DriverError::Directory {
        dir: dir.to_path_buf(),
        detail: format!("cannot {what} {DURABILITY_FILE}: {e}"),
    };
    let tmp = dir.join(DURABILITY_TMP_FILE);
    let mut f = std::fs::File::create(&tmp).map_err(|e| err("create", e))?;
    f.write_all(format!("{}\n", durability_text(d)).as_bytes()).map_err(|e| err("write", e))?;
    f.sync_all().map_err(|e| err("sync", e))?;
    std::fs::rename(&tmp, dir.join(DURABILITY_FILE)).map_err(|e| err("rename over", e))?;
    sync_directory(dir).map_err(|e| err("sync the directory after writing", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("broker-fs-durability-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn settings_read_back_as_written() {
        let dir = temp_dir("rw");
        assert_eq!(read_durability(&dir).unwrap(), Durability::Journaled, "no file: journaled");
        for d in [Durability::LOG_SYNC, Durability::LogSync { journal_ends_ms: 5 }, Durability::Journaled] {
            write_durability(&dir, d).unwrap();
            assert_eq!(read_durability(&dir).unwrap(), d);
        }
        assert!(!dir.join(DURABILITY_TMP_FILE).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_file_is_refused_with_what_to_write() {
        let dir = temp_dir("bad");
        std::fs::write(dir.join(DURABILITY_FILE), "log-snyc").unwrap();
        let e = read_durability(&dir).unwrap_err().to_string();
        assert!(e.contains("DURABILITY is damaged") && e.contains("write `log-sync`"), "{e}");
        assert!(parse_durability("log-sync 0").is_err());
        assert_eq!(parse_durability("log-sync 250\n"), Ok(Durability::LogSync { journal_ends_ms: 250 }));
        assert_eq!(parse_durability("log-sync:20"), Ok(Durability::LogSync { journal_ends_ms: 20 }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
