"""Driver side of the Delta sink: one Delta commit per batch holding data files, marker and offsets.

Owns the exactly-once rule, by batch identity:
  - A batch is (app id, generation, batch id). It is a replay, skipped with its files removed, only
    if the table's marker for (app id, generation) is at or beyond its batch id. Offsets never decide
    whether rows are dropped: after a re-created topic, new records have lower offsets than the
    stored ones and must still be written.
  - Generations fence writers. A writer that starts over (lost checkpoint, reprocess replace,
    another stream with the same app id) first claims a new generation with `claim_generation`;
    from then on a commit of an older generation fails with FencedError, and nothing is deleted.
  - Every commit is made against the snapshot just checked, with no silent rebase: when another
    writer commits first, the rule is checked again on the new snapshot. An append then goes on; an
    overwrite made against `read_version` fails with CommitConflictError rather than removing files
    it never read.
Schema checks and merges happen here too. Never reads source data.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from connectors.delta_log_reader import read_app_transactions
from connectors.errors import CommitConflictError, FencedError, SchemaMismatchError
from connectors.offset_txns import (
    AppState,
    generation_app_id,
    marker_app_id,
    offsets_to_txns,
    topic_ids_to_txns,
)
from connectors.parquet_files import remove_files
from sparklog.offsets import PartitionOffsets, to_json

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 50   # each attempt follows another writer's successful commit

__all__ = ["BatchCommit", "SchemaMismatchError", "FencedError", "CommitConflictError", "commit_batch",
           "claim_generation", "app_state", "committed_offsets", "current_generation", "open_table"]


@dataclass
class BatchCommit:
    table_path: str
    app_id: str
    batch_id: int
    files: list[dict[str, Any]]
    schema: pa.Schema
    generation: int = 0
    end_offsets: PartitionOffsets | None = None
    partition_by: list[str] = field(default_factory=list)
    merge_schema: bool = False
    mode: Literal["append", "overwrite"] = "append"   # overwrite: replace the table's contents atomically
    extra_metadata: dict[str, str] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    read_version: int | None = None   # overwrite: the version whose files it replaces (None: the latest)


def open_table(path: str) -> DeltaTable | None:
    try:
        return DeltaTable(path)
    except TableNotFoundError:
        return None


def app_state(path: str, app_id: str) -> AppState:
    """What `app_id` has stored in the table, from one consistent snapshot (empty when no table)."""
    if not (Path(path) / "_delta_log").exists():
        return AppState()
    version, txns = read_app_transactions(path)
    return AppState.from_txns(version, txns, app_id)


def committed_offsets(path: str, app_id: str) -> PartitionOffsets:
    """{(topic, partition): next offset} stored in the table for `app_id` (empty when none)."""
    return app_state(path, app_id).offsets


def current_generation(path: str, app_id: str) -> int | None:
    dt = open_table(path)
    return None if dt is None else dt.transaction_version(generation_app_id(app_id))


def _delta_schema_compatible(table: pa.Schema, batch: pa.Schema, merge: bool, path: str) -> pa.Schema | None:
    """The schema to commit with: None when unchanged; raises SchemaMismatchError naming the columns."""
    wrong = []
    for f in batch:
        if f.name in table.names:
            t = table.field(f.name).type
            if t != f.type and not (pa.types.is_timestamp(t) and pa.types.is_timestamp(f.type)):
                wrong.append(f"{f.name} (table {t}, batch {f.type})")
    if wrong:
        raise SchemaMismatchError(path, f"incompatible column types: {', '.join(wrong)}")
    new = [f for f in batch if f.name not in table.names]
    if not new:
        return None
    names = ", ".join(f.name for f in new)
    if not merge:
        raise SchemaMismatchError(path, f"the batch has columns not in the table: {names}. "
                                  "Set option mergeSchema=true to add them as nullable columns.")
    return pa.schema(list(table) + [pa.field(f.name, f.type, True) for f in new])


def ensure_table(path: str, schema: pa.Schema, partition_by: list[str] | None = None) -> DeltaTable:
    dt = open_table(path)
    if dt is None:
        Path(path).mkdir(parents=True, exist_ok=True)
        dt = DeltaTable.create(path, schema=schema, partition_by=partition_by or None, mode="ignore")
        log.info("created Delta table %s partitioned by %s", path, partition_by or "nothing")
    return dt


def _props(metadata: Mapping[str, str], txns: Mapping[str, int]) -> CommitProperties:
    return CommitProperties(custom_metadata=dict(metadata), max_commit_retries=0,
                            app_transactions=[Transaction(k, v) for k, v in txns.items()])


def _commits_since(dt: DeltaTable, version: int) -> str:
    """Who committed after `version`: 'version V by app A (operation)', for conflict messages."""
    seen = []
    for h in dt.history(max(1, dt.version() - version)):
        if int(h.get("version", -1)) > version:
            seen.append(f"version {h.get('version')} by {h.get('pylog.appId', 'another writer')} ({h.get('operation')})")
    return ", ".join(sorted(seen)) or f"versions after {version}"


def _skip_reason(dt: DeltaTable, c: BatchCommit) -> str | None:
    """Why `c` must not be committed on this snapshot: None to commit; raises when it must stop."""
    marker = dt.transaction_version(marker_app_id(c.app_id, c.generation))
    if marker is not None and marker >= c.batch_id:
        return f"marker {marker_app_id(c.app_id, c.generation)}={marker} >= batch {c.batch_id}"
    generation = dt.transaction_version(generation_app_id(c.app_id))
    if generation is not None and generation > c.generation:
        remove_files(c.table_path, c.files)
        raise FencedError(c.table_path, f"app {c.app_id} generation {c.generation} was superseded by generation "
                          f"{generation} (a reprocess replace, or another stream started with the same app id); "
                          f"batch {c.batch_id} was not committed. Restart the job: it resumes from the offsets "
                          "in the table.", dt.version())
    if c.mode == "overwrite" and c.read_version is not None and dt.version() > c.read_version:
        remove_files(c.table_path, c.files)
        raise CommitConflictError(c.table_path, f"the overwrite by app {c.app_id} read version {c.read_version}, "
                                  f"but {_commits_since(dt, c.read_version)} came after it; replacing now would "
                                  "delete those rows. Nothing was replaced: stop the other writers and run it "
                                  "again.", dt.version())
    return None


def _merge_schema(dt: DeltaTable, c: BatchCommit) -> DeltaTable:
    table_schema = pa.schema(dt.schema().to_arrow())
    merged = _delta_schema_compatible(table_schema, c.schema, c.merge_schema, c.table_path)
    if merged is None:
        return dt
    new_cols = [f for f in merged if f.name not in table_schema.names]
    dt.alter.add_columns(list(DeltaSchema.from_arrow(pa.schema(new_cols)).fields))
    log.info("Delta table %s: added nullable columns %s", c.table_path, [f.name for f in new_cols])
    return DeltaTable(c.table_path)


def commit_batch(c: BatchCommit) -> bool:
    """Make the batch's single Delta commit. Returns False when it was a replay (its files removed).

    Raises FencedError, CommitConflictError or SchemaMismatchError (the batch's files removed).
    """
    ensure_table(c.table_path, c.schema, c.partition_by)
    actions: list[AddAction | RemoveAction] = [AddAction(f["path"], f["size"], f["partition_values"], f["modification_time"], True,
                         f"{{\"numRecords\": {f['num_records']}}}") for f in c.files]
    metadata: dict[str, Any] = {"pylog.appId": c.app_id, "pylog.batchId": str(c.batch_id),
                                "pylog.generation": str(c.generation), **c.extra_metadata}
    if c.end_offsets:
        metadata["pylog.offsets"] = to_json(c.end_offsets)
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        dt = DeltaTable(c.table_path)
        reason = _skip_reason(dt, c)
        if reason:
            log.info("Delta table %s: skipping replayed batch %d of %s: %s", c.table_path, c.batch_id, c.app_id, reason)
            remove_files(c.table_path, c.files)
            return False
        try:
            dt = _merge_schema(dt, c)
        except SchemaMismatchError:
            remove_files(c.table_path, c.files)
            raise
        txns = {marker_app_id(c.app_id, c.generation): c.batch_id, generation_app_id(c.app_id): c.generation,
                **topic_ids_to_txns(c.app_id, c.topic_ids, dt.version() + 1)}
        if c.end_offsets:
            txns.update(offsets_to_txns(c.app_id, c.end_offsets))
        try:
            dt.create_write_transaction(actions, mode=c.mode, schema=dt.schema(),
                                        partition_by=c.partition_by or None, commit_properties=_props(metadata, txns))
        except CommitFailedError as e:
            log.info("Delta table %s: another writer committed first (attempt %d): %s; checking again",
                     c.table_path, attempt, e)
            continue
        rows = sum(f["num_records"] for f in c.files)
        log.info("Delta table %s: committed batch %d of %s (generation %d) as version %d: %d files, %d rows, "
                 "offsets %s", c.table_path, c.batch_id, c.app_id, c.generation, dt.version() + 1, len(c.files),
                 rows, metadata.get("pylog.offsets", "-"))
        return True
    remove_files(c.table_path, c.files)
    raise CommitConflictError(c.table_path, f"batch {c.batch_id} of {c.app_id}: other writers kept committing "
                              f"first; gave up after {MAX_COMMIT_ATTEMPTS} attempts")


def claim_generation(path: str, app_id: str, schema: pa.Schema, partition_by: list[str] | None = None) -> AppState:
    """Start a new generation of `app_id` in the table (creating it if needed) and fence older writers.

    Commits a txn-only version that raises the app's generation by one (0 on a new table); every
    commit of an older generation fails from then on. Returns the app's state at that version: the
    offsets the new generation resumes from, and the generation it owns.
    """
    ensure_table(path, schema, partition_by)
    for _ in range(MAX_COMMIT_ATTEMPTS):
        dt = DeltaTable(path)
        current = dt.transaction_version(generation_app_id(app_id))
        gen = 0 if current is None else current + 1
        try:
            dt.create_write_transaction([], mode="append", schema=dt.schema(), partition_by=partition_by or None,
                                        commit_properties=_props({"pylog.appId": app_id, "pylog.generation": str(gen),
                                                                  "pylog.operation": "claim generation"},
                                                                 {generation_app_id(app_id): gen}))
        except CommitFailedError:
            continue
        state = app_state(path, app_id)
        log.info("Delta table %s: app %s claimed generation %d at version %d", path, app_id, gen, dt.version() + 1)
        if state.generation != gen:
            raise CommitConflictError(path, f"app {app_id}: generation {gen} was claimed by another writer at once")
        return state
    raise CommitConflictError(path, f"app {app_id}: could not claim a new generation; other writers kept committing")
