"""Exactly-once across partition leader changes (issue 11): `pylog job stream_to_delta` reads a
replicated topic of a real three-broker cluster (ZooKeeper, replication factor 3, min.insync.replicas 2)
while an acks=all idempotent producer writes to it and partition leaders are killed with SIGKILL and
restarted. The source's executors must follow the leaders (NOT_LEADER_OR_FOLLOWER, lost connections),
the driver must list offsets from the new leaders, and the Delta table must end with every acknowledged
record exactly once and the topic's end offsets committed in its log.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Iterator

import pytest
from deltalake import DeltaTable

from pylog.launch.local_cluster import LocalCluster
from pylog.launch.local_zookeeper import LocalZooKeeper
from connectors.offset_manager import OffsetManager, end_offsets
from tests.support.clients import unique_name
from tests.support.cluster import AckedProducer, create_replicated, leader, wait_full_isr
from tests.support.jobs import kill, run_job, table_versions
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "zookeeper.session.timeout.ms": 2500,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "auto.leader.rebalance.enable": "false",
}
PARTITIONS = 3


@pytest.fixture
def cluster(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", 3, SETTINGS, zk_connect=zookeeper.connect,
                     chroot=f"/{unique_name('e2e-leaders')}")
    try:
        c.start()
        yield c
    finally:
        c.close()


def _tail(log: Path, lines: int = 80) -> str:
    """The job's last output lines, Java stack frames left out."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join([ln for ln in text.splitlines() if not ln.lstrip().startswith("at ")][-lines:])


def _kill_leader_and_restart(cluster: LocalCluster, topic: str, partition: int, producer: AckedProducer,
                             table: Path) -> int:
    """SIGKILL the leader of `partition` once the job has committed since the last change; restart it once
    the producer got acks from the new leaders; returns the victim."""
    victim = leader(cluster.bootstrap, topic, partition)
    cluster.kill(victim)
    acked, versions = producer.acked_count(), table_versions(table)
    wait_for(lambda: producer.acked_count() > acked + 200, 60, f"acks after killing broker {victim}")
    wait_for(lambda: table_versions(table) > versions, 120, f"a Delta commit after killing broker {victim}")
    cluster.restart(victim)
    return victim


def test_stream_to_delta_keeps_exactly_once_across_leader_kills(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = unique_name("events")
    create_replicated(cluster.bootstrap, topic, PARTITIONS)
    wait_full_isr(cluster.bootstrap, topic, PARTITIONS)
    table = tmp_path / "table"
    settings = {"source.bootstrap.servers": cluster.bootstrap, "source.topics": topic, "sink.table.path": table,
                "sink.checkpoint.location": tmp_path / "ckpt", "sink.app.id": "leaders", "group.mirror": "",
                "value.schema": "", "trigger": "processing-time=1 second",
                "source.max.offsets.per.trigger": 2000}
    producer = AckedProducer(cluster.bootstrap, topic, PARTITIONS)
    producer.start()
    job_log = tmp_path / "job.log"
    job = run_job("stream_to_delta", settings, output=job_log)
    try:
        wait_for(lambda: job.poll() is not None or table_versions(table) > 2, 180, "the job's first commits")
        assert job.poll() is None, _tail(job_log)
        first = _kill_leader_and_restart(cluster, topic, 0, producer, table)
        wait_full_isr(cluster.bootstrap, topic, PARTITIONS, timeout_s=90)   # a restarted broker catches up
        # the second kill: the leader of another partition when the first victim leads nothing else
        second = _kill_leader_and_restart(cluster, topic, 1, producer, table)
        wait_full_isr(cluster.bootstrap, topic, PARTITIONS, timeout_s=90)
        producer.finish()
        ends = end_offsets(cluster.bootstrap, [topic])
        assert sum(ends.values()) == producer.sent
        wait_for(lambda: job.poll() is not None or OffsetManager(str(table), "leaders").committed() == ends, 120,
                 "the job catching up with the topic's end")
        assert job.poll() is None, _tail(job_log)
        job.send_signal(signal.SIGTERM)
        assert job.wait(60) == 0, _tail(job_log)
    except BaseException:
        print(_tail(job_log))       # shown with the failure
        raise
    finally:
        producer.halt()
        if job.poll() is None:
            kill(job)
    assert not producer.failed, producer.failed[:3]
    assert len(producer.acked) == producer.sent, "every record was acknowledged"
    rows = DeltaTable(str(table)).to_pyarrow_table(columns=["topic", "partition", "offset", "key"])
    coords = list(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist()))
    keys = [int(k) for k in rows.column("key").to_pylist()]
    assert len(coords) == len(set(coords)), f"{len(coords) - len(set(coords))} records written twice"
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} keys written twice"
    assert set(keys) == producer.acked, (f"lost {len(producer.acked - set(keys))} acknowledged records, "
                                         f"{len(set(keys) - producer.acked)} unknown ones")
    assert set(coords) == {(p, o) for (_, p), end in ends.items() for o in range(end)}
    assert OffsetManager(str(table), "leaders").committed() == ends
    assert {first, second} <= {0, 1, 2}
