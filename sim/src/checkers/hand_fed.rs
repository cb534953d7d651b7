//! The model and every checker fed by hand, for the checkers' unit tests: one client's
//! commands sent and answered at time zero, and the broker's crashes.

use super::Checkers;
use crate::model::{Model, ValueId};
use broker_core::{BrokerError, Command, Reply, RequestId, Time};
use std::rc::Rc;

/// A model and the checkers of one client, fed by hand.
pub(super) struct HandFed {
    pub(super) model: Model,
    pub(super) checkers: Checkers,
    /// The next request id.
    next: u64,
}

impl HandFed {
    pub(super) fn new() -> HandFed {
        HandFed { model: Model::default(), checkers: Checkers::new(1, 8), next: 1 }
    }

    /// Issues `command` to the model and the checkers; its request id.
    pub(super) fn send(&mut self, command: Command) -> RequestId {
        let request = RequestId(self.next);
        self.next += 1;
        let command = Rc::new(command);
        let values = ValueId::of_command(&command);
        self.checkers.issued(Time::ZERO, &self.model, request, &command, &values);
        self.model.issued(Time::ZERO, request, &command, &values);
        request
    }

    /// Answers `request` with `reply`, no storage rot seen.
    pub(super) fn answer(&mut self, request: RequestId, reply: Result<Reply, BrokerError>) {
        let no_rot = |_| false;
        self.checkers.replied(Time::ZERO, &self.model, request, &reply, &no_rot);
        let checkers = &mut self.checkers;
        self.model
            .replied(Time::ZERO, request, &reply, &mut |m, seen| checkers.model_saw(Time::ZERO, m, &seen, &no_rot));
    }

    /// Sends `command` and answers it with `reply` at once.
    pub(super) fn ask(&mut self, command: Command, reply: Result<Reply, BrokerError>) {
        let request = self.send(command);
        self.answer(request, reply);
    }

    /// The broker's process dies: what was in flight is never answered.
    pub(super) fn crash(&mut self) {
        self.model.crashed();
        self.checkers.process_died();
    }
}
