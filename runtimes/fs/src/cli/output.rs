//! What the commands share in writing their output: JSON lines, bytes as text, and the
//! notices printed once a command is done.

use super::failure::Failure;
use broker_fs::driver::Driver;
use serde_json::Value;
use std::io::Write;

/// Writes `v` as one line of JSON.
pub fn emit(out: &mut impl Write, v: &Value) -> Result<(), Failure> {
    writeln!(out, "{v}")?;
    Ok(())
}

/// Bytes as text: as they are if printable UTF-8, escaped otherwise.
pub fn bytes_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if !s.chars().any(char::is_control) && !s.is_empty() => s.to_string(),
        _ => format!("{:?}", String::from_utf8_lossy(b)),
    }
}

/// Prints on standard error what the driver noticed and nobody reported yet, each as a
/// warning or a note.
pub fn print_notices(d: &mut Driver) {
    for n in d.take_notices() {
        eprintln!("{}: {n}", if n.is_warning() { "warning" } else { "note" });
    }
}
