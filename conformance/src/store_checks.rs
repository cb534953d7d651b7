//! The shared-store checks: the contract of `broker_core::cluster::store`, which the
//! cluster's nodes rely on. Each is a function with a doc comment stating its rule;
//! [`all`] pairs it with its [`Check`].
//!
//! A check drives the store through [`StoreOp`]s only. An operation the rule does not
//! cover, but the check needs to succeed, fails the check with the operation and its
//! error: a check run against a correct store that is unreachable fails, it never
//! passes by doing nothing.
//!
//! No check needs a key that is also the start of others' path (`a/b` beside
//! `a/b/c`): the cluster's layout never makes one, and a store in a file system cannot
//! hold both.

use crate::checks::{differ, pattern, Run};
use crate::{Check, StoreSubject};
use broker_core::cluster::store::{StoreOp, StoreOutput};
use broker_core::Bytes;

type Seen = Result<(), String>;

/// Every check, in order, with its body.
pub(crate) fn all<S: StoreSubject>() -> Vec<(Check, Run<S>)> {
    fn plain(name: &'static str, rule: &'static str) -> Check {
        Check { name, rule, needs_crash: false, needs_fault: None }
    }
    vec![
        (
            plain("fresh-store-is-empty", "a fresh store lists no key, and a Get of any key is Missing"),
            fresh_store_is_empty::<S>,
        ),
        (
            plain(
                "create-then-get",
                "Create of an absent key is Created, and Get then returns exactly its bytes (empty, small or \
                 several MiB)",
            ),
            create_then_get::<S>,
        ),
        (
            plain(
                "create-existing-keeps-first",
                "Create of a key that exists is Exists and writes nothing: Get still returns the first bytes",
            ),
            create_existing_keeps_first::<S>,
        ),
        (
            plain(
                "list-in-byte-order",
                "List returns the keys that start with its prefix (a prefix of bytes, not of path segments), in \
                 byte order ('-' before '/' before '0'), each once",
            ),
            list_in_byte_order::<S>,
        ),
        (
            plain(
                "list-pages-continue",
                "a listing that goes on from each page's last key while the page says more follow returns every \
                 key once, in order; no page holds more keys than its limit",
            ),
            list_pages_continue::<S>,
        ),
        (
            plain(
                "list-after-bounds",
                "List returns only keys after `after`: an `after` before the prefix's keys lists them all, one past \
                 them lists none and says no more follow",
            ),
            list_after_bounds::<S>,
        ),
        (
            plain(
                "delete-removes",
                "Delete is Deleted, also of an absent key; a deleted key is Missing to Get, absent from List, and \
                 can be created again",
            ),
            delete_removes::<S>,
        ),
        (
            plain(
                "foreign-keys-listed",
                "keys outside the layout (another writer's) are listed in order with the layout's own, and read \
                 back like them",
            ),
            foreign_keys_listed::<S>,
        ),
        (
            plain(
                "create-race-one-winner",
                "of several Creates of one key racing (issued together where the subject can), exactly one is \
                 Created, the others Exists, and Get returns the winner's bytes",
            ),
            create_race_one_winner::<S>,
        ),
    ]
}

/// Runs `op` and returns its output, or what to report when it failed.
fn run<S: StoreSubject>(subject: &mut S, store: &mut S::Store, op: StoreOp) -> Result<StoreOutput, String> {
    let shown = shown(&op);
    subject.run(store, op).map_err(|e| format!("{shown} failed: {e}"))
}

/// An operation as a check's message names it (without its bytes).
fn shown(op: &StoreOp) -> String {
    match op {
        StoreOp::Create { key, bytes } => format!("Create {key:?} ({} bytes)", bytes.len()),
        StoreOp::Get { key } => format!("Get {key:?}"),
        StoreOp::List { prefix, after, limit } => format!("List {prefix:?} after {after:?} limit {limit}"),
        StoreOp::Delete { key } => format!("Delete {key:?}"),
    }
}

fn create<S: StoreSubject>(s: &mut S, store: &mut S::Store, key: &str, bytes: &[u8]) -> Result<StoreOutput, String> {
    run(s, store, StoreOp::Create { key: key.into(), bytes: Bytes::copy_from_slice(bytes) })
}

fn expect_created<S: StoreSubject>(s: &mut S, store: &mut S::Store, key: &str, bytes: &[u8]) -> Seen {
    match create(s, store, key, bytes)? {
        StoreOutput::Created => Ok(()),
        other => Err(format!("Create of absent key {key:?} gave {}", brief(&other))),
    }
}

fn get<S: StoreSubject>(s: &mut S, store: &mut S::Store, key: &str) -> Result<Option<Bytes>, String> {
    match run(s, store, StoreOp::Get { key: key.into() })? {
        StoreOutput::Found(bytes) => Ok(Some(bytes)),
        StoreOutput::Missing => Ok(None),
        other => Err(format!("Get {key:?} gave {}", brief(&other))),
    }
}

fn expect_bytes<S: StoreSubject>(s: &mut S, store: &mut S::Store, key: &str, want: &[u8]) -> Seen {
    match get(s, store, key)? {
        Some(got) if got[..] == *want => Ok(()),
        Some(got) => Err(format!("Get {key:?} returned {}", differ(&got, want))),
        None => Err(format!("Get {key:?} was Missing; it holds {} bytes", want.len())),
    }
}

/// One page: its keys and whether more follow.
fn list<S: StoreSubject>(
    s: &mut S,
    store: &mut S::Store,
    prefix: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<(Vec<String>, bool), String> {
    let op = StoreOp::List { prefix: prefix.into(), after: after.map(Into::into), limit };
    match run(s, store, op)? {
        StoreOutput::Listed { keys, more } => {
            if keys.len() > limit as usize {
                return Err(format!("List {prefix:?} with limit {limit} returned {} keys", keys.len()));
            }
            Ok((keys, more))
        }
        other => Err(format!("List {prefix:?} gave {}", brief(&other))),
    }
}

/// Every key under `prefix` after `after`, page by page as the nodes list.
fn list_all<S: StoreSubject>(
    s: &mut S,
    store: &mut S::Store,
    prefix: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<String>, String> {
    let mut all = Vec::new();
    let mut from = after.map(str::to_string);
    for _ in 0..10_000 {
        let (keys, more) = list(s, store, prefix, from.as_deref(), limit)?;
        all.extend(keys);
        if !more {
            return Ok(all);
        }
        if let Some(last) = all.last() {
            from = Some(last.clone());
        }
    }
    Err(format!("a listing of {prefix:?} still said more follow after 10,000 pages"))
}

fn brief(output: &StoreOutput) -> String {
    match output {
        StoreOutput::Found(bytes) => format!("Found ({} bytes)", bytes.len()),
        StoreOutput::Listed { keys, more } => format!("Listed {keys:?} (more: {more})"),
        other => format!("{other:?}"),
    }
}

fn expect_keys(what: &str, got: &[String], want: &[&str]) -> Seen {
    if got.iter().map(String::as_str).eq(want.iter().copied()) {
        Ok(())
    } else {
        Err(format!("{what} gave {got:?}, not {want:?}"))
    }
}

/// A fresh store lists no key, and a Get of any key is Missing.
fn fresh_store_is_empty<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    for prefix in ["", "j/", "d/"] {
        let keys = list_all(s, &mut store, prefix, None, 100)?;
        expect_keys(&format!("listing {prefix:?} of a fresh store"), &keys, &[])?;
    }
    match get(s, &mut store, "j/00000000000000000001")? {
        None => Ok(()),
        Some(b) => Err(format!("Get of a key never created found {} bytes", b.len())),
    }
}

/// Create of an absent key is Created, and Get then returns exactly its bytes.
fn create_then_get<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    let cases: [(&str, Vec<u8>); 3] = [
        ("j/00000000000000000001", pattern(100, 1)),
        ("j/00000000000000000002", Vec::new()),
        ("d/0000000000000001/0/00000000000000000000", pattern(8 << 20, 2)),
    ];
    for (key, bytes) in &cases {
        expect_created(s, &mut store, key, bytes)?;
    }
    for (key, bytes) in &cases {
        expect_bytes(s, &mut store, key, bytes)?;
    }
    Ok(())
}

/// Create of a key that exists is Exists and writes nothing.
fn create_existing_keeps_first<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    let key = "j/00000000000000000001";
    let first = pattern(300, 3);
    expect_created(s, &mut store, key, &first)?;
    match create(s, &mut store, key, &pattern(500, 4))? {
        StoreOutput::Exists => {}
        other => return Err(format!("a second Create of {key:?} gave {}", brief(&other))),
    }
    expect_bytes(s, &mut store, key, &first)
}

/// The keys of the order checks, created in this (unsorted) order.
const ORDER_KEYS: [&str; 9] = [
    "d/1/0/00000000000000000010",
    "a/b",
    "a0",
    "d/1/0/00000000000000000002",
    "a-b",
    "a/c/d",
    "d/10/0/00000000000000000000",
    "d/1-/x",
    "a/a",
];

/// List returns the keys under its prefix, in byte order, each once.
fn list_in_byte_order<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    for (i, key) in ORDER_KEYS.iter().enumerate() {
        expect_created(s, &mut store, key, &pattern(10, i as u64))?;
    }
    let mut sorted: Vec<&str> = ORDER_KEYS.to_vec();
    sorted.sort_unstable();
    expect_keys("listing \"\"", &list_all(s, &mut store, "", None, 100)?, &sorted)?;
    expect_keys("listing \"a/\"", &list_all(s, &mut store, "a/", None, 100)?, &["a/a", "a/b", "a/c/d"])?;
    expect_keys("listing \"a\"", &list_all(s, &mut store, "a", None, 100)?, &["a-b", "a/a", "a/b", "a/c/d", "a0"])?;
    expect_keys(
        "listing \"d/1\"",
        &list_all(s, &mut store, "d/1", None, 100)?,
        &["d/1-/x", "d/1/0/00000000000000000002", "d/1/0/00000000000000000010", "d/10/0/00000000000000000000"],
    )?;
    expect_keys(
        "listing \"d/1/\"",
        &list_all(s, &mut store, "d/1/", None, 100)?,
        &["d/1/0/00000000000000000002", "d/1/0/00000000000000000010"],
    )?;
    expect_keys("listing \"z\"", &list_all(s, &mut store, "z", None, 100)?, &[])
}

/// Paged listings return every key once, in order.
fn list_pages_continue<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    let keys: Vec<String> = (1..=25_u64).map(|i| format!("j/{i:020}")).collect();
    // Created from the last, so that no store lists them in order by accident.
    for key in keys.iter().rev() {
        expect_created(s, &mut store, key, b"entry")?;
    }
    let want: Vec<&str> = keys.iter().map(String::as_str).collect();
    for limit in [1, 2, 7, 25, 1000] {
        let got = list_all(s, &mut store, "j/", None, limit)?;
        expect_keys(&format!("listing \"j/\" in pages of {limit}"), &got, &want)?;
    }
    let got = list_all(s, &mut store, "j/", Some(&keys[9]), 4)?;
    expect_keys(&format!("listing \"j/\" after {:?}", keys[9]), &got, &want[10..])
}

/// List returns only keys after `after`.
fn list_after_bounds<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    for key in ["j/1", "j/2", "k/1", "i/1"] {
        expect_created(s, &mut store, key, b"x")?;
    }
    expect_keys("listing \"j/\" after \"a\"", &list_all(s, &mut store, "j/", Some("a"), 10)?, &["j/1", "j/2"])?;
    let (keys, more) = list(s, &mut store, "j/", Some("j/9"), 10)?;
    expect_keys("listing \"j/\" after \"j/9\"", &keys, &[])?;
    if more {
        return Err("listing \"j/\" after its last key said more follow".into());
    }
    let (keys, more) = list(s, &mut store, "j/", Some("z"), 10)?;
    expect_keys("listing \"j/\" after \"z\"", &keys, &[])?;
    if more {
        return Err("listing \"j/\" after \"z\" said more follow".into());
    }
    Ok(())
}

/// Delete removes a key, is Deleted also for an absent one, and the key can be created
/// again.
fn delete_removes<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    let (key, other) = ("d/0000000000000005/3/00000000000000000000", "d/0000000000000005/3/00000000000000000007");
    expect_created(s, &mut store, key, b"old")?;
    expect_created(s, &mut store, other, b"other")?;
    for round in ["first", "second"] {
        match run(s, &mut store, StoreOp::Delete { key: key.into() })? {
            StoreOutput::Deleted => {}
            out => return Err(format!("the {round} Delete of {key:?} gave {}", brief(&out))),
        }
    }
    if let Some(b) = get(s, &mut store, key)? {
        return Err(format!("Get of deleted {key:?} found {} bytes", b.len()));
    }
    let listed = list_all(s, &mut store, "d/", None, 10)?;
    expect_keys("listing \"d/\" after a delete", &listed, &[other])?;
    expect_created(s, &mut store, key, b"new")?;
    expect_bytes(s, &mut store, key, b"new")?;
    expect_bytes(s, &mut store, other, b"other")
}

/// Keys outside the layout are listed and read like the layout's own.
fn foreign_keys_listed<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    let keys = ["j/00000000000000000001", "j/README.txt", "j/00000000000000000002", "d/notes", "d/x/y/z"];
    for (i, key) in keys.iter().enumerate() {
        expect_created(s, &mut store, key, &pattern(20, i as u64))?;
    }
    expect_keys(
        "listing \"j/\"",
        &list_all(s, &mut store, "j/", None, 2)?,
        &["j/00000000000000000001", "j/00000000000000000002", "j/README.txt"],
    )?;
    expect_keys("listing \"d/\"", &list_all(s, &mut store, "d/", None, 1)?, &["d/notes", "d/x/y/z"])?;
    for (i, key) in keys.iter().enumerate() {
        expect_bytes(s, &mut store, key, &pattern(20, i as u64))?;
    }
    Ok(())
}

/// Of several racing Creates of one key, exactly one wins.
fn create_race_one_winner<S: StoreSubject>(s: &mut S) -> Seen {
    let mut store = s.fresh();
    let key = "j/00000000000000000042";
    let racers = 8;
    let bodies: Vec<Vec<u8>> = (0..racers).map(|i| pattern(64 + i, i as u64 + 100)).collect();
    let ops: Vec<StoreOp> =
        bodies.iter().map(|b| StoreOp::Create { key: key.into(), bytes: Bytes::copy_from_slice(b) }).collect();
    let results = s.race(&mut store, ops);
    let mut winners = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        match result {
            Ok(StoreOutput::Created) => winners.push(i),
            Ok(StoreOutput::Exists) => {}
            Ok(other) => return Err(format!("racing Create {i} gave {}", brief(&other))),
            Err(e) => return Err(format!("racing Create {i} failed: {e}")),
        }
    }
    match winners[..] {
        [winner] => expect_bytes(s, &mut store, key, &bodies[winner]),
        _ => Err(format!("{} of {racers} racing Creates of one key were Created: {winners:?}", winners.len())),
    }
}
