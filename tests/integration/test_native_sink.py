"""The sink's native path against a real pylog broker: the Rust encoder and the own Produce client.

Each test writes with `native_sink.NativeTaskProducer` exactly as a Spark task does and reads back
with confluent-kafka. Covers idempotent retries (a broker killed and restarted mid-write, a batch
resent after its acknowledgement was lost: nothing duplicated, nothing lost, order kept per
partition) and the errors a user sees (they name the topic-partition and Kafka's error).
"""
from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from sparklog.kafka_client import LATEST, ClientConfig, KafkaClient
from sparklog.native_sink import NativeTaskProducer
from sparklog.produce_client import ProduceError, ProducerConfig
from sparklog.record_encoder import Columns, encode
from tests.support.clients import consume, create_topic


def _batch(start: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([f"k{i % 7}" for i in range(start, start + n)]),
                                       pa.array([f"v{i:06d}" for i in range(start, start + n)])], ["key", "value"])


def test_a_broker_killed_mid_write_and_a_lost_acknowledgement_duplicate_nothing(broker_factory):
    broker = broker_factory()
    bs, topic = broker.bootstrap, "restart"
    create_topic(bs, topic, 2)
    sink = NativeTaskProducer(topic, ProducerConfig(bs, batch_bytes=2_000, retry_backoff_ms=50))
    for i in range(10):
        sink.send_batch(_batch(i * 500, 500))
    broker.kill()
    threading.Timer(1.0, broker.start).start()
    for i in range(10, 20):                      # the first of these retries until the broker is back
        sink.send_batch(_batch(i * 500, 500))
    # an acknowledgement lost: the same batch (same producer id, epoch and sequence) arrives again
    c = sink.client
    seq = c.take_sequence(topic, 0, 0)
    one = _batch(10_000, 1)
    (data, n), = encode(Columns.from_arrays(one.column(1), one.column(0)), None, sink.settings, c.producer_id,
                        c.producer_epoch, seq)
    c.take_sequence(topic, 0, 1)
    c.enqueue(topic, 0, data, n)
    c.enqueue(topic, 0, data, n)
    c.flush()
    sink.close()
    ends = KafkaClient(ClientConfig(bs))
    assert ends.list_offset(topic, 0, LATEST) + ends.list_offset(topic, 1, LATEST) == 10_001   # nothing twice
    ends.close()
    got = consume(bs, topic, [0, 1], 10_001, timeout=20)
    assert sorted(m.value().decode() for m in got) == [f"v{i:06d}" for i in range(10_001)]   # nothing lost
    for p in (0, 1):                                                          # order kept per partition
        mine = [m.value() for m in got if m.partition() == p]
        assert mine == sorted(mine)


def test_errors_name_the_topic_partition_and_kafkas_error(broker_factory):
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "small", 1, {"max.message.bytes": "1000"})
    sink = NativeTaskProducer("small", ProducerConfig(bs))
    with pytest.raises(ProduceError, match=r"small-0 failed: the broker refused 1 record\(s\): MESSAGE_TOO_LARGE"):
        sink.send_batch(pa.RecordBatch.from_arrays([pa.array([b"x" * 5000])], ["value"]))
    sink.close()
    absent = NativeTaskProducer("nope", ProducerConfig(bs, allow_auto_create=False))
    with pytest.raises(ProduceError, match=r"topic 'nope' does not exist .*allow.auto.create.topics=false.*"
                                           r"pylog topics create nope"):
        absent.send_batch(_batch(0, 1))
    absent.close()
    bad = NativeTaskProducer("small", ProducerConfig(bs))
    with pytest.raises(ProduceError, match=r"small.*Invalid partition given with record: 3 is not in the range \[0...1\)"):
        bad.send_batch(pa.RecordBatch.from_arrays([pa.array([b"v"]), pa.array([3], pa.int32())], ["value", "partition"]))
    bad.close()


def test_a_missing_topic_is_created_as_kafkas_producer_asks_or_named_in_seconds(broker_factory):
    import time

    allowing = broker_factory()
    sink = NativeTaskProducer("created-on-use", ProducerConfig(allowing.bootstrap))
    sink.send_batch(_batch(0, 10))
    sink.close()
    assert sorted(m.value() for m in consume(allowing.bootstrap, "created-on-use", [0], 10)) == \
        sorted(f"v{i:06d}".encode() for i in range(10))
    refusing = broker_factory(settings={"auto.create.topics.enable": "false"})
    sink = NativeTaskProducer("absent", ProducerConfig(refusing.bootstrap))
    started = time.monotonic()
    with pytest.raises(ProduceError, match=r"topic 'absent' does not exist on .* the broker does not create topics "
                                           r"on use \(auto.create.topics.enable=false\): create it first"):
        sink.send_batch(_batch(0, 1))
    assert time.monotonic() - started < 10
    sink.close()
