//! The six bytes every object the cluster stores begins with: four of magic that say
//! what it is, then its format's version (u16, little-endian).

use crate::error::DecodeError;

/// The length of an object's head.
pub(crate) const HEAD: usize = 6;

/// Checks that `bytes` begin with `magic` and `version`; `what` names the object ("a
/// snapshot"), `format` its format ("snapshot"), in the errors.
pub(crate) fn check(bytes: &[u8], magic: &[u8; 4], version: u16, what: &str, format: &str) -> Result<(), DecodeError> {
    if bytes.len() < HEAD || &bytes[..4] != magic {
        let magic = String::from_utf8_lossy(magic);
        return Err(DecodeError::Malformed { position: 0, detail: format!("not {what} (no {magic} magic)") });
    }
    let found = u16::from_le_bytes([bytes[4], bytes[5]]);
    if found != version {
        let detail = format!("{format} format version {found}; this build reads {version}");
        return Err(DecodeError::Malformed { position: 4, detail });
    }
    Ok(())
}
