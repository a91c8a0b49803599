"""Fault injection after a Delta commit (see sparklog/faults.py for every point and its variable)."""
from __future__ import annotations

from sparklog.faults import kill_at


def after_delta_commit(batch_id: int) -> None:
    kill_at("PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT", batch_id)
