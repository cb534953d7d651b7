//! A shared store in a local directory: a key is a file under the root (its `/`s are
//! directories), so node processes on one machine share it with nothing installed.
//!
//! Why not `object_store`'s `LocalFileSystem`: it never fsyncs a file or a directory,
//! so an object it acknowledged, an acknowledged produce's segment or a journal entry,
//! may be gone after a power loss. Here every create is durable before it is answered:
//!
//! - **Create**: the bytes go to a new file under `.tmp/`, fsynced, then are linked to
//!   the key's path with `link(2)`, which fails if the path exists (so of racing
//!   creators, in this process or another, exactly one wins), then the key's directory
//!   is fsynced, and the temporary name removed. Directories made on the way are
//!   fsynced into their parents.
//! - **Delete**: the file is removed; directories left empty are removed (a create that
//!   meets one removed under it makes it again); the nearest directory still there is
//!   fsynced (several nodes remove an incarnation's segments at once, so the file's
//!   own directory may be gone, with the file, by another's delete).
//! - **List**: a walk of the directories under the prefix in byte order of the keys
//!   (a directory `a` stands for the keys from `a/`), which stops after the page.
//!
//! Names beginning with `.` are not keys: the walk skips them (`.tmp/` among them), and
//! a key with such a segment is refused.

use super::adapter::{Pending, Store};
use broker_core::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use broker_core::Bytes;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The directory store.
#[derive(Clone, Debug)]
pub struct DirStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    /// This opening's temporary names begin with the process id and the time it
    /// opened the store, apart from every other process's, and from a killed process's
    /// of the same id.
    temp_prefix: String,
    /// Names this opening's temporary files apart from each other.
    next_temp: AtomicU64,
}

/// How many times a create makes its directory again when a delete removed it (left
/// empty) between the two.
const MKDIR_ATTEMPTS: usize = 16;

impl DirStore {
    /// The store in `root`, made if absent.
    pub fn open(root: impl AsRef<Path>) -> io::Result<DirStore> {
        let root = root.as_ref().to_path_buf();
        fs::create_dir_all(root.join(".tmp"))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", root.display())))?;
        let opened = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let temp_prefix = format!("{}-{}", std::process::id(), opened.as_nanos());
        Ok(DirStore { inner: Arc::new(Inner { root, temp_prefix, next_temp: AtomicU64::new(0) }) })
    }

    /// Carries out `op` now, blocking.
    pub fn apply(&self, op: &StoreOp) -> StoreResult {
        let inner = &self.inner;
        match op {
            StoreOp::Create { key, bytes } => inner.create(key, bytes),
            StoreOp::Get { key } => inner.get(key),
            StoreOp::List { prefix, after, limit } => inner.list(prefix, after.as_deref(), *limit),
            StoreOp::Delete { key } => inner.delete(key),
        }
    }
}

impl Store for DirStore {
    fn run(&self, op: StoreOp) -> Pending {
        let store = self.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || store.apply(&op)).await {
                Ok(result) => result,
                Err(e) => Err(StoreError::Unknown(format!("the store's I/O thread failed: {e}"))),
            }
        })
    }
}

/// Why `key` cannot name a file of this store, if it cannot.
fn bad_key(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        return Some("an empty key");
    }
    if key.contains('\0') {
        return Some("a key with a NUL byte");
    }
    for segment in key.split('/') {
        if segment.is_empty() {
            return Some("a key with an empty segment (a leading, trailing or doubled '/')");
        }
        if segment.starts_with('.') {
            return Some("a key with a segment that begins with '.'");
        }
    }
    None
}

fn failed(what: &str, path: &Path, e: &io::Error) -> StoreError {
    StoreError::Failed(format!("{what} {}: {e}", path.display()))
}

fn unknown(what: &str, path: &Path, e: &io::Error) -> StoreError {
    StoreError::Unknown(format!("{what} {}: {e}", path.display()))
}

fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

impl Inner {
    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        match bad_key(key) {
            Some(why) => Err(StoreError::Failed(format!("{key:?} is not a key this store can hold: {why}"))),
            None => Ok(self.root.join(key)),
        }
    }

    fn create(&self, key: &str, bytes: &Bytes) -> StoreResult {
        let path = self.path(key)?;
        let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
        let temp = self.root.join(".tmp").join(format!("{}-{n}", self.temp_prefix));
        let result = self.create_via(&temp, &path, bytes);
        // The temporary name goes whatever happened; the key, if linked, holds the data.
        let _ = fs::remove_file(&temp);
        result
    }

    fn create_via(&self, temp: &Path, path: &Path, bytes: &[u8]) -> StoreResult {
        let mut file =
            OpenOptions::new().write(true).create_new(true).open(temp).map_err(|e| failed("creating", temp, &e))?;
        file.write_all(bytes).map_err(|e| failed("writing", temp, &e))?;
        file.sync_all().map_err(|e| failed("syncing", temp, &e))?;
        drop(file);
        let parent = path.parent().unwrap_or(&self.root);
        for _ in 0..MKDIR_ATTEMPTS {
            self.make_dirs(parent)?;
            match fs::hard_link(temp, path) {
                Ok(()) => {
                    sync_dir(parent).map_err(|e| unknown("syncing the directory of", path, &e))?;
                    return Ok(StoreOutput::Created);
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(StoreOutput::Exists),
                // Its directory, left empty by a delete, was removed: make it again.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) if e.kind() == ErrorKind::IsADirectory => {
                    return Err(StoreError::Failed(format!(
                        "{}: this store cannot hold a key that other keys continue (a/b beside a/b/c)",
                        path.display()
                    )))
                }
                Err(e) => return Err(failed("linking", path, &e)),
            }
        }
        Err(StoreError::Failed(format!("{}: its directory kept disappearing", path.display())))
    }

    /// Makes `dir` and its missing parents under the root, each fsynced into its parent.
    fn make_dirs(&self, dir: &Path) -> Result<(), StoreError> {
        let Ok(rel) = dir.strip_prefix(&self.root) else { return Ok(()) };
        let mut at = self.root.clone();
        for part in rel.components() {
            let parent = at.clone();
            at.push(part);
            match fs::create_dir(&at) {
                Ok(()) => sync_dir(&parent).map_err(|e| failed("syncing", &parent, &e))?,
                Err(e) if e.kind() == ErrorKind::AlreadyExists && at.is_dir() => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    return Err(StoreError::Failed(format!(
                        "{}: this store cannot hold a key that other keys continue (a/b beside a/b/c)",
                        at.display()
                    )))
                }
                Err(e) => return Err(failed("making the directory", &at, &e)),
            }
        }
        Ok(())
    }

    fn get(&self, key: &str) -> StoreResult {
        let path = self.path(key)?;
        match fs::read(&path) {
            Ok(bytes) => Ok(StoreOutput::Found(bytes.into())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(StoreOutput::Missing),
            // A directory is the keys under it, no object of its own.
            Err(_) if path.is_dir() => Ok(StoreOutput::Missing),
            Err(e) => Err(failed("reading", &path, &e)),
        }
    }

    fn delete(&self, key: &str) -> StoreResult {
        let path = self.path(key)?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(StoreOutput::Deleted),
            Err(_) if path.is_dir() => return Ok(StoreOutput::Deleted),
            Err(e) => return Err(unknown("removing", &path, &e)),
        }
        let parent = path.parent().unwrap_or(&self.root).to_path_buf();
        // Directories left empty go (a create racing this makes its directory again),
        // here or by another node's delete at the same time: the removal is made
        // durable by a sync of the nearest directory still there, which also makes the
        // file's removal durable if its own directory went.
        let mut dir = parent;
        while dir != self.root && dir.starts_with(&self.root) && fs::remove_dir(&dir).is_ok() {
            let Some(up) = dir.parent() else { break };
            dir = up.to_path_buf();
        }
        self.sync_nearest(&dir).map_err(|e| unknown("syncing the directory of", &path, &e))?;
        Ok(StoreOutput::Deleted)
    }

    /// Syncs `dir`, or if it is gone (removed, left empty, by another delete), the
    /// nearest of its ancestors under the root that is there.
    fn sync_nearest(&self, dir: &Path) -> io::Result<()> {
        let mut at = dir;
        loop {
            match sync_dir(at) {
                Err(e) if e.kind() == ErrorKind::NotFound && at != self.root => {
                    at = at.parent().unwrap_or(&self.root);
                }
                other => return other,
            }
        }
    }

    fn list(&self, prefix: &str, after: Option<&str>, limit: u32) -> StoreResult {
        // The walk starts in the deepest directory the prefix names whole.
        let base = match prefix.rfind('/') {
            Some(i) => &prefix[..=i],
            None => "",
        };
        let dir = if base.is_empty() { self.root.clone() } else { self.path(base.trim_end_matches('/'))? };
        let mut walk = Walk { prefix, after, want: limit as usize + 1, keys: Vec::new() };
        walk.dir(&dir, base).map_err(|e| failed("listing", &dir, &e))?;
        let more = walk.keys.len() > limit as usize;
        walk.keys.truncate(limit as usize);
        Ok(StoreOutput::Listed { keys: walk.keys, more })
    }
}

/// A listing's walk, in key order, until it has the keys it wants.
struct Walk<'a> {
    prefix: &'a str,
    after: Option<&'a str>,
    want: usize,
    keys: Vec<String>,
}

impl Walk<'_> {
    /// Walks `dir`, whose keys begin with `base` (empty, or ending with `/`).
    fn dir(&mut self, dir: &Path, base: &str) -> io::Result<()> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            // No key under it, or a key itself.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(()),
            Err(e) => return Err(e),
        };
        // Each entry as the keys it stands for: a file, its key; a directory, every key
        // that begins with its name and `/`. Sorted so, they are in key order.
        let mut found: Vec<(String, bool)> = Vec::new();
        for entry in entries {
            let entry = entry?;
            // A name that is not UTF-8 is nobody's key.
            let Ok(name) = entry.file_name().into_string() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let is_dir = entry.file_type()?.is_dir();
            let key = if is_dir { format!("{base}{name}/") } else { format!("{base}{name}") };
            found.push((key, is_dir));
        }
        found.sort_unstable();
        for (key, is_dir) in found {
            if is_dir {
                // Every key under it may match the prefix, and some may follow `after`.
                let may_match = key.starts_with(self.prefix) || self.prefix.starts_with(key.as_str());
                let all_before = self.after.is_some_and(|a| a > key.as_str() && !a.starts_with(key.as_str()));
                if may_match && !all_before {
                    self.dir(&dir.join(&key[base.len()..key.len() - 1]), &key)?;
                }
            } else if key.starts_with(self.prefix) && self.after.is_none_or(|a| key.as_str() > a) {
                self.keys.push(key);
            }
            if self.keys.len() >= self.want {
                return Ok(());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes remove an incarnation's segments at once: whichever delete empties a
    /// directory removes it, and the others' deletes still answer Deleted.
    #[test]
    fn deletes_racing_to_empty_a_directory_all_succeed() {
        let root = std::env::temp_dir().join(format!("broker-dirstore-race-{}", std::process::id()));
        let store = DirStore::open(&root).unwrap();
        for round in 0..50 {
            let keys: Vec<String> = (0..8).map(|i| format!("d/{round:016x}/00000000/{i:020}")).collect();
            for key in &keys {
                let op = StoreOp::Create { key: key.clone(), bytes: Bytes::from_static(b"x") };
                assert_eq!(store.apply(&op), Ok(StoreOutput::Created));
            }
            let results: Vec<StoreResult> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..3)
                    .flat_map(|_| keys.iter())
                    .map(|key| {
                        let store = store.clone();
                        s.spawn(move || store.apply(&StoreOp::Delete { key: key.clone() }))
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(results.iter().all(|r| r == &Ok(StoreOutput::Deleted)), "round {round}: {results:?}");
            assert!(!root.join(format!("d/{round:016x}")).exists(), "round {round}: its directory is left");
        }
        let _ = fs::remove_dir_all(&root);
    }
}
