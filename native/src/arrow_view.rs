//! Read-only views of Arrow arrays handed over as raw buffers (pyarrow's `Array.buffers()`), for the
//! sink's encoder and partitioner: no copy, no Python object per row.
//!
//! The arrays come from Spark (trusted), but every access is still bounds-checked: a malformed view
//! is an `EncodeError`, never a panic or an out-of-bounds read. Layouts are Arrow's: validity bitmaps
//! LSB first, little-endian i32 (binary/string) or i64 (large_binary/large_string) offsets, `offset`
//! the array's slice offset in elements.

use std::fmt;

#[derive(Debug)]
pub struct EncodeError(pub String);

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub fn err<T>(msg: String) -> Result<T, EncodeError> {
    Err(EncodeError(msg))
}

fn valid_at(validity: Option<&[u8]>, i: usize) -> bool {
    match validity {
        None => true,
        Some(bits) => bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0),
    }
}

fn check_validity(name: &str, validity: Option<&[u8]>, offset: usize, len: usize) -> Result<(), EncodeError> {
    if let Some(bits) = validity {
        if bits.len() * 8 < offset + len {
            return err(format!("{name}: validity bitmap of {} bytes is short for {len} rows", bits.len()));
        }
    }
    Ok(())
}

/// A binary or string column (nullable).
pub struct VarView<'a> {
    validity: Option<&'a [u8]>,
    offsets: &'a [u8],
    data: &'a [u8],
    offset: usize,
    pub len: usize,
    large: bool,
}

impl<'a> VarView<'a> {
    pub fn new(name: &str, validity: Option<&'a [u8]>, offsets: &'a [u8], data: &'a [u8], offset: usize, len: usize,
               large: bool) -> Result<Self, EncodeError> {
        check_validity(name, validity, offset, len)?;
        let width = if large { 8 } else { 4 };
        if len > 0 && offsets.len() < (offset + len + 1) * width {
            return err(format!("{name}: offsets buffer of {} bytes is short for {len} rows", offsets.len()));
        }
        Ok(VarView { validity, offsets, data, offset, len, large })
    }

    fn pos(&self, j: usize) -> Result<usize, EncodeError> {
        let v = if self.large {
            i64::from_le_bytes(self.offsets[j * 8..j * 8 + 8].try_into().expect("8 bytes"))
        } else {
            i32::from_le_bytes(self.offsets[j * 4..j * 4 + 4].try_into().expect("4 bytes")) as i64
        };
        usize::try_from(v).map_err(|_| EncodeError(format!("negative Arrow offset {v}")))
    }

    /// Row `i` (0-based in the view): None when null.
    pub fn get(&self, i: usize) -> Result<Option<&'a [u8]>, EncodeError> {
        if i >= self.len {
            return err(format!("row {i} is beyond the {} rows of the column", self.len));
        }
        let j = self.offset + i;
        if !valid_at(self.validity, j) {
            return Ok(None);
        }
        let (start, end) = (self.pos(j)?, self.pos(j + 1)?);
        match self.data.get(start..end) {
            Some(s) => Ok(Some(s)),
            None => err(format!("Arrow offsets {start}..{end} are outside the {}-byte data buffer", self.data.len())),
        }
    }
}

/// A fixed-width column of i32 or i64 values (nullable).
pub struct FixedView<'a, const W: usize> {
    validity: Option<&'a [u8]>,
    values: &'a [u8],
    offset: usize,
    pub len: usize,
}

impl<'a, const W: usize> FixedView<'a, W> {
    pub fn new(name: &str, validity: Option<&'a [u8]>, values: &'a [u8], offset: usize, len: usize)
               -> Result<Self, EncodeError> {
        check_validity(name, validity, offset, len)?;
        if values.len() < (offset + len) * W {
            return err(format!("{name}: values buffer of {} bytes is short for {len} rows", values.len()));
        }
        Ok(FixedView { validity, values, offset, len })
    }

    fn raw(&self, i: usize) -> Option<[u8; W]> {
        if i >= self.len || !valid_at(self.validity, self.offset + i) {
            return None;
        }
        let j = (self.offset + i) * W;
        Some(self.values[j..j + W].try_into().expect("W bytes"))
    }
}

pub type I32View<'a> = FixedView<'a, 4>;
pub type I64View<'a> = FixedView<'a, 8>;

impl I32View<'_> {
    pub fn get(&self, i: usize) -> Option<i32> {
        self.raw(i).map(i32::from_le_bytes)
    }
}

impl I64View<'_> {
    pub fn get(&self, i: usize) -> Option<i64> {
        self.raw(i).map(i64::from_le_bytes)
    }
}

/// list<struct<key: string, value: binary>>: list validity and i32 offsets into the key/value columns
/// (the struct's fields, already sliced by the struct's own offset).
pub struct HeadersView<'a> {
    pub lists: I32View<'a>,   // validity of the lists, and len + 1 offsets (only `len` rows are valid)
    pub keys: VarView<'a>,
    pub values: VarView<'a>,
}

impl<'a> HeadersView<'a> {
    /// The (key, value) pairs of row `i`; empty for a null list.
    pub fn range(&self, i: usize) -> Result<std::ops::Range<usize>, EncodeError> {
        if i >= self.lists.len {
            return err(format!("row {i} is beyond the {} rows of the headers column", self.lists.len));
        }
        if !valid_at(self.lists.validity, self.lists.offset + i) {
            return Ok(0..0);
        }
        let at = |k: usize| -> Result<usize, EncodeError> {
            let j = (self.lists.offset + k) * 4;
            let b = self.lists.values.get(j..j + 4).ok_or_else(|| EncodeError("headers offsets are short".into()))?;
            let v = i32::from_le_bytes(b.try_into().expect("4 bytes"));
            usize::try_from(v).map_err(|_| EncodeError(format!("negative headers offset {v}")))
        };
        let (start, end) = (at(i)?, at(i + 1)?);
        if start > end || end > self.keys.len || end > self.values.len {
            return err(format!("headers offsets {start}..{end} are outside the {} header entries", self.keys.len));
        }
        Ok(start..end)
    }
}
