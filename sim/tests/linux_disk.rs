//! The simulated disk held against real Linux: every scenario of `broker_sim::disk_kit`
//! runs on `broker-fs`'s `RealFs` over a real file system with faults injected (a
//! tmpfs that fills, a tmpfs remounted read-only, an ext4 whose loop device runs out
//! of backing store, strace failing chosen system calls), and a seed of the simulated
//! disk must produce exactly the same run: every call's result and the directory's
//! contents after it.
//!
//! A plain harness (`harness = false`): the binary is also the child that strace runs,
//! when `BROKER_DISK_KIT_CHILD` names a scenario. It needs root (mount, losetup) and
//! strace; without them it prints one `skipped:` line per scenario and passes, unless
//! `BROKER_REQUIRE_DISK_KIT` is set (as CI sets it), which makes a skip a failure.
//! `BROKER_DISK_KIT_ONLY=NAME` runs one scenario.

use broker_fs::RealFs;
use broker_sim::disk_kit::{find_seed, run_script, scenarios, Call, Injected, RealSetup, Scenario, Step, Target};
use std::path::{Path, PathBuf};
use std::process::Command;

const CHILD: &str = "BROKER_DISK_KIT_CHILD";
/// Seeds searched for one that produces the real run.
const SEEDS: u64 = 20_000;

fn main() {
    if let Ok(name) = std::env::var(CHILD) {
        return child(&name);
    }
    let require = std::env::var_os("BROKER_REQUIRE_DISK_KIT").is_some();
    let only = std::env::var("BROKER_DISK_KIT_ONLY").ok();
    let mut failures = Vec::new();
    for scenario in scenarios().into_iter().filter(|s| only.as_deref().is_none_or(|o| o == s.name)) {
        match real_run(&scenario) {
            Err(why) if require => failures.push(format!("{}: could not run on Linux: {why}", scenario.name)),
            Err(why) => println!("skipped: {}: {why}", scenario.name),
            Ok(real) => match find_seed(&scenario, &real, 0..SEEDS) {
                Ok(seed) => println!("ok: {}: the simulated disk's seed {seed} does what Linux did", scenario.name),
                Err(m) => failures.push(format!("{}: {m}\nthe real run:\n  {}", scenario.name, real.join("\n  "))),
            },
        }
    }
    for f in &failures {
        eprintln!("FAILED: {f}\n");
    }
    assert!(failures.is_empty(), "{} of the scenarios failed", failures.len());
}

/// The scenario's run on Linux, or why it cannot run here.
fn real_run(scenario: &Scenario) -> Result<Vec<String>, String> {
    if !is_root() {
        return Err("mounting a file system needs root (CI runs it)".into());
    }
    let mount = Mount::new(scenario.name, scenario.real)?;
    let injected: Vec<(usize, &Call, Injected)> = scenario
        .steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Step::Failing(call, fault) => Some((i, call, *fault)),
            _ => None,
        })
        .collect();
    if injected.is_empty() {
        return Ok(run_script(&mut LinuxTarget::new(&mount), &scenario.steps));
    }
    // Under strace, which fails the chosen system calls: the n-th call of each.
    let mut cmd = Command::new("strace");
    let mut traced = Vec::new();
    for (i, call, fault) in injected {
        let syscall = syscall_of(call);
        let when =
            1 + scenario.steps[..i].iter().filter(|s| step_call(s).is_some_and(|c| syscall_of(c) == syscall)).count();
        let errno = match fault {
            Injected::Eio => "EIO",
            Injected::Enospc => "ENOSPC",
            Injected::Exdev => "EXDEV",
        };
        cmd.arg("-e").arg(format!("inject={syscall}:error={errno}:when={when}"));
        traced.push(syscall);
    }
    let out_file = mount.root.with_extension("trace");
    let status = cmd
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("trace={}", traced.join(",")))
        .arg(std::env::current_exe().map_err(|e| e.to_string())?)
        .env(CHILD, scenario.name)
        .env("BROKER_DISK_KIT_DIR", &mount.data)
        .env("BROKER_DISK_KIT_OUT", &out_file)
        .status()
        .map_err(|e| format!("strace: {e} (install it: apt-get install strace)"))?;
    let trace = std::fs::read_to_string(&out_file).map_err(|e| format!("the child left no trace ({status}): {e}"));
    let _ = std::fs::remove_file(&out_file);
    if !status.success() {
        return Err(format!("the child under strace failed: {status}"));
    }
    Ok(trace?.lines().map(str::to_string).collect())
}

/// Runs a scenario as strace's child, writing its run to `BROKER_DISK_KIT_OUT`.
fn child(name: &str) {
    let scenario = scenarios().into_iter().find(|s| s.name == name).expect("a known scenario");
    let data = PathBuf::from(std::env::var_os("BROKER_DISK_KIT_DIR").expect("the data directory"));
    let mut target = LinuxTarget { fs: RealFs::new(&data), data, mount: None };
    let trace = run_script(&mut target, &scenario.steps);
    let out = std::env::var_os("BROKER_DISK_KIT_OUT").expect("where the run goes");
    std::fs::write(out, trace.join("\n")).expect("write the run");
}

fn step_call(step: &Step) -> Option<&Call> {
    match step {
        Step::Call(c) | Step::Failing(c, _) => Some(c),
        Step::RemountReadOnly => None,
    }
}

/// The system call `RealFs` makes for `call` that an injection fails (each call makes
/// one; a fill makes many, so no injection may follow one of its kind).
fn syscall_of(call: &Call) -> &'static str {
    match call {
        Call::Write { .. } | Call::Fill(_) => "pwrite64",
        Call::Sync(_) => "fdatasync",
        Call::SyncDir => "fsync",
        Call::Truncate(..) => "ftruncate",
        Call::Allocate(..) => "fallocate",
        Call::Rename(..) => "rename",
        Call::Remove(_) => "unlink",
        Call::Create(_) | Call::Read(..) | Call::Len(_) | Call::List => "none",
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A real file system mounted for one scenario, with a `data` directory in it;
/// unmounted (and its loop device and backing store released) on drop.
struct Mount {
    root: PathBuf,
    data: PathBuf,
    /// The loop device and the tmpfs its backing file lies on.
    device: Option<(String, PathBuf)>,
}

impl Mount {
    fn new(tag: &str, real: RealSetup) -> Result<Mount, String> {
        let root = std::env::temp_dir().join(format!("broker-disk-kit-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let mut mount = Mount { data: root.join("data"), root, device: None };
        match real {
            RealSetup::Tmpfs(size) => {
                run(Command::new("mount")
                    .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                    .arg(&mount.root))?;
            }
            RealSetup::Ext4OnFullDevice { image, backing } => {
                let store = mount.root.with_extension("backing");
                std::fs::create_dir_all(&store).map_err(|e| e.to_string())?;
                run(Command::new("mount")
                    .args(["-t", "tmpfs", "-o", &format!("size={backing}"), "tmpfs"])
                    .arg(&store))?;
                let file = store.join("image");
                let made = std::fs::File::create(&file).and_then(|f| f.set_len(image)).map_err(|e| e.to_string());
                let device = made
                    .and_then(|()| run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&file)))
                    .and_then(|_| run(Command::new("losetup").args(["-f", "--show"]).arg(&file)));
                let device = match device {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = Command::new("umount").arg(&store).status();
                        return Err(e);
                    }
                };
                mount.device = Some((device.clone(), store));
                run(Command::new("mount").arg(&device).arg(&mount.root))?;
            }
        }
        std::fs::create_dir(&mount.data).map_err(|e| e.to_string())?;
        Ok(mount)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.root).status();
        if let Some((device, store)) = &self.device {
            let _ = Command::new("losetup").arg("-d").arg(device).status();
            let _ = Command::new("umount").arg(store).status();
            let _ = std::fs::remove_dir(store);
        }
        let _ = std::fs::remove_dir(&self.root);
    }
}

/// `RealFs` on the mounted file system.
struct LinuxTarget {
    fs: RealFs,
    data: PathBuf,
    /// The mount point, for a remount (the child, under strace, never remounts).
    mount: Option<PathBuf>,
}

impl LinuxTarget {
    fn new(mount: &Mount) -> LinuxTarget {
        LinuxTarget { fs: RealFs::new(&mount.data), data: mount.data.clone(), mount: Some(mount.root.clone()) }
    }
}

impl Target for LinuxTarget {
    type Fs = RealFs;

    fn fs(&mut self) -> &mut RealFs {
        &mut self.fs
    }

    fn files(&mut self) -> Vec<(String, Vec<u8>)> {
        files_in(&self.data)
    }

    fn remount_read_only(&mut self) {
        // A remount waits for no file open for writing: the runtime's go first.
        self.fs = RealFs::new(&self.data);
        let mount = self.mount.as_ref().expect("remounts happen in the parent");
        run(Command::new("mount").args(["-o", "remount,ro"]).arg(mount)).expect("remount read-only");
    }

    fn inject(&mut self, _: &Call, _: Injected) {} // strace does it

    fn end_injection(&mut self) {}
}

fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("list the data directory")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).expect("read a file")))
        .collect();
    files.sort();
    files
}
