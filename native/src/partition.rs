//! Row → partition for the sink, as the Java client's default partitioner (what Spark's Kafka sink
//! uses): an explicit `partition` value wins; a keyed row goes to `toPositive(murmur2(key)) % n`; a
//! keyless row goes to the sticky partition, which moves on (round robin) once about `switch_bytes`
//! of records went to it (Java's BuiltInPartitioner switches after batch.size bytes).

use crate::arrow_view::{err, EncodeError, I32View, VarView};

/// Kafka's `Utils.murmur2` (seed 0x9747b28c), bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let len = data.len();
    let mut h: u32 = 0x9747_b28c ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The keyless rows' current partition and the bytes sent to it since it was chosen.
pub struct Sticky {
    pub partition: i32,
    pub bytes: usize,
}

const RECORD_OVERHEAD: usize = 12; // length, attributes, deltas, key length, header count (about)

/// The row indices of each partition (`num_partitions` lists, in row order).
pub fn assign(value: &VarView<'_>, key: Option<&VarView<'_>>, explicit: Option<&I32View<'_>>, num_partitions: i32,
              sticky: &mut Sticky, switch_bytes: usize) -> Result<Vec<Vec<u32>>, EncodeError> {
    if num_partitions <= 0 {
        return err(format!("a topic with {num_partitions} partitions cannot be written"));
    }
    let n = num_partitions as usize;
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
    sticky.partition = sticky.partition.rem_euclid(num_partitions);
    for i in 0..value.len {
        if let Some(p) = explicit.and_then(|e| e.get(i)) {
            if p < 0 || p >= num_partitions {
                return err(format!("Invalid partition given with record: {p} is not in the range [0...{n})."));
            }
            out[p as usize].push(i as u32);
            continue;
        }
        if let Some(k) = match key { Some(k) => k.get(i)?, None => None } {
            let p = (murmur2(k) & 0x7fff_ffff) as usize % n;
            out[p].push(i as u32);
            continue;
        }
        if sticky.bytes >= switch_bytes {
            sticky.partition = (sticky.partition + 1) % num_partitions;
            sticky.bytes = 0;
        }
        out[sticky.partition as usize].push(i as u32);
        sticky.bytes += value.get(i)?.map_or(0, |v| v.len()) + RECORD_OVERHEAD;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::murmur2;

    #[test]
    fn murmur2_matches_kafkas_utils_test() {
        // org.apache.kafka.common.utils.UtilsTest#testMurmur2
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971);
        assert_eq!(murmur2(b"abc"), 479470107);
    }
}
