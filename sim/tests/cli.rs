//! The `broker-sim` command line as a user runs it.

use std::process::Command;

fn sim(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_broker-sim")).args(args).output().expect("broker-sim runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn run_prints_a_summary_and_succeeds() {
    let (code, out) = sim(&["run", "--seeds", "40", "--jobs", "2", "--quiet"]);
    assert_eq!(code, 0, "{out}");
    for needle in
        ["seeds", "events per second", "simulated time", "crashes", "faults injected", "violations by checker"]
    {
        assert!(out.contains(needle), "summary lacks {needle:?}:\n{out}");
    }
    assert!(out.contains("OK: 40 seeds, no violations."), "{out}");
}

#[test]
fn nodes_fixes_the_topology_of_every_seed() {
    let (code, out) = sim(&["run", "--seeds", "12", "--jobs", "2", "--quiet", "--nodes", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("seeds by topology            12 with 2 nodes"), "{out}");
    assert!(out.contains("store unknown outcomes"), "{out}");
    let (code, out) = sim(&["run", "--seeds", "4", "--quiet", "--nodes", "0"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("4 one broker on a disk"), "{out}");
    let (code, out) = sim(&["run", "--seeds", "1", "--nodes", "6"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("6 is not in 0..=5"), "{out}");
}

#[test]
fn replay_prints_the_same_trace_hash_twice_and_writes_a_trace() {
    let path = std::env::temp_dir().join(format!("broker-sim-trace-{}.jsonl", std::process::id()));
    let path_s = path.to_string_lossy().to_string();
    let (code, a) = sim(&["replay", "--seed", "5", "--trace", &path_s]);
    assert_eq!(code, 0, "{a}");
    let (_, b) = sim(&["replay", "--seed", "5"]);
    let hash = |s: &str| s.lines().find(|l| l.starts_with("trace hash: ")).map(str::to_string);
    assert!(hash(&a).is_some(), "{a}");
    assert_eq!(hash(&a), hash(&b));
    let trace = std::fs::read_to_string(&path).expect("trace written");
    let _ = std::fs::remove_file(&path);
    assert!(trace.lines().count() > 10);
    assert!(trace.lines().all(|l| l.starts_with("{\"t_us\":") && l.ends_with("\"}")), "JSON lines");
}

#[test]
fn exhaust_explores_and_finds_nothing() {
    let (code, out) = sim(&["exhaust"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("explored") && out.contains("crash states"), "{out}");
}

#[cfg(feature = "planted-bugs")]
#[test]
fn bugs_are_listed_and_a_planted_one_fails_the_campaign_and_replays() {
    let (code, out) = sim(&["bugs"]);
    assert_eq!(code, 0);
    let names: Vec<&str> = out.lines().collect();
    assert_eq!(names.len(), broker_core::planted::Bug::ALL.len(), "{out}");
    // The command line's path is the same for every bug (tests/planted.rs proves each is
    // caught): two bugs, caught by different checkers, go through it end to end.
    for bug in ["ack-delete-before-tombstone-durable", "finished-at-tombstone"] {
        assert!(names.contains(&bug), "{out}");
        let (code, out) = sim(&["run", "--seeds", "100", "--jobs", "2", "--quiet", "--plant", bug]);
        assert_eq!(code, 1, "{bug} went unnoticed:\n{out}");
        let replay = out.lines().skip_while(|l| !l.starts_with("replay it with:")).nth(1).expect("replay command");
        let seed = replay.split("--seed ").nth(1).and_then(|s| s.split_whitespace().next()).expect("seed");
        assert!(replay.contains(&format!("--plant {bug}")), "{replay}");
        let first = out.lines().find(|l| l.starts_with("first failing seed")).expect("first failure line");
        let (code, replayed) = sim(&["replay", "--seed", seed, "--plant", bug]);
        assert_eq!(code, 1, "{replayed}");
        let violation = first.split_once(": ").map(|(_, v)| v).expect("violation text");
        assert!(replayed.contains(violation), "replay of {bug} seed {seed} differs:\n{first}\n{replayed}");
    }
    // A cluster's bug, on a fixed node count: the replay command carries it.
    let (code, out) = sim(&["run", "--seeds", "20", "--quiet", "--nodes", "3", "--plant", "cluster-skip-fence"]);
    assert_eq!(code, 1, "{out}");
    let replay = out.lines().skip_while(|l| !l.starts_with("replay it with:")).nth(1).expect("replay command");
    assert!(replay.contains("--nodes 3") && replay.contains("--plant cluster-skip-fence"), "{replay}");
    let seed = replay.split("--seed ").nth(1).and_then(|s| s.split_whitespace().next()).expect("seed");
    let (code, replayed) = sim(&["replay", "--seed", seed, "--nodes", "3", "--plant", "cluster-skip-fence"]);
    assert_eq!(code, 1, "{replayed}");
    assert!(replayed.contains("[linearizable-lifecycle]"), "{replayed}");
}
