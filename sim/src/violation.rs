//! What a checker reports.

use broker_core::Time;
use std::fmt;

/// The invariant a violation breaks; one checker each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Checker {
    /// Every log on disk belongs to a live topic or a pending deletion in the durable
    /// journal; after settling, exactly the live topics' logs remain.
    NoOrphans,
    /// Every acknowledged record of a live topic reads back, with its offset and bytes.
    Durability,
    /// An acknowledged deletion is never undone; old records never appear under a new incarnation.
    NoResurrection,
    /// No live topic's log is removed; no in-flight read fails because of a deletion.
    NoPrematureRemoval,
    /// Once faults stop, every pending deletion completes within a bound.
    Liveness,
    /// Replies agree with the reference model.
    ModelAgreement,
    /// No produce is acknowledged after the acknowledgement of its incarnation's deletion.
    NoAckAfterDelete,
    /// No fetch reply names an incarnation whose deletion was acknowledged, or shows a
    /// record under an incarnation it could not have been produced to.
    FetchIncarnation,
    /// An acknowledged offset is served during the run: never out of range, missing or
    /// below the high watermark.
    AckedOffsetsServed,
    /// Every request admitted by a broker that lives to the end gets exactly one reply.
    EveryRequestAnswered,
    /// A delete is never answered not-found while the name has a live or pending incarnation.
    DeleteNotFound,
    /// A create is never answered created while its name is live.
    CreateOfLiveName,
    /// Log removals in flight never exceed the configured removal concurrency.
    RemovalConcurrency,
    /// Every notice to the operator is true when given (a finished deletion left no log,
    /// a removed stray is gone and was no live log, corruption only where the disk rotted).
    TruthfulNotices,
    /// Consumer groups' committed offsets follow their incarnation and survive crashes:
    /// a read shows each partition's last acknowledged commit to that incarnation (or a
    /// later one of unknown outcome), never a position of another incarnation or of a
    /// refused commit; lists and deletions of groups agree; refusals are typed.
    GroupOffsets,
    /// An idempotent producer's batch is appended once: a retry is answered with the
    /// positions its batch was acknowledged at, its records are never in a partition
    /// twice (the documented exceptions of log-sync aside); producer ids are handed out
    /// once; refusals are typed and change nothing.
    AppendedOnce,
    /// Cluster: no command observes an incarnation outside its life (from the instant
    /// its create landed to the instant its tombstone did), none says a name is absent
    /// while an incarnation of it was live all along, and a fetch shows every record
    /// acknowledged before it was invoked.
    LinearizableLifecycle,
    /// Cluster: every journal entry folds (never a second live incarnation of a name),
    /// every acknowledged create is the journal's, and every node ends with the
    /// journal's catalog.
    OneLiveIncarnation,
    /// Cluster: once the run settles, every record written to a live topic reads back
    /// from every node, at its offset.
    AckedReadableEverywhere,
    /// Cluster: at most one `Removed` entry per incarnation.
    OneCompletion,
    /// Cluster: a node that can reach the store again (or restarted) has read every
    /// journal entry that existed then within a bounded simulated time.
    HealsInBound,
    /// Cluster: a command answered with a definite failure had no effect: no record of
    /// a produce answered with any error but an unknown outcome is in a segment the
    /// store held, and no journal entry that only creates or deletes answered
    /// unavailable could have written landed.
    FailedWritesNoEffect,
}

impl Checker {
    /// Every checker.
    pub const ALL: [Checker; 22] = [
        Checker::NoOrphans,
        Checker::Durability,
        Checker::NoResurrection,
        Checker::NoPrematureRemoval,
        Checker::Liveness,
        Checker::ModelAgreement,
        Checker::NoAckAfterDelete,
        Checker::FetchIncarnation,
        Checker::AckedOffsetsServed,
        Checker::EveryRequestAnswered,
        Checker::DeleteNotFound,
        Checker::CreateOfLiveName,
        Checker::RemovalConcurrency,
        Checker::TruthfulNotices,
        Checker::GroupOffsets,
        Checker::AppendedOnce,
        Checker::LinearizableLifecycle,
        Checker::OneLiveIncarnation,
        Checker::AckedReadableEverywhere,
        Checker::OneCompletion,
        Checker::HealsInBound,
        Checker::FailedWritesNoEffect,
    ];

    /// The checker's name, as the summary prints it.
    pub fn name(self) -> &'static str {
        match self {
            Checker::NoOrphans => "no-orphans",
            Checker::Durability => "durability",
            Checker::NoResurrection => "no-resurrection",
            Checker::NoPrematureRemoval => "no-premature-removal",
            Checker::Liveness => "liveness",
            Checker::ModelAgreement => "model-agreement",
            Checker::NoAckAfterDelete => "no-ack-after-delete",
            Checker::FetchIncarnation => "fetch-incarnation",
            Checker::AckedOffsetsServed => "acked-offsets-served",
            Checker::EveryRequestAnswered => "every-request-answered",
            Checker::DeleteNotFound => "delete-not-found",
            Checker::CreateOfLiveName => "create-of-live-name",
            Checker::RemovalConcurrency => "removal-concurrency",
            Checker::TruthfulNotices => "truthful-notices",
            Checker::GroupOffsets => "group-offsets",
            Checker::AppendedOnce => "appended-once",
            Checker::LinearizableLifecycle => "linearizable-lifecycle",
            Checker::OneLiveIncarnation => "one-live-incarnation",
            Checker::AckedReadableEverywhere => "acked-readable-everywhere",
            Checker::OneCompletion => "one-completion",
            Checker::HealsInBound => "heals-in-bound",
            Checker::FailedWritesNoEffect => "failed-writes-no-effect",
        }
    }
}

impl fmt::Display for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which checker caught it.
    pub checker: Checker,
    /// When (simulated time).
    pub at: Time,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] at {}: {}", self.checker, self.at, self.detail)
    }
}

/// Where a checker reports what it sees: each violation stamped with the instant the
/// flags were taken for. The one-broker checkers and the cluster's report alike.
pub struct Flags<'a> {
    now: Time,
    out: &'a mut Vec<Violation>,
}

impl<'a> Flags<'a> {
    /// Flags that stamp `now` and report into `out`, after what it holds.
    pub fn new(now: Time, out: &'a mut Vec<Violation>) -> Flags<'a> {
        Flags { now, out }
    }

    /// The instant violations are stamped with.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Reports that `checker`'s invariant broke, as `detail` says.
    pub fn flag(&mut self, checker: Checker, detail: String) {
        self.out.push(Violation { checker, at: self.now, detail });
    }
}
