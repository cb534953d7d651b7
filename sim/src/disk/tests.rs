//! The simulated disk's own tests: its durability model, crash modes and faults.

use super::*;

const SS: usize = SECTOR_SIZE as usize;

fn disk() -> SimDisk {
    SimDisk::new(7)
}

/// A file with `data` whose content and entry are durable.
fn durable(d: &mut SimDisk, name: &str, data: &[u8]) {
    d.create(name).unwrap();
    d.write_at(name, 0, data).unwrap();
    d.sync_file(name).unwrap();
    d.sync_dir().unwrap();
    assert_eq!(d.unsynced_ops(), 0);
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) | 0x80).collect()
}

fn faults(f: impl FnOnce(&mut DiskFaults)) -> DiskFaults {
    let mut x = DiskFaults::default();
    f(&mut x);
    x
}

#[test]
fn unsynced_create_vanishes_under_drop_all() {
    let mut d = disk();
    d.create("a").unwrap();
    d.write_at("a", 0, b"hello").unwrap();
    assert_eq!(d.list().unwrap(), vec!["a".to_string()]);
    assert!(d.durable_names().is_empty());
    let r = d.crash_with(CrashMode::DropAll);
    assert_eq!((r.ops_applied, r.ops_dropped), (0, 2));
    assert!(d.list().unwrap().is_empty());
    assert_eq!(d.read_all("a"), Err(StorageError::NotFound("a".into())));
}

#[test]
fn synced_create_and_synced_dir_survive_every_mode() {
    for mode in CrashMode::ALL {
        for seed in 0..20 {
            let mut d = SimDisk::new(seed);
            durable(&mut d, "a", b"payload");
            d.crash_with(mode);
            assert_eq!(d.read_all("a").unwrap(), b"payload", "{mode:?} seed {seed}");
            assert_eq!(d.live_names(), vec!["a".to_string()]);
        }
    }
}

#[test]
fn synced_data_without_dir_sync_vanishes_with_its_entry() {
    let mut d = disk();
    d.create("a").unwrap();
    d.write_at("a", 0, b"data").unwrap();
    d.sync_file("a").unwrap();
    assert_eq!(d.unsynced_ops(), 1, "only the create is left");
    assert!(d.durable_file("a").is_none());
    d.crash_with(CrashMode::DropAll);
    assert!(d.live_names().is_empty());
}

#[test]
fn dir_sync_does_not_sync_data() {
    let mut d = disk();
    d.create("a").unwrap();
    d.write_at("a", 0, b"data").unwrap();
    d.sync_dir().unwrap();
    assert_eq!(d.durable_file("a"), Some(vec![]));
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all("a").unwrap(), b"");
}

#[test]
fn write_without_fsync_is_readable_but_lost_under_drop_all() {
    let mut d = disk();
    durable(&mut d, "a", b"old");
    d.write_at("a", 3, b"-new").unwrap();
    d.truncate("a", 10).unwrap();
    assert_eq!(d.read_all("a").unwrap(), b"old-new\0\0\0");
    assert_eq!(d.len("a").unwrap(), 10);
    assert_eq!(d.durable_file("a").unwrap(), b"old");
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all("a").unwrap(), b"old");
    assert_eq!(d.unsynced_ops(), 0);
}

#[test]
fn sync_file_makes_only_that_file_durable() {
    let mut d = disk();
    durable(&mut d, "a", b"");
    durable(&mut d, "b", b"");
    d.write_at("a", 0, b"A").unwrap();
    d.write_at("b", 0, b"B").unwrap();
    d.create("c").unwrap();
    d.sync_file("a").unwrap();
    assert_eq!(d.unsynced_ops(), 2);
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all("a").unwrap(), b"A");
    assert_eq!(d.read_all("b").unwrap(), b"");
    assert_eq!(d.live_names(), vec!["a".to_string(), "b".to_string()]);
}

#[test]
fn unlink_without_dir_sync_comes_back_with_durable_content() {
    let mut d = disk();
    durable(&mut d, "a", b"durable");
    d.write_at("a", 0, b"DURABLE-but-unsynced").unwrap();
    d.remove("a").unwrap();
    assert!(d.list().unwrap().is_empty());
    assert_eq!(d.durable_names(), vec!["a".to_string()]);
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all("a").unwrap(), b"durable");
    // Once the directory is synced, the removal sticks.
    d.remove("a").unwrap();
    d.sync_dir().unwrap();
    for mode in CrashMode::ALL {
        let mut c = d.clone();
        c.crash_with(mode);
        assert!(c.live_names().is_empty());
    }
}

#[test]
fn rename_without_dir_sync_may_revert_and_is_atomic() {
    let (mut reverted, mut landed) = (0, 0);
    for mode in CrashMode::ALL {
        for seed in 0..40 {
            let mut d = SimDisk::new(seed);
            durable(&mut d, "journal", b"old journal");
            d.create("journal.tmp").unwrap();
            d.write_at("journal.tmp", 0, b"new journal").unwrap();
            d.sync_file("journal.tmp").unwrap();
            d.rename("journal.tmp", "journal").unwrap();
            assert_eq!(d.read_all("journal").unwrap(), b"new journal");
            assert_eq!(d.durable_file("journal").unwrap(), b"old journal");
            d.crash_with(mode);
            match d.read_all("journal").unwrap().as_slice() {
                b"old journal" => reverted += 1,
                b"new journal" => {
                    landed += 1;
                    assert!(!d.live_names().contains(&"journal.tmp".to_string()));
                }
                other => panic!("{mode:?} seed {seed}: journal is {other:?}"),
            }
            if mode == CrashMode::DropAll {
                assert_eq!(d.live_names(), vec!["journal".to_string()]);
            }
        }
    }
    assert!(reverted > 0 && landed > 0, "reverted {reverted}, landed {landed}");
    // After a directory sync the rename survives every crash.
    let mut d = disk();
    durable(&mut d, "x", b"1");
    d.rename("x", "y").unwrap();
    d.sync_dir().unwrap();
    for mode in CrashMode::ALL {
        let mut c = d.clone();
        c.crash_with(mode);
        assert_eq!(c.live_names(), vec!["y".to_string()]);
        assert_eq!(c.read_all("y").unwrap(), b"1");
    }
}

#[test]
fn broken_rename_leaves_both_names_or_neither() {
    let (mut both, mut neither) = (0, 0);
    for seed in 0..40 {
        let mut d = SimDisk::with_faults(seed, faults(|f| f.broken_rename = 1.0));
        durable(&mut d, "to", b"old");
        durable(&mut d, "from", b"new");
        d.rename("from", "to").unwrap();
        let r = d.crash_with(CrashMode::RandomSubset);
        if r.ops_applied == 0 {
            continue;
        }
        assert_eq!(r.renames_broken, 1);
        match d.live_names().len() {
            2 => {
                both += 1;
                assert_eq!(d.read_all("to").unwrap(), b"new");
                assert_eq!(d.read_all("from").unwrap(), b"new");
                // Renaming between two names of one file does nothing (POSIX).
                d.rename("from", "to").unwrap();
                assert_eq!(d.list().unwrap().len(), 2);
            }
            0 => neither += 1,
            n => panic!("seed {seed}: {n} names"),
        }
    }
    assert!(both > 0 && neither > 0);
    // Off by default.
    let mut d = disk();
    durable(&mut d, "from", b"new");
    d.rename("from", "to").unwrap();
    d.crash_with(CrashMode::Prefix);
    d.crash_with(CrashMode::RandomSubset);
    assert_eq!(d.counters().broken_renames, 0);
}

#[test]
fn prefix_applies_a_prefix_and_all_but_one_drops_exactly_one() {
    let names = ["a", "b", "c", "d", "e", "f"];
    let mut sizes = BTreeSet::new();
    for seed in 0..60 {
        let mut d = SimDisk::new(seed);
        for n in names {
            durable(&mut d, n, b"");
        }
        for n in names {
            d.write_at(n, 0, n.as_bytes()).unwrap();
        }
        let mut all_but_one = d.clone();
        let r = d.crash_with(CrashMode::Prefix);
        let applied: Vec<bool> = names.iter().map(|n| d.read_all(n).unwrap() == n.as_bytes()).collect();
        let k = applied.iter().take_while(|a| **a).count();
        assert!(applied[k..].iter().all(|a| !a), "seed {seed}: not a prefix: {applied:?}");
        assert_eq!((r.ops_applied, r.ops_dropped), (k, names.len() - k));
        sizes.insert(k);
        let r = all_but_one.crash_with(CrashMode::AllButOne);
        assert_eq!((r.ops_applied, r.ops_dropped), (names.len() - 1, 1));
        let lost = names.iter().filter(|n| all_but_one.read_all(n).unwrap().is_empty()).count();
        assert_eq!(lost, 1);
    }
    assert!(sizes.len() > 3, "prefix lengths seen: {sizes:?}");
}

#[test]
fn random_subset_mixes_files_and_counts_add_up() {
    let mut seen = BTreeSet::new();
    for seed in 0..60 {
        let mut d = SimDisk::new(seed);
        durable(&mut d, "a", b"");
        durable(&mut d, "b", b"");
        d.write_at("a", 0, b"1").unwrap();
        d.write_at("b", 0, b"2").unwrap();
        d.create("c").unwrap();
        let before = d.unsynced_ops();
        let r = d.crash_with(CrashMode::RandomSubset);
        assert_eq!(r.ops_applied + r.ops_dropped, before);
        assert_eq!(d.unsynced_ops(), 0);
        let state = (
            d.read_all("a").unwrap() == b"1",
            d.read_all("b").unwrap() == b"2",
            d.live_names().contains(&"c".to_string()),
        );
        seen.insert(state);
    }
    assert_eq!(seen.len(), 8, "every subset of three ops occurs: {seen:?}");
}

#[test]
fn torn_write_leaves_a_subset_of_sectors() {
    let old = pattern(8 * SS, 1);
    let new = pattern(8 * SS, 2);
    let mut mixed = 0;
    for seed in 0..40 {
        let mut d = SimDisk::new(seed);
        durable(&mut d, "a.log", &old);
        d.write_at("a.log", 0, &new).unwrap();
        let r = d.crash_with(CrashMode::OneTorn);
        assert_eq!((r.ops_applied, r.ops_torn), (1, 1));
        let got = d.read_all("a.log").unwrap();
        assert_eq!(got.len(), old.len());
        let mut kinds = BTreeSet::new();
        for s in 0..8 {
            let range = s * SS..(s + 1) * SS;
            let sector = &got[range.clone()];
            assert!(sector == &old[range.clone()] || sector == &new[range], "seed {seed}: sector {s} is neither");
            kinds.insert(sector == &new[s * SS..(s + 1) * SS]);
        }
        if kinds.len() == 2 {
            mixed += 1;
        }
    }
    assert!(mixed > 30, "only {mixed} of 40 torn writes mixed old and new sectors");
    assert_eq!(SimDisk::new(0).sector_size(), SECTOR_SIZE);
}

#[test]
fn torn_write_tears_at_absolute_sector_boundaries() {
    // A write from the middle of sector 0 to the middle of sector 2: three pieces.
    let old = pattern(3 * SS, 1);
    let new = pattern(2 * SS, 9);
    let mut outcomes = BTreeSet::new();
    for seed in 0..30 {
        let mut d = SimDisk::new(seed);
        durable(&mut d, "a", &old);
        d.write_at("a", SECTOR_SIZE / 2, &new).unwrap();
        d.crash_with(CrashMode::OneTorn);
        let got = d.read_all("a").unwrap();
        for (lo, hi) in [(SS / 2, SS), (SS, 2 * SS), (2 * SS, 2 * SS + SS / 2)] {
            let n = &new[lo - SS / 2..hi - SS / 2];
            assert!(got[lo..hi] == *n || got[lo..hi] == old[lo..hi], "seed {seed}: piece {lo}..{hi}");
            outcomes.insert((lo, got[lo..hi] == *n));
        }
        assert_eq!(got[..SS / 2], old[..SS / 2]);
    }
    assert_eq!(outcomes.len(), 6, "each piece both persisted and lost across seeds");
}

#[test]
fn torn_append_may_leave_zeros_or_garbage() {
    let head = pattern(100, 3);
    let tail = pattern(4 * SS, 4);
    let (mut longer, mut garbage, mut zeros) = (0, 0, 0);
    for seed in 0..80 {
        let mut d = SimDisk::new(seed);
        durable(&mut d, "a.log", &head);
        d.write_at("a.log", head.len() as u64, &tail).unwrap();
        d.crash_with(CrashMode::OneTorn);
        let got = d.read_all("a.log").unwrap();
        assert!(got.len() >= head.len() && got.len() <= head.len() + tail.len());
        assert_eq!(got[..head.len()], head[..]);
        if got.len() > head.len() {
            longer += 1;
        }
        for (lo, hi) in pieces(head.len() as u64, (head.len() + tail.len()) as u64) {
            let (lo, hi) = (lo as usize, (hi as usize).min(got.len()));
            if lo >= hi {
                continue;
            }
            let n = &tail[lo - head.len()..hi - head.len()];
            if got[lo..hi] == *n {
                continue;
            }
            if got[lo..hi].iter().all(|b| *b == 0) {
                zeros += 1;
            } else {
                garbage += 1;
            }
        }
    }
    assert!(longer > 0 && garbage > 0 && zeros > 0, "longer {longer}, garbage {garbage}, zeros {zeros}");
}

#[test]
fn torn_write_fault_tears_in_prefix_and_random_subset() {
    let old = pattern(6 * SS, 1);
    let new = pattern(6 * SS, 2);
    for mode in [CrashMode::Prefix, CrashMode::RandomSubset] {
        let mut torn = 0;
        for seed in 0..40 {
            let mut d = SimDisk::with_faults(seed, faults(|f| f.torn_write = 1.0));
            durable(&mut d, "a", &old);
            d.write_at("a", 0, &new).unwrap();
            torn += d.crash_with(mode).ops_torn;
            let got = d.read_all("a").unwrap();
            for s in 0..6 {
                let r = s * SS..(s + 1) * SS;
                assert!(got[r.clone()] == old[r.clone()] || got[r.clone()] == new[r]);
            }
        }
        assert!(torn > 0, "{mode:?} never tore");
    }
    // With the fault off, those modes never tear.
    for seed in 0..20 {
        let mut d = SimDisk::new(seed);
        durable(&mut d, "a", &old);
        d.write_at("a", 0, &new).unwrap();
        assert_eq!(d.crash_with(CrashMode::RandomSubset).ops_torn, 0);
        let got = d.read_all("a").unwrap();
        assert!(got == old || got == new);
    }
}

#[test]
fn fsync_failure_drops_data_from_the_durable_future() {
    let mut d = SimDisk::with_faults(1, faults(|f| f.fsync_failure = 1.0));
    durable(&mut d, "a.log", b"");
    assert_eq!(d.counters().fsync_failures, 0, "no dirty data, nothing to fail");
    d.write_at("a.log", 0, b"lost").unwrap();
    assert!(matches!(d.sync_file("a.log"), Err(StorageError::Io(_))));
    assert_eq!(d.counters().fsync_failures, 1);
    assert_eq!(d.counters().ops_dropped_by_fsync, 1);
    // Still readable from the cache...
    assert_eq!(d.read_all("a.log").unwrap(), b"lost");
    // ...and a later fsync succeeds without writing it.
    assert_eq!(d.sync_file("a.log"), Ok(()));
    assert_eq!(d.unsynced_ops(), 0);
    assert_eq!(d.durable_file("a.log").unwrap(), b"");
    for mode in CrashMode::ALL {
        let mut c = d.clone();
        c.crash_with(mode);
        assert_eq!(c.read_all("a.log").unwrap(), b"", "{mode:?}");
    }
    // Data written later is synced, over zeros where the lost write was.
    d.set_faults(DiskFaults::none());
    d.write_at("a.log", 4, b"kept").unwrap();
    d.sync_file("a.log").unwrap();
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all("a.log").unwrap(), b"\0\0\0\0kept");
}

#[test]
fn io_errors_change_nothing_but_a_write_prefix() {
    let mut d = SimDisk::new(3);
    durable(&mut d, "a", b"abc");
    d.set_faults(faults(|f| f.io_error = 1.0));
    let before = d.clone();
    assert!(matches!(d.create("b"), Err(StorageError::Io(_))));
    assert!(matches!(d.read_at("a", 0, 3), Err(StorageError::Io(_))));
    assert!(matches!(d.len("a"), Err(StorageError::Io(_))));
    assert!(matches!(d.truncate("a", 0), Err(StorageError::Io(_))));
    assert!(matches!(d.sync_file("a"), Err(StorageError::Io(_))));
    assert!(matches!(d.sync_dir(), Err(StorageError::Io(_))));
    assert!(matches!(d.rename("a", "b"), Err(StorageError::Io(_))));
    assert!(matches!(d.remove("a"), Err(StorageError::Io(_))));
    assert!(matches!(d.list(), Err(StorageError::Io(_))));
    assert!(matches!(d.write_at("a", 0, b"x"), Err(StorageError::Io(_))));
    assert_eq!(d.counters().io_errors, 10);
    assert_eq!(d.live_file("a"), before.live_file("a"));
    assert_eq!(d.live_names(), before.live_names());
    assert_eq!(d.unsynced_ops(), 0);
    // A failed multi-sector write applies a proper subset of its sectors (any, not
    // only a prefix; the file grows to the last one applied), or nothing.
    let data = pattern(4 * SS, 5);
    let (mut partial, mut with_gap) = (0, 0);
    for seed in 0..30 {
        let mut d = SimDisk::new(seed);
        durable(&mut d, "a", b"");
        d.set_faults(faults(|f| f.io_error = 1.0));
        assert!(d.write_at("a", 0, &data).is_err());
        let got = d.live_file("a").unwrap();
        assert!(got.len().is_multiple_of(SS) && got.len() <= data.len());
        let sectors: Vec<bool> = got.chunks(SS).enumerate().map(|(i, c)| c == &data[i * SS..(i + 1) * SS]).collect();
        for (i, c) in got.chunks(SS).enumerate() {
            assert!(sectors[i] || c.iter().all(|b| *b == 0), "seed {seed}: sector {i} is the data's or never written");
        }
        let applied = sectors.iter().filter(|s| **s).count();
        assert!(applied < 4, "seed {seed}: a proper subset");
        if !got.is_empty() {
            partial += 1;
            with_gap += usize::from(sectors.contains(&false));
            assert_eq!(d.unsynced_ops(), applied, "each applied sector is an ordinary unsynced write");
        }
        assert_eq!(d.counters().partial_writes, u64::from(!got.is_empty()));
    }
    assert!(with_gap > 0, "not only prefixes");
    assert!(partial > 0 && partial < 30);
}

const BS: usize = BLOCK_SIZE as usize;

#[test]
fn a_disk_at_capacity_stays_full_until_files_shrink_or_go() {
    let mut d = SimDisk::with_faults(3, faults(|f| f.capacity = 4 * BLOCK_SIZE));
    d.create("a.log").unwrap();
    d.write_at("a.log", 0, &[1; 3 * BS - 100]).unwrap(); // three blocks
    d.create("b.log").unwrap();
    d.write_at("b.log", 0, &[2; BS]).unwrap(); // the last one
    for _ in 0..3 {
        let r = d.write_at("b.log", BLOCK_SIZE, &[2; 200]);
        assert!(matches!(r, Err(StorageError::DiskFull(_))), "it stays full: {r:?}");
    }
    assert_eq!(d.len("b.log").unwrap(), BLOCK_SIZE, "nothing of those writes fitted");
    d.write_at("a.log", 0, &[3; 100]).unwrap(); // overwriting takes no new block
    d.write_at("a.log", 3 * BLOCK_SIZE - 100, &[3; 100]).unwrap(); // nor filling a block's end
    d.truncate("b.log", 10 * BLOCK_SIZE).unwrap(); // a hole takes no block
    assert_eq!(d.read_at("b.log", 5 * BLOCK_SIZE, 4).unwrap(), vec![0; 4], "a hole reads as zeros");
    assert!(matches!(d.write_at("b.log", 5 * BLOCK_SIZE, b"x"), Err(StorageError::DiskFull(_))));
    d.truncate("b.log", 1).unwrap(); // still one block
    d.remove("a.log").unwrap();
    d.write_at("b.log", 1, &[2; 3 * BS]).unwrap();
    assert_eq!(d.counters().out_of_space, 4);
    d.set_faults_enabled(false);
    d.write_at("b.log", 0, &[2; 5 * BS]).unwrap(); // space added: faults off
}

/// The full disk of a 6 MiB tmpfs: a journal of 8269 bytes holds three blocks, and an
/// append of 4044 bytes with no block free writes the 4019 bytes its third block has
/// room for, grows the file by them, then fails, as `write(2)` does.
#[test]
fn a_write_on_a_full_disk_writes_what_fits_then_fails() {
    let mut d = SimDisk::with_faults(1, faults(|f| f.capacity = 3 * BLOCK_SIZE));
    durable(&mut d, "journal", &pattern(8269, 1));
    let commit = pattern(4044, 2);
    let r = d.write_at("journal", 8269, &commit);
    assert!(matches!(r, Err(StorageError::DiskFull(_))), "{r:?}");
    let got = d.live_file("journal").unwrap();
    assert_eq!(got.len(), 3 * BS, "grown by what fitted");
    assert_eq!(got[8269..], commit[..3 * BS - 8269]);
    assert_eq!(d.unsynced_ops(), 1, "the prefix is an ordinary unsynced write");
    assert_eq!((d.counters().out_of_space, d.counters().short_writes), (1, 1));
    // The prefix is as durable as any write: fsynced, it survives a crash (faults off
    // for the fsync, which on a disk this full may fail for lack of space).
    d.set_faults_enabled(false);
    d.sync_file("journal").unwrap();
    d.crash_with(CrashMode::DropAll);
    d.set_faults_enabled(true);
    assert_eq!(d.read_all("journal").unwrap(), got);
    // A retry at the same offset rewrites the same prefix and fails the same way.
    assert!(d.write_at("journal", 8269, &commit).is_err());
    assert_eq!(d.live_file("journal").unwrap(), got);
}

#[test]
fn an_injected_full_disk_may_write_part_of_a_write_first() {
    let data = pattern(4 * BS, 3);
    let mut lengths = BTreeSet::new();
    for seed in 0..40 {
        let mut d = SimDisk::new(seed);
        durable(&mut d, "a", b"");
        d.set_faults(faults(|f| f.disk_full = 1.0));
        assert!(matches!(d.write_at("a", 100, &data), Err(StorageError::DiskFull(_))));
        let got = d.live_file("a").unwrap();
        if !got.is_empty() {
            assert!(got.len().is_multiple_of(BS) && got.len() < 100 + data.len(), "ends at a block boundary");
            assert_eq!(got[100..], data[..got.len() - 100]);
        }
        lengths.insert(got.len());
    }
    assert_eq!(lengths, [0, BS, 2 * BS, 3 * BS, 4 * BS].into_iter().collect(), "none, or some of its blocks");
}

#[test]
fn a_create_or_rename_on_a_full_disk_may_fail_or_not() {
    let (mut refused, mut done) = (0, 0);
    for seed in 0..40 {
        let mut d = SimDisk::with_faults(seed, faults(|f| f.capacity = BLOCK_SIZE));
        d.create("a").unwrap();
        d.write_at("a", 0, b"full").unwrap();
        for r in [d.create("b"), d.rename("a", "c")] {
            match r {
                Ok(()) => done += 1,
                Err(StorageError::DiskFull(_)) => refused += 1,
                other => panic!("seed {seed}: {other:?}"),
            }
        }
        d.remove(if d.live_names().contains(&"c".to_string()) { "c" } else { "a" }).unwrap();
        let _ = d.remove("b");
        d.create("d").unwrap(); // no longer full
    }
    assert!(refused > 10 && done > 10, "refused {refused}, done {done}");
}

#[test]
fn allocate_takes_every_block_or_fails_having_taken_some() {
    let mut d = SimDisk::with_faults(1, faults(|f| f.capacity = 8 * BLOCK_SIZE));
    durable(&mut d, "r", b"");
    d.allocate("r", 3 * BLOCK_SIZE + 1).unwrap();
    assert_eq!(d.len("r").unwrap(), 3 * BLOCK_SIZE + 1);
    assert_eq!(d.read_all("r").unwrap(), vec![0; 3 * BS + 1]);
    d.allocate("r", 10).unwrap(); // already as long: nothing changes
    assert_eq!(d.len("r").unwrap(), 3 * BLOCK_SIZE + 1);
    d.sync_file("r").unwrap();
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.len("r").unwrap(), 3 * BLOCK_SIZE + 1, "the size is data: durable once synced");
    // Four blocks left: asking for six more fails, having taken none, some or all four.
    let mut grown = BTreeSet::new();
    for seed in 0..40 {
        let mut d = SimDisk::with_faults(seed, faults(|f| f.capacity = 8 * BLOCK_SIZE));
        d.create("r").unwrap();
        d.create("w").unwrap();
        d.allocate("r", 4 * BLOCK_SIZE).unwrap();
        assert!(matches!(d.allocate("r", 10 * BLOCK_SIZE), Err(StorageError::DiskFull(_))));
        let len = d.len("r").unwrap();
        assert!(len.is_multiple_of(BLOCK_SIZE) && len <= 8 * BLOCK_SIZE);
        grown.insert(len / BLOCK_SIZE);
        // What it took is taken: the disk holds no more than its capacity.
        let free = 8 - len / BLOCK_SIZE;
        let r = d.write_at("w", 0, &vec![1; (free as usize + 1) * BS]);
        assert!(r.is_err() && d.len("w").unwrap() == free * BLOCK_SIZE, "seed {seed}");
    }
    assert_eq!(grown, (4..=8).collect(), "none, some or all of what was free");
}

#[test]
fn a_failed_fsync_reports_an_io_error_or_a_full_volume() {
    let mut kinds = BTreeSet::new();
    for seed in 0..20 {
        let mut d = SimDisk::with_faults(seed, faults(|f| f.fsync_failure = 1.0));
        durable(&mut d, "a", b"");
        d.write_at("a", 0, b"x").unwrap();
        match d.sync_file("a") {
            Err(StorageError::Io(_)) => kinds.insert("io"),
            Err(StorageError::DiskFull(_)) => kinds.insert("full"),
            other => panic!("{other:?}"),
        };
        assert_eq!(d.unsynced_ops(), 0, "dropped either way");
    }
    assert_eq!(kinds.len(), 2);
}

#[test]
fn a_file_system_mounted_read_only_refuses_every_change_and_reads() {
    let mut d = disk();
    durable(&mut d, "a", b"old");
    d.write_at("a", 0, b"new").unwrap();
    d.create("b").unwrap();
    d.set_read_only(Some(ReadOnly::Mounted));
    assert_eq!(d.unsynced_ops(), 0, "a remount makes everything durable first");
    assert_eq!(d.durable_file("a").unwrap(), b"new");
    let refused = |r: Result<(), StorageError>| matches!(r, Err(StorageError::PermissionDenied(_)));
    assert!(refused(d.create("c")));
    assert!(refused(d.write_at("a", 0, b"x")));
    assert!(refused(d.truncate("a", 0)));
    assert!(refused(d.allocate("a", 100)));
    assert!(refused(d.rename("a", "c")));
    assert!(refused(d.remove("a")));
    assert_eq!(d.read_all("a").unwrap(), b"new");
    assert_eq!(d.list().unwrap(), vec!["a".to_string(), "b".to_string()]);
    assert_eq!(d.sync_dir(), Ok(()), "nothing to sync");
    // A create of an existing name, and an fsync, open the file for writing: refused or not.
    let outcomes: BTreeSet<bool> = (0..20).map(|_| d.create("a").is_ok()).collect();
    assert_eq!(outcomes.len(), 2);
    let outcomes: BTreeSet<bool> = (0..20).map(|_| d.sync_file("a").is_ok()).collect();
    assert_eq!(outcomes.len(), 2);
    d.set_read_only(None);
    d.write_at("a", 0, b"x").unwrap();
}

#[test]
fn an_error_may_leave_the_file_system_read_only_until_a_reboot_or_a_repair() {
    let mut kinds = BTreeSet::new();
    for seed in 0..20 {
        let mut d = SimDisk::with_faults(seed, faults(|f| f.read_only_after_error = 1.0));
        durable(&mut d, "a", b"old");
        d.write_at("a", 0, b"new").unwrap();
        d.set_faults(faults(|f| {
            f.fsync_failure = 1.0;
            f.read_only_after_error = 1.0;
        }));
        assert!(d.sync_file("a").is_err());
        let ro = d.read_only().expect("read-only after the failure");
        kinds.insert(format!("{ro:?}"));
        assert_eq!(d.counters().read_only_turns, 1);
        assert!(matches!(d.write_at("a", 0, b"x"), Err(StorageError::PermissionDenied(_))));
        assert!(matches!(d.create("c"), Err(StorageError::PermissionDenied(_))));
        assert_eq!(d.read_all("a").unwrap(), b"new", "the lost write stays in the page cache");
        if ro == ReadOnly::Aborted {
            assert_eq!(d.create("a"), Ok(()), "an existing file still opens for writing");
            // Nothing is left unsynced: it succeeds, or reports the earlier failure again
            // (ext4 answered EIO to a second fdatasync of a file whose write-back failed).
            let again: BTreeSet<&str> = (0..20)
                .map(|_| match d.sync_file("a") {
                    Ok(()) => "ok",
                    Err(StorageError::Io(_)) => "io",
                    Err(e) => panic!("{e:?}"),
                })
                .collect();
            assert_eq!(again.len(), 2);
        }
        let mut rebooted = d.clone();
        rebooted.crash_with(CrashMode::DropAll);
        assert_eq!(rebooted.read_only(), None);
        assert_eq!(rebooted.read_all("a").unwrap(), b"old");
        d.set_faults_enabled(false);
        assert_eq!(d.read_only(), None, "repaired");
    }
    // One made read-only on purpose stays so.
    let mut d = disk();
    d.set_read_only(Some(ReadOnly::Aborted));
    d.set_faults_enabled(false);
    assert_eq!(d.read_only(), Some(ReadOnly::Aborted));
    assert_eq!(kinds.len(), 2, "{kinds:?}");
}

#[test]
fn disk_full_on_writes_and_new_files() {
    let mut d = SimDisk::with_faults(2, faults(|f| f.disk_full = 1.0));
    assert!(matches!(d.create("a"), Err(StorageError::DiskFull(_))));
    assert!(d.live_names().is_empty());
    d.set_faults(DiskFaults::none());
    durable(&mut d, "a", b"x");
    d.set_faults(faults(|f| f.disk_full = 1.0));
    assert_eq!(d.create("a"), Ok(()), "creating an existing file allocates nothing");
    assert!(matches!(d.write_at("a", 1, b"y"), Err(StorageError::DiskFull(_))));
    assert_eq!(d.read_all("a").unwrap(), b"x");
    assert_eq!(d.counters().disk_full, 2);
    assert_eq!(d.unsynced_ops(), 0);
    // Reads, syncs and removals never report a full disk.
    d.sync_file("a").unwrap();
    d.remove("a").unwrap();
    // A file past the size limit is refused without counting a fault.
    let mut d = disk();
    d.create("big").unwrap();
    assert!(matches!(d.write_at("big", MAX_FILE_LEN, b"z"), Err(StorageError::DiskFull(_))));
    assert!(matches!(d.truncate("big", MAX_FILE_LEN + 1), Err(StorageError::DiskFull(_))));
    assert_eq!(d.counters().disk_full, 0);
}

#[test]
fn bit_rot_is_deterministic_and_healed_by_a_durable_rewrite() {
    let data = pattern(4 * SS, 6);
    let mut d = SimDisk::with_faults(5, faults(|f| f.bit_rot = 1.0));
    d.create("0000000000000001-00000000.log").unwrap();
    let name = "0000000000000001-00000000.log";
    d.write_at(name, 0, &data).unwrap();
    d.sync_file(name).unwrap();
    d.sync_dir().unwrap();
    d.set_faults(DiskFaults::none());
    assert_eq!(d.counters().bit_rot_sectors, 1);
    assert_eq!(d.rotted_files(), vec![name.to_string()]);
    let bad = *d.files.values().next().unwrap().rot.iter().next().unwrap() as usize;
    let first = d.read_all(name).unwrap();
    assert_ne!(first, data);
    assert!(d.live_file_rotted(name));
    for s in 0..4 {
        let r = s * SS..(s + 1) * SS;
        assert_eq!(first[r.clone()] == data[r.clone()], s != bad, "sector {s}");
        assert!(first[r.clone()].iter().zip(&data[r]).all(|(a, b)| a != b) || s != bad, "every byte differs");
    }
    // Retries never heal it; partial reads see the same bad bytes; crashes keep it.
    assert_eq!(d.read_all(name).unwrap(), first);
    assert_eq!(d.read_at(name, (bad * SS + 10) as u64, 7).unwrap(), first[bad * SS + 10..bad * SS + 17]);
    assert_eq!(d.durable_file(name).unwrap(), first);
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all(name).unwrap(), first);
    // A partial rewrite of the bad sector does not heal it.
    d.write_at(name, (bad * SS) as u64, &data[bad * SS..bad * SS + 10]).unwrap();
    assert_ne!(d.read_all(name).unwrap(), data);
    assert!(d.live_file_rotted(name));
    // A whole-sector rewrite heals reads at once, but the medium only once synced.
    let sector = data[bad * SS..(bad + 1) * SS].to_vec();
    d.write_at(name, (bad * SS) as u64, &sector).unwrap();
    assert_eq!(d.read_all(name).unwrap(), data);
    assert!(!d.live_file_rotted(name), "the rewrite made every byte a read returns clean");
    let mut unsynced = d.clone();
    unsynced.crash_with(CrashMode::DropAll);
    assert_eq!(unsynced.read_all(name).unwrap(), first, "the unsynced rewrite was lost");
    d.sync_file(name).unwrap();
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all(name).unwrap(), data);
}

#[test]
fn bit_rot_hits_any_synced_file_in_any_sector() {
    let mut d = SimDisk::with_faults(9, faults(|f| f.bit_rot = 1.0));
    for name in ["journal", "journal.tmp", "journal.torn.0", "a.log"] {
        d.create(name).unwrap();
        for i in 0..20u64 {
            d.write_at(name, i * 100, &pattern(100, i as u8)).unwrap();
            d.sync_file(name).unwrap();
        }
    }
    d.sync_dir().unwrap();
    assert_eq!(d.rotted_files(), vec!["a.log", "journal", "journal.tmp", "journal.torn.0"]);
    assert!(d.counters().rot_journal_sectors > 0);
    assert!(d.counters().rot_journal_sectors < d.counters().bit_rot_sectors, "a.log's are not the journal's");
    // Any durable sector may rot, a lone, partly filled last one included.
    d.create("b.log").unwrap();
    d.write_at("b.log", 0, b"x").unwrap();
    d.sync_file("b.log").unwrap();
    assert!(d.rotted_files().contains(&"b.log".to_string()));
    let id = d.live_dir["b.log"];
    assert_eq!(d.files[&id].rot.iter().copied().collect::<Vec<_>>(), vec![0], "its only sector");
    // What a read returns differs from the bytes without rot exactly there.
    assert_ne!(d.live_file("b.log"), d.live_file_unrotted("b.log"));
    assert_eq!(d.live_file_unrotted("b.log").unwrap(), b"x");
}

#[test]
fn truncate_past_a_bad_sector_drops_it_once_durable() {
    let data = pattern(3 * SS, 6);
    let mut d = SimDisk::new(1);
    durable(&mut d, "a.log", &data);
    d.files.values_mut().next().unwrap().rot.insert(2);
    d.truncate("a.log", 2 * SECTOR_SIZE).unwrap();
    d.write_at("a.log", 2 * SECTOR_SIZE, &data[2 * SS..]).unwrap();
    assert_eq!(d.read_all("a.log").unwrap(), data, "cut and rewritten in the live image");
    d.sync_file("a.log").unwrap();
    d.crash_with(CrashMode::DropAll);
    assert_eq!(d.read_all("a.log").unwrap(), data);
}

#[test]
fn disabled_faults_inject_nothing() {
    let all = faults(|f| {
        f.io_error = 1.0;
        f.disk_full = 1.0;
        f.fsync_failure = 1.0;
        f.bit_rot = 1.0;
        f.torn_write = 1.0;
        f.broken_rename = 1.0;
    });
    let mut d = SimDisk::with_faults(4, all);
    d.set_faults_enabled(false);
    assert!(!d.faults_enabled());
    durable(&mut d, "a.log", &pattern(2 * SS, 1));
    d.write_at("a.log", 0, &pattern(2 * SS, 2)).unwrap();
    d.rename("a.log", "b.log").unwrap();
    d.crash_with(CrashMode::RandomSubset);
    assert_eq!(
        d.counters(),
        FaultCounters {
            crashes: 1,
            ops_dropped_by_crash: d.counters().ops_dropped_by_crash,
            ..FaultCounters::default()
        }
    );
    d.set_faults_enabled(true);
    assert!(d.list().is_err());
}

#[test]
fn crash_counters_and_reports_agree() {
    let mut d = SimDisk::new(11);
    let mut dropped = 0;
    for i in 0..10 {
        d.create(&format!("f{i}")).unwrap();
        d.write_at(&format!("f{i}"), 0, &pattern(3 * SS, i)).unwrap();
        let before = d.unsynced_ops();
        let r = d.crash();
        assert_eq!(r.ops_applied + r.ops_dropped, before);
        dropped += r.ops_dropped as u64;
    }
    assert_eq!(d.counters().crashes, 10);
    assert_eq!(d.counters().ops_dropped_by_crash, dropped);
}

/// A random mix of every operation with every fault switched on, then a crash.
fn random_run(seed: u64) -> (SimDisk, Vec<String>) {
    let mut d = SimDisk::with_faults(
        seed,
        DiskFaults {
            io_error: 0.05,
            disk_full: 0.05,
            fsync_failure: 0.1,
            bit_rot: 0.2,
            torn_write: 0.5,
            broken_rename: 0.2,
            read_only_after_error: 0.1,
            capacity: 3 * BLOCK_SIZE,
        },
    );
    let mut w = SimRng::new(seed ^ 0xabcd);
    let names = ["a.log", "b.log", "journal", "journal.tmp"];
    let mut trace = Vec::new();
    for step in 0..400 {
        let name = *w.pick(&names).unwrap();
        let other = *w.pick(&names).unwrap();
        let r = match w.below(10) {
            0 => d.create(name).map(|_| String::new()),
            1 | 2 => {
                let mut buf = vec![0u8; w.below(3 * SECTOR_SIZE) as usize];
                w.fill(&mut buf);
                d.write_at(name, w.below(2048), &buf).map(|_| String::new())
            }
            3 => d.read_at(name, w.below(2048), 700).map(|b| format!("{b:?}")),
            4 => d.truncate(name, w.below(1500)).map(|_| String::new()),
            5 => d.sync_file(name).map(|_| String::new()),
            6 => d.sync_dir().map(|_| String::new()),
            7 => d.rename(name, other).map(|_| String::new()),
            8 => d.remove(name).map(|_| String::new()),
            _ => d.list().map(|l| l.join(",")),
        };
        trace.push(format!("{step}: {r:?}"));
        if step % 97 == 96 {
            trace.push(format!("{:?}", d.crash()));
        }
    }
    trace.push(format!("{:?}", d.crash()));
    (d, trace)
}

#[test]
fn same_seed_same_everything() {
    for seed in [1, 3, 99] {
        let (a, ta) = random_run(seed);
        let (b, tb) = random_run(seed);
        assert_eq!(ta, tb);
        assert_eq!(a.state_hash(), b.state_hash());
        assert_eq!(a.counters(), b.counters());
        assert_eq!(a.durable_names(), b.durable_names());
        assert_eq!(a.live_names(), b.live_names());
        assert_eq!(a.rotted_files(), b.rotted_files());
        for n in a.durable_names() {
            assert_eq!(a.durable_file(&n), b.durable_file(&n));
            assert_eq!(a.live_file(&n), b.live_file(&n));
        }
        let c = a.counters();
        assert!(c.io_errors > 0 && c.disk_full > 0 && c.read_only_turns > 0 && c.crashes == 5, "{c:?}");
    }
    assert_ne!(random_run(1).0.state_hash(), random_run(2).0.state_hash());
}
