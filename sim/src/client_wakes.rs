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
    ///
    /// The skipped wakes are stepped through for a few think times only: a broker down
    /// for seconds, with clients thinking tens of microseconds, made one draw per skipped
    /// wake the simulator's largest cost. Past that, where the next wake falls no longer
    /// depends on where the wait began, and it is drawn at once from the wait's
    /// stationary law (`residual_wait`).
    pub fn unpark(&mut self, rng: &mut SimRng, now: Time, c: usize) -> Option<Time> {
        let mut at = self.parked[c].take()?;
        for _ in 0..STEPPED_WAKES {
            if at >= now {
                return Some(at);
            }
            at = at.plus_micros(rng.between(1, 2 * self.think_us));
        }
        Some(if at >= now { at } else { now.plus_micros(residual_wait(rng, self.think_us)) })
    }
}

/// How many skipped wakes [`ClientWakes::unpark`] steps through before it draws the
/// next one from the stationary law.
const STEPPED_WAKES: usize = 16;

/// The time from a moment long after a client began thinking to its next wake, when its
/// think times are uniform in `1..=2t`: the residual life of that renewal process, with
/// density `(1 - r/2t)/t` on `0..2t` (mean `2t/3`), drawn by inverting its distribution
/// `F(r) = (r - r²/4t)/t`. At least 1, as every think time is.
fn residual_wait(rng: &mut SimRng, t: u64) -> u64 {
    let u = ((rng.u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64);
    let r = 2.0 * t as f64 * (1.0 - (1.0 - u).sqrt());
    (r as u64).clamp(1, 2 * t.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_wake_comes_back_as_parked_or_within_a_think_time_from_now() {
        let mut wakes = ClientWakes::new(2, 100);
        let mut rng = SimRng::new(7);
        let now = Time::from_millis(1);
        let free = wakes.next(&mut rng, now, 0, true).expect("a client that can send wakes");
        assert!(free > now && free <= now.plus_micros(200));
        assert_eq!(wakes.next(&mut rng, now, 1, false), None, "a client that cannot send is parked");
        assert_eq!(wakes.unpark(&mut rng, now, 0), None, "client 0 was not parked");
        // Freed before its parked wake: it wakes then.
        let parked = wakes.next(&mut rng, now, 0, false);
        assert_eq!(parked, None);
        let early = wakes.unpark(&mut rng, now, 0).expect("the parked wake");
        assert!(early > now && early <= now.plus_micros(200), "{early:?} is the parked wake");
        // Freed long after it: within a think time from then.
        let later = Time::from_millis(50);
        let woken = wakes.unpark(&mut rng, later, 1).expect("the parked wake");
        assert!(woken > later && woken <= later.plus_micros(200), "{woken:?} is a think time past {later:?}");
        assert_eq!(wakes.unpark(&mut rng, later, 1), None, "unparked once");
    }

    #[test]
    fn the_residual_wait_has_the_stationary_mean() {
        let mut rng = SimRng::new(11);
        let t = 300;
        let n = 200_000;
        let draws: Vec<u64> = (0..n).map(|_| residual_wait(&mut rng, t)).collect();
        assert!(draws.iter().all(|r| (1..=2 * t).contains(r)));
        let mean = draws.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean - 2.0 * t as f64 / 3.0).abs() < 2.0, "mean {mean}, expected {}", 2 * t / 3);
        // The density falls: a quarter of the range holds 7/16 of the draws.
        let low = draws.iter().filter(|&&r| r < t / 2).count() as f64 / n as f64;
        assert!((low - 7.0 / 16.0).abs() < 0.01, "{low} of the draws below t/2");
    }
}
