"""The jobs with their Delta table on an object store: a real S3 server (MinIO), reached through the jobs'
`sink.storage.*` settings alone (the test's own environment carries no AWS variable), exactly once.

A stream killed right after a Delta commit, a batch load of the same app on delta-spark's engine going on from the
table's offsets, delta-spark's maintenance, and a reprocess that replaces the table: every record once, the offsets in
the table, the runs recorded beside it. And the race delta-spark's commits on S3 would lose to another writer without
conditional writes. And the refusals a user meets first: a store that does not answer, a bucket
that does not exist, a commit safety delta-rs dropped, each in one line, in seconds, before
Spark starts.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from connectors.offset_manager import OffsetManager
from connectors.table_location import ENV_KEYS, TableLocation
from tests.support.clients import create_topic
from tests.support.jobs import REPO, assert_exactly_once, finish, job_runs, produce_events, run_job, stream_settings

pytestmark = [pytest.mark.object_store, pytest.mark.timeout(900)]


@pytest.fixture
def no_aws_env(monkeypatch):
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)


def _storage(object_store) -> dict[str, str]:
    return {f"sink.storage.{k}": v for k, v in object_store.storage_options().items()}


def _tags(commit: dict) -> dict:
    """pylog's commit tags: delta-spark keeps them under `tags`, delta-rs beside the commit's own fields."""
    return commit.get("tags") or commit


def test_stream_batch_load_and_replace_on_s3_exactly_once(pylog_broker, object_store, no_aws_env, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "events", partitions=2)
    produce_events(bootstrap, "events", 0, 2000)
    uri = f"s3://tables/{uuid.uuid4().hex}/events"
    table = TableLocation.of(uri, object_store.storage_options())
    settings = stream_settings(bootstrap, tmp_path, "s3-app", 400, **{"sink.table.path": uri, **_storage(object_store)})

    # killed right after the Delta commit of batch 1, before Spark's own commit of it
    proc = run_job("stream_to_delta", settings, env={"PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT": "1"})
    proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL, "the fault killed the job right after the Delta commit of batch 1"
    assert OffsetManager(table, "s3-app").state().last_batch == 1

    # a cron batch load of the same app between two stream runs, on delta-spark's engine (Hadoop's S3A and pylog's
    # conditional-write log store): it goes on from the offsets delta-rs stored
    produce_events(bootstrap, "events", 2000, 500)
    load = {k: v for k, v in settings.items() if not k.startswith(("trigger", "source.max", "sink.checkpoint"))}
    finish(run_job("batch_load", {**load, "sink.engine": "delta-spark"}))
    assert sum(OffsetManager(table, "s3-app").committed().values()) == 2500
    assert _tags(table.delta().history(1)[0]).get("pylog.engine") == "delta-spark"
    assert_exactly_once(table, "s3-app", bootstrap, "events", 2500)

    # delta-spark's maintenance on the bucket: OPTIMIZE compacts both engines' files, offsets unchanged
    finish(run_job("maintain", {"sink.table.path": uri, **_storage(object_store)}))
    assert any(h.get("operation") == "OPTIMIZE" for h in table.delta().history(4)), "OPTIMIZE compacted the files"
    assert_exactly_once(table, "s3-app", bootstrap, "events", 2500)
    produce_events(bootstrap, "events", 2500, 300)
    # (the stream resuming after a batch load, its checkpoint overtaken: tests/e2e/test_exactly_once_invariant.py)

    # offline reprocessing that replaces the table: one commit, a new generation, every record once
    before = OffsetManager(table, "s3-app").generation()
    finish(run_job("reprocess", {**load, "reprocess.mode": "replace"}))
    assert_exactly_once(table, "s3-app", bootstrap, "events", 2800)
    assert OffsetManager(table, "s3-app").generation() == (before or 0) + 1
    assert table.delta().history(1)[0]["operation"] == "WRITE"

    # the runs, recorded beside the table in the bucket, as `pylog job status` reads them
    runs = job_runs("stream_to_delta", settings)
    assert [(r["job"], r["outcome"]) for r in runs] == [("reprocess", "committed"), ("maintain", "done"),
                                                       ("batch_load", "committed"), ("stream_to_delta", "died")], runs
    assert runs[0]["rows"] == 2800 and sum(r["rows"] or 0 for r in runs[1:]) == 2500, runs


def _refused(settings: dict[str, object], job: str = "batch_load") -> tuple[str, float]:
    cmd = [sys.executable, "-m", "pylog", "job", job]
    for k, v in settings.items():
        cmd += ["--set", f"{k}={v}"]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k not in ENV_KEYS})
    assert proc.returncode != 0, proc.stdout[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0], time.monotonic() - started


def test_an_unusable_store_or_engine_is_refused_in_one_line_before_spark_starts(object_store, tmp_path):
    base = {"source.bootstrap.servers": "127.0.0.1:9", "source.topics": "events", "group.mirror": "",
            "sink.table.path": f"s3://tables/{uuid.uuid4().hex}/t", **_storage(object_store)}
    line, took = _refused({**base, "sink.storage.aws_endpoint_url": "http://127.0.0.1:9"})
    assert "the object store at http://127.0.0.1:9 does not answer" in line and took < 20, (line, took)
    line, took = _refused({**base, "sink.table.path": "s3://no-such-bucket/t"})
    assert "bucket no-such-bucket does not exist" in line and took < 20, (line, took)
    line, took = _refused({**base, "sink.storage.aws_secret_access_key": "not-the-secret"})
    assert "refused the credentials for bucket tables" in line and took < 20, (line, took)
    line, took = _refused({**base, "sink.storage.aws_s3_locking_provider": "dynamodb"})
    assert "no longer supports DynamoDB locking" in line and "remove aws_s3_locking_provider" in line and took < 20, \
        (line, took)
    line, took = _refused({**base, "sink.table.path": "gs://bucket/t"})
    assert "not gs://" in line, line


def test_a_commit_raced_on_s3_is_refused_by_pylogs_log_store_and_lost_by_deltas(s3_env):
    """The race two engines' commits of one version run on S3, made deterministic inside the log store's write
    (tests/support/log_store_race.py): Delta's own S3 log store checks for the file first and then overwrites the
    rival's commit, which is lost; pylog's writes with If-None-Match and gets the conflict Delta retries on. And a
    session set up as the jobs' are commits to s3:// through pylog's."""
    proc = subprocess.run([sys.executable, "-m", "tests.support.log_store_race"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["the session's log store for s3://"] == "pylog.delta.S3ConditionalLogStore", result
    assert result["pylog's S3ConditionalLogStore"] == {
        "write": "refused: java.nio.file.FileAlreadyExistsException", "the file holds": "the rival's"}, result
    assert result["delta's S3SingleDriverLogStore"] == {"write": "wrote", "the file holds": "its own"}, result
