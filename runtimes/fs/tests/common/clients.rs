//! Real Kafka clients run by the tests: the Python of `.ci/kafka-clients`
//! (`BROKER_KAFKA_PYTHON`), one client test at a time, a skip (one `skipped:` line) where
//! they are missing unless `BROKER_REQUIRE_KAFKA_CLIENTS=1` makes that a failure, and a
//! client's script run to its end within a bound.

use super::KafkaServer;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest one client run may take (each call inside it is bounded at 30 s).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// One client test at a time: the clients' threads and the servers share the cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The Python with the clients installed.
pub fn python() -> String {
    std::env::var("BROKER_KAFKA_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Whether clients are required (then a missing one fails the test).
pub fn required() -> bool {
    std::env::var("BROKER_REQUIRE_KAFKA_CLIENTS").as_deref() == Ok("1")
}

/// Takes the test lock and checks that the Python clients import (`script clients` exits
/// 0). `None`: they do not, and the test is to be skipped (its one `skipped:` line is
/// printed here), unless [`required`], where that fails it.
pub fn installed(script: &str) -> Option<MutexGuard<'static, ()>> {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(python()).env("PYTHONDONTWRITEBYTECODE", "1").arg(script).arg("clients").output();
    let why = match &out {
        Ok(o) if o.status.success() => return Some(guard),
        Ok(o) => format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
        Err(e) => e.to_string(),
    };
    if required() {
        panic!(
            "BROKER_REQUIRE_KAFKA_CLIENTS=1 but the Kafka clients do not import with {} ({why}); \
             run .ci/kafka-clients and set BROKER_KAFKA_PYTHON to the python it prints",
            python()
        );
    }
    println!("skipped: kafka clients not installed (run .ci/kafka-clients, see README)");
    None
}

/// Runs `program args...` to its end (killed after [`RUN_TIMEOUT`]); it must exit 0 and
/// leave `server` running. Prints its standard error (what it logged) and returns its
/// standard output.
pub fn run(server: &mut KafkaServer, program: &str, args: &[&str]) -> String {
    let mut child = Command::new(program)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let (status, stdout, stderr) = wait_child(&mut child, &format!("{program} {args:?}"), RUN_TIMEOUT);
    println!("--- {program} {args:?} ---\n{stderr}");
    assert!(
        status.success(),
        "{program} {args:?} failed ({status}):\n{stderr}\n{stdout}\n--- broker-fs stderr ---\n{}",
        server.stderr()
    );
    server.assert_running();
    stdout
}

/// Waits for `child`, which pipes its standard error (and maybe its standard output),
/// reading both as it runs; fails the test, `what` named, if it is still running after
/// `timeout` (it is killed first). Its status, standard output (empty if not piped) and
/// standard error.
pub fn wait_child(child: &mut Child, what: &str, timeout: Duration) -> (ExitStatus, String, String) {
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = child.stdout.take().map(|s| read(Box::new(s)));
    let err = read(Box::new(child.stderr.take().expect("a piped standard error")));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {timeout:?}; stderr:\n{}", err.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, out.map(|h| h.join().unwrap()).unwrap_or_default(), err.join().unwrap())
}
