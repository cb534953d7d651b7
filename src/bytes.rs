//! Little-endian byte writing and bounds-checked reading for the on-disk formats.

use crate::error::DecodeError;

/// Appends little-endian fields to a buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A length-prefixed byte string (u32 length).
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
    }
    /// An optional byte string: flag byte, then the string if present.
    pub(crate) fn opt_bytes(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.bytes(v);
            }
        }
    }
}

/// Reads little-endian fields, failing with a typed error instead of panicking.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Added to positions in errors, so they name the byte in the file.
    base: u64,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], base: u64) -> Reader<'a> {
        Reader { data, pos: 0, base }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(DecodeError::Truncated(self.base + self.pos as u64)),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    /// Where a length-prefixed byte string lies in the data, without copying it: the
    /// caller slices its own shared buffer there.
    pub(crate) fn bytes_span(&mut self) -> Result<std::ops::Range<usize>, DecodeError> {
        let n = self.u32()? as usize;
        let start = self.pos;
        self.take(n)?;
        Ok(start..self.pos)
    }
    /// Skips a length-prefixed byte string without copying it.
    pub(crate) fn skip_bytes(&mut self) -> Result<(), DecodeError> {
        let n = self.u32()? as usize;
        self.take(n).map(|_| ())
    }
    pub(crate) fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.bytes()?)),
            flag => Err(self.malformed(format!("option flag {flag}"))),
        }
    }
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let pos = self.position();
        String::from_utf8(self.bytes()?)
            .map_err(|_| DecodeError::Malformed { position: pos, detail: "string is not UTF-8".into() })
    }
    /// A topic's partition count: more than `most` (the callers pass
    /// `MAX_PARTITIONS_EVER`, which no create is ever validated past) is corruption,
    /// however many a `u32` holds.
    pub(crate) fn partitions(&mut self, most: u32) -> Result<u32, DecodeError> {
        let pos = self.position();
        let n = self.u32()?;
        if n > most {
            let detail = format!("{n} partitions, more than any topic has ({most})");
            return Err(DecodeError::Malformed { position: pos, detail });
        }
        Ok(n)
    }
    pub(crate) fn position(&self) -> u64 {
        self.base + self.pos as u64
    }
    pub(crate) fn malformed(&self, detail: String) -> DecodeError {
        DecodeError::Malformed { position: self.position(), detail }
    }
    /// Fails unless every byte was consumed.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.pos == self.data.len() {
            Ok(())
        } else {
            Err(self.malformed(format!("{} trailing bytes", self.data.len() - self.pos)))
        }
    }
}
