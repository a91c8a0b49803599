"""Each job run, recorded beside the table it writes: what ran, from which offsets to which, when, how many
records, and how it ended (committed, nothing new, failed and why, stopped by a signal).

The table's own commits are the truth for what a run committed: every commit of the sink carries the run's id
(`pylog.runId` in its commitInfo, connectors.delta_commit / delta_spark_commit), with its rows and its start and
end offsets. What the table cannot hold is a run that committed nothing: one that failed, was stopped, or found
nothing new. So each run also appends two rows to a small Delta table of its own, `<table>/_pylog_runs` (Delta
and VACUUM, delta-rs' and delta-spark's, skip directories whose names start with `_`): a `started` row when it
begins and an `ended` row with the outcome, the run's commits summed from the table's history, and the error's
one line. A run refused before it did any work (a bad setting, an offset beyond the log) writes nothing where
no table is yet: its `started` row waits until the job has planned its work (`plan`, `begin`) or the table
exists. A run killed with SIGKILL leaves only its `started` row; `pylog job status` then shows what it
committed before it died (from the table's history) and whether its process is still alive.
stream_to_topic writes no Delta table: its runs go to `<sink.checkpoint.location>/_pylog_runs`.

Recording never fails a job: a history that cannot be written is a warning.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import pyarrow as pa

from connectors.table_location import TableLocation, TableRef
from jobs.config import JobConfig
from jobs.errors import root_cause
from jobs.job_metrics import JobMetrics
from jobs.signals import STOPPER, JobInterrupted
from sparklog.offsets import PartitionOffsets, from_json, to_json
from sparklog.planner import backlog

log = logging.getLogger("pylog.job.runs")

RUNS_DIR = "_pylog_runs"
HISTORY_LIMIT = 1000        # newest commits of the table searched for a run's own
COMPACT_EVERY = 100         # versions of the runs table between compactions (two small files per run)

SCHEMA = pa.schema([
    ("run_id", pa.string()), ("job", pa.string()), ("app_id", pa.string()), ("event", pa.string()),
    ("time", pa.timestamp("us", tz="UTC")), ("host", pa.string()), ("pid", pa.int64()),
    ("outcome", pa.string()), ("message", pa.string()),
    ("start_offsets", pa.string()), ("end_offsets", pa.string()), ("offsets", pa.int64()),
    ("rows", pa.int64()), ("batches", pa.int64()), ("first_version", pa.int64()), ("last_version", pa.int64()),
])

COMMITTED, NOTHING_NEW, DONE, FAILED, STOPPED = "committed", "nothing new", "done", "failed", "stopped"


def table_of(cfg: JobConfig) -> TableLocation:
    """The Delta table a job's run writes (for stream_to_topic, which writes none: its checkpoint location)."""
    if cfg.name == "stream_to_topic":
        return TableLocation.of(cfg.require("sink.checkpoint.location"))
    if cfg.name == "reprocess" and cfg.get("reprocess.mode", "new-table") != "replace":
        return cfg.table("reprocess.target.path")
    return cfg.table()


def runs_path(table: TableRef) -> TableLocation:
    return TableLocation.of(table).child(RUNS_DIR)


@dataclass
class RunCommits:
    """What one run committed to the table, summed from the table's history (commits tagged with its id)."""

    batches: int = 0
    rows: int = 0
    first_version: int | None = None
    last_version: int | None = None
    start_offsets: PartitionOffsets = field(default_factory=dict)
    end_offsets: PartitionOffsets = field(default_factory=dict)

    @property
    def offsets(self) -> int:
        return backlog(self.start_offsets, self.end_offsets) if self.end_offsets else 0


def commit_tags(info: Mapping[str, Any]) -> dict[str, str]:
    """pylog's entries of a commitInfo: delta-rs puts custom metadata at the top level, delta-spark in `tags`."""
    tags = {k: str(v) for k, v in (info.get("tags") or {}).items() if k.startswith("pylog.")}
    tags.update({k: str(v) for k, v in info.items() if k.startswith("pylog.")})
    return tags


def commits_by_run(history: list[dict[str, Any]]) -> dict[str, RunCommits]:
    """{run id: its commits}, from a table's history (any order)."""
    out: dict[str, RunCommits] = {}
    for info in sorted(history, key=lambda i: int(i.get("version", -1))):
        tags = commit_tags(info)
        run_id = tags.get("pylog.runId")
        if not run_id:
            continue
        c = out.setdefault(run_id, RunCommits())
        version = int(info.get("version", -1))
        c.batches += 1
        c.rows += int(tags.get("pylog.rows", "0") or 0)
        c.first_version = version if c.first_version is None else c.first_version
        c.last_version = version
        try:
            if "pylog.startOffsets" in tags and not c.start_offsets:
                c.start_offsets = from_json(tags["pylog.startOffsets"])
            if "pylog.offsets" in tags:
                c.end_offsets = from_json(tags["pylog.offsets"])
        except ValueError:
            continue
    return out


def table_history(table: TableRef, limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
    """The newest `limit` commits of `table` ([] when there is no table)."""
    from deltalake.exceptions import TableNotFoundError

    try:
        return list(TableLocation.of(table).delta().history(limit))
    except TableNotFoundError:
        return []


class JobRun:
    """One run of a job: its id (passed to the sink, which tags each commit with it), its two history rows."""

    def __init__(self, job: str, app_id: str, table: TableRef, success: str = NOTHING_NEW,
                 metrics: JobMetrics | None = None) -> None:
        self.job, self.app_id, self.table = job, app_id, TableLocation.of(table)
        self.metrics = metrics
        self.success = success     # the outcome of a run that ends without error and commits nothing
        self.run_id = uuid.uuid4().hex[:12]
        self.started_at = time.time()
        self.planned: tuple[PartitionOffsets, PartitionOffsets] | None = None
        self.streamed = RunCommits()     # what a stream without Delta commits (stream_to_topic) reports per batch
        self._started_written = False
        self._started_row: dict[str, Any] | None = None

    def plan(self, starts: PartitionOffsets, ends: PartitionOffsets) -> None:
        """The offsets a batch run means to load (recorded when it commits nothing: a failure, nothing new); the
        run's work begins."""
        self.planned = (dict(starts), dict(ends))
        self.begin()

    def begin(self) -> None:
        """The run has checked its settings and starts its work: its `started` row is written now if not yet."""
        if not self._started_written:
            self._started_written = True
            self._append(self._started_row or self._row("started"))     # with the time the run began

    def batch(self, rows: int, starts: PartitionOffsets, ends: PartitionOffsets, lag: int | None = None,
              version: int | None = None) -> None:
        """A micro-batch a stream finished: into the metrics, and into the run's record when the table does not
        record it (stream_to_topic)."""
        if self.metrics is not None:
            self.metrics.batch(rows, lag, version)
        s = self.streamed
        s.batches += 1
        s.rows += rows
        s.start_offsets = s.start_offsets or dict(starts)
        s.end_offsets = dict(ends) or s.end_offsets

    def committed(self) -> RunCommits:
        """This run's commits, read back from the table's history."""
        return commits_by_run(table_history(self.table)).get(self.run_id, RunCommits())

    def _row(self, event: str, outcome: str | None = None, message: str | None = None,
             commits: RunCommits | None = None) -> dict[str, Any]:
        c = commits or RunCommits()
        starts, ends = c.start_offsets, c.end_offsets
        if not c.batches and self.planned is not None:
            starts, ends = self.planned
        return {"run_id": self.run_id, "job": self.job, "app_id": self.app_id, "event": event,
                "time": dt.datetime.now(dt.timezone.utc), "host": socket.gethostname(), "pid": os.getpid(),
                "outcome": outcome, "message": message,
                "start_offsets": to_json(starts) if starts else None, "end_offsets": to_json(ends) if ends else None,
                "offsets": backlog(starts, ends) if ends else None, "rows": c.rows if c.batches else None,
                "batches": c.batches, "first_version": c.first_version, "last_version": c.last_version}

    def _append(self, row: dict[str, Any]) -> None:
        from deltalake import write_deltalake

        path = runs_path(self.table)
        try:
            write_deltalake(path.uri, pa.Table.from_pylist([row], schema=SCHEMA), mode="append",
                            storage_options=path.storage_options() or None)
            version = path.delta().version()
            if version > 0 and version % COMPACT_EVERY == 0:
                _compact(path)
        except Exception as e:  # noqa: BLE001 - the history must never fail the job it records
            log.warning("could not record run %s of job %s in %s: %s", self.run_id, self.job, path, e)

    def start(self) -> None:
        """The run begins: recorded at once beside an existing table, else when its work begins (`begin`)."""
        self._started_row = self._row("started")
        if _exists(self.table):
            self.begin()

    def end(self, outcome: str, message: str | None = None) -> RunCommits:
        try:
            commits = self.committed()
        except Exception as e:  # noqa: BLE001
            log.warning("could not read the history of %s: %s", self.table, e)
            commits = RunCommits()
        if not commits.batches and self.streamed.batches:
            commits = self.streamed
        if outcome == NOTHING_NEW and commits.batches:
            outcome = COMMITTED
        if not self._started_written:
            if not _exists(self.table):
                return commits           # refused before any work, and no table: nothing to write beside
            self.begin()
        self._append(self._row("ended", outcome, message, commits))
        if self.metrics is not None:
            if not self.streamed.batches and commits.batches:    # a batch job: its commits, once at its end
                self.metrics.records.inc(commits.rows)
                self.metrics.batches.inc(commits.batches)
                self.metrics.version.set(commits.last_version or 0)
                self.metrics.last_batch.set(time.time())
            self.metrics.end(outcome)
        return commits


def _exists(table: TableLocation) -> bool:
    """Whether the table's location holds anything yet (object stores: assumed, the job says otherwise)."""
    return not table.is_local or Path(table.uri).exists()


def _compact(path: TableLocation) -> None:
    """Two small files per run add up: compact them, checkpoint the log, and drop what no version needs."""
    dt_ = path.delta()
    dt_.optimize.compact()
    dt_.create_checkpoint()
    dt_.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt_.cleanup_metadata()


@contextmanager
def recorded(cfg: JobConfig, app_id: str, success: str = NOTHING_NEW) -> Iterator[JobRun]:
    """A job run recorded from start to end; its outcome is taken from how the block ends (`success` when it
    ends without error and without commits of its own)."""
    table = table_of(cfg)
    # a table on an object store that cannot be reached fails the run here, in one line, before anything starts
    for location in {table, cfg.table()} if cfg.get("sink.table.path") else {table}:
        location.check_store()
    run = JobRun(cfg.name, app_id, table, success, JobMetrics.from_config(cfg, app_id))
    run.start()
    try:
        yield run
    except JobInterrupted as e:
        run.end(STOPPED, f"stopped by {e} before it committed")
        raise
    except BaseException as e:
        if STOPPER.signum is not None:
            run.end(STOPPED, f"stopped by {STOPPER.signal_name}")
        else:
            run.end(FAILED, root_cause(e) if isinstance(e, Exception) else type(e).__name__)
        raise
    else:
        if STOPPER.signum is not None:    # a stream stopped after its batch in flight
            run.end(STOPPED, f"stopped by {STOPPER.signal_name} after the batch in flight")
        else:
            run.end(run.success)


@dataclass(frozen=True)
class RunSummary:
    """One run as `pylog job status` shows it: its rows merged, and its commits where it recorded none."""

    run_id: str
    job: str
    app_id: str
    started: dt.datetime
    ended: dt.datetime | None
    outcome: str            # committed | nothing new | failed | stopped | running | died
    message: str | None
    host: str
    pid: int
    start_offsets: str | None
    end_offsets: str | None
    offsets: int | None
    rows: int | None
    batches: int
    first_version: int | None
    last_version: int | None

    @property
    def seconds(self) -> float | None:
        return None if self.ended is None else (self.ended - self.started).total_seconds()


def _alive(host: str, pid: int) -> bool:
    if host != socket.gethostname():
        return True     # another machine's process: cannot tell, assume it runs
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_runs(table: TableRef, last: int = 10) -> list[RunSummary]:
    """The last `last` runs recorded for `table`, newest first ([] when none)."""
    from deltalake.exceptions import TableNotFoundError

    import pyarrow.parquet as pq

    runs = runs_path(table)
    try:
        uris = runs.delta().file_uris()
    except TableNotFoundError:
        return []
    # the files read by pyarrow itself: a scan through delta-rs' dataset (its file system called from arrow's I/O
    # threads) sometimes aborted the process at exit ("terminate called without an active exception")
    rows = [row for uri in uris for row in pq.read_table(_file(runs, uri), use_threads=False).to_pylist()]
    starts = {r["run_id"]: r for r in rows if r["event"] == "started"}
    ends = {r["run_id"]: r for r in rows if r["event"] == "ended"}
    newest = sorted(starts.values(), key=lambda r: r["time"], reverse=True)[:last]
    unfinished = [r["run_id"] for r in newest if r["run_id"] not in ends]
    commits = commits_by_run(table_history(table)) if unfinished else {}
    out = []
    for s in newest:
        e = ends.get(s["run_id"])
        if e is not None:
            out.append(_summary(s, e, e["outcome"], e["message"], e["time"]))
            continue
        c = commits.get(s["run_id"], RunCommits())
        alive = _alive(s["host"], int(s["pid"]))
        outcome = "running" if alive else "died"
        message = None if alive else ("the process ended without recording its end (killed?)"
                                      + (f"; it had committed {c.batches} batch(es)" if c.batches else
                                         "; it committed nothing"))
        filled = {**s, "start_offsets": to_json(c.start_offsets) if c.start_offsets else None,
                  "end_offsets": to_json(c.end_offsets) if c.end_offsets else None,
                  "offsets": c.offsets if c.end_offsets else None, "rows": c.rows if c.batches else None,
                  "batches": c.batches, "first_version": c.first_version, "last_version": c.last_version}
        out.append(_summary(s, filled, outcome, message, None))
    return out


def _file(table: TableLocation, uri: str) -> Any:
    """A pyarrow file for the URI of a data file of `table` (a local path, or an object in the table's store)."""
    if "://" not in uri or uri.startswith("file://"):
        return uri.removeprefix("file://")
    filesystem, _ = table.filesystem()
    return filesystem.open_input_file(uri.split("://", 1)[1])


def _summary(s: dict[str, Any], e: dict[str, Any], outcome: str, message: str | None,
             ended: dt.datetime | None) -> RunSummary:
    """A run from its `started` row `s` and the row `e` holding its figures (its `ended` row, or `s` filled in)."""
    return RunSummary(s["run_id"], s["job"], s["app_id"], s["time"], ended, outcome,
                      message, s["host"], int(s["pid"]), e["start_offsets"], e["end_offsets"], e["offsets"],
                      e["rows"], int(e["batches"] or 0), e["first_version"], e["last_version"])


def describe_offsets(start_json: str | None, end_json: str | None) -> str:
    """'events 0:0→250 1:0→250' for a run's range; '-' when it has none."""
    if not end_json:
        return "-"
    ends = from_json(end_json)
    starts = from_json(start_json) if start_json else {}
    by_topic: dict[str, list[str]] = {}
    for (t, p), o in sorted(ends.items()):
        by_topic.setdefault(t, []).append(f"{p}:{starts.get((t, p), '?')}→{o}")
    return " ".join(f"{t} {' '.join(parts)}" for t, parts in by_topic.items())


def as_json(s: RunSummary) -> str:
    return json.dumps({"run": s.run_id, "job": s.job, "app": s.app_id, "started": s.started.isoformat(),
                       "ended": s.ended.isoformat() if s.ended else None, "outcome": s.outcome, "message": s.message,
                       "startOffsets": json.loads(s.start_offsets) if s.start_offsets else None,
                       "endOffsets": json.loads(s.end_offsets) if s.end_offsets else None, "offsets": s.offsets,
                       "rows": s.rows, "batches": s.batches, "firstVersion": s.first_version,
                       "lastVersion": s.last_version}, sort_keys=True)
