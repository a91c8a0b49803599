//! The decoder's one error: what is wrong and where (byte position in the input, batch base offset).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub position: usize,
    pub base_offset: Option<i64>,
    /// Byte position of the corrupt batch's first byte, when the error is inside a batch.
    pub batch_start: Option<usize>,
    pub message: String,
}

impl DecodeError {
    pub fn at(position: usize, message: &str) -> Self {
        DecodeError { position, base_offset: None, batch_start: None, message: message.to_string() }
    }

    pub fn in_batch(mut self, base_offset: i64, batch_start: usize) -> Self {
        self.base_offset.get_or_insert(base_offset);
        self.batch_start.get_or_insert(batch_start);
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.base_offset {
            Some(o) => write!(f, "corrupt record batch at offset {o} (byte {}): {}", self.position, self.message),
            None => write!(f, "corrupt record batch data at byte {}: {}", self.position, self.message),
        }
    }
}

impl std::error::Error for DecodeError {}
