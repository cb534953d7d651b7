//! Rule H, healing and deadlines: a failed store operation is issued again after a
//! backoff that grows with the failures in a row; a request not answered by its
//! deadline is answered then (nothing written, or an unknown outcome if its write goes
//! on); and a journal that cannot be read on makes the node refuse everything.

use super::*;

impl Node {
    /// Answers every request whose deadline is at or before `now`.
    pub(super) fn answer_overdue(&mut self, now: Time) {
        while let Some(&(at, request)) = self.requests.deadlines.first() {
            if at > now {
                break;
            }
            self.requests.deadlines.pop_first();
            self.requests.deadline.remove(&request);
            self.expire(request);
        }
    }

    /// Issues again every failed operation whose backoff ended at or before `now`.
    pub(super) fn retry_due(&mut self, now: Time) {
        while let Some(entry) = self.healing.retries.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let retry = entry.remove();
            self.issue(retry.op, retry.purpose);
        }
    }

    /// Operation `id` failed at `now` with nothing done: issues it again after the
    /// backoff.
    pub(super) fn retry_later(&mut self, now: Time, id: StoreOpId, op: StoreOp, purpose: Purpose) {
        let delay = self.options.config.backoff_ms(self.healing.failures);
        self.healing.failures = self.healing.failures.saturating_add(1);
        let at = now.plus_millis(delay);
        self.healing.retries.insert((at, id.0), Retry { op, purpose });
    }

    /// `request` reached its deadline unanswered (rule H).
    pub(super) fn expire(&mut self, request: RequestId) {
        if !self.requests.open.contains(&request) {
            return;
        }
        let waited = self.options.request_timeout_ms;
        let nothing_done = || {
            BrokerError::Unavailable(format!(
                "the shared store did not answer within {waited} ms; nothing was written: try again"
            ))
        };
        // Waiting for its first fence, or a fetch or describe anywhere: nothing is written.
        let unstarted = |after: &After| matches!(after, After::Command(_) | After::Fetched(_));
        if let Some(i) = self.fence.waiting.iter().position(|(r, after, _)| *r == request && unstarted(after)) {
            self.fence.waiting.remove(i);
            self.data.work.remove(&request);
            return self.reply(request, Err(nothing_done()));
        }
        if matches!(self.data.work.get(&request), Some(Work::Fetch { .. } | Work::Describe { .. })) {
            self.data.work.remove(&request);
            return self.reply(request, Err(nothing_done()));
        }
        if let Some(i) = self.append.queue.iter().position(|a| matches!(a, Appendable::Client(r, _) if *r == request)) {
            self.append.queue.remove(i);
            return self.reply(request, Err(nothing_done()));
        }
        let appending =
            self.append.current.as_ref().is_some_and(|a| matches!(a.from, Appendable::Client(r, _) if r == request));
        if appending && planted!(self.options.config, ClusterUnavailableAppend) {
            self.reply(request, Err(nothing_done()));
            self.requests.expired.insert(request);
            return;
        }
        // A produce writing its segments or waiting for its second fence, or a create or
        // delete being appended: the write goes on and may take effect.
        let why = format!(
            "the shared store did not answer within {waited} ms while the write was under way: it may or may not \
             take effect"
        );
        self.reply(request, Err(BrokerError::OutcomeUnknown(why)));
        self.requests.expired.insert(request);
    }

    /// The journal cannot be read on: refuse everything waiting, and all that comes.
    pub(super) fn break_down(&mut self, why: String) {
        self.healing.broken = Some(why.clone());
        self.fence.round = None;
        let waiting: Vec<RequestId> = self.fence.waiting.drain(..).map(|(r, _, _)| r).collect();
        let work: Vec<RequestId> =
            std::mem::take(&mut self.data.work).into_keys().filter(|r| !waiting.contains(r)).collect();
        self.data.lanes.clear();
        self.data.starting.clear();
        self.data.held.clear();
        let client = |a: Appendable| match a {
            Appendable::Client(request, _) => Some(request),
            Appendable::Removed(_) => None,
        };
        let appends: Vec<RequestId> = self.append.queue.drain(..).filter_map(client).collect();
        let appending = self.append.current.take().and_then(|a| client(a.from));
        for request in waiting.into_iter().chain(work).chain(appends).chain(appending) {
            self.reply(request, Err(BrokerError::Unavailable(why.clone())));
        }
    }
}
