"""The broker against real Kafka clients: confluent-kafka (librdkafka 2.16) and kcat (librdkafka 2.0)."""
from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions

from tests.support.clients import admin, consume, create_topic, produce

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def pylog_broker(broker):
    """The module's one broker (tests/integration/conftest.py), not one per test: every test here makes
    topics (and groups) of its own and reads only those."""
    return broker


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_over_several_partitions_with_each_codec(pylog_broker, codec):
    topic = f"rt-{codec}"
    create_topic(pylog_broker.bootstrap, topic, partitions=4)
    records = [(f"k{i}".encode(), f"value-{i}-{codec}".encode() * 3) for i in range(2000)]
    placed = produce(pylog_broker.bootstrap, topic, records, **{"compression.type": codec, "acks": "all"})
    assert {p for p, _ in placed} == {0, 1, 2, 3}
    got = consume(pylog_broker.bootstrap, topic, range(4), len(records))
    assert sorted((m.key(), m.value()) for m in got) == sorted(records)
    # offsets are dense from 0 in every partition
    for p in range(4):
        offsets = sorted(m.offset() for m in got if m.partition() == p)
        assert offsets == list(range(len(offsets)))


def test_idempotent_producer_delivers_each_record_once_in_order(pylog_broker):
    create_topic(pylog_broker.bootstrap, "idem", partitions=1)
    values = [f"v{i}".encode() for i in range(5000)]
    placed = produce(pylog_broker.bootstrap, "idem", values, **{"enable.idempotence": True, "acks": "all",
                                                                  "max.in.flight.requests.per.connection": 5, "linger.ms": 1})
    assert [o for _, o in placed] == list(range(5000))
    got = consume(pylog_broker.bootstrap, "idem", [0], 5000)
    assert [m.value() for m in got] == values


def test_list_offsets_earliest_latest_and_by_time(pylog_broker):
    create_topic(pylog_broker.bootstrap, "times", partitions=1)
    t0 = int(time.time() * 1000) - 100_000
    p = Producer({"bootstrap.servers": pylog_broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce("times", value=f"{i}".encode(), timestamp=t0 + i * 1000)
        p.flush()  # one batch per record: the lookup must be exact inside batches too
    for i in range(10, 20):
        p.produce("times", value=f"{i}".encode(), timestamp=t0 + i * 1000)
    p.flush()
    c = Consumer({"bootstrap.servers": pylog_broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        assert c.get_watermark_offsets(TopicPartition("times", 0), timeout=10) == (0, 20)
        for i in (0, 3, 9, 10, 15, 19):
            [tp] = c.offsets_for_times([TopicPartition("times", 0, t0 + i * 1000)], timeout=10)
            assert tp.offset == i, f"timestamp of record {i}"
        [tp] = c.offsets_for_times([TopicPartition("times", 0, t0 + 3500)], timeout=10)
        assert tp.offset == 4
        [tp] = c.offsets_for_times([TopicPartition("times", 0, t0 + 10**9)], timeout=10)
        assert tp.offset == -1  # no record at or after that time: end of log
    finally:
        c.close()


def test_consumer_long_poll_returns_when_data_arrives(pylog_broker):
    create_topic(pylog_broker.bootstrap, "poll", partitions=1)
    c = Consumer({"bootstrap.servers": pylog_broker.bootstrap, "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 10000,
                  "fetch.min.bytes": 1})
    c.assign([TopicPartition("poll", 0, 0)])
    c.consume(1, 1.0)  # let the consumer settle into a long-poll fetch
    produced_at = []

    def later():
        time.sleep(1.0)
        produced_at.append(time.monotonic())
        produce(pylog_broker.bootstrap, "poll", [b"wake up"], **{"linger.ms": 0})

    t = threading.Thread(target=later)
    t.start()
    try:
        msgs = c.consume(1, 15.0)
        received = time.monotonic()
    finally:
        t.join()
        c.close()
    assert [m.value() for m in msgs] == [b"wake up"]
    assert received - produced_at[0] < 2.0, "the waiting fetch should return soon after the append, not at max wait"


def test_admin_topics_configs_partitions_and_delete_records(pylog_broker):
    a = admin(pylog_broker.bootstrap)
    create_topic(pylog_broker.bootstrap, "adm", partitions=2, config={"retention.ms": "3600000"})
    md = a.list_topics(timeout=10)
    assert len(md.topics["adm"].partitions) == 2
    # duplicate create → TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as e:
        create_topic(pylog_broker.bootstrap, "adm", partitions=2)
    assert e.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    # bad config → INVALID_CONFIG naming the key
    with pytest.raises(KafkaException) as e:
        create_topic(pylog_broker.bootstrap, "adm2", config={"segment.bytes": "banana"})
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG and "segment.bytes" in e.value.args[0].str()
    # describe configs shows the override as dynamic and the rest as defaults
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm")
    cfg = a.describe_configs([res])[res].result(timeout=10)
    assert cfg["retention.ms"].value == "3600000" and not cfg["retention.ms"].is_default
    assert cfg["segment.bytes"].value == "1073741824" and cfg["segment.bytes"].is_default
    # incremental alter
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    res2 = ConfigResource(ConfigResource.Type.TOPIC, "adm", incremental_configs=[
        ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    a.incremental_alter_configs([res2])[res2].result(timeout=10)
    cfg = a.describe_configs([res])[res].result(timeout=10)
    assert cfg["retention.bytes"].value == "1000000" and cfg["retention.ms"].is_default
    # create partitions
    a.create_partitions([NewPartitions("adm", 5)])["adm"].result(timeout=10)
    assert len(a.list_topics(timeout=10).topics["adm"].partitions) == 5
    # delete records advances the log start offset
    produce(pylog_broker.bootstrap, "adm", [b"x"] * 10, partition=0)
    from confluent_kafka import TopicPartition as TP
    fut = a.delete_records([TP("adm", 0, 7)])
    [(tp, f)] = fut.items()
    assert f.result(timeout=10).low_watermark == 7
    c = Consumer({"bootstrap.servers": pylog_broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    assert c.get_watermark_offsets(TP("adm", 0), timeout=10) == (7, 10)
    c.close()
    # a preferred leader election: the embedded broker already leads every partition (Kafka's answer)
    from confluent_kafka import ElectionType
    elected = a.elect_leaders(ElectionType.PREFERRED, [TP("adm", 0), TP("nope", 0)]).result(timeout=10)
    assert {tp.topic: err.code() for tp, err in elected.items()} == {
        "adm": KafkaError.ELECTION_NOT_NEEDED, "nope": KafkaError.UNKNOWN_TOPIC_OR_PART}
    # delete topic
    a.delete_topics(["adm"], operation_timeout=10)["adm"].result(timeout=10)
    deadline = time.time() + 10
    while "adm" in a.list_topics(timeout=10).topics and time.time() < deadline:
        time.sleep(0.1)
    assert "adm" not in a.list_topics(timeout=10).topics


def test_unknown_topic_is_an_error_when_auto_create_is_off(broker_factory):
    b = broker_factory(settings={"auto.create.topics.enable": "false"})
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 3000})
    errors = []
    p.produce("nope", b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._MSG_TIMED_OUT)


def test_auto_create_on_metadata_uses_num_partitions(broker_factory):
    b = broker_factory(settings={"num.partitions": 3})
    produce(b.bootstrap, "auto", [b"a", b"b"])
    assert len(admin(b.bootstrap).list_topics(timeout=10).topics["auto"].partitions) == 3


def test_kcat_produces_consumes_and_lists_metadata(pylog_broker):
    create_topic(pylog_broker.bootstrap, "kc", partitions=2)
    lines = "\n".join(f"key{i}:line {i}" for i in range(100)) + "\n"
    subprocess.run(["kcat", "-P", "-b", pylog_broker.bootstrap, "-t", "kc", "-K:", "-z", "gzip"], input=lines.encode(),
                   check=True, timeout=30)
    out = subprocess.run(["kcat", "-C", "-b", pylog_broker.bootstrap, "-t", "kc", "-o", "beginning", "-e", "-q",
                          "-f", "%k=%s\n"], capture_output=True, check=True, timeout=30).stdout.decode()
    assert sorted(out.splitlines()) == sorted(f"key{i}=line {i}" for i in range(100))
    md = json.loads(subprocess.run(["kcat", "-L", "-J", "-b", pylog_broker.bootstrap], capture_output=True, check=True,
                                   timeout=30).stdout)
    [t] = [t for t in md["topics"] if t["topic"] == "kc"]
    assert len(t["partitions"]) == 2
    # and confluent-kafka reads what kcat wrote
    got = consume(pylog_broker.bootstrap, "kc", [0, 1], 100)
    assert len(got) == 100


def test_log_append_time_topic_stamps_broker_time(pylog_broker):
    create_topic(pylog_broker.bootstrap, "lat", config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": pylog_broker.bootstrap})
    p.produce("lat", b"a", timestamp=1000)
    assert p.flush(10) == 0
    [m] = consume(pylog_broker.bootstrap, "lat", [0], 1)
    ts_type, ts = m.timestamp()
    assert ts_type == 2  # TIMESTAMP_LOG_APPEND_TIME
    assert before - 1000 <= ts <= int(time.time() * 1000) + 1000


@pytest.mark.parametrize("reset, expected", [("earliest", [b"r0", b"r1", b"r2"]), ("latest", [b"r3"])])
def test_an_out_of_range_position_makes_librdkafka_apply_auto_offset_reset(pylog_broker, reset, expected):
    """Issue 12: the broker once answered OFFSET_OUT_OF_RANGE with a null record set, which librdkafka
    cannot parse, so it retried forever and auto.offset.reset never fired. Kafka sends empty records."""
    topic = f"reset-{reset}"
    create_topic(pylog_broker.bootstrap, topic)
    produce(pylog_broker.bootstrap, topic, [b"r0", b"r1", b"r2"])
    c = Consumer({"bootstrap.servers": pylog_broker.bootstrap, "group.id": f"g-{reset}", "enable.auto.commit": False,
                  "auto.offset.reset": reset})
    try:
        c.assign([TopicPartition(topic, 0, 1000)])     # far past the end
        got: list[bytes] = []
        started = time.monotonic()
        sent_after = False
        while len(got) < len(expected) and time.monotonic() < started + 20:
            if reset == "latest" and not sent_after and time.monotonic() > started + 3:
                produce(pylog_broker.bootstrap, topic, [b"r3"])   # reset to the end: only what comes next
                sent_after = True
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
        assert got == expected
    finally:
        c.close()
