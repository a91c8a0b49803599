"""The jobs into Delta, exactly once: kill loops and reprocessing from a timestamp (a lost checkpoint and the other
user actions: test_exactly_once_invariant.py and the model-based walk, test_exactly_once_model.py).

The stream kill loops run with `pylog job maintain` beside them; on pylog's broker the runs alternate
between the delta-rs and delta-spark engines, and a delta-spark merge stream has its own kill loop.

Each job runs as a real `pylog job ...` process (its own Spark driver JVM) against a real broker;
kills are SIGKILL to the job's whole process group. These are the suite's deliberate slow cases.
"""
from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connectors.offset_manager import OffsetManager, end_offsets

from tests.support.clients import create_topic
from tests.support.jobs import (
    MaintainBeside,
    assert_exactly_once,
    finish,
    job_runs,
    kill,
    kill_loop,
    produce_events,
    run_job,
)
from peers.kafka import KafkaBroker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _stream_settings(bootstrap: str, tmp: Path, **extra: object) -> dict[str, object]:
    return {"source.bootstrap.servers": bootstrap, "source.topics": "events", "sink.table.path": tmp / "table",
            "sink.checkpoint.location": tmp / "ckpt", "sink.app.id": "kill-loop", "group.mirror": "",
            "trigger": "available-now", "source.max.offsets.per.trigger": 400, **extra}


@pytest.fixture(params=["pylog", "apache-kafka"])
def any_broker(request, broker_factory):
    """pylog's broker, then Apache Kafka itself (the run's one Kafka, tests/conftest.py; no other test makes
    a topic named "events" on it): the jobs' exactly-once must not depend on whose log it reads."""
    if request.param == "pylog":
        return broker_factory()
    return request.getfixturevalue("apache_kafka")


def test_stream_to_delta_survives_a_kill_loop_exactly_once(any_broker, tmp_path):
    """On pylog's broker the runs alternate between the two engines (delta-spark first, so the restart after the
    fault is delta-rs replaying a batch delta-spark committed), with `pylog job maintain` running beside them."""
    pylog_broker = any_broker
    on_kafka = isinstance(any_broker, KafkaBroker)
    create_topic(pylog_broker.bootstrap, "events", partitions=3)
    total = 4000
    produce_events(pylog_broker.bootstrap, "events", 0, total)
    settings = _stream_settings(pylog_broker.bootstrap, tmp_path)
    engines = ["delta-rs"] if on_kafka else ["delta-spark", "delta-rs"]
    runs = 0

    def start(env: dict[str, str] | None = None):
        nonlocal runs
        runs += 1
        return run_job("stream_to_delta", {**settings, "sink.engine": engines[(runs - 1) % len(engines)]}, env=env)

    table = tmp_path / "table"
    rnd = random.Random(7)
    with contextlib.nullcontext() if on_kafka else MaintainBeside(table) as maintain:
        # 1: killed right after the Delta commit of batch 1, before Spark's own commit of it
        proc = start(env={"PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT": "1"})
        proc.communicate(timeout=240)
        assert proc.returncode == -signal.SIGKILL, "the fault killed the job right after the Delta commit of batch 1"
        kills = 1
        # 2 (none more on Apache Kafka, whose run is the same code on another broker): killed at random
        # moments once the job has made progress (each kill costs a Spark start: the suite's time budget)
        wanted = 1 if on_kafka else 2
        def more_work() -> None:           # a run finished: give the next one work
            nonlocal total
            produce_events(pylog_broker.bootstrap, "events", total, 500)
            total += 500

        kill_loop(start, table, rnd, kills, wanted, 2.0, more_work)
        finish(start())
    assert_exactly_once(table, "kill-loop", pylog_broker.bootstrap, "events", total)
    if maintain is not None:
        assert maintain.succeeded() == 1, "maintenance ran beside the stream"
        assert "delta-spark" in {h.get("pylog.engine") or (h.get("tags") or {}).get("pylog.engine")
                                 for h in DeltaTable(str(table)).history()}, "delta-spark committed batches"


def test_batch_load_survives_a_kill_loop_and_a_rerun_is_a_no_op(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    total = 0
    settings = {"source.bootstrap.servers": pylog_broker.bootstrap, "source.topics": "events",
                "sink.table.path": tmp_path / "table", "sink.app.id": "cron", "group.mirror": ""}
    rnd = random.Random(11)
    for _ in range(3):
        produce_events(pylog_broker.bootstrap, "events", total, 1000)
        total += 1000
        proc = run_job("batch_load", settings)
        try:                                # killed 4-14 s in, unless it finished first
            proc.wait(rnd.uniform(4.0, 14.0))
            proc.communicate()
        except subprocess.TimeoutExpired:
            kill(proc)
    finish(run_job("batch_load", settings))
    assert_exactly_once(tmp_path / "table", "cron", pylog_broker.bootstrap, "events", total)
    version = DeltaTable(str(tmp_path / "table")).version()
    out = finish(run_job("batch_load", settings))
    assert "nothing new" in out
    assert DeltaTable(str(tmp_path / "table")).version() == version
    # every run is in `pylog job status`, the killed ones as died (with what they had committed), and the rows
    # the runs committed add up to the topic: exactly once, seen from the run history
    runs = job_runs("batch_load", settings)
    assert len(runs) == 5 and runs[0]["outcome"] == "nothing new", runs
    assert {r["outcome"] for r in runs} <= {"committed", "died", "nothing new"}, runs
    assert sum(r["rows"] or 0 for r in runs) == total, runs
    assert all(r["ended"] is None for r in runs if r["outcome"] == "died"), runs


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


def _produce_keyed(bootstrap: str, topic: str, start: int, count: int) -> list[tuple[str, str | None]]:
    """Records i = start.. with 60 keys, every 7th a tombstone (null value); returns (key, event id or None)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    out: list[tuple[str, str | None]] = []
    for i in range(start, start + count):
        key, value = f"k{i % 60}", None if i % 7 == 3 else json.dumps({"event_id": str(i)})
        p.produce(topic, key=key.encode(), value=None if value is None else value.encode())
        out.append((key, None if value is None else str(i)))
    assert p.flush(30) == 0
    return out


def test_delta_spark_merge_stream_survives_a_kill_loop_beside_maintenance(pylog_broker, tmp_path):
    """sink.engine=delta-spark, sink.mode=merge: the table ends as the keyed state (each key's latest record,
    tombstoned keys gone, no key twice), and no batch was applied twice (one commit per batch id), across a
    kill right after a commit, a random kill and `pylog job maintain` running beside the stream."""
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    produced = _produce_keyed(pylog_broker.bootstrap, "events", 0, 900)
    settings = _stream_settings(pylog_broker.bootstrap, tmp_path, **{
        "sink.app.id": "cdc", "sink.engine": "delta-spark", "sink.mode": "merge", "sink.merge.key": "key",
        "value.schema": "event_id string", "source.max.offsets.per.trigger": 300})
    table = tmp_path / "table"
    rnd = random.Random(13)
    with MaintainBeside(table) as maintain:
        proc = run_job("stream_to_delta", settings, env={"PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT": "1"})
        proc.communicate(timeout=240)
        assert proc.returncode == -signal.SIGKILL, "the fault killed the job right after the Delta commit of batch 1"
        kills = 1
        kill_loop(lambda: run_job("stream_to_delta", settings), table, rnd, kills, 2, 1.5,
                  lambda: produced.extend(_produce_keyed(pylog_broker.bootstrap, "events", len(produced), 300)))
        out = finish(run_job("stream_to_delta", settings))
    expected: dict[str, str] = {}
    for key, event in produced:
        if event is None:
            expected.pop(key, None)
        else:
            expected[key] = event
    t = DeltaTable(str(table)).to_pyarrow_table(columns=["key", "event_id"])
    keys = t.column("key").to_pylist()
    assert len(keys) == len(set(keys)), "no key twice"
    assert dict(zip(keys, t.column("event_id").to_pylist())) == expected
    assert OffsetManager(str(table), "cdc").committed() == end_offsets(pylog_broker.bootstrap, ["events"])
    batches = [(h["tags"]["pylog.generation"], h["tags"]["pylog.batchId"]) for h in DeltaTable(str(table)).history()
               if (h.get("tags") or {}).get("pylog.appId") == "cdc"]
    assert sorted(batches, key=lambda b: int(b[1])) == [("0", str(b)) for b in range(len(batches))], \
        "every batch committed exactly once, none missing (the replays after the kills were skipped)"
    assert len(batches) >= 3
    assert maintain.succeeded() == 1, "maintenance ran beside the stream"
