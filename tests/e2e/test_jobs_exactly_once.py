"""The jobs into Delta, exactly once: kill loops, a lost checkpoint, reprocessing from a timestamp.

Each job runs as a real `pylog job ...` process (its own Spark driver JVM) against a real broker;
kills are SIGKILL to the job's whole process group. These are the suite's deliberate slow cases.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable

from connectors.offset_manager import OffsetManager, end_offsets
from tests.support.clients import create_topic

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _produce(bootstrap: str, topic: str, start: int, count: int, timestamp_of=None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(start, start + count):
        kw = {"timestamp": timestamp_of(i)} if timestamp_of else {}
        p.produce(topic, key=f"k{i}".encode(), value=json.dumps({"event_id": str(i), "user_id": "u", "type": "t",
                                                                    "amount": None, "ts": i}).encode(), **kw)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def _job(name: str, settings: dict[str, object], env: dict[str, str] | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "broker", "job", name]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise
    if proc.returncode != 0:
        lines = [ln for ln in out.splitlines() if not ln.lstrip().startswith("at ")]
        raise AssertionError(f"job exited with {proc.returncode}:\n" + "\n".join(lines[-80:]))
    return out


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _table_versions(path: Path) -> int:
    log = path / "_delta_log"
    return len(list(log.glob("*.json"))) if log.exists() else 0


def _assert_exactly_once(table: Path, app_id: str, bootstrap: str, topic: str, expected: int) -> None:
    t = DeltaTable(str(table)).to_pyarrow_table(columns=["topic", "partition", "offset"])
    keys = list(zip(t.column("topic").to_pylist(), t.column("partition").to_pylist(), t.column("offset").to_pylist()))
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} duplicated records"
    ends = end_offsets(bootstrap, [topic])
    produced = {(topic, p, o) for p, end in ends[topic].items() for o in range(end)}
    assert set(keys) == produced, f"missing {len(produced - set(keys))}, unexpected {len(set(keys) - produced)}"
    assert len(keys) == expected
    assert OffsetManager(str(table), app_id).committed() == ends


def _stream_settings(bootstrap: str, tmp: Path, **extra: object) -> dict[str, object]:
    return {"source.bootstrap.servers": bootstrap, "source.topics": "events", "sink.table.path": tmp / "table",
            "sink.checkpoint.location": tmp / "ckpt", "sink.app.id": "kill-loop", "group.mirror": "",
            "trigger": "available-now", "source.max.offsets.per.trigger": 400, **extra}


def test_stream_to_delta_survives_a_kill_loop_exactly_once(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=3)
    total = 4000
    _produce(pylog_broker.bootstrap, "events", 0, total)
    settings = _stream_settings(pylog_broker.bootstrap, tmp_path)
    table = tmp_path / "table"
    rnd = random.Random(7)
    # 1: killed right after the Delta commit of batch 1, before Spark's own commit of it
    proc = _job("stream_to_delta", settings, env={"PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT": "1"})
    proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL or proc.returncode != 0
    kills = 1
    # 2..6: killed at random moments once the job has made progress
    while kills < 6:
        before = _table_versions(table)
        proc = _job("stream_to_delta", settings)
        deadline = time.monotonic() + 180
        while proc.poll() is None and _table_versions(table) <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(rnd.uniform(0.0, 2.0))
        if proc.poll() is None:
            _kill(proc)
            kills += 1
        else:
            proc.communicate()
            _produce(pylog_broker.bootstrap, "events", total, 500)  # it finished: give the next run work
            total += 500
    _finish(_job("stream_to_delta", settings))
    _assert_exactly_once(table, "kill-loop", pylog_broker.bootstrap, "events", total)


def test_batch_load_survives_a_kill_loop_and_a_rerun_is_a_no_op(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    total = 0
    settings = {"source.bootstrap.servers": pylog_broker.bootstrap, "source.topics": "events",
                "sink.table.path": tmp_path / "table", "sink.app.id": "cron", "group.mirror": ""}
    rnd = random.Random(11)
    for _ in range(5):
        _produce(pylog_broker.bootstrap, "events", total, 1000)
        total += 1000
        proc = _job("batch_load", settings)
        time.sleep(rnd.uniform(4.0, 14.0))
        if proc.poll() is None:
            _kill(proc)
        else:
            proc.communicate()
    _finish(_job("batch_load", settings))
    _assert_exactly_once(tmp_path / "table", "cron", pylog_broker.bootstrap, "events", total)
    version = DeltaTable(str(tmp_path / "table")).version()
    out = _finish(_job("batch_load", settings))
    assert "nothing new" in out
    assert DeltaTable(str(tmp_path / "table")).version() == version


def test_a_lost_checkpoint_resumes_from_the_table_without_duplicates(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    _produce(pylog_broker.bootstrap, "events", 0, 1500)
    settings = _stream_settings(pylog_broker.bootstrap, tmp_path, **{"sink.app.id": "lost"})
    _finish(_job("stream_to_delta", settings))
    shutil.rmtree(tmp_path / "ckpt")
    _produce(pylog_broker.bootstrap, "events", 1500, 700)
    out = _finish(_job("stream_to_delta", settings))
    assert "generation 1" in out
    _assert_exactly_once(tmp_path / "table", "lost", pylog_broker.bootstrap, "events", 2200)


def test_reprocess_from_a_timestamp_rebuilds_exactly_the_later_records(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "events", partitions=2)
    t0 = int(time.time() * 1000) - 3_600_000
    _produce(pylog_broker.bootstrap, "events", 0, 1000, timestamp_of=lambda i: t0 + i * 1000)
    cut = t0 + 600 * 1000
    settings = {"source.bootstrap.servers": pylog_broker.bootstrap, "source.topics": "events",
                "sink.table.path": tmp_path / "table", "sink.app.id": "rp", "reprocess.mode": "new-table",
                "reprocess.target.path": tmp_path / "rebuilt", "reprocess.from": f"timestamp:{cut}"}
    _finish(_job("reprocess", settings))
    t = DeltaTable(str(tmp_path / "rebuilt")).to_pyarrow_table(columns=["ts"])
    assert sorted(t.column("ts").to_pylist()) == list(range(600, 1000))
