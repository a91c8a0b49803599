"""`pylog job stream_to_topic` killed with SIGKILL again and again, and run on a three-broker cluster whose
broker coordinating its transactions is killed twice: the output topic, read with read_committed, holds
every input record exactly once.

The first run is killed right after the exactly-once sink committed batch 1's transactions and before Spark
recorded the batch (the window where only the topic knows), the next four at random moments once the job
made progress; the last run catches up. A real `pylog job` process (its own Spark driver) against a real
broker; kills are SIGKILL to the job's process group. One of the suite's deliberate slow cases.
"""
from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

from kio.schema.list_transactions.v0.request import ListTransactionsRequest

from pylog.launch.local_cluster import LocalCluster
from tests.e2e.test_exactly_once_topic_sink import read_topic
from tests.support.clients import create_topic, produce, unique_name
from tests.support.cluster import create_replicated, wait_full_isr
from tests.support.jobs import finish, kill_loop, run_job
from tests.support.waiting import wait_for
from tests.support.wire import WireClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def batches_committed(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0


def test_stream_to_topic_survives_a_kill_loop_exactly_once(broker_factory, tmp_path):
    broker = broker_factory(settings={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    bs = broker.bootstrap
    create_topic(bs, "events", partitions=3)
    create_topic(bs, "events-out", partitions=2)
    total = 3000
    produce(bs, "events", [(b"k%d" % i, b"e%d" % i) for i in range(total)])
    checkpoint = tmp_path / "ckpt"
    settings = {"source.bootstrap.servers": bs, "source.topics": "events", "sink.topic": "events-out",
                "transform.sql": "SELECT key, concat(CAST(value AS STRING), '!') AS value FROM source",
                "sink.checkpoint.location": checkpoint, "source.max.offsets.per.trigger": 200,
                "sink.kafka.transaction.timeout.ms": 20000, "trigger": "available-now"}
    proc = run_job("stream_to_topic", settings, env={"PYLOG_FAULT_KILL_AFTER_TXN_COMMIT": "1"})
    proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL, "the fault killed the job after batch 1's transactions committed"

    def more_work() -> None:           # a run finished before its kill: the next one gets several batches
        nonlocal total
        produce(bs, "events", [(b"k%d" % i, b"e%d" % i) for i in range(total, total + 1500)])
        total += 1500

    kill_loop(lambda: run_job("stream_to_topic", settings), lambda: batches_committed(checkpoint), random.Random(11),
              1, 5, 2.0, more_work)
    finish(run_job("stream_to_topic", settings))
    got = read_topic(bs, "events-out", 2, "read_committed")
    assert len(got) == total, f"{len(got) - len(set(got))} duplicates, {total - len(set(got))} missing"
    assert got == sorted(b"e%d!" % i for i in range(total))


CLUSTER_SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "zookeeper.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 2000,
    "auto.leader.rebalance.enable": "false",
}


def job_coordinators(c: LocalCluster) -> set[int]:
    """The brokers coordinating a transactional id of the job (`stream_to_topic-...`), by ListTransactions."""
    found = set()
    for broker_id, b in c.brokers.items():
        if b.proc is None or b.proc.poll() is not None:
            continue
        try:
            with WireClient(b.host, b.port, timeout=5) as w:
                listed = w.request(ListTransactionsRequest(state_filters=(), producer_id_filters=()))
        except OSError:
            continue
        if listed is not None and any(t.transactional_id.startswith("stream_to_topic-")
                                      for t in listed.transaction_states):
            found.add(broker_id)
    return found


def test_stream_to_topic_is_exactly_once_while_its_coordinator_is_killed_twice(zookeeper, tmp_path):
    c = LocalCluster(tmp_path / "cluster", 3, CLUSTER_SETTINGS, zk_connect=zookeeper.connect,
                     chroot=f"/{unique_name('eo-cluster')}").start()
    try:
        bs = c.bootstrap
        create_replicated(bs, "events", 3)
        create_replicated(bs, "events-out", 2)
        wait_full_isr(bs, "events", 3)
        total = 4000
        produce(bs, "events", [(b"k%d" % i, b"e%d" % i) for i in range(total)], acks="all")
        checkpoint = tmp_path / "ckpt"
        settings = {"source.bootstrap.servers": bs, "source.topics": "events", "sink.topic": "events-out",
                    "transform.sql": "SELECT key, concat(CAST(value AS STRING), '!') AS value FROM source",
                    "sink.checkpoint.location": checkpoint, "source.max.offsets.per.trigger": 150,
                    "trigger": "available-now"}
        proc = run_job("stream_to_topic", settings, output=tmp_path / "job.log")
        for kill in range(2):
            done = batches_committed(checkpoint)
            coordinators = wait_for(lambda: proc.poll() is None and job_coordinators(c), 120,
                                    "the job's transactions to have a coordinator")
            victim = sorted(coordinators)[kill % len(coordinators)]
            c.kill(victim)
            wait_for(lambda: proc.poll() is not None or batches_committed(checkpoint) > done + 1, 120,
                     "the job to commit batches after the kill")
            c.restart(victim)
        runs = 1
        while proc.wait(timeout=300) != 0 and runs < 3:       # a run the kills failed is started again
            runs += 1
            proc = run_job("stream_to_topic", settings, output=tmp_path / "job.log")
        assert proc.returncode == 0, (tmp_path / "job.log").read_text()[-3000:]
        got = read_topic(bs, "events-out", 2, "read_committed")
        assert len(got) == total, f"{len(got) - len(set(got))} duplicates, {total - len(set(got))} missing"
        assert got == sorted(b"e%d!" % i for i in range(total))
    finally:
        c.close()
