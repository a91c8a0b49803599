"""What the jobs write per record: parsed JSON (or raw bytes) plus the source and ingestion columns.

The table always keeps `topic`, `partition` and `offset`, so every row names the record it came
from and exactly-once can be checked with a GROUP BY. Nothing is dropped or altered silently:
  - a key that is not UTF-8 text keeps its bytes in `_corrupt_key` (the `key` column is null), since a
    string column holding invalid UTF-8 breaks readers (delta-rs refuses it);
  - with value.schema, a value that is not JSON of that schema keeps its bytes in `_corrupt_value`
    (Spark's PERMISSIVE mode; value.on.error=keep, the default), or stops the job naming its topic,
    partition and offset (value.on.error=fail);
and each batch's line counts them (`observed_counts`).
"""
from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from connectors.keyed_merge import TOMBSTONE

CORRUPT_KEY = "_corrupt_key"
CORRUPT_VALUE = "_corrupt_value"
ON_ERROR = ("keep", "fail")
OBSERVATION = "pylog_rows"          # the name of the metrics each batch reports (Spark's observe)
_PARSE_ERROR = "_pylog_parse_error"


def raw_columns(value_schema: str | None, on_error: str = "keep") -> pa.Schema:
    """The nullable binary columns the rows carry for keys and values kept raw (see the module's docstring)."""
    names = [CORRUPT_KEY] + ([CORRUPT_VALUE] if value_schema and on_error == "keep" else [])
    return pa.schema([pa.field(n, pa.binary(), True) for n in names])


def table_rows(df: Any, value_schema: str | None, tombstones: bool = False, on_error: str = "keep") -> Any:
    """Map a `pylog` source DataFrame to the table's rows (a DataFrame, streaming or batch); with
    `tombstones`, also the flag a keyed merge deletes by (connectors.keyed_merge.TOMBSTONE: a null value)."""
    from pyspark.sql import functions as F

    if on_error not in ON_ERROR:
        raise ValueError(f"value.on.error must be keep or fail, got {on_error!r}")
    key_text = F.try_validate_utf8(F.col("key").cast("string"))
    source_cols = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp").alias("event_time"),
                   key_text.alias("key"),
                   F.when(key_text.isNull() & F.col("key").isNotNull(), F.col("key")).alias(CORRUPT_KEY)]
    flag = [F.col("value").isNull().alias(TOMBSTONE)] if tombstones else []
    keep = [TOMBSTONE] if flag else []
    if not value_schema:
        out = df.select(*source_cols, F.col("value"), *flag)
        return out.withColumn("ingested_at", F.current_timestamp())
    fields = _parse_schema(df, value_schema)
    parsed = F.from_json(F.col("value").cast("string"), _with_error_column(fields),
                         {"columnNameOfCorruptRecord": _PARSE_ERROR, "mode": "PERMISSIVE"})
    out = df.select(*source_cols, F.col("value").alias("_raw"), parsed.alias("data"), *flag)
    bad = F.col(f"data.{_PARSE_ERROR}").isNotNull()
    if on_error == "fail":
        message = F.format_string("value of %s-%d at offset %d is not JSON of value.schema (value.on.error=fail; "
                                  "set value.on.error=keep to keep such values in _corrupt_value): %s",
                                  F.col("topic"), F.col("partition"), F.col("offset"),
                                  F.substring(F.col(f"data.{_PARSE_ERROR}"), 1, 120))
        out = out.where(F.when(bad, F.raise_error(message)).otherwise(F.lit(True)))
        raw: list[Any] = []
    else:
        raw = [F.when(bad, F.col("_raw")).alias(CORRUPT_VALUE)]
    out = out.select("topic", "partition", "offset", "event_time", "key", CORRUPT_KEY,
                     *[F.col(f"data.`{f.name}`").alias(f.name) for f in fields], *raw, *keep)
    return out.withColumn("ingested_at", F.current_timestamp())


def _parse_schema(df: Any, value_schema: str) -> Any:
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = _parse_datatype_string(value_schema)
    if not isinstance(schema, StructType):
        raise ValueError(f"value.schema must be a list of columns like 'id string, amount double', got {value_schema!r}")
    return schema


def _with_error_column(fields: Any) -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType(list(fields.fields) + [StructField(_PARSE_ERROR, StringType(), True)])


def observed(rows: Any, observation: Any = None) -> Any:
    """`rows` reporting, per batch, how many keys and values were kept raw (Spark's observe, under OBSERVATION
    or into a pyspark Observation for a batch query)."""
    from pyspark.sql import functions as F

    metrics = [F.count_if(F.col(c).isNotNull()).alias(c) for c in (CORRUPT_KEY, CORRUPT_VALUE) if c in rows.columns]
    return rows.observe(observation or OBSERVATION, *metrics) if metrics else rows


def observed_counts(metrics: Mapping[str, Any] | None) -> str:
    """', 3 values kept raw in _corrupt_value' for a batch's observed metrics ('' when none were)."""
    row = (metrics or {}).get(OBSERVATION)
    if row is None:
        return ""
    values = row.asDict() if hasattr(row, "asDict") else dict(row)
    parts = [f"{n} {'keys' if c == CORRUPT_KEY else 'values'} kept raw in {c}"
             for c, n in sorted(values.items()) if n]
    return "".join(f", {p}" for p in parts)


def check_value_settings(cfg: Any) -> str:
    """value.on.error, checked before any Spark work (a JobConfigError names it)."""
    from jobs.config import JobConfigError

    on_error = str(cfg.get("value.on.error", "keep"))
    if on_error not in ON_ERROR:
        raise JobConfigError(f"job {cfg.name}: setting 'value.on.error' must be keep or fail, got {on_error!r}")
    return on_error


def job_rows(cfg: Any, df: Any, tombstones: bool = False) -> Any:
    """table_rows with the job's value.schema and value.on.error (a JobConfigError names a bad one)."""
    from jobs.config import JobConfigError

    on_error = check_value_settings(cfg)
    try:
        return table_rows(df, cfg.get("value.schema"), tombstones, on_error)
    except ValueError as e:
        raise JobConfigError(f"job {cfg.name}: setting 'value.schema': {e}") from None


def add_raw_columns(cfg: Any, table: Any) -> None:
    """Give a table written before the raw columns existed its `_corrupt_*` columns (nullable, no rewrite)."""
    from connectors.delta_commit import add_missing_columns

    add_missing_columns(table, raw_columns(cfg.get("value.schema"), cfg.get("value.on.error", "keep")))


def source_client_conf(cfg: Any) -> dict[str, str]:
    """librdkafka's settings for the jobs' own clients of the source brokers (group mirror, rewinds): the
    `source.kafka.*` options, security translated (kafka_protocol.security.client_settings)."""
    from sparklog.options import parse_batch_options

    return parse_batch_options(source_options(cfg)).librdkafka_params


def source_options(cfg: Any) -> dict[str, str]:
    """Reader options shared by the jobs, from `source.*` settings (Spark Kafka option names)."""
    opts = {"kafka.bootstrap.servers": cfg.require("source.bootstrap.servers"), "subscribe": ",".join(cfg.list("source.topics"))}
    if not cfg.list("source.topics"):
        from jobs.config import JobConfigError

        raise JobConfigError(f"job {cfg.name}: setting 'source.topics' must name at least one topic")
    opts["failOnDataLoss"] = cfg.get("source.fail.on.data.loss", "true")
    for k, v in cfg.values.items():
        if k.startswith("source.kafka."):
            opts[k[len("source."):]] = v
        elif k == "source.remote.storage.url":
            opts["remoteStorage"] = v
        elif k.startswith("source.remote.storage."):
            opts["remoteStorage." + k[len("source.remote.storage."):]] = v
    return opts
