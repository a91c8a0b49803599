"""Helpers for tests against a `LocalCluster` (real ZooKeeper, several `pylog broker` processes):
the three-broker cluster with racks the replication and operations modules share (`racked_cluster`),
an acks=all idempotent producer thread that remembers every acknowledged key, metadata lookups
(leader, ISR) through confluent-kafka's admin client, a broker's /metrics, and the byte-identical-replicas
check."""
from __future__ import annotations

import contextlib
import hashlib
import threading
from pathlib import Path
from typing import Any, Iterator

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.launch.local_cluster import LocalCluster
from pylog.launch.local_zookeeper import LocalZooKeeper
from pylog.launch.process import BrokerProcess
from tests.support.broker_process import broker_metrics as one_broker_metrics
from tests.support.clients import unique_name
from tests.support.waiting import wait_for


SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 5,
    "group.initial.rebalance.delay.ms": 0,
    "zookeeper.session.timeout.ms": 2500,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "auto.leader.rebalance.enable": "false",
    "metrics.port": 0,             # each broker's /metrics on a port of its own (read from its log)
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",   # KIP-392
}
RACKS = {0: "zone-a", 1: "zone-b", 2: "zone-a"}   # broker.rack of each broker: replicas spread over both zones


@contextlib.contextmanager
def racked_cluster(zookeeper: LocalZooKeeper, root: Path, name: str) -> Iterator[LocalCluster]:
    """Three brokers with SETTINGS and RACKS in a chroot of their own, stopped on leaving."""
    c = LocalCluster(root, 3, SETTINGS, zk_connect=zookeeper.connect, chroot=f"/{unique_name(name)}",
                     launcher=lambda i, data, settings: BrokerProcess(data, settings={**settings,
                                                                                      "broker.rack": RACKS[i]}))
    try:
        c.start(timeout_s=120)         # started beside the suite's first Spark JVMs: the busiest minutes of a run
        yield c
    finally:
        c.close()


def cluster_admin(c: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap})


def cluster_meta(c: LocalCluster, topic: str, via: int | None = None) -> dict[int, Any]:
    """The partitions' metadata of `topic`, from broker `via` or any."""
    return partition_meta(c.broker(via).bootstrap if via is not None else c.bootstrap, topic)


def acks_all_producer(c: LocalCluster, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
                     "message.timeout.ms": 60000, **conf})


def broker_metrics(c: LocalCluster, broker_id: int, **labels: str) -> dict[str, float]:
    """The series of broker `broker_id`'s /metrics with exactly `labels` (none: the unlabelled ones)."""
    return one_broker_metrics(c.broker(broker_id), **labels)


def create_replicated(bootstrap: str, topic: str, partitions: int, rf: int = 3, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=config)], operation_timeout=15)[topic].result(20)


def partition_meta(bootstrap: str, topic: str) -> dict[int, Any]:
    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(topic, timeout=10)
    return dict(md.topics[topic].partitions)


def _meta_or_none(bootstrap: str, topic: str) -> dict[int, Any] | None:
    """partition_meta, or None when the lookup timed out: a broker that has just restarted holds client requests
    until the controller has spoken to it (broker.connection.CLUSTER_READY_WAIT_S), so a lookup that lands
    there says nothing yet; the waits below poll again instead of failing."""
    try:
        return partition_meta(bootstrap, topic)
    except KafkaException:
        return None


def leader(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's leader, once it has one (an election may be under way)."""
    def found() -> tuple[int] | None:         # a tuple: broker 0 is a leader too
        meta = _meta_or_none(bootstrap, topic)
        current = int(meta[partition].leader) if meta is not None and partition in meta else -1
        return (current,) if current >= 0 else None
    return wait_for(found, 15, f"a leader of {topic}-{partition}")[0]


def wait_full_isr(bootstrap: str, topic: str, partitions: int, replicas: int = 3, timeout_s: float = 30) -> None:
    def in_sync() -> bool:
        meta = _meta_or_none(bootstrap, topic)
        return meta is not None and len(meta) == partitions and \
            all(len(m.isrs) == replicas and m.leader >= 0 for m in meta.values())
    wait_for(in_sync, timeout_s, f"all of {topic}'s replicas in sync")


def log_bytes(c: LocalCluster, broker: int, topic: str, partition: int) -> bytes:
    """Every segment file of one replica, in offset order, as stored on that broker's disk."""
    d = Path(c.broker(broker).data_dir) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def assert_replicas_identical(c: LocalCluster, topic: str, partitions: int, timeout_s: float = 30,
                              brokers: tuple[int, ...] = (0, 1, 2)) -> None:
    """Wait until the replicas (on `brokers`) of each partition hold byte-identical logs."""
    for p in range(partitions):
        wait_for(lambda: len({hashlib.sha256(log_bytes(c, b, topic, p)).digest() for b in brokers}) == 1,
                 timeout_s, f"byte-identical replicas of {topic}-{p}")


class AckedProducer(threading.Thread):
    """An acks=all idempotent producer writing keys 0, 1, 2, ... round robin over the partitions until
    `finish()` (`conf` adds to or overrides its librdkafka settings); remembers which keys were acknowledged and every delivery error."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1, value: bytes = b"x" * 50,
                 pause_s: float = 0.002, **conf: Any) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "retry.backoff.ms": 50, "message.timeout.ms": 60000,
                                  "log_level": 0, **conf})
        self.topic, self.partitions, self.value, self.pause_s = topic, partitions, value, pause_s
        self.acked: set[int] = set()
        self.failed: list[str] = []
        self.sent = 0
        self._halt = threading.Event()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.add(int(msg.key()))
        else:
            self.failed.append(str(err))

    def run(self) -> None:
        while not self._halt.is_set():
            key = self.sent
            try:
                self.producer.produce(self.topic, key=str(key).encode(), value=self.value,
                                      partition=key % self.partitions, on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(self.pause_s)

    def acked_count(self) -> int:
        return len(self.acked)

    def halt(self) -> None:
        """Stop producing (what was sent is still delivered in the background)."""
        self._halt.set()
        self.join(10)

    def finish(self) -> None:
        """Stop producing and wait for every sent record's delivery report."""
        self.halt()
        assert self.producer.flush(60) == 0, "records still undelivered 60 s after the producer stopped"
