//! Real crash tests: `broker-fs serve` on a real directory, a seeded workload of
//! creates, produces, deletes and re-creates of the same names, `kill -9` at seeded
//! moments (with requests and deletions in flight), restart, and check:
//!
//! - durability: every acknowledged record reads back at its offset with its bytes;
//! - no resurrection: a topic whose deletion was acknowledged (or observed) never
//!   returns, and an incarnation only ever holds records produced to it;
//! - no orphans: every log on disk belongs to a live topic or a pending deletion, and
//!   once the directory has run to quiescence (`recover`), the logs on disk are
//!   exactly those of the live topics.
//!
//! `kill -9` ends the process but keeps the kernel's page cache, so this covers
//! process crashes, not power loss; the simulator covers lost unsynced writes.
//!
//! `BROKER_FS_CRASH_CYCLES` sets the number of kill -9 cycles (default 100) and
//! `BROKER_FS_CRASH_SEED` the seed (default 1).

mod common;

use common::{cli_ok, log_files, Server, TempDir};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// xorshift64*: a tiny deterministic generator, so a seed replays its workload.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One topic incarnation the test knows to be live.
#[derive(Debug, Clone)]
struct Inc {
    /// The test's own number for the create that made it; every value produced to it
    /// starts with `g{gen}-`.
    gen: u64,
    id: u64,
    partitions: u32,
    /// Acknowledged records: (partition, offset) to value.
    acked: BTreeMap<(u32, u64), String>,
}

/// A request cut off by a kill: it may or may not have taken effect.
#[derive(Debug, Clone)]
enum Uncertain {
    Create { name: String, gen: u64, partitions: u32 },
    Delete { name: String },
}

#[derive(Debug, Default)]
struct Model {
    live: BTreeMap<String, Inc>,
    deleted: BTreeSet<u64>,
    seen_ids: BTreeSet<u64>,
    uncertain: Option<Uncertain>,
    used_names: BTreeSet<String>,
    next_gen: u64,
    next_value: u64,
}

/// What the run did, for the summary line.
#[derive(Debug, Default)]
struct Stats {
    kills: u32,
    kills_with_request_in_flight: u32,
    restarts_with_pending_deletions: u32,
    quiescence_checks: u32,
    creates: u32,
    recreates: u32,
    deletes: u32,
    produced_records: u32,
    verified_records: u64,
}

const NAMES: [&str; 5] = ["orders", "payments", "audit.log", "clicks-v2", "a"];

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn kill_dash_nine_loses_no_acknowledged_record_and_resurrects_no_topic() {
    kill_cycles(env_u64("BROKER_FS_CRASH_CYCLES", 100), &[]);
}

/// The same under durability log-sync, where an acknowledged record's end reaches the
/// journal only later: every start must keep what the journal does not hold yet
/// (`recover`, run for the quiescence checks, follows the directory's setting).
#[test]
fn kill_dash_nine_under_log_sync_loses_no_acknowledged_record() {
    kill_cycles(env_u64("BROKER_FS_CRASH_CYCLES", 100) / 2, &["--durability", "log-sync:50"]);
}

/// A group commits ever larger positions, pipelined, and `kill -9` lands in the middle:
/// after each restart the group reads back its last acknowledged commit or a later one
/// that was in flight (never an earlier one, never one of another partition's), and a
/// deleted and re-created topic starts the group with nothing.
#[test]
fn kill_dash_nine_in_a_group_s_commits_keeps_the_last_acknowledged_one() {
    let seed = env_u64("BROKER_FS_CRASH_SEED", 1);
    let cycles = env_u64("BROKER_FS_CRASH_CYCLES", 100).min(40);
    let root = TempDir::new("kill9-groups");
    let dir = root.path().join("data");
    let log = root.path().join("serve.stderr");
    let mut rng = Rng::new(seed);
    let mut server = Server::start(&dir, &log);
    server
        .call(json!({ "CreateTopic": { "name": "orders", "partitions": 2, "settings": { "deletion_grace_ms": 0 } } }));
    // More records than the commits can reach (at most 30 a cycle, 40 cycles), so that
    // positions only grow and a read tells which commit it saw.
    const RECORDS: u64 = 1_500;
    let values: Vec<Value> = (0..RECORDS).map(|i| json!({ "value": format!("v{i}") })).collect();
    for p in 0..2 {
        server.call(json!({ "Produce": { "topic": "orders", "partition": p, "records": values } }));
    }
    let commit = |offset: u64| {
        let offsets =
            [json!({ "partition": 0, "offset": offset }), json!({ "partition": 1, "offset": RECORDS - offset })];
        json!({ "CommitOffsets": { "group": "billing", "topic": "orders", "offsets": offsets } })
    };
    let read = json!({ "FetchOffsets": { "group": "billing", "topic": "orders" } });
    // The offset of partition 0 the group last committed with an acknowledgement, and
    // the largest one sent since.
    let (mut acked, mut sent) = (None::<u64>, None::<u64>);
    let (mut cut_off, mut next) = (0, 1);
    for cycle in 0..cycles {
        let back = server.call(read.clone());
        let got: Vec<(u64, u64)> = back["Offsets"]["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["partition"].as_u64().unwrap(), o["offset"].as_u64().unwrap()))
            .collect();
        let ctx = format!("seed {seed}, cycle {cycle}: acknowledged {acked:?}, sent up to {sent:?}, read {got:?}");
        match (acked, got.as_slice()) {
            (None, []) => {}
            (_, [(0, a), (1, b)]) => {
                assert_eq!(a + b, RECORDS, "both partitions come from one commit: {ctx}");
                assert!(acked.is_none_or(|x| *a >= x) && sent.is_some_and(|s| *a <= s), "{ctx}");
                acked = Some(*a);
            }
            _ => panic!("{ctx}"),
        }
        sent = acked;
        let many = 1 + rng.below(30);
        let mut ids = Vec::new();
        for _ in 0..many {
            ids.push((server.send(commit(next)), next));
            sent = Some(next);
            next += 1;
        }
        if rng.chance(70) {
            std::thread::sleep(Duration::from_micros(rng.below(3000)));
        }
        let replies = server.kill();
        for (id, offset) in ids {
            match replies.get(&id) {
                Some(r) if r.get("ok").is_some() => acked = Some(offset),
                Some(r) => panic!("a commit failed: {r}"),
                None => cut_off += 1,
            }
        }
        server = Server::start(&dir, &log);
    }
    // The group's positions go with the topic, across a restart too.
    server.call(json!({ "DeleteTopic": { "name": "orders" } }));
    server
        .call(json!({ "CreateTopic": { "name": "orders", "partitions": 2, "settings": { "deletion_grace_ms": 0 } } }));
    server.kill();
    let mut server = Server::start(&dir, &log);
    assert_eq!(server.call(read)["Offsets"]["offsets"], json!([]), "a re-created topic inherits no position");
    server.close();
    eprintln!(
        "kill -9 in a group's commits: seed {seed}, {cycles} cycles, {cut_off} commits cut off by a kill, \
         {} sent, the last acknowledged at {acked:?}",
        next - 1
    );
    assert!(cut_off > 0 || cycles < 10, "no kill cut off a commit: the workload is too gentle");
    assert!(acked.is_some_and(|a| a > cycles), "the commits made progress: {acked:?}");
}

fn kill_cycles(cycles: u64, serve_args: &[&str]) {
    let seed = env_u64("BROKER_FS_CRASH_SEED", 1);
    let root = TempDir::new("kill9");
    let dir = root.path().join("data");
    let log = root.path().join("serve.stderr");
    let mut rng = Rng::new(seed);
    let mut model = Model::default();
    let mut stats = Stats::default();
    let started = Instant::now();
    let ctx = |cycle: u64| format!("seed {seed}, cycle {cycle} (replay: BROKER_FS_CRASH_SEED={seed})");

    for cycle in 0..cycles {
        let mut server = Server::start_with(&dir, &log, serve_args);
        let pending = check_after_restart(&mut server, &mut model, &dir, &mut stats, &ctx(cycle));
        if pending > 0 {
            stats.restarts_with_pending_deletions += 1;
        }
        let ops = 1 + rng.below(8);
        let mut in_flight = BTreeMap::new();
        for i in 0..ops {
            let last = i + 1 == ops;
            let kill_mid_request = last && rng.chance(50);
            if !kill_mid_request {
                step(&mut server, &mut model, &mut rng, &mut stats);
                continue;
            }
            // Leave this one in flight: kill at once, or after a short seeded delay.
            let (id, uncertain) = start_step(&mut server, &mut model, &mut rng, &mut stats);
            in_flight.insert(id, uncertain);
            if rng.chance(70) {
                std::thread::sleep(Duration::from_micros(rng.below(3000)));
            }
        }
        if in_flight.is_empty() && rng.chance(50) {
            // Let background deletions run a little before the kill cuts them off.
            std::thread::sleep(Duration::from_micros(rng.below(4000)));
        }
        let replies = server.kill();
        stats.kills += 1;
        for (id, (uncertain, on_ok)) in in_flight {
            stats.kills_with_request_in_flight += 1;
            match replies.get(&id) {
                Some(reply) => on_ok.apply(&mut model, reply),
                None => model.uncertain = uncertain,
            }
        }
        if cycle % 10 == 9 {
            check_quiescent(&mut model, &dir, &mut stats, &ctx(cycle));
        }
    }

    // Finally: a clean run to quiescence, and every check once more.
    let mut server = Server::start(&dir, &log);
    check_after_restart(&mut server, &mut model, &dir, &mut stats, "final restart");
    server.close();
    check_quiescent(&mut model, &dir, &mut stats, "final recover");
    let mut server = Server::start(&dir, &log);
    check_after_restart(&mut server, &mut model, &dir, &mut stats, "after the final recover");
    server.close();

    eprintln!(
        "kill -9 crash test (serve {serve_args:?}): seed {seed}, {cycles} cycles in {:.1?}: {stats:?}; {} live topics at the end",
        started.elapsed(),
        model.live.len()
    );
    assert_eq!(stats.kills, cycles as u32);
    if cycles >= 20 {
        assert!(stats.restarts_with_pending_deletions > 0, "no kill cut off a deletion: the workload is too gentle");
        assert!(stats.kills_with_request_in_flight > 0, "no kill cut off a request");
    }
}

/// What to do with the reply to a request that was in flight when the kill came,
/// if the reply made it out before the process died.
enum OnOk {
    Created { name: String, gen: u64, partitions: u32 },
    Deleted { name: String },
    Produced { name: String, values: Vec<String> },
}

impl OnOk {
    fn apply(self, model: &mut Model, reply: &Value) {
        let Some(ok) = reply.get("ok") else { panic!("request failed: {reply}") };
        match self {
            OnOk::Created { name, gen, partitions } => {
                let id = ok["Created"]["topic"].as_u64().unwrap();
                model.created(name, gen, id, partitions);
            }
            OnOk::Deleted { name } => {
                let id = ok["DeleteAccepted"]["topic"].as_u64().unwrap();
                model.deleted(&name, id);
            }
            OnOk::Produced { name, values } => model.produced(&name, &values, ok),
        }
    }
}

impl Model {
    fn created(&mut self, name: String, gen: u64, id: u64, partitions: u32) {
        assert!(self.seen_ids.insert(id), "topic id {id} was handed out twice");
        assert!(!self.deleted.contains(&id));
        self.live.insert(name, Inc { gen, id, partitions, acked: BTreeMap::new() });
    }

    fn deleted(&mut self, name: &str, id: u64) {
        let inc = self.live.remove(name).unwrap_or_else(|| panic!("deleted {name:?}, which the test thinks is gone"));
        assert_eq!(inc.id, id, "the delete of {name:?} hit another incarnation");
        self.deleted.insert(id);
    }

    fn produced(&mut self, name: &str, values: &[String], ok: &Value) {
        let positions = ok["Produced"]["positions"].as_array().unwrap();
        assert_eq!(positions.len(), values.len());
        let inc = self.live.get_mut(name).unwrap();
        for (p, v) in positions.iter().zip(values) {
            let key = (p["partition"].as_u64().unwrap() as u32, p["offset"].as_u64().unwrap());
            assert!(inc.acked.insert(key, v.clone()).is_none(), "offset {key:?} of {name:?} acknowledged twice");
        }
    }
}

/// Builds the next request of the workload; returns the command, what the model
/// learns if it succeeds, and what stays uncertain if a kill cuts it off.
fn next_request(model: &mut Model, rng: &mut Rng, stats: &mut Stats) -> (Value, OnOk, Option<Uncertain>) {
    let free: Vec<&str> = NAMES.iter().copied().filter(|n| !model.live.contains_key(*n)).collect();
    let roll = rng.below(100);
    let create = model.live.is_empty() || (roll < 30 && !free.is_empty());
    if create {
        let name = free[rng.below(free.len() as u64) as usize].to_string();
        let partitions = 1 + rng.below(12) as u32;
        let grace = if rng.chance(25) { 50 + rng.below(300) } else { 0 };
        let gen = model.next_gen;
        model.next_gen += 1;
        stats.creates += 1;
        if !model.used_names.insert(name.clone()) {
            stats.recreates += 1;
        }
        let cmd = json!({ "CreateTopic": { "name": name, "partitions": partitions,
                          "settings": { "deletion_grace_ms": grace } } });
        let uncertain = Uncertain::Create { name: name.clone(), gen, partitions };
        return (cmd, OnOk::Created { name, gen, partitions }, Some(uncertain));
    }
    let names: Vec<String> = model.live.keys().cloned().collect();
    let name = names[rng.below(names.len() as u64) as usize].clone();
    if roll < 50 {
        stats.deletes += 1;
        let cmd = json!({ "DeleteTopic": { "name": name } });
        return (cmd, OnOk::Deleted { name: name.clone() }, Some(Uncertain::Delete { name }));
    }
    let inc = &model.live[&name];
    let count = 1 + rng.below(6);
    let mut values = Vec::new();
    let mut records = Vec::new();
    for _ in 0..count {
        let v = format!("g{}-v{}-{}", inc.gen, model.next_value, "x".repeat(rng.below(200) as usize));
        model.next_value += 1;
        let key = if rng.chance(40) { json!(format!("k{}", rng.below(10)).into_bytes()) } else { Value::Null };
        // Values go as strings, keys as arrays of bytes: serve reads both forms.
        records.push(json!({ "key": key, "value": v }));
        values.push(v);
    }
    let cmd = json!({ "Produce": { "topic": name, "records": records } });
    // A produce cut off by a kill changes nothing the model tracks: its records
    // may exist (with their incarnation's prefix), but nothing was acknowledged.
    (cmd, OnOk::Produced { name, values }, None)
}

/// Runs one request to completion. Sometimes pipelines a fetch with it and checks it.
fn step(server: &mut Server, model: &mut Model, rng: &mut Rng, stats: &mut Stats) {
    let (cmd, on_ok, _) = next_request(model, rng, stats);
    // A read in flight when a delete arrives must still succeed: the removal waits.
    let fetch = match (&on_ok, rng.chance(40)) {
        (OnOk::Deleted { name }, true) => {
            let inc = model.live[name].clone();
            let p = rng.below(u64::from(inc.partitions)) as u32;
            // From the partition's first offset (past every offset of topics deleted before).
            let described = server.call(json!({ "DescribeTopic": { "name": name } }));
            let start = described["Described"]["log_start"].as_u64().unwrap();
            let f = json!({ "Fetch": { "topic": name, "partition": p, "offset": start, "max_records": 10000 } });
            Some((server.send(f), inc, p, start))
        }
        _ => None,
    };
    let id = server.send(cmd);
    if let Some((fid, inc, p, start)) = fetch {
        let reply = server.wait(fid);
        let ok = reply.get("ok").unwrap_or_else(|| panic!("a fetch in flight before a delete failed: {reply}"));
        stats.verified_records += check_records(&inc, p, start, &ok["Fetched"]["records"], "fetch racing a delete");
    }
    let reply = server.wait(id);
    if let OnOk::Produced { values, .. } = &on_ok {
        stats.produced_records += values.len() as u32;
    }
    on_ok.apply(model, &reply);
}

/// Sends one request and leaves it in flight.
fn start_step(
    server: &mut Server,
    model: &mut Model,
    rng: &mut Rng,
    stats: &mut Stats,
) -> (u64, (Option<Uncertain>, OnOk)) {
    let (cmd, on_ok, uncertain) = next_request(model, rng, stats);
    (server.send(cmd), (uncertain, on_ok))
}

/// Checks fetched `records` of partition `p` of `inc`, starting at `from`: dense
/// offsets, only values produced to this incarnation, acknowledged ones intact.
fn check_records(inc: &Inc, p: u32, from: u64, records: &Value, ctx: &str) -> u64 {
    let records = records.as_array().unwrap();
    let prefix = format!("g{}-", inc.gen);
    for (i, r) in records.iter().enumerate() {
        let offset = r["offset"].as_u64().unwrap();
        assert_eq!(offset, from + i as u64, "{ctx}: offsets of t{}/p{p} are not dense", inc.id);
        // Every value produced here is UTF-8, so it comes back as a string.
        let value = r["value"].as_str().unwrap_or_else(|| panic!("{ctx}: value not a string: {r}")).to_string();
        assert!(
            value.starts_with(&prefix),
            "{ctx}: t{}/p{p} offset {offset} holds {value:?}, which was never produced to this incarnation",
            inc.id
        );
        if let Some(want) = inc.acked.get(&(p, offset)) {
            assert_eq!(&value, want, "{ctx}: acknowledged record t{}/p{p}@{offset} changed", inc.id);
        }
    }
    records.len() as u64
}

/// After a restart: resolve what the kill left uncertain, then check the topic list,
/// every acknowledged record, and that every log on disk is accounted for. Returns
/// how many deletions are pending.
fn check_after_restart(server: &mut Server, model: &mut Model, dir: &Path, stats: &mut Stats, ctx: &str) -> usize {
    let status = server.status();
    let listed: BTreeMap<String, (u64, u32)> = status["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                (t["id"].as_u64().unwrap(), t["partitions"].as_u64().unwrap() as u32),
            )
        })
        .collect();
    let starts: BTreeMap<String, u64> = status["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["log_start"].as_u64().unwrap()))
        .collect();
    let pending: BTreeSet<u64> =
        status["pending"].as_array().unwrap().iter().map(|d| d["id"].as_u64().unwrap()).collect();

    match model.uncertain.take() {
        Some(Uncertain::Create { name, gen, partitions }) => {
            if let Some(&(id, n)) = listed.get(&name) {
                if !model.live.contains_key(&name) {
                    assert_eq!(n, partitions, "{ctx}: {name:?} came back with another partition count");
                    model.created(name, gen, id, partitions);
                }
            }
        }
        Some(Uncertain::Delete { name }) => {
            let id = model.live[&name].id;
            if listed.get(&name).map(|t| t.0) != Some(id) {
                model.deleted(&name, id);
            }
        }
        None => {}
    }

    // The topic list is exactly the model's live topics, ids included.
    for (name, &(id, _)) in &listed {
        assert!(!model.deleted.contains(&id), "{ctx}: deleted topic {name:?} (t{id}) came back");
        let inc = model.live.get(name).unwrap_or_else(|| panic!("{ctx}: unexpected topic {name:?} (t{id})"));
        assert_eq!(inc.id, id, "{ctx}: {name:?} has id t{id}, expected t{}", inc.id);
    }
    for (name, inc) in &model.live {
        assert!(listed.contains_key(name), "{ctx}: topic {name:?} (t{}) is lost", inc.id);
    }
    for id in &pending {
        assert!(!model.live.values().any(|i| i.id == *id), "{ctx}: live topic t{id} is pending deletion");
    }

    // Every acknowledged record reads back, and nothing foreign is in any partition.
    let incs: Vec<(String, Inc)> = model.live.iter().map(|(n, i)| (n.clone(), i.clone())).collect();
    for (name, inc) in incs {
        for p in 0..inc.partitions {
            let mut offset = starts[&name];
            loop {
                let f = json!({ "Fetch": { "topic": name, "partition": p, "offset": offset, "max_records": 10000 } });
                let ok = server.call(f);
                let records = &ok["Fetched"]["records"];
                let hw = ok["Fetched"]["high_watermark"].as_u64().unwrap();
                let n = check_records(&inc, p, offset, records, ctx);
                stats.verified_records += n;
                offset += n;
                if n == 0 || offset >= hw {
                    break;
                }
            }
            if let Some((&(_, last), _)) = inc.acked.range((p, 0)..(p + 1, 0)).next_back() {
                assert!(offset > last, "{ctx}: {name:?}/p{p} ends at {offset}, but offset {last} was acknowledged");
            }
        }
    }

    // No orphans: each log on disk belongs to a live topic or a pending deletion.
    for (t, p) in log_files(dir) {
        let live = model.live.values().any(|i| i.id == t && p < i.partitions);
        assert!(live || pending.contains(&t), "{ctx}: orphan log t{t}/p{p} (live: {listed:?}, pending: {pending:?})");
    }
    for inc in model.live.values() {
        for p in 0..inc.partitions {
            assert!(
                dir.join(format!("{:016x}-{:08x}.log", inc.id, p)).exists(),
                "{ctx}: log t{}/p{p} is missing",
                inc.id
            );
        }
    }
    pending.len()
}

/// Runs `broker-fs recover` (which waits for every pending deletion), then checks that
/// the logs on disk are exactly those of the live topics.
fn check_quiescent(model: &mut Model, dir: &Path, stats: &mut Stats, ctx: &str) {
    let report: Value = serde_json::from_str(cli_ok(dir, &["recover", "--json"]).trim()).unwrap();
    assert_eq!(report["pending"], json!([]), "{ctx}: recover left deletions pending: {report}");
    // `recover` resolves a kill's uncertainty too: apply it through the topic list.
    let listed: BTreeMap<String, u64> = report["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["id"].as_u64().unwrap()))
        .collect();
    match model.uncertain.take() {
        Some(Uncertain::Create { name, gen, partitions }) => {
            if let (Some(&id), false) = (listed.get(&name), model.live.contains_key(&name)) {
                model.created(name, gen, id, partitions);
            }
        }
        Some(Uncertain::Delete { name }) => {
            let id = model.live[&name].id;
            if listed.get(&name) != Some(&id) {
                model.deleted(&name, id);
            }
        }
        None => {}
    }
    let mut expected: Vec<(u64, u32)> =
        model.live.values().flat_map(|i| (0..i.partitions).map(move |p| (i.id, p))).collect();
    expected.sort();
    let on_disk = log_files(dir);
    for (t, p) in &on_disk {
        assert!(!model.deleted.contains(t), "{ctx}: log t{t}/p{p} of a deleted incarnation remains");
    }
    assert_eq!(on_disk, expected, "{ctx}: after quiescence the logs on disk are not exactly the live topics' logs");
    stats.quiescence_checks += 1;
}
