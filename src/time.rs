//! Virtual time: the core never reads a clock; every entry point is told `now`.

use serde::{Deserialize, Serialize};

/// A point in (virtual) time, in microseconds since an origin the runtime chooses.
///
/// The core only compares and adds times; it never asks what time it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Time(pub u64);

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);

    /// A time `ms` milliseconds after the origin.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1000))
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// This time plus `ms` milliseconds, saturating at the end of time.
    pub const fn plus_millis(self, ms: u64) -> Time {
        Time(self.0.saturating_add(ms.saturating_mul(1000)))
    }

    /// This time plus `us` microseconds, saturating at the end of time.
    pub const fn plus_micros(self, us: u64) -> Time {
        Time(self.0.saturating_add(us))
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}
