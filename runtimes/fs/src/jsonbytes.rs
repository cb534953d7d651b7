//! Keys and values in JSON, as `serve` and `--json` carry them: a JSON string when the
//! bytes are valid UTF-8, else an object `{"base64": "..."}` (standard alphabet, with
//! padding). On input an array of numbers (the core's own serde form) is accepted too.

use serde_json::{json, Value};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Bytes as JSON: a string if they are UTF-8, else `{"base64": "..."}`.
pub fn to_json(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(s) => Value::String(s.to_string()),
        Err(_) => json!({ "base64": encode_base64(bytes) }),
    }
}

/// Bytes from JSON: a string (its UTF-8 bytes), `{"base64": "..."}`, or an array of
/// numbers 0..=255. The error names the form that was expected.
pub fn from_json(v: &Value) -> Result<Vec<u8>, String> {
    match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Object(o) if o.len() == 1 && o.contains_key("base64") => match &o["base64"] {
            Value::String(s) => decode_base64(s),
            other => Err(format!("\"base64\" must be a string, not {other}")),
        },
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_u64().and_then(|n| u8::try_from(n).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| "an array of bytes must hold numbers 0..=255 only".to_string()),
        other => Err(format!("expected a string, {{\"base64\": \"...\"}} or an array of bytes, not {other}")),
    }
}

/// Standard base64 with padding.
pub fn encode_base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64; padding is required, whitespace is not allowed.
pub fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("invalid base64 {s:?}: use the standard alphabet (A-Z a-z 0-9 + /) with = padding");
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (i, quad) in bytes.chunks(4).enumerate() {
        let last = i + 1 == bytes.len() / 4;
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err(bad());
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            let v = ALPHABET.iter().position(|&a| a == c).ok_or_else(bad)?;
            n = n << 6 | v as u32;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_examples_and_round_trips() {
        let cases =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")];
        for (plain, coded) in cases {
            assert_eq!(encode_base64(plain.as_bytes()), coded);
            assert_eq!(decode_base64(coded).unwrap(), plain.as_bytes());
        }
        let all: Vec<u8> = (0..=255).collect();
        for n in 0..all.len() {
            assert_eq!(decode_base64(&encode_base64(&all[..n])).unwrap(), &all[..n]);
        }
        for bad in ["Zg", "Zg=", "Z===", "Zg==Zg==", "Zm9*", "Zm 9"] {
            assert!(decode_base64(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn utf8_goes_as_a_string_other_bytes_as_base64_and_every_form_comes_back() {
        assert_eq!(to_json(b"h\xc3\xa9"), json!("hé"));
        assert_eq!(to_json(&[0xff, 0]), json!({ "base64": "/wA=" }));
        for v in [json!("hé"), json!({ "base64": "aMOp" }), json!([104, 195, 169])] {
            assert_eq!(from_json(&v).unwrap(), "hé".as_bytes(), "{v}");
        }
        for v in [json!(7), json!([256]), json!({ "base64": 1 }), json!({ "hex": "00" }), json!(null)] {
            assert!(from_json(&v).is_err(), "{v}");
        }
    }
}
