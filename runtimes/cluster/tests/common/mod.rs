//! What the cluster runtime's tests share: temporary directories, and the servers
//! (S3, PostgreSQL) that `.ci/run` starts and names in the environment.

#![allow(dead_code)] // each test file uses its part

use std::path::PathBuf;

/// A temporary directory of this test process, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `NAME-PID` under the system's temporary directory (not made).
    pub fn named(name: &str) -> TempDir {
        TempDir(std::env::temp_dir().join(format!("{name}-{}", std::process::id())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file under `dir` as the directory store's key (`d/1/0/5`), dot files (the
/// store's temporaries) left out.
pub fn keys_under(dir: &std::path::Path) -> Vec<String> {
    fn walk(dir: &std::path::Path, base: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), &format!("{base}{name}/"), out);
            } else {
                out.push(format!("{base}{name}"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out
}

/// The server the environment variable `var` names; `None` (with one `skipped:` line)
/// when it names none, unless `BROKER_REQUIRE_SERVERS=1` (as in CI), where that fails.
pub fn server(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) => Some(v),
        Err(_) if std::env::var("BROKER_REQUIRE_SERVERS").as_deref() == Ok("1") => {
            panic!("BROKER_REQUIRE_SERVERS=1 but {var} names no {what}")
        }
        Err(_) => {
            println!("skipped: no {what} (set {var}, as .ci/run does)");
            None
        }
    }
}
