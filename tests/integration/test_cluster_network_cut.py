"""Cluster mode under a network partition (issue 11): a leader cut off the network, not killed.

Three real `pylog broker` processes and a real ZooKeeper; broker 2 runs in its own Linux network
namespace, joined to the others by a veth pair (tests/support/netns.py). Taking the link down leaves
the broker running and believing it leads, with its connections stalled rather than reset: the case
a kill or a freeze does not cover. ZooKeeper expires its session, the controller moves its
leaderships, producers carry on, and when the link comes back the broker rejoins as a follower and
drops what it wrote alone.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from pylog.launch.process import BrokerProcess
from pylog.launch.local_cluster import LocalCluster
from pylog.launch.local_zookeeper import LocalZooKeeper
from tests.support.clients import consume, unique_name
from tests.support.cluster import (AckedProducer, assert_replicas_identical, create_replicated, partition_meta,
                                   wait_full_isr)
from tests.support.netns import NamespacedBroker, NetworkNamespace
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
ISOLATED = 2
SETTINGS = {
    "allow.unauthenticated.remote.listeners": True,    # the veth addresses are not loopback; the test's own network
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "zookeeper.session.timeout.ms": 2500,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "auto.leader.rebalance.enable": "false",
}

# One acks=all record sent from inside the namespace straight to the isolated broker; prints the
# partition's error code, or "no answer" when the request times out.
_ISOLATED_PRODUCE = """
import datetime, sys, time
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafka_protocol.record_builder import Record, encode_batch
from tests.support.wire import WireClient
host, port, topic, partition = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
batch = encode_batch([Record(0, int(time.time() * 1000), b"-1", b"written while cut off")])
request = ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=3), topic_data=(
    TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=batch),)),))
try:
    with WireClient(host, port, timeout=15) as wire:
        print(int(wire.request(request).responses[0].partition_responses[0].error_code))
except OSError as e:
    print("no answer:", e)
"""


@pytest.fixture
def netns() -> Iterator[NetworkNamespace]:
    ns = NetworkNamespace()
    try:
        yield ns.create()
    finally:
        ns.close()


@pytest.fixture
def split_cluster(netns: NetworkNamespace, tmp_path: Path) -> Iterator[LocalCluster]:
    """Brokers 0 and 1 and ZooKeeper on the test's side of the veth pair, broker 2 behind it."""
    zookeeper = LocalZooKeeper(tmp_path / "zookeeper", host=netns.outer_ip)

    def launch(broker_id: int, data_dir: Path, settings: dict[str, object]) -> BrokerProcess:
        if broker_id == ISOLATED:
            return NamespacedBroker(netns, data_dir, settings)
        return BrokerProcess(data_dir, settings=settings, host=netns.outer_ip)

    cluster = LocalCluster(tmp_path, 3, SETTINGS, zk_connect=zookeeper.start(), launcher=launch)
    try:
        cluster.start()
        yield cluster
    finally:
        netns.heal()
        cluster.close()
        zookeeper.stop()


def _records_in(c: LocalCluster, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "pylog-tests-unused"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3))
    finally:
        consumer.close()


def _produce_from_inside(netns: NetworkNamespace, broker: BrokerProcess, topic: str, partition: int) -> str:
    done = subprocess.run(netns.command([sys.executable, "-c", _ISOLATED_PRODUCE, broker.host, str(broker.port),
                                         topic, str(partition)]), cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_leader_cut_off_the_network_loses_no_acknowledged_record_and_rejoins_after_healing(
        split_cluster: LocalCluster, netns: NetworkNamespace) -> None:
    c = split_cluster
    reachable = c.broker(0).bootstrap
    topic = unique_name("netcut")
    create_replicated(c.bootstrap, topic, 3)
    wait_full_isr(c.bootstrap, topic, 3)
    led = [p for p, m in partition_meta(c.bootstrap, topic).items() if m.leader == ISOLATED]
    assert led, "Kafka's assignment gives each of three brokers one of three partitions' leadership"
    cut_partition = led[0]

    def acked_on_cut_partition() -> int:
        return sum(1 for key in list(producer.acked) if key % 3 == cut_partition)

    # a request stalled on the cut link is given up after 5 s (librdkafka waits socket.timeout.ms, 60 s by
    # default) and retried on the partition's new leader
    producer = AckedProducer(c.bootstrap, topic, partitions=3, **{"socket.timeout.ms": 5000})
    producer.start()
    try:
        wait_for(lambda: acked_on_cut_partition() > 100, 30, "acks from the leader before the cut")
        netns.cut()
        try:
            wait_for(lambda: partition_meta(reachable, topic)[cut_partition].leader not in (-1, ISOLATED), 30,
                     f"a new leader of {topic}-{cut_partition} once broker {ISOLATED}'s session expired")
            before = acked_on_cut_partition()
            wait_for(lambda: acked_on_cut_partition() > before + 100, 40,
                     "acks=all on the new leader while the old one is cut off")
            answer = _produce_from_inside(netns, c.broker(ISOLATED), topic, cut_partition)
            # it appends, then waits for followers it cannot reach: REQUEST_TIMED_OUT (7), as Kafka answers
            assert answer != "0", "a leader cut off from its followers and ZooKeeper acknowledged an acks=all write"
        finally:
            netns.heal()
        wait_full_isr(reachable, topic, 3, timeout_s=60)
    finally:
        producer.finish()
    assert not producer.failed, producer.failed[:3]
    keys = [int(m.key()) for m in consume(c.bootstrap, topic, range(3), producer.sent, timeout=60)]
    assert -1 not in keys and _records_in(c, topic) == producer.sent, \
        "the write the isolated leader took alone survived its return"
    assert len(keys) == len(set(keys)), "a record was read twice"
    assert producer.acked <= set(keys), f"{len(producer.acked - set(keys))} acknowledged records were lost"
    assert len(producer.acked) == producer.sent
    assert_replicas_identical(c, topic, 3)
