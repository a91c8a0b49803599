"""A new user's mistakes, and values that do not fit: each answered in one short message, nothing dropped.

Every job here is a real `pylog job` process. A mistake must end in seconds with at most 10 lines of
output, the cause and the fix on one line, and where Spark's own log went when Spark ran; a value that is
not JSON of value.schema is kept, counted, or stops the job at its offset; a key that is not text keeps
its bytes.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable

from pylog.launch.process import free_port
from tests.support.clients import create_topic
from tests.support.jobs import finish, job_runs, run_job

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

SCHEMA = "event_id string, amount double"


def _mistake(name: str, settings: dict[str, object], *words: str, within_s: float = 60) -> str:
    started = time.monotonic()
    proc = run_job(name, settings)
    out, _ = proc.communicate(timeout=240)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert proc.returncode != 0, out
    assert len(lines) <= 10, f"{len(lines)} lines:\n{out}"
    for w in words:
        assert w in out, f"{w!r} not in:\n{out}"
    assert time.monotonic() - started < within_s, f"took {time.monotonic() - started:.0f} s"
    return out


def _settings(bootstrap: str, tmp: Path, **extra: object) -> dict[str, object]:
    return {"source.bootstrap.servers": bootstrap, "source.topics": "in", "sink.table.path": tmp / "t",
            "sink.checkpoint.location": tmp / "c", "sink.app.id": "first", "group.mirror": "",
            "value.schema": SCHEMA, **extra}


def test_mistakes_end_in_one_short_message(pylog_broker, tmp_path):
    create_topic(pylog_broker.bootstrap, "in", partitions=1)
    wrong = f"127.0.0.1:{free_port()}"
    _mistake("batch_load", _settings(wrong, tmp_path), f"cannot reach any Kafka broker in "
             f"kafka.bootstrap.servers={wrong}", "check the host and port", within_s=40)
    _mistake("stream_to_delta", _settings(pylog_broker.bootstrap, tmp_path, **{"value.on.error": "skip"}),
             "setting 'value.on.error' must be keep or fail, got 'skip'", within_s=30)
    # a table path that cannot be created (under a regular file): the path is named, Spark's log is a file
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    p = Producer({"bootstrap.servers": pylog_broker.bootstrap})
    p.produce("in", b'{"event_id": "1", "amount": 2}')
    assert p.flush(10) == 0
    out = _mistake("batch_load", _settings(pylog_broker.bootstrap, tmp_path, **{"sink.table.path": blocked / "t"}),
                   str(blocked / "t"), "Spark's log: ", within_s=120)
    log_file = Path(out.split("Spark's log: ", 1)[1].split(")")[0])
    assert log_file.is_file()


def test_values_that_are_not_json_are_kept_counted_or_stop_the_job(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "in", partitions=1)
    p = Producer({"bootstrap.servers": bootstrap})
    records = [(b"k0", b'{"event_id": "a", "amount": 1.5}'), (b"\xff\xfe", b"not json at all"),
               (b"k2", b'{"event_id": "c", "amount": "lots"}'), (None, b'{"event_id": "d", "amount": 4}')]
    for k, v in records:
        p.produce("in", key=k, value=v)
    assert p.flush(10) == 0
    out = finish(run_job("stream_to_delta", {**_settings(bootstrap, tmp_path), "trigger": "available-now"}))
    assert "batch 0: 4 rows" in out and "1 keys kept raw in _corrupt_key" in out \
        and "2 values kept raw in _corrupt_value" in out, out[-2000:]
    rows = sorted(DeltaTable(str(tmp_path / "t")).to_pyarrow_table(
        columns=["offset", "key", "_corrupt_key", "event_id", "amount", "_corrupt_value"]).to_pylist(),
        key=lambda r: r["offset"])
    assert [(r["key"], r["_corrupt_key"]) for r in rows] == [("k0", None), (None, b"\xff\xfe"), ("k2", None),
                                                              (None, None)]
    # (Spark keeps the fields that did parse, as its JSON reader's partial results do; the whole value stays raw)
    assert [(r["event_id"], r["amount"], r["_corrupt_value"]) for r in rows] == [
        ("a", 1.5, None), (None, None, b"not json at all"), ("c", None, b'{"event_id": "c", "amount": "lots"}'),
        ("d", 4.0, None)]
    # value.on.error=fail: the job stops at the first such value, naming it, and commits nothing of the batch
    out = _mistake("batch_load", _settings(bootstrap, tmp_path, **{"sink.table.path": tmp_path / "strict",
                                                                  "value.on.error": "fail"}),
                   "value of in-0 at offset 1 is not JSON of value.schema (value.on.error=fail", within_s=120)
    assert not (tmp_path / "strict" / "_delta_log").exists() or not DeltaTable(str(tmp_path / "strict")).file_uris()


def test_ctrl_c_in_reprocess_prints_one_line_and_leaves_no_files(pylog_broker, tmp_path):
    """Ctrl-C (SIGINT to the job's process group, as a terminal sends it) while reprocess's tasks are writing:
    one line saying what happened, and no Parquet file of the cancelled write left in the target."""
    import os
    import signal

    from tests.support.jobs import produce_events

    bootstrap = pylog_broker.bootstrap
    create_topic(bootstrap, "big", partitions=1)
    for start in range(0, 300_000, 50_000):
        produce_events(bootstrap, "big", start, 50_000)
    target = tmp_path / "rebuilt"
    proc = run_job("reprocess", {"source.bootstrap.servers": bootstrap, "source.topics": "big",
                                 "sink.table.path": tmp_path / "t", "reprocess.target.path": target,
                                 "sink.app.id": "a", "group.mirror": ""})
    deadline = time.monotonic() + 180
    while not list(target.glob("part-*.parquet")):   # a task is writing its file
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, out[-3000:]
    after = [line for line in out[out.index("reprocessing 300000 records"):].splitlines()[1:]
             if "records/s" not in line]   # progress lines
    assert len(after) <= 3 and "stopped by SIGINT" in after[-1], "\n".join(after)
    assert "Traceback" not in out
    assert not list(target.glob("part-*.parquet")), "the cancelled write's files were removed"
    assert DeltaTable(str(target)).version() == 1 and not DeltaTable(str(target)).file_uris()
    [stopped] = job_runs("reprocess", {"sink.table.path": tmp_path / "t", "reprocess.target.path": target,
                                       "source.bootstrap.servers": bootstrap, "source.topics": "big"})
    assert stopped["outcome"] == "stopped" and "SIGINT" in stopped["message"], stopped
    assert stopped["offsets"] == 300_000 and stopped["rows"] is None, stopped


def test_a_pyspark_users_mistake_is_a_short_error_ending_in_its_cause(spark, tmp_path):
    """Plain PySpark: Spark wraps a data source's error in its own line; what follows is the error's one line
    (the option and the closest name, the address that cannot be reached), not our traceback."""
    reads = {
        "Unknown option 'startingoffset' for the pylog source: did you mean 'startingOffsets'?":
            lambda: spark.read.format("pylog").option("kafka.bootstrap.servers", f"127.0.0.1:{free_port()}")
            .option("subscribe", "t").option("startingOffset", "earliest").load().count(),
        "cannot reach any Kafka broker in kafka.bootstrap.servers=":
            lambda: spark.read.format("pylog").option("kafka.bootstrap.servers", f"127.0.0.1:{free_port()}")
            .option("subscribe", "t").load().count(),
        "did you mean 'appId'":
            lambda: spark.range(3).write.format("pylog-delta").option("path", str(tmp_path / "t"))
            .option("appID2", "x").mode("append").save(),
    }
    for cause, mistake in reads.items():
        started = time.monotonic()
        with pytest.raises(Exception) as failed:
            mistake()
        lines = [ln for ln in str(failed.value).splitlines() if ln.strip()]
        assert len(lines) <= 6 and any(cause in ln for ln in lines), "\n".join(lines)
        assert time.monotonic() - started < 30
