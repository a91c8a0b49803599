"""The Spark data source `pylog-delta`: an exactly-once Delta Lake sink for streams and batch jobs.

    df.writeStream.format("pylog-delta").option("path", table).option("appId", "orders")
      .option("checkpointLocation", ckpt).start()

Executors write Parquet files (no data passes through the driver); the driver makes one Delta
commit per batch with the add actions, the marker txn(app id, batch id) and the batch's source end
offsets, read from `<checkpoint>/offsets/<batchId>`, after checking that the batch starts where the
table's offsets for the app end (connectors.delta_commit, connectors.contiguity). The checkpoint
records whose it is (connectors.checkpoint_owner): another table or app id refuses it.

Options: path (required), appId (default: derived from the path), partitionBy (comma-separated),
mergeSchema (true: add new nullable columns), generation (set by jobs; otherwise a stream with a new
checkpoint claims the next generation, which fences older streams of the same app id). Batch writes
(`df.write.format("pylog-delta").mode("append"|"overwrite")`) also take batchId (default: one past the
table's last batch write), offsets (the data's end offsets as Spark's offset JSON, sparklog.offsets.to_json)
with startOffsets (where the data begins: it must be where the table's offsets for the app end),
topicIds (JSON {topic: id}), readVersion (an overwrite fails instead of replacing commits made
after it) and writeId (named in the write's file names; a write that fails or is cancelled removes the
files its tasks left, connectors.orphans; default a new id). The path may be an `s3://bucket/prefix`: options
`storage.<name>` are delta-rs's storage options (e.g. storage.aws_endpoint_url), over the standard AWS
variables (connectors.table_location). `writer_options` builds these options from typed values (what the jobs set); SinkOptions
reads them back.
"""
from __future__ import annotations

import json
import logging
import re
import uuid
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from connectors import faults
from connectors import checkpoint_owner, contiguity
from connectors.delta_commit import (
    BatchCommit,
    app_state,
    claim_generation,
    commit_batch,
    open_table,
    table_partition_columns,
)
from connectors.orphans import remove_uncommitted
from connectors.parquet_files import remove_files, write_files
from connectors.spark_checkpoint import kafka_position
from connectors.table_location import TableLocation, TableRef
from sparklog.errors import UserError, in_one_line
from sparklog.offsets import PartitionOffsets, TopicPartition, from_json, to_json
from sparklog.options import OptionError, check_known

log = logging.getLogger(__name__)

_BOOL = {"true": True, "false": False}


class SinkOptionError(UserError, ValueError):
    pass


def _local_path(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


STORAGE_PREFIX = "storage."   # storage.<delta-rs storage option>
OPTIONS = ("path", "appId", "partitionBy", "mergeSchema", "checkpointLocation", "generation", "batchId", "offsets",
           "startOffsets", "topicIds", "readVersion", "writeId", "runId")


class SinkOptions:
    def __init__(self, options: dict[str, str]) -> None:
        try:
            check_known(options, OPTIONS, "pylog-delta sink", prefixes=(STORAGE_PREFIX,))
        except OptionError as e:
            raise SinkOptionError(str(e)) from None
        o = {k.lower(): v for k, v in options.items()}
        if not o.get("path"):
            raise SinkOptionError("pylog-delta: option 'path' (the Delta table location) is required")
        self.path = TableLocation.of(o["path"], {k[len(STORAGE_PREFIX):]: v for k, v in o.items()
                                                  if k.startswith(STORAGE_PREFIX)})
        self.app_id = o.get("appid") or f"pylog-delta:{self.path}"
        self.partition_by = [c.strip() for c in o.get("partitionby", "").split(",") if c.strip()]
        self.merge_schema = self._bool(o, "mergeschema")
        self.checkpoint = _local_path(o["checkpointlocation"]) if o.get("checkpointlocation") else None
        self.generation = self._int(o, "generation")
        self.batch_id = self._int(o, "batchid")
        self.read_version = self._int(o, "readversion")
        self.run_id = o.get("runid") or None   # a job run's id: each commit is tagged with it (jobs.run_history)
        self.write_id = o.get("writeid") or uuid.uuid4().hex
        if not re.fullmatch(r"[0-9A-Za-z_]{1,64}", self.write_id):
            raise SinkOptionError(f"pylog-delta: option 'writeId' must be 1-64 letters, digits or _, got {self.write_id!r}")
        self.topic_ids: dict[str, str] = {}
        if o.get("topicids"):
            try:
                self.topic_ids = {str(k): str(v) for k, v in json.loads(o["topicids"]).items()}
            except (ValueError, TypeError, AttributeError) as e:
                raise SinkOptionError(f"pylog-delta: option 'topicIds' must be JSON like {{\"topic\":\"id\"}}: {e}") from None
        self.offsets = self._offsets(o, "offsets")
        self.start_offsets = self._offsets(o, "startoffsets")
        if self.offsets is not None and self.start_offsets is None:
            raise SinkOptionError("pylog-delta: option 'offsets' needs option 'startOffsets' (where the data begins, "
                                  "as Spark's offset JSON): the commit checks it against the table's offsets")

    @staticmethod
    def _offsets(o: dict[str, str], key: str) -> PartitionOffsets | None:
        if not o.get(key):
            return None
        try:
            return from_json(o[key])
        except ValueError as e:
            name = "startOffsets" if key == "startoffsets" else key
            raise SinkOptionError(f"pylog-delta: option '{name}' must be JSON like {{\"topic\":{{\"0\":23}}}}: {e}") from None

    @staticmethod
    def _bool(o: dict[str, str], key: str) -> bool:
        v = o.get(key, "false").strip().lower()
        if v not in _BOOL:
            raise SinkOptionError(f"pylog-delta: option '{key}' must be true or false, got {o[key]!r}")
        return _BOOL[v]

    @staticmethod
    def _int(o: dict[str, str], key: str) -> int | None:
        if key not in o:
            return None
        try:
            v = int(o[key])
        except ValueError:
            raise SinkOptionError(f"pylog-delta: option '{key}' must be a non-negative integer, got {o[key]!r}") from None
        if v < 0:
            raise SinkOptionError(f"pylog-delta: option '{key}' must be a non-negative integer, got {v}")
        return v


def writer_options(path: TableRef, app_id: str, *, partition_by: Sequence[str] = (), merge_schema: bool = False,
                   generation: int | None = None, checkpoint: str | None = None, batch_id: int | None = None,
                   offsets: Mapping[TopicPartition, int] | None = None, topic_ids: Mapping[str, str] | None = None,
                   read_version: int | None = None,
                   start_offsets: Mapping[TopicPartition, int] | None = None,
                   write_id: str | None = None, run_id: str | None = None) -> dict[str, str]:
    """The options of a `pylog-delta` write from typed values, as SinkOptions reads them (None: not set)."""
    loc = TableLocation.of(path)
    out = {"path": loc.uri, "appId": app_id, "mergeSchema": "true" if merge_schema else "false"}
    out.update({STORAGE_PREFIX + k: v for k, v in loc.options})
    optional: dict[str, object] = {
        "partitionBy": ",".join(partition_by) or None, "generation": generation, "checkpointLocation": checkpoint,
        "batchId": batch_id, "offsets": None if offsets is None else to_json(offsets),
        "startOffsets": None if start_offsets is None else to_json(start_offsets),
        "topicIds": None if topic_ids is None else json.dumps(dict(topic_ids), sort_keys=True),
        "readVersion": read_version, "writeId": write_id, "runId": run_id}
    out.update({k: str(v) for k, v in optional.items() if v is not None})
    return out


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema the sink writes a Spark schema with (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _files_of(messages: list) -> list[dict]:
    return [f for m in messages if m is not None for f in m.files]


class _FilesMessage(WriterCommitMessage):
    def __init__(self, files: list[dict]) -> None:
        self.files = files


def _write(opts: SinkOptions, iterator: Iterator[pa.RecordBatch], write_id: str | None = None) -> _FilesMessage:
    return _FilesMessage([f.to_dict() for f in write_files(opts.path, iterator, opts.partition_by,
                                                           write_id=write_id)])


def _owner(opts: SinkOptions, generation: int | None) -> checkpoint_owner.Owner:
    dt = open_table(opts.path)
    return checkpoint_owner.Owner(str(opts.path), None if dt is None else str(dt.metadata().id), opts.app_id, generation)


def _resolve_generation(opts: SinkOptions, schema: pa.Schema) -> int:
    """A stream's generation: fixed by the job, or remembered in its checkpoint, or newly claimed. A checkpoint
    of another table or app is refused (CheckpointMismatchError)."""
    if opts.checkpoint is None:
        return opts.generation or 0
    directory = Path(opts.checkpoint)
    wanted = _owner(opts, opts.generation)
    found = checkpoint_owner.check(directory, wanted, "option checkpointLocation", table_exists=wanted.table_id is not None)
    if opts.generation is not None:
        gen = opts.generation
    elif found is not None and found.generation is not None:
        return found.generation
    else:
        gen = claim_generation(opts.path, opts.app_id, schema, opts.partition_by).generation or 0
        log.info("pylog-delta: app %s writes generation %d from checkpoint %s", opts.app_id, gen, opts.checkpoint)
    checkpoint_owner.write(directory, _owner(opts, gen))
    return gen


def _checked(opts: SinkOptions) -> SinkOptions:
    """`opts` with an existing table's own partition columns, after checking (on the driver, before any
    executor writes a file) that the sink can write the table: raises UnsupportedTableError or
    SchemaMismatchError naming the table."""
    opts.path.check_store()
    opts.partition_by = table_partition_columns(opts.path, opts.partition_by)
    return opts


@in_one_line
class DeltaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = _checked(opts)
        self.schema = arrow_schema(schema)
        self.generation = _resolve_generation(opts, self.schema)
        self.hint = (contiguity.RESTART_JOB if opts.generation is not None else
                     f"delete the checkpoint {opts.checkpoint} and start the query again with "
                     f"startingOffsets=OffsetManager({opts.path!r}, {opts.app_id!r}).starting_offsets_json()")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        position = kafka_position(self.opts.checkpoint, batchId) if self.opts.checkpoint else None
        faults.before_delta_commit(batchId)
        commit_batch(BatchCommit(self.opts.path, self.opts.app_id, batchId, _files_of(messages), self.schema,
                                 self.generation, position.offsets if position else None,
                                 position.start if position else None, self.opts.partition_by,
                                 self.opts.merge_schema, topic_ids=position.topic_ids if position else {},
                                 hint=self.hint, run_id=self.opts.run_id))
        faults.after_delta_commit(batchId)

    def abort(self, messages: list, batchId: int) -> None:
        remove_files(self.opts.path, _files_of(messages))


@in_one_line
class DeltaBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType, overwrite: bool) -> None:
        self.opts = _checked(opts)
        self.schema = arrow_schema(schema)
        self.overwrite = overwrite
        dt = open_table(opts.path)
        self.began_after = -1 if dt is None else dt.version()   # the table's version before this write
        if opts.batch_id is not None:
            self.batch_id = opts.batch_id
        else:
            state = app_state(opts.path, opts.app_id)
            last = state.last_batch if opts.generation is None else state.marker(opts.generation)
            self.batch_id = 0 if last is None else last + 1

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.opts, iterator, self.opts.write_id)

    def commit(self, messages: list) -> None:
        faults.before_delta_commit(self.batch_id)
        commit_batch(BatchCommit(self.opts.path, self.opts.app_id, self.batch_id, _files_of(messages), self.schema,
                                 self.opts.generation, self.opts.offsets, self.opts.start_offsets, self.opts.partition_by,
                                 self.opts.merge_schema, mode="overwrite" if self.overwrite else "append",
                                 topic_ids=self.opts.topic_ids, read_version=self.opts.read_version,
                                 run_id=self.opts.run_id))
        faults.after_delta_commit(self.batch_id)

    def abort(self, messages: list) -> None:
        # the files of tasks that failed or were cancelled are in no message: found by the write's id
        remove_files(self.opts.path, _files_of(messages))
        remove_uncommitted(self.opts.path, self.opts.write_id, self.began_after)


@in_one_line
class DeltaSinkDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pylog-delta"

    def writer(self, schema: StructType, overwrite: bool) -> DeltaBatchWriter:
        return DeltaBatchWriter(SinkOptions(dict(self.options)), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DeltaStreamWriter:
        return DeltaStreamWriter(SinkOptions(dict(self.options)), schema)
