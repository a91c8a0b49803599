//! Record batch v2 encoding for the sink: the rows of one target partition (Arrow views) → Kafka
//! record batches, each compressed with the requested codec and at most `max_batch_bytes` long
//! (a single record larger than that gets a batch of its own; the broker decides whether it fits).
//!
//! Layout written (Kafka's DefaultRecordBatch): baseOffset 0, batchLength, partitionLeaderEpoch -1,
//! magic 2, CRC32C of everything after the crc, attributes (codec; CreateTime; transactional if asked),
//! lastOffsetDelta, baseTimestamp (first record), maxTimestamp, producerId/epoch, baseSequence
//! (-1 without a producer id), record count, then the records: length, attributes 0, timestamp delta,
//! offset delta (varints), key, value, headers. Raw snappy (as librdkafka sends), the LZ4 frame
//! format with independent 64 KiB blocks (what Kafka's KafkaLZ4BlockInputStream reads), gzip, zstd.

use std::io::Write;

use crate::arrow_view::{err, EncodeError, HeadersView, I64View, VarView};

pub const HEADER_LEN: usize = 61;
const CRC_START: usize = 21;
const NONE: u8 = 0;
const GZIP: u8 = 1;
const SNAPPY: u8 = 2;
const LZ4: u8 = 3;
const ZSTD: u8 = 4;
const ATTR_TRANSACTIONAL: i16 = 0x10;

pub struct Columns<'a> {
    pub value: VarView<'a>,
    pub key: Option<VarView<'a>>,
    pub headers: Option<HeadersView<'a>>,
    /// CreateTime in ms; a missing column or a null takes `BatchSpec::now_ms`.
    pub timestamp: Option<I64View<'a>>,
}

pub struct BatchSpec {
    pub codec: u8,
    pub level: Option<i32>,
    pub max_batch_bytes: usize,
    pub now_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// a transactional producer's batch (attributes bit 4), KIP-98
    pub transactional: bool,
}

/// One encoded batch and how many records it holds.
pub struct Encoded {
    pub data: Vec<u8>,
    pub records: usize,
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn varint_len(v: i64) -> usize {
    let mut z = zigzag(v);
    let mut n = 1;
    while z > 0x7f {
        z >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = zigzag(v);
    while z > 0x7f {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn field_len(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(s) => varint_len(s.len() as i64) + s.len(),
    }
}

fn put_field(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(s) => {
            put_varint(out, s.len() as i64);
            out.extend_from_slice(s);
        }
    }
}

struct Row<'a> {
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: std::ops::Range<usize>,
    timestamp: i64,
}

fn row<'a>(cols: &Columns<'a>, i: usize, now_ms: i64) -> Result<Row<'a>, EncodeError> {
    Ok(Row {
        key: match &cols.key { Some(k) => k.get(i)?, None => None },
        value: cols.value.get(i)?,
        headers: match &cols.headers { Some(h) => h.range(i)?, None => 0..0 },
        timestamp: cols.timestamp.as_ref().and_then(|t| t.get(i)).unwrap_or(now_ms),
    })
}

fn header_pairs<'a>(cols: &Columns<'a>, r: &Row<'a>) -> Result<Vec<(&'a [u8], Option<&'a [u8]>)>, EncodeError> {
    let Some(h) = &cols.headers else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(r.headers.len());
    for e in r.headers.clone() {
        match h.keys.get(e)? {
            Some(k) => out.push((k, h.values.get(e)?)),
            None => return err("Null header keys are not permitted".into()),
        }
    }
    Ok(out)
}

fn body_len(r: &Row<'_>, headers: &[(&[u8], Option<&[u8]>)], ts_delta: i64, offset_delta: i64) -> usize {
    let mut body = 1 + varint_len(ts_delta) + varint_len(offset_delta) + field_len(r.key) + field_len(r.value)
        + varint_len(headers.len() as i64);
    for (k, v) in headers {
        body += field_len(Some(k)) + field_len(*v);
    }
    body
}

fn record_size(r: &Row<'_>, headers: &[(&[u8], Option<&[u8]>)], ts_delta: i64, offset_delta: i64) -> usize {
    let body = body_len(r, headers, ts_delta, offset_delta);
    varint_len(body as i64) + body
}

fn put_record(out: &mut Vec<u8>, r: &Row<'_>, headers: &[(&[u8], Option<&[u8]>)], ts_delta: i64, offset_delta: i64) {
    put_varint(out, body_len(r, headers, ts_delta, offset_delta) as i64);
    out.push(0);
    put_varint(out, ts_delta);
    put_varint(out, offset_delta);
    put_field(out, r.key);
    put_field(out, r.value);
    put_varint(out, headers.len() as i64);
    for (k, v) in headers {
        put_field(out, Some(k));
        put_field(out, *v);
    }
}

pub fn compress(codec: u8, level: Option<i32>, data: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let io = |e: std::io::Error| EncodeError(format!("compression failed: {e}"));
    match codec {
        GZIP => {
            let lvl = flate2::Compression::new(level.unwrap_or(6).clamp(1, 9) as u32);
            let mut enc = flate2::write::GzEncoder::new(out, lvl);
            enc.write_all(data).map_err(io)?;
            enc.finish().map_err(io)?;
        }
        SNAPPY => {
            let start = out.len();
            out.resize(start + snap::raw::max_compress_len(data.len()), 0);
            let n = snap::raw::Encoder::new().compress(data, &mut out[start..])
                .map_err(|e| EncodeError(format!("snappy: {e}")))?;
            out.truncate(start + n);
        }
        LZ4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            enc.write_all(data).map_err(io)?;
            enc.finish().map_err(|e| EncodeError(format!("lz4: {e}")))?;
        }
        ZSTD => {
            let c = zstd::bulk::compress(data, level.unwrap_or(3)).map_err(io)?;
            out.extend_from_slice(&c);
        }
        other => return err(format!("unknown compression codec {other}")),
    }
    Ok(())
}

fn next_sequence(seq: i32, n: usize) -> i32 {
    if seq < 0 {
        return -1;
    }
    ((seq as i64 + n as i64) % (i32::MAX as i64 + 1)) as i32
}

/// Fill in the header of a batch whose records are in `batch[HEADER_LEN..]`, and its CRC32C.
fn seal(batch: &mut [u8], spec: &BatchSpec, base_sequence: i32, count: usize, first_ts: i64, max_ts: i64) {
    let len = batch.len();
    batch[0..8].copy_from_slice(&0i64.to_be_bytes());
    batch[8..12].copy_from_slice(&((len - 12) as i32).to_be_bytes());
    batch[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    batch[16] = 2;
    let attributes = spec.codec as i16 | if spec.transactional { ATTR_TRANSACTIONAL } else { 0 };
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[23..27].copy_from_slice(&((count - 1) as i32).to_be_bytes());
    batch[27..35].copy_from_slice(&first_ts.to_be_bytes());
    batch[35..43].copy_from_slice(&max_ts.to_be_bytes());
    batch[43..51].copy_from_slice(&spec.producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&spec.producer_epoch.to_be_bytes());
    batch[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    batch[57..61].copy_from_slice(&(count as i32).to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

struct Builder<'s> {
    spec: &'s BatchSpec,
    records: Vec<u8>,     // uncompressed records (after a header placeholder when not compressing)
    count: usize,
    first_ts: i64,
    max_ts: i64,
    sequence: i32,
    out: Vec<Encoded>,
}

impl Builder<'_> {
    fn fresh(&mut self) {
        self.records.clear();
        if self.spec.codec == NONE {
            self.records.resize(HEADER_LEN, 0);
        }
        self.count = 0;
    }

    fn size(&self) -> usize {
        if self.spec.codec == NONE { self.records.len() } else { HEADER_LEN + self.records.len() }
    }

    fn flush(&mut self) -> Result<(), EncodeError> {
        if self.count == 0 {
            return Ok(());
        }
        let batch = if self.spec.codec == NONE {
            std::mem::take(&mut self.records)
        } else {
            let mut b = Vec::with_capacity(HEADER_LEN + self.records.len() / 2 + 64);
            b.resize(HEADER_LEN, 0);
            compress(self.spec.codec, self.spec.level, &self.records, &mut b)?;
            b
        };
        let mut batch = batch;
        seal(&mut batch, self.spec, self.sequence, self.count, self.first_ts, self.max_ts);
        self.sequence = next_sequence(self.sequence, self.count);
        self.out.push(Encoded { data: batch, records: self.count });
        self.fresh();
        Ok(())
    }
}

/// Encode `rows` (indices into the columns; None: every row in order) as record batches.
pub fn encode(cols: &Columns<'_>, rows: Option<&[u32]>, spec: &BatchSpec) -> Result<Vec<Encoded>, EncodeError> {
    let n = rows.map_or(cols.value.len, |r| r.len());
    let mut b = Builder {
        spec,
        records: Vec::with_capacity(spec.max_batch_bytes.min(n * 16 + HEADER_LEN)),
        count: 0,
        first_ts: 0,
        max_ts: 0,
        sequence: if spec.producer_id >= 0 { spec.base_sequence } else { -1 },
        out: Vec::new(),
    };
    b.fresh();
    for k in 0..n {
        let i = match rows { Some(r) => r[k] as usize, None => k };
        let r = row(cols, i, spec.now_ms)?;
        let headers = header_pairs(cols, &r)?;
        if b.count > 0 {
            let size = record_size(&r, &headers, r.timestamp.wrapping_sub(b.first_ts), b.count as i64);
            if b.size() + size > spec.max_batch_bytes {
                b.flush()?;
            }
        }
        if b.count == 0 {
            b.first_ts = r.timestamp;
            b.max_ts = r.timestamp;
        }
        put_record(&mut b.records, &r, &headers, r.timestamp.wrapping_sub(b.first_ts), b.count as i64);
        b.max_ts = b.max_ts.max(r.timestamp);
        b.count += 1;
        if b.count == i32::MAX as usize {
            b.flush()?;
        }
    }
    b.flush()?;
    Ok(b.out)
}
