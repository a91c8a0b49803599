"""isolation.level=read_committed on the native read path (sparklog.read_committed), fed in memory.

`aborted_ranges` on hand-written batch lists (one aborted transaction, a committed one after it,
non-transactional batches of the same producer id, interleaved producers, an aborted transaction
starting after earlier batches of its producer), then against a generated log whose ground truth is
known: every transaction is drawn as committed or aborted, and exactly the records of the aborted
ones must go. `drop_aborted` on real Arrow batches decoded by the native decoder from encoded
Kafka record batches, control batches included.
"""
from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparklog.native_decoder import BatchInfo, decode_range
from sparklog.read_committed import aborted_ranges, drop_aborted
from sparklog.schema import arrow_schema
from tests.support.batches import encode_batch

SCHEMA = arrow_schema(False)


def data(base: int, last: int, pid: int = 7, transactional: bool = True) -> BatchInfo:
    return BatchInfo(base, last, pid, transactional, False)


def marker(offset: int, pid: int = 7) -> BatchInfo:
    return BatchInfo(offset, offset, pid, True, True)


# --- aborted_ranges on hand-written batch lists --------------------------------------------------------


def test_an_aborted_transaction_is_dropped_until_its_producers_control_batch():
    batches = [data(0, 2), data(3, 3), marker(4), data(5, 6, pid=-1, transactional=False)]
    assert aborted_ranges(batches, [(7, 0)]) == [(0, 2), (3, 3)]


def test_a_committed_transaction_of_the_same_producer_after_the_abort_marker_is_kept():
    batches = [data(0, 1), marker(2), data(3, 4), data(5, 5), marker(6)]
    assert aborted_ranges(batches, [(7, 0)]) == [(0, 1)]


def test_non_transactional_batches_of_the_aborting_producer_id_are_kept():
    batches = [data(0, 1), data(2, 3, transactional=False), data(4, 4), marker(5), data(6, 6, transactional=False)]
    assert aborted_ranges(batches, [(7, 0)]) == [(0, 1), (4, 4)]


def test_interleaved_producers_one_aborted_one_committed():
    batches = [data(0, 1, pid=7), data(2, 2, pid=8), data(3, 4, pid=7), data(5, 5, pid=8),
               marker(6, pid=7), data(7, 7, pid=8), marker(8, pid=8)]
    assert aborted_ranges(batches, [(7, 0)]) == [(0, 1), (3, 4)]
    # the same log with producer 8's transaction the aborted one instead
    assert aborted_ranges(batches, [(8, 2)]) == [(2, 2), (5, 5), (7, 7)]
    # both aborted
    assert aborted_ranges(batches, [(8, 2), (7, 0)]) == [(0, 1), (2, 2), (3, 4), (5, 5), (7, 7)]


def test_the_control_batch_of_another_producer_does_not_end_an_abort():
    batches = [data(0, 0, pid=7), marker(1, pid=8), data(2, 2, pid=7), marker(3, pid=7), data(4, 4, pid=7)]
    assert aborted_ranges(batches, [(7, 0)]) == [(0, 0), (2, 2)]


def test_batches_of_the_producer_before_the_aborted_transactions_first_offset_are_kept():
    # a committed transaction (0-1, commit marker 2), then the aborted one from offset 3
    batches = [data(0, 1), marker(2), data(3, 4), data(5, 5), marker(6), data(7, 7), marker(8)]
    assert aborted_ranges(batches, [(7, 3)]) == [(3, 4), (5, 5)]


def test_a_first_offset_inside_a_batch_aborts_that_batch():
    # Kafka's rule: a producer is aborted from the first batch whose last offset reaches the first offset
    batches = [data(0, 1), marker(2), data(3, 6), marker(7)]
    assert aborted_ranges(batches, [(7, 5)]) == [(3, 6)]
    assert aborted_ranges(batches, [(7, 7)]) == []   # nothing of producer 7 left to drop once it starts


def test_two_aborted_transactions_of_one_producer_around_a_committed_one():
    batches = [data(0, 0), marker(1), data(2, 3), marker(4), data(5, 5), data(6, 6), marker(7)]
    # given out of order: the function sorts by first offset
    assert aborted_ranges(batches, [(7, 5), (7, 0)]) == [(0, 0), (5, 5), (6, 6)]


def test_a_fetch_starting_inside_an_aborted_transaction_drops_its_remaining_batches():
    # the broker lists the transaction with a first offset before the fetched range
    batches = [data(10, 11), data(12, 12, pid=-1, transactional=False), marker(13), data(14, 14)]
    assert aborted_ranges(batches, [(7, 3)]) == [(10, 11)]


def test_no_aborted_transactions_keeps_everything():
    batches = [data(0, 1), marker(2), data(3, 3, pid=8), marker(4, pid=8), data(5, 5, transactional=False)]
    assert aborted_ranges(batches, []) == []
    assert aborted_ranges(batches, iter(())) == []
    assert aborted_ranges([], [(7, 0)]) == []


def test_an_aborted_producer_that_never_appears_drops_nothing():
    batches = [data(0, 1), marker(2)]
    assert aborted_ranges(batches, [(99, 0)]) == []


# --- aborted_ranges against a generated log whose ground truth is known --------------------------------


def _generated_log(rng: random.Random, producers: int, steps: int):
    """(batches, aborted list, offsets read_committed keeps, offsets it drops, offsets of abort markers)."""
    batches: list[BatchInfo] = []
    aborted: list[tuple[int, int]] = []
    keep: set[int] = set()
    dropped: set[int] = set()
    abort_markers: set[int] = set()
    open_txn: dict[int, tuple[int, bool, list[range]]] = {}   # pid -> (first offset, will abort, record ranges)
    offset = 0

    def close(pid: int) -> None:
        nonlocal offset
        first, abort, ranges = open_txn.pop(pid)
        for r in ranges:
            (dropped if abort else keep).update(r)
        if abort:
            aborted.append((pid, first))
            abort_markers.add(offset)
        batches.append(marker(offset, pid))
        offset += 1

    for _ in range(steps):
        pid = rng.randrange(1, producers + 1)
        action = rng.random()
        if action < 0.55:          # a transactional data batch (opens a transaction if none)
            n = rng.randint(1, 3)
            if pid not in open_txn:
                open_txn[pid] = (offset, rng.random() < 0.5, [])
            open_txn[pid][2].append(range(offset, offset + n))
            batches.append(data(offset, offset + n - 1, pid))
            offset += n
        elif action < 0.75 and pid in open_txn:   # the transaction's marker
            close(pid)
        else:                      # a non-transactional batch, of this producer id or none
            n = rng.randint(1, 2)
            batches.append(data(offset, offset + n - 1, rng.choice((pid, -1)), transactional=False))
            keep.update(range(offset, offset + n))
            offset += n
        offset += rng.choice((0, 0, 0, 1))   # compaction gaps between batches
    for pid in sorted(open_txn):   # the broker reads only up to the last stable offset
        close(pid)
    return batches, aborted, keep, dropped, abort_markers


def _kept_offsets(batches: list[BatchInfo], ranges: list[tuple[int, int]]) -> set[int]:
    out: set[int] = set()
    for b in batches:
        if b.control:
            continue
        out.update(o for o in range(b.base_offset, b.last_offset + 1)
                   if not any(lo <= o <= hi for lo, hi in ranges))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), producers=st.integers(1, 4), steps=st.integers(0, 40))
def test_exactly_the_records_of_aborted_transactions_are_dropped(seed, producers, steps):
    rng = random.Random(seed)
    batches, aborted, keep, dropped, _markers = _generated_log(rng, producers, steps)
    rng.shuffle(aborted)   # the order of the Fetch answer's list must not matter
    ranges = aborted_ranges(batches, aborted)
    assert _kept_offsets(batches, ranges) == keep
    assert all(b.transactional and not b.control for b in batches if (b.base_offset, b.last_offset) in ranges)
    assert ranges == sorted(ranges)
    assert set().union(*(range(lo, hi + 1) for lo, hi in ranges)) == dropped


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), cut=st.integers(0, 60))
def test_a_fetch_from_the_middle_of_the_log_drops_the_same_records(seed, cut):
    """The broker lists the aborted transactions whose marker is at or after the fetch offset."""
    rng = random.Random(seed)
    batches, aborted, keep, _dropped, _markers = _generated_log(rng, 3, 40)
    tail = batches[min(cut, len(batches)):]
    if not tail:
        return
    fetch_offset = tail[0].base_offset
    markers = {}   # (pid, first offset) -> offset of its abort marker
    for pid, first in aborted:
        markers[(pid, first)] = next(b.base_offset for b in batches
                                     if b.control and b.producer_id == pid and b.base_offset > first)
    listed = [a for a in aborted if markers[a] >= fetch_offset]
    ranges = aborted_ranges(tail, listed)
    assert _kept_offsets(tail, ranges) == {o for o in keep if o >= fetch_offset}


# --- drop_aborted on decoded Arrow batches -------------------------------------------------------------


def _control(base_offset: int, pid: int, abort: bool = True) -> bytes:
    """A control batch with one abort (type 0) or commit (type 1) marker record."""
    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, 5)   # version, coordinator epoch
    return encode_batch([value], keys=[key], base_offset=base_offset, producer_id=pid, producer_epoch=0,
                        transactional=True, control=True)


def _txn(values: list[bytes], base_offset: int, pid: int, seq: int = 0) -> bytes:
    return encode_batch(values, base_offset=base_offset, producer_id=pid, producer_epoch=0, base_sequence=seq,
                        transactional=True)


def _offsets(batch: pa.RecordBatch) -> list[int]:
    return batch.column("offset").to_pylist()


def test_drop_aborted_keeps_the_rows_outside_every_range():
    raw = encode_batch([b"v%d" % i for i in range(10)], base_offset=100)
    batch = decode_range(raw, "t", 0, 0, 1000, SCHEMA, include_headers=False).batch
    assert _offsets(batch) == list(range(100, 110))
    got = drop_aborted(batch, [(101, 102), (105, 105), (108, 200)])
    assert _offsets(got) == [100, 103, 104, 106, 107]
    assert got.column("value").to_pylist() == [b"v0", b"v3", b"v4", b"v6", b"v7"]
    assert got.schema.equals(SCHEMA)
    assert _offsets(drop_aborted(batch, [(0, 99), (110, 120)])) == list(range(100, 110))
    assert drop_aborted(batch, [(0, 1000)]).num_rows == 0


def test_drop_aborted_without_ranges_or_rows_returns_the_batch_itself():
    raw = encode_batch([b"a", b"b"], base_offset=3)
    batch = decode_range(raw, "t", 0, 0, 100, SCHEMA, include_headers=False).batch
    assert drop_aborted(batch, []) is batch
    empty = decode_range(raw, "t", 0, 50, 100, SCHEMA, include_headers=False).batch
    assert empty.num_rows == 0
    assert drop_aborted(empty, [(0, 100)]) is empty


def test_an_aborted_transaction_its_marker_a_committed_one_and_a_plain_batch_decoded_and_filtered():
    raw = (_txn([b"aborted-0", b"aborted-1"], 0, pid=7)       # offsets 0-1, aborted
           + _control(2, pid=7, abort=True)                    # offset 2, abort marker
           + _txn([b"committed-3"], 3, pid=7, seq=2)            # offset 3, committed
           + _control(4, pid=7, abort=False)                   # offset 4, commit marker
           + encode_batch([b"plain-5", b"plain-6"], base_offset=5))
    decoded = decode_range(raw, "t", 2, 0, 100, SCHEMA, include_headers=False)
    assert [b.control for b in decoded.batches] == [False, True, False, True, False]
    assert [(b.base_offset, b.last_offset, b.producer_id) for b in decoded.batches] == \
        [(0, 1, 7), (2, 2, 7), (3, 3, 7), (4, 4, 7), (5, 6, -1)]
    assert _offsets(decoded.batch) == [0, 1, 3, 5, 6]   # control records are never rows
    ranges = aborted_ranges(decoded.batches, [(7, 0)])
    assert ranges == [(0, 1)]
    got = drop_aborted(decoded.batch, ranges)
    assert _offsets(got) == [3, 5, 6]
    assert got.column("value").to_pylist() == [b"committed-3", b"plain-5", b"plain-6"]
    assert set(got.column("partition").to_pylist()) == {2}


def test_interleaved_producers_decoded_and_filtered():
    raw = (_txn([b"p7-0"], 0, pid=7)
           + _txn([b"p8-1", b"p8-2"], 1, pid=8)
           + _txn([b"p7-3"], 3, pid=7, seq=1)
           + encode_batch([b"idempotent-p7-4"], base_offset=4, producer_id=7, producer_epoch=0, base_sequence=2)
           + _control(5, pid=8, abort=False)
           + _control(6, pid=7, abort=True)
           + _txn([b"p8-7"], 7, pid=8, seq=2)
           + _control(8, pid=8, abort=False))
    decoded = decode_range(raw, "t", 0, 0, 100, SCHEMA, include_headers=False)
    assert _offsets(decoded.batch) == [0, 1, 2, 3, 4, 7]
    got = drop_aborted(decoded.batch, aborted_ranges(decoded.batches, [(7, 0)]))
    assert got.column("value").to_pylist() == [b"p8-1", b"p8-2", b"idempotent-p7-4", b"p8-7"]


def test_a_range_starting_inside_an_aborted_batch_drops_only_its_rows_in_range():
    raw = _txn([b"a", b"b", b"c"], 10, pid=7) + _control(13, pid=7) + encode_batch([b"d"], base_offset=14)
    decoded = decode_range(raw, "t", 0, 11, 100, SCHEMA, include_headers=False)
    assert _offsets(decoded.batch) == [11, 12, 14]
    assert decoded.batches[0][:2] == (10, 12)   # the whole batch is reported, not just its rows in range
    got = drop_aborted(decoded.batch, aborted_ranges(decoded.batches, [(7, 10)]))
    assert _offsets(got) == [14]


@pytest.mark.parametrize("seed", range(20))
def test_generated_logs_encoded_decoded_and_filtered_keep_exactly_the_committed_records(seed):
    rng = random.Random(seed)
    batches, aborted, keep, _dropped, abort_markers = _generated_log(rng, 3, 30)
    raw = b""
    seqs: dict[int, int] = {}
    for b in batches:
        n = b.last_offset - b.base_offset + 1
        if b.control:
            raw += _control(b.base_offset, b.producer_id, abort=b.base_offset in abort_markers)
        else:
            values = [b"%d" % o for o in range(b.base_offset, b.last_offset + 1)]
            seq = seqs.get(b.producer_id, 0)
            seqs[b.producer_id] = seq + n
            raw += encode_batch(values, base_offset=b.base_offset, producer_id=b.producer_id, producer_epoch=0,
                                base_sequence=seq if b.producer_id >= 0 else -1, transactional=b.transactional)
    decoded = decode_range(raw, "t", 0, 0, 2**40, SCHEMA, include_headers=False)
    assert decoded.batches == batches
    got = drop_aborted(decoded.batch, aborted_ranges(decoded.batches, aborted))
    assert _offsets(got) == sorted(keep)
    assert got.column("value").to_pylist() == [b"%d" % o for o in sorted(keep)]


def test_one_answer_fed_in_pieces_keeps_the_state_of_its_transactions():
    from sparklog.read_committed import AbortedTransactions

    aborted_data = BatchInfo(0, 4, 7, True, False)
    abort_marker = BatchInfo(5, 5, 7, True, True)
    committed_later = BatchInfo(6, 9, 7, True, False)
    open_abort = BatchInfo(10, 12, 8, True, False)
    f = AbortedTransactions([(7, 0), (8, 10)])
    assert f.dropped([aborted_data, abort_marker]) == [(0, 4)]
    assert f.dropped([committed_later]) == [], "producer 7's abort was seen in the first piece"
    assert f.dropped([open_abort]) == [(10, 12)]
