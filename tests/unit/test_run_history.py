"""A job's run history (jobs.run_history) on real Delta tables written with delta-rs: runs read back newest first,
a run with no end shown as running or died with what its commits say, commit tags of both engines read alike."""
from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from connectors.delta_commit import commit_metadata
from jobs.config import JobConfig
from jobs.run_history import (COMMITTED, FAILED, JobRun, commit_tags, commits_by_run, describe_offsets, read_runs,
                              recorded, runs_path)


def _commit(table, run_id: str, starts, ends, rows: int) -> None:
    meta = commit_metadata("app", 0, None, starts, ends, run_id, rows)
    write_deltalake(str(table), pa.table({"x": list(range(rows))}), mode="append",
                    commit_properties=CommitProperties(custom_metadata=meta))


def test_commits_are_summed_per_run_and_delta_spark_tags_read_like_delta_rs_metadata():
    history = [
        {"version": 3, "pylog.runId": "b", "pylog.rows": "5", "pylog.offsets": '{"t":{"0":15}}',
         "pylog.startOffsets": '{"t":{"0":10}}'},
        {"version": 1, "tags": {"pylog.runId": "a", "pylog.rows": "4", "pylog.offsets": '{"t":{"0":4}}',
                                "pylog.startOffsets": '{"t":{"0":0}}'}},
        {"version": 2, "pylog.runId": "a", "pylog.rows": "6", "pylog.offsets": '{"t":{"0":10}}',
         "pylog.startOffsets": '{"t":{"0":4}}'},
        {"version": 0, "operation": "CREATE TABLE"},
    ]
    runs = commits_by_run(history)
    assert set(runs) == {"a", "b"}
    a = runs["a"]
    assert (a.batches, a.rows, a.first_version, a.last_version, a.offsets) == (2, 10, 1, 2, 10)
    assert a.start_offsets == {("t", 0): 0} and a.end_offsets == {("t", 0): 10}
    assert commit_tags({"tags": {"pylog.rows": 1, "other": 2}, "pylog.x": "y"}) == {"pylog.rows": "1", "pylog.x": "y"}


def test_runs_read_back_newest_first_with_outcomes_and_reasons(tmp_path):
    table = tmp_path / "t"
    cfg = JobConfig("batch_load", {"sink.table.path": str(table)})
    with recorded(cfg, "app") as first:
        _commit(table, first.run_id, {("t", 0): 0}, {("t", 0): 3}, 3)
    try:
        with recorded(cfg, "app") as second:
            second.plan({("t", 0): 3}, {("t", 0): 8})
            raise ValueError("the broker said no")
    except ValueError:
        pass
    runs = read_runs(str(table))
    assert [r.outcome for r in runs] == [FAILED, COMMITTED]
    assert runs[0].message == "the broker said no" and runs[0].rows is None and runs[0].offsets == 5
    assert (runs[1].rows, runs[1].offsets, runs[1].first_version) == (3, 3, 0)
    assert describe_offsets(runs[1].start_offsets, runs[1].end_offsets) == "t 0:0→3"
    assert read_runs(str(table), last=1) == runs[:1]
    assert (tmp_path / "t" / "_pylog_runs" / "_delta_log").is_dir() and runs_path("s3://b/t/").uri == "s3://b/t/_pylog_runs"


def test_a_run_without_an_end_is_running_while_its_process_lives_and_died_after(tmp_path):
    table = tmp_path / "t"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = JobRun("stream_to_delta", "app", str(table))
        run.start()
        assert not table.exists()               # no table yet: recorded when the work begins
        run.begin()
        _commit(table, run.run_id, {("t", 0): 0}, {("t", 0): 7}, 7)
        # the started row names this process; rewrite it as the child's to watch it die
        runs = DeltaTable(runs_path(str(table)).uri).to_pyarrow_dataset().to_table(use_threads=False)
        rows = [{**r, "pid": child.pid} for r in runs.to_pylist()]
        write_deltalake(runs_path(str(table)).uri, pa.Table.from_pylist(rows, schema=runs.schema), mode="overwrite")
        assert read_runs(str(table))[0].outcome == "running"
    finally:
        child.kill()
        child.wait()
    [died] = read_runs(str(table))
    assert died.outcome == "died" and died.ended is None and "committed 1 batch" in died.message
    assert (died.rows, died.offsets, died.last_version) == (7, 7, 0)


def test_a_run_refused_before_any_work_writes_nothing_where_no_table_is(tmp_path):
    cfg = JobConfig("reprocess", {"sink.table.path": str(tmp_path / "t"), "reprocess.target.path": str(tmp_path / "new")})
    try:
        with recorded(cfg, "app"):
            raise ValueError("offsets beyond the log")
    except ValueError:
        pass
    assert not (tmp_path / "new").exists()
