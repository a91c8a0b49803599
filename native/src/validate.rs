//! Produce-side validation of record batch v2: what Kafka's LogValidator checks before an append.
//!
//! The broker calls this for the record set of one partition of a Produce request, after its own
//! header pass (length, magic, CRC32C, max.message.bytes). Every byte is untrusted. Rules, per batch:
//!   - batch level (the whole request is rejected): magic 2; a known codec (0-4); records count > 0
//!     and equal to lastOffsetDelta + 1; not a control batch; a producer id implies a base sequence;
//!     the records section decompresses (bounded by `max_uncompressed_bytes`) and holds exactly the
//!     declared records, each with well-formed lengths, varints, key, value and headers, nothing after;
//!     each record's offset delta is its index (Kafka rewrites such batches; pylog stores batches as
//!     sent, so it rejects them instead);
//!   - record level (KIP-467, reported per record): a keyless record on a compacted topic
//!     (INVALID_RECORD); a LogAppendTime batch from a client on a CreateTime topic, or a CreateTime
//!     timestamp outside [min_timestamp, max_timestamp] (message.timestamp.before/after.max.ms)
//!     (INVALID_TIMESTAMP).
//! The result gives each batch's true max timestamp, so the broker can correct a wrong header.

use crate::compression;
use crate::decode::HEADER_LEN;
use crate::error::DecodeError;
use crate::reader::Reader;

const LOG_OVERHEAD: usize = 12;
const ATTR_COMPRESSION: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_CONTROL: i16 = 0x20;
const MIN_RECORD_BYTES: usize = 7;

/// Kafka error codes the validator reports.
pub const CORRUPT_MESSAGE: i16 = 2;
pub const INVALID_TIMESTAMP: i16 = 32;
pub const INVALID_RECORD: i16 = 87;

pub struct Limits {
    /// The topic is compacted: every record needs a key.
    pub compacted: bool,
    /// The topic keeps CreateTime: a client may not send LogAppendTime batches.
    pub create_time: bool,
    /// Bound on one batch's decompressed records section.
    pub max_uncompressed_bytes: usize,
    /// CreateTime records must carry a timestamp in this range (-1, "no timestamp", always passes).
    pub min_timestamp: i64,
    pub max_timestamp: i64,
}

/// Why a whole request is rejected: the Kafka error code (CORRUPT_MESSAGE or INVALID_RECORD) and where.
#[derive(Debug)]
pub struct Rejection {
    pub code: i16,
    pub error: DecodeError,
}

/// One record's problem (KIP-467): its index among the partition's records in this request.
#[derive(Debug, PartialEq, Eq)]
pub struct RecordError {
    pub index: u32,
    pub code: i16,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct Validated {
    /// Per batch, the largest record timestamp (CreateTime), as Kafka recomputes it.
    pub max_timestamps: Vec<i64>,
    pub record_errors: Vec<RecordError>,
}

fn corrupt(e: DecodeError) -> Rejection {
    Rejection { code: CORRUPT_MESSAGE, error: e }
}

fn invalid(e: DecodeError) -> Rejection {
    Rejection { code: INVALID_RECORD, error: e }
}

struct BatchFields {
    attributes: i16,
    base_timestamp: i64,
    records: i32,
}

fn read_batch_header(r: &mut Reader) -> Result<BatchFields, Rejection> {
    let _base_offset = r.i64().map_err(corrupt)?;
    let _len = r.i32().map_err(corrupt)?;
    let _leader_epoch = r.i32().map_err(corrupt)?;
    let magic = r.i8().map_err(corrupt)?;
    if magic != 2 {
        return Err(corrupt(DecodeError::at(r.position() - 1, &format!("magic {magic}: only record batch v2 is accepted"))));
    }
    let _crc = r.u32().map_err(corrupt)?;
    let attributes = r.i16().map_err(corrupt)?;
    let last_offset_delta = r.i32().map_err(corrupt)?;
    let base_timestamp = r.i64().map_err(corrupt)?;
    let _max_timestamp = r.i64().map_err(corrupt)?;
    let producer_id = r.i64().map_err(corrupt)?;
    let _producer_epoch = r.i16().map_err(corrupt)?;
    let base_sequence = r.i32().map_err(corrupt)?;
    let records = r.i32().map_err(corrupt)?;
    let at = r.position();
    if records <= 0 {
        return Err(invalid(DecodeError::at(at, &format!("invalid reported count for record batch: {records}"))));
    }
    if last_offset_delta < 0 || i64::from(last_offset_delta) + 1 != i64::from(records) {
        return Err(invalid(DecodeError::at(at, &format!(
            "inconsistent batch offset range [0, {last_offset_delta}] and count of records {records}"))));
    }
    if attributes & ATTR_CONTROL != 0 {
        return Err(invalid(DecodeError::at(at, "clients are not allowed to write control records")));
    }
    if producer_id >= 0 && base_sequence < 0 {
        return Err(invalid(DecodeError::at(at, &format!(
            "invalid sequence number {base_sequence} in record batch with producerId {producer_id}"))));
    }
    let codec = (attributes & ATTR_COMPRESSION) as u8;
    if codec > compression::ZSTD {
        return Err(corrupt(DecodeError::at(at, &format!("unknown compression codec {codec}"))));
    }
    Ok(BatchFields { attributes, base_timestamp, records })
}

/// Walk one batch's records; return its max timestamp, pushing per-record errors.
fn check_records(section: &[u8], pos: usize, b: &BatchFields, first_index: u32, limits: &Limits,
                 errors: &mut Vec<RecordError>) -> Result<i64, Rejection> {
    if (b.records as usize) > section.len() / MIN_RECORD_BYTES + 1 {
        return Err(invalid(DecodeError::at(pos, &format!("{} records cannot fit in {} bytes", b.records, section.len()))));
    }
    let log_append = b.attributes & ATTR_LOG_APPEND_TIME != 0;
    let mut max_ts = i64::MIN;
    let mut r = Reader::new(section, pos);
    for i in 0..b.records {
        let index = first_index.saturating_add(i as u32);
        let len = r.varint().map_err(invalid)?;
        if len < 0 {
            return Err(invalid(DecodeError::at(r.position(), &format!("record {i} has negative length {len}"))));
        }
        let start = r.position();
        let body = r.bytes(len as usize).map_err(|_| invalid(DecodeError::at(start, &format!(
            "incorrect declared batch size: record {i} of {len} bytes runs past the batch"))))?;
        let mut rec = Reader::new(body, start);
        let _attributes = rec.i8().map_err(invalid)?;
        let ts_delta = rec.varlong().map_err(invalid)?;
        let offset_delta = rec.varint().map_err(invalid)?;
        if offset_delta != i {
            return Err(invalid(DecodeError::at(start, &format!("record {i} has offset delta {offset_delta}, expected {i}"))));
        }
        let key = rec.nullable_bytes().map_err(invalid)?;
        let _value = rec.nullable_bytes().map_err(invalid)?;
        let header_count = rec.varint().map_err(invalid)?;
        if header_count < 0 || header_count as usize > rec.remaining() / 2 {
            return Err(invalid(DecodeError::at(rec.position(), &format!("record {i} claims {header_count} headers"))));
        }
        for _ in 0..header_count {
            rec.nullable_bytes().map_err(invalid)?.ok_or_else(|| invalid(DecodeError::at(rec.position(), "null header key")))?;
            rec.nullable_bytes().map_err(invalid)?;
        }
        if !rec.is_empty() {
            return Err(invalid(DecodeError::at(rec.position(), &format!("record {i} has {} bytes beyond its fields", rec.remaining()))));
        }
        let ts = b.base_timestamp.saturating_add(ts_delta);
        max_ts = max_ts.max(ts);
        if limits.compacted && key.is_none() {
            errors.push(RecordError { index, code: INVALID_RECORD,
                                      message: "Compacted topic cannot accept message without key".to_string() });
        } else if log_append && limits.create_time {
            errors.push(RecordError { index, code: INVALID_TIMESTAMP,
                                      message: "Producer should not set timestamp type to LogAppendTime".to_string() });
        } else if limits.create_time && !log_append && ts != -1 && (ts < limits.min_timestamp || ts > limits.max_timestamp) {
            errors.push(RecordError { index, code: INVALID_TIMESTAMP, message: format!(
                "Timestamp {ts} of message with offset {i} is out of range. The timestamp should be within [{}, {}]",
                limits.min_timestamp, limits.max_timestamp) });
        }
    }
    if !r.is_empty() {
        return Err(invalid(DecodeError::at(r.position(), &format!(
            "incorrect declared batch size: {} bytes remain after the batch's {} records", r.remaining(), b.records))));
    }
    Ok(max_ts)
}

thread_local! {
    /// Decompressed records, reused across calls on one thread (the broker validates on its event
    /// loop): a compressed batch then costs neither an allocation nor page faults.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A scratch buffer larger than this is released after use rather than kept for the next call.
const SCRATCH_KEPT_BYTES: usize = 8 << 20;

/// Validate the concatenated batches of one partition's produce data (see the module rules).
pub fn validate(data: &[u8], limits: &Limits) -> Result<Validated, Rejection> {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let result = validate_with(data, limits, &mut scratch);
            if scratch.len() > SCRATCH_KEPT_BYTES {
                *scratch = Vec::new();
            }
            result
        }
        Err(_) => validate_with(data, limits, &mut Vec::new()),
    })
}

fn validate_with(data: &[u8], limits: &Limits, scratch: &mut Vec<u8>) -> Result<Validated, Rejection> {
    let mut out = Validated::default();
    let mut pos = 0usize;
    let mut index: u32 = 0;
    if data.is_empty() {
        return Err(invalid(DecodeError::at(0, "no record batches")));
    }
    while pos < data.len() {
        let mut peek = Reader::new(&data[pos..], pos);
        let base_offset = peek.i64().map_err(corrupt)?;
        let batch_len = peek.i32().map_err(corrupt)?;
        if batch_len < (HEADER_LEN - LOG_OVERHEAD) as i32 || batch_len as usize > data.len() - pos - LOG_OVERHEAD {
            return Err(corrupt(DecodeError::at(pos + 8, &format!("batch length {batch_len} does not fit the {} bytes left",
                                                                 data.len() - pos)).in_batch(base_offset, pos)));
        }
        let total = LOG_OVERHEAD + batch_len as usize;
        let body = &data[pos..pos + total];
        let mut r = Reader::new(body, pos);
        let tag = |mut e: Rejection| { e.error = e.error.in_batch(base_offset, pos); e };
        let b = read_batch_header(&mut r).map_err(tag)?;
        let codec = (b.attributes & ATTR_COMPRESSION) as u8;
        let section = &body[HEADER_LEN..];
        let section_pos = pos + HEADER_LEN;
        let max_ts = if codec == compression::NONE {
            check_records(section, section_pos, &b, index, limits, &mut out.record_errors).map_err(tag)?
        } else {
            let plain = compression::decompress(codec, section, limits.max_uncompressed_bytes, section_pos, scratch)
                .map_err(|e| tag(corrupt(e)))?;
            check_records(plain, section_pos, &b, index, limits, &mut out.record_errors).map_err(tag)?
        };
        out.max_timestamps.push(max_ts);
        index = index.saturating_add(b.records as u32);
        pos += total;
    }
    Ok(out)
}
