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
  - Contiguity (connectors.contiguity): a batch that is not a replay is committed only if it starts
    where the table's offsets for the app end, checked on the very snapshot it commits against; a
    generation's claim stores the generation's declared start. And the files it adds must still exist.
Batch writes (generation None) have their own marker and no generation: contiguity alone orders them
against streams of the same app id.
Schema checks and merges happen here too, and `check_writable`: a table that uses a Delta feature the
sink cannot write correctly (column mapping, generated columns, CHECK constraints, expiring txns, or
one delta-rs refuses) fails with UnsupportedTableError naming the table and the feature, before any
file is written where the caller checks early, and before any commit in every case. Never reads
source data.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from connectors.delta_log_reader import read_app_transactions
from connectors import contiguity
from connectors.errors import (
    CommitConflictError,
    FencedError,
    MissingFilesError,
    NotContiguousError,
    SchemaMismatchError,
    UnsupportedTableError,
)
from connectors.offset_txns import (
    AppState,
    batch_txns,
    generation_app_id,
    marker_app_id,
    offset_app_id,
    offsets_to_txns,
    topic_ids_to_txns,
)
from connectors.parquet_files import missing_files, remove_files
from connectors.table_location import TableFiles, TableLocation, TableRef
from sparklog.offsets import PartitionOffsets, TopicPartition, to_json

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 50   # each attempt follows another writer's successful commit

__all__ = ["BatchCommit", "SchemaMismatchError", "FencedError", "CommitConflictError", "UnsupportedTableError",
           "commit_batch", "claim_generation", "declare_start", "app_state", "committed_offsets", "current_generation", "open_table",
           "check_writable", "table_partition_columns", "prepare_table", "commit_metadata"]


@dataclass
class BatchCommit:
    table_path: TableRef
    app_id: str
    batch_id: int
    files: list[dict[str, Any]]
    schema: pa.Schema
    generation: int | None = 0          # None: a batch write (batch_load, df.write), its own marker, no fence
    end_offsets: PartitionOffsets | None = None
    start_offsets: PartitionOffsets | None = None   # required with end_offsets: what contiguity checks
    partition_by: list[str] = field(default_factory=list)
    merge_schema: bool = False
    mode: Literal["append", "overwrite"] = "append"   # overwrite: replace the table's contents atomically
    extra_metadata: dict[str, str] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    read_version: int | None = None   # overwrite: the version whose files it replaces (None: the latest)
    hint: str = contiguity.RESTART_JOB   # what a refused batch's error tells the user to do
    run_id: str | None = None   # the job run making the commit (jobs.run_history reads its commits back by it)

    @property
    def table(self) -> TableLocation:
        return TableLocation.of(self.table_path)


def open_table(path: TableRef) -> DeltaTable | None:
    try:
        return TableLocation.of(path).delta()
    except TableNotFoundError:
        return None


def app_state(path: TableRef, app_id: str, version: int | None = None) -> AppState:
    """What `app_id` has stored in the table, from one consistent snapshot (empty when no table), as of
    `version` when given (a retained version; TableLogError otherwise)."""
    if not TableFiles(path).names("_delta_log"):
        return AppState()
    read, txns = read_app_transactions(path, version)
    return AppState.from_txns(read, txns, app_id)


def committed_offsets(path: TableRef, app_id: str) -> PartitionOffsets:
    """{(topic, partition): next offset} stored in the table for `app_id` (empty when none)."""
    return app_state(path, app_id).offsets


def current_generation(path: TableRef, app_id: str) -> int | None:
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


def check_writable(dt: DeltaTable, path: TableRef) -> None:
    """Raise UnsupportedTableError naming the table and every feature the sink cannot write correctly."""
    problems = unsupported_features(dt)
    if problems:
        raise UnsupportedTableError(str(path), "pylog-delta cannot write this table: it uses " + "; ".join(problems),
                                    dt.version())


def table_partition_columns(path: TableRef, wanted: list[str]) -> list[str]:
    """The partition columns to write an existing table with (its own), checked: the table must be writable,
    and `wanted` (the sink's partitionBy, empty: unset) must be the table's. `wanted` when no table yet."""
    dt = open_table(path)
    if dt is None:
        return wanted
    check_writable(dt, path)
    actual = list(dt.metadata().partition_columns)
    if wanted and wanted != actual:
        raise SchemaMismatchError(str(path), f"the table is partitioned by {actual or 'nothing'}, but the sink was given "
                                  f"partitionBy {wanted}; set it to the table's or leave it unset")
    return actual


def ensure_table(path: TableRef, schema: pa.Schema, partition_by: list[str] | None = None) -> DeltaTable:
    dt = open_table(path)
    if dt is None:
        loc = TableLocation.of(path)
        dt = DeltaTable.create(loc.uri, schema=schema, partition_by=partition_by or None, mode="ignore",
                               storage_options=loc.storage_options() or None)
        log.info("created Delta table %s partitioned by %s", path, partition_by or "nothing")
    check_writable(dt, path)
    return dt


def prepare_table(path: TableRef, schema: pa.Schema, partition_by: list[str], merge_schema: bool) -> list[str]:
    """Make `path` ready for a batch of `schema` written by another engine (delta-spark): created if needed,
    checked writable, partitioning checked, new columns added as nullable when `merge_schema` (a commit of
    its own, as commit_batch makes it). Returns the table's partition columns. Raises SchemaMismatchError
    or UnsupportedTableError naming the table."""
    dt = ensure_table(path, schema, partition_by)
    columns = table_partition_columns(path, partition_by)
    table_schema = pa.schema(dt.schema().to_arrow())
    merged = _delta_schema_compatible(table_schema, schema, merge_schema, str(path))
    if merged is not None:
        new_cols = [f for f in merged if f.name not in table_schema.names]
        dt.alter.add_columns(list(DeltaSchema.from_arrow(pa.schema(new_cols)).fields))
        log.info("Delta table %s: added nullable columns %s", path, [f.name for f in new_cols])
    return columns


def add_missing_columns(path: TableRef, columns: pa.Schema) -> None:
    """Add the nullable `columns` an existing table lacks (a metadata-only commit; nothing when no table)."""
    dt = open_table(path)
    if dt is None:
        return
    have = set(pa.schema(dt.schema().to_arrow()).names)
    new = [f for f in columns if f.name not in have]
    if new:
        dt.alter.add_columns(list(DeltaSchema.from_arrow(pa.schema(new)).fields))
        log.info("Delta table %s: added nullable columns %s", path, [f.name for f in new])


def _refused(dt: DeltaTable, path: TableLocation, error: CommitFailedError) -> UnsupportedTableError | None:
    """The error to stop with when a failed commit was not another writer's commit (None: retry)."""
    if "Unsupported table features" in str(error):
        return UnsupportedTableError(str(path), f"pylog-delta cannot write this table: delta-rs refuses it: {error}",
                                     dt.version())
    if path.delta().version() == dt.version():   # nobody committed: retrying cannot help
        return UnsupportedTableError(str(path), f"delta-rs refused the commit: {error}", dt.version())
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


def batch_name(batch_id: int, generation: int | None) -> str:
    return f"batch write {batch_id}" if generation is None else f"batch {batch_id} (generation {generation})"


def _skip_reason(dt: DeltaTable, c: BatchCommit) -> str | None:
    """Why `c` must not be committed on this snapshot: None to commit; raises when it must stop."""
    marker = dt.transaction_version(marker_app_id(c.app_id, c.generation))
    if marker is not None and marker >= c.batch_id:
        return f"marker {marker_app_id(c.app_id, c.generation)}={marker} >= batch {c.batch_id}"
    generation = dt.transaction_version(generation_app_id(c.app_id))
    if generation is not None and c.generation is not None and generation > c.generation:
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


def _check_lines_up(dt: DeltaTable, c: BatchCommit) -> None:
    """Contiguity and the files' presence on this snapshot; raises (the batch's files removed) when not."""
    gone = missing_files(c.table_path, c.files)
    if gone:
        remove_files(c.table_path, c.files)
        raise MissingFilesError(c.table_path, f"{len(gone)} data files of {batch_name(c.batch_id, c.generation)} of "
                                f"app {c.app_id} were deleted before its commit (e.g. {gone[0]}): a VACUUM with a "
                                "retention shorter than a batch takes ran beside the writer. Nothing was committed; "
                                "restart the job (it writes the batch again) and VACUUM with the default retention.",
                                dt.version())
    if c.mode == "overwrite" or c.start_offsets is None:
        return
    state = app_state(c.table_path, c.app_id, dt.version())
    try:
        contiguity.check(str(c.table_path), dt.version(), c.app_id, batch_name(c.batch_id, c.generation),
                         contiguity.Batch(c.start_offsets, c.end_offsets or {}, c.topic_ids),
                         contiguity.Stored(state.offsets, state.topic_ids), c.hint)
    except NotContiguousError:
        remove_files(c.table_path, c.files)
        raise


def _check_partitioning(dt: DeltaTable, c: BatchCommit) -> None:
    actual = list(dt.metadata().partition_columns)
    if actual != list(c.partition_by):
        raise SchemaMismatchError(c.table_path, f"the table is partitioned by {actual or 'nothing'}, but batch "
                                  f"{c.batch_id} of {c.app_id} was written partitioned by {c.partition_by or 'nothing'}; "
                                  "set partitionBy to the table's or leave it unset")


def _merge_schema(dt: DeltaTable, c: BatchCommit) -> bool:
    """Add the batch's new columns (a commit of its own); True when it did, so the caller checks again on the
    table as it is now."""
    table_schema = pa.schema(dt.schema().to_arrow())
    merged = _delta_schema_compatible(table_schema, c.schema, c.merge_schema, str(c.table_path))
    if merged is None:
        return False
    new_cols = [f for f in merged if f.name not in table_schema.names]
    dt.alter.add_columns(list(DeltaSchema.from_arrow(pa.schema(new_cols)).fields))
    log.info("Delta table %s: added nullable columns %s", c.table_path, [f.name for f in new_cols])
    return True


def commit_metadata(app_id: str, batch_id: int, generation: int | None, start_offsets: PartitionOffsets | None,
                    end_offsets: PartitionOffsets | None, run_id: str | None, rows: int | None) -> dict[str, str]:
    """What a batch's commitInfo says of it, whichever engine commits: for people and `pylog job status` (the
    offsets that resume a job are its txn actions, connectors.offset_txns)."""
    out = {"pylog.appId": app_id, "pylog.batchId": str(batch_id)}
    optional = {"pylog.generation": generation, "pylog.offsets": to_json(end_offsets) if end_offsets else None,
                "pylog.startOffsets": to_json(start_offsets) if end_offsets and start_offsets is not None else None,
                "pylog.runId": run_id, "pylog.rows": rows}
    out.update({k: str(v) for k, v in optional.items() if v is not None})
    return out


def commit_batch(c: BatchCommit) -> bool:
    """Make the batch's single Delta commit. Returns False when it was a replay (its files removed).

    Raises FencedError, CommitConflictError or SchemaMismatchError (the batch's files removed).
    """
    if c.end_offsets and c.start_offsets is None:
        remove_files(c.table_path, c.files)
        raise NotContiguousError(c.table_path, f"{batch_name(c.batch_id, c.generation)} of app {c.app_id} has end "
                                 "offsets but no start offsets, so it cannot be checked against the table's offsets; "
                                 "nothing was committed (a batch write needs option startOffsets with offsets; a "
                                 "stream needs its checkpoint's previous batch)")
    try:
        ensure_table(c.table_path, c.schema, c.partition_by)
    except UnsupportedTableError:
        remove_files(c.table_path, c.files)
        raise
    actions: list[AddAction | RemoveAction] = [AddAction(f["path"], f["size"], f["partition_values"], f["modification_time"], True,
                         f"{{\"numRecords\": {f['num_records']}}}") for f in c.files]
    metadata = commit_metadata(c.app_id, c.batch_id, c.generation, c.start_offsets, c.end_offsets, c.run_id,
                               sum(f["num_records"] for f in c.files))
    metadata.update(c.extra_metadata)
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        dt = c.table.delta()
        reason = _skip_reason(dt, c)
        if reason:
            log.info("Delta table %s: skipping replayed batch %d of %s: %s", c.table_path, c.batch_id, c.app_id, reason)
            remove_files(c.table_path, c.files)
            return False
        _check_lines_up(dt, c)
        try:
            check_writable(dt, c.table_path)
            _check_partitioning(dt, c)
            if _merge_schema(dt, c):
                continue   # the table moved on (our own schema commit, maybe others'): check again on it
        except (SchemaMismatchError, UnsupportedTableError):
            remove_files(c.table_path, c.files)
            raise
        txns = batch_txns(c.app_id, c.generation, c.batch_id, c.end_offsets, c.topic_ids, dt.version() + 1)
        try:
            dt.create_write_transaction(actions, mode=c.mode, schema=dt.schema(),
                                        partition_by=c.partition_by or None, commit_properties=_props(metadata, txns))
        except CommitFailedError as e:
            refused = _refused(dt, c.table, e)
            if refused is not None:
                remove_files(c.table_path, c.files)
                raise refused from None
            log.info("Delta table %s: another writer committed first (attempt %d): %s; checking again",
                     c.table_path, attempt, e)
            continue
        rows = sum(f["num_records"] for f in c.files)
        log.info("Delta table %s: committed %s of %s as version %d: %d files, %d rows, offsets %s",
                 c.table_path, batch_name(c.batch_id, c.generation), c.app_id, dt.version() + 1, len(c.files),
                 rows, metadata.get("pylog.offsets", "-"))
        return True
    remove_files(c.table_path, c.files)
    raise CommitConflictError(c.table_path, f"batch {c.batch_id} of {c.app_id}: other writers kept committing "
                              f"first; gave up after {MAX_COMMIT_ATTEMPTS} attempts")


Starts = Callable[[AppState], PartitionOffsets]   # the declared start, from the app's state on the snapshot


def claim_generation(path: TableRef, app_id: str, schema: pa.Schema, partition_by: list[str] | None = None,
                     starts: Starts | None = None, topic_ids: Mapping[str, str] | None = None) -> AppState:
    """Start a new generation of `app_id` in the table (creating it if needed) and fence older writers.

    Commits a txn-only version that raises the app's generation by one (0 on a new table); every
    commit of an older generation fails from then on. With `starts`, the same commit stores the
    generation's declared start, computed from the app's state on the snapshot it commits against, as
    the app's offsets (with `topic_ids`): its first batch must start there (connectors.contiguity).
    Returns the app's state at that version: the offsets the new generation resumes from, and the
    generation it owns.
    """
    return _declare(path, app_id, schema, partition_by, starts, topic_ids, new_generation=True)


def declare_start(path: TableRef, app_id: str, starts: Starts, topic_ids: Mapping[str, str] | None = None) -> AppState:
    """Store new start offsets for `app_id` without a new generation: for a batch write that resumes a
    partition elsewhere than the table's offset because its log changed (a re-created topic, records aged
    out), as failOnDataLoss=false allows after the change was reported."""
    return _declare(path, app_id, None, None, starts, topic_ids, new_generation=False)


def _declare(ref: TableRef, app_id: str, schema: pa.Schema | None, partition_by: list[str] | None,
             starts: Starts | None, topic_ids: Mapping[str, str] | None, *, new_generation: bool) -> AppState:
    """One txn-only commit: a new generation (or the current one) and, with `starts`, the declared start."""
    path = TableLocation.of(ref)
    if schema is not None:
        ensure_table(path, schema, partition_by)
    what = "claim generation" if new_generation else "declare start"
    for _ in range(MAX_COMMIT_ATTEMPTS):
        dt = path.delta()
        before = app_state(path, app_id, dt.version())
        current = before.generation
        gen = (0 if current is None else current + 1) if new_generation else current
        txns: dict[str, int] = {} if gen is None else {generation_app_id(app_id): gen}
        declared = starts(before) if starts is not None else {}
        txns.update(offsets_to_txns(app_id, declared))
        txns.update(topic_ids_to_txns(app_id, topic_ids or {}, dt.version() + 1))
        metadata = {"pylog.appId": app_id, "pylog.operation": what}
        if gen is not None:
            metadata["pylog.generation"] = str(gen)
        if declared:
            metadata["pylog.offsets"] = to_json(declared)
        try:
            dt.create_write_transaction([], mode="append", schema=dt.schema(),
                                        partition_by=list(dt.metadata().partition_columns) or None,
                                        commit_properties=_props(metadata, txns))
        except CommitFailedError as e:
            refused = _refused(dt, path, e)
            if refused is not None:
                raise refused from None
            continue
        state = app_state(path, app_id)
        log.info("Delta table %s: app %s: %s %s at version %d%s", path, app_id, what, gen, dt.version() + 1,
                 f", starting at {to_json(declared)}" if declared else "")
        if new_generation and state.generation != gen:
            raise CommitConflictError(path, f"app {app_id}: generation {gen} was claimed by another writer at once")
        return state
    raise CommitConflictError(path, f"app {app_id}: could not {what}; other writers kept committing")
