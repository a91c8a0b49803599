"""Progress of a batch job's Spark work: a plan line, then a bar on a terminal or a line every few seconds.

Counts the tasks of every stage of the Spark jobs started inside the `with` block (a job group), so
the count only grows and ends at the total. Never stops the job: reporting errors are logged at debug.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from types import TracebackType
from typing import Any, Optional

log = logging.getLogger("pylog.job.progress")

LINE_INTERVAL_S = 5.0


class BatchProgress:
    def __init__(self, spark: Any, label: str, records: int) -> None:
        self.spark, self.label, self.records = spark, label, records
        self.group = f"pylog-{uuid.uuid4().hex[:8]}"
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pylog-progress", daemon=True)
        self._started = 0.0

    def __enter__(self) -> "BatchProgress":
        self.spark.sparkContext.setJobGroup(self.group, f"pylog {self.label}")
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self._done.set()
        self._thread.join(5)
        self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        if exc is None:
            elapsed = time.monotonic() - self._started
            log.info("%s: done, %d records in %.1f s", self.label, self.records, elapsed)

    def tasks(self) -> tuple[int, int]:
        """(completed, total) tasks of the stages of this group's Spark jobs."""
        tracker = self.spark.sparkContext.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            for sid in (job.stageIds if job else []):
                info = tracker.getStageInfo(sid)
                if info:
                    total += info.numTasks
                    done += info.numCompletedTasks
        return done, total

    def _run(self) -> None:
        try:
            if sys.stderr.isatty():
                self._bar()
            else:
                self._lines()
        except Exception:  # noqa: BLE001 - progress must never stop the job
            log.debug("progress reporting failed", exc_info=True)

    def _lines(self) -> None:
        last = (-1, -1)
        while not self._done.wait(LINE_INTERVAL_S):
            now = self.tasks()
            if now != last and now[1]:
                log.info("%s: %d/%d tasks done (%.0f s)", self.label, now[0], now[1], time.monotonic() - self._started)
                last = now

    def _bar(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn(self.label), BarColumn(), TextColumn("{task.completed}/{task.total} tasks"),
                      TimeElapsedColumn(), transient=True) as bar:
            task = bar.add_task(self.label, total=None)
            while not self._done.wait(0.5):
                done, total = self.tasks()
                if total:
                    bar.update(task, total=total, completed=done)
