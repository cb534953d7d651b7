//! `broker-cluster serve` given stores it cannot use: a URL that names no supported
//! store is refused with the supported list; a directory that cannot be one is refused
//! at the start; an S3 endpoint where nothing answers is told on standard error in one
//! line, at once and without any client, and in the node's status file, and the node
//! goes on retrying.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn serve(store_args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_broker-cluster"));
    c.arg("serve").args(store_args).args(["--node-id", "1", "--kafka", "127.0.0.1:0"]);
    c
}

#[test]
fn a_url_that_names_no_store_is_refused_with_the_supported_list() {
    let out = serve(&["--store", "ftp://host/dir"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for scheme in ["file:///path", "s3://bucket", "postgres://", "memory://"] {
        assert!(err.contains(scheme), "{err}");
    }
}

/// `--spread-leadership` names the node to clients by the address it listens on: one
/// that names no host (0.0.0.0) is refused, saying what to give instead.
#[test]
fn spread_leadership_on_an_address_clients_cannot_reach_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_broker-cluster"))
        .args(["serve", "--store", "memory://", "--node-id", "1", "--kafka", "0.0.0.0:0", "--spread-leadership"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--spread-leadership") && err.contains("give --kafka a specific address"), "{err}");
}

#[test]
fn a_directory_store_on_a_file_is_refused_at_the_start() {
    let file = std::env::temp_dir().join(format!("broker-cluster-not-a-dir-{}", std::process::id()));
    std::fs::write(&file, b"x").unwrap();
    let out = serve(&["--store", &format!("file://{}", file.display())]).output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open the store") && err.contains("Not a directory"), "{err}");
}

#[test]
fn an_s3_endpoint_where_nothing_answers_is_told_at_once() {
    let status_file = std::env::temp_dir().join(format!("broker-cluster-status-{}", std::process::id()));
    let status_arg = status_file.display().to_string();
    let mut child = serve(&["--store", "s3://bucket", "--s3-endpoint", "http://127.0.0.1:1"])
        .args(["--status-file", &status_arg])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The first failure within 30 s, then 8 s more of retries (object_store's own and
    // the node's) that must not repeat it.
    let started = Instant::now();
    let mut said = Vec::new();
    let mut told_at = None;
    while let Some(left) = match told_at {
        None => Duration::from_secs(30).checked_sub(started.elapsed()),
        Some(at) => Duration::from_secs(8).checked_sub(Instant::now() - at),
    } {
        let Ok(line) = rx.recv_timeout(left) else { break };
        if told_at.is_none() && line.starts_with("store: reads failing") && line.contains("listing \"j/\"") {
            told_at = Some(Instant::now());
        }
        said.push(line);
    }
    // The node's status file says why too (written every second).
    let out = Command::new(env!("CARGO_BIN_EXE_broker-cluster")).args(["node-status", "--json", &status_arg]).output();
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_file(&status_file);
    assert!(told_at.is_some(), "no failure told in 30 s: {said:?}");
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(state["read_error"].as_str().is_some_and(|e| e.contains("listing \"j/\"")), "{state}");
    assert_eq!((state["node"].as_u64(), state["position"].as_u64()), (Some(1), Some(0)), "{state}");
    let told: Vec<&String> = said.iter().filter(|l| l.starts_with("store:")).collect();
    assert_eq!(told.len(), 1, "{said:?}");
    assert!(told[0].contains("retrying with backoff"), "{said:?}");
}
