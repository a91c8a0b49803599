"""Whose a streaming checkpoint is, and whether it still agrees with the table it writes.

A checkpoint is a cache of the table's truth: it may be reused only by the table and app it was made
for. `OWNER_FILE` in the checkpoint directory records the table (path and Delta table id) and app id
(and, for the plain `pylog-delta` sink, the generation); any other table or app is refused with
CheckpointMismatchError, and nothing is renamed or rewritten. A checkpoint made before owner files
existed is adopted by the first job that resumes it.

`disagreement` is the rule a job applies before it resumes its own checkpoint: the last batch the
table holds for the generation must be the checkpoint's last committed or last planned batch, and the
table's offsets must be that batch's end (or, before any batch, the query's origin). Otherwise another
writer of the app (a batch_load, a rival stream) moved the table on, and the job starts a new generation
from the table instead of trusting the checkpoint.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.errors import CheckpointMismatchError
from connectors.offset_txns import AppState
from connectors.spark_checkpoint import CheckpointProgress
from sparklog.offsets import PartitionOffsets, to_json

log = logging.getLogger(__name__)

OWNER_FILE = "pylog-checkpoint.json"
LEGACY_SINK_FILE = "pylog-delta-sink.json"   # the plain sink's file before owner files: {appId, generation}


@dataclass(frozen=True)
class Owner:
    table: str
    table_id: str | None
    app_id: str
    generation: int | None = None

    def to_json(self) -> str:
        return json.dumps({"table": self.table, "tableId": self.table_id, "appId": self.app_id,
                           "generation": self.generation}, sort_keys=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Owner":
        gen = data.get("generation")
        return cls(str(data.get("table", "")), data.get("tableId"), str(data.get("appId", "")),
                   None if gen is None else int(gen))


def read(directory: Path) -> Owner | None:
    """The owner recorded in `directory` (legacy sink files give an app id and generation), or None."""
    f = directory / OWNER_FILE
    if f.exists():
        return Owner.from_json(json.loads(f.read_text()))
    legacy = directory / LEGACY_SINK_FILE
    if legacy.exists():
        data = json.loads(legacy.read_text())
        return Owner("", None, str(data.get("appId", "")), int(data["generation"]) if "generation" in data else None)
    return None


def write(directory: Path, owner: Owner) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (OWNER_FILE + ".tmp")
    tmp.write_text(owner.to_json())
    tmp.replace(directory / OWNER_FILE)


def mismatch(found: Owner, wanted: Owner) -> str | None:
    """What differs between the checkpoint's owner and the writer that wants it (None: the same owner)."""
    if found.app_id != wanted.app_id:
        return f"it belongs to app {found.app_id!r}" + (f" writing {found.table}" if found.table else "")
    if found.table and found.table != wanted.table:
        return f"it belongs to table {found.table}"
    if found.table_id and wanted.table_id and found.table_id != wanted.table_id:
        return (f"it was made for another table at the same path (Delta table id {found.table_id}, now "
                f"{wanted.table_id}: the table was deleted and created again)")
    return None


def check(directory: Path, wanted: Owner, what: str, table_exists: bool = True) -> Owner | None:
    """Raise CheckpointMismatchError when `directory` belongs to another table or app, or to a table that is
    gone (`table_exists` false for a checkpoint that recorded one); returns the owner found (None: no owner
    recorded yet). `what` names the setting or option that chose the directory."""
    found = read(directory)
    if found is None:
        return None
    why = mismatch(found, wanted)
    if why is None and found.table_id and not table_exists:
        why = f"it was made for the table at {found.table or wanted.table}, which no longer exists"
    if why is not None:
        raise CheckpointMismatchError(wanted.table, f"the checkpoint {directory} ({what}) cannot be used by app "
                                      f"{wanted.app_id!r}: {why}. Nothing was changed; give each query its own "
                                      "checkpoint location (or delete this one to start from the table's offsets)")
    return found


def _differs(a: PartitionOffsets, state: AppState, ids: dict[str, str] | None = None) -> dict:
    """Partitions where the checkpoint's offsets `a` (taken with topic ids `ids`) and the table's differ: another
    offset, one the table stores for a topic of `a` that `a` lacks (the table moved on in a partition the
    checkpoint never read), or one the table took from another incarnation of the topic (a writer of the app
    read the re-created topic since: the table's ids are the latest the app committed)."""
    def other_log(topic: str) -> bool:
        have, mine = state.topic_ids.get(topic), (ids or {}).get(topic)
        return have is not None and mine is not None and have != mine

    topics = {t for t, _ in a}
    return {tp: (a.get(tp), o) for tp, o in state.offsets.items()
            if tp[0] in topics and (a.get(tp) != o or other_log(tp[0]))}


def disagreement(progress: CheckpointProgress, state: AppState, generation: int) -> str | None:
    """Why the checkpoint of `generation` must not be resumed against the table's `state` (None: it agrees)."""
    marker = state.marker(generation)
    if marker is None:
        if progress.planned == 0 and progress.committed is None and progress.origin is None:
            return "its first batch has no recorded start (a checkpoint of an older pylog, or another source)"
        if progress.committed is not None:
            return (f"the checkpoint committed batch {progress.committed} but the table holds no batch of generation "
                    f"{generation}")
        if progress.origin is not None and _differs(progress.origin, state):
            return (f"its first batch starts at {to_json(progress.origin)} but the table's offsets are "
                    f"{to_json(state.offsets)}")
        return None
    if marker not in {progress.committed, progress.planned}:
        return (f"the table's last batch of generation {generation} is {marker}, but the checkpoint planned up to "
                f"{progress.planned} and committed up to {progress.committed}")
    end = progress.ends.get(marker)
    if end is not None and _differs(end, state, progress.topic_ids.get(marker)):
        return (f"batch {marker} ends at {to_json(end)} in the checkpoint but the table's offsets are "
                f"{to_json(state.offsets)}: another writer of the app committed since")
    return None
