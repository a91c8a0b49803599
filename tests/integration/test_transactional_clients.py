"""Transactions (KIP-98) with librdkafka's transactional producer (confluent-kafka) against a real broker.

What a user of Kafka's exactly-once does: commit and abort across partitions (all or nothing),
consume-transform-produce with the input offsets committed in the transaction, a second producer with
the same transactional id fencing the first, a transaction that outlives its timeout (aborted by the
broker, its producer fenced, as Kafka does), a producer bumping its own epoch (KIP-360), an empty
transaction aborted, and the
broker killed with kill -9 while a transaction is open: after the restart the transaction is aborted
on its timeout, read_committed never sees it and read_uncommitted sees its records and the marker.
The wire-level answers are compared with Apache Kafka's in tests/conformance/test_transactions.py.
"""
from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

from pylog.launch.process import BrokerProcess
from tests.support.clients import create_topic, unique_name
from tests.support.wire import WireClient

FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
                 "group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", settings=FAST_TIMEOUTS).start()
    try:
        yield process
    finally:
        process.close()


def producer(bootstrap: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(20)
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 15.0) -> list[tuple[int, int, bytes]]:
    """Every record of `topic` visible under `isolation`: (partition, offset, value), read to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("reader"), "isolation.level": isolation,
                  "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[int, int, bytes]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:     # _PARTITION_EOF
                    at_end.add(m.partition())
                    continue
                raise KafkaException(m.error())
            at_end.discard(m.partition())
            out.append((m.partition(), m.offset(), m.value()))
        assert len(at_end) == partitions, f"did not reach the end of {topic}"
        return sorted(out)
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("wm")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def values(records: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _, _, v in records)


def test_commit_and_abort_are_all_or_nothing_across_partitions(txn_broker):
    bs, topic = txn_broker.bootstrap, unique_name("atomic")
    create_topic(bs, topic, partitions=3)
    p = producer(bs, unique_name("tx"))
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"committed-%d" % i, partition=i % 3)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"aborted-%d" % i, partition=i % 3)
    p.flush(20)
    p.abort_transaction(20)
    committed = read_all(bs, topic, 3, "read_committed")
    everything = read_all(bs, topic, 3, "read_uncommitted")
    assert values(committed) == sorted(b"committed-%d" % i for i in range(30))
    assert values(everything) == sorted([b"committed-%d" % i for i in range(30)] + [b"aborted-%d" % i for i in range(30)])
    # each partition: 10 committed, a commit marker, 10 aborted, an abort marker
    for partition in range(3):
        assert watermarks(bs, topic, partition) == (0, 22)
        offsets = [o for p_, o, _ in everything if p_ == partition]
        assert offsets == list(range(10)) + list(range(11, 21))


def test_an_open_transaction_holds_read_committed_back_and_an_empty_one_aborts(txn_broker):
    bs, topic = txn_broker.bootstrap, unique_name("open")
    create_topic(bs, topic)
    p = producer(bs, unique_name("tx"))
    p.begin_transaction()
    p.abort_transaction(20)                          # nothing was produced: still a clean abort
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush(20)
    assert read_all(bs, topic, 1, "read_committed") == []
    assert values(read_all(bs, topic, 1, "read_uncommitted")) == [b"open"]
    p.commit_transaction(20)
    assert values(read_all(bs, topic, 1, "read_committed")) == [b"open"]


def test_consume_transform_produce_commits_the_input_offsets_with_the_output(txn_broker):
    bs = txn_broker.bootstrap
    source, sink, group = unique_name("in"), unique_name("out"), unique_name("ctp")
    create_topic(bs, source)
    create_topic(bs, sink)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(20):
        plain.produce(source, value=b"%d" % i)
    plain.flush(20)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([source])
    p = producer(bs, unique_name("tx"))
    try:
        def transform(n: int, commit: bool) -> None:
            got: list[Any] = []
            deadline = time.monotonic() + 20
            while len(got) < n and time.monotonic() < deadline:
                got += [m for m in consumer.consume(n - len(got), 0.5) if not m.error()]
            assert len(got) == n
            p.begin_transaction()
            for m in got:
                p.produce(sink, value=b"x" + m.value())
            p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                          consumer.consumer_group_metadata(), 20)
            if commit:
                p.commit_transaction(20)
            else:
                p.abort_transaction(20)
                # rewind to the last committed offsets, as an application does after an abort
                for tp in consumer.committed(consumer.assignment(), 10):
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

        transform(10, commit=True)
        assert [tp.offset for tp in consumer.committed([TopicPartition(source, 0)], 10)] == [10]
        transform(5, commit=False)
        assert [tp.offset for tp in consumer.committed([TopicPartition(source, 0)], 10)] == [10]
        transform(10, commit=True)
        assert [tp.offset for tp in consumer.committed([TopicPartition(source, 0)], 10)] == [20]
    finally:
        consumer.close()
    out = values(read_all(bs, sink, 1, "read_committed"))
    assert out == sorted(b"x%d" % i for i in range(20))          # each input exactly once


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(txn_broker):
    bs, topic, txn_id = txn_broker.bootstrap, unique_name("fence"), unique_name("tx")
    create_topic(bs, topic)
    zombie = producer(bs, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(20)
    successor = producer(bs, txn_id)                 # aborts the zombie's open transaction
    with pytest.raises(KafkaException) as fenced:
        zombie.produce(topic, value=b"zombie-2")
        zombie.commit_transaction(20)
    assert fenced.value.args[0].fatal()
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(20)
    assert values(read_all(bs, topic, 1, "read_committed")) == [b"successor"]


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(txn_broker):
    """As Apache Kafka 3.9 with librdkafka (measured): the broker aborts the transaction at a bumped
    epoch, so the late producer's next send is fenced (fatal); a new instance carries on."""
    bs, topic, txn_id = txn_broker.bootstrap, unique_name("timeout"), unique_name("tx")
    create_topic(bs, topic)
    p = producer(bs, txn_id, **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, value=b"too-slow")
    p.flush(20)
    time.sleep(2.5)                                  # the broker aborts it (checks every 300 ms)
    with pytest.raises(KafkaException) as fenced:
        p.produce(topic, value=b"too-slow-2")
        p.commit_transaction(20)
    assert fenced.value.args[0].fatal()
    successor = producer(bs, txn_id)
    successor.begin_transaction()
    successor.produce(topic, value=b"in-time")
    successor.commit_transaction(20)
    assert values(read_all(bs, topic, 1, "read_committed")) == [b"in-time"]


def test_a_producer_bumps_its_own_epoch_and_a_lost_answer_is_answered_again(txn_broker):
    """KIP-360: InitProducerId naming the current producer id and epoch bumps the epoch; the same
    request again (its answer was lost) gets the same epoch; an older epoch is fenced."""
    txn_id = unique_name("tx")
    with WireClient("127.0.0.1", txn_broker.port) as c:
        def init(pid: int, epoch: int) -> tuple[str, int, int]:
            r = c.request(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout=timedelta(seconds=60),
                                                producer_id=pid, producer_epoch=epoch))
            return r.error_code.name, r.producer_id, r.producer_epoch

        _, pid, epoch = init(-1, -1)
        assert init(pid, epoch) == ("none", pid, epoch + 1)
        assert init(pid, epoch) == ("none", pid, epoch + 1)          # the retry of a lost answer
        assert init(pid, epoch + 1) == ("none", pid, epoch + 2)
        assert init(pid, epoch)[0] == "producer_fenced"


def describe(port: int, txn_id: str) -> Any:
    with WireClient("127.0.0.1", port) as c:
        return c.request(DescribeTransactionsRequest(transactional_ids=(txn_id,))).transaction_states[0]


def test_a_transaction_open_when_the_broker_is_killed_is_aborted_after_restart(tmp_path: Path):
    broker = BrokerProcess(tmp_path / "data", settings=FAST_TIMEOUTS).start()
    try:
        bs, topic, txn_id = broker.bootstrap, unique_name("killed"), unique_name("tx")
        create_topic(bs, topic, partitions=2)
        p = producer(bs, txn_id, **{"transaction.timeout.ms": 3000})
        p.begin_transaction()
        p.produce(topic, value=b"committed", partition=0)
        p.commit_transaction(20)
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, value=b"open-%d" % i, partition=i % 2)
        p.flush(20)
        assert describe(broker.port, txn_id).transaction_state == "Ongoing"
        broker.kill()
        del p
        broker.start()
        bs = broker.bootstrap
        assert describe(broker.port, txn_id).transaction_state in ("Ongoing", "PrepareAbort", "CompleteAbort")
        deadline = time.monotonic() + 20
        while describe(broker.port, txn_id).transaction_state != "CompleteAbort" and time.monotonic() < deadline:
            time.sleep(0.2)
        state = describe(broker.port, txn_id)
        assert state.transaction_state == "CompleteAbort"
        assert values(read_all(bs, topic, 2, "read_committed")) == [b"committed"]
        everything = read_all(bs, topic, 2, "read_uncommitted")
        assert values(everything) == sorted([b"committed"] + [b"open-%d" % i for i in range(4)])
        # partition 0: committed record, commit marker, two open records, then the abort marker
        assert [o for p_, o, _ in everything if p_ == 0] == [0, 2, 3]
        assert watermarks(bs, topic, 0) == (0, 5)
        assert watermarks(bs, topic, 1) == (0, 3)
        again = producer(bs, txn_id)                 # the id lives on with a bumped epoch
        assert describe(broker.port, txn_id).producer_epoch > state.producer_epoch
        again.begin_transaction()
        again.produce(topic, value=b"after", partition=1)
        again.commit_transaction(20)
        assert values(read_all(bs, topic, 2, "read_committed")) == [b"after", b"committed"]
    finally:
        broker.close()
