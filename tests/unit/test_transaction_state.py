"""The transaction coordinator's pure parts: TxnMetadata's transitions (Kafka's TransactionMetadata rules),
and `__transaction_state` records in Kafka's byte format (the layout Kafka 3.9 writes, checked byte by byte)."""
from __future__ import annotations

import struct

import pytest

from broker.transactions.log_records import decode_key, decode_value, encode_key, encode_value, partition_for
from broker.transactions.metadata import MAX_EPOCH, TxnMetadata, TxnState
from kafka_protocol.errors import ErrorCode

NOW = 1_700_000_000_000


def fresh(epoch: int = -1) -> TxnMetadata:
    return TxnMetadata("app-1", 42, epoch, 60_000, TxnState.EMPTY, last_update_ms=NOW)


def test_a_new_producer_gets_epoch_0_and_each_restart_the_next():
    m = fresh().init_producer(60_000, None, NOW)
    assert isinstance(m, TxnMetadata) and (m.producer_id, m.producer_epoch, m.state) == (42, 0, TxnState.EMPTY)
    again = m.init_producer(30_000, None, NOW + 1)
    assert isinstance(again, TxnMetadata) and (again.producer_epoch, again.timeout_ms) == (1, 30_000)


def test_kip360_a_producer_bumps_its_own_epoch_and_its_retry_gets_the_same_answer():
    m = fresh(5)
    bumped = m.init_producer(60_000, 5, NOW)
    assert isinstance(bumped, TxnMetadata) and (bumped.producer_epoch, bumped.last_producer_epoch) == (6, 5)
    retried = bumped.init_producer(60_000, 5, NOW)          # the answer was lost: the same epoch again
    assert isinstance(retried, TxnMetadata) and retried.producer_epoch == 6
    assert bumped.init_producer(60_000, 3, NOW) == ErrorCode.producer_fenced


def test_a_transaction_goes_ongoing_prepared_and_complete_keeping_its_start():
    m = fresh(0).add_partitions(frozenset({("t", 0)}), NOW)
    assert (m.state, m.start_ms) == (TxnState.ONGOING, NOW)
    m = m.add_partitions(frozenset({("t", 1)}), NOW + 5)
    assert m.partitions == {("t", 0), ("t", 1)} and m.start_ms == NOW
    prepared = m.prepare_end(True, NOW + 9)
    assert prepared.state == TxnState.PREPARE_COMMIT and prepared.partitions == m.partitions
    done = prepared.complete(NOW + 10)
    assert (done.state, done.partitions, done.start_ms) == (TxnState.COMPLETE_COMMIT, frozenset(), NOW)
    nxt = done.add_partitions(frozenset({("t", 2)}), NOW + 20)
    assert nxt.start_ms == NOW + 20                           # a new transaction starts its own clock


def test_a_fencing_abort_bumps_the_epoch_but_never_past_the_maximum():
    m = fresh(7).add_partitions(frozenset({("t", 0)}), NOW)
    fenced = m.prepare_end(False, NOW, epoch=m.fenced_epoch())
    assert (fenced.state, fenced.producer_epoch) == (TxnState.PREPARE_ABORT, 8)
    top = fresh(MAX_EPOCH)
    assert top.fenced_epoch() == MAX_EPOCH and top.epoch_exhausted
    rotated = fresh(MAX_EPOCH - 1).rotate_producer_id(99, 60_000, NOW, recovering=False)
    assert (rotated.producer_id, rotated.producer_epoch) == (99, 0)


def test_state_names_are_kafkas():
    assert [s.kafka_name for s in TxnState] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                                "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert TxnState.from_kafka_name("prepareabort") == TxnState.PREPARE_ABORT
    assert TxnState.from_kafka_name("Bogus") is None


def test_records_are_kafkas_transaction_log_format():
    m = TxnMetadata("app-1", 42, 3, 60_000, TxnState.ONGOING, frozenset({("b", 1), ("a", 0), ("a", 2)}), NOW, NOW + 1)
    key = encode_key("app-1")
    assert key == struct.pack(">hh", 0, 5) + b"app-1"
    value = encode_value(m)
    expected = (struct.pack(">hqhib", 0, 42, 3, 60_000, 1) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", NOW + 1, NOW))
    assert value == expected
    assert decode_key(key) == "app-1"
    back = decode_value("app-1", value)
    assert back == m


def test_unknown_versions_are_refused():
    with pytest.raises(ValueError):
        decode_key(struct.pack(">hh", 1, 1) + b"x")
    with pytest.raises(ValueError):
        decode_value("x", struct.pack(">hqhib", 7, 1, 0, 1, 0))


def test_a_transactional_id_lands_on_kafkas_partition():
    # Kafka: Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions
    assert partition_for("app-1", 50) == abs(hash_java("app-1")) % 50


def hash_java(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
