"""Running a job's streaming query: progress per batch, graceful stop on a signal, failure as one line."""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable

from jobs.errors import JobFailed, root_cause
from jobs.signals import STOPPER
from sparklog.offsets import PartitionOffsets, from_offset_dict

log = logging.getLogger("pylog.job")


def _ran(progress: Any) -> bool:
    """Whether a progress event reports a batch that ran: a processing-time query also reports idle triggers,
    under the id of the batch still to come, with 0 rows."""
    return "addBatch" in (progress.durationMs or {})


def source_offsets(raw: str | None) -> PartitionOffsets:
    """A source offset of Spark's progress (the streaming offset JSON, topic ids aside); {} when none."""
    value = json.loads(raw) if raw else None
    return from_offset_dict(value) if isinstance(value, dict) else {}


def supervise(query: Any, on_progress: Callable[[Any], None]) -> int:
    """Run a streaming query to its end: each batch that ran reported once, a stop signal honoured after the
    batch in flight, a failure raised as JobFailed naming its root cause."""
    STOPPER.graceful = True
    stop = STOPPER.requested
    seen = -1
    while query.isActive:
        query.awaitTermination(0.5)
        # the last progress only, unless a batch ran since: recentProgress serialises up to a hundred reports
        # in the JVM on every call (most of a long job's driver CPU when polled twice a second)
        last = query.lastProgress
        if last is not None and last.batchId > seen and (_ran(last) or last.batchId > seen + 1):
            for p in query.recentProgress:
                if p.batchId > seen and _ran(p):
                    seen = p.batchId
                    on_progress(p)
        if stop.is_set():
            log.info("stopping after the batch in flight (signal received; a second one stops at once)")
            while query.isActive and query.status.get("isTriggerActive"):
                time.sleep(0.2)
            query.stop()
    for p in query.recentProgress:
        if p.batchId > seen and _ran(p):
            seen = p.batchId
            on_progress(p)
    exc = query.exception()
    if exc is not None:
        raise JobFailed(root_cause(exc))
    return 0
