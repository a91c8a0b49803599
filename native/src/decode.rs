//! Record batch v2 decoding: concatenated batches of one partition → Arrow columns.
//!
//! Invariants, checked for every batch (Kafka's DefaultRecordBatch / LogValidator rules):
//!   - magic is 2; batchLength covers at least the 61-byte header; the CRC32C (when asked) matches;
//!   - each record's length varint covers exactly the record; counts and deltas are consistent;
//!   - compressed sections expand to at most `max_batch_bytes`.
//! A trailing partial batch (a Fetch cut at its byte limit) ends decoding without error. Control
//! batches and records outside [start, end) are skipped. Nothing is allocated from an untrusted count.

use crate::columns::{Headers, VarColumn};
use crate::compression;
use crate::error::DecodeError;
use crate::reader::Reader;

pub const HEADER_LEN: usize = 61;
const LOG_OVERHEAD: usize = 12; // baseOffset + batchLength
const ATTR_COMPRESSION: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;
const MIN_RECORD_BYTES: usize = 7; // length, attributes, ts delta, offset delta, key len, value len, headers

pub struct Options {
    pub start: i64,
    pub end: i64,
    pub include_headers: bool,
    pub verify_crc: bool,
    pub max_batch_bytes: usize,
    /// Stop after the batch that brings the row count to this (bounded output per call; the
    /// caller goes on from `consumed`).
    pub max_rows: usize,
}

/// What read_committed filtering needs of each batch, kept without interpreting it here.
pub struct BatchInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub producer_id: i64,
    pub transactional: bool,
    pub control: bool,
}

pub struct Decoded {
    pub keys: VarColumn,
    pub values: VarColumn,
    pub offsets: Vec<i64>,
    pub timestamps_us: Vec<i64>,
    pub timestamp_types: Vec<i32>,
    pub headers: Option<Headers>,
    pub batches: Vec<BatchInfo>,
    /// The offset after the last batch read completely (where the next fetch continues), or -1.
    pub next_offset: i64,
    /// Bytes of `data` consumed by complete batches.
    pub consumed: usize,
}

impl Decoded {
    fn new(estimate_rows: usize, estimate_bytes: usize, include_headers: bool) -> Self {
        Decoded {
            keys: VarColumn::with_capacity(estimate_rows, 0),
            values: VarColumn::with_capacity(estimate_rows, estimate_bytes),
            offsets: Vec::with_capacity(estimate_rows),
            timestamps_us: Vec::with_capacity(estimate_rows),
            timestamp_types: Vec::with_capacity(estimate_rows),
            headers: if include_headers { Some(Headers::new(estimate_rows)) } else { None },
            batches: Vec::new(),
            next_offset: -1,
            consumed: 0,
        }
    }

    pub fn rows(&self) -> usize {
        self.offsets.len()
    }
}

struct Header {
    base_offset: i64,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    records: i32,
}

fn read_header(r: &mut Reader, batch_len: usize, verify_crc: bool, body: &[u8]) -> Result<Header, DecodeError> {
    let base_offset = r.i64()?;
    let _len = r.i32()?;
    let _leader_epoch = r.i32()?;
    let magic = r.i8()?;
    if magic != 2 {
        return Err(DecodeError::at(r.position() - 1, &format!("magic {magic}: only record batch v2 is supported")))
    }
    let crc = r.u32()?;
    if verify_crc {
        // CRC32C covers attributes .. end of batch: body[21 .. 12 + batch_len]
        let actual = crc32c::crc32c(&body[21..LOG_OVERHEAD + batch_len]);
        if actual != crc {
            return Err(DecodeError::at(r.position() - 4, &format!("CRC32C {actual:#010x} does not match {crc:#010x}")))
        }
    }
    let attributes = r.i16()?;
    let last_offset_delta = r.i32()?;
    let base_timestamp = r.i64()?;
    let max_timestamp = r.i64()?;
    let producer_id = r.i64()?;
    let _producer_epoch = r.i16()?;
    let _base_sequence = r.i32()?;
    let records = r.i32()?;
    if records < 0 || last_offset_delta < 0 {
        return Err(DecodeError::at(r.position(), &format!("record count {records}, last offset delta {last_offset_delta}")))
    }
    Ok(Header { base_offset, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, records })
}

fn read_records(section: &[u8], base_pos: usize, h: &Header, opts: &Options, out: &mut Decoded) -> Result<(), DecodeError> {
    if (h.records as usize) > section.len() / MIN_RECORD_BYTES + 1 {
        return Err(DecodeError::at(base_pos, &format!("{} records cannot fit in {} bytes", h.records, section.len())));
    }
    let log_append = h.attributes & ATTR_LOG_APPEND_TIME != 0;
    let ts_type = if log_append { 1 } else { 0 };
    let mut r = Reader::new(section, base_pos);
    for i in 0..h.records {
        let len = r.varint()?;
        if len < 0 {
            return Err(DecodeError::at(r.position(), &format!("record {i} has negative length {len}")));
        }
        let start_pos = r.position();
        let body = r.bytes(len as usize)?;
        let mut rec = Reader::new(body, start_pos);
        let _attributes = rec.i8()?;
        let ts_delta = rec.varlong()?;
        let offset_delta = rec.varint()?;
        if offset_delta < 0 || offset_delta > h.last_offset_delta {
            return Err(DecodeError::at(start_pos, &format!("record {i} has offset delta {offset_delta} outside [0, {}]",
                                                           h.last_offset_delta)));
        }
        let key = rec.nullable_bytes()?;
        let value = rec.nullable_bytes()?;
        let header_count = rec.varint()?;
        if header_count < 0 || header_count as usize > rec.remaining() / 2 {
            return Err(DecodeError::at(rec.position(), &format!("record {i} claims {header_count} headers")));
        }
        let offset = h.base_offset.saturating_add(i64::from(offset_delta));
        let wanted = offset >= opts.start && offset < opts.end;
        if wanted {
            if let Some(hs) = out.headers.as_mut() {
                for _ in 0..header_count {
                    let k = rec.nullable_bytes()?.ok_or_else(|| DecodeError::at(rec.position(), "null header key"))?;
                    let v = rec.nullable_bytes()?;
                    hs.push_key(k, rec.position())?;
                    hs.values.push(v, rec.position())?;
                }
                hs.end_row();
            } else {
                for _ in 0..header_count {
                    rec.nullable_bytes()?.ok_or_else(|| DecodeError::at(rec.position(), "null header key"))?;
                    rec.nullable_bytes()?;
                }
            }
            let ts_ms = if log_append { h.max_timestamp } else { h.base_timestamp.saturating_add(ts_delta) };
            out.keys.push(key, start_pos)?;
            out.values.push(value, start_pos)?;
            out.offsets.push(offset);
            out.timestamps_us.push(ts_ms.saturating_mul(1000));
            out.timestamp_types.push(ts_type);
        } else {
            for _ in 0..header_count {
                rec.nullable_bytes()?;
                rec.nullable_bytes()?;
            }
        }
        if !rec.is_empty() {
            return Err(DecodeError::at(rec.position(), &format!("record {i} has {} bytes beyond its fields", rec.remaining())));
        }
    }
    if !r.is_empty() {
        return Err(DecodeError::at(r.position(), &format!("{} bytes after the batch's {} records", r.remaining(), h.records)));
    }
    Ok(())
}

/// Decode the complete batches in `data` (records with offsets in [start, end)).
pub fn decode(data: &[u8], opts: &Options) -> Result<Decoded, DecodeError> {
    let mut out = Decoded::new(0, data.len().min(64 << 20), opts.include_headers);
    let mut scratch = Vec::new(); // decompressed records, reused by every compressed batch of this call
    let mut pos = 0usize;
    while data.len() - pos >= LOG_OVERHEAD {
        let mut peek = Reader::new(&data[pos..], pos);
        let base_offset = peek.i64()?;
        let batch_len = peek.i32()?;
        if batch_len < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(DecodeError::at(pos + 8, &format!("batch length {batch_len} is shorter than a batch header"))
                .in_batch(base_offset, pos));
        }
        let total = LOG_OVERHEAD + batch_len as usize;
        if total > data.len() - pos {
            break; // a partial batch at the end of a fetch: the next fetch starts at its offset
        }
        let body = &data[pos..pos + total];
        let mut r = Reader::new(body, pos);
        let h = read_header(&mut r, batch_len as usize, opts.verify_crc, body).map_err(|e| e.in_batch(base_offset, pos))?;
        let last_offset = h.base_offset.saturating_add(i64::from(h.last_offset_delta));
        let control = h.attributes & ATTR_CONTROL != 0;
        out.batches.push(BatchInfo {
            base_offset: h.base_offset,
            last_offset,
            producer_id: h.producer_id,
            transactional: h.attributes & ATTR_TRANSACTIONAL != 0,
            control,
        });
        let in_range = last_offset >= opts.start && h.base_offset < opts.end;
        if !control && in_range && h.records > 0 {
            let codec = (h.attributes & ATTR_COMPRESSION) as u8;
            let section = &body[HEADER_LEN..];
            let section_pos = pos + HEADER_LEN;
            if codec == compression::NONE {
                read_records(section, section_pos, &h, opts, &mut out).map_err(|e| e.in_batch(h.base_offset, pos))?;
            } else {
                let plain = compression::decompress(codec, section, opts.max_batch_bytes, section_pos, &mut scratch)
                    .map_err(|e| e.in_batch(h.base_offset, pos))?;
                read_records(plain, section_pos, &h, opts, &mut out).map_err(|e| e.in_batch(h.base_offset, pos))?;
            }
        }
        pos += total;
        out.consumed = pos;
        out.next_offset = last_offset.saturating_add(1);
        if out.rows() >= opts.max_rows {
            break;
        }
    }
    Ok(out)
}
