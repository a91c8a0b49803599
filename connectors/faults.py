"""Fault injection at the stages of a Delta batch (see sparklog/faults.py for every point and its variable)."""
from __future__ import annotations

from sparklog.faults import kill_at


def after_claim(batch_id: int) -> None:
    """A rebuild has claimed its generation in the table; nothing of its data is written yet (planned)."""
    kill_at("PYLOG_FAULT_KILL_AFTER_CLAIM", batch_id)


def before_delta_commit(batch_id: int) -> None:
    """The batch's data files are written; its Delta commit is not made (written)."""
    kill_at("PYLOG_FAULT_KILL_BEFORE_DELTA_COMMIT", batch_id)


def after_delta_commit(batch_id: int) -> None:
    """The batch's Delta commit is made; Spark's own record of it is not (committed)."""
    kill_at("PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT", batch_id)
