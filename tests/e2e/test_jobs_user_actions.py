"""Exactly-once under ordinary user actions: a re-created topic, a reprocess beside a running stream,
strict reprocess offsets, and jobs that explain themselves. Real broker, real `pylog job` processes,
real Delta tables; every record produced is checked by its event id.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable

from connectors.offset_manager import OffsetManager, end_offsets
from jobs import class_archive
from tests.support.clients import create_topic
from tests.support.jobs import (REPO, driver_jvm_archives, event_ids, finish, job_runs, kill, produce_events, run_job,
                                stream_settings, table_versions)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _recreate(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics([topic]).values():
        f.result()
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    create_topic(bootstrap, topic, partitions=partitions)


def _failed(proc: subprocess.Popen, timeout: float = 240) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 1, f"expected the job to fail, it exited {proc.returncode}:\n{out[-3000:]}"
    return out


def test_a_recreated_topic_under_stream_to_delta_fails_loudly_or_is_read_from_its_start(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "events", partitions=2)
    produce_events(bootstrap, "events", 0, 1000)
    settings = stream_settings(bootstrap, tmp_path, "app", 400)
    finish(run_job("stream_to_delta", settings, cwd=tmp_path))   # jobs run from any directory
    old_ids = OffsetManager(str(tmp_path / "table"), "app").state().topic_ids
    _recreate(bootstrap, "events", 2)
    produce_events(bootstrap, "events", 1000, 300)   # fewer than the old offsets: a toy offset check misses it
    out = _failed(run_job("stream_to_delta", settings))
    summary = out.strip().splitlines()[-1]
    assert "DataLossError" in summary and "Topic events was re-created" in summary and "events-" in summary, summary
    assert event_ids(tmp_path / "table") == list(range(1000)), "nothing written by the failed run"

    out = finish(run_job("stream_to_delta", {**settings, "source.fail.on.data.loss": "false"}))
    assert out.count("was re-created") <= 2, "each partition's change is reported once"
    assert event_ids(tmp_path / "table") == list(range(1300))
    state = OffsetManager(str(tmp_path / "table"), "app").state()
    assert state.offsets == end_offsets(bootstrap, ["events"]) and state.topic_ids["events"] != old_ids["events"]


def test_a_topic_recreated_between_batch_loads_is_an_error_or_loaded_from_its_start(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "events", partitions=2)
    produce_events(bootstrap, "events", 0, 600)
    settings = {"source.bootstrap.servers": bootstrap, "source.topics": "events",
                "sink.table.path": tmp_path / "table", "sink.app.id": "cron", "group.mirror": ""}
    out = finish(run_job("batch_load", {**settings, "metrics.textfile": tmp_path / "cron.prom"}))
    assert "loading: done, 600 records read" in out, out[-2000:]   # counted as the executors read them
    metrics = (tmp_path / "cron.prom").read_text()     # for node_exporter's textfile collector
    assert 'pylog_job_records_total{app="cron",job="batch_load"} 600.0' in metrics, metrics
    assert 'pylog_job_run_outcome{app="cron",job="batch_load",pylog_job_run_outcome="committed"} 1.0' in metrics
    _recreate(bootstrap, "events", 2)
    produce_events(bootstrap, "events", 600, 200)
    summary = _failed(run_job("batch_load", settings)).strip().splitlines()[-1]
    assert "Topic events was re-created" in summary and "read up to offset" in summary, summary
    finish(run_job("batch_load", {**settings, "source.fail.on.data.loss": "false"}))
    assert event_ids(tmp_path / "table") == list(range(800))
    assert "nothing new" in finish(run_job("batch_load", settings))
    # `pylog job status` tells the story from the table: four runs, the failure with its reason
    runs = job_runs("batch_load", settings)
    assert [r["outcome"] for r in runs] == ["nothing new", "committed", "failed", "committed"], runs
    first, failed, reloaded = runs[3], runs[2], runs[1]
    assert (first["offsets"], first["rows"], first["batches"]) == (600, 600, 1), first
    assert first["startOffsets"] == {"events": {"0": 0, "1": 0}} and \
        sum(first["endOffsets"]["events"].values()) == 600, first
    assert "Topic events was re-created" in failed["message"] and failed["rows"] is None, failed
    assert reloaded["rows"] == 200 and reloaded["lastVersion"] == DeltaTable(str(tmp_path / "table")).version()
    assert all(r["app"] == "cron" and r["ended"] >= r["started"] for r in runs)


def test_batch_load_from_latest_into_a_new_table_loads_what_arrives_after_its_first_run(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "events", partitions=2)
    produce_events(bootstrap, "events", 0, 300)
    settings = {"source.bootstrap.servers": bootstrap, "source.topics": "events", "sink.table.path": tmp_path / "table",
                "sink.app.id": "cron", "group.mirror": "", "source.starting.offsets": "latest"}
    out = finish(run_job("batch_load", settings))
    assert "nothing to load yet: creating" in out, out[-2000:]
    assert event_ids(tmp_path / "table") == []
    assert OffsetManager(str(tmp_path / "table"), "cron").state().offsets == end_offsets(bootstrap, ["events"])
    produce_events(bootstrap, "events", 300, 200)
    finish(run_job("batch_load", settings))
    assert event_ids(tmp_path / "table") == list(range(300, 500))


def test_reprocess_replace_beside_a_running_stream_fences_it_and_nothing_is_lost(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "events", partitions=3)
    produce_events(bootstrap, "events", 0, 1500)
    table = tmp_path / "table"
    stream = run_job("stream_to_delta", stream_settings(bootstrap, tmp_path, "app", 400,
                                                        trigger="processing-time=1 second",
                                                **{"source.max.offsets.per.trigger": 300}))
    try:
        deadline = time.monotonic() + 180
        while table_versions(table) < 3 and stream.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stream.poll() is None, "the stream is running"
        archive = class_archive.usable()
        assert archive is not None, "make builds the Spark class archive (make .stamps/spark-classes)"
        assert str(archive.resolve()) in driver_jvm_archives(stream), "the job's driver JVM maps its classes from the archive"
        rp = run_job("reprocess", {"source.bootstrap.servers": bootstrap, "source.topics": "events",
                                   "sink.table.path": table, "sink.app.id": "app", "reprocess.mode": "replace"})
        produce_events(bootstrap, "events", 1500, 500)   # the stream has new work while the replace runs
        finish(rp)
        produce_events(bootstrap, "events", 2000, 100)
        out = _failed(stream, timeout=240)
    finally:
        if stream.poll() is None:
            kill(stream)
    summary = out.strip().splitlines()[-1]
    assert "FencedError" in summary and "superseded" in summary and "Restart the job" in summary, summary
    finish(run_job("stream_to_delta", stream_settings(bootstrap, tmp_path, "app", 400)))
    assert event_ids(table) == list(range(2100)), "every record exactly once after the restart"
    assert OffsetManager(str(table), "app").committed() == end_offsets(bootstrap, ["events"])


def test_reprocess_offsets_must_name_every_partition_and_only_real_ones(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "events", partitions=3)
    produce_events(bootstrap, "events", 0, 30)
    base = {"source.bootstrap.servers": bootstrap, "source.topics": "events", "sink.table.path": tmp_path / "t",
            "reprocess.target.path": tmp_path / "new"}
    out = _failed(run_job("reprocess", {**base, "reprocess.from": 'offsets:{"events":{"0":1}}'}))
    assert "you must specify all TopicPartitions" in out and "events-1" in out and "events-2" in out
    out = _failed(run_job("reprocess", {**base, "reprocess.from":
                                        'offsets:{"events":{"0":1,"1":0,"2":0,"7":0},"nope":{"0":0}}'}))
    assert "do not exist" in out and "events-7" in out and "nope-0" in out
    out = _failed(run_job("reprocess", {**base, "reprocess.from": 'offsets:{"events":{"0":999,"1":0,"2":0}}'}))
    assert "start offset 999 for events-0 is greater than the end offset" in out
    assert not (tmp_path / "new").exists(), "nothing is written by a rejected run"


def test_jobs_explain_their_settings_and_name_a_missing_config_file(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pylog", "job", "batch_load", "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for key in ("source.bootstrap.servers", "source.fail.on.data.loss", "sink.table.path", "group.mirror"):
        assert key in out.stdout
    missing = subprocess.run([sys.executable, "-m", "pylog", "job", "batch_load", "--config", str(tmp_path / "x")],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and f"config file {tmp_path / 'x'} not found" in missing.stderr
    typo = subprocess.run([sys.executable, "-m", "pylog", "job", "reprocess", "--set", "source.topic=x",
                           "--set", "reprocess.from=yesterday"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "unknown setting source.topic (did you mean source.topics?)" in typo.stderr
    assert typo.returncode == 1 and "reprocess.from must be earliest" in typo.stderr
