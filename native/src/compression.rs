//! Decompression of a record batch's records section: gzip, snappy (raw or xerial-framed), lz4 (frame)
//! and zstd, each bounded: output beyond `limit` bytes is an error, never an allocation.

use std::io::Read;

use crate::error::DecodeError;

pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";

fn read_bounded<R: Read>(mut r: R, limit: usize, codec: &str, pos: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    let n = r
        .by_ref()
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| DecodeError::at(pos, &format!("{codec} data is invalid: {e}")))?;
    if n > limit {
        return Err(DecodeError::at(pos, &format!("{codec} data expands beyond {limit} bytes")));
    }
    Ok(out)
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

fn snappy(data: &[u8], limit: usize, pos: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
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
            snappy_raw(&data[i..i + n as usize], limit, pos + i, &mut out)?;
            i += n as usize;
        }
        return Ok(out);
    }
    snappy_raw(data, limit, pos, &mut out)?;
    Ok(out)
}

pub fn decompress(codec: u8, data: &[u8], limit: usize, pos: usize) -> Result<Vec<u8>, DecodeError> {
    match codec {
        GZIP => read_bounded(flate2::read::GzDecoder::new(data), limit, "gzip", pos),
        SNAPPY => snappy(data, limit, pos),
        LZ4 => read_bounded(lz4_flex::frame::FrameDecoder::new(data), limit, "lz4", pos),
        ZSTD => {
            let d = zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| DecodeError::at(pos, &format!("zstd: {e}")))?;
            read_bounded(d, limit, "zstd", pos)
        }
        other => Err(DecodeError::at(pos, &format!("unknown compression codec {other}"))),
    }
}
