"""Executor side of the Delta sink: write Arrow record batches as Parquet data files of a table.

Owns file naming, Hive-style partition directories (`col=value/`, partition columns left out of
the files, as Delta expects), UTC normalisation of timestamps, and the per-file facts the driver
needs for add actions. Files go through the table's store (connectors.table_location: a local disk or S3).
Never touches the Delta log.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Iterable, Iterator
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from connectors.orphans import file_prefix
from connectors.table_location import TableFiles, TableRef

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass
class DataFile:
    path: str  # relative to the table root, URL-escaped as in Delta add actions
    size: int
    partition_values: dict[str, str | None]
    num_records: int
    modification_time: int

    def stats(self) -> str:
        return json.dumps({"numRecords": self.num_records})

    def to_dict(self) -> dict:
        return asdict(self)


def normalize(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Timestamps as microseconds in UTC (Delta's `timestamp`); everything else unchanged."""
    cols, fields, changed = [], [], False
    for f, col in zip(batch.schema, batch.columns):
        if pa.types.is_timestamp(f.type) and (f.type.tz not in ("UTC",) or f.type.unit != "us"):
            col = col.cast(pa.timestamp("us", tz="UTC"))
            f = pa.field(f.name, col.type, f.nullable)
            changed = True
        cols.append(col)
        fields.append(f)
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields)) if changed else batch


def _partition_value(v: object) -> str | None:
    return None if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def _split(batch: pa.RecordBatch, partition_by: list[str]) -> Iterator[tuple[dict[str, str | None], pa.RecordBatch]]:
    if not partition_by:
        yield {}, batch
        return
    keys = pa.table(batch.select(partition_by)).group_by(partition_by).aggregate([]).to_pylist()
    data_cols = [n for n in batch.schema.names if n not in partition_by]
    for key in keys:
        mask = None
        for name in partition_by:
            v = key[name]
            m = pc.is_null(batch.column(name)) if v is None else pc.equal(batch.column(name), v)
            mask = m if mask is None else pc.and_(mask, m)
        part = batch.filter(pc.fill_null(mask, False)).select(data_cols)
        yield {k: _partition_value(key[k]) for k in partition_by}, part


def write_files(table_path: TableRef, batches: Iterable[pa.RecordBatch], partition_by: list[str],
                rows_per_file: int = 1_000_000, write_id: str | None = None) -> list[DataFile]:
    """Write `batches` under `table_path`; returns one DataFile per Parquet file written. With `write_id`, the
    files' names carry it (connectors.orphans removes the files of a write that did not commit)."""
    prefix = file_prefix(write_id) if write_id else "part-"
    store = TableFiles(table_path)
    writers: dict[tuple, tuple[pq.ParquetWriter, pa.NativeFile, str, dict, list[int]]] = {}
    files: list[DataFile] = []

    def close(key: tuple) -> None:
        writer, out, rel, values, count = writers.pop(key)
        writer.close()
        size = out.tell()
        out.close()   # on S3 the upload completes here
        files.append(DataFile(quote(rel, safe="/="), size, values, count[0], int(time.time() * 1000)))

    for batch in batches:
        if batch.num_rows == 0:
            continue
        batch = normalize(batch)
        for values, part in _split(batch, partition_by):
            if part.num_rows == 0:
                continue
            key = tuple(sorted(values.items()))
            if key not in writers:
                subdir = "/".join(f"{k}={HIVE_NULL if v is None else v}" for k, v in values.items())
                rel = (subdir + "/" if subdir else "") + f"{prefix}{uuid.uuid4()}-c000.zstd.parquet"
                out = store.open_output(rel)
                writers[key] = (pq.ParquetWriter(out, part.schema, compression="zstd"), out, rel, values, [0])
            writer, _, _, _, count = writers[key]
            writer.write_batch(part)
            count[0] += part.num_rows
            if count[0] >= rows_per_file:
                close(key)
    for key in list(writers):
        close(key)
    return files


def remove_files(table_path: TableRef, files: Iterable[dict]) -> None:
    """Delete data files that were written but not committed (orphans of a replayed or failed batch)."""
    files = list(files)
    if not files:
        return
    store = TableFiles(table_path)
    for f in files:
        store.delete(unquote(f["path"]))


def missing_files(table_path: TableRef, files: Iterable[dict]) -> list[str]:
    """The paths (relative to the table) of written files that are no longer there."""
    files = list(files)
    if not files:
        return []
    store = TableFiles(table_path)
    return [f["path"] for f in files if not store.is_file(unquote(f["path"]))]
