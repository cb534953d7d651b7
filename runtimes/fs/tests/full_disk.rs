//! On a full disk and on a read-only data directory: reads work and write nothing,
//! `delete` still fits (the journal reserve), and removal gives the space back. Needs
//! root to mount a small tmpfs; elsewhere it says so in one line and passes.

mod common;

use common::{cli, cli_ok};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small tmpfs, unmounted (and its mount point removed) on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(tag: &str, size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("broker-fs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&dir).status();
        if !ok.is_ok_and(|s| s.success()) {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(Tmpfs(dir))
    }

    fn remount(&self, options: &str) {
        let ok = Command::new("mount").args(["-o", &format!("remount,{options}")]).arg(&self.0).status().unwrap();
        assert!(ok.success(), "remount {options}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn fill(mount: &Path) {
    let big = vec![0u8; 64 << 10];
    let mut f = std::fs::File::create(mount.join("filler")).unwrap();
    use std::io::Write;
    while f.write_all(&big).is_ok() {}
    let _ = f.sync_all();
}

fn free_bytes(mount: &Path) -> u64 {
    let out = Command::new("df").args(["--output=avail", "-B1"]).arg(mount).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
}

#[test]
fn a_full_disk_serves_reads_takes_a_delete_and_gets_its_space_back() {
    let Some(tmpfs) = Tmpfs::mount("full", "3m") else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs it)");
        return;
    };
    let d = &tmpfs.0.join("data");
    cli_ok(d, &["create", "keep", "--partitions", "2"]);
    cli_ok(d, &["create", "big", "--partitions", "1"]);
    cli_ok(d, &["produce", "keep", "a", "b", "c"]);
    let out = cli(d, &["produce", "big"], &format!("{}\n", "x".repeat(900_000)));
    assert!(out.status.success());
    fill(&tmpfs.0);
    assert!(free_bytes(&tmpfs.0) < 64 << 10, "the disk is full");

    assert!(cli_ok(d, &["list"]).contains("keep"));
    assert!(cli_ok(d, &["describe", "keep"]).contains("partitions  2"));
    assert!(cli_ok(d, &["status"]).contains("topics: 2 live"));
    assert!(cli_ok(d, &["fetch", "keep", "--partition", "0", "--offset", "0"]).contains("value a"));
    // Writes that need space fail with a message naming the full disk.
    let refused = cli(d, &["--timeout", "2", "produce", "keep"], &format!("{}\n", "y".repeat(200_000)));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("No space left"), "{refused:?}");

    // The tombstone fits, and the removal frees the space.
    assert!(cli_ok(d, &["delete", "big"]).contains("tombstone is durable"));
    cli_ok(d, &["--timeout", "10", "recover"]);
    assert!(free_bytes(&tmpfs.0) > 800_000, "the big log's space came back");
    assert!(!cli_ok(d, &["list"]).contains("big"));
    cli_ok(d, &["produce", "keep", "d"]);
    let fetched = cli_ok(d, &["fetch", "keep", "--partition", "0", "--offset", "0"]);
    assert!(fetched.contains("value a") && fetched.contains("value c"), "{fetched}");
    assert!(cli_ok(d, &["fetch", "keep", "--partition", "1", "--offset", "0"]).contains("value b"));
}

/// A user's session on a 6 MiB tmpfs: 30,000-byte records produced one command at a
/// time until one meets the full disk (the broker halts, exit 3), then `delete --wait`,
/// then any command. The tombstone's journal append was cut short by the full disk
/// (tmpfs writes what fits), and the retry after releasing the reserve appended after
/// the partial commit: every later command refused the journal ("both copies of a
/// commit are damaged ... restore the directory from a backup").
#[test]
fn a_disk_filled_by_produces_takes_a_delete_and_starts_again() {
    let Some(tmpfs) = Tmpfs::mount("fill", "6m") else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs it)");
        return;
    };
    let d = &tmpfs.0.join("data");
    cli_ok(d, &["create", "fill", "--partitions", "1"]);
    let value = "a".repeat(30_000);
    let mut produced = 0;
    loop {
        let out = cli(d, &["produce", "fill", &value], "");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "a full disk halts the broker: {err}");
            assert!(err.contains("No space left"), "{err}");
            break;
        }
        produced += 1;
        assert!(produced < 400, "the disk never filled");
    }
    assert!(produced > 100, "full after {produced} records");
    assert!(cli_ok(d, &["delete", "fill", "--wait"]).contains("logs are removed"));
    // Every command works again: the journal starts, a topic is created and written.
    assert!(cli_ok(d, &["recover"]).contains("pending deletions: none"));
    cli_ok(d, &["create", "after", "--partitions", "1"]);
    let produced = cli_ok(d, &["--json", "produce", "after", "x"]);
    let at: serde_json::Value = serde_json::from_str(produced.trim()).unwrap();
    let offset = at["offset"].as_u64().unwrap().to_string();
    assert!(cli_ok(d, &["fetch", "after", "--partition", "0", "--offset", &offset]).contains("value x"));
    assert!(free_bytes(&tmpfs.0) > 4 << 20, "the filled log's space came back");
}

#[test]
fn a_read_only_directory_serves_reads_and_says_why_writes_fail() {
    let Some(tmpfs) = Tmpfs::mount("ro", "2m") else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs it)");
        return;
    };
    let d = &tmpfs.0.join("data");
    cli_ok(d, &["create", "t", "--partitions", "1"]);
    cli_ok(d, &["produce", "t", "one", "two"]);
    tmpfs.remount("ro");
    assert!(cli_ok(d, &["list"]).contains('t'));
    assert!(cli_ok(d, &["status"]).contains("topics: 1 live"));
    let fetched = cli_ok(d, &["fetch", "t", "--partition", "0", "--offset", "0"]);
    assert!(fetched.contains("value one") && fetched.contains("value two"), "{fetched}");
    let refused = cli(d, &["--timeout", "2", "produce", "t", "three"], "");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("Read-only file system") || err.contains("read-only"), "{err}");
    tmpfs.remount("rw");
}
