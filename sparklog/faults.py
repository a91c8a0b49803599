"""Fault injection points for crash tests. Inert unless the test sets the environment variable.

Each point SIGKILLs the job's whole process group (PYLOG_JOB_PGID, set by `pylog job`) when its
variable names the batch at hand:
- PYLOG_FAULT_KILL_AFTER_CLAIM=<batch id>: a rebuild (`pylog job reprocess`, its one batch is 0) has
  claimed its generation in the table and written nothing else yet: planned (connectors.faults);
- PYLOG_FAULT_KILL_BEFORE_DELTA_COMMIT=<batch id>: the batch's data files are written, its Delta commit
  is not made: written (the pylog-delta sink and the delta-spark commit);
- PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT=<batch id>: right after the Delta commit of that batch, before
  Spark writes its own commit log entry (or a batch job records its run): committed;
- PYLOG_FAULT_KILL_AFTER_TXN_COMMIT=<batch id>: right after the exactly-once topic sink committed the
  batch's transactions, before Spark's commit log entry (sparklog.exactly_once_sink).
The last two are the windows where only the destination knows the batch is done, which exactly-once must
survive; the first two leave a claim or written files that no reader may count as data.
"""
from __future__ import annotations

import os
import signal


def kill_at(variable: str, batch_id: int) -> None:
    target = os.environ.get(variable)
    pgid = os.environ.get("PYLOG_JOB_PGID")
    if target is not None and pgid and int(target) == batch_id:
        os.killpg(int(pgid), signal.SIGKILL)
        # a Spark Python worker (where a data source's commit runs) lives in the process group of PySpark's
        # daemon, not the job's: it would go on with the commit the kill is meant to stop
        os.kill(os.getpid(), signal.SIGKILL)
