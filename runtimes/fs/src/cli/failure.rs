//! [`Failure`]: how a command fails, as the message after `error:` and the exit status
//! the module doc of `main.rs` lists.

use broker_core::{BrokerError, HaltReason, Reply};
use broker_fs::report::DriverError;

/// What to do when a command that the driver gave up on can simply be run again.
const AGAIN: &str = "Fix the cause, then run the command again";

/// A failure of the CLI: what to print and the exit status.
pub struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    /// A failure with exit status 1.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 1 }
    }

    /// The failure of a wait on the driver; if the driver gave up on failing storage,
    /// `hint` says what to do about the work it leaves unfinished. (Converted with
    /// `?`, a failure that gave up says to run the command again.)
    pub fn waiting(e: DriverError, hint: &str) -> Failure {
        match e {
            DriverError::GaveUp { .. } => Failure::new(format!("{e}. {hint}; --timeout SECS waits longer")),
            e => Failure::from(e),
        }
    }

    /// The broker answered with a reply of another kind than the command's.
    pub fn unexpected(reply: &Reply) -> Failure {
        Failure::new(format!("unexpected reply from the broker: {reply:?}"))
    }

    /// The failure of a command during which the broker halted: the reason, what it
    /// means and what to do, with exit status 3.
    pub fn halted(reason: &HaltReason) -> Failure {
        Failure {
            message: format!(
                "the broker halted: {reason}. The outcome of the command in flight is unknown; nothing more was \
                 written after the failure. Fix its cause, then run broker-fs again: it recovers from what is durable"
            ),
            code: 3,
        }
    }
}

impl From<DriverError> for Failure {
    fn from(e: DriverError) -> Failure {
        let code = match e {
            DriverError::Locked { .. } => 4,
            DriverError::Halted(reason) => return Failure::halted(&reason),
            DriverError::GaveUp { .. } => return Failure::waiting(e, AGAIN),
            DriverError::CorruptJournal { .. } | DriverError::Broker(BrokerError::Halted(_)) => 3,
            _ => 1,
        };
        Failure { message: e.to_string(), code }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::new(format!("cannot write output: {e}"))
    }
}
