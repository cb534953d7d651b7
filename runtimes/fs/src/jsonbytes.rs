//! Keys and values in JSON, as `serve` and `--json` carry them: a JSON string when the
//! bytes are valid UTF-8, else an object `{"base64": "..."}` (standard alphabet, with
//! padding). On input an array of numbers (the core's own serde form) is accepted too.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

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

/// Bytes read from JSON in any form [`from_json`] takes, straight from the text: no
/// [`Value`] is built on the way, whose array of numbers would take 32 bytes per byte.
#[derive(Debug, PartialEq, Eq)]
pub struct JsonBytes(pub Vec<u8>);

impl<'de> serde::Deserialize<'de> for JsonBytes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<JsonBytes, D::Error> {
        deserializer.deserialize_any(JsonBytesVisitor)
    }
}

struct JsonBytesVisitor;

impl<'de> serde::de::Visitor<'de> for JsonBytesVisitor {
    type Value = JsonBytes;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string, {\"base64\": \"...\"} or an array of bytes")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<JsonBytes, E> {
        Ok(JsonBytes(s.as_bytes().to_vec()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<JsonBytes, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(n) = seq
            .next_element::<u64>()
            .map_err(|_| serde::de::Error::custom("an array of bytes must hold numbers 0..=255 only"))?
        {
            bytes.push(
                u8::try_from(n)
                    .map_err(|_| serde::de::Error::custom("an array of bytes must hold numbers 0..=255 only"))?,
            );
        }
        Ok(JsonBytes(bytes))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<JsonBytes, A::Error> {
        let bad = || serde::de::Error::custom("expected {\"base64\": \"...\"}, an object with that one key");
        match map.next_key::<String>()?.as_deref() {
            Some("base64") => {}
            _ => return Err(bad()),
        }
        let coded: Value = map.next_value()?;
        if map.next_key::<String>()?.is_some() {
            return Err(bad());
        }
        match coded {
            Value::String(s) => decode_base64(&s).map(JsonBytes).map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!("\"base64\" must be a string, not {other}"))),
        }
    }
}

/// Standard base64 with padding.
pub fn encode_base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes standard base64; padding is required, whitespace is not allowed.
pub fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(s)
        .map_err(|e| format!("invalid base64 {s:?} ({e}): use the standard alphabet (A-Z a-z 0-9 + /) with = padding"))
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
            assert!(serde_json::from_value::<JsonBytes>(v.clone()).is_err(), "{v}");
        }
        for v in [json!("hé"), json!({ "base64": "aMOp" }), json!([104, 195, 169])] {
            let text = v.to_string();
            assert_eq!(serde_json::from_str::<JsonBytes>(&text).unwrap().0, "hé".as_bytes(), "{text}");
        }
        for bad in [r#"{"base64": "aMOp", "x": 1}"#, "[-1]", "[1.5]", r#""\ud800""#] {
            assert!(serde_json::from_str::<JsonBytes>(bad).is_err(), "{bad}");
        }
    }
}
