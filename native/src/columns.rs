//! Arrow column buffers built in place: validity bitmaps, i32 offsets, data, fixed-width values.
//! Layouts are Arrow's (little-endian, LSB bit order), so Python hands them to pyarrow as they are.

use crate::error::DecodeError;

#[derive(Default)]
pub struct Bitmap {
    pub bits: Vec<u8>,
    pub len: usize,
    pub nulls: usize,
}

impl Bitmap {
    pub fn push(&mut self, valid: bool) {
        if self.len % 8 == 0 {
            self.bits.push(0);
        }
        if valid {
            let last = self.bits.len() - 1;
            self.bits[last] |= 1 << (self.len % 8);
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }
}

/// A variable-length column (binary or utf8): validity, i32 offsets (len + 1), data.
pub struct VarColumn {
    pub validity: Bitmap,
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
}

impl VarColumn {
    pub fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        VarColumn { validity: Bitmap::default(), offsets, data: Vec::with_capacity(bytes) }
    }

    pub fn push(&mut self, value: Option<&[u8]>, pos: usize) -> Result<(), DecodeError> {
        if let Some(v) = value {
            self.data.extend_from_slice(v);
        }
        if self.data.len() > i32::MAX as usize {
            return Err(DecodeError::at(pos, "a column exceeds 2 GiB in one batch; read smaller ranges"));
        }
        self.offsets.push(self.data.len() as i32);
        self.validity.push(value.is_some());
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }
}

/// Header key/value pairs as Arrow list<struct<key: utf8, value: binary>>.
pub struct Headers {
    pub list_offsets: Vec<i32>,
    pub keys: VarColumn,
    pub values: VarColumn,
}

impl Headers {
    pub fn new(rows: usize) -> Self {
        let mut list_offsets = Vec::with_capacity(rows + 1);
        list_offsets.push(0);
        Headers { list_offsets, keys: VarColumn::with_capacity(0, 0), values: VarColumn::with_capacity(0, 0) }
    }

    pub fn push_key(&mut self, key: &[u8], pos: usize) -> Result<(), DecodeError> {
        // Kafka header keys are strings; invalid UTF-8 becomes U+FFFD, as Java's String decoding does
        match std::str::from_utf8(key) {
            Ok(_) => self.keys.push(Some(key), pos),
            Err(_) => self.keys.push(Some(String::from_utf8_lossy(key).as_bytes()), pos),
        }
    }

    pub fn end_row(&mut self) {
        self.list_offsets.push(self.keys.len() as i32);
    }
}

pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}
