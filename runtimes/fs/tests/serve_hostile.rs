//! `serve` under clients that do not behave: one that never reads its replies, one
//! that sends a line of 600 MB, one that sends bytes that are not UTF-8, ids that are
//! numbers of every kind. Memory stays within the bounds `broker_fs::request_lines`
//! states, every line is answered, and every id comes back as sent.
#![cfg(target_os = "linux")]

mod common;

use common::{TempDir, BIN};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// The peak resident memory of process `pid` in bytes (`VmHWM` of `/proc/PID/status`);
/// `None` once the process is gone.
fn peak_memory(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn spawn_serve(dir: &std::path::Path) -> Child {
    Command::new(BIN)
        .arg("--data-dir")
        .arg(dir)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn broker-fs serve")
}

/// Reads every reply line until the end of output.
fn replies(child: &mut Child) -> Vec<Value> {
    let out = BufReader::new(child.stdout.take().unwrap());
    out.lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap()).filter(|v: &Value| v["event"].is_null()).collect()
}

/// Before: the stdin thread read into an unbounded queue while the loop was blocked
/// writing a reply nobody read, and memory grew by the gigabyte. Now reading stops
/// once 1,024 lines are unanswered, the pipe pushes back on the client, and every line
/// is answered once the client reads.
#[test]
fn a_client_that_never_reads_its_replies_is_held_back_and_memory_stays_bounded() {
    let tmp = TempDir::new("serve-no-reader");
    let mut child = spawn_serve(tmp.path());
    let mut stdin = child.stdin.take().unwrap();
    // 100,000 status requests of 1 KiB each, 100 MiB in all, sent without reading.
    let line = {
        let mut l = b"{\"id\": 0, \"status\": true}".to_vec();
        l.resize(1023, b' ');
        l.push(b'\n');
        l
    };
    const LINES: u64 = 100_000;
    let sent = Arc::new(AtomicU64::new(0));
    let writer = {
        let sent = sent.clone();
        std::thread::spawn(move || {
            for _ in 0..LINES {
                if stdin.write_all(&line).is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Wait until the client is held back: nothing more sent for a second.
    let start = Instant::now();
    let mut last = (sent.load(Ordering::Relaxed), Instant::now());
    while last.1.elapsed() < Duration::from_secs(1) {
        assert!(start.elapsed() < Duration::from_secs(60), "the client was never held back: {} lines sent", last.0);
        std::thread::sleep(Duration::from_millis(50));
        let now = sent.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        }
    }
    let held_at = last.0;
    let peak = peak_memory(child.id()).expect("serve is running");
    assert!(held_at < LINES, "all {LINES} lines went in without any reply read");
    // 1,024 lines read ahead plus what the two pipes hold (64 KiB each) and the
    // reader's buffer: a few thousand lines of 1 KiB.
    assert!(held_at < 4_000, "{held_at} lines taken without a reply read");
    assert!(peak < 64 * MIB, "peak resident memory {} MiB with no reply read", peak / MIB);
    eprintln!("held back after {held_at} lines; peak resident memory {} MiB", peak / MIB);

    // Once the client reads, everything is answered.
    let answers = replies(&mut child);
    writer.join().unwrap();
    assert_eq!(answers.len() as u64, LINES, "one reply per line");
    assert!(answers.iter().all(|a| a["status"].is_object()), "{:?}", answers.iter().find(|a| !a["status"].is_object()));
    assert!(child.wait().unwrap().success());
}

/// Before: a line of 600 MB without a newline was buffered whole. Now it is skipped
/// past the limit, answered with an error naming the limit, and the next line served.
#[test]
fn a_line_of_600_mb_is_refused_naming_the_limit_and_the_next_line_is_served() {
    let tmp = TempDir::new("serve-huge-line");
    let mut child = spawn_serve(tmp.path());
    let mut stdin = child.stdin.take().unwrap();
    let pid = child.id();
    let writer = std::thread::spawn(move || {
        stdin.write_all(b"{\"id\": 1, \"status\": true}\n").unwrap();
        let chunk = vec![b'x'; MIB as usize];
        for _ in 0..600 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\n{\"id\": 3, \"status\": true}\n").unwrap();
    });
    let answers = replies(&mut child);
    writer.join().unwrap();
    // Read while the process may still live (it may have gone since).
    let peak = peak_memory(pid);
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(answers[0]["id"], 1);
    assert!(answers[0]["status"].is_object());
    let error = answers[1]["error"].as_str().unwrap();
    assert!(error.contains("629145600 bytes is longer than the"), "names the line's length: {error}");
    assert!(error.contains("split the records"), "says what to do: {error}");
    assert_eq!(answers[2]["id"], 3, "the next line is served");
    assert!(answers[2]["status"].is_object());
    if let Some(peak) = peak {
        let limit = broker_fs::request_lines::max_line_bytes(broker_core::Config::default().batch_bytes_limit());
        assert!(peak < limit as u64 + 96 * MIB, "peak resident memory {} MiB", peak / MIB);
    }
    assert!(child.wait().unwrap().success());
}

/// Before: after a line holding the byte 0xFF, that line and every later one went
/// unanswered and `serve` exited 0. Now the bad line gets an error and serving goes on.
#[test]
fn a_line_that_is_not_utf8_is_answered_with_an_error_and_serving_goes_on() {
    let tmp = TempDir::new("serve-not-utf8");
    let mut child = spawn_serve(tmp.path());
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"id\": 1, \"status\": true}\n{\"id\": 2, \"status\": \"\xff\"}\n{\"id\": 3, \"status\": true}\n")
        .unwrap();
    drop(stdin);
    let answers = replies(&mut child);
    assert_eq!(answers.len(), 3, "three lines, three answers: {answers:?}");
    assert!(answers[0]["status"].is_object() && answers[0]["id"] == 1);
    assert_eq!(answers[1]["id"], 2, "the id is read past the bad byte: {}", answers[1]);
    let error = answers[1]["error"].as_str().unwrap();
    assert!(error.contains("not UTF-8") && error.contains("0xFF"), "{error}");
    assert!(answers[2]["status"].is_object() && answers[2]["id"] == 3);
    assert!(child.wait().unwrap().success());
}

/// Before: a request line was parsed into a JSON tree first, 32 bytes per number of an
/// array of bytes, so a 32 MB produce in the core's own form (arrays of numbers) took
/// about 300 MB. Now a produce is read straight into bytes; ids too long to echo are
/// refused.
#[test]
fn a_produce_of_arrays_of_numbers_is_read_without_a_tree_of_its_json() {
    let tmp = TempDir::new("serve-number-arrays");
    let created = common::cli_ok(tmp.path(), &["create", "t", "--partitions", "1"]);
    assert!(created.contains("created topic"), "{created}");
    let mut child = spawn_serve(tmp.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let value = vec!["255"; (1 << 20) - 64].join(",");
    let records = vec![format!("{{\"key\": null, \"value\": [{value}]}}"); 8].join(",");
    let line = format!("{{\"id\": 1, \"command\": {{\"Produce\": {{\"topic\": \"t\", \"records\": [{records}]}}}}}}\n");
    stdin.write_all(line.as_bytes()).unwrap();
    let long_id = format!("{{\"id\": \"{}\", \"status\": true}}\n", "i".repeat(70_000));
    stdin.write_all(long_id.as_bytes()).unwrap();
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let v: Value = serde_json::from_str(&out.next().unwrap().unwrap()).unwrap();
        if v["event"].is_null() {
            answers.push(v);
        }
    }
    let peak = peak_memory(child.id()).expect("serve is running");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let produced = answers.iter().find(|a| a["id"] == 1).unwrap_or_else(|| panic!("{answers:?}"));
    assert_eq!(produced["ok"]["Produced"]["positions"].as_array().map(Vec::len), Some(8), "{produced}");
    let refused = answers.iter().find(|a| a["id"].is_null()).unwrap();
    assert!(refused["error"].as_str().unwrap().contains("more than the 65536 taken"), "{refused}");
    let line_mib = line.len() as u64 / MIB;
    assert!(peak < 4 * line.len() as u64, "peak resident memory {} MiB for a line of {line_mib} MiB", peak / MIB);
    eprintln!("a line of {line_mib} MiB: peak resident memory {} MiB", peak / MIB);
}

/// Numeric ids come back as the number sent: integers of up to 64 bits exactly, and
/// any other number as the double nearest to it, read as a client's exact parser reads
/// it. Before, a 45-digit id (fuzz input `crash-float-id-round-trip`) was read as a
/// double one unit off the nearest, and echoed so.
#[test]
fn a_numeric_id_is_echoed_as_the_number_sent() {
    let ids = [
        "111111111111111111111111111111111111111111115",
        "0.1",
        "2.2250738585072011e-308",
        "1.7976931348623157e308",
        "-9223372036854775808",
        "18446744073709551615",
        "9007199254740993",
    ];
    let tmp = TempDir::new("serve-numeric-ids");
    let mut child = spawn_serve(tmp.path());
    let mut stdin = child.stdin.take().unwrap();
    for id in ids {
        writeln!(stdin, "{{\"id\": {id}, \"status\": true}}").unwrap();
    }
    drop(stdin);
    let out = BufReader::new(child.stdout.take().unwrap());
    let echoed: Vec<String> = out
        .lines()
        .map(|l| l.unwrap())
        .filter(|l| l.contains("\"status\""))
        .map(|l| {
            let start = l.find("\"id\":").expect("an id") + 5;
            let end = start + l[start..].find([',', '}']).expect("the id ends");
            l[start..end].to_string()
        })
        .collect();
    assert_eq!(echoed.len(), ids.len(), "{echoed:?}");
    for (sent, back) in ids.iter().zip(&echoed) {
        match (sent.parse::<i128>(), back.parse::<i128>()) {
            (Ok(s), Ok(b)) if i64::try_from(s).is_ok() || u64::try_from(s).is_ok() => assert_eq!(s, b, "{sent}"),
            _ => {
                let (s, b) = (sent.parse::<f64>().unwrap(), back.parse::<f64>().unwrap());
                assert_eq!(s.to_bits(), b.to_bits(), "sent {sent}, echoed {back}");
            }
        }
    }
    assert!(child.wait().unwrap().success());
}
