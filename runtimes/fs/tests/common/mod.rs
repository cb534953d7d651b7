//! Helpers shared by the integration tests: temporary directories, the CLI binary,
//! and a `serve` process driven over JSON lines.
#![allow(dead_code)]

pub mod clients;
pub mod wire;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// The CLI under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_broker-fs");

/// How long any one reply may take before the test fails (generous: CI disks are slow).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// A fresh, empty temporary directory, removed on drop unless the test panicked.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("broker-fs-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("keeping {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs `broker-fs --data-dir DIR ARGS...` with `stdin` and returns its output.
pub fn cli(dir: &Path, args: &[&str], stdin: &str) -> Output {
    run_with_input(Command::new(BIN).arg("--data-dir").arg(dir).args(args), stdin.as_bytes())
}

/// Runs `command` with `stdin` written to its standard input; returns its output.
pub fn run_with_input(command: &mut Command, stdin: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    // A command may exit before it reads its input (one refused at the lock does): what
    // it was not sent is then no error of the test; its status and output say the rest.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

/// Like [`cli`], but the command must succeed; returns its standard output.
pub fn cli_ok(dir: &Path, args: &[&str]) -> String {
    let out = cli(dir, args, "");
    assert!(
        out.status.success(),
        "broker-fs {args:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A `broker-fs serve` process.
pub struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    stash: std::collections::BTreeMap<u64, Value>,
    next_id: u64,
}

impl Server {
    /// Starts `serve` on `dir` (its standard error appended to `log`) and waits until
    /// it has recovered.
    pub fn start(dir: &Path, log: &Path) -> Server {
        Server::start_with(dir, log, &[])
    }

    /// Like [`Server::start`], with more arguments to `serve`.
    pub fn start_with(dir: &Path, log: &Path, args: &[&str]) -> Server {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        let mut child = Command::new(BIN)
            .arg("--data-dir")
            .arg(dir)
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn broker-fs serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut s = Server { child, stdin, lines, stash: Default::default(), next_id: 1 };
        let ready = s.next_line();
        assert_eq!(ready["event"], "ready", "first line of serve: {ready}");
        s
    }

    fn next_line(&mut self) -> Value {
        match self.lines.recv_timeout(REPLY_TIMEOUT) {
            Ok(v) => v,
            Err(e) => panic!("no line from serve within {REPLY_TIMEOUT:?} ({e}); exit: {:?}", self.child.try_wait()),
        }
    }

    /// Sends a command without waiting; returns its id.
    pub fn send(&mut self, command: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({ "id": id, "command": command });
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        id
    }

    /// Waits for the reply to `id`; replies to other ids are kept for their turn.
    pub fn wait(&mut self, id: u64) -> Value {
        loop {
            if let Some(v) = self.stash.remove(&id) {
                return v;
            }
            let v = self.next_line();
            match v["id"].as_u64() {
                Some(other) => {
                    self.stash.insert(other, v);
                }
                None => panic!("unexpected line from serve: {v}"),
            }
        }
    }

    /// Sends a command and returns its `ok` payload; any error fails the test.
    pub fn call(&mut self, command: Value) -> Value {
        let id = self.send(command.clone());
        let v = self.wait(id);
        match v.get("ok") {
            Some(ok) => ok.clone(),
            None => panic!("command {command} failed: {v}"),
        }
    }

    /// Live topics and pending deletions.
    pub fn status(&mut self) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(self.stdin, "{}", json!({ "id": id, "status": true })).unwrap();
        self.stdin.flush().unwrap();
        self.wait(id)["status"].clone()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`; returns every reply the process wrote before it died, by id.
    pub fn kill(mut self) -> std::collections::BTreeMap<u64, Value> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        // The reader thread ends at end of file, once everything written is read.
        while let Ok(v) = self.lines.recv_timeout(REPLY_TIMEOUT) {
            if let Some(id) = v["id"].as_u64() {
                self.stash.insert(id, v);
            }
        }
        self.stash
    }

    /// Waits for the process to exit by itself; returns its status and the lines it
    /// wrote that were not read yet.
    pub fn wait_exit(mut self) -> (std::process::ExitStatus, Vec<Value>) {
        let status = self.child.wait().unwrap();
        let mut lines: Vec<Value> = std::mem::take(&mut self.stash).into_values().collect();
        while let Ok(v) = self.lines.recv_timeout(REPLY_TIMEOUT) {
            lines.push(v);
        }
        (status, lines)
    }

    /// Closes standard input at once, then waits for the process to exit by itself;
    /// returns its status and the lines it wrote that were not read yet.
    pub fn end_input(self) -> (std::process::ExitStatus, Vec<Value>) {
        let Server { mut child, stdin, lines, stash, .. } = self;
        drop(stdin);
        let status = child.wait().unwrap();
        let mut out: Vec<Value> = stash.into_values().collect();
        while let Ok(v) = lines.recv_timeout(REPLY_TIMEOUT) {
            out.push(v);
        }
        (status, out)
    }

    /// Closes standard input and waits for a clean exit.
    pub fn close(self) {
        let Server { mut child, stdin, .. } = self;
        drop(stdin);
        let status = child.wait().unwrap();
        assert!(status.success(), "serve exited with {status}");
    }
}

/// Every `.log` file in `dir`, as (topic id, partition).
pub fn log_files(dir: &Path) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".log") {
            let (t, p) = stem.split_once('-').unwrap_or_else(|| panic!("odd log name {name}"));
            out.push((u64::from_str_radix(t, 16).unwrap(), u32::from_str_radix(p, 16).unwrap()));
        }
    }
    out.sort();
    out
}

/// A `broker-fs serve --kafka 127.0.0.1:0` process: the JSON-lines protocol on
/// standard input (given end of file at once: with `--kafka`, that does not stop it)
/// and a Kafka listener on a port the kernel picks.
pub struct KafkaServer {
    child: Child,
    /// `host:port` from the `kafka-listening` line.
    pub address: String,
    /// Where its standard error goes.
    pub log: PathBuf,
}

impl KafkaServer {
    /// Starts the server on `dir` and waits for `{"event":"ready"}` and
    /// `{"event":"kafka-listening","address":...}`, in either order.
    pub fn start(dir: &Path, log: &Path) -> KafkaServer {
        KafkaServer::start_with(dir, log, &[])
    }

    /// Like [`KafkaServer::start`], with more arguments to `serve`.
    pub fn start_with(dir: &Path, log: &Path, args: &[&str]) -> KafkaServer {
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        let mut child = Command::new(BIN)
            .arg("--data-dir")
            .arg(dir)
            .args(["serve", "--kafka", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .expect("spawn broker-fs serve --kafka");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let (mut ready, mut address) = (false, None);
        while !(ready && address.is_some()) {
            let line = match lines.recv_timeout(REPLY_TIMEOUT) {
                Ok(line) => line,
                Err(e) => panic!(
                    "serve --kafka: no ready and kafka-listening lines within {REPLY_TIMEOUT:?} ({e}); exit: {:?}; \
                     stderr:\n{}",
                    child.try_wait(),
                    std::fs::read_to_string(log).unwrap_or_default()
                ),
            };
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"));
            match v["event"].as_str() {
                Some("ready") => ready = true,
                Some("kafka-listening") => {
                    let a = v["address"].as_str().unwrap_or_else(|| panic!("kafka-listening without address: {v}"));
                    let sock: std::net::SocketAddr = a.parse().unwrap_or_else(|e| panic!("address {a:?}: {e}"));
                    assert!(sock.ip().is_loopback() && sock.port() != 0, "kafka-listening on {a}: not the bound port");
                    address = Some(a.to_string());
                }
                _ => panic!("unexpected line from serve --kafka before it listens: {v}"),
            }
        }
        // Later lines (none are expected) are drained so that the pipe never fills.
        std::thread::spawn(move || while lines.recv().is_ok() {});
        KafkaServer { child, address: address.unwrap(), log: log.to_path_buf() }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its standard error so far, for failure messages.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails the test if the process has exited (its standard input ended at once, so
    /// this also checks that end of input does not stop a Kafka listener).
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("serve --kafka exited by itself ({status}); stderr:\n{}", self.stderr());
        }
    }

    /// SIGTERM, then waits: the process must exit with status 0.
    pub fn terminate(mut self) {
        self.assert_running();
        let pid = self.child.id().to_string();
        let kill = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill -TERM");
        assert!(kill.success(), "kill -TERM {pid}: {kill}");
        let deadline = std::time::Instant::now() + REPLY_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("serve --kafka still running {REPLY_TIMEOUT:?} after SIGTERM; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "serve --kafka exited with {status} on SIGTERM; stderr:\n{}", self.stderr());
    }

    /// `kill -9`.
    pub fn kill9(mut self) {
        self.assert_running();
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for KafkaServer {
    /// A server left running by a failed test is killed, not leaked.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
