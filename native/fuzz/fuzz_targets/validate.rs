//! Fuzz `pylog_native::validate::validate` (the produce-side batch validator) with untrusted bytes.
//!
//! Input layout: 1 option byte, then the bytes handed to `validate`.
//!   byte 0: bit 0 compacted, bit 1 create_time,
//!           bits 2-3 max_uncompressed_bytes: 0 → 1 MiB, 1 → 64 KiB, 2 → 256 B, 3 → 0
//! `Ok` or `Err` are both fine; a panic, crash, timeout or OOM is a bug. An `Err` must carry one of
//! the two codes the broker maps (CORRUPT_MESSAGE, INVALID_RECORD). On `Ok`, what was validated must
//! be readable by consumers: `decode` of the same bytes (CRC not checked: the broker checks it before
//! calling `validate`) succeeds, consumes every byte and yields exactly the sum of the batches'
//! record counts, one max timestamp per batch, and record errors only for records that exist.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pylog_native::decode::{decode, Options};
use pylog_native::validate::{validate, Limits, CORRUPT_MESSAGE, INVALID_RECORD};

/// (batches, sum of their records counts), read from the batch headers of data `validate` accepted.
fn count_records(data: &[u8]) -> (usize, usize) {
    let (mut pos, mut batches, mut records) = (0usize, 0usize, 0usize);
    while pos < data.len() {
        let len = i32::from_be_bytes(data[pos + 8..pos + 12].try_into().unwrap()) as usize;
        records += i32::from_be_bytes(data[pos + 57..pos + 61].try_into().unwrap()) as usize;
        batches += 1;
        pos += 12 + len;
    }
    (batches, records)
}

fuzz_target!(|input: &[u8]| {
    if input.is_empty() {
        return;
    }
    let (o, data) = (input[0], &input[1..]);
    let max_uncompressed_bytes = match (o >> 2) & 3 {
        0 => 1 << 20,
        1 => 64 << 10,
        2 => 256,
        _ => 0,
    };
    let limits = Limits { compacted: o & 1 != 0, create_time: o & 2 != 0, max_uncompressed_bytes,
                          min_timestamp: i64::MIN, max_timestamp: i64::MAX };
    match validate(data, &limits) {
        Ok(v) => {
            let (batches, records) = count_records(data);
            let opts = Options { start: i64::MIN, end: i64::MAX, include_headers: true, verify_crc: false,
                                 max_batch_bytes: max_uncompressed_bytes, max_rows: usize::MAX };
            let d = match decode(data, &opts) {
                Ok(d) => d,
                Err(e) => panic!("validated batches do not decode: {e}"),
            };
            assert_eq!(d.consumed, data.len(), "validated bytes left unread by the decoder");
            assert_eq!(d.rows(), records, "decoded rows differ from the validated record counts");
            assert_eq!(d.batches.len(), batches);
            assert_eq!(v.max_timestamps.len(), batches);
            assert!(v.record_errors.iter().all(|e| (e.index as usize) < records));
        }
        Err(r) => {
            assert!(r.code == CORRUPT_MESSAGE || r.code == INVALID_RECORD, "unexpected code {}", r.code);
            let _ = r.error.to_string();
        }
    }
});
