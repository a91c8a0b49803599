//! Fuzz `pylog_native::decode::decode` with untrusted bytes.
//!
//! Input layout: 2 option bytes, then the bytes handed to `decode`.
//!   byte 0: bit 0 include_headers, bit 1 verify_crc,
//!           bits 2-3 max_batch_bytes: 0 → 1 MiB, 1 → 64 KiB, 2 → 256 B, 3 → 0
//!   byte 1: 0 → the whole range [i64::MIN, i64::MAX);
//!           else start = low nibble, end = start + high nibble (so [start, end) may be empty)
//! Any Ok or Err is fine; a panic, crash, timeout or OOM is a bug. On Ok, the returned columns
//! must also be consistent with each other (the Python side builds Arrow arrays from them as-is).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pylog_native::decode::{decode, Options};

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let (o, data) = (&input[..2], &input[2..]);
    let max_batch_bytes = match (o[0] >> 2) & 3 {
        0 => 1 << 20,
        1 => 64 << 10,
        2 => 256,
        _ => 0,
    };
    let (start, end) = if o[1] == 0 {
        (i64::MIN, i64::MAX)
    } else {
        let s = i64::from(o[1] & 0x0f);
        (s, s + i64::from(o[1] >> 4))
    };
    let max_rows = if o[0] & 0x10 != 0 { usize::from(o[1] & 0x07) + 1 } else { usize::MAX };
    let opts = Options { start, end, include_headers: o[0] & 1 != 0, verify_crc: o[0] & 2 != 0, max_batch_bytes,
                         max_rows };
    match decode(data, &opts) {
        Ok(d) => {
            let rows = d.rows();
            assert!(d.consumed <= data.len());
            assert_eq!(d.keys.len(), rows);
            assert_eq!(d.values.len(), rows);
            assert_eq!(d.keys.validity.len, rows);
            assert_eq!(d.values.validity.len, rows);
            assert_eq!(d.timestamps_us.len(), rows);
            assert_eq!(d.timestamp_types.len(), rows);
            assert!(d.offsets.iter().all(|&x| x >= start && x < end));
            assert_eq!(*d.values.offsets.last().unwrap() as usize, d.values.data.len());
            assert_eq!(*d.keys.offsets.last().unwrap() as usize, d.keys.data.len());
            match &d.headers {
                Some(h) => {
                    assert_eq!(h.list_offsets.len(), rows + 1);
                    assert_eq!(*h.list_offsets.last().unwrap() as usize, h.keys.len());
                    assert_eq!(h.keys.len(), h.values.len());
                    assert!(std::str::from_utf8(&h.keys.data).is_ok());
                }
                None => assert!(!opts.include_headers),
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
