//! The loop of `serve`: one thread runs the broker, and two peers send it work through
//! the driver's mailbox as [`Input`]: the reader of standard input, whose request lines
//! the JSON-lines protocol ([`crate::serve`], a [`Lines`]) turns into commands, and the
//! Kafka listener, whose commands arrive whole ([`broker_kafka::Broker`]). The loop
//! submits commands, sends each reply back to whoever waits for it, and ends at the end
//! of input (unless the Kafka listener serves on), at a stop signal, or at a halt.

use crate::driver::{Driver, DriverEvent, Mailbox};
use broker_core::{BrokerError, Command, HaltReason, Reply, RequestId};
use std::collections::BTreeMap;
use tokio::sync::oneshot;

/// The channel a Kafka command's reply goes back through.
pub type ReplyTo = oneshot::Sender<Result<Reply, BrokerError>>;

/// What reaches the loop from other threads.
#[derive(Debug)]
pub enum Input {
    /// From the reader of standard input.
    Lines(LineInput),
    /// A command of the Kafka listener, answered through the channel.
    Call(Command, ReplyTo),
    /// Stop serving (a signal): answer what is in flight, then end.
    Stop,
}

/// What the reader of standard input sends.
#[derive(Debug)]
pub enum LineInput {
    /// One request line, as read (not checked to be UTF-8).
    Line(Vec<u8>),
    /// A request line longer than the limit, of this many bytes, skipped.
    TooLong(u64),
    /// End of input.
    End,
    /// Reading the input failed: the same as its end, with a warning.
    ReadFailed(std::io::Error),
}

/// The Kafka listener's commands reach the loop as [`Input::Call`].
impl broker_kafka::Broker for Mailbox<Input> {
    fn submit(&self, command: Command, reply: ReplyTo) -> bool {
        self.send(Input::Call(command, reply))
    }
}

/// The JSON-lines side of the loop: what it does with standard input and with the
/// replies to the commands its lines submitted. Its writes may fail (the reader of the
/// replies went away), which ends the loop.
pub trait Lines {
    /// What a line's submitted command waits with until its reply.
    type Waiting;
    /// The broker has recovered and serves.
    fn ready(&mut self, driver: &mut Driver<Input>) -> std::io::Result<()>;
    /// Handles one input of standard input, submitting a command to `driver` if it asks.
    fn input(&mut self, input: LineInput, driver: &mut Driver<Input>) -> std::io::Result<Handled<Self::Waiting>>;
    /// The reply to a command: one a line submitted (`Some`), or one nobody waits for.
    fn reply(&mut self, waiting: Option<Self::Waiting>, reply: &Result<Reply, BrokerError>) -> std::io::Result<()>;
    /// The broker halted: serving ends.
    fn halted(&mut self, reason: &HaltReason) -> std::io::Result<()>;
    /// Passes on what the driver noticed (warnings) since the last call.
    fn notices(&mut self, driver: &mut Driver<Input>);
}

/// What became of one input of standard input.
pub enum Handled<W> {
    /// A command was submitted; its reply goes to the [`Lines`] with this.
    Submitted(RequestId, W),
    /// Answered at once (or nothing to answer).
    Answered,
    /// Standard input ended.
    Ended,
}

/// Who waits for the reply to a submitted command.
enum Waiter<W> {
    Line(W),
    Kafka(ReplyTo),
}

/// Runs the loop until the end: at the end of input (with `outlive_input`, only at
/// [`Input::Stop`]) once every reply owed is given, or at a halt. Returns the halt's
/// reason, if the broker halted.
pub fn run<L: Lines>(
    mut driver: Driver<Input>,
    lines: &mut L,
    outlive_input: bool,
) -> std::io::Result<Option<HaltReason>> {
    let mut in_flight: BTreeMap<RequestId, Waiter<L::Waiting>> = BTreeMap::new();
    let mut ended = false;
    lines.notices(&mut driver);
    lines.ready(&mut driver)?;
    loop {
        if ended && in_flight.is_empty() {
            // A halt that came with the last replies still ends in a halt.
            let halted = driver.halted().cloned();
            if let Some(reason) = &halted {
                lines.halted(reason)?;
            }
            return Ok(halted);
        }
        let event = driver.next_event(None);
        lines.notices(&mut driver);
        match event {
            None => {}
            Some(DriverEvent::Message(Input::Stop)) => ended = true,
            Some(DriverEvent::Message(Input::Call(command, reply))) => {
                if ended {
                    let _ = reply.send(Err(BrokerError::Unavailable("broker-fs is stopping".into())));
                    continue;
                }
                let request = driver.submit(command);
                in_flight.insert(request, Waiter::Kafka(reply));
            }
            Some(DriverEvent::Message(Input::Lines(input))) => match lines.input(input, &mut driver)? {
                Handled::Submitted(request, waiting) => {
                    in_flight.insert(request, Waiter::Line(waiting));
                }
                Handled::Answered => {}
                Handled::Ended => ended |= !outlive_input,
            },
            Some(DriverEvent::Reply { request, reply }) => match in_flight.remove(&request) {
                // The connection may be gone; its reply is then dropped.
                Some(Waiter::Kafka(tx)) => drop(tx.send(reply)),
                Some(Waiter::Line(waiting)) => lines.reply(Some(waiting), &reply)?,
                None => lines.reply(None, &reply)?,
            },
            Some(DriverEvent::Halted(reason)) => {
                lines.halted(&reason)?;
                return Ok(Some(reason));
            }
        }
    }
}
