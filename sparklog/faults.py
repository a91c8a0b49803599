"""Fault injection points for crash tests. Inert unless the test sets the environment variable.

Each point SIGKILLs the job's whole process group (PYLOG_JOB_PGID, set by `pylog job`) when its
variable names the batch at hand:
- PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT=<batch id>: right after the Delta commit of that batch, before
  Spark writes its own commit log entry (connectors.delta_sink);
- PYLOG_FAULT_KILL_AFTER_TXN_COMMIT=<batch id>: right after the exactly-once topic sink committed the
  batch's transactions, before Spark's commit log entry (sparklog.exactly_once_sink).
These are the windows where only the destination knows the batch is done, which exactly-once must survive.
"""
from __future__ import annotations

import os
import signal


def kill_at(variable: str, batch_id: int) -> None:
    target = os.environ.get(variable)
    pgid = os.environ.get("PYLOG_JOB_PGID")
    if target is not None and pgid and int(target) == batch_id:
        os.killpg(int(pgid), signal.SIGKILL)
