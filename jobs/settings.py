"""The settings each job takes: name, default and meaning, in one place.

`pylog job NAME --help` prints them, the job's config check warns about keys none of them names
(a typo would otherwise be ignored silently), and conf/jobs/*.properties follow them. Prefix
settings (ending in '*') pass the rest of the key through: `source.kafka.*` to the Kafka client,
`spark.*` to the SparkSession.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class Setting:
    key: str
    default: Optional[str]     # None: no default (required, or off when unset)
    meaning: str
    required: bool = False

    def matches(self, key: str) -> bool:
        return key.startswith(self.key[:-1]) if self.key.endswith("*") else key == self.key


SOURCE = (
    Setting("source.bootstrap.servers", None, "Kafka-protocol brokers to read from, host:port[,host:port]", True),
    Setting("source.topics", None, "comma-separated topics to read", True),
    Setting("source.fail.on.data.loss", "true", "true: stop with an error naming topic, partition and offsets when "
            "data is gone or a topic was re-created; false: warn once and read the new log from its start"),
    Setting("source.kafka.*", None, "passed to the Kafka client without the 'source.' prefix, e.g. "
            "source.kafka.security.protocol"),
    Setting("source.remote.storage.url", None, "the brokers' remote.log.storage.url: offsets of tiered topics that "
            "lie in the bucket are read from it by Spark's executors, not through the brokers (direct reads)"),
    Setting("source.remote.storage.*", None, "that store's settings for direct reads, by delta-rs's names over the "
            "standard AWS variables: e.g. source.remote.storage.aws_endpoint_url, "
            "source.remote.storage.aws_access_key_id"),
)
SINK = (
    Setting("sink.table.path", None, "the Delta table to write: a local path or s3://bucket/path", True),
    Setting("sink.storage.*", None, "the table's store, as delta-rs's storage options without the 'sink.storage.' "
            "prefix, over the standard AWS variables: e.g. sink.storage.aws_endpoint_url, "
            "sink.storage.aws_access_key_id, sink.storage.aws_region, sink.storage.aws_allow_http=true"),
    Setting("sink.app.id", "<job name>", "identity of this writer in the table (its offsets and batches)"),
    Setting("sink.partition.by", None, "comma-separated columns to partition the table by"),
    Setting("sink.merge.schema", "false", "true: add new value columns to the table as nullable columns"),
    Setting("sink.engine", "delta-rs", "delta-rs: the pylog-delta sink | delta-spark: Spark's own Delta engine writes "
            "each batch (one commit with the same offsets and markers; either engine resumes the other's table)"),
    Setting("sink.mode", "append", "append | merge: upsert each batch by sink.merge.key (each key's latest record "
            "in the batch wins; a record with a null value deletes its key); merge needs sink.engine=delta-spark"),
    Setting("sink.merge.key", None, "for sink.mode=merge: comma-separated columns that identify a row, e.g. key"),
    Setting("value.schema", None, "DDL schema of JSON values, e.g. 'id string, amount double'; empty keeps raw bytes"),
    Setting("value.on.error", "keep", "a value that is not JSON of value.schema: keep (its bytes in the column "
            "_corrupt_value, counted in the batch's line) | fail (stop, naming topic, partition and offset)"),
    Setting("group.mirror", None, "consumer group that mirrors the table's offsets, so lag tools see them"),
)
COMMON = (
    Setting("spark.master", "local[2]", "Spark master URL"),
    Setting("spark.log.level", "WARN", "log level of Spark's own messages"),
    Setting("spark.*", None, "any other Spark setting, e.g. spark.executor.memory"),
    Setting("log.file", "<temp dir>/pylog-logs/<job>-<time>-<pid>.log", "where Spark's own log goes (a failure's "
            "line names it)"),
    Setting("metrics.port", None, "serve the run's Prometheus metrics (records, batches, Delta version, lag, "
            "outcome) on this port while it runs (0: any free port)"),
    Setting("metrics.host", "127.0.0.1", "the address metrics.port listens on"),
    Setting("metrics.textfile", None, "write the run's metrics to this file after each batch and at its end, for "
            "node_exporter's textfile collector (cron jobs end before a scrape)"),
)


def find(settings: Iterable[Setting], key: str) -> Optional[Setting]:
    return next((s for s in settings if s.matches(key)), None)


def unknown_keys(settings: tuple[Setting, ...], keys: Iterable[str]) -> list[str]:
    """'key (did you mean ...?)' for every key no setting names."""
    names = [s.key for s in settings if not s.key.endswith("*")]
    out = []
    for k in sorted(keys):
        if find(settings, k) is None:
            close = difflib.get_close_matches(k, names, n=1)
            out.append(f"{k} (did you mean {close[0]}?)" if close else k)
    return out


def describe(settings: tuple[Setting, ...]) -> str:
    """The settings as an aligned help text."""
    width = max(len(s.key) for s in settings)
    lines = []
    for s in settings:
        default = "required" if s.required else (f"default {s.default}" if s.default is not None else "optional")
        lines.append(f"  {s.key:<{width}}  {s.meaning} ({default})")
    return "\n".join(lines)


STREAM_TO_DELTA = SOURCE + SINK + COMMON + (
    Setting("source.starting.offsets", "earliest", "where to start when the table has no offsets of this app yet: "
            "earliest | latest | JSON like {\"events\":{\"0\":0}}"),
    Setting("source.max.offsets.per.trigger", None, "at most this many records per micro-batch"),
    Setting("sink.checkpoint.location", None, "Spark checkpoint directory (one gen-<g> folder per generation)", True),
    Setting("trigger", "available-now", "available-now (catch up, then stop) | processing-time=<interval>"),
)


BATCH_LOAD = SOURCE + SINK + COMMON + (
    Setting("source.starting.offsets", "earliest", "where topics and partitions the table has not seen yet start: "
            "earliest or latest"),
)


REPROCESS = SOURCE + SINK + COMMON + (
    Setting("reprocess.from", "earliest", "where to rewind to: earliest | timestamp:<epoch ms or ISO-8601, UTC "
            "unless it names a zone> | offsets:{\"topic\":{\"0\":100,...}} naming every partition (-2 = earliest) | "
            "version:<V>, the offsets sink.app.id had stored in sink.table.path as of its version V (still retained)"),
    Setting("reprocess.mode", "new-table", "new-table: write reprocess.target.path | replace: atomically replace "
            "sink.table.path (fences a stream writing it)"),
    Setting("reprocess.target.path", None, "the new table, for reprocess.mode=new-table"),
)


MAINTAIN = (
    Setting("sink.table.path", None, "the Delta table to maintain", True),
    Setting("sink.storage.*", None, "the table's store (see stream_to_delta's sink.storage.*)"),
    Setting("maintain.optimize", "true", "compact small files with delta-spark's OPTIMIZE"),
    Setting("maintain.zorder.by", None, "comma-separated columns to Z-ORDER by while compacting"),
    Setting("maintain.vacuum", "true", "delete files no version within the retention needs (VACUUM)"),
    Setting("maintain.vacuum.retention.hours", None, "VACUUM's retention in whole hours (unset: the table's "
            "delta.deletedFileRetentionDuration, 7 days by default); below the table's it needs "
            "spark.databricks.delta.retentionDurationCheck.enabled=false, "
            "and beside a running writer it must exceed the longest time from writing a batch to committing it"),
    Setting("maintain.checkpoint", "true", "write a checkpoint of the latest version"),
    Setting("maintain.log.cleanup", "true", "after the checkpoint, delete the commits older than the table's "
            "delta.logRetentionDuration (the offsets stay in the checkpoint)"),
    Setting("maintain.max.attempts", "5", "attempts of each step when another writer's commit conflicts with it"),
    Setting("maintain.report.path", None, "also write the report (sizes, file counts, each app's offsets) as JSON here"),
) + COMMON


STREAM_TO_TOPIC = SOURCE + COMMON + (
    Setting("source.starting.offsets", "earliest", "where a query with a new checkpoint starts: earliest | latest | "
            "JSON like {\"events\":{\"0\":0}}"),
    Setting("source.max.offsets.per.trigger", None, "at most this many records per micro-batch"),
    Setting("source.isolation.level", "read_committed", "read_committed: read only committed transactions (what "
            "an exactly-once pipeline reads) | read_uncommitted"),
    Setting("transform.sql", "SELECT key, value, headers FROM source", "the transformation: a Spark SQL query over "
            "the view `source` (columns key, value, topic, partition, offset, timestamp, timestampType, headers) "
            "giving value and optionally key, headers, partition, topic"),
    Setting("sink.bootstrap.servers", "<source.bootstrap.servers>", "brokers of the output topic"),
    Setting("sink.topic", None, "the output topic (unless the query gives a topic column)"),
    Setting("sink.checkpoint.location", None, "Spark checkpoint directory: the query's source offsets and batch ids",
            True),
    Setting("sink.delivery.guarantee", "exactly-once", "exactly-once: each micro-batch in Kafka transactions, a "
            "replayed batch never written twice (read the output with read_committed) | at-least-once"),
    Setting("sink.transactional.id.prefix", "<job name>-", "prefix of the sink's transactional ids (one per query "
            "and task)"),
    Setting("sink.kafka.*", None, "passed to the sink's producer without the 'sink.' prefix, e.g. "
            "sink.kafka.transaction.timeout.ms, sink.kafka.compression.type"),
    Setting("trigger", "available-now", "available-now (catch up, then stop) | processing-time=<interval>"),
)


JOB_SETTINGS: dict[str, tuple[Setting, ...]] = {
    "stream_to_delta": STREAM_TO_DELTA,
    "stream_to_topic": STREAM_TO_TOPIC,
    "batch_load": BATCH_LOAD,
    "reprocess": REPROCESS,
    "maintain": MAINTAIN,
}
