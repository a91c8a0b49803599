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
Schema checks and merges happen here too, and `check_writable`: a table that uses a Delta feature the
sink cannot write correctly (column mapping, generated columns, CHECK constraints, expiring txns, or
one delta-rs refuses) fails with UnsupportedTableError naming the table and the feature, before any
file is written where the caller checks early, and before any commit in every case. Never reads
source data.
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
from connectors.errors import CommitConflictError, FencedError, SchemaMismatchError, UnsupportedTableError
from connectors.offset_txns import (
    AppState,
    batch_txns,
    generation_app_id,
    marker_app_id,
)
from connectors.parquet_files import remove_files
from sparklog.offsets import PartitionOffsets, to_json

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 50   # each attempt follows another writer's successful commit

__all__ = ["BatchCommit", "SchemaMismatchError", "FencedError", "CommitConflictError", "UnsupportedTableError",
           "commit_batch", "claim_generation", "app_state", "committed_offsets", "current_generation", "open_table",
           "check_writable", "table_partition_columns", "prepare_table"]


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


def app_state(path: str, app_id: str, version: int | None = None) -> AppState:
    """What `app_id` has stored in the table, from one consistent snapshot (empty when no table), as of
    `version` when given (a retained version; TableLogError otherwise)."""
    if not (Path(path) / "_delta_log").exists():
        return AppState()
    read, txns = read_app_transactions(path, version)
    return AppState.from_txns(read, txns, app_id)


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


def unsupported_features(dt: DeltaTable) -> list[str]:
    """What in the table the sink cannot write correctly, one phrase each (empty: writable).

    The sink writes plain Parquet files with logical column names and only the batch's columns, and
    keeps offsets and markers as txn actions; each entry here would break one of those.
    """
    config = dt.metadata().configuration
    out = []
    mode = config.get("delta.columnMapping.mode", "none")
    if mode != "none":
        out.append(f"column mapping (delta.columnMapping.mode={mode}): its Parquet files must use physical column "
                   "names, and rows written with logical names read as nulls")
    generated = [f.name for f in dt.schema().fields if "delta.generationExpression" in (f.metadata or {})]
    if generated:
        out.append(f"generated columns ({', '.join(generated)}): the sink does not compute them")
    identity = [f.name for f in dt.schema().fields if any(k.startswith("delta.identity.") for k in (f.metadata or {}))]
    if identity:
        out.append(f"identity columns ({', '.join(identity)}): the sink does not assign them")
    constraints = sorted(k[len("delta.constraints."):] for k in config if k.startswith("delta.constraints."))
    if constraints:
        out.append(f"CHECK constraints ({', '.join(constraints)}): the sink does not enforce them")
    if config.get("delta.setTransactionRetentionDuration"):
        out.append(f"delta.setTransactionRetentionDuration={config['delta.setTransactionRetentionDuration']}: "
                   "Delta drops txn actions older than that at checkpoints, and the sink keeps its offsets and "
                   "batch markers in txn actions (a job would start over and duplicate rows); unset it")
    return out


def check_writable(dt: DeltaTable, path: str) -> None:
    """Raise UnsupportedTableError naming the table and every feature the sink cannot write correctly."""
    problems = unsupported_features(dt)
    if problems:
        raise UnsupportedTableError(path, "pylog-delta cannot write this table: it uses " + "; ".join(problems),
                                    dt.version())


def table_partition_columns(path: str, wanted: list[str]) -> list[str]:
    """The partition columns to write an existing table with (its own), checked: the table must be writable,
    and `wanted` (the sink's partitionBy, empty: unset) must be the table's. `wanted` when no table yet."""
    dt = open_table(path)
    if dt is None:
        return wanted
    check_writable(dt, path)
    actual = list(dt.metadata().partition_columns)
    if wanted and wanted != actual:
        raise SchemaMismatchError(path, f"the table is partitioned by {actual or 'nothing'}, but the sink was given "
                                  f"partitionBy {wanted}; set it to the table's or leave it unset")
    return actual


def ensure_table(path: str, schema: pa.Schema, partition_by: list[str] | None = None) -> DeltaTable:
    dt = open_table(path)
    if dt is None:
        Path(path).mkdir(parents=True, exist_ok=True)
        dt = DeltaTable.create(path, schema=schema, partition_by=partition_by or None, mode="ignore")
        log.info("created Delta table %s partitioned by %s", path, partition_by or "nothing")
    check_writable(dt, path)
    return dt


def prepare_table(path: str, schema: pa.Schema, partition_by: list[str], merge_schema: bool) -> list[str]:
    """Make `path` ready for a batch of `schema` written by another engine (delta-spark): created if needed,
    checked writable, partitioning checked, new columns added as nullable when `merge_schema` (a commit of
    its own, as commit_batch makes it). Returns the table's partition columns. Raises SchemaMismatchError
    or UnsupportedTableError naming the table."""
    dt = ensure_table(path, schema, partition_by)
    columns = table_partition_columns(path, partition_by)
    table_schema = pa.schema(dt.schema().to_arrow())
    merged = _delta_schema_compatible(table_schema, schema, merge_schema, path)
    if merged is not None:
        new_cols = [f for f in merged if f.name not in table_schema.names]
        dt.alter.add_columns(list(DeltaSchema.from_arrow(pa.schema(new_cols)).fields))
        log.info("Delta table %s: added nullable columns %s", path, [f.name for f in new_cols])
    return columns


def _refused(dt: DeltaTable, path: str, error: CommitFailedError) -> UnsupportedTableError | None:
    """The error to stop with when a failed commit was not another writer's commit (None: retry)."""
    if "Unsupported table features" in str(error):
        return UnsupportedTableError(path, f"pylog-delta cannot write this table: delta-rs refuses it: {error}",
                                     dt.version())
    if DeltaTable(path).version() == dt.version():   # nobody committed: retrying cannot help
        return UnsupportedTableError(path, f"delta-rs refused the commit: {error}", dt.version())
    return None


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


def _check_partitioning(dt: DeltaTable, c: BatchCommit) -> None:
    actual = list(dt.metadata().partition_columns)
    if actual != list(c.partition_by):
        raise SchemaMismatchError(c.table_path, f"the table is partitioned by {actual or 'nothing'}, but batch "
                                  f"{c.batch_id} of {c.app_id} was written partitioned by {c.partition_by or 'nothing'}; "
                                  "set partitionBy to the table's or leave it unset")


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
    try:
        ensure_table(c.table_path, c.schema, c.partition_by)
    except UnsupportedTableError:
        remove_files(c.table_path, c.files)
        raise
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
            check_writable(dt, c.table_path)
            _check_partitioning(dt, c)
            dt = _merge_schema(dt, c)
        except (SchemaMismatchError, UnsupportedTableError):
            remove_files(c.table_path, c.files)
            raise
        txns = batch_txns(c.app_id, c.generation, c.batch_id, c.end_offsets, c.topic_ids, dt.version() + 1)
        try:
            dt.create_write_transaction(actions, mode=c.mode, schema=dt.schema(),
                                        partition_by=c.partition_by or None, commit_properties=_props(metadata, txns))
        except CommitFailedError as e:
            refused = _refused(dt, c.table_path, e)
            if refused is not None:
                remove_files(c.table_path, c.files)
                raise refused from None
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
            dt.create_write_transaction([], mode="append", schema=dt.schema(),
                                        partition_by=list(dt.metadata().partition_columns) or None,
                                        commit_properties=_props({"pylog.appId": app_id, "pylog.generation": str(gen),
                                                                  "pylog.operation": "claim generation"},
                                                                 {generation_app_id(app_id): gen}))
        except CommitFailedError as e:
            refused = _refused(dt, path, e)
            if refused is not None:
                raise refused from None
            continue
        state = app_state(path, app_id)
        log.info("Delta table %s: app %s claimed generation %d at version %d", path, app_id, gen, dt.version() + 1)
        if state.generation != gen:
            raise CommitConflictError(path, f"app {app_id}: generation {gen} was claimed by another writer at once")
        return state
    raise CommitConflictError(path, f"app {app_id}: could not claim a new generation; other writers kept committing")
