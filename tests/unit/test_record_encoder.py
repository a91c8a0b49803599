"""The sink's native encoder and partitioner, checked against the oracles.

Every batch the encoder builds must be accepted by the broker's validator (Kafka's LogValidator rules,
CRC32C included) and decode back to the same rows with the broker's Python record decoder and with
the native decoder: every codec, null keys and values, headers with null values, timestamps, sliced
and large-offset arrays, batches split at the size limit with consecutive producer sequences.
Row → partition must be Kafka's default partitioner: murmur2 of the key, explicit partitions first.
"""
from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa
import pylog_native
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_protocol.record_batch import HEADER_SIZE, parse_header, validate_batches
from kafka_protocol.record_builder import decode_records
from sparklog.record_encoder import CODECS, BatchSettings, Columns, EncodeError, Partitioner, encode

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
NOW = 1_700_000_000_123


def _rows(keys: list, values: list, headers: Optional[list], timestamps: Optional[list]) -> list[tuple]:
    out = []
    for i, v in enumerate(values):
        hs = tuple((h["key"], h["value"]) for h in (headers[i] or [])) if headers else ()
        ts = timestamps[i] if timestamps and timestamps[i] is not None else NOW
        out.append((keys[i] if keys else None, v, ts, hs))
    return out


def _decoded(batches: list[tuple[Any, int]], codec: int) -> list[tuple]:
    out = []
    for data, count in batches:
        raw = bytes(data)
        h = parse_header(raw)
        assert (h.magic, h.compression, h.records_count, h.size) == (2, codec, count, len(raw))
        validate_batches(raw, 64 * 1024 * 1024)            # the broker's checks, CRC32C included
        out += [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in decode_records(raw)]
    native = pylog_native.decode_batches(b"".join(bytes(d) for d, _ in batches), 0, 1 << 62, include_headers=True)
    assert native["rows"] == len(out)
    return out


def _encode(cols: Columns, codec: int = 0, max_batch_bytes: int = 1_000_000, **kw: Any) -> list[tuple[Any, int]]:
    return encode(cols, None, BatchSettings(codec=codec, max_batch_bytes=max_batch_bytes), now_ms=NOW, **kw)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_every_codec_round_trips_nulls_headers_and_timestamps(codec):
    keys = [b"k1", None, b"", b"k4"] * 50
    values = [b"v" * 300, b"x", None, b""] * 50
    headers = [[{"key": "h", "value": b"1"}, {"key": "n", "value": None}], None, [], [{"key": "", "value": b""}]] * 50
    stamps = [1000, None, -5, 2**41] * 50
    cols = Columns.from_arrays(pa.array(values, pa.binary()), pa.array(keys, pa.binary()),
                               pa.array(headers, HEADER_TYPE), pa.array(stamps, pa.int64()))
    batches = _encode(cols, CODECS[codec])
    assert len(batches) == 1
    assert _decoded(batches, CODECS[codec]) == _rows(keys, values, headers, stamps)
    h = parse_header(bytes(batches[0][0]))
    assert (h.base_timestamp, h.max_timestamp, h.timestamp_type) == (1000, 2**41, 0)


def test_batches_split_at_the_limit_with_consecutive_sequences():
    values = [f"value-{i:05d}".encode() * 10 for i in range(1000)]
    batches = _encode(Columns.from_arrays(pa.array(values)), CODECS["lz4"], max_batch_bytes=10_000,
                      producer_id=42, producer_epoch=3, base_sequence=2**31 - 100)
    headers = [parse_header(bytes(d)) for d, _ in batches]
    assert len(batches) > 5 and sum(n for _, n in batches) == 1000
    # uncompressed records + header stay within the limit, so the compressed batch does too
    assert all(h.size <= 10_000 for h in headers)
    seq = 2**31 - 100
    for h in headers:
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, seq)
        seq = (seq + h.records_count) % 2**31                       # wraps past int32 max to 0, as Kafka
    assert [r[1] for r in _decoded(batches, CODECS["lz4"])] == values


def test_a_record_larger_than_the_limit_gets_a_batch_of_its_own():
    batches = _encode(Columns.from_arrays(pa.array([b"a", b"b" * 5000, b"c"])), max_batch_bytes=1000)
    assert [n for _, n in batches] == [1, 1, 1]
    assert len(bytes(batches[1][0])) > 5000


def test_no_producer_id_means_no_sequence():
    (data, _), = _encode(Columns.from_arrays(pa.array([b"x"])), base_sequence=5)
    h = parse_header(bytes(data))
    assert (h.producer_id, h.base_sequence) == (-1, -1)


def test_sliced_string_and_large_binary_arrays_and_spark_timestamps():
    values = pa.array(["a", "bb", None, "dddd", "e"], pa.large_string()).slice(1, 3)
    keys = pa.array([b"0", b"1", b"2", None, b"4"], pa.large_binary()).slice(1, 3)
    stamps = pa.array([0, 1_500, -1_500, 2_000_999, 0], pa.timestamp("us", "UTC")).slice(1, 3)
    headers = pa.array([None, [{"key": "a", "value": b"1"}], [{"key": "b", "value": b"2"}], None, None],
                       HEADER_TYPE).slice(1, 3)
    rows = _decoded(_encode(Columns.from_arrays(values, keys, headers, stamps)), 0)
    assert rows == [(b"1", b"bb", 1, (("a", b"1"),)), (b"2", None, -2, (("b", b"2"),)), (None, b"dddd", 2000, ())]


def test_selected_rows_only_in_the_given_order():
    cols = Columns.from_arrays(pa.array([b"r0", b"r1", b"r2", b"r3"]))
    rows = pa.array([3, 1], pa.uint32()).buffers()[1]
    (data, n), = encode(cols, rows, BatchSettings(), now_ms=NOW)
    assert n == 2 and [r.value for r in decode_records(bytes(data))] == [b"r3", b"r1"]


def test_a_null_header_key_is_refused():
    headers = pa.array([[{"key": None, "value": b"v"}]], HEADER_TYPE)
    with pytest.raises(EncodeError, match="Null header keys"):
        _encode(Columns.from_arrays(pa.array([b"v"]), headers=headers))


record = st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200),
                   st.none() | st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
                   st.none() | st.integers(-2**50, 2**50))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(records=st.lists(record, min_size=1, max_size=60), codec=st.sampled_from(sorted(CODECS.values())),
       limit=st.integers(HEADER_SIZE + 1, 3000), start=st.integers(0, 3))
def test_property_encoded_rows_decode_back(records, codec, limit, start):
    pad = [(None, b"pad", None, None)] * start          # sliced arrays: the views must honour offsets
    rs = pad + records
    keys = pa.array([r[0] for r in rs], pa.binary()).slice(start)
    values = pa.array([r[1] for r in rs], pa.binary()).slice(start)
    headers = pa.array([[{"key": k, "value": v} for k, v in r[2]] if r[2] is not None else None for r in rs],
                       HEADER_TYPE).slice(start)
    stamps = pa.array([r[3] for r in rs], pa.int64()).slice(start)
    batches = _encode(Columns.from_arrays(values, keys, headers, stamps), codec, limit, producer_id=1,
                      producer_epoch=0, base_sequence=0)
    assert _decoded(batches, codec) == [
        (k, v, NOW if t is None else t, tuple(h or ())) for k, v, h, t in records]
    if codec == 0:
        assert all(len(bytes(d)) <= limit or n == 1 for d, n in batches)


# --- partitioner --------------------------------------------------------------------------------

def test_murmur2_is_kafkas():
    assert [pylog_native.murmur2(s) for s in (b"21", b"foobar", b"a-little-bit-long-string", b"abc")] == \
        [-973932308, -790332482, -985981536, 479470107]


def _groups(p: Partitioner, cols: Columns) -> dict[int, list[int]]:
    return {part: list(memoryview(bytes(rows)).cast("I")) for part, rows, _ in p.assign(cols)}


def test_keyed_rows_go_where_the_java_client_puts_them_and_explicit_partitions_win():
    keys = [f"key-{i}".encode() for i in range(200)]
    explicit = [None] * 100 + [i % 3 for i in range(100)]
    cols = Columns.from_arrays(pa.array([b"v"] * 200), pa.array(keys), partition=pa.array(explicit, pa.int32()))
    got = _groups(Partitioner(7, 1000, seed=0), cols)
    want: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        part = explicit[i] if explicit[i] is not None else (pylog_native.murmur2(k) & 0x7FFFFFFF) % 7
        want.setdefault(part, []).append(i)
    assert got == want


def test_keyless_rows_stick_to_a_partition_then_move_on():
    p = Partitioner(3, switch_bytes=1000, seed=1)
    first = p.sticky
    got = _groups(p, Columns.from_arrays(pa.array([b"x" * 88] * 25)))   # 100 bytes a record with overhead
    assert got == {first: list(range(10)), (first + 1) % 3: list(range(10, 20)), (first + 2) % 3: list(range(20, 25))}
    assert (p.sticky, p.sticky_bytes) == ((first + 2) % 3, 500)          # carried into the next batch


def test_a_partition_outside_the_topic_is_refused():
    cols = Columns.from_arrays(pa.array([b"v"]), partition=pa.array([5], pa.int32()))
    with pytest.raises(EncodeError, match=r"5 is not in the range \[0...3\)"):
        Partitioner(3, 1000).assign(cols)
