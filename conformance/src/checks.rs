//! The checks. Each is a function with a doc comment stating its rule; [`all`] pairs
//! it with its [`Check`] (name, rule, needs).
//!
//! A check returns `Err(what was seen)` when the file system breaks the rule. Calls
//! the rule does not cover, but the check needs to succeed, fail the check with the
//! call and its error.

use crate::{failed_call, Check, Fault, Subject};
use broker_core::{FileSystem, StorageError};
use std::fmt;

type Seen = Result<(), String>;

/// A check's body, generic over the subject.
pub(crate) type Run<S> = fn(&mut S) -> Seen;

/// Every check, in order, with its body.
pub(crate) fn all<S: Subject>() -> Vec<(Check, Run<S>)> {
    fn plain(name: &'static str, rule: &'static str) -> Check {
        Check { name, rule, needs_crash: false, needs_fault: None }
    }
    fn crash(name: &'static str, rule: &'static str) -> Check {
        Check { name, rule, needs_crash: true, needs_fault: None }
    }
    fn fault(name: &'static str, rule: &'static str, needs_crash: bool, fault: Fault) -> Check {
        Check { name, rule, needs_crash, needs_fault: Some(fault) }
    }
    vec![
        (
            plain(
                "create-is-idempotent",
                "create makes an empty file if the name is absent; on an existing file it changes nothing \
                 (its bytes and length stay)",
            ),
            create_is_idempotent::<S>,
        ),
        (
            plain(
                "remove-and-not-found",
                "remove deletes the file (list, len and reads no longer see it; a later create of the name \
                 makes a new, empty file); remove of an absent name fails with NotFound",
            ),
            remove_and_not_found::<S>,
        ),
        (
            plain(
                "absent-file-errors",
                "len and read_at (so read_all) of an absent name fail with NotFound (the executor tells a \
                 missing journal by it); write_at, truncate, sync_file and rename of an absent name fail and \
                 create nothing",
            ),
            absent_file_errors::<S>,
        ),
        (
            plain(
                "write-then-read",
                "read_at returns the bytes write_at wrote; a later write replaces earlier bytes in its range \
                 and changes nothing outside it",
            ),
            write_then_read::<S>,
        ),
        (
            plain(
                "write-extends-with-zeros",
                "a write past the end extends the file to the write's end; the gap before it reads as zeros",
            ),
            write_extends_with_zeros::<S>,
        ),
        (
            plain(
                "read-past-end-is-short",
                "read_at returns fewer bytes than asked only at the end of the file: a read across the end \
                 returns the bytes up to it, a read at or past the end returns none (not an error)",
            ),
            read_past_end_is_short::<S>,
        ),
        (
            plain(
                "len-and-truncate",
                "len is the file's length; truncate cuts the file (the cut bytes are gone: growing it again \
                 reads zeros there) or extends it with zeros",
            ),
            len_and_truncate::<S>,
        ),
        (
            plain(
                "allocate-grows-with-zeros",
                "allocate grows a shorter file to the length asked, the new bytes reading as zeros and the old \
                 ones unchanged; a file already as long is left as it is (the executor grows the journal \
                 reserve with it)",
            ),
            allocate_grows_with_zeros::<S>,
        ),
        (
            plain(
                "list-sorted-and-complete",
                "list returns every file name of the directory once, sorted, and nothing else; the names the \
                 executor uses (journal, journal.tmp, journal.reserve, journal.torn.N, \
                 {topic:016x}-{partition:08x}.log) work",
            ),
            list_sorted_and_complete::<S>,
        ),
        (
            plain(
                "rename-replaces",
                "rename moves the file to the new name, replacing an existing target: the target reads the \
                 source's bytes, the source name is gone, and later writes through the new name reach the \
                 moved file",
            ),
            rename_replaces::<S>,
        ),
        (
            plain(
                "read-all",
                "read_all returns the whole file: nothing for an empty file, every byte of a larger one (the \
                 executor reads the journal whole)",
            ),
            read_all::<S>,
        ),
        (
            plain(
                "large-io",
                "one write_at or read_at of several MiB works whole, at any offset (a log frame holds up to \
                 16 MiB; the executor reads logs in windows of 8 MiB)",
            ),
            large_io::<S>,
        ),
        (
            crash(
                "synced-data-survives-crash",
                "a successful sync_file makes the file's data and size durable: after writes and truncations, \
                 sync_file, then a crash, the file holds exactly what it held at the sync",
            ),
            synced_data_survives_crash::<S>,
        ),
        (
            crash(
                "unsynced-write-spares-synced-data",
                "a crash may lose any part of a write not yet synced, and leave zeros or garbage in its range, \
                 but never changes a byte outside it: the synced bytes before an unsynced append survive",
            ),
            unsynced_write_spares_synced_data::<S>,
        ),
        (
            crash(
                "create-durable-after-sync-dir",
                "after create, write_at, sync_file and sync_dir (how the executor creates a log), a crash \
                 keeps the file and its data",
            ),
            create_durable_after_sync_dir::<S>,
        ),
        (
            crash(
                "remove-durable-after-sync-dir",
                "after remove and sync_dir (how the executor removes a log), a crash never brings the file back",
            ),
            remove_durable_after_sync_dir::<S>,
        ),
        (
            crash(
                "rename-durable-after-sync-dir",
                "after rename over an existing file and sync_dir (how the executor replaces the journal), a \
                 crash keeps the target with the source's data, and the source name stays gone",
            ),
            rename_durable_after_sync_dir::<S>,
        ),
        (
            crash(
                "rename-atomic-at-crash",
                "rename is atomic: a crash before the sync_dir leaves the old entries or the new one, each \
                 file whole, never the target missing and never a mix",
            ),
            rename_atomic_at_crash::<S>,
        ),
        (
            fault(
                "failed-sync-reported",
                "a sync_file whose write-back fails returns an error, never Ok: the executor halts on it, and \
                 a hidden failure would acknowledge data that is lost",
                false,
                Fault::FileSync,
            ),
            failed_sync_reported::<S>,
        ),
        (
            fault(
                "rewrite-after-failed-sync-durable",
                "after a failed sync_file, data written again and then synced successfully is durable (the \
                 executor recovers so, rewriting a log's header or the whole journal; the failed sync's own \
                 data may be lost, so a successful sync after a failed one proves nothing alone)",
                true,
                Fault::FileSync,
            ),
            rewrite_after_failed_sync_durable::<S>,
        ),
        (
            fault(
                "failed-dir-sync-reported",
                "a sync_dir that fails returns an error, never Ok (the executor reports it as DirSyncFailed \
                 and halts)",
                false,
                Fault::DirSync,
            ),
            failed_dir_sync_reported::<S>,
        ),
        (
            fault(
                "dir-sync-after-failure-durable",
                "after a failed sync_dir, a successful one makes every entry list shows durable (recovery \
                 creates a missing log again: create of the name, which may still be listed, then sync_dir)",
                true,
                Fault::DirSync,
            ),
            dir_sync_after_failure_durable::<S>,
        ),
    ]
}

// --- helpers ---------------------------------------------------------------------------

/// The file-system calls, failing with the call and its error.
trait Call: FileSystem {
    fn c_create(&mut self, name: &str) -> Seen {
        self.create(name).map_err(|e| failed_call(format_args!("create({name:?})"), &e))
    }
    fn c_write(&mut self, name: &str, offset: u64, data: &[u8]) -> Seen {
        let n = data.len();
        self.write_at(name, offset, data)
            .map_err(|e| failed_call(format_args!("write_at({name:?}, {offset}, {n} bytes)"), &e))
    }
    fn c_read(&mut self, name: &str, offset: u64, len: usize) -> Result<Vec<u8>, String> {
        self.read_at(name, offset, len).map_err(|e| failed_call(format_args!("read_at({name:?}, {offset}, {len})"), &e))
    }
    fn c_len(&mut self, name: &str) -> Result<u64, String> {
        self.len(name).map_err(|e| failed_call(format_args!("len({name:?})"), &e))
    }
    fn c_truncate(&mut self, name: &str, len: u64) -> Seen {
        self.truncate(name, len).map_err(|e| failed_call(format_args!("truncate({name:?}, {len})"), &e))
    }
    fn c_sync(&mut self, name: &str) -> Seen {
        self.sync_file(name).map_err(|e| failed_call(format_args!("sync_file({name:?})"), &e))
    }
    fn c_sync_dir(&mut self) -> Seen {
        self.sync_dir().map_err(|e| failed_call(format_args!("sync_dir()"), &e))
    }
    fn c_rename(&mut self, from: &str, to: &str) -> Seen {
        self.rename(from, to).map_err(|e| failed_call(format_args!("rename({from:?}, {to:?})"), &e))
    }
    fn c_remove(&mut self, name: &str) -> Seen {
        self.remove(name).map_err(|e| failed_call(format_args!("remove({name:?})"), &e))
    }
    fn c_list(&mut self) -> Result<Vec<String>, String> {
        self.list().map_err(|e| failed_call(format_args!("list()"), &e))
    }
    fn c_read_all(&mut self, name: &str) -> Result<Vec<u8>, String> {
        self.read_all(name).map_err(|e| failed_call(format_args!("read_all({name:?})"), &e))
    }
    /// A file made durable with `data`: created, written, synced, directory synced.
    fn c_durable(&mut self, name: &str, data: &[u8]) -> Seen {
        self.c_create(name)?;
        self.c_truncate(name, 0)?;
        self.c_write(name, 0, data)?;
        self.c_sync(name)?;
        self.c_sync_dir()
    }
}

impl<F: FileSystem> Call for F {}

/// Deterministic bytes with no zeros, different for each `seed`.
pub(crate) fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 255) as u8 + 1
        })
        .collect()
}

/// Describes bytes for a message: their length and where they first differ from `want`.
pub(crate) fn differ(got: &[u8], want: &[u8]) -> String {
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => format!(
            "{} bytes that differ from the expected {} at byte {i} ({:#04x} instead of {:#04x})",
            got.len(),
            want.len(),
            got[i],
            want[i]
        ),
        None if got.len() != want.len() => {
            format!("{} bytes instead of {} (the common part matches)", got.len(), want.len())
        }
        None => "the expected bytes".to_string(),
    }
}

/// Fails unless `got` equals `want`; `what` says which read it was.
fn expect_bytes(what: &str, got: &[u8], want: &[u8]) -> Seen {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: {}", differ(got, want)))
    }
}

fn expect_list<F: FileSystem>(fs: &mut F, when: &str, want: &[&str]) -> Seen {
    let got = fs.c_list()?;
    if got.iter().map(String::as_str).eq(want.iter().copied()) {
        Ok(())
    } else {
        Err(format!("{when}, list() returned {got:?} instead of {want:?}"))
    }
}

/// Fails unless `r` is a `NotFound` error.
fn expect_not_found<T: fmt::Debug>(call: &str, r: Result<T, StorageError>) -> Seen {
    match r {
        Err(StorageError::NotFound(_)) => Ok(()),
        Err(e) => Err(format!("{call} failed with {e:?} instead of NotFound")),
        Ok(v) => Err(format!("{call} returned Ok({v:?}) instead of failing with NotFound")),
    }
}

fn crash<S: Subject>(s: &mut S, fs: S::Fs) -> Result<S::Fs, String> {
    s.crash(fs).ok_or_else(|| "Subject::crash returned None during the check, though it crashed before".to_string())
}

/// Whether a file is there after a crash, by `list` (and then its bytes).
fn survivor<F: FileSystem>(fs: &mut F, name: &str) -> Result<Option<Vec<u8>>, String> {
    if fs.c_list()?.iter().any(|n| n == name) {
        fs.c_read_all(name).map(Some)
    } else {
        Ok(None)
    }
}

fn arm<S: Subject>(s: &mut S, fs: &mut S::Fs, fault: Fault) -> Seen {
    if s.set_fault(fs, Some(fault)) {
        Ok(())
    } else {
        Err(format!("Subject::set_fault({fault:?}) returned false during the check, though it was supported before"))
    }
}

// --- plain behaviour ---------------------------------------------------------------------

/// create makes an empty file if the name is absent; on an existing file it changes
/// nothing (its bytes and length stay).
fn create_is_idempotent<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("a.log")?;
    if fs.c_len("a.log")? != 0 {
        return Err(format!("a new file has length {}, not 0", fs.c_len("a.log")?));
    }
    expect_list(&mut fs, "after create(\"a.log\")", &["a.log"])?;
    let data = pattern(1000, 1);
    fs.c_write("a.log", 0, &data)?;
    fs.c_create("a.log")?;
    expect_bytes("after create(\"a.log\") of the existing file, read_all", &fs.c_read_all("a.log")?, &data)?;
    fs.c_sync("a.log")?;
    fs.c_create("a.log")?;
    expect_bytes("after sync_file and another create(\"a.log\"), read_all", &fs.c_read_all("a.log")?, &data)?;
    expect_list(&mut fs, "after creating \"a.log\" three times", &["a.log"])
}

/// remove deletes the file (list, len and reads no longer see it; a later create of
/// the name makes a new, empty file); remove of an absent name fails with NotFound.
fn remove_and_not_found<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    expect_not_found("remove(\"never\") in an empty directory", fs.remove("never"))?;
    fs.c_create("a.log")?;
    fs.c_create("b.log")?;
    fs.c_write("a.log", 0, &pattern(100, 2))?;
    fs.c_remove("a.log")?;
    expect_list(&mut fs, "after remove(\"a.log\")", &["b.log"])?;
    expect_not_found("len(\"a.log\") after its remove", fs.len("a.log"))?;
    expect_not_found("read_at(\"a.log\", 0, 10) after its remove", fs.read_at("a.log", 0, 10))?;
    expect_not_found("a second remove(\"a.log\")", fs.remove("a.log"))?;
    fs.c_create("a.log")?;
    let len = fs.c_len("a.log")?;
    if len != 0 {
        return Err(format!("create(\"a.log\") after its remove gave a file of {len} bytes, not a new empty one"));
    }
    // The same with a synced file, whose bytes a cache may hold on to.
    fs.c_write("b.log", 0, &pattern(100, 3))?;
    fs.c_sync("b.log")?;
    fs.c_remove("b.log")?;
    expect_not_found("len(\"b.log\") after its remove", fs.len("b.log"))?;
    fs.c_create("b.log")?;
    expect_bytes("read_all(\"b.log\") of the new file made after remove", &fs.c_read_all("b.log")?, b"")?;
    expect_list(&mut fs, "after removing and creating both again", &["a.log", "b.log"])
}

/// len and read_at (so read_all) of an absent name fail with NotFound (the executor
/// tells a missing journal by it); write_at, truncate, sync_file and rename of an
/// absent name fail and create nothing.
fn absent_file_errors<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("other")?;
    expect_not_found("len(\"journal\") of an absent file", fs.len("journal"))?;
    expect_not_found("read_at(\"journal\", 0, 10) of an absent file", fs.read_at("journal", 0, 10))?;
    expect_not_found("read_all(\"journal\") of an absent file", fs.read_all("journal"))?;
    let calls: [(&str, Result<(), StorageError>); 4] = [
        ("write_at(\"journal\", 0, b\"x\")", fs.write_at("journal", 0, b"x")),
        ("truncate(\"journal\", 10)", fs.truncate("journal", 10)),
        ("sync_file(\"journal\")", fs.sync_file("journal")),
        ("rename(\"journal\", \"moved\")", fs.rename("journal", "moved")),
    ];
    for (call, r) in calls {
        if r.is_ok() {
            return Err(format!("{call} of an absent file returned Ok"));
        }
    }
    expect_list(&mut fs, "after write_at, truncate, sync_file and rename of absent names", &["other"])
}

/// read_at returns the bytes write_at wrote; a later write replaces earlier bytes in
/// its range and changes nothing outside it.
fn write_then_read<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("a.log")?;
    let mut want = pattern(5000, 4);
    fs.c_write("a.log", 0, &want)?;
    expect_bytes("read_at(\"a.log\", 0, 5000) after writing 5000 bytes", &fs.c_read("a.log", 0, 5000)?, &want)?;
    expect_bytes("read_at(\"a.log\", 1234, 100)", &fs.c_read("a.log", 1234, 100)?, &want[1234..1334])?;
    let over = pattern(700, 5);
    fs.c_write("a.log", 1000, &over)?;
    want[1000..1700].copy_from_slice(&over);
    expect_bytes(
        "after an overwrite of bytes 1000..1700, read_at(\"a.log\", 0, 5000)",
        &fs.c_read("a.log", 0, 5000)?,
        &want,
    )?;
    // Appends, as the executor makes them: each at the current end.
    for i in 0..5 {
        let end = fs.c_len("a.log")?;
        let more = pattern(300 + i * 17, 6 + i as u64);
        fs.c_write("a.log", end, &more)?;
        want.extend_from_slice(&more);
    }
    expect_bytes("after five appends, read_all(\"a.log\")", &fs.c_read_all("a.log")?, &want)?;
    // An empty write inside the file changes nothing.
    fs.c_write("a.log", 10, b"")?;
    expect_bytes("after an empty write, read_all(\"a.log\")", &fs.c_read_all("a.log")?, &want)
}

/// A write past the end extends the file to the write's end; the gap before it reads
/// as zeros.
fn write_extends_with_zeros<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("a.log")?;
    fs.c_write("a.log", 4096, b"tail")?;
    let mut want = vec![0u8; 4096];
    want.extend_from_slice(b"tail");
    expect_bytes(
        "write_at(\"a.log\", 4096, b\"tail\") on an empty file, then read_all",
        &fs.c_read_all("a.log")?,
        &want,
    )?;
    fs.c_write("a.log", 10000, b"more")?;
    want.resize(10000, 0);
    want.extend_from_slice(b"more");
    let len = fs.c_len("a.log")?;
    if len != 10004 {
        return Err(format!("after write_at(\"a.log\", 10000, b\"more\"), len is {len}, not 10004"));
    }
    expect_bytes("after writing past the end again, read_all", &fs.c_read_all("a.log")?, &want)
}

/// read_at returns fewer bytes than asked only at the end of the file: a read across
/// the end returns the bytes up to it, a read at or past the end returns none.
fn read_past_end_is_short<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("a.log")?;
    let data = pattern(1000, 7);
    fs.c_write("a.log", 0, &data)?;
    expect_bytes("read_at(\"a.log\", 900, 500) of a 1000-byte file", &fs.c_read("a.log", 900, 500)?, &data[900..])?;
    expect_bytes("read_at(\"a.log\", 1000, 10) at the end", &fs.c_read("a.log", 1000, 10)?, b"")?;
    expect_bytes("read_at(\"a.log\", 5000, 10) past the end", &fs.c_read("a.log", 5000, 10)?, b"")?;
    expect_bytes("read_at(\"a.log\", 10, 0)", &fs.c_read("a.log", 10, 0)?, b"")?;
    fs.c_create("empty")?;
    expect_bytes("read_at(\"empty\", 0, 100) of an empty file", &fs.c_read("empty", 0, 100)?, b"")
}

/// len is the file's length; truncate cuts the file (the cut bytes are gone: growing
/// it again reads zeros there) or extends it with zeros.
fn len_and_truncate<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("a.log")?;
    let data = pattern(3000, 8);
    fs.c_write("a.log", 0, &data)?;
    let expect_len = |fs: &mut S::Fs, when: &str, want: u64| -> Seen {
        let len = fs.c_len("a.log")?;
        if len == want {
            Ok(())
        } else {
            Err(format!("{when}, len(\"a.log\") is {len}, not {want}"))
        }
    };
    expect_len(&mut fs, "after writing 3000 bytes", 3000)?;
    fs.c_truncate("a.log", 1000)?;
    expect_len(&mut fs, "after truncate(\"a.log\", 1000)", 1000)?;
    expect_bytes("after truncate to 1000, read_all", &fs.c_read_all("a.log")?, &data[..1000])?;
    fs.c_truncate("a.log", 2000)?;
    expect_len(&mut fs, "after truncate(\"a.log\", 2000) of a 1000-byte file", 2000)?;
    let mut want = data[..1000].to_vec();
    want.resize(2000, 0);
    expect_bytes(
        "after cutting to 1000 and extending to 2000, read_all (the cut bytes must read as zeros)",
        &fs.c_read_all("a.log")?,
        &want,
    )?;
    fs.c_truncate("a.log", 500)?;
    fs.c_write("a.log", 1500, b"x")?;
    let mut want = data[..500].to_vec();
    want.resize(1500, 0);
    want.push(b'x');
    expect_bytes(
        "after cutting to 500 and writing at 1500, read_all (the cut bytes must read as zeros)",
        &fs.c_read_all("a.log")?,
        &want,
    )?;
    fs.c_truncate("a.log", 0)?;
    expect_len(&mut fs, "after truncate(\"a.log\", 0)", 0)
}

/// allocate grows a shorter file to the length asked, the new bytes reading as zeros
/// and the old ones unchanged; a file already as long is left as it is.
fn allocate_grows_with_zeros<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("journal.reserve")?;
    let data = pattern(1000, 9);
    fs.c_write("journal.reserve", 0, &data)?;
    fs.allocate("journal.reserve", 10_000)
        .map_err(|e| failed_call(format_args!("allocate(\"journal.reserve\", 10000)"), &e))?;
    let mut want = data.clone();
    want.resize(10_000, 0);
    expect_bytes(
        "after allocate(\"journal.reserve\", 10000) of a 1000-byte file, read_all",
        &fs.c_read_all("journal.reserve")?,
        &want,
    )?;
    fs.allocate("journal.reserve", 500)
        .map_err(|e| failed_call(format_args!("allocate(\"journal.reserve\", 500)"), &e))?;
    expect_bytes(
        "after allocate(\"journal.reserve\", 500) of a 10000-byte file, read_all",
        &fs.c_read_all("journal.reserve")?,
        &want,
    )
}

/// list returns every file name of the directory once, sorted, and nothing else; the
/// names the executor uses work.
fn list_sorted_and_complete<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    expect_list(&mut fs, "in a new file system", &[])?;
    let names = [
        "journal",
        "000000000000000a-00000001.log",
        "journal.torn.12",
        "journal.tmp",
        "0000000000000001-00000000.log",
        "journal.reserve",
        "journal.torn.3",
        "0000000000000001-00000002.log",
        "LOCK",
    ];
    for name in names {
        fs.c_create(name)?;
    }
    let mut sorted: Vec<&str> = names.to_vec();
    sorted.sort_unstable();
    expect_list(&mut fs, "after creating nine files", &sorted)?;
    fs.c_remove("journal.torn.3")?;
    fs.c_rename("journal.tmp", "journal")?;
    fs.c_rename("LOCK", "0000000000000000-00000000.log")?;
    let mut want: Vec<&str> =
        sorted.iter().copied().filter(|n| !["journal.torn.3", "journal.tmp", "LOCK"].contains(n)).collect();
    want.push("0000000000000000-00000000.log");
    want.sort_unstable();
    expect_list(&mut fs, "after a remove and two renames", &want)
}

/// rename moves the file to the new name, replacing an existing target: the target
/// reads the source's bytes, the source name is gone, and later writes through the
/// new name reach the moved file.
fn rename_replaces<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    let (old, new) = (pattern(2000, 9), pattern(3000, 10));
    fs.c_create("journal")?;
    fs.c_write("journal", 0, &old)?;
    fs.c_sync("journal")?;
    fs.c_create("journal.tmp")?;
    fs.c_write("journal.tmp", 0, &new)?;
    fs.c_sync("journal.tmp")?;
    fs.c_rename("journal.tmp", "journal")?;
    expect_list(&mut fs, "after rename(\"journal.tmp\", \"journal\") over an existing journal", &["journal"])?;
    expect_bytes("after the rename, read_all(\"journal\")", &fs.c_read_all("journal")?, &new)?;
    let len = fs.c_len("journal")?;
    if len != new.len() as u64 {
        return Err(format!("after the rename, len(\"journal\") is {len}, not the source's {}", new.len()));
    }
    expect_not_found("len(\"journal.tmp\") after it was renamed", fs.len("journal.tmp"))?;
    // Writes through the new name reach the moved file (as journal appends do).
    fs.c_write("journal", 3000, b"appended")?;
    let mut want = new.clone();
    want.extend_from_slice(b"appended");
    expect_bytes("after appending through the new name, read_all(\"journal\")", &fs.c_read_all("journal")?, &want)?;
    // The old name is free: a create makes a new, empty file.
    fs.c_create("journal.tmp")?;
    expect_bytes(
        "create(\"journal.tmp\") after it was renamed away, then read_all",
        &fs.c_read_all("journal.tmp")?,
        b"",
    )?;
    // A rename to a name that does not exist.
    fs.c_rename("journal", "journal.torn.0")?;
    expect_list(&mut fs, "after rename(\"journal\", \"journal.torn.0\")", &["journal.tmp", "journal.torn.0"])?;
    expect_bytes("read_all(\"journal.torn.0\")", &fs.c_read_all("journal.torn.0")?, &want)
}

/// read_all returns the whole file: nothing for an empty file, every byte of a larger
/// one.
fn read_all<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("empty")?;
    expect_bytes("read_all(\"empty\")", &fs.c_read_all("empty")?, b"")?;
    fs.c_create("journal")?;
    let data = pattern(300_000, 11);
    fs.c_write("journal", 0, &data)?;
    expect_bytes("read_all(\"journal\") of 300000 bytes", &fs.c_read_all("journal")?, &data)?;
    fs.c_sync("journal")?;
    expect_bytes("read_all(\"journal\") after sync_file", &fs.c_read_all("journal")?, &data)
}

/// One write_at or read_at of several MiB works whole, at any offset.
fn large_io<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("a.log")?;
    let data = pattern(3 << 20, 12);
    fs.c_write("a.log", 22, &data)?;
    fs.c_sync("a.log")?;
    let got = fs.c_read("a.log", 22, data.len())?;
    expect_bytes("read_at(\"a.log\", 22, 3 MiB) after a 3 MiB write at 22", &got, &data)?;
    let got = fs.c_read("a.log", 1_000_001, 2 << 20)?;
    expect_bytes("read_at(\"a.log\", 1000001, 2 MiB)", &got, &data[1_000_001 - 22..][..2 << 20])?;
    let got = fs.c_read("a.log", 0, 8 << 20)?;
    let mut want = vec![0u8; 22];
    want.extend_from_slice(&data);
    expect_bytes("read_at(\"a.log\", 0, 8 MiB) of a file of 3 MiB + 22 bytes", &got, &want)
}

// --- durability at a crash -----------------------------------------------------------------

/// A successful sync_file makes the file's data and size durable: after writes and
/// truncations, sync_file, then a crash, the file holds exactly what it held at the
/// sync.
fn synced_data_survives_crash<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("a.log")?;
    fs.c_create("b.log")?;
    fs.c_create("journal")?;
    fs.c_sync_dir()?;
    // Writes and a cut, then one sync.
    let a = pattern(5000, 13);
    fs.c_write("a.log", 0, &a)?;
    fs.c_truncate("a.log", 3000)?;
    fs.c_write("a.log", 2000, &pattern(500, 14))?;
    let want_a = fs.c_read_all("a.log")?;
    fs.c_sync("a.log")?;
    // A synced file cut and synced again: the size is durable too.
    fs.c_write("b.log", 0, &pattern(4000, 15))?;
    fs.c_sync("b.log")?;
    fs.c_truncate("b.log", 1000)?;
    fs.c_sync("b.log")?;
    let want_b = fs.c_read_all("b.log")?;
    // Appends, each synced, as a journal grows.
    let mut want_j = Vec::new();
    for i in 0..4 {
        let more = pattern(700, 16 + i);
        fs.c_write("journal", want_j.len() as u64, &more)?;
        fs.c_sync("journal")?;
        want_j.extend_from_slice(&more);
    }
    let mut fs = crash(s, fs)?;
    for (name, want) in [("a.log", &want_a), ("b.log", &want_b), ("journal", &want_j)] {
        match survivor(&mut fs, name)? {
            None => return Err(format!("{name}, created and synced with sync_dir, is gone after a crash")),
            Some(got) => {
                expect_bytes(&format!("after sync_file({name:?}) and a crash, read_all({name:?})"), &got, want)?
            }
        }
    }
    Ok(())
}

/// A crash may lose any part of a write not yet synced, and leave zeros or garbage in
/// its range, but never changes a byte outside it: the synced bytes before an unsynced
/// append survive.
fn unsynced_write_spares_synced_data<S: Subject>(s: &mut S) -> Seen {
    for round in 0..4u64 {
        let mut fs = s.fresh();
        let synced = pattern(3000 + 100 * round as usize, 20 + round);
        fs.c_durable("journal", &synced)?;
        // An unsynced overwrite inside the file and an unsynced append after it.
        fs.c_write("journal", 1000, &pattern(500, 30 + round))?;
        fs.c_write("journal", synced.len() as u64, &pattern(5000, 40 + round))?;
        let mut fs = crash(s, fs)?;
        let got = survivor(&mut fs, "journal")?.ok_or("the synced journal is gone after a crash")?;
        if got.len() < synced.len() {
            return Err(format!(
                "after {} synced bytes and an unsynced append, the file has only {} bytes after a crash",
                synced.len(),
                got.len()
            ));
        }
        let outside = |r: std::ops::Range<usize>| {
            expect_bytes(
                &format!("after a crash with unsynced writes at 1000..1500 and from {} on, bytes {r:?}", synced.len()),
                &got[r.clone()],
                &synced[r],
            )
        };
        outside(0..1000)?;
        outside(1500..synced.len())?;
    }
    Ok(())
}

/// After create, write_at, sync_file and sync_dir (how the executor creates a log), a
/// crash keeps the file and its data.
fn create_durable_after_sync_dir<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    let names = ["0000000000000001-00000000.log", "0000000000000001-00000001.log", "journal.reserve"];
    for (i, name) in names.iter().enumerate() {
        fs.c_create(name)?;
        fs.c_write(name, 0, &pattern(22 + 100 * i, 50 + i as u64))?;
        fs.c_sync(name)?;
        fs.c_sync_dir()?;
    }
    // An empty file made durable the same way.
    fs.c_create("journal.torn.0")?;
    fs.c_sync("journal.torn.0")?;
    fs.c_sync_dir()?;
    let mut fs = crash(s, fs)?;
    for (i, name) in names.iter().enumerate() {
        match survivor(&mut fs, name)? {
            None => {
                return Err(format!(
                    "{name}, created, written, synced and made durable by sync_dir, is gone after a crash"
                ))
            }
            Some(got) => expect_bytes(
                &format!("after a crash, read_all({name:?})"),
                &got,
                &pattern(22 + 100 * i, 50 + i as u64),
            )?,
        }
    }
    if survivor(&mut fs, "journal.torn.0")?.is_none() {
        return Err("journal.torn.0, created empty, synced and made durable by sync_dir, is gone after a crash".into());
    }
    Ok(())
}

/// After remove and sync_dir (how the executor removes a log), a crash never brings
/// the file back.
fn remove_durable_after_sync_dir<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_durable("0000000000000001-00000000.log", &pattern(100, 60))?;
    fs.c_durable("0000000000000002-00000000.log", &pattern(100, 61))?;
    fs.c_remove("0000000000000001-00000000.log")?;
    fs.c_sync_dir()?;
    let mut fs = crash(s, fs)?;
    expect_list(&mut fs, "after remove, sync_dir and a crash", &["0000000000000002-00000000.log"])
}

/// After rename over an existing file and sync_dir (how the executor replaces the
/// journal), a crash keeps the target with the source's data, and the source name
/// stays gone.
fn rename_durable_after_sync_dir<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    let (old, new) = (pattern(4000, 70), pattern(2500, 71));
    fs.c_durable("journal", &old)?;
    // ReplaceJournal: create the temporary file, write, sync it, rename, sync the directory.
    fs.c_create("journal.tmp")?;
    fs.c_truncate("journal.tmp", 0)?;
    fs.c_write("journal.tmp", 0, &new)?;
    fs.c_sync("journal.tmp")?;
    fs.c_rename("journal.tmp", "journal")?;
    fs.c_sync_dir()?;
    let mut fs = crash(s, fs)?;
    expect_list(&mut fs, "after rename(\"journal.tmp\", \"journal\"), sync_dir and a crash", &["journal"])?;
    expect_bytes("after the replace and a crash, read_all(\"journal\")", &fs.c_read_all("journal")?, &new)
}

/// Rename is atomic: a crash before the sync_dir leaves the old entries or the new
/// one, each file whole, never the target missing and never a mix.
fn rename_atomic_at_crash<S: Subject>(s: &mut S) -> Seen {
    // Several cases, so that a subject whose crashes keep a random part of the
    // unsynced state shows what it may leave.
    for case in 0..8u64 {
        let mut fs = s.fresh();
        let (old, new) = (pattern(3000, 80 + case), pattern(2000, 90 + case));
        let replace = case % 2 == 0;
        if replace {
            fs.c_durable("journal", &old)?;
        }
        fs.c_durable("journal.tmp", &new)?;
        fs.c_create("other")?; // an unsynced entry of its own, which may or may not survive
        fs.c_rename("journal.tmp", "journal")?;
        let mut fs = crash(s, fs)?;
        let journal = survivor(&mut fs, "journal")?;
        let tmp = survivor(&mut fs, "journal.tmp")?;
        let before = if replace { Some(&old) } else { None };
        let is_old = journal.as_ref() == before && tmp.as_ref() == Some(&new);
        let is_new = journal.as_ref() == Some(&new) && tmp.is_none();
        if !is_old && !is_new {
            let show = |f: &Option<Vec<u8>>, name: &str, old: Option<&Vec<u8>>| match (f, old) {
                (None, _) => format!("{name} missing"),
                (Some(b), _) if *b == new => format!("{name} with the source's bytes"),
                (Some(b), Some(o)) if b == o => format!("{name} with the old target's bytes"),
                (Some(b), _) => format!("{name} with {} other bytes", b.len()),
            };
            return Err(format!(
                "case {case} of 8: after rename(\"journal.tmp\", \"journal\"){} and a crash before sync_dir: {}, {}; \
                 expected the old state ({}) or the new one (journal with the source's bytes, journal.tmp missing)",
                if replace { " over an existing journal" } else { "" },
                show(&journal, "journal", before),
                show(&tmp, "journal.tmp", before),
                if replace { "both files as they were" } else { "journal missing, journal.tmp as it was" },
            ));
        }
    }
    Ok(())
}

// --- failed syncs ------------------------------------------------------------------------------

/// A sync_file whose write-back fails returns an error, never Ok: the executor halts
/// on it, and a hidden failure would acknowledge data that is lost.
fn failed_sync_reported<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_durable("journal", &pattern(1000, 100))?;
    fs.c_write("journal", 1000, &pattern(1000, 101))?;
    arm(s, &mut fs, Fault::FileSync)?;
    let r = fs.sync_file("journal");
    s.set_fault(&mut fs, None);
    if r.is_ok() {
        return Err("with a failed write-back injected (Fault::FileSync), sync_file(\"journal\") of unsynced data \
                    returned Ok"
            .into());
    }
    Ok(())
}

/// After a failed sync_file, data written again and then synced successfully is
/// durable (the executor recovers so, rewriting a log's header or the whole journal).
fn rewrite_after_failed_sync_durable<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    let base = pattern(1000, 110);
    fs.c_durable("a.log", &base)?;
    let lost = pattern(2000, 111);
    fs.c_write("a.log", 1000, &lost)?;
    arm(s, &mut fs, Fault::FileSync)?;
    // Whether this fails is failed-sync-reported's business; here it only loses data.
    let _ = fs.sync_file("a.log");
    s.set_fault(&mut fs, None);
    // Whatever the failed sync covered is unknown: write it all again, and sync.
    fs.c_write("a.log", 1000, &lost)?;
    let more = pattern(500, 112);
    fs.c_write("a.log", 3000, &more)?;
    fs.c_sync("a.log")?;
    let mut want = base.clone();
    want.extend_from_slice(&lost);
    want.extend_from_slice(&more);
    let mut fs = crash(s, fs)?;
    let got = survivor(&mut fs, "a.log")?.ok_or("a.log, created durably, is gone after a crash")?;
    expect_bytes(
        "after a failed sync_file, writing the same bytes again (and more), a successful sync_file and a crash, \
         read_all(\"a.log\")",
        &got,
        &want,
    )
}

/// A sync_dir that fails returns an error, never Ok.
fn failed_dir_sync_reported<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    fs.c_create("0000000000000001-00000000.log")?;
    fs.c_sync("0000000000000001-00000000.log")?;
    arm(s, &mut fs, Fault::DirSync)?;
    let r = fs.sync_dir();
    s.set_fault(&mut fs, None);
    if r.is_ok() {
        return Err("with a failed directory fsync injected (Fault::DirSync), sync_dir() returned Ok".into());
    }
    Ok(())
}

/// After a failed sync_dir, a successful one makes every entry list shows durable
/// (recovery creates a missing log again: create of the name, which may still be
/// listed, then sync_dir).
fn dir_sync_after_failure_durable<S: Subject>(s: &mut S) -> Seen {
    let mut fs = s.fresh();
    let log = "0000000000000001-00000000.log";
    fs.c_durable("journal", &pattern(100, 120))?;
    fs.c_create(log)?;
    fs.c_write(log, 0, &pattern(22, 121))?;
    fs.c_sync(log)?;
    arm(s, &mut fs, Fault::DirSync)?;
    // Whether this fails is failed-dir-sync-reported's business.
    let _ = fs.sync_dir();
    s.set_fault(&mut fs, None);
    // What recovery does: create the log again (the name may still be there), write its
    // header, sync it, sync the directory.
    fs.c_create(log)?;
    fs.c_write(log, 0, &pattern(22, 121))?;
    fs.c_sync(log)?;
    fs.c_sync_dir()?;
    let listed = fs.c_list()?;
    let mut fs = crash(s, fs)?;
    let after = fs.c_list()?;
    if after != listed {
        return Err(format!(
            "after a failed sync_dir, create of {log:?} again and a successful sync_dir, list() showed {listed:?}; \
             after a crash it shows {after:?}"
        ));
    }
    expect_bytes(&format!("after the crash, read_all({log:?})"), &fs.c_read_all(log)?, &pattern(22, 121))
}
