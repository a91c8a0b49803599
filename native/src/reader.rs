//! A bounds-checked cursor over untrusted bytes: big-endian integers and Kafka's zigzag varints.
//! Every read checks the remaining length first; nothing here can panic or read out of bounds.

use crate::error::DecodeError;

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize, // position of buf[0] in the caller's whole input, for error messages
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], base: usize) -> Self {
        Reader { buf, pos: 0, base }
    }

    pub fn position(&self) -> usize {
        self.base + self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn err(&self, what: &str) -> DecodeError {
        DecodeError::at(self.position(), what)
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.err(&format!("{n} bytes needed, {} left", self.remaining())));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.bytes(1)?[0] as i8)
    }

    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        let b = self.bytes(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        let b = self.bytes(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(self.i32()? as u32)
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    fn unsigned_varint(&mut self, max_bytes: usize) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            if self.is_empty() {
                return Err(self.err("truncated varint"));
            }
            let b = self.buf[self.pos];
            self.pos += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.err("varint longer than allowed"))
    }

    /// A zigzag-encoded 32-bit varint (at most 5 bytes), as Kafka's ByteUtils.readVarint.
    pub fn varint(&mut self) -> Result<i32, DecodeError> {
        let raw = self.unsigned_varint(5)?;
        if raw > u64::from(u32::MAX) {
            return Err(self.err("varint out of 32-bit range"));
        }
        let raw = raw as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zigzag-encoded 64-bit varint (at most 10 bytes), as Kafka's ByteUtils.readVarlong.
    pub fn varlong(&mut self) -> Result<i64, DecodeError> {
        let raw = self.unsigned_varint(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// A length-prefixed (varint) byte string; -1 is null, other negative lengths are an error.
    pub fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = self.varint()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(self.err(&format!("negative length {len}")));
        }
        Ok(Some(self.bytes(len as usize)?))
    }
}
