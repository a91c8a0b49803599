"""Issue 24's user actions, each once on purpose (the model-based walk, test_exactly_once_model.py, mixes them):
the table's offsets decide, a checkpoint is only a cache of them.

1. a job killed during its first micro-batch resumes that batch from the offsets it was planned with;
2. a checkpoint of another job (another table and app) is refused, and nothing is renamed away; a lost one
   starts a new generation from the table;
3. batch_load between two runs of stream_to_delta on the same table and app: every record once;
4. the README's PySpark stream with a lost checkpoint is refused, not replayed into the table;
(5. a plain query whose first batch failed re-runs it from its origin, not from `latest` resolved afresh:
tests/integration/test_stream_origin.py drives the source itself, since when Spark resolves a query's initial
offsets relative to a producer is a matter of timing.)
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connectors.offset_manager import OffsetManager
from tests.support.clients import create_topic
from tests.support.jobs import (assert_exactly_once, finish, kill, produce_events, run_job, stream_settings,
                                table_versions)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_kill_in_the_first_batch_shared_checkpoint_and_batch_load_between_runs(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "events", partitions=2)
    produce_events(bootstrap, "events", 0, 2000)
    settings = stream_settings(bootstrap, tmp_path, "inv", 300, **{"source.starting.offsets": "latest"})

    # 1. SIGKILL once Spark planned batch 0; more records arrive; the same command again
    proc = run_job("stream_to_delta", {**settings, "source.starting.offsets": "earliest"})
    deadline = time.monotonic() + 180
    while not (tmp_path / "ckpt" / "gen-0" / "offsets" / "0").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0][-2000:]
        time.sleep(0.02)
    kill(proc)
    assert table_versions(tmp_path / "table") >= 1, "the generation's claim (with its start) is in the table"
    assert not DeltaTable(str(tmp_path / "table")).file_uris(), "killed before its first commit"
    produce_events(bootstrap, "events", 2000, 1000)
    # the restart says `latest`: the generation's declared start (earliest, stored in the table) still wins
    finish(run_job("stream_to_delta", settings))
    assert_exactly_once(tmp_path / "table", "inv", bootstrap, "events", 3000)

    # 3. batch_load with the same table and app id between two stream runs
    produce_events(bootstrap, "events", 3000, 500)
    finish(run_job("batch_load", settings))
    produce_events(bootstrap, "events", 3500, 500)
    out = finish(run_job("stream_to_delta", settings))
    assert "does not match table" in out and "another writer" in out, out[-3000:]
    assert_exactly_once(tmp_path / "table", "inv", bootstrap, "events", 4000)

    # 2. another job (its own table and app) pointed at the same checkpoint: refused in one line, nothing moved
    ckpt_before = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    other = {**settings, "sink.table.path": tmp_path / "other", "sink.app.id": "other"}
    proc = run_job("stream_to_delta", other)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode != 0 and "cannot be used by app 'other': it belongs to app 'inv'" in out, out[-3000:]
    assert len([ln for ln in out.splitlines() if ln.strip()]) <= 10, out
    assert not (tmp_path / "other").exists()
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ckpt_before
    produce_events(bootstrap, "events", 4000, 300)
    finish(run_job("stream_to_delta", settings))
    assert_exactly_once(tmp_path / "table", "inv", bootstrap, "events", 4300)

    # a lost checkpoint: a new generation starts from the table's offsets
    shutil.rmtree(tmp_path / "ckpt")
    produce_events(bootstrap, "events", 4300, 200)
    out = finish(run_job("stream_to_delta", settings))
    assert "generation 2" in out, out[-2000:]
    assert_exactly_once(tmp_path / "table", "inv", bootstrap, "events", 4500)


def _stream(spark, bootstrap: str, topic: str, table: Path, ckpt: Path, starting: str | None = None, **opts: str):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    if starting:
        reader = reader.option("startingOffsets", starting)
    return (reader.load().writeStream.format("pylog-delta").option("path", str(table)).option("appId", "readme")
            .option("checkpointLocation", str(ckpt)).options(**opts))


def _offsets(table: Path) -> list[int]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table(columns=["offset"]).column("offset").to_pylist())


def test_the_readme_stream_with_a_lost_checkpoint_is_refused_not_replayed(spark, shared_broker, topic_name, tmp_path):
    bootstrap, topic_name = shared_broker.bootstrap, topic_name()
    create_topic(bootstrap, topic_name, partitions=1)
    produce_events(bootstrap, topic_name, 0, 300)
    table, ckpt = tmp_path / "events", tmp_path / "chk"
    _stream(spark, bootstrap, topic_name, table, ckpt, "earliest").trigger(availableNow=True).start().awaitTermination()
    assert _offsets(table) == list(range(300))
    shutil.rmtree(ckpt)
    produce_events(bootstrap, topic_name, 300, 100)
    query = _stream(spark, bootstrap, topic_name, table, ckpt, "earliest").trigger(availableNow=True).start()
    with pytest.raises(Exception) as failed:
        query.awaitTermination()
    assert "starts at 0 but the table's offset is 300" in str(failed.value)
    assert "starting_offsets_json" in str(failed.value)
    assert _offsets(table) == list(range(300)), "nothing replayed"
    # what the message advises: a new checkpoint, started from the table's offsets
    shutil.rmtree(ckpt)
    start = OffsetManager(str(table), "readme").starting_offsets_json()
    _stream(spark, bootstrap, topic_name, table, ckpt, start).trigger(availableNow=True).start().awaitTermination()
    assert _offsets(table) == list(range(400))
