"""Transactions in one partition's log (KIP-98): the last stable offset, markers, the aborted-transaction
index (`.txnindex`), their rebuild after a crash, and compaction of aborted records.

Fed in memory through `PartitionLog` with batches built as a transactional producer builds them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import TopicConfig
from broker.log import PartitionLog
from broker.log.cleaner import LogCleaner
from broker.log.log_manager import LogManager
from broker.log.transaction_index import ENTRY_SIZE, AbortedTxn
from kafka_protocol.control_records import Marker, read_marker
from kafka_protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from kafka_protocol.record_builder import decode_records
from tests.support.batches import encode_batch, producer_batch, transactional_batch

A, B = 1000, 2000
NOW_MS = 1_700_000_000_000


def open_log(path: Path, *, recover: bool = False, **cfg: object) -> PartitionLog:
    return PartitionLog(path / "t-0", "t", 0, TopicConfig.default(**cfg), recover=recover,
                        clock=lambda: NOW_MS / 1000)


def commit(pid: int, epoch: int = 0, coordinator_epoch: int = 0) -> Marker:
    return Marker(pid, epoch, True, coordinator_epoch)


def abort(pid: int, epoch: int = 0, coordinator_epoch: int = 0) -> Marker:
    return Marker(pid, epoch, False, coordinator_epoch)


def test_an_open_transaction_holds_the_last_stable_offset_at_its_first_record_until_its_marker(tmp_path):
    plog = open_log(tmp_path)
    plog.append(encode_batch([b"plain"] * 2))
    plog.append(transactional_batch(A, 0, 0, [b"a0", b"a1"]))       # offsets 2, 3
    plog.append(encode_batch([b"plain"]))                            # 4: not transactional, another producer
    assert (plog.last_stable_offset, plog.high_watermark) == (2, 5)
    result = plog.append_marker(commit(A))
    assert result.base_offset == 5 and plog.log_end_offset == 6
    assert plog.last_stable_offset == 6
    assert plog.aborted_transactions(0, 6) == []


def test_the_lowest_open_transaction_decides_and_an_abort_is_indexed_with_its_marker(tmp_path):
    plog = open_log(tmp_path)
    plog.append(transactional_batch(A, 0, 0, [b"a"]))        # 0
    plog.append(transactional_batch(B, 0, 0, [b"b"]))        # 1
    plog.append(transactional_batch(A, 0, 1, [b"a"]))        # 2
    plog.append_marker(abort(A))                             # 3: B still open from 1
    assert plog.last_stable_offset == 1
    assert plog.aborted_transactions(0, 10) == [AbortedTxn(A, 0, 3, 1)]
    plog.append_marker(commit(B))                            # 4
    assert plog.last_stable_offset == plog.log_end_offset == 5
    assert plog.aborted_transactions(0, 5) == [AbortedTxn(A, 0, 3, 1)]
    assert plog.aborted_transactions(4, 5) == []             # ends before the fetch offset
    index = plog.active_segment.txn_index.path
    assert index.name == "00000000000000000000.txnindex" and index.stat().st_size == ENTRY_SIZE
    h = plog.active_segment.find_batch(3)
    assert h is not None and h.is_control
    assert read_marker(plog.active_segment.read_batch(h)) == abort(A)


def test_a_producer_with_an_open_transaction_may_not_write_outside_it(tmp_path):
    plog = open_log(tmp_path)
    plog.append(transactional_batch(A, 0, 0, [b"a"]))
    with pytest.raises(InvalidTxnStateError):
        plog.append(producer_batch(A, 0, 1))
    plog.append_marker(commit(A))
    assert plog.append(producer_batch(A, 0, 1)).base_offset == 2


def test_markers_from_an_older_coordinator_or_producer_epoch_are_refused(tmp_path):
    plog = open_log(tmp_path)
    plog.append(transactional_batch(A, 3, 0, [b"a"]))
    plog.append_marker(abort(A, epoch=4, coordinator_epoch=7))       # a fencing abort bumps the epoch
    plog.append(transactional_batch(A, 4, 0, [b"a"]))
    with pytest.raises(TransactionCoordinatorFencedError):
        plog.append_marker(commit(A, epoch=4, coordinator_epoch=6))
    with pytest.raises(InvalidProducerEpochError):
        plog.append_marker(commit(A, epoch=3, coordinator_epoch=7))
    with pytest.raises(InvalidProducerEpochError):
        plog.append(transactional_batch(A, 3, 1, [b"zombie"]))
    assert plog.last_stable_offset == 2


def test_a_marker_without_an_open_transaction_is_written_and_changes_nothing_else(tmp_path):
    plog = open_log(tmp_path)
    plog.append_marker(abort(A))
    assert plog.log_end_offset == plog.last_stable_offset == 1
    assert plog.aborted_transactions(0, 1) == []


@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "crash-without-snapshots"])
def test_open_transactions_and_aborted_ones_survive_a_restart(tmp_path, crash):
    plog = open_log(tmp_path, segment_bytes=400)
    plog.append(transactional_batch(A, 0, 0, [b"a" * 50]))
    plog.append(transactional_batch(B, 0, 0, [b"b" * 50]))
    plog.append_marker(abort(A))
    for i in range(8):                                           # rolls segments and writes snapshots
        plog.append(encode_batch([b"x" * 60]))
    plog.append(transactional_batch(A, 0, 1, [b"again"]))
    plog.append_marker(abort(A))
    expected = plog.aborted_transactions(0, plog.log_end_offset)
    assert len(expected) == 2 and len(plog.segments) > 1
    stable = plog.last_stable_offset
    assert stable == 1                                          # B is still open
    if crash:
        plog.flush()
        plog._close_files()                                     # no snapshot at close
        for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
            snapshot.unlink()
        plog.active_segment.txn_index.path.unlink()             # the active segment's index lost
    else:
        plog.close()
    again = open_log(tmp_path, recover=crash, segment_bytes=400)
    assert again.last_stable_offset == stable
    assert again.aborted_transactions(0, again.log_end_offset) == expected
    again.append_marker(commit(B))
    assert again.last_stable_offset == again.log_end_offset


def test_truncation_drops_the_markers_and_reopens_their_transactions(tmp_path):
    plog = open_log(tmp_path)
    plog.append(transactional_batch(A, 0, 0, [b"a"]))      # 0
    plog.append_marker(abort(A))                           # 1
    assert plog.aborted_transactions(0, 2) == [AbortedTxn(A, 0, 1, 2)]
    plog.truncate_to(1)
    assert plog.aborted_transactions(0, 2) == []
    assert plog.last_stable_offset == 0


def test_a_follower_applies_the_leaders_markers(tmp_path):
    leader = open_log(tmp_path / "leader")
    leader.append(transactional_batch(A, 0, 0, [b"a", b"b"]))
    leader.append_marker(abort(A))
    leader.append(transactional_batch(B, 0, 0, [b"c"]))
    data = leader.read(0, 1 << 20).read_bytes()
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(data)
    assert follower.aborted_transactions(0, 4) == leader.aborted_transactions(0, 4) == [AbortedTxn(A, 0, 2, 3)]
    assert follower.last_stable_offset == 3


def test_compaction_drops_aborted_records_which_never_shadow_a_committed_value(tmp_path):
    config = TopicConfig.default(cleanup_policy="compact", segment_bytes=300, min_cleanable_dirty_ratio=0.01)
    manager = LogManager(tmp_path, clock=lambda: NOW_MS / 1000)
    plog = manager.create("t", 0, config)
    plog.append(transactional_batch(A, 0, 0, [b"committed"], keys=[b"k"]))
    plog.append_marker(commit(A))
    plog.append(transactional_batch(A, 0, 1, [b"aborted"], keys=[b"k"]))
    plog.append_marker(abort(A))
    for i in range(6):
        plog.append(encode_batch([b"y" * 40], keys=[b"other%d" % i]))
    plog.roll()
    LogCleaner(manager).clean(plog, NOW_MS)
    values = []
    for seg in plog.segments:
        for h in seg.iter_headers():
            if not h.is_control:
                values += [(r.key, r.value) for r in decode_records(seg.read_batch(h)) if r.key == b"k"]
    assert values == [(b"k", b"committed")]
