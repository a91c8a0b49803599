"""`pylog job stream_to_topic` killed with SIGKILL again and again: the output topic, read with read_committed,
holds every input record exactly once.

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

from tests.e2e.test_exactly_once_topic_sink import read_topic
from tests.support.clients import create_topic, produce
from tests.support.jobs import finish, kill_loop, run_job

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
