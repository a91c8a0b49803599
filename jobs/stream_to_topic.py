"""`pylog job stream_to_topic`: topic → a Spark SQL transformation → topic, exactly once.

Settings (conf/jobs/stream_to_topic.properties, `pylog job stream_to_topic --help`): the source (as the
other jobs, read with read_committed by default, so that a chain of such jobs only ever sees committed
records), `transform.sql` (a query over the view `source`), the output topic and its brokers, the
checkpoint, and the delivery guarantee. With exactly-once (the default) each micro-batch is written in
Kafka transactions that commit with the batch, and a batch Spark replays after a crash is not written
again (`sparklog.exactly_once_sink`): consumers of the output with isolation.level=read_committed see
every result once.

The source offsets live in the checkpoint (as for any Spark query): a new checkpoint starts from
source.starting.offsets under a new query id, so keep the checkpoint with the job. SIGTERM and SIGINT stop
after the batch in flight.
"""
from __future__ import annotations

import logging
from typing import Any

from jobs.config import JobConfig, JobConfigError
from jobs.rows import source_options
from jobs.spark_session import build_session
from jobs.run_history import JobRun, recorded
from jobs.supervise import source_offsets, supervise

log = logging.getLogger("pylog.job.stream_to_topic")


def sink_options(cfg: JobConfig) -> dict[str, str]:
    """The pylog sink's options from `sink.*` settings."""
    guarantee = cfg.get("sink.delivery.guarantee", "exactly-once")
    opts = {"kafka.bootstrap.servers": cfg.get("sink.bootstrap.servers") or cfg.require("source.bootstrap.servers"),
            "deliveryGuarantee": guarantee,
            "transactionalIdPrefix": cfg.get("sink.transactional.id.prefix", f"{cfg.name}-")}
    topic = cfg.get("sink.topic")
    if topic:
        opts["topic"] = topic
    for k, v in cfg.values.items():
        if k.startswith("sink.kafka."):
            opts[k[len("sink."):]] = v
    return opts


class _Report:
    """One line per batch, and the batch added to the run's record (this job writes no Delta table)."""

    def __init__(self, record: JobRun) -> None:
        self.record = record

    def __call__(self, progress: Any) -> None:
        log.info("batch %d: %d rows", progress.batchId, progress.numInputRows)
        src = progress.sources[0] if progress.sources else None
        self.record.batch(int(progress.numInputRows), source_offsets(src.startOffset if src else None),
                          source_offsets(src.endOffset if src else None))


def run(cfg: JobConfig) -> int:
    with recorded(cfg, cfg.name) as record:
        return _stream(cfg, record)


def _stream(cfg: JobConfig, record: JobRun) -> int:
    options = source_options(cfg)
    options["includeHeaders"] = "true"             # the view `source` has the headers to pass on
    options.setdefault("kafka.isolation.level", cfg.get("source.isolation.level", "read_committed"))
    options["startingOffsets"] = cfg.get("source.starting.offsets", "earliest")
    if cfg.get("source.max.offsets.per.trigger"):
        options["maxOffsetsPerTrigger"] = cfg.require("source.max.offsets.per.trigger")
    sql = cfg.get("transform.sql", "SELECT key, value, headers FROM source")
    checkpoint = cfg.require("sink.checkpoint.location")
    sink = sink_options(cfg)
    spark = build_session(cfg, f"pylog stream_to_topic {cfg.name}")
    source = spark.readStream.format("pylog").options(**options).load()
    source.createOrReplaceTempView("source")
    try:
        rows = spark.sql(sql)
    except Exception as e:  # noqa: BLE001 - a user's SQL: one line naming the setting
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise JobConfigError(f"job {cfg.name}: setting 'transform.sql' is not a valid query over the view "
                             f"`source`: {first}") from None
    if "topic" not in sink and "topic" not in [c.lower() for c in rows.columns]:
        raise JobConfigError(f"job {cfg.name}: set 'sink.topic', or let transform.sql give a topic column")
    log.info("%s -> %s (%s), checkpoint %s", cfg.get("source.topics"), sink.get("topic", "the topic column"),
             sink["deliveryGuarantee"], checkpoint)
    record.begin()
    query = (rows.writeStream.format("pylog").options(**sink).option("checkpointLocation", checkpoint)
             .trigger(**cfg.trigger()).start())
    return supervise(query, _Report(record))
