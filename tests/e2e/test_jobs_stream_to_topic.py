"""`pylog job stream_to_topic` on a three-broker cluster, the job killed with SIGKILL five times and the broker
coordinating its transactions killed twice: the output topic, read with read_committed, holds every input
record exactly once.

The first run is killed right after the exactly-once sink committed batch 1's transactions and before Spark
recorded the batch (the window where only the topic knows); the next four, each given three batches of new
input, at a random moment after a random 1-2 of them; during two of those runs the broker coordinating one
of the job's transactional ids is killed (and restarted) first; the last run catches up. Real `pylog job` processes (each its own Spark
driver) against real brokers; kills are SIGKILL. One of the suite's deliberate slow cases.
"""
from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kio.schema.list_transactions.v0.request import ListTransactionsRequest

from pylog.launch.local_cluster import LocalCluster
from tests.e2e.test_exactly_once_topic_sink import read_topic
from tests.support.clients import produce, unique_name
from tests.support.cluster import create_replicated, wait_full_isr
from tests.support.jobs import finish, kill, run_job
from tests.support.waiting import wait_for
from tests.support.wire import WireClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CLUSTER_SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    "zookeeper.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 2000,
    "auto.leader.rebalance.enable": "false",
}


def batches_committed(checkpoint: Path) -> int:
    """The highest batch id Spark recorded as committed, plus one (Spark keeps only its latest commit files)."""
    commits = checkpoint / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.exists() else []
    return max(ids) + 1 if ids else 0


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


def test_stream_to_topic_is_exactly_once_through_job_kills_and_coordinator_kills(zookeeper, tmp_path):
    c = LocalCluster(tmp_path / "cluster", 3, CLUSTER_SETTINGS, zk_connect=zookeeper.connect,
                     chroot=f"/{unique_name('eo-cluster')}").start()
    try:
        bs = c.bootstrap
        create_replicated(bs, "events", 3)
        create_replicated(bs, "events-out", 2)
        wait_full_isr(bs, "events", 3)
        total = 1200
        produce(bs, "events", [(b"k%d" % i, b"e%d" % i) for i in range(total)], acks="all")
        checkpoint = tmp_path / "ckpt"
        log = tmp_path / "job.log"
        settings = {"source.bootstrap.servers": bs, "source.topics": "events", "sink.topic": "events-out",
                    "transform.sql": "SELECT key, concat(CAST(value AS STRING), '!') AS value FROM source",
                    "sink.checkpoint.location": checkpoint, "source.max.offsets.per.trigger": 200,
                    "sink.kafka.transaction.timeout.ms": 20000, "trigger": "available-now"}
        proc = run_job("stream_to_topic", settings, env={"PYLOG_FAULT_KILL_AFTER_TXN_COMMIT": "1"}, output=log)
        proc.wait(timeout=240)
        assert proc.returncode == -signal.SIGKILL, "the fault killed the job after batch 1's transactions committed"

        rnd = random.Random(11)
        kills, coordinator_kills, runs = 1, 0, 0
        while kills < 4:
            # every run gets three more batches of work and is killed after a random 1-2 of them, at a random moment
            produce(bs, "events", [(b"k%d" % i, b"e%d" % i) for i in range(total, total + 600)], acks="all")
            total += 600
            before = batches_committed(checkpoint)
            proc = run_job("stream_to_topic", settings, output=log)
            runs += 1
            if runs in (1, 3):              # this run's coordinator goes first, then the run itself
                victims = wait_for(lambda: proc.poll() is None and job_coordinators(c), 120,
                                   "the job's transactions to have a coordinator")
                victim = sorted(victims)[coordinator_kills % len(victims)]
                c.kill(victim)
                coordinator_kills += 1
                wait_for(lambda: proc.poll() is not None or batches_committed(checkpoint) > before, 120,
                         "the job to commit after its coordinator was killed")
                c.restart(victim)
            wanted = before + rnd.randint(1, 2)
            deadline = time.monotonic() + 180
            while proc.poll() is None and batches_committed(checkpoint) < wanted and time.monotonic() < deadline:
                time.sleep(0.05)
            try:
                proc.wait(rnd.uniform(0.0, 0.5))
            except subprocess.TimeoutExpired:
                kill(proc)
                kills += 1
        assert coordinator_kills == 2
        finish(run_job("stream_to_topic", settings))
        got = read_topic(bs, "events-out", 2, "read_committed")
        assert len(got) == total, f"{len(got) - len(set(got))} duplicates, {total - len(set(got))} missing"
        assert got == sorted(b"e%d!" % i for i in range(total))
    finally:
        c.close()
