"""Tiered storage (KIP-405) against Apache Kafka 3.9's own: the same records, in the same batches, on a pylog broker
tiering to a directory and on a Kafka broker tiering through LocalTieredStorage (the RemoteStorageManager Kafka ships
for its tests, from the kafka-storage test jar; segments in a local directory, metadata in __remote_log_metadata).

Once both have uploaded every closed segment and deleted the local copies local.retention.bytes allows, the same
ListOffsets requests (v9: earliest, earliest local, latest tiered, latest, times in the bucket and on the disk)
get the same answers, raw Fetch requests (v12) for offsets in the bucket get the same partition fields and the same
record batches byte for byte, and a consumer reading from offsets that lie only in the bucket gets the same records
from both. The max timestamp (-3) is the one deliberate difference: Kafka 3.9 ignores the bucket there (KAFKA-17552).
"""
from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.types import TopicName

from peers.kafka import FUNCTIONAL_JVM, KafkaBroker, local_tiered_storage
from kafka_protocol.record_batch import whole_batches_length
from pylog.launch.process import BrokerProcess
from tests.support.differential import Pair

pytestmark = pytest.mark.timeout(300)

RECORDS = 1500
LATE, LATE_S = 100, 9000      # record 100 carries the largest timestamp: the max timestamp lies in the bucket
TOPIC = "tiered"
# one-record batches, so that both brokers hold the same batches and roll their segments at the same offsets
PRODUCER = {"linger.ms": 0, "batch.num.messages": 1, "enable.idempotence": False, "acks": "all"}
TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "32768", "local.retention.bytes": "40000"}


def _list_offsets(timestamp: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
        name=TopicName(TOPIC), partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                timestamp=timestamp),)),))


def _answer(pair: Pair, name: str, timestamp: int) -> tuple[int, int, int]:
    p = pair.send(name, _list_offsets(timestamp)).topics[0].partitions[0]
    return int(p.error_code.value), int(p.offset), int(p.timestamp)


def _local_start(data_dir: Path) -> int:
    return min(int(f.stem) for f in (data_dir / f"{TOPIC}-0").glob("*.log"))


def _read(bootstrap: str, start: int, count: int) -> list[tuple[int, Any, Any, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "oracle", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, start)])
    out: list[tuple[int, Any, Any, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
    finally:
        c.close()
    return out


@pytest.fixture(scope="module")
def tiered_pair(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("tiered-oracle")
    (root / "rsm").mkdir()
    kafka = KafkaBroker(root / "kafka", settings={**local_tiered_storage(root / "rsm"),
                                                  "auto.create.topics.enable": "false"},
                        jvm=FUNCTIONAL_JVM).start()
    pylog = BrokerProcess(root / "pylog", settings={
        "remote.log.storage.system.enable": "true", "remote.log.storage.url": str(root / "pylog-remote"),
        "remote.log.manager.task.interval.ms": 500, "log.retention.check.interval.ms": 500,
        "auto.create.topics.enable": "false"}).start()
    try:
        t0 = int(time.time() * 1000) - 3_600_000
        for broker in (pylog, kafka):
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIG)])[TOPIC].result(30)
            producer = Producer({"bootstrap.servers": broker.bootstrap, **PRODUCER})
            for i in range(RECORDS):
                producer.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i:05d}".encode() + b"x" * 90, partition=0,
                                 timestamp=t0 + (LATE_S if i == LATE else i) * 1000)
            assert producer.flush(60) == 0
        pair = Pair(pylog.port, kafka.port)
        kafka_dir = kafka.workdir / "logs"
        deadline = time.monotonic() + 120       # Kafka's remote log manager copies a segment a pass
        while time.monotonic() < deadline:
            if _local_start(pylog.data_dir) > 900 and _local_start(kafka_dir) > 900 and \
                    _answer(pair, "pylog", -4) == _answer(pair, "kafka", -4):
                break
            time.sleep(0.5)
        yield pair, pylog, kafka, t0
        pair.close()
    finally:
        pylog.close()
        kafka.close()        # the oracle's shutdown time is not under test: killed after 20 s


@pytest.mark.parametrize("what,timestamp", [("earliest", -2), ("earliest local (KIP-405)", -4),
                                            ("latest tiered (KIP-1005)", -5), ("latest", -1),
                                            ("a time in the bucket", 500),
                                            ("a time on the disk", 1450),
                                            ("a time only the late record in the bucket reaches", 5000),
                                            ("after every record", 10000)])
def test_list_offsets_of_a_tiered_partition_answer_as_kafka(tiered_pair, what, timestamp):
    pair, _, _, t0 = tiered_pair
    ts = t0 + timestamp * 1000 if timestamp >= 0 else timestamp
    assert _answer(pair, "pylog", ts) == _answer(pair, "kafka", ts), what


def test_the_max_timestamp_in_the_bucket_is_found_where_kafka_3_9_looks_only_at_the_disk(tiered_pair):
    """The one deliberate difference: KIP-734's MAX_TIMESTAMP is the record with the largest timestamp in the
    partition. Kafka 3.9 looks only at the local segments (KAFKA-17552, fixed after 3.9) and names the last record;
    pylog names record LATE, in the bucket."""
    pair, _, _, t0 = tiered_pair
    assert _answer(pair, "pylog", -3) == (0, LATE, t0 + LATE_S * 1000)
    assert _answer(pair, "kafka", -3) == (0, RECORDS - 1, t0 + (RECORDS - 1) * 1000)


def test_a_consumer_reads_the_same_records_from_the_bucket(tiered_pair):
    _, pylog, kafka, _ = tiered_pair
    for start in (0, 777):
        assert _read(pylog.bootstrap, start, 500) == _read(kafka.bootstrap, start, 500)


def _fetch(offset: int, partition_max: int) -> FetchRequest:
    return FetchRequest(cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=10), min_bytes=0,
                        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, topics=(
                            FetchTopic(topic=TopicName(TOPIC), partitions=(FetchPartition(
                                partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                                log_start_offset=-1, partition_max_bytes=partition_max),)),),
                        forgotten_topics_data=(), rack_id="")


@pytest.mark.parametrize("offset,partition_max", [(0, 1 << 16), (777, 1 << 16), (777, 10)],
                         ids=["from-the-start", "in-the-bucket", "limit-below-one-batch"])
def test_a_fetch_of_offsets_in_the_bucket_answers_as_kafka(tiered_pair, offset, partition_max):
    """The partition's fields (error, high watermark, last stable offset, log start offset, aborted transactions,
    preferred read replica) are Kafka's, and the whole batches both return are the same bytes (one-record batches
    of the same producer calls). Kafka may end its answer with a partial batch, which clients drop; a limit below
    one batch still returns that first batch on both (KIP-74)."""
    pair, _, _, _ = tiered_pair
    p, k = (pair.send(name, _fetch(offset, partition_max)).responses[0].partitions[0] for name in ("pylog", "kafka"))
    fields = ("error_code", "high_watermark", "last_stable_offset", "log_start_offset", "aborted_transactions",
              "preferred_read_replica")
    assert {f: getattr(p, f) for f in fields} == {f: getattr(k, f) for f in fields}
    assert int(p.high_watermark) == RECORDS and int(p.log_start_offset) == 0
    mine, theirs = bytes(p.records or b""), bytes(k.records or b"")
    mine, theirs = mine[:whole_batches_length(mine)], theirs[:whole_batches_length(theirs)]
    common = min(len(mine), len(theirs))
    assert common > 0 and mine[:common] == theirs[:common]
    if partition_max < 100:
        assert len(mine) == len(theirs) == common                     # exactly the first batch on both
