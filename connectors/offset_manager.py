"""The offset manager: a Delta table's committed source offsets, for restarts, rewinds and lag.

    om = OffsetManager("/data/events_delta", app_id="events")
    om.committed()               # {("events", 0): 1200, ("events", 1): 1187}
    om.starting_offsets_json()   # '{"events":{"0":1200,"1":1187}}' for startingOffsets
    om.mirror_to_group("localhost:9092", "events-delta")   # lag visible to any Kafka tool

The offsets live in the table's own log (txn actions, see connectors.offset_txns), so they are
exactly those of the data in the table, and survive checkpoints and log cleanup. Rewinds use
`rewind_offsets` to compute explicit offsets (earliest, a timestamp) for a new app id or generation.

`resume_from` is where every job turns stored offsets into the offsets it reads from: it compares
them with the live log (`live_log`: topic ids, log start and end) by sparklog.log_changes' rule,
reports a re-created topic or lost data as failOnDataLoss says, and fills in partitions and topics
the table has not seen yet. Offsets are sparklog.offsets.PartitionOffsets throughout, and their JSON
is sparklog.offsets.to_json (Spark's).
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from dataclasses import dataclass
from typing import Literal, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from connectors.delta_commit import app_state, committed_offsets, current_generation
from connectors.delta_log_reader import list_app_transactions
from connectors.offset_txns import AppState, apps_in
from sparklog.errors import report_data_loss
from sparklog.kafka_log import with_logger
from sparklog.log_changes import find_changes, resume_offsets
from sparklog.offset_reader import OffsetReader
from sparklog.offsets import PartitionOffsets, TopicIds, to_json
from sparklog.options import OptionError, parse_batch_options, parse_stream_options

from connectors.table_location import TableLocation, TableRef

log = logging.getLogger(__name__)


class OffsetManager:
    def __init__(self, table_path: TableRef, app_id: str) -> None:
        self.table_path = TableLocation.of(table_path)
        self.app_id = app_id

    def state(self, version: int | None = None) -> AppState:
        """Offsets, topic ids, generation and last batch of this app, from one snapshot of the table (as of
        `version`, a version still retained in its log, when given)."""
        return app_state(self.table_path, self.app_id, version)

    def committed(self) -> PartitionOffsets:
        """{(topic, partition): next offset} of the data in the table for this app (empty if none)."""
        return committed_offsets(self.table_path, self.app_id)

    def starting_offsets_json(self) -> str | None:
        """The committed offsets as a `startingOffsets` JSON string, or None when nothing is committed."""
        c = self.committed()
        return to_json(c) if c else None

    def generation(self) -> int | None:
        return current_generation(self.table_path, self.app_id)

    def apps(self) -> list[str]:
        """Every app id that has committed offsets into this table."""
        return apps_in(list_app_transactions(self.table_path))

    def mirror_to_group(self, bootstrap: str, group_id: str, offsets: PartitionOffsets | None = None,
                        client_conf: Mapping[str, str] | None = None) -> PartitionOffsets:
        """Commit the table's offsets to a broker consumer group (generation -1), so lag tools see them."""
        offsets = offsets if offsets is not None else self.committed()
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        if not tps:
            return offsets
        c = Consumer(with_logger({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False,
                                  **(client_conf or {})}))
        try:
            for tp in c.commit(offsets=tps, asynchronous=False) or []:
                if tp.error:
                    raise KafkaException(tp.error)
        finally:
            c.close()
        return offsets


@dataclass(frozen=True)
class LiveLog:
    """The source topics as the broker has them now."""

    earliest: PartitionOffsets
    latest: PartitionOffsets
    topic_ids: TopicIds


def live_log(source_options: Mapping[str, str], *, require: bool = True) -> LiveLog:
    """Topic ids, log start and end of every partition of the subscribed topics (Spark Kafka options).

    With `require`, a subscribed topic the broker does not have is an error that names it.
    """
    opts = parse_batch_options(source_options)
    reader = OffsetReader(opts)
    try:
        tps = reader.partitions()
        if require and opts.strategy.kind == "subscribe":
            missing = sorted(set(opts.strategy.topics) - {t for t, _ in tps})
            if missing:
                raise OptionError(f"topic(s) {', '.join(missing)} not found on {opts.bootstrap_servers}")
        return LiveLog(reader.earliest(tps), reader.latest(tps), reader.topic_ids({t for t, _ in tps}))
    finally:
        reader.close()


def resume_from(state: AppState, live: LiveLog, *, fail_on_data_loss: bool,
                new: Literal["earliest", "latest"] = "earliest") -> PartitionOffsets:
    """Concrete start offsets for every live partition: the stored ones where the log is unchanged.

    A changed log (re-created topic, offsets beyond the end or aged out, partition gone) is reported
    with failOnDataLoss' rule (raises DataLossError when true) and, when tolerated, read from its new
    start. New partitions of known topics start at their earliest offset, new topics at `new`.
    """
    changes = find_changes(state.offsets, state.topic_ids, live.topic_ids, live.earliest, live.latest)
    for c in changes:
        report_data_loss(c.describe(), fail_on_data_loss, log)
    starts = resume_offsets(state.offsets, changes)
    known_topics = {t for t, _ in state.offsets}
    out: PartitionOffsets = {}
    for tp, high in sorted(live.latest.items()):
        default = live.earliest[tp] if new == "earliest" or tp[0] in known_topics else high
        out[tp] = starts.get(tp, default)
    return out


def declared_start(state: AppState, live: LiveLog, source_options: Mapping[str, str], starting: str, *,
                   fail_on_data_loss: bool) -> PartitionOffsets:
    """Where a new generation of an app starts, as concrete offsets for every live partition: the table's
    offsets (resume_from) when the app has any, else `starting` (earliest, latest, or Spark's offset JSON)
    resolved by the source's own rules. A job stores this with its generation claim and passes it as
    startingOffsets, so the first batch starts at the same offsets however often it is restarted."""
    if state.offsets:
        return resume_from(state, live, fail_on_data_loss=fail_on_data_loss,
                           new="latest" if starting == "latest" else "earliest")
    if starting == "earliest":
        return dict(live.earliest)
    if starting == "latest":
        return dict(live.latest)
    opts = parse_stream_options({**source_options, "startingOffsets": starting})
    reader = OffsetReader(opts)
    try:
        return reader.resolve(opts.starting, sorted(live.latest), is_start=True,
                              report_data_loss=lambda m: report_data_loss(m, fail_on_data_loss, log))
    finally:
        reader.close()


def _per_partition(bootstrap: str, topics: Iterable[str], pick: Callable[[Consumer, str, int, int, int], int],
                   client_conf: dict[str, str]) -> PartitionOffsets:
    """{(topic, partition): pick(consumer, topic, partition, low, high)} for every partition of `topics`."""
    c = Consumer(with_logger({"bootstrap.servers": bootstrap, "group.id": "pylog-offset-manager",
                              "enable.auto.commit": False, **client_conf}))
    try:
        md = c.list_topics(timeout=10)
        out: PartitionOffsets = {}
        for t in topics:
            if t not in md.topics or md.topics[t].error is not None:
                raise KafkaException(f"unknown topic '{t}'")
            for p in md.topics[t].partitions:
                low, high = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                out[(t, p)] = pick(c, t, p, low, high)
        return out
    finally:
        c.close()


def end_offsets(bootstrap: str, topics: Iterable[str], **client_conf: str) -> PartitionOffsets:
    """The brokers' current log end offsets of every partition of `topics`."""
    return _per_partition(bootstrap, topics, lambda c, t, p, low, high: high, client_conf)


def rewind_offsets(bootstrap: str, topics: Iterable[str], *, timestamp_ms: int | None = None,
                   **client_conf: str) -> PartitionOffsets:
    """Explicit offsets to rewind to: earliest of every partition, or the first offset at/after `timestamp_ms`."""

    def pick(c: Consumer, t: str, p: int, low: int, high: int) -> int:
        if timestamp_ms is None:
            return low
        [tp] = c.offsets_for_times([TopicPartition(t, p, timestamp_ms)], timeout=10)
        return high if tp.offset < 0 else tp.offset

    return _per_partition(bootstrap, topics, pick, client_conf)
