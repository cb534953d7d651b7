//! When the simulated clients wake: each a think time after its last wake, drawn from
//! the scheduler's generator; and while a client could send nothing (all it may have
//! in flight, or no broker serving), its wake is *parked* instead of scheduled, so a
//! run does not spend events on clients that wake for nothing.

use crate::rng::SimRng;
use broker_core::Time;

/// The parked wakes of a run's clients, and how their wakes are drawn.
#[derive(Debug)]
pub struct ClientWakes {
    parked: Vec<Option<Time>>,
    think_us: u64,
}

impl ClientWakes {
    /// `clients` clients, none parked, thinking `think_us` microseconds on average.
    pub fn new(clients: usize, think_us: u64) -> ClientWakes {
        ClientWakes { parked: vec![None; clients], think_us }
    }

    /// How many clients there are.
    pub fn clients(&self) -> usize {
        self.parked.len()
    }

    /// Draws client `c`'s next wake, a think time after `now`: the time to schedule it
    /// at, or `None` if the client `can_send` nothing then and the wake is parked.
    pub fn next(&mut self, rng: &mut SimRng, now: Time, c: usize, can_send: bool) -> Option<Time> {
        let at = now.plus_micros(rng.between(1, 2 * self.think_us));
        if can_send {
            Some(at)
        } else {
            self.parked[c] = Some(at);
            None
        }
    }

    /// Client `c` has been freed (a reply, a cut-off, a broker serving): if its wake was
    /// parked, the time to schedule it at, the first of its skipped wakes that is not
    /// before `now`, so that it wakes when it would have had it woken all along.
    pub fn unpark(&mut self, rng: &mut SimRng, now: Time, c: usize) -> Option<Time> {
        let mut at = self.parked[c].take()?;
        while at < now {
            at = at.plus_micros(rng.between(1, 2 * self.think_us));
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_wake_comes_back_at_the_first_skipped_wake_not_past() {
        let mut wakes = ClientWakes::new(2, 100);
        let mut rng = SimRng::new(7);
        let now = Time::from_millis(1);
        let free = wakes.next(&mut rng, now, 0, true).expect("a client that can send wakes");
        assert!(free > now && free <= now.plus_micros(200));
        assert_eq!(wakes.next(&mut rng, now, 1, false), None, "a client that cannot send is parked");
        assert_eq!(wakes.unpark(&mut rng, now, 0), None, "client 0 was not parked");
        let later = Time::from_millis(50);
        let woken = wakes.unpark(&mut rng, later, 1).expect("the parked wake");
        assert!(
            woken >= later && woken <= later.plus_micros(200),
            "{woken:?} is the first skipped wake past {later:?}"
        );
        assert_eq!(wakes.unpark(&mut rng, later, 1), None, "unparked once");
    }
}
