//! The CLI end to end: a session, JSON output, options in any place, and bad input (a
//! corrupt journal, a torn tail, stray logs, unknown entries, a held lock, halts, a
//! produce refused part way, storage that keeps failing until `--timeout`).

mod common;

use common::{cli, cli_ok, log_files, Server, TempDir};
use serde_json::{json, Value};

fn lines_json(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_session_create_produce_fetch_delete_status_recover() {
    let tmp = TempDir::new("session");
    let d = tmp.path();
    assert!(cli_ok(d, &["create", "orders", "--partitions", "3", "--grace-ms", "300"]).contains("created topic"));

    let produced = lines_json(&cli_ok(d, &["--json", "produce", "orders", "--key", "customer-7", "paid", "shipped"]));
    assert_eq!(produced.len(), 2);
    assert_eq!(produced[0]["partition"], produced[1]["partition"], "one key, one partition");
    assert_eq!((produced[0]["offset"].as_u64(), produced[1]["offset"].as_u64()), (Some(0), Some(1)));
    let p = produced[0]["partition"].as_u64().unwrap().to_string();

    let out = cli(d, &["produce", "orders", "--json"], "a\nb\nc\n");
    assert!(out.status.success());
    assert_eq!(lines_json(&String::from_utf8_lossy(&out.stdout)).len(), 3, "values from stdin, one per line");

    let fetched = lines_json(&cli_ok(d, &["fetch", "orders", "--partition", &p, "--offset", "0", "--json"]));
    assert_eq!(
        fetched[0],
        json!({ "partition": fetched[0]["partition"], "offset": 0, "key": "customer-7", "value": "paid" })
    );
    assert_eq!(fetched[1]["value"], "shipped");

    let listed = lines_json(&cli_ok(d, &["list", "--json"]));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], "orders");
    let ends = listed[0]["high_watermarks"].as_array().unwrap().iter().map(|e| e.as_u64().unwrap());
    let orders_end = ends.max().unwrap();
    assert!(cli_ok(d, &["describe", "orders"]).contains("partitions  3"));

    let deleted = cli_ok(d, &["delete", "orders"]);
    // The process exits right after: nothing goes on "in the background".
    assert!(deleted.contains("tombstone is durable"), "{deleted}");
    assert!(!deleted.contains("background") && !deleted.contains("continues"), "{deleted}");
    assert!(
        deleted.contains("still on disk") && deleted.contains("broker-fs recover"),
        "says what removes them: {deleted}"
    );
    assert!(cli_ok(d, &["list"]).contains("no topics"));
    let status = cli_ok(d, &["status"]);
    assert!(status.contains("pending deletions: 1") && status.contains("\"orders\""), "{status}");
    assert_eq!(log_files(d).len(), 3, "the grace delay keeps the logs for now");

    // --json says the same.
    cli_ok(d, &["create", "other", "--partitions", "1", "--grace-ms", "300"]);
    let deleted: Value = serde_json::from_str(cli_ok(d, &["delete", "other", "--json"]).trim()).unwrap();
    assert_eq!(deleted["physical"], "pending", "{deleted}");

    let recovered = cli_ok(d, &["recover"]);
    assert!(recovered.contains("finished the deletion of \"orders\""), "{recovered}");
    assert!(recovered.contains("pending deletions: none"), "{recovered}");
    assert!(cli_ok(d, &["status"]).contains("pending deletions: none"));
    assert!(log_files(d).is_empty());

    // The name can be used again: a new incarnation (after t0 "orders", t1 "other"), empty,
    // whose offsets begin past every offset the deleted "orders" had.
    cli_ok(d, &["create", "orders", "--partitions", "1"]);
    let listed = lines_json(&cli_ok(d, &["list", "--json"]));
    assert_eq!(listed[0]["id"], 2);
    assert_eq!((&listed[0]["log_start"], &listed[0]["high_watermarks"]), (&json!(orders_end), &json!([orders_end])));
    assert!(cli_ok(d, &["list"]).contains("orders"));
    let out = cli(d, &["fetch", "orders", "--partition", "0", "--offset", "0"], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(&format!("begin at {orders_end}")), "{err}");
}

#[test]
fn delete_wait_returns_after_physical_removal() {
    let tmp = TempDir::new("wait");
    let d = tmp.path();
    cli_ok(d, &["create", "big", "--partitions", "16"]);
    cli_ok(d, &["produce", "big", "1", "2", "3"]);
    assert_eq!(log_files(d).len(), 16);
    let out: Value = serde_json::from_str(cli_ok(d, &["delete", "big", "--wait", "--json"]).trim()).unwrap();
    assert_eq!(out["physical"], "removed");
    assert!(log_files(d).is_empty());
    assert!(cli_ok(d, &["status", "--json"]).contains("\"pending\":[]"));
}

#[test]
fn client_errors_name_the_problem_and_exit_non_zero() {
    let tmp = TempDir::new("errors");
    let d = tmp.path();
    let out = cli(d, &["fetch", "nope", "--partition", "0", "--offset", "0"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("topic \"nope\" not found"), "{}", stderr(&out));
    let out = cli(d, &["create", "../escape", "--partitions", "1"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("invalid topic name"), "{}", stderr(&out));
    assert!(!tmp.path().parent().unwrap().join("escape").exists());
    let out = cli(d, &["create", "t", "--partitions", "0"], "");
    assert!(stderr(&out).contains("invalid partition count 0"), "{}", stderr(&out));
}

#[test]
fn a_corrupt_journal_middle_refuses_to_start_naming_file_and_offset() {
    let tmp = TempDir::new("corrupt");
    let d = tmp.path();
    cli_ok(d, &["create", "a", "--partitions", "2"]);
    cli_ok(d, &["create", "b", "--partitions", "2"]);
    cli_ok(d, &["create", "c", "--partitions", "2"]);
    let journal = d.join("journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    // Damage both copies of a commit with one after it (the journal holds the snapshot
    // each start writes, then the last creation).
    let decoded = broker_core::decode_journal(&bytes).unwrap();
    assert_eq!(decoded.records.len(), 2);
    let middle = decoded.records[0].0 as usize;
    let len = u32::from_le_bytes(bytes[middle..middle + 4].try_into().unwrap()) as usize;
    let copy_b = (middle + 9 + len).next_multiple_of(broker_core::JOURNAL_COPY_ALIGN);
    bytes[middle + 10] ^= 0x5a;
    bytes[copy_b + 10] ^= 0x5a;
    std::fs::write(&journal, &bytes).unwrap();
    for cmd in [&["list"][..], &["status"], &["recover"]] {
        let out = cli(d, cmd, "");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(3), "{cmd:?}: {err}");
        assert!(err.contains("corrupt"), "{err}");
        assert!(err.contains(&journal.display().to_string()), "names the file: {err}");
        assert!(err.contains("at byte "), "names the offset: {err}");
    }
    assert_eq!(log_files(d).len(), 6, "nothing was removed");
    assert_eq!(std::fs::read(&journal).unwrap(), bytes, "the journal is left as it was");
}

#[test]
fn a_torn_journal_tail_is_truncated_with_a_warning_and_a_backup() {
    let tmp = TempDir::new("torn");
    let d = tmp.path();
    cli_ok(d, &["create", "a", "--partitions", "2"]);
    cli_ok(d, &["produce", "a", "x"]);
    let journal = d.join("journal");
    let good = std::fs::read(&journal).unwrap();
    // A record cut off by a crash: a frame header promising more than is there.
    let mut torn = good.clone();
    torn.extend_from_slice(&[40, 0, 0, 0, 2, 1, 2]);
    std::fs::write(&journal, &torn).unwrap();
    // A command that only reads serves what precedes the tail, changes nothing, and
    // says so.
    let out = cli(d, &["list", "--json"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(lines_json(&String::from_utf8_lossy(&out.stdout))[0]["name"], "a");
    let warning = stderr(&out);
    assert!(warning.contains("torn tail") && warning.contains("the file is left as it is"), "{warning}");
    assert!(!warning.contains("truncated"), "{warning}");
    assert_eq!(std::fs::read(&journal).unwrap(), torn);
    let out = cli(d, &["recover"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("the journal had a torn tail at byte"), "{report}");
    assert!(report.contains("journal.torn.0"), "{report}");
    assert_eq!(std::fs::read(d.join("journal.torn.0")).unwrap(), torn, "the old bytes are kept");
    assert_eq!(lines_json(&cli_ok(d, &["list", "--json"]))[0]["name"], "a");
    let fetched = lines_json(&cli_ok(d, &["fetch", "a", "--partition", "0", "--offset", "0", "--json"]));
    assert_eq!(fetched.len(), 1);
    // The next start finds a clean journal: no warning.
    let out = cli(d, &["list"], "");
    assert!(!stderr(&out).contains("torn"), "{}", stderr(&out));
}

#[test]
fn a_damaged_journal_copy_is_repaired_from_the_other_with_a_warning_and_a_backup() {
    let tmp = TempDir::new("rot");
    let d = tmp.path();
    cli_ok(d, &["create", "a", "--partitions", "1"]);
    cli_ok(d, &["produce", "a", "x"]);
    let journal = d.join("journal");
    // Rot in the header's first copy and in the last commit (the produce's acknowledged
    // end), where a single copy would look like a torn write and be cut.
    let mut rotten = std::fs::read(&journal).unwrap();
    rotten[8] ^= 0x10;
    let last = rotten.len() - 1;
    rotten[last] ^= 0x10;
    std::fs::write(&journal, &rotten).unwrap();
    let out = cli(d, &["recover"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("the journal had a damaged copy at byte 0 (header: header checksum mismatch)"), "{report}");
    assert!(report.contains("used its other copy"), "{report}");
    assert!(report.contains("journal.torn.0"), "{report}");
    assert_eq!(std::fs::read(d.join("journal.torn.0")).unwrap(), rotten, "the old bytes are kept");
    let fetched = lines_json(&cli_ok(d, &["fetch", "a", "--partition", "0", "--offset", "0", "--json"]));
    assert_eq!(fetched.len(), 1, "the acknowledged record is still served");
    assert_eq!(lines_json(&cli_ok(d, &["produce", "a", "y", "--json"]))[0]["offset"], 1, "its offset is not reused");
    let out = cli(d, &["list"], "");
    assert!(!stderr(&out).contains("damaged"), "the rewritten journal is whole: {}", stderr(&out));
}

#[test]
fn stray_logs_are_removed_and_unknown_entries_left_alone_both_reported() {
    let tmp = TempDir::new("stray");
    let d = tmp.path();
    cli_ok(d, &["create", "a", "--partitions", "1"]);
    let live = d.join("0000000000000000-00000000.log");
    let stray = d.join("00000000000000ff-00000003.log");
    std::fs::copy(&live, &stray).unwrap();
    std::fs::write(d.join("notes.txt"), "mine").unwrap();
    std::fs::write(d.join("backup.log"), "not a broker log name").unwrap();
    std::fs::create_dir(d.join("subdir")).unwrap();
    std::fs::create_dir(d.join("0000000000000009-00000000.log")).unwrap();

    let out: Value = serde_json::from_str(cli_ok(d, &["recover", "--json"]).trim()).unwrap();
    assert_eq!(out["stray_logs_removed"], json!(["00000000000000ff-00000003.log"]));
    assert_eq!(out["unknown_entries"], json!(["0000000000000009-00000000.log", "backup.log", "notes.txt", "subdir"]));
    assert!(!stray.exists());
    assert!(live.exists());
    for kept in ["notes.txt", "backup.log", "subdir", "0000000000000009-00000000.log"] {
        assert!(d.join(kept).exists(), "{kept} must be left alone");
    }
    let status = cli_ok(d, &["status"]);
    assert!(status.contains("unknown entry, left alone: file notes.txt"), "{status}");
    assert!(status.contains("unknown entry, left alone: directory subdir"), "{status}");

    // Text output of recover reports a stray too.
    std::fs::copy(&live, &stray).unwrap();
    let text = cli_ok(d, &["recover"]);
    assert!(text.contains("removed stray log 00000000000000ff-00000003.log"), "{text}");
}

#[test]
fn a_second_process_is_refused_with_a_lock_error() {
    let tmp = TempDir::new("lock");
    let d = tmp.path().join("data");
    let server = Server::start(&d, &tmp.path().join("serve.stderr"));
    let out = cli(&d, &["list"], "");
    assert_eq!(out.status.code(), Some(4));
    let err = stderr(&out);
    assert!(err.contains("lock"), "{err}");
    assert!(err.contains("(pid "), "names the holder: {err}");
    // kill -9 releases the lock with the process.
    server.kill();
    cli_ok(&d, &["list"]);
}

/// Hole: the lock was held on LOCK's inode alone, so `rm LOCK` (which operators do
/// after a kill -9 leaves a pid that looks stale) let a second writer in beside a
/// running `serve`, and a read-only command on a directory without LOCK took no lock.
#[test]
fn removing_lock_under_a_running_serve_lets_no_second_writer_in() {
    let tmp = TempDir::new("lock-removed");
    let d = tmp.path().join("data");
    let mut server = Server::start(&d, &tmp.path().join("serve.stderr"));
    std::fs::remove_file(d.join("LOCK")).unwrap();
    for args in [&["create", "t", "--partitions", "1"][..], &["recover"], &["list"], &["status"]] {
        let out = cli(&d, args, "");
        assert_eq!(out.status.code(), Some(4), "{args:?} must be refused: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("locked by another broker-fs process") && err.contains("was removed"), "{err}");
    }
    // A second serve too, and the first still serves.
    let out = cli(&d, &["serve"], "{\"id\": 1, \"status\": true}\n");
    assert_eq!(out.status.code(), Some(4), "a second serve: {}", stderr(&out));
    assert!(server.status()["topics"].is_array());
    server.kill();
    // With the holder gone, LOCK is made again and names the new writer.
    cli_ok(&d, &["create", "t", "--partitions", "1"]);
    assert!(d.join("LOCK").exists());
}

/// After a kill -9, LOCK still names the dead process: `status` says it is not running
/// and that nothing needs doing.
#[test]
fn status_says_whether_the_pid_in_lock_is_running() {
    let tmp = TempDir::new("lock-status");
    let d = tmp.path().join("data");
    let server = Server::start(&d, &tmp.path().join("serve.stderr"));
    let out = cli(&d, &["status"], "");
    assert_eq!(out.status.code(), Some(4));
    let err = stderr(&out);
    assert!(err.contains(&format!("(pid {}, running)", server.pid())), "{err}");
    let pid = server.pid();
    server.kill();
    let status = &lines_json(&cli_ok(&d, &["status", "--json"]))[0];
    assert_eq!(status["lock"], json!({ "pid": pid, "pid_running": false }));
    let text = cli_ok(&d, &["status"]);
    assert!(text.contains(&format!("lock: free; LOCK names pid {pid}, the last writer, not running")), "{text}");
}

#[test]
fn serve_answers_json_lines_and_exits_non_zero_on_a_halt() {
    let tmp = TempDir::new("serve-halt");
    let d = tmp.path().join("data");
    let mut server = Server::start(&d, &tmp.path().join("serve.stderr"));
    let created = server.call(json!({ "CreateTopic": { "name": "a", "partitions": 1,
                                       "settings": { "deletion_grace_ms": 0 } } }));
    assert_eq!(created["Created"]["topic"], 0);
    let status = server.status();
    assert_eq!(status["topics"][0]["name"], "a");
    assert_eq!(status["pending"], json!([]));
    // Make the next journal write fail: the journal's name now holds a directory.
    std::fs::rename(d.join("journal"), tmp.path().join("journal.saved")).unwrap();
    std::fs::create_dir(d.join("journal")).unwrap();
    let id = server.send(json!({ "DeleteTopic": { "name": "a" } }));
    let reply = server.wait(id);
    assert!(reply["error"].as_str().unwrap().contains("halted"), "{reply}");
    let (status, lines) = server.wait_exit();
    assert_eq!(status.code(), Some(3));
    assert!(lines.iter().any(|l| l["event"] == "halted"), "{lines:?}");
    let log = std::fs::read_to_string(tmp.path().join("serve.stderr")).unwrap();
    assert!(log.contains("journal write failed"), "{log}");
    // Put the journal back: the next start recovers; the delete was never acknowledged.
    std::fs::remove_dir(d.join("journal")).unwrap();
    std::fs::rename(tmp.path().join("journal.saved"), d.join("journal")).unwrap();
    assert!(cli_ok(&d, &["list"]).contains('a'));
}

/// Runs `broker-fs ARGS...` exactly as given (no `--data-dir` added).
fn raw(args: &[&str]) -> std::process::Output {
    std::process::Command::new(common::BIN).args(args).output().expect("spawn broker-fs")
}

#[test]
fn global_options_go_before_or_after_the_subcommand() {
    let tmp = TempDir::new("global-args");
    let d = tmp.path().to_str().unwrap();
    cli_ok(tmp.path(), &["create", "t", "--partitions", "1"]);
    for args in [
        &["--json", "--data-dir", d, "list"][..],
        &["--data-dir", d, "list", "--json"],
        &["--data-dir", d, "--json", "list"],
        &["list", "--data-dir", d, "--json"],
        &["list", "--json", "--data-dir", d],
        &["--json", "list", "--data-dir", d],
    ] {
        let out = raw(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let listed = lines_json(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(listed.len(), 1, "{args:?}");
        assert_eq!(listed[0]["name"], "t", "{args:?}");
    }
    let out = raw(&["list"]);
    assert_eq!(out.status.code(), Some(2), "no data directory is bad usage");
    assert!(stderr(&out).contains("--data-dir"), "{}", stderr(&out));
}

/// Runs `broker-fs --data-dir DIR ARGS...` with `stdin`, under a file size limit of 100
/// blocks (`ulimit -f`; 50 or 100 KiB, as the shell counts): a write past it fails with
/// "File too large", even as root, which makes a log write fail on demand.
fn cli_with_file_limit(dir: &std::path::Path, args: &[&str], stdin: &[u8]) -> std::process::Output {
    // SIGXFSZ ignored: the write fails instead of killing the process.
    let mut command = std::process::Command::new("sh");
    command.arg("-c").arg(r#"trap "" XFSZ; ulimit -f 100; exec "$0" "$@""#).arg(common::BIN);
    common::run_with_input(command.arg("--data-dir").arg(dir).args(args), stdin)
}

#[test]
fn a_halt_inside_a_request_prints_its_reason_and_exits_3() {
    let tmp = TempDir::new("halt-request");
    let d = tmp.path();
    cli_ok(d, &["create", "a", "--partitions", "1"]);
    // A 300 KB record: appending it to the log fails, and a failed log write halts.
    let big = vec![b'x'; 300_000];
    let out = cli_with_file_limit(d, &["produce", "a"], &big);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("halted"), "{err}");
    assert!(err.contains("write to log") && err.contains("File too large"), "names the failure: {err}");
    // The next start recovers from what is durable: the record was never acknowledged.
    let listed = lines_json(&cli_ok(d, &["list", "--json"]));
    assert_eq!(listed[0]["high_watermarks"], json!([0]));
}

#[test]
fn serve_whose_input_has_ended_still_reports_a_halt_and_exits_3() {
    let tmp = TempDir::new("serve-halt-eof");
    let d = tmp.path().join("data");
    let mut server = Server::start(&d, &tmp.path().join("serve.stderr"));
    server.call(json!({ "CreateTopic": { "name": "a", "partitions": 1, "settings": { "deletion_grace_ms": 0 } } }));
    // The next journal write fails: the journal's name now holds a directory.
    std::fs::rename(d.join("journal"), tmp.path().join("journal.saved")).unwrap();
    std::fs::create_dir(d.join("journal")).unwrap();
    let id = server.send(json!({ "DeleteTopic": { "name": "a" } }));
    // The input ends with the delete in flight.
    let (status, lines) = server.end_input();
    let reply = lines.iter().find(|l| l["id"] == id).unwrap_or_else(|| panic!("no reply: {lines:?}"));
    assert!(reply["error"].as_str().unwrap().contains("halted"), "{reply}");
    assert!(lines.iter().any(|l| l["event"] == "halted"), "{lines:?}");
    assert_eq!(status.code(), Some(3), "{lines:?}");
}

#[test]
fn a_produce_whose_later_chunk_fails_prints_what_was_acknowledged_first() {
    let tmp = TempDir::new("produce-partial");
    let d = tmp.path();
    cli_ok(d, &["create", "t", "--partitions", "1"]);
    // The CLI sends stdin in chunks of 1000 records: the first chunk is fine, the second
    // holds a record larger than the broker accepts (1 MiB).
    let mut input: String = (0..1000).map(|i| format!("v{i}\n")).collect();
    input.push_str(&"x".repeat(1_100_000));
    input.push('\n');
    let out = cli(d, &["produce", "t", "--json"], &input);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let acked = lines_json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(acked.len(), 1000, "every acknowledged position is printed: {err}");
    assert_eq!(acked[999], json!({ "partition": 0, "offset": 999 }));
    assert!(err.contains("exceeds the size limit"), "names the failure: {err}");
    assert!(err.contains("1000 of 1001"), "says how far it got: {err}");

    let out = cli(d, &["produce", "t"], &input);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(text.contains("produced 1000 of 1001 records"), "{text}");
    assert!(text.contains("partition 0 offset 1999"), "{text}");
    assert_eq!(lines_json(&cli_ok(d, &["list", "--json"]))[0]["high_watermarks"], json!([2000]));
}

/// A `broker-fs --data-dir DIR ARGS...` process whose output goes to files next to
/// `dir`, so that a test can watch it run and bound how long it may take.
struct Running {
    child: std::process::Child,
    out: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl Running {
    fn start(dir: &std::path::Path, args: &[&str]) -> Running {
        use std::process::{Command, Stdio};
        let out = dir.with_extension("stdout");
        let err = dir.with_extension("stderr");
        let child = Command::new(common::BIN)
            .arg("--data-dir")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("spawn broker-fs");
        Running { child, out, err }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits until standard error contains `text`, for at most `limit`.
    fn wait_stderr(&mut self, text: &str, limit: std::time::Duration) {
        let start = std::time::Instant::now();
        while !self.stderr().contains(text) {
            assert!(self.child.try_wait().unwrap().is_none(), "exited before saying {text:?}: {}", self.stderr());
            assert!(start.elapsed() < limit, "no {text:?} within {limit:?}: {}", self.stderr());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits for the exit for at most `limit`: a process still running then is killed
    /// and fails the test. Returns the exit status, stdout and stderr.
    fn finish(mut self, limit: std::time::Duration) -> (Option<i32>, String, String) {
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running after {limit:?}; stderr so far: {}", self.stderr());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        (status.code(), std::fs::read_to_string(&self.out).unwrap(), self.stderr())
    }
}

/// How long a command that must give up after `--timeout 1` may take in all.
const GIVE_UP_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

#[test]
fn a_create_whose_log_cannot_be_created_reports_retries_and_gives_up() {
    let tmp = TempDir::new("create-timeout");
    let d = tmp.path().join("data");
    std::fs::create_dir(&d).unwrap();
    // A directory in the place of the first log: creating the log fails every time.
    let squatter = d.join("0000000000000000-00000000.log");
    std::fs::create_dir(&squatter).unwrap();
    let (code, _, err) =
        Running::start(&d, &["create", "a", "--partitions", "1", "--timeout", "1"]).finish(GIVE_UP_LIMIT);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("retrying: creating log 0000000000000000-00000000.log"), "progress: {err}");
    assert!(err.contains("Is a directory"), "the last error: {err}");
    assert!(err.contains("error: gave up"), "{err}");
    assert!(err.contains(" times"), "how many attempts: {err}");
    assert!(err.contains("journaled") && err.contains("--timeout"), "what to do: {err}");
    // As the message says: once the cause is gone, the next start creates the log.
    std::fs::remove_dir(&squatter).unwrap();
    cli_ok(&d, &["recover"]);
    assert_eq!(lines_json(&cli_ok(&d, &["list", "--json"]))[0]["name"], "a");
    assert!(squatter.is_file());
}

#[test]
fn a_recover_whose_removal_keeps_failing_reports_retries_and_gives_up() {
    let tmp = TempDir::new("recover-timeout");
    let d = tmp.path().join("data");
    cli_ok(&d, &["create", "a", "--partitions", "2", "--grace-ms", "200"]);
    cli_ok(&d, &["delete", "a"]);
    // The grace delay kept the logs; one of them is now a directory, which unlink refuses.
    let log = d.join("0000000000000000-00000001.log");
    std::fs::remove_file(&log).unwrap();
    std::fs::create_dir(&log).unwrap();
    let (code, _, err) = Running::start(&d, &["recover", "--timeout", "1"]).finish(GIVE_UP_LIMIT);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("retrying: removing log 0000000000000000-00000001.log"), "progress: {err}");
    assert!(err.contains("error: gave up") && err.contains("Is a directory"), "{err}");
    assert!(err.contains("recover"), "what to do: {err}");
    std::fs::remove_dir(&log).unwrap();
    assert!(cli_ok(&d, &["recover"]).contains("pending deletions: none"));
}

#[test]
fn a_delete_wait_whose_removal_keeps_failing_reports_retries_and_gives_up() {
    let tmp = TempDir::new("delete-timeout");
    let d = tmp.path().join("data");
    cli_ok(&d, &["create", "a", "--partitions", "1", "--grace-ms", "1500"]);
    let mut run = Running::start(&d, &["delete", "a", "--wait", "--timeout", "1"]);
    // Acknowledged; the grace delay holds the removal back while the log turns into a
    // directory, which unlink refuses.
    run.wait_stderr("waiting for", std::time::Duration::from_secs(10));
    let log = d.join("0000000000000000-00000000.log");
    std::fs::remove_file(&log).unwrap();
    std::fs::create_dir(&log).unwrap();
    let (code, _, err) = run.finish(GIVE_UP_LIMIT);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("retrying: removing log 0000000000000000-00000000.log"), "progress: {err}");
    assert!(err.contains("error: gave up") && err.contains("Is a directory"), "{err}");
    assert!(err.contains("tombstone is durable") && err.contains("recover"), "what to do: {err}");
    assert!(cli_ok(&d, &["list"]).contains("no topics"), "the delete was acknowledged");
}

#[test]
fn serve_carries_keys_and_values_as_strings_and_other_bytes_as_base64() {
    let tmp = TempDir::new("serve-bytes");
    let d = tmp.path().join("data");
    let mut server = Server::start(&d, &tmp.path().join("serve.stderr"));
    server.call(json!({ "CreateTopic": { "name": "b", "partitions": 1, "settings": { "deletion_grace_ms": 0 } } }));
    let produced = server.call(json!({ "Produce": { "topic": "b", "records": [
        { "key": "customer-7", "value": "héllo" },
        { "key": null, "value": { "base64": "/wA=" } },
        { "key": { "base64": "" }, "value": [104, 105] },
    ] } }));
    assert_eq!(produced["Produced"]["positions"].as_array().map(Vec::len), Some(3), "{produced}");
    let fetched = server.call(json!({ "Fetch": { "topic": "b", "partition": 0, "offset": 0, "max_records": 10 } }));
    assert_eq!(
        fetched["Fetched"]["records"],
        json!([
            { "offset": 0, "key": "customer-7", "value": "héllo" },
            { "offset": 1, "key": null, "value": { "base64": "/wA=" } },
            { "offset": 2, "key": "", "value": "hi" },
        ]),
        "{fetched}"
    );
    // A malformed form is refused with a message that names it.
    let id =
        server.send(json!({ "Produce": { "topic": "b", "records": [{ "key": null, "value": { "base64": "@@" } }] } }));
    let reply = server.wait(id);
    assert!(reply["error"].as_str().unwrap().contains("base64"), "{reply}");
    server.close();
    // fetch --json uses the same forms.
    let fetched = lines_json(&cli_ok(&d, &["fetch", "b", "--partition", "0", "--offset", "0", "--json"]));
    assert_eq!(fetched[0]["value"], "héllo");
    assert_eq!(fetched[1]["value"], json!({ "base64": "/wA=" }));
}

#[test]
fn a_start_whose_recovery_keeps_failing_names_the_failure_and_what_to_do() {
    let tmp = TempDir::new("recovery-fails");
    let d = tmp.path();
    cli_ok(d, &["create", "a", "--partitions", "1"]);
    // A record acknowledged: opening the log must read it (a log with nothing
    // acknowledged is started afresh without reading).
    cli_ok(d, &["produce", "a", "x"]);
    // A live topic's log is now a directory: opening it fails on every attempt.
    let log = d.join("0000000000000000-00000000.log");
    std::fs::remove_file(&log).unwrap();
    std::fs::create_dir(&log).unwrap();
    let out = cli(d, &["list", "--timeout", "1"], "");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("retrying: recovery: opening log") && err.contains("(attempt 1)"), "progress: {err}");
    assert!(err.contains("cannot recover") && err.contains("opening log 0000000000000000-00000000.log"), "{err}");
    assert!(err.contains("Is a directory"), "{err}");
    assert!(err.contains("fix the cause") && err.contains("run broker-fs again"), "what to do: {err}");
}

/// Hole: 17 values of 1 MiB - 100 bytes piped into `produce` were all acknowledged, then
/// `fetch` returned nothing and the next produce got offset 0 again. Now the CLI splits
/// them into produces within the broker's batch limit, and they survive restarts.
#[test]
fn seventeen_mebibytes_through_produce_round_trip_across_restarts() {
    let tmp = TempDir::new("big-batch");
    let d = tmp.path();
    cli_ok(d, &["create", "big", "--partitions", "1"]);
    let mut input = Vec::new();
    for i in 0..17u8 {
        input.extend(std::iter::repeat_n(b'a' + i, (1 << 20) - 100));
        input.push(b'\n');
    }
    let out = cli(d, &["produce", "big", "--json"], std::str::from_utf8(&input).unwrap());
    assert!(out.status.success(), "{}", stderr(&out));
    let offsets: Vec<u64> =
        lines_json(&String::from_utf8_lossy(&out.stdout)).iter().map(|p| p["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, (0..17).collect::<Vec<_>>());
    // One fetch returns at most 16 MiB of values (max_fetch_bytes): the 17th comes next.
    let mut fetched =
        lines_json(&cli_ok(d, &["fetch", "big", "--partition", "0", "--offset", "0", "--max", "100", "--json"]));
    assert_eq!(fetched.len(), 16);
    fetched.extend(lines_json(&cli_ok(d, &["fetch", "big", "--partition", "0", "--offset", "16", "--json"])));
    assert_eq!(fetched.len(), 17);
    for (i, r) in fetched.iter().enumerate() {
        let value = r["value"].as_str().unwrap();
        assert_eq!((r["offset"].as_u64(), value.len()), (Some(i as u64), (1 << 20) - 100));
        assert!(value.bytes().all(|b| b == b'a' + i as u8), "record {i} reads back whole");
    }
    let next = lines_json(&cli_ok(d, &["produce", "big", "--json", "one-more"]));
    assert_eq!(next[0]["offset"], 17, "no offset is handed out twice");
}

/// Hole: the grace delay started again at every start, so with the CLI (each command a
/// start) a deletion with a grace delay never finished outside `recover` or `serve`. Its
/// deadline is durable now, and `status` says how much of it is left.
#[test]
fn a_grace_deadline_survives_restarts_and_status_shows_what_is_left() {
    let tmp = TempDir::new("grace-deadline");
    let d = tmp.path();
    cli_ok(d, &["create", "orders", "--partitions", "2", "--grace-ms", "600000"]);
    cli_ok(d, &["create", "other", "--partitions", "1"]);
    cli_ok(d, &["delete", "orders"]);
    let status = |d| lines_json(&cli_ok(d, &["status", "--json"]))[0]["pending"][0].clone();
    let first = status(d);
    cli_ok(d, &["produce", "other", "a"]); // a start that writes, and resumes deletions
    let second = status(d);
    assert_eq!(first["remove_after_unix_ms"], second["remove_after_unix_ms"], "the deadline did not move");
    let (left1, left2) = (first["grace_left_ms"].as_u64().unwrap(), second["grace_left_ms"].as_u64().unwrap());
    assert!(left2 <= left1 && left1 <= 600_000 && left2 > 0, "{left1} then {left2}");
    assert!(cli_ok(d, &["status"]).contains("waits in its grace delay"));
}

/// Hole: rot in a log's last frame was cut off as a torn write and its offsets reused.
/// On a real disk now: fetch names the damaged offset, status lists it, and the next
/// record gets a new offset.
#[test]
fn rot_in_the_last_frame_is_reported_by_fetch_and_status_and_never_reused() {
    let tmp = TempDir::new("rot");
    let d = tmp.path();
    cli_ok(d, &["create", "t", "--partitions", "1"]);
    cli_ok(d, &["produce", "t", "first"]);
    cli_ok(d, &["produce", "t", "second"]);
    let log = d.join("0000000000000000-00000000.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x08;
    std::fs::write(&log, &bytes).unwrap();

    let out = cli(d, &["fetch", "t", "--partition", "0", "--offset", "1"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("record at offset 1") && stderr(&out).contains("corrupt"), "{}", stderr(&out));
    let status = cli_ok(d, &["status"]);
    assert!(status.contains("damaged: \"t\" (id t0) partition 0 offsets 1..2 cannot be read back"), "{status}");
    let json = lines_json(&cli_ok(d, &["status", "--json"]));
    assert_eq!((json[0]["damaged"][0]["from"].as_u64(), json[0]["damaged"][0]["to"].as_u64()), (Some(1), Some(2)));
    let next = lines_json(&cli_ok(d, &["produce", "t", "third", "--json"]));
    assert_eq!(next[0]["offset"], 2, "offset 1 is never handed out again");
    assert_eq!(std::fs::read(&log).unwrap()[..bytes.len()], bytes[..], "the damaged bytes are kept");
}
