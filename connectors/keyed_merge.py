"""The rows of a keyed MERGE (sink.mode=merge): upserts and deletes by key, as CDC pipelines need.

A batch's rows carry a boolean column TOMBSTONE (true: the Kafka value was null, so the key is deleted).
Within a batch only each key's latest record counts: the highest offset (then the highest partition,
for a key seen in two partitions). Applying the batch to a table is a copy-on-write rewrite: the files
holding any of the batch's keys are read, their rows of those keys dropped, the batch's upserts added,
and the rest of those files written again. A null key matches nothing (its upsert is an insert).

DataFrame functions only: the transaction that reads the files and commits the result is
connectors.delta_spark_commit's. Never commits, never reads offsets.
"""
from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Sequence
from urllib.parse import unquote

TOMBSTONE = "_pylog_tombstone"
FILE = "_pylog_file"
ORDER = ("offset", "partition")   # the latest record of a key: highest offset, then partition


def latest_per_key(rows: Any, keys: Sequence[str]) -> Any:
    """`rows` (a DataFrame with the ORDER columns) reduced to each key's latest record."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.col(c).desc() for c in ORDER]
    rank = F.row_number().over(Window.partitionBy(*[F.col(k) for k in keys]).orderBy(*order))
    return rows.withColumn("_pylog_rank", rank).where(F.col("_pylog_rank") == 1).drop("_pylog_rank")


def file_name(add_path: str) -> str:
    """The file name of a Delta add action's path (URL-encoded, relative or absolute), as Spark's
    `_metadata.file_name` gives it."""
    return PurePosixPath(unquote(add_path)).name


def touched_files(target: Any, latest: Any, keys: Sequence[str]) -> set[str]:
    """Names of the target's files holding a row with one of `latest`'s keys (`target` has the FILE column)."""
    hits = target.join(latest.select(*keys), list(keys), "left_semi").select(FILE).distinct().collect()
    return {str(r[0]) for r in hits}


def rewritten_rows(target: Any, latest: Any, keys: Sequence[str], touched: set[str], columns: Sequence[str]) -> Any:
    """What replaces the touched files: their rows of other keys, and the batch's upserts (not its deletes)."""
    from pyspark.sql import functions as F

    kept = (target.where(F.col(FILE).isin(sorted(touched))).join(latest.select(*keys), list(keys), "left_anti")
            .select(*columns))
    upserts = latest.where(~F.col(TOMBSTONE)).select(*columns)
    return kept.unionByName(upserts)


def with_file_names(table: Any) -> Any:
    """A Delta table DataFrame with the name of the file each row is in (column FILE)."""
    from pyspark.sql import functions as F

    return table.select("*", F.col("_metadata.file_name").alias(FILE))
