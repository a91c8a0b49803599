"""The jobs into Delta, exactly once: kill loops, a lost checkpoint, reprocessing from a timestamp.

Each job runs as a real `pylog job ...` process (its own Spark driver JVM) against a real broker;
kills are SIGKILL to the job's whole process group. These are the suite's deliberate slow cases.
"""
from __future__ import annotations

import random
import shutil
import signal
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.support.clients import create_topic
from tests.support.jobs import assert_exactly_once, finish, kill, produce_events, run_job, table_versions
from peers.kafka import KafkaBroker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _stream_settings(bootstrap: str, tmp: Path, **extra: object) -> dict[str, object]:
    return {"source.bootstrap.servers": bootstrap, "source.topics": "events", "sink.table.path": tmp / "table",
            "sink.checkpoint.location": tmp / "ckpt", "sink.app.id": "kill-loop", "group.mirror": "",
            "trigger": "available-now", "source.max.offsets.per.trigger": 400, **extra}


@pytest.fixture(params=["pylog", "apache-kafka"])
def any_broker(request, broker_factory, tmp_path):
    """pylog's broker, then Apache Kafka itself: the jobs' exactly-once must not depend on whose log it reads."""
    if request.param == "pylog":
        yield broker_factory()
        return
    kafka = KafkaBroker(tmp_path / "apache-kafka").start()
    yield kafka
    kafka.close()


def test_stream_to_delta_survives_a_kill_loop_exactly_once(any_broker, tmp_path):
    pylog_broker = any_broker
    create_topic(pylog_broker.bootstrap, "events", partitions=3)
    total = 4000
    produce_events(pylog_broker.bootstrap, "events", 0, total)
    settings = _stream_settings(pylog_broker.bootstrap, tmp_path)
    table = tmp_path / "table"
    rnd = random.Random(7)
    # 1: killed right after the Delta commit of batch 1, before Spark's own commit of it
    proc = run_job("stream_to_delta", settings, env={"PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT": "1"})
    proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL, "the fault killed the job right after the Delta commit of batch 1"
    kills = 1
    # 2..6 (2..3 on Apache Kafka, whose run is the same code on another broker): killed at random
    # moments once the job has made progress
    wanted = 3 if isinstance(any_broker, KafkaBroker) else 6
    while kills < wanted:
        before = table_versions(table)
        proc = run_job("stream_to_delta", settings)
        deadline = time.monotonic() + 180
        while proc.poll() is None and table_versions(table) <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(rnd.uniform(0.0, 2.0))
        if proc.poll() is None:
            kill(proc)
            kills += 1
        else:
            proc.communicate()
            produce_events(pylog_broker.bootstrap, "events", total, 500)  # it finished: give the next run work
            total += 500
    finish(run_job("stream_to_delta", settings))
    assert_exactly_once(table, "kill-loop", pylog_broker.bootstrap, "events", total)


def test_batch_load_survives_a_kill_loop_and_a_rerun_is_a_no_op(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    total = 0
    settings = {"source.bootstrap.servers": pylog_broker.bootstrap, "source.topics": "events",
                "sink.table.path": tmp_path / "table", "sink.app.id": "cron", "group.mirror": ""}
    rnd = random.Random(11)
    for _ in range(5):
        produce_events(pylog_broker.bootstrap, "events", total, 1000)
        total += 1000
        proc = run_job("batch_load", settings)
        time.sleep(rnd.uniform(4.0, 14.0))
        if proc.poll() is None:
            kill(proc)
        else:
            proc.communicate()
    finish(run_job("batch_load", settings))
    assert_exactly_once(tmp_path / "table", "cron", pylog_broker.bootstrap, "events", total)
    version = DeltaTable(str(tmp_path / "table")).version()
    out = finish(run_job("batch_load", settings))
    assert "nothing new" in out
    assert DeltaTable(str(tmp_path / "table")).version() == version


def test_a_lost_checkpoint_resumes_from_the_table_without_duplicates(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    produce_events(pylog_broker.bootstrap, "events", 0, 1500)
    settings = _stream_settings(pylog_broker.bootstrap, tmp_path, **{"sink.app.id": "lost"})
    finish(run_job("stream_to_delta", settings))
    shutil.rmtree(tmp_path / "ckpt")
    produce_events(pylog_broker.bootstrap, "events", 1500, 700)
    out = finish(run_job("stream_to_delta", settings))
    assert "generation 1" in out
    assert_exactly_once(tmp_path / "table", "lost", pylog_broker.bootstrap, "events", 2200)


def test_reprocess_from_a_timestamp_rebuilds_exactly_the_later_records(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    t0 = int(time.time() * 1000) - 3_600_000
    produce_events(pylog_broker.bootstrap, "events", 0, 1000, timestamp_of=lambda i: t0 + i * 1000)
    cut = t0 + 600 * 1000
    settings = {"source.bootstrap.servers": pylog_broker.bootstrap, "source.topics": "events",
                "sink.table.path": tmp_path / "table", "sink.app.id": "rp", "reprocess.mode": "new-table",
                "reprocess.target.path": tmp_path / "rebuilt", "reprocess.from": f"timestamp:{cut}"}
    finish(run_job("reprocess", settings))
    t = DeltaTable(str(tmp_path / "rebuilt")).to_pyarrow_table(columns=["ts"])
    assert sorted(t.column("ts").to_pylist()) == list(range(600, 1000))
