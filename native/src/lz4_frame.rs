//! The LZ4 frame format (lz4_Frame_format.md v1.6.x), as Kafka's lz4 codec uses it, decoded straight
//! into a caller's reusable buffer: blocks are decompressed in place, with no intermediate block
//! buffer, no copy of the output, and no zeroing of a buffer that is already large enough.
//!
//! Invariants:
//! - every byte is untrusted: each length is checked against the input left, the block maximum the
//!   frame declares and the caller's `limit` before anything is written or allocated; the output never
//!   grows beyond `limit + max block size`;
//! - the header checksum, block checksums and content checksum are verified when the frame has them
//!   (librdkafka's consumer verifies them too: a frame it would reject is never acknowledged);
//! - exactly one frame, as every Kafka client writes: bytes after its end are an error (Kafka's own
//!   reader ignores them while librdkafka decodes them, so consumers would disagree on the records);
//! - dictionaries (the DictID flag) are refused, as lz4_flex refuses them;
//! - linked blocks may refer to up to 64 KiB of the output before them, which is contiguous here.

use twox_hash::XxHash32;

const MAGIC: u32 = 0x184D_2204;
const WINDOW: usize = 64 * 1024;

fn xxh32(data: &[u8]) -> u32 {
    XxHash32::oneshot(0, data)
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    data.get(at..at.checked_add(4)?).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Decodes one LZ4 frame into `out[..n]` and returns `n`. `out` is grown (zero-filled) only when it
/// is shorter than what the next block may need; its contents beyond `n` are unspecified. Errors are
/// messages without a position; the caller adds where the frame starts.
pub fn decode(data: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<usize, String> {
    let short = || "lz4 frame is truncated".to_string();
    if u32_at(data, 0).ok_or_else(short)? != MAGIC {
        return Err("lz4 frame has a bad magic number".into());
    }
    let flg = *data.get(4).ok_or_else(short)?;
    let bd = *data.get(5).ok_or_else(short)?;
    if flg >> 6 != 0b01 {
        return Err(format!("lz4 frame version {} is not supported", flg >> 6));
    }
    if flg & 0b10 != 0 || bd & 0b1000_1111 != 0 {
        return Err("lz4 frame descriptor has reserved bits set".into());
    }
    if flg & 0b1 != 0 {
        return Err("lz4 frame uses a dictionary, which is not supported".into());
    }
    let independent = flg & 0b10_0000 != 0;
    let block_checksums = flg & 0b1_0000 != 0;
    let has_content_size = flg & 0b1000 != 0;
    let content_checksum = flg & 0b100 != 0;
    let max_block = match (bd >> 4) & 0b111 {
        4 => 64 * 1024,
        5 => 256 * 1024,
        6 => 1024 * 1024,
        7 => 4 * 1024 * 1024,
        other => return Err(format!("lz4 frame block size id {other} is not valid")),
    };
    let mut pos = 6;
    let content_size = if has_content_size {
        let b = data.get(6..14).ok_or_else(short)?;
        pos += 8;
        Some(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    } else {
        None
    };
    let hc = *data.get(pos).ok_or_else(short)?;
    if (xxh32(&data[4..pos]) >> 8) as u8 != hc {
        return Err("lz4 frame header checksum does not match".into());
    }
    pos += 1;
    if let Some(size) = content_size {
        if size > limit as u64 {
            return Err(format!("lz4 data expands beyond {limit} bytes"));
        }
    }

    let mut n = 0usize;
    loop {
        let word = u32_at(data, pos).ok_or_else(short)?;
        pos += 4;
        if word == 0 {
            break; // the end mark
        }
        let stored = word & 0x8000_0000 != 0;
        let len = (word & 0x7FFF_FFFF) as usize;
        if len > max_block {
            return Err(format!("lz4 block of {len} bytes exceeds the frame's {max_block}-byte blocks"));
        }
        let block = data.get(pos..pos + len).ok_or_else(short)?;
        pos += len;
        if block_checksums {
            if u32_at(data, pos).ok_or_else(short)? != xxh32(block) {
                return Err("lz4 block checksum does not match".into());
            }
            pos += 4;
        }
        if n.saturating_add(if stored { len } else { 0 }) > limit {
            return Err(format!("lz4 data expands beyond {limit} bytes"));
        }
        if out.len() < n + max_block {
            out.resize(n + max_block, 0);
        }
        let written = if stored {
            out[n..n + len].copy_from_slice(block);
            len
        } else {
            let (before, rest) = out.split_at_mut(n);
            let target = &mut rest[..max_block];
            let result = if independent || n == 0 {
                lz4_flex::block::decompress_into(block, target)
            } else {
                lz4_flex::block::decompress_into_with_dict(block, target, &before[n.saturating_sub(WINDOW)..])
            };
            result.map_err(|e| format!("lz4 data is invalid: {e}"))?
        };
        n += written;
        if n > limit {
            return Err(format!("lz4 data expands beyond {limit} bytes"));
        }
    }
    if content_checksum {
        if u32_at(data, pos).ok_or_else(short)? != xxh32(&out[..n]) {
            return Err("lz4 content checksum does not match".into());
        }
        pos += 4;
    }
    if let Some(size) = content_size {
        if size != n as u64 {
            return Err(format!("lz4 frame declares {size} bytes of content but holds {n}"));
        }
    }
    if pos != data.len() {
        return Err(format!("{} bytes follow the lz4 frame", data.len() - pos));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn frame(plain: &[u8], info: lz4_flex::frame::FrameInfo) -> Vec<u8> {
        let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        enc.write_all(plain).unwrap();
        enc.finish().unwrap()
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len).map(|i| ((i * 7919) % 251) as u8 ^ ((i / 1000) as u8)).collect()
    }

    #[test]
    fn decodes_what_lz4_flex_encodes_in_every_mode() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameInfo};
        for len in [0usize, 1, 100, 70_000, 300_000, 1_500_000] {
            let plain = sample(len);
            for mode in [BlockMode::Independent, BlockMode::Linked] {
                for (bc, cc, cs) in [(false, false, false), (true, true, true), (false, true, false)] {
                    let mut info = FrameInfo::new().block_mode(mode).block_size(BlockSize::Max64KB)
                        .block_checksums(bc).content_checksum(cc);
                    if cs {
                        info = info.content_size(Some(len as u64));
                    }
                    let f = frame(&plain, info);
                    let mut out = vec![0xAB; 10];
                    let n = decode(&f, 4 << 20, &mut out).unwrap();
                    assert_eq!(&out[..n], &plain[..], "len {len} mode {mode:?} {bc} {cc} {cs}");
                }
            }
        }
    }

    #[test]
    fn refuses_bad_frames_with_a_message() {
        let plain = sample(200_000);
        let info = lz4_flex::frame::FrameInfo::new().content_checksum(true).block_checksums(true);
        let good = frame(&plain, info);
        let mut out = Vec::new();
        assert!(decode(&good[..good.len() - 1], 1 << 20, &mut out).unwrap_err().contains("truncated"));
        let mut extra = good.clone();
        extra.push(0);
        assert!(decode(&extra, 1 << 20, &mut out).unwrap_err().contains("follow the lz4 frame"));
        assert!(decode(&good, 100_000, &mut out).unwrap_err().contains("expands beyond"));
        assert!(out.len() <= 100_000 + 4 * 1024 * 1024);
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(decode(&flipped, 1 << 20, &mut out).unwrap_err().contains("content checksum"));
        let mut header = good.clone();
        header[6] ^= 1;
        assert!(decode(&header, 1 << 20, &mut out).unwrap_err().contains("header checksum"));
        for cut in 0..12.min(good.len()) {
            assert!(decode(&good[..cut], 1 << 20, &mut out).is_err());
        }
    }
}
