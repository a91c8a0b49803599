//! Decompression of a record batch's records section: gzip, snappy (raw or xerial-framed), lz4 (frame,
//! `lz4_frame`) and zstd, each bounded: output beyond `limit` bytes is an error, never an allocation.
//! The output goes into a caller's buffer, which callers reuse across batches: lz4, the codec
//! producers use most, then neither allocates nor zero-fills per batch.

use std::io::Read;

use crate::error::DecodeError;

pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";

fn read_bounded<R: Read>(mut r: R, limit: usize, codec: &str, pos: usize, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    let n = r
        .by_ref()
        .take(limit as u64 + 1)
        .read_to_end(out)
        .map_err(|e| DecodeError::at(pos, &format!("{codec} data is invalid: {e}")))?;
    if n > limit {
        return Err(DecodeError::at(pos, &format!("{codec} data expands beyond {limit} bytes")));
    }
    Ok(())
}

fn snappy_raw(data: &[u8], limit: usize, pos: usize, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let len = snap::raw::decompress_len(data).map_err(|e| DecodeError::at(pos, &format!("snappy: {e}")))?;
    if out.len() + len > limit {
        return Err(DecodeError::at(pos, &format!("snappy data expands beyond {limit} bytes")));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(data, &mut out[start..])
        .map_err(|e| DecodeError::at(pos, &format!("snappy: {e}")))?;
    Ok(())
}

fn snappy(data: &[u8], limit: usize, pos: usize, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    if data.len() >= 16 && data.starts_with(XERIAL_MAGIC) {
        // xerial framing (the Java client's SnappyOutputStream): magic, 2 x i32 version, then
        // blocks of a big-endian i32 length and raw snappy data
        let mut i = 16;
        while i < data.len() {
            if data.len() - i < 4 {
                return Err(DecodeError::at(pos + i, "truncated xerial snappy block length"));
            }
            let n = i32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
            i += 4;
            if n < 0 || n as usize > data.len() - i {
                return Err(DecodeError::at(pos + i, &format!("xerial snappy block of {n} bytes overruns the data")));
            }
            snappy_raw(&data[i..i + n as usize], limit, pos + i, out)?;
            i += n as usize;
        }
        return Ok(());
    }
    snappy_raw(data, limit, pos, out)
}

/// Decompresses `data` (a batch's records section at `pos`) into `scratch` and returns the plain
/// bytes, a prefix of `scratch`. Reuse `scratch` across batches; what lies beyond the prefix is
/// unspecified.
pub fn decompress<'a>(codec: u8, data: &[u8], limit: usize, pos: usize, scratch: &'a mut Vec<u8>)
                      -> Result<&'a [u8], DecodeError> {
    match codec {
        GZIP => read_bounded(flate2::read::GzDecoder::new(data), limit, "gzip", pos, scratch)?,
        SNAPPY => snappy(data, limit, pos, scratch)?,
        LZ4 => {
            let n = crate::lz4_frame::decode(data, limit, scratch).map_err(|e| DecodeError::at(pos, &e))?;
            return Ok(&scratch[..n]);
        }
        ZSTD => {
            let d = zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| DecodeError::at(pos, &format!("zstd: {e}")))?;
            read_bounded(d, limit, "zstd", pos, scratch)?
        }
        other => return Err(DecodeError::at(pos, &format!("unknown compression codec {other}"))),
    }
    Ok(&scratch[..])
}
