"""The jobs page's data: the Delta table each configured job writes, and what its app has stored there.

Owns: reading the `--jobs-config` files (job .properties as conf/jobs/*.properties, through jobs.config.JobConfig:
`sink.table.path`, `sink.app.id` defaulting to the job's name, the file's stem, `source.topics`), and per job one
snapshot of its table through connectors.offset_manager (AppState: version, generation, last batch, the stored
next offsets), the time of the table's last commit (deltalake's history), and each stored offset's lag against
the live topic's high watermark (the caller's `end_offsets`, read through the Kafka protocol), and the job's last
runs as `pylog job status` shows them (jobs.run_history: outcome, offsets, rows, versions, a failure's reason).
Must never: write to a table, or let one job's unreadable table fail the page (that job shows why instead).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pylog.console.messages import iso_time

if TYPE_CHECKING:
    from jobs.run_history import RunSummary

log = logging.getLogger(__name__)

RUNS_SHOWN = 5

TP = tuple[str, int]


class JobsConfigError(ValueError):
    """A --jobs-config file the console cannot use (one line, for the command)."""


@dataclass(frozen=True)
class JobSource:
    name: str
    config_path: str
    table_path: str
    app_id: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class StoredOffset:
    topic: str
    partition: int
    stored: int                     # the next offset the app reads
    end: int | None                 # the live high watermark (None: unknown)

    @property
    def lag(self) -> int | None:
        return None if self.end is None or self.end < 0 else max(0, self.end - self.stored)


@dataclass(frozen=True)
class JobTable:
    job: JobSource
    version: int | None             # None: no table yet
    last_commit: str                # ISO-8601 UTC, empty when unknown
    generation: int | None
    last_batch: int | None
    offsets: tuple[StoredOffset, ...]
    problem: str | None = None      # why the table or the offsets could not be read
    runs: tuple["RunSummary", ...] = ()   # the last runs, newest first

    @property
    def total_lag(self) -> int | None:
        lags = [o.lag for o in self.offsets if o.lag is not None]
        return sum(lags) if lags else None


def load_job(path: str) -> JobSource:
    """A job's table and app from its .properties file; JobsConfigError names the file and the problem."""
    from jobs.config import JobConfig, JobConfigError

    name = Path(path).stem
    try:
        cfg = JobConfig.load(name, path)
        table = cfg.require("sink.table.path")
    except JobConfigError as e:
        raise JobsConfigError(f"--jobs-config {path}: {e}") from None
    return JobSource(name, str(path), table, cfg.get("sink.app.id", name), tuple(cfg.list("source.topics")))


def read_job(job: JobSource, end_offsets: Callable[[list[TP]], dict[TP, int]]) -> JobTable:
    """One snapshot of the job's table; a table that cannot be read is a JobTable with `problem` set."""
    from connectors.delta_commit import open_table
    from connectors.offset_manager import OffsetManager

    try:
        state = OffsetManager(job.table_path, job.app_id).state()
        table = open_table(job.table_path) if state.table_version >= 0 else None
        history = table.history(1) if table is not None else []
    except Exception as e:  # noqa: BLE001 - one job's table must not fail the page
        log.debug("job %s: cannot read %s", job.name, job.table_path, exc_info=True)
        return JobTable(job, None, "", None, None, (), f"cannot read the table {job.table_path}: {e}")
    runs = _runs(job)
    if state.table_version < 0:
        return JobTable(job, None, "", None, None, (), f"no table at {job.table_path} yet: the job has not "
                        f"committed a batch", runs)
    last_commit = iso_time(int(history[0].get("timestamp", -1))) if history else ""
    stored = sorted(state.offsets.items())
    ends: dict[TP, int] = {}
    problem = None
    if stored:
        try:
            ends = end_offsets([tp for tp, _ in stored])
        except Exception as e:  # noqa: BLE001 - the page still shows the table; lag is unknown
            problem = f"lag unknown: {e}"
    offsets = tuple(StoredOffset(t, p, o, ends.get((t, p))) for (t, p), o in stored)
    return JobTable(job, state.table_version, last_commit, state.generation, state.last_batch, offsets, problem, runs)


def _runs(job: JobSource) -> tuple["RunSummary", ...]:
    from jobs.run_history import read_runs

    try:
        return tuple(read_runs(job.table_path, RUNS_SHOWN))
    except Exception:  # noqa: BLE001 - the history is an extra: the page shows the table without it
        log.debug("job %s: cannot read its runs", job.name, exc_info=True)
        return ()
