"""Driver side of the Delta sink: one Delta commit per batch holding data files, marker and offsets.

Owns the exactly-once rule. A batch (app id, generation, batch id, end offsets, files) commits
only if neither its marker nor its end offsets are already in the table; otherwise its files are
orphans and are removed. A lost race with another writer is re-checked the same way. Schema
checks and merges happen here too. Never reads source data.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import AddAction, CommitProperties, Transaction

from connectors.delta_log_reader import list_app_transactions
from connectors.offset_txns import (
    Offsets,
    covers,
    generation_app_id,
    marker_app_id,
    offsets_from_txns,
    offsets_to_txns,
    to_starting_offsets_json,
)
from connectors.parquet_files import remove_files

log = logging.getLogger(__name__)


class SchemaMismatchError(ValueError):
    """The batch's columns cannot be appended to the table as it is."""


@dataclass
class BatchCommit:
    table_path: str
    app_id: str
    batch_id: int
    files: list[dict]
    schema: pa.Schema
    generation: int = 0
    end_offsets: Offsets | None = None
    partition_by: list[str] = field(default_factory=list)
    merge_schema: bool = False
    mode: str = "append"  # or "overwrite": replace the table's contents atomically
    extra_metadata: dict[str, str] = field(default_factory=dict)


def open_table(path: str) -> DeltaTable | None:
    try:
        return DeltaTable(path)
    except TableNotFoundError:
        return None


def committed_offsets(path: str, app_id: str) -> Offsets:
    """{topic: {partition: next offset}} stored in the table for `app_id` (empty when none)."""
    if open_table(path) is None:
        return {}
    return offsets_from_txns(list_app_transactions(path), app_id)


def _delta_schema_compatible(table: pa.Schema, batch: pa.Schema, merge: bool, path: str) -> pa.Schema | None:
    """The schema to commit with: None when unchanged; raises SchemaMismatchError naming the columns."""
    wrong = []
    for f in batch:
        if f.name in table.names:
            t = table.field(f.name).type
            if t != f.type and not (pa.types.is_timestamp(t) and pa.types.is_timestamp(f.type)):
                wrong.append(f"{f.name} (table {t}, batch {f.type})")
    if wrong:
        raise SchemaMismatchError(f"Delta table {path}: incompatible column types: {', '.join(wrong)}")
    new = [f for f in batch if f.name not in table.names]
    if not new:
        return None
    names = ", ".join(f.name for f in new)
    if not merge:
        raise SchemaMismatchError(
            f"Delta table {path}: the batch has columns not in the table: {names}. "
            "Set option mergeSchema=true to add them as nullable columns."
        )
    return pa.schema(list(table) + [pa.field(f.name, f.type, True) for f in new])


def _ensure_table(c: BatchCommit) -> DeltaTable:
    dt = open_table(c.table_path)
    if dt is None:
        Path(c.table_path).mkdir(parents=True, exist_ok=True)
        dt = DeltaTable.create(c.table_path, schema=c.schema, partition_by=c.partition_by or None, mode="ignore")
        log.info("created Delta table %s partitioned by %s", c.table_path, c.partition_by or "nothing")
    return dt


def _already_committed(dt: DeltaTable, c: BatchCommit) -> str | None:
    marker = dt.transaction_version(marker_app_id(c.app_id, c.generation))
    if marker is not None and marker >= c.batch_id:
        return f"marker {marker_app_id(c.app_id, c.generation)}={marker} >= batch {c.batch_id}"
    if c.mode == "append" and c.end_offsets and covers(offsets_from_txns(list_app_transactions(c.table_path), c.app_id), c.end_offsets):
        return f"its end offsets {to_starting_offsets_json(c.end_offsets)} are already committed"
    return None


def commit_batch(c: BatchCommit) -> bool:
    """Make the batch's single Delta commit. Returns False when it was a replay (files removed)."""
    dt = _ensure_table(c)
    reason = _already_committed(dt, c)
    if reason:
        log.info("Delta table %s: skipping replayed batch %d of %s: %s", c.table_path, c.batch_id, c.app_id, reason)
        remove_files(c.table_path, c.files)
        return False
    table_schema = pa.schema(dt.schema().to_arrow())
    merged = _delta_schema_compatible(table_schema, c.schema, c.merge_schema, c.table_path)
    if merged is not None:
        new_cols = [f for f in merged if f.name not in table_schema.names]
        from deltalake import Schema as DeltaSchema

        dt.alter.add_columns(list(DeltaSchema.from_arrow(pa.schema(new_cols)).fields))
        log.info("Delta table %s: added nullable columns %s", c.table_path, [f.name for f in new_cols])
        dt = DeltaTable(c.table_path)
    actions = [
        AddAction(f["path"], f["size"], f["partition_values"], f["modification_time"], True,
                  f"{{\"numRecords\": {f['num_records']}}}")
        for f in c.files
    ]
    txns = {marker_app_id(c.app_id, c.generation): c.batch_id, generation_app_id(c.app_id): c.generation}
    metadata: dict[str, Any] = {"pylog.appId": c.app_id, "pylog.batchId": str(c.batch_id),
                                "pylog.generation": str(c.generation), **c.extra_metadata}
    if c.end_offsets:
        txns.update(offsets_to_txns(c.app_id, c.end_offsets))
        metadata["pylog.offsets"] = to_starting_offsets_json(c.end_offsets)
    props = CommitProperties(custom_metadata=metadata, app_transactions=[Transaction(k, v) for k, v in txns.items()],
                             max_commit_retries=0)
    try:
        dt.create_write_transaction(actions, mode=c.mode, schema=dt.schema(), partition_by=c.partition_by or None,
                                    commit_properties=props)
    except CommitFailedError as e:
        dt = DeltaTable(c.table_path)
        reason = _already_committed(dt, c)
        if reason:
            log.warning("Delta table %s: lost a commit race for batch %d; the winner committed it (%s)",
                        c.table_path, c.batch_id, reason)
            remove_files(c.table_path, c.files)
            return False
        raise RuntimeError(f"Delta table {c.table_path}: commit of batch {c.batch_id} of {c.app_id} failed: {e}") from e
    rows = sum(f["num_records"] for f in c.files)
    log.info("Delta table %s: committed batch %d of %s (generation %d): %d files, %d rows, offsets %s",
             c.table_path, c.batch_id, c.app_id, c.generation, len(c.files), rows,
             to_starting_offsets_json(c.end_offsets) if c.end_offsets else "-")
    return True


def next_generation(path: str, app_id: str) -> int:
    """The generation a writer without a known generation (new or lost checkpoint) must use."""
    dt = open_table(path)
    if dt is None:
        return 0
    current = dt.transaction_version(generation_app_id(app_id))
    return 0 if current is None else current + 1


def current_generation(path: str, app_id: str) -> int | None:
    dt = open_table(path)
    return None if dt is None else dt.transaction_version(generation_app_id(app_id))


def table_info(path: str) -> Mapping[str, Any]:
    dt = open_table(path)
    if dt is None:
        return {"exists": False}
    return {"exists": True, "version": dt.version(), "files": len(dt.file_uris())}
