//! The checkers, one per file, each with its invariant in its doc comment.
//!
//! [`no_orphans`], [`no_premature_removal`] and [`liveness`] are functions the runner
//! calls on the disk and the broker at the points they judge (a crash, an operation, the
//! end); so is [`durability::at_end`], which reads every live partition back once the
//! run has settled.
//!
//! The rest are gathered in [`Checkers`]: the runner feeds them every request as it is
//! issued and every reply as it arrives (both before the model folds them in, so they
//! see what the model knew at that instant), every storage operation as the core issues
//! it and as its completion is delivered, every notice the broker gives (with the disk
//! as it is then), every death of the broker process, and the end of the run. They read
//! the model; they never change it.
//!
//! Five of them judge replies against the reference model part by part, as the model
//! folds each in ([`crate::model::Seen`], through [`Checkers::model_saw`]):
//! [`model_agreement`], [`durability`], [`no_resurrection`] (which also judges the
//! live topics of each broker that reaches serving, [`Checkers::recovered`]),
//! group-offsets (`group_offsets.rs`: consumer groups' committed offsets) and
//! appended-once (`appended_once.rs`: idempotent producers' batches and ids).

pub mod durability;
pub mod liveness;
pub mod model_agreement;
pub mod no_orphans;
pub mod no_premature_removal;
pub mod no_resurrection;

mod ack_after_delete;
mod acked_offsets;
mod appended_once;
mod create_of_live_name;
mod delete_not_found;
mod every_request_answered;
mod fetch_incarnation;
mod group_offsets;
#[cfg(test)]
mod hand_fed;
mod removal_concurrency;
mod request;
mod truthful_notices;

pub use request::Request;

use crate::model::{Model, Seen, ValueId};
use crate::violation::{Flags, Violation};
use broker_core::{BrokerError, Command, LogId, OpId, Reply, RequestId, StorageOp, Time, TopicId};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Every checker of this module, fed by the runner.
#[derive(Debug)]
pub struct Checkers {
    /// Requests issued to the living process and not yet answered.
    open: BTreeMap<RequestId, Request>,
    ack_after_delete: ack_after_delete::AckAfterDelete,
    fetch_incarnation: fetch_incarnation::FetchIncarnation,
    acked_offsets: acked_offsets::AckedOffsets,
    delete_not_found: delete_not_found::DeleteNotFound,
    create_of_live_name: create_of_live_name::CreateOfLiveName,
    removal_concurrency: removal_concurrency::RemovalConcurrency,
    group_offsets: group_offsets::GroupOffsets,
    appended_once: appended_once::AppendedOnce,
    /// What [`model_agreement`], [`durability`], [`no_resurrection`], group-offsets and
    /// appended-once found.
    against_model: Vec<Violation>,
    /// What the others found.
    violations: Vec<Violation>,
}

impl Checkers {
    /// Checkers for a broker configured with this removal concurrency and this longest
    /// offset metadata.
    pub fn new(removal_concurrency: usize, max_offset_metadata_bytes: usize) -> Checkers {
        Checkers {
            open: BTreeMap::new(),
            ack_after_delete: Default::default(),
            fetch_incarnation: Default::default(),
            acked_offsets: Default::default(),
            delete_not_found: Default::default(),
            create_of_live_name: Default::default(),
            removal_concurrency: removal_concurrency::RemovalConcurrency::new(removal_concurrency),
            group_offsets: group_offsets::GroupOffsets::new(max_offset_metadata_bytes),
            appended_once: Default::default(),
            against_model: Vec::new(),
            violations: Vec::new(),
        }
    }

    /// Judges produces against this broker's limits (`Config::max_record_bytes`, its
    /// batch limit and `max_batch_records`; the defaults' until set).
    pub fn set_produce_limits(&mut self, config: &broker_core::Config) {
        self.appended_once.set_limits(appended_once::Limits::of(config));
    }

    /// A request is issued (call before the model sees it).
    pub fn issued(&mut self, now: Time, model: &Model, request: RequestId, command: &Rc<Command>, values: &[ValueId]) {
        let open = &self.open;
        self.fetch_incarnation.issued(request, values);
        self.acked_offsets.issued(model, request, command);
        self.delete_not_found.issued(now, model, open, request, command);
        self.create_of_live_name.issued(model, open, request, command);
        self.group_offsets.issued(model, request, command);
        self.open.insert(request, Request { command: Rc::clone(command), at: now });
    }

    /// A reply arrives (call before the model sees it). `rotted` tells the logs that
    /// suffered injected bit rot.
    pub fn replied(
        &mut self,
        now: Time,
        model: &Model,
        request: RequestId,
        reply: &Result<Reply, BrokerError>,
        rotted: &dyn Fn(LogId) -> bool,
    ) {
        let mut flags = Flags::new(now, &mut self.violations);
        let Some(req) = self.open.remove(&request) else {
            return every_request_answered::unexpected_reply(&mut flags, request, reply);
        };
        self.ack_after_delete.replied(&mut flags, &req, reply);
        self.fetch_incarnation.replied(&mut flags, request, &req, reply);
        self.acked_offsets.replied(&mut flags, model, request, &req, reply, rotted);
        self.delete_not_found.replied(&mut flags, request, &req, reply);
        self.create_of_live_name.replied(&mut flags, request, &req, reply);
    }

    /// The model, folding in a reply, shows a part of it (pass this as the observer of
    /// [`Model::replied`]). `rotted` tells the logs that suffered injected bit rot.
    pub fn model_saw(&mut self, now: Time, model: &Model, seen: &Seen<'_>, rotted: &dyn Fn(LogId) -> bool) {
        let mut flags = Flags::new(now, &mut self.against_model);
        model_agreement::saw(&mut flags, model, seen);
        durability::saw(&mut flags, model, seen, rotted);
        no_resurrection::saw(&mut flags, model, seen);
        self.group_offsets.saw(&mut flags, model, seen, rotted);
        self.appended_once.saw(&mut flags, model, seen);
    }

    /// A broker reached serving after a start (or serves at the end of the run) with
    /// these live incarnations.
    pub fn recovered(&mut self, now: Time, model: &Model, live: &[TopicId]) {
        let mut flags = Flags::new(now, &mut self.against_model);
        no_resurrection::recovered(&mut flags, model, live);
    }

    /// The broker gave a notice. `names` is every file the directory holds now;
    /// `rotted` tells the files the disk rotted.
    pub fn notice(
        &mut self,
        now: Time,
        model: &Model,
        notice: &broker_core::Notice,
        names: &[String],
        rotted: &dyn Fn(&str) -> bool,
    ) {
        let mut flags = Flags::new(now, &mut self.violations);
        truthful_notices::notice(&mut flags, model, &truthful_notices::DiskView { names, rotted }, notice);
    }

    /// The core issued storage operation `id`.
    pub fn storage_issued(&mut self, now: Time, id: OpId, op: &StorageOp) {
        let mut flags = Flags::new(now, &mut self.violations);
        self.removal_concurrency.issued(&mut flags, id, op);
    }

    /// The completion of storage operation `id` is delivered to the core.
    pub fn storage_completed(&mut self, id: OpId) {
        self.removal_concurrency.completed(id);
    }

    /// The broker process died (crash, halt or restart): its requests in flight will
    /// never be answered, and their outcomes are unknown; its storage operations are gone.
    pub fn process_died(&mut self) {
        let cut_off = std::mem::take(&mut self.open);
        self.acked_offsets.cut_off(cut_off.keys());
        self.delete_not_found.cut_off(cut_off.keys());
        self.create_of_live_name.cut_off(cut_off.keys());
        self.removal_concurrency.process_died();
        self.group_offsets.process_died();
    }

    /// The run ended with the broker process alive (it is the one that settled).
    pub fn run_ended(&mut self, now: Time) {
        let mut flags = Flags::new(now, &mut self.violations);
        every_request_answered::run_ended(&mut flags, &self.open);
    }

    /// Takes the violations found so far: those judged against the model first, then
    /// the others, each in the order found.
    pub fn take_violations(&mut self) -> Vec<Violation> {
        let mut v = std::mem::take(&mut self.against_model);
        v.append(&mut self.violations);
        v
    }
}
