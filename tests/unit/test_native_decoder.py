"""The native record batch decoder (native/, sparklog.native_decoder) against the pure-Python oracle.

Property-based: random batches with every codec, null keys and values, headers, both timestamp
types, control and transactional batches, offset gaps inside and between batches, ranges that start
or end inside a batch, and a partial batch at the end. Then hostile input: corrupted and random
bytes give CorruptBatchError naming topic, partition and offset, and nothing else.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparklog.native_decoder import CorruptBatchError, decode_range, reference_decode
from sparklog.schema import arrow_schema
from tests.support.batches import CODECS, encode_batch

SCHEMA = arrow_schema(True)
small_bytes = st.one_of(st.none(), st.binary(max_size=40))


@st.composite
def batch_specs(draw: st.DrawFn) -> dict:
    n = draw(st.integers(0, 6))
    gaps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    deltas, d = [], -1
    for g in gaps:
        d += 1 + g
        deltas.append(d)
    return {
        "values": draw(st.lists(small_bytes, min_size=n, max_size=n)),
        "keys": draw(st.lists(small_bytes, min_size=n, max_size=n)),
        "timestamps": draw(st.lists(st.integers(0, 2**41), min_size=n, max_size=n)),
        "codec": draw(st.sampled_from(sorted(CODECS))),
        "log_append_time": draw(st.booleans()),
        "transactional": draw(st.booleans()),
        "control": draw(st.integers(0, 9)) == 0,
        "record_headers": draw(st.lists(st.tuples(st.text(max_size=5).map(str.encode), small_bytes), max_size=2)),
        "offset_deltas": deltas,
        "gap": draw(st.integers(0, 5)),
    }


def _encode(specs: list[dict]) -> bytes:
    out, base = b"", 0
    for spec in specs:
        spec = dict(spec)
        base += spec.pop("gap")
        out += encode_batch(base_offset=base, **spec)
        base += (spec["offset_deltas"][-1] if spec["offset_deltas"] else 0) + 1
    return out


def _rows(decoded: pa.RecordBatch) -> list[dict]:
    # exact integer milliseconds (datetime.timestamp() is a float and rounds 1.001 s down to 1000 ms)
    micros = decoded.column("timestamp").cast(pa.int64()).to_pylist()
    return [{"key": r["key"], "value": r["value"], "offset": r["offset"],
             "timestamp_ms": us // 1000 if us is not None else None,
             "timestamp_type": r["timestampType"], "headers": None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]]}
            for r, us in zip(decoded.to_pylist(), micros)]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs=st.lists(batch_specs(), min_size=0, max_size=5), cut=st.integers(0, 30), data=st.data())
def test_the_native_decoder_agrees_with_the_reference_decoder(specs, cut, data):
    raw = _encode(specs)
    raw = raw[:len(raw) - cut] if cut and specs and data.draw(st.booleans()) else raw   # a partial last batch
    start = data.draw(st.integers(0, 40))
    end = data.draw(st.integers(start, 60))
    got = decode_range(raw, "t", 3, start, end, SCHEMA, include_headers=True)
    expected = reference_decode(raw, start, end)
    assert got.batch.schema.equals(SCHEMA)
    assert [(r["key"], r["value"], r["offset"], r["timestamp_type"], r["headers"]) for r in _rows(got.batch)] == \
        [(r["key"], r["value"], r["offset"], r["timestamp_type"], r["headers"]) for r in expected]
    assert [r["timestamp_ms"] for r in _rows(got.batch)] == [r["timestamp_ms"] for r in expected]
    assert set(got.batch.column("topic").to_pylist()) <= {"t"} and set(got.batch.column("partition").to_pylist()) <= {3}
    assert got.consumed <= len(raw)


def test_without_headers_the_schema_has_no_headers_column_and_values_are_not_copied_per_row():
    raw = encode_batch([b"a" * 1000, None], keys=[None, b"k"], codec="zstd")
    got = decode_range(raw, "t", 0, 0, 10, arrow_schema(False), include_headers=False)
    assert got.batch.schema.equals(arrow_schema(False))
    assert got.batch.column("value").to_pylist() == [b"a" * 1000, None]
    assert got.batch.column("key").null_count == 1 and got.next_offset == 2


def test_a_corrupt_batch_names_topic_partition_and_offset():
    raw = bytearray(encode_batch([b"hello", b"world"], base_offset=41))
    raw[-3] ^= 0xFF
    with pytest.raises(CorruptBatchError, match=r"events-7: corrupt record batch at offset 41 .*CRC32C"):
        decode_range(bytes(raw), "events", 7, 0, 100, SCHEMA, include_headers=True)
    raw = bytearray(encode_batch([b"x"], base_offset=5))
    raw[16] = 1   # magic 1
    with pytest.raises(CorruptBatchError, match=r"offset 5 .*magic 1"):
        decode_range(bytes(raw), "events", 0, 0, 100, SCHEMA, include_headers=True)


def test_a_corrupt_batch_keeps_the_batches_before_it_and_says_where_the_next_one_starts():
    first = encode_batch([b"a", b"b"], base_offset=10)
    bad = bytearray(encode_batch([b"c"], base_offset=12))
    bad[-2] ^= 0xFF
    last = encode_batch([b"d", b"e"], base_offset=13)
    with pytest.raises(CorruptBatchError) as caught:
        decode_range(first + bytes(bad) + last, "t", 0, 0, 100, SCHEMA, include_headers=True)
    e = caught.value
    assert e.offset == 12 and e.resume_at == 13
    assert e.good is not None and e.good.batch.column("value").to_pylist() == [b"a", b"b"] and e.good.next_offset == 12
    with pytest.raises(CorruptBatchError) as caught:
        decode_range(bytes(bad), "t", 0, 0, 100, SCHEMA, include_headers=True)
    assert caught.value.good is None and caught.value.resume_at is None and caught.value.offset == 12


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(specs=st.lists(batch_specs(), min_size=1, max_size=3), flips=st.lists(st.tuples(st.integers(0), st.integers(1, 255)),
                                                                            min_size=1, max_size=4),
       verify=st.booleans())
def test_corrupted_batches_give_a_decode_error_or_rows_never_a_crash(specs, flips, verify):
    raw = bytearray(_encode(specs))
    for pos, x in flips:
        raw[pos % len(raw)] ^= x
    try:
        decode_range(bytes(raw), "t", 0, 0, 2**40, SCHEMA, include_headers=True, verify_crc=verify)
    except CorruptBatchError as e:
        assert "t-0:" in str(e)


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=300))
def test_random_bytes_give_a_decode_error_or_nothing(blob):
    try:
        got = decode_range(blob, "t", 0, 0, 2**40, SCHEMA, include_headers=True, verify_crc=False)
        assert got.consumed <= len(blob)
    except CorruptBatchError:
        pass


def test_a_compression_bomb_is_refused_not_allocated():
    import pylog_native

    from sparklog import native_decoder

    raw = encode_batch([b"\0" * 3_000_000], codec="zstd")
    with pytest.raises(pylog_native.DecodeError, match="expands beyond 1000000 bytes"):
        pylog_native.decode_batches(raw, 0, 10, False, True, 1_000_000)
    assert native_decoder.MAX_BATCH_BYTES >= 64 * 1024 * 1024


def test_the_fuzz_corpus_seeds_decode_as_the_fuzz_target_reads_them():
    """native/fuzz/corpus/decode: 2 option bytes, then batches; every seed decodes except the size-limit one."""
    from pathlib import Path

    import pylog_native

    corpus = Path(__file__).resolve().parents[2] / "native" / "fuzz" / "corpus" / "decode"
    seeds = sorted(corpus.iterdir())
    assert len(seeds) >= 10
    limits = {0: 1 << 20, 1: 64 << 10, 2: 256, 3: 0}
    for seed in seeds:
        raw = seed.read_bytes()
        opts, data = raw[:2], raw[2:]
        start, end = (-(2**63), 2**63 - 1) if opts[1] == 0 else (opts[1] & 0xF, (opts[1] & 0xF) + (opts[1] >> 4))
        try:
            pylog_native.decode_batches(data, start, end, bool(opts[0] & 1), bool(opts[0] & 2),
                                        limits[(opts[0] >> 2) & 3])
        except pylog_native.DecodeError as e:
            assert seed.name == "small_limit" and "expands beyond 256 bytes" in str(e), (seed.name, e)


def test_max_rows_bounds_one_call_and_the_rest_follows_from_consumed():
    raw = b"".join(encode_batch([b"v%d" % i for i in range(3)], base_offset=3 * b) for b in range(5))   # 15 rows
    got, pos, start = [], 0, 0
    while pos < len(raw):
        d = decode_range(raw[pos:], "t", 0, start, 100, SCHEMA, include_headers=True, max_rows=4)
        assert d.batch.num_rows <= 6, "stops after the batch that reaches max_rows"
        got += d.batch.column("offset").to_pylist()
        pos += d.consumed
        start = d.next_offset
    assert got == list(range(15))
