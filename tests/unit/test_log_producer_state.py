"""Idempotent producers: duplicates, sequence gaps, epoch fencing, snapshots and rebuild after restart."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.batches import encode_batch, producer_batch
from broker.config import TopicConfig
from kafka_protocol.errors import DuplicateSequenceError, InvalidProducerEpochError, OutOfOrderSequenceError
from broker.log import PartitionLog
from broker.log.producer_state import ProducerStateManager
from kafka_protocol.record_batch import parse_header

PID = 4242
NOW_MS = 1_700_000_000_000


def open_log(tmp_path: Path, *, recover: bool = False, expiration_ms: int = 86_400_000, **cfg) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", "t", 0, TopicConfig.default(**cfg), recover=recover,
                        producer_id_expiration_ms=expiration_ms, clock=lambda: NOW_MS / 1000)


def test_a_retried_batch_is_a_duplicate_carrying_the_original_offset_and_nothing_is_appended(tmp_path):
    plog = open_log(tmp_path)
    plog.append(encode_batch([b"x"] * 7))
    first = plog.append(producer_batch(PID, 0, 0, n=3))
    plog.append(producer_batch(PID, 0, 3, n=2))
    size = plog.size_in_bytes()
    with pytest.raises(DuplicateSequenceError) as e:
        plog.append(producer_batch(PID, 0, 0, n=3))
    assert (e.value.base_offset, e.value.log_append_time) == (first.base_offset, -1) == (7, -1)
    assert (plog.log_end_offset, plog.size_in_bytes()) == (12, size)


def test_a_duplicate_on_a_log_append_time_topic_carries_the_original_append_time(tmp_path):
    plog = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    plog.append(producer_batch(PID, 0, 0), now_ms=777)
    with pytest.raises(DuplicateSequenceError) as e:
        plog.append(producer_batch(PID, 0, 0), now_ms=999)
    assert (e.value.base_offset, e.value.log_append_time) == (0, 777)


def test_only_the_last_five_batches_are_remembered(tmp_path):
    plog = open_log(tmp_path)
    for seq in range(6):
        plog.append(producer_batch(PID, 0, seq))
    with pytest.raises(DuplicateSequenceError):
        plog.append(producer_batch(PID, 0, 1))
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(producer_batch(PID, 0, 0))


def test_a_sequence_gap_is_out_of_order(tmp_path):
    plog = open_log(tmp_path)
    plog.append(producer_batch(PID, 0, 0, n=2))
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 2, got 3"):
        plog.append(producer_batch(PID, 0, 3))
    assert plog.append(producer_batch(PID, 0, 2)).base_offset == 2


def test_an_older_epoch_is_fenced(tmp_path):
    plog = open_log(tmp_path)
    plog.append(producer_batch(PID, 3, 0))
    with pytest.raises(InvalidProducerEpochError):
        plog.append(producer_batch(PID, 2, 1))


def test_a_new_epoch_must_start_at_sequence_zero(tmp_path):
    plog = open_log(tmp_path)
    plog.append(producer_batch(PID, 0, 0))
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(producer_batch(PID, 1, 5))
    plog.append(producer_batch(PID, 1, 0))
    plog.append(producer_batch(PID, 1, 1))


def test_an_unknown_producer_may_start_at_any_sequence(tmp_path):
    plog = open_log(tmp_path)
    plog.append(producer_batch(PID, 0, 17))
    plog.append(producer_batch(PID, 0, 18))


def test_sequences_wrap_from_int32_max_to_zero(tmp_path):
    plog = open_log(tmp_path)
    plog.append(producer_batch(PID, 0, 2**31 - 2, n=2))
    plog.append(producer_batch(PID, 0, 0))


def test_producers_are_independent_and_non_idempotent_batches_are_never_checked(tmp_path):
    plog = open_log(tmp_path)
    plog.append(producer_batch(1, 0, 0))
    plog.append(producer_batch(2, 0, 0))
    plog.append(encode_batch())
    plog.append(encode_batch())
    plog.append(producer_batch(1, 0, 1))


def test_several_batches_of_one_request_are_checked_in_order(tmp_path):
    plog = open_log(tmp_path)
    r = plog.append(producer_batch(PID, 0, 0, n=2) + producer_batch(PID, 0, 2, n=2))
    assert (r.base_offset, r.last_offset) == (0, 3)
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(producer_batch(PID, 0, 4) + producer_batch(PID, 0, 6))
    assert plog.log_end_offset == 4


@pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "crash"])
def test_duplicates_are_still_detected_after_a_restart(tmp_path, clean):
    plog = open_log(tmp_path, segment_bytes=400)
    for seq in range(8):
        plog.append(producer_batch(PID, 2, seq))
    assert len(plog.segments) > 1
    if clean:
        plog.close()
    again = open_log(tmp_path, recover=not clean, segment_bytes=400)
    with pytest.raises(DuplicateSequenceError) as e:
        again.append(producer_batch(PID, 2, 6))
    assert e.value.base_offset == 6
    with pytest.raises(InvalidProducerEpochError):
        again.append(producer_batch(PID, 1, 0))
    assert again.append(producer_batch(PID, 2, 8)).base_offset == 8


def test_state_is_rebuilt_from_the_log_when_there_is_no_snapshot(tmp_path):
    plog = open_log(tmp_path)
    for seq in range(3):
        plog.append(producer_batch(PID, 0, seq))
    plog.close()
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    again = open_log(tmp_path, recover=True)
    with pytest.raises(OutOfOrderSequenceError):
        again.append(producer_batch(PID, 0, 5))


def test_snapshots_are_named_by_offset_and_an_unreadable_one_is_ignored(tmp_path):
    plog = open_log(tmp_path)
    plog.append(producer_batch(PID, 0, 0))
    plog.close()
    snap = tmp_path / "t-0" / "00000000000000000001.snapshot"
    assert snap.exists()
    snap.write_bytes(b"{not json")
    again = open_log(tmp_path, recover=False)
    with pytest.raises(DuplicateSequenceError):        # rebuilt from the log instead
        again.append(producer_batch(PID, 0, 0))


def test_idle_producers_expire(tmp_path):
    plog = open_log(tmp_path, expiration_ms=1000)
    plog.append(producer_batch(PID, 0, 0), now_ms=NOW_MS)
    assert plog.expire_producers(NOW_MS + 1000) == 0
    assert plog.expire_producers(NOW_MS + 1001) == 1
    plog.append(producer_batch(PID, 0, 9), now_ms=NOW_MS + 2000)    # unknown again: accepted


def test_manager_check_without_update_changes_nothing(tmp_path):
    mgr = ProducerStateManager(tmp_path, 1000)
    h = parse_header(producer_batch(PID, 0, 0))
    mgr.check(h)
    assert mgr.producers == {}
    mgr.update(h, NOW_MS)
    with pytest.raises(DuplicateSequenceError):
        mgr.check(h)
