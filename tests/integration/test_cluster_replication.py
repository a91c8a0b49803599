"""Cluster mode end to end (issue 11): a real ZooKeeper and three real `pylog broker` processes.

Each test starts from the shared three-broker cluster of this module (ZooKeeper session timeout 4 s,
replica.lag.time.max.ms 1.5 s, min.insync.replicas 2) with real clients: confluent-kafka for
produce and consume, raw protocol requests where a test must address one broker.
"""
from __future__ import annotations

import datetime
import hashlib
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from broker.log.record_builder import Record, encode_batch
from broker.tools.local_cluster import LocalCluster
from broker.tools.local_zookeeper import LocalZooKeeper
from tests.support.clients import consume, unique_name
from tests.support.waiting import wait_for
from tests.support.wire import WireClient

SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 1500,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "auto.leader.rebalance.enable": "false",
}


@pytest.fixture(scope="module")
def cluster(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("cluster"), 3, SETTINGS, zk_connect=zookeeper.connect,
                     chroot=f"/{unique_name('replication')}")
    try:
        c.start()
        yield c
    finally:
        c.close()


def _admin(c: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap})


def _create(c: LocalCluster, topic: str, partitions: int = 1, rf: int = 3, **config: str) -> None:
    admin = _admin(c)
    admin.create_topics([NewTopic(topic, partitions, rf, config=config)], operation_timeout=15)[topic].result(20)


def _partition_meta(c: LocalCluster, topic: str, via: int | None = None) -> dict[int, Any]:
    bootstrap = c.broker(via).bootstrap if via is not None else c.bootstrap
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return dict(md.topics[topic].partitions)


def _leader(c: LocalCluster, topic: str, partition: int = 0) -> int:
    return int(_partition_meta(c, topic)[partition].leader)


def _log_bytes(c: LocalCluster, broker: int, topic: str, partition: int) -> bytes:
    d = Path(c.broker(broker).data_dir) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def _producer(c: LocalCluster, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
                     "message.timeout.ms": 60000, **conf})


def test_every_broker_serves_the_same_metadata_and_replicas_hold_identical_logs(cluster: LocalCluster) -> None:
    topic = unique_name("replicated")
    _create(cluster, topic, partitions=3)
    views = [_partition_meta(cluster, topic, via=b) for b in range(3)]
    for p in range(3):
        leaders = {v[p].leader for v in views}
        assert len(leaders) == 1 and leaders.pop() in (0, 1, 2)
        assert sorted(views[0][p].replicas) == [0, 1, 2]
    wait_for(lambda: all(sorted(_partition_meta(cluster, topic)[p].isrs) == [0, 1, 2] for p in range(3)),
             10, "every replica in sync")
    producer = _producer(cluster)
    acked: list[tuple[int, int]] = []
    for i in range(3000):
        producer.produce(topic, key=str(i).encode(), value=b"v%d" % i,
                         on_delivery=lambda err, msg: acked.append((msg.partition(), msg.offset())) if err is None
                         else pytest.fail(f"delivery failed: {err}"))
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == 3000
    got = consume(cluster.bootstrap, topic, range(3), 3000)
    assert sorted(int(m.key()) for m in got) == list(range(3000))
    for p in range(3):
        wait_for(lambda: len({hashlib.sha256(_log_bytes(cluster, b, topic, p)).digest() for b in range(3)}) == 1,
                 10, f"byte-identical replicas of {topic}-{p}")


def test_a_follower_refuses_produce_with_not_leader_or_follower(cluster: LocalCluster) -> None:
    topic = unique_name("notleader")
    _create(cluster, topic)
    leader = _leader(cluster, topic)
    follower = next(b for b in range(3) if b != leader)
    batch = encode_batch([Record(0, int(time.time() * 1000), None, b"x")])
    request = ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),))
    with WireClient("127.0.0.1", cluster.broker(follower).port) as wire:
        response = wire.request(request)
    assert response.responses[0].partition_responses[0].error_code == 6        # NOT_LEADER_OR_FOLLOWER
    with WireClient("127.0.0.1", cluster.broker(leader).port) as wire:
        response = wire.request(request)
    assert response.responses[0].partition_responses[0].error_code == 0


def test_replication_factor_above_the_live_brokers_is_refused(cluster: LocalCluster) -> None:
    topic = unique_name("toomany")
    with pytest.raises(KafkaException) as info:
        _create(cluster, topic, rf=4)
    assert info.value.args[0].code() == 38                                      # INVALID_REPLICATION_FACTOR
    assert "larger than available brokers: 3" in info.value.args[0].str()
