"""`pylog job batch_load`: a scheduled incremental load, made for cron.

Reads the table's committed offsets, reads every topic-partition from there up to the current end
(fixed when the run starts), and commits the data and the new end offsets in one Delta commit.
A run with no new data is a no-op; a run after a crash re-reads from the committed offsets, and two
overlapping runs cannot both commit the same range (the Delta commit carries a marker and offsets).
"""
from __future__ import annotations

import json
import logging

from connectors.offset_manager import OffsetManager, end_offsets
from connectors.offset_txns import to_starting_offsets_json
from jobs.config import JobConfig, JobConfigError
from jobs.rows import source_options, table_rows
from jobs.spark_session import build_session

log = logging.getLogger("pylog.job.batch_load")


def plan_range(cfg: JobConfig, om: OffsetManager) -> tuple[dict, dict]:
    bootstrap = cfg.require("source.bootstrap.servers")
    ends = end_offsets(bootstrap, cfg.list("source.topics"))
    committed = om.committed()
    default = cfg.get("source.starting.offsets", "earliest")
    if default not in ("earliest", "latest"):
        raise JobConfigError(f"job {cfg.name}: source.starting.offsets must be earliest or latest for batch_load, got {default!r}")
    starts = {t: {p: committed.get(t, {}).get(p, -2 if default == "earliest" else e) for p, e in parts.items()}
              for t, parts in ends.items()}
    return starts, ends


def run(cfg: JobConfig) -> int:
    table = cfg.require("sink.table.path")
    app_id = cfg.get("sink.app.id", cfg.name)
    om = OffsetManager(table, app_id)
    starts, ends = plan_range(cfg, om)
    if all(starts[t][p] >= 0 and starts[t][p] >= ends[t][p] for t in ends for p in ends[t]):
        log.info("nothing new since the last load: offsets %s", to_starting_offsets_json(ends))
        return 0
    spark = build_session(cfg, f"pylog batch_load {app_id}")
    df = (spark.read.format("pylog").options(**source_options(cfg))
          .option("startingOffsets", json.dumps({t: {str(p): o for p, o in ps.items()} for t, ps in starts.items()}))
          .option("endingOffsets", to_starting_offsets_json(ends)).load())
    rows = table_rows(df, cfg.get("value.schema"))
    writer = (rows.write.format("pylog-delta").mode("append").option("path", table).option("appId", app_id)
              .option("offsets", to_starting_offsets_json(ends)).option("mergeSchema", cfg.get("sink.merge.schema", "false")))
    if cfg.get("sink.partition.by"):
        writer = writer.option("partitionBy", cfg.require("sink.partition.by"))
    writer.save()
    log.info("loaded up to offsets %s into %s", to_starting_offsets_json(ends), table)
    if cfg.get("group.mirror"):
        try:
            om.mirror_to_group(cfg.require("source.bootstrap.servers"), cfg.require("group.mirror"))
        except Exception as e:  # noqa: BLE001
            log.warning("could not mirror offsets to group %s: %s", cfg.get("group.mirror"), e)
    return 0
