"""Fault injection points for crash tests. Inert unless the test sets the environment variable.

PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT=<batch id>: right after the Delta commit of that batch, and
before Spark writes its own commit log entry, SIGKILL the job's whole process group
(PYLOG_JOB_PGID, set by `pylog job`). This is the window where only the table knows the batch
is done, which exactly-once must survive.
"""
from __future__ import annotations

import os
import signal


def after_delta_commit(batch_id: int) -> None:
    target = os.environ.get("PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT")
    pgid = os.environ.get("PYLOG_JOB_PGID")
    if target is not None and pgid and int(target) == batch_id:
        os.killpg(int(pgid), signal.SIGKILL)
