//! What the checkers that follow requests keep of each: the command and when it was
//! issued.

use broker_core::{Command, Time};
use std::rc::Rc;

/// A request in flight: what was asked and when.
#[derive(Clone, Debug)]
pub struct Request {
    /// The command, shared with the model (a produce may carry megabytes).
    pub command: Rc<Command>,
    /// When it was issued.
    pub at: Time,
}
