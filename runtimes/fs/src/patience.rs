//! The driver's retry policy: how long it waits on storage that keeps failing, and what
//! it says meanwhile. The core retries a failed storage operation with backoff for ever;
//! a caller that cannot wait for ever (the CLI, with `--timeout`) sets a [`RetryPolicy`]
//! in [`crate::DriverOptions`], and the driver applies it to every wait: to recovery
//! while [`crate::Driver::open`] runs (`Recovery`), then to the waits on replies and on
//! background work (`Patience`). The driver feeds these records the failures the core
//! reports and asks them whether to go on; they never call the driver.

use crate::report::{secs, DriverError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a driver's waits go on while storage keeps failing, and whether they say so.
/// The default waits for ever, silently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Give up once storage has kept failing this long, counted from the first failure
    /// (of recovery while opening; after that, the first that any wait sees); `None`
    /// waits for ever. A slow disk that does not fail is waited for without limit.
    pub timeout: Option<Duration>,
    /// Print on standard error each failed recovery attempt, and, at most once a second
    /// while a later wait sees failures, which operations keep failing and how long is
    /// left. The lines name `--timeout`, the CLI's option for [`RetryPolicy::timeout`].
    pub report: bool,
}

/// How often a wait under a policy stops to look at the retries it should report or
/// give up on.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// The least time between two progress lines about retries.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Recovery's failures while the driver opens: every retry the core reports counts as a
/// failed attempt. Recovery gives up after `attempts` failures or once failures have
/// gone on for the policy's timeout, whichever comes first.
pub(crate) struct Recovery {
    policy: RetryPolicy,
    /// The most failed attempts recovery may make; `None`: no limit.
    attempts: Option<u32>,
    failures: u32,
    /// How many failures were already looked at by [`Recovery::next_wait`].
    seen: u32,
    /// When `next_wait` first saw a failure: the timeout runs from there.
    first_failure: Option<Instant>,
    /// The last failure, as `OPERATION failed: ERROR`.
    last_error: Option<String>,
}

impl Recovery {
    pub(crate) fn new(policy: RetryPolicy, attempts: Option<u32>) -> Recovery {
        Recovery { policy, attempts, failures: 0, seen: 0, first_failure: None, last_error: None }
    }

    /// Counts one failed attempt, `what` saying which operation failed and how.
    pub(crate) fn failed(&mut self, what: String) {
        self.failures += 1;
        self.last_error = Some(what);
    }

    /// Reports the latest failure if there were new ones, then says how long the driver
    /// may wait for its next event: until the time limit (`Some`) or without limit
    /// (`None`). An error once recovery must give up.
    pub(crate) fn next_wait(&mut self, dir: &Path) -> Result<Option<Instant>, DriverError> {
        let failures = self.failures;
        if failures > self.seen {
            self.seen = failures;
            self.first_failure.get_or_insert_with(Instant::now);
            if let (true, Some(what)) = (self.policy.report, &self.last_error) {
                eprintln!("retrying: recovery: {what} (attempt {failures})");
            }
        }
        let give_up_at = self.first_failure.zip(self.policy.timeout).map(|(t, limit)| t + limit);
        let out_of_attempts = self.attempts.is_some_and(|limit| failures >= limit);
        if out_of_attempts || give_up_at.is_some_and(|t| Instant::now() >= t) {
            let detail = self.last_error.take().unwrap_or_default();
            return Err(DriverError::Recovery { dir: dir.to_path_buf(), attempts: failures, detail });
        }
        Ok(give_up_at)
    }
}

/// The waits of an open driver under its policy: which operations failed, since when,
/// and when that was last reported. One record for the driver's life, so the timeout
/// runs from the first failure of any wait: a produce sent as several requests gives up
/// once, not once per request.
pub(crate) struct Patience {
    policy: RetryPolicy,
    dir: PathBuf,
    /// When the first failure was seen: the timeout runs from there.
    first_failure: Option<Instant>,
    /// Per failing operation, in the order first seen: failed attempts, last error.
    failures: Vec<(String, u32, String)>,
    /// When progress was last printed, and whether failures came since.
    reported: Option<Instant>,
    unreported: bool,
}

impl Patience {
    pub(crate) fn new(policy: RetryPolicy, dir: &Path) -> Patience {
        Patience {
            policy,
            dir: dir.to_path_buf(),
            first_failure: None,
            failures: Vec::new(),
            reported: None,
            unreported: false,
        }
    }

    /// Whether a wait must stop every [`TICK`] to look at failures; without a timeout
    /// or reports it just waits.
    pub(crate) fn watches(&self) -> bool {
        self.policy.timeout.is_some() || self.policy.report
    }

    /// Counts one failure of the operation `what`.
    pub(crate) fn failed(&mut self, what: String, error: String) {
        self.first_failure.get_or_insert_with(Instant::now);
        self.unreported = true;
        match self.failures.iter_mut().find(|(w, ..)| *w == what) {
            Some((_, attempts, last)) => {
                *attempts += 1;
                *last = error;
            }
            None => self.failures.push((what, 1, error)),
        }
    }

    /// After a [`TICK`] of a wait: an error once failures have gone on for the timeout,
    /// else the progress lines if they are due.
    pub(crate) fn check(&mut self) -> Result<(), DriverError> {
        let now = Instant::now();
        if let (Some(first), Some(timeout)) = (self.first_failure, self.policy.timeout) {
            if now.duration_since(first) >= timeout {
                return Err(self.give_up(timeout));
            }
        }
        if self.policy.report
            && self.unreported
            && self.reported.is_none_or(|t| now.duration_since(t) >= PROGRESS_EVERY)
        {
            self.report(now);
        }
        Ok(())
    }

    /// Prints one progress line per failing operation.
    fn report(&mut self, now: Instant) {
        let left = self.policy.timeout.map(|timeout| {
            let gone = self.first_failure.map_or(Duration::ZERO, |t| now.duration_since(t));
            format!("; giving up in {} unless it succeeds (--timeout)", secs(timeout.saturating_sub(gone)))
        });
        for (what, attempts, last) in &self.failures {
            eprintln!(
                "retrying: {what} has failed {attempts} times (last error: {last}){}",
                left.as_deref().unwrap_or("")
            );
        }
        self.reported = Some(now);
        self.unreported = false;
    }

    fn give_up(&self, timeout: Duration) -> DriverError {
        let failures = self
            .failures
            .iter()
            .map(|(what, attempts, last)| format!("{what} failed {attempts} times (last error: {last})"))
            .collect();
        DriverError::GaveUp { dir: self.dir.clone(), timeout, failures }
    }
}
