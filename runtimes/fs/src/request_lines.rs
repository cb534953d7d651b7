//! Request lines of `serve`, read from standard input with bounded memory.
//!
//! Two bounds, so that no client can make `serve` hold more than it states:
//!
//! - **One line** is at most [`max_line_bytes`] long: the largest produce the core
//!   accepts, written in the most verbose JSON a client may use. A longer line is not
//!   kept: the reader skips to its newline and reports it as [`ReadLine::TooLong`].
//! - **Read-ahead**: the reader takes no new line while [`READ_AHEAD_LINES`] lines or
//!   [`READ_AHEAD_BYTES`] bytes of lines already read are unanswered. A client that
//!   stops reading its replies stops `serve`'s reading of its requests (the pipe then
//!   pushes back on the client), as a network server bounds a connection's buffers.
//!
//! So the lines `serve` holds total at most `READ_AHEAD_BYTES + max_line_bytes`.
//! Bytes are lines' bytes, not text: a line that is not UTF-8 is answered with an
//! error like any other bad line, and reading goes on.

use std::io::BufRead;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The most unanswered request lines `serve` reads ahead.
pub const READ_AHEAD_LINES: usize = 1024;

/// The most bytes of unanswered request lines `serve` reads ahead (one more line, of
/// at most [`max_line_bytes`], may be read past it).
pub const READ_AHEAD_BYTES: usize = 64 << 20;

/// The longest request line `serve` takes: a produce of `batch_bytes` key and value
/// bytes (the core's limit, [`broker_core::Config::batch_bytes_limit`]) written with
/// every byte as a six-byte JSON escape (`\u00ff`), plus 1 MiB for the rest of the
/// request. Binary data is smaller as base64.
pub fn max_line_bytes(batch_bytes: u64) -> usize {
    usize::try_from(batch_bytes.saturating_mul(6)).unwrap_or(usize::MAX).saturating_add(1 << 20)
}

/// What one read of the input gave.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadLine {
    /// One line without its newline (nor a `\r` before it), as bytes.
    Line(Vec<u8>),
    /// A line longer than the limit: `bytes` long (without its newline), skipped.
    TooLong {
        /// Its length.
        bytes: u64,
    },
    /// End of input.
    End,
}

/// Reads lines of at most `max` bytes from `input`; a longer one is skipped to its
/// newline and reported as [`ReadLine::TooLong`]. A last line without a newline counts.
pub fn read_line(input: &mut impl BufRead, max: usize) -> std::io::Result<ReadLine> {
    let mut line = Vec::new();
    let mut skipped: Option<u64> = None;
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match skipped {
                Some(bytes) => ReadLine::TooLong { bytes },
                None if line.is_empty() => ReadLine::End,
                None => ReadLine::Line(trim_cr(line)),
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let piece = &available[..newline.unwrap_or(available.len())];
        match &mut skipped {
            Some(bytes) => *bytes += piece.len() as u64,
            None if line.len() + piece.len() > max => {
                skipped = Some((line.len() + piece.len()) as u64);
                line = Vec::new();
            }
            None => line.extend_from_slice(piece),
        }
        let used = piece.len() + usize::from(newline.is_some());
        input.consume(used);
        if newline.is_some() {
            return Ok(match skipped {
                Some(bytes) => ReadLine::TooLong { bytes },
                None => ReadLine::Line(trim_cr(line)),
            });
        }
    }
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

/// The read-ahead bound shared by the reading thread and the loop that answers: the
/// reader [`ReadAhead::wait_for_room`] before each line, the loop
/// [`ReadAhead::answered`] each line it has answered.
#[derive(Clone, Debug)]
pub struct ReadAhead {
    shared: Arc<(Mutex<Unanswered>, Condvar)>,
    max_lines: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Unanswered {
    lines: usize,
    bytes: usize,
    closed: bool,
}

impl ReadAhead {
    /// A bound of `max_lines` lines and `max_bytes` bytes read and not yet answered.
    pub fn new(max_lines: usize, max_bytes: usize) -> ReadAhead {
        ReadAhead { shared: Arc::default(), max_lines: max_lines.max(1), max_bytes }
    }

    fn state(&self) -> MutexGuard<'_, Unanswered> {
        self.shared.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until one more line may be read; false once [`ReadAhead::close`]d.
    pub fn wait_for_room(&self) -> bool {
        let mut state = self.state();
        while !state.closed && (state.lines >= self.max_lines || state.bytes >= self.max_bytes) {
            state = self.shared.1.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        !state.closed
    }

    /// Counts a line of `bytes` read and not yet answered.
    pub fn read(&self, bytes: usize) {
        let mut state = self.state();
        state.lines += 1;
        state.bytes += bytes;
    }

    /// Counts a line of `bytes` answered.
    pub fn answered(&self, bytes: usize) {
        let mut state = self.state();
        state.lines = state.lines.saturating_sub(1);
        state.bytes = state.bytes.saturating_sub(bytes);
        self.shared.1.notify_all();
    }

    /// Lets a waiting reader go: nothing more will be answered.
    pub fn close(&self) {
        self.state().closed = true;
        self.shared.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<ReadLine> {
        let mut reader = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            let line = read_line(&mut reader, max).unwrap();
            if line == ReadLine::End {
                return out;
            }
            out.push(line);
        }
    }

    #[test]
    fn lines_come_as_bytes_whatever_they_hold() {
        let got = lines(b"ab\r\n\xff\xfe\n\nlast", 10);
        let want = [b"ab".to_vec(), vec![0xff, 0xfe], vec![], b"last".to_vec()].map(ReadLine::Line);
        assert_eq!(got, want);
    }

    #[test]
    fn a_line_past_the_limit_is_skipped_to_its_newline_and_reading_goes_on() {
        let got = lines(b"12345\n123456789012\nok\n1234567", 5);
        let want = [
            ReadLine::Line(b"12345".to_vec()),
            ReadLine::TooLong { bytes: 12 },
            ReadLine::Line(b"ok".to_vec()),
            ReadLine::TooLong { bytes: 7 },
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn the_reader_waits_while_the_bound_is_reached_and_goes_on_when_lines_are_answered() {
        let gate = ReadAhead::new(2, 1000);
        gate.read(10);
        gate.read(10);
        let waiter = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.wait_for_room())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "two lines unanswered: no room for a third");
        gate.answered(10);
        assert!(waiter.join().unwrap(), "room once one is answered");

        let bytes = ReadAhead::new(100, 15);
        bytes.read(20);
        let waiter = {
            let gate = bytes.clone();
            std::thread::spawn(move || gate.wait_for_room())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "20 bytes unanswered of 15");
        bytes.close();
        assert!(!waiter.join().unwrap(), "a closed bound lets the reader go, to stop");
    }
}
