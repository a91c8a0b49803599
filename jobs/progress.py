"""Progress of a batch job in records: a bar with records/s and the time left on a terminal, else a line every few
seconds.

The job passes `progress.address` to its read as option progressAddress; the source's tasks report the rows they
read as they go (sparklog.read_progress), so the count moves with the records, not with whole Spark tasks. The
total is the plan's number of offsets: a read_committed read (aborted records, transaction markers) or a filter
may end below it. Never stops the job: reporting errors are logged at debug.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from types import TracebackType
from typing import Any, Optional

from sparklog.read_progress import ProgressListener

log = logging.getLogger("pylog.job.progress")

LINE_INTERVAL_S = 5.0


def describe(done: int, total: int, seconds: float) -> str:
    """'120,000/300,000 records (40%), 52,000 records/s, about 4 s left'."""
    rate = done / seconds if seconds > 0 else 0.0
    text = f"{done:,}/{total:,} records ({100 * done / total:.0f}%)" if total else f"{done:,} records"
    if rate > 0:
        text += f", {rate:,.0f} records/s"
        if total > done:
            text += f", about {(total - done) / rate:,.0f} s left"
    return text


class BatchProgress:
    def __init__(self, spark: Any, label: str, records: int) -> None:
        self.label, self.records = label, records
        self._listener = ProgressListener(_driver_host(spark))
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pylog-progress", daemon=True)
        self._started = 0.0

    @property
    def address(self) -> str:
        """The value of the read's option progressAddress."""
        return self._listener.address

    @property
    def done(self) -> int:
        return self._listener.records

    def __enter__(self) -> "BatchProgress":
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self._done.set()
        self._thread.join(5)
        self._listener.close()
        if exc is None:
            elapsed = time.monotonic() - self._started
            log.info("%s: done, %s records read in %.1f s", self.label, f"{self.done:,}", elapsed)

    def _run(self) -> None:
        try:
            if sys.stderr.isatty():
                self._bar()
            else:
                self._lines()
        except Exception:  # noqa: BLE001 - progress must never stop the job
            log.debug("progress reporting failed", exc_info=True)

    def _lines(self) -> None:
        last = -1
        while not self._done.wait(LINE_INTERVAL_S):
            done = self.done
            if done != last:
                log.info("%s: %s", self.label, describe(done, self.records, time.monotonic() - self._started))
                last = done

    def _bar(self) -> None:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        with Progress(TextColumn(self.label), BarColumn(), TaskProgressColumn(),
                      TextColumn("{task.completed:,.0f}/{task.total:,.0f} records"),
                      TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), transient=True) as bar:
            task = bar.add_task(self.label, total=self.records or None, rate="")
            while not self._done.wait(0.5):
                done = self.done
                seconds = time.monotonic() - self._started
                bar.update(task, completed=done, rate=f"{done / seconds:,.0f} records/s" if seconds > 0 else "")


def _driver_host(spark: Any) -> str:
    """Where executors reach the driver (local mode: this machine)."""
    try:
        return str(spark.conf.get("spark.driver.host", "127.0.0.1"))
    except Exception:  # noqa: BLE001
        return "127.0.0.1"
