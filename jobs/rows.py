"""What the jobs write per record: parsed JSON (or raw bytes) plus the source and ingestion columns.

The table always keeps `topic`, `partition` and `offset`, so every row names the record it came
from and exactly-once can be checked with a GROUP BY.
"""
from __future__ import annotations

from typing import Any

from connectors.keyed_merge import TOMBSTONE


def table_rows(df: Any, value_schema: str | None, tombstones: bool = False) -> Any:
    """Map a `pylog` source DataFrame to the table's rows (a DataFrame, streaming or batch); with
    `tombstones`, also the flag a keyed merge deletes by (connectors.keyed_merge.TOMBSTONE: a null value)."""
    from pyspark.sql import functions as F

    source_cols = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp").alias("event_time"),
                   F.col("key").cast("string").alias("key")]
    flag = [F.col("value").isNull().alias(TOMBSTONE)] if tombstones else []
    if value_schema:
        parsed = F.from_json(F.col("value").cast("string"), value_schema)
        out = (df.select(*source_cols, parsed.alias("data"), *flag)
               .select("topic", "partition", "offset", "event_time", "key", "data.*", *([TOMBSTONE] if flag else [])))
    else:
        out = df.select(*source_cols, F.col("value"), *flag)
    return out.withColumn("ingested_at", F.current_timestamp())


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
    return opts
