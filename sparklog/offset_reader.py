"""Driver-side offset lookups: which partitions a query reads and where their logs start and end.

Owns one confluent-kafka Consumer used only for metadata and ListOffsets (it never subscribes, never
fetches records, never commits), with bounded retries (`fetchOffset.numRetries`,
`fetchOffset.retryIntervalMs`), and the resolution of an offset spec to numbers with Spark's rules.
Leader changes: librdkafka does not refresh the metadata of a consumer without assignments, so a
partition whose leader died would answer LEADER_NOT_AVAILABLE (or time out) for minutes; as Kafka's
Java consumer does within one call, partitions whose leader is moving are asked again after a
metadata refresh until the call's timeout, and every retry starts from fresh metadata.
Never reads records: that is `partition_reader`'s job on executors.
"""
from __future__ import annotations

import itertools
import logging
import re
import time
from typing import Callable, Iterable, Optional, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition as KTP
from confluent_kafka.admin import AdminClient

from sparklog import offsets as off
from sparklog import client_configs
from sparklog.kafka_log import with_logger
from sparklog.options import OptionError, ReadOptions
from sparklog.reachability import check_login, check_reachable

log = logging.getLogger(__name__)

T = TypeVar("T")
NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"   # the all-zero Uuid: a broker that does not know topic ids
# Per-partition ListOffsets errors that mean "the leader is moving or catching up": asked again.
LEADER_MOVING = frozenset({
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.REPLICA_NOT_AVAILABLE,
    KafkaError.BROKER_NOT_AVAILABLE, KafkaError.KAFKA_STORAGE_ERROR, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
})
_ATTEMPT_S = 5.0   # one ListOffsets round within the call's timeout
_MOVING_BACKOFF_S = (0.1, 0.2, 0.5, 1.0)


def client_error(e: KafkaException, params: dict[str, str]) -> Exception:
    """Turn librdkafka's refusal of a passed-through setting into an error naming the `kafka.*` option."""
    text = str(e)
    for name in params:
        if name in text:
            return OptionError(f"Kafka option 'kafka.{name}' was rejected by the Kafka client (librdkafka): {text}")
    return e


class OffsetReader:
    """Metadata and ListOffsets for one query; create on the driver, `close()` when done."""

    def __init__(self, opts: ReadOptions) -> None:
        self._opts = opts
        self._consumer: Optional[Consumer] = None
        self._admin: Optional[AdminClient] = None

    # --- plumbing ---------------------------------------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            conf = client_configs.driver_consumer(self._opts)
            try:
                consumer = Consumer(with_logger(conf))   # a setting librdkafka refuses fails here, named
            except KafkaException as e:
                raise client_error(e, self._opts.kafka_params) from e
            try:
                check_reachable(self._opts.bootstrap_servers)
                check_login(self._opts.bootstrap_servers, self._opts.security)
            except Exception:
                consumer.close()
                raise
            self._consumer = consumer
        return self._consumer

    def close(self) -> None:
        self._admin = None   # AdminClient has no close(); dropping it stops its threads
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None

    def _timeout_s(self) -> float:
        return max(10.0, self._opts.poll_timeout_ms / 1000.0 / 4)

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        attempts = self._opts.fetch_offset_retries
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except KafkaException as e:
                err = e.args[0] if e.args else None
                fatal = getattr(err, "fatal", lambda: False)()
                if attempt == attempts or fatal:
                    raise RuntimeError(f"pylog: {what} failed after {attempt} attempt(s) against "
                                       f"{self._opts.bootstrap_servers}: {e}") from e
                log.warning("pylog: %s failed (attempt %d/%d): %s; retrying", what, attempt, attempts, e)
                time.sleep(self._opts.fetch_offset_retry_ms / 1000.0)
                self.refresh_metadata()
        raise AssertionError("unreachable")

    def refresh_metadata(self) -> None:
        """Make librdkafka ask the cluster for leaders again (a Metadata request); best effort."""
        try:
            self.consumer.list_topics(timeout=self._timeout_s())
        except KafkaException as e:
            log.debug("pylog: refreshing metadata failed: %s", e)

    # --- partitions -------------------------------------------------------------------------------

    def partitions(self) -> list[off.TopicPartition]:
        """The topic-partitions the strategy selects right now (sorted)."""
        strategy = self._opts.strategy
        if strategy.kind == "assign":
            return sorted(strategy.partitions)
        md = self._retry("listing topics", lambda: self.consumer.list_topics(timeout=self._timeout_s()))
        if strategy.kind == "subscribe":
            wanted = set(strategy.topics)
            names = [t for t in md.topics if t in wanted]
        else:
            pattern = re.compile(strategy.pattern)
            names = [t for t in md.topics if not t.startswith("__") and pattern.fullmatch(t)]
        out: list[off.TopicPartition] = []
        for name in names:
            tmeta = md.topics[name]
            if tmeta.error is not None and not tmeta.partitions:
                continue
            out.extend((name, p) for p in tmeta.partitions)
        return sorted(out)

    def topic_ids(self, topics: Iterable[str]) -> off.TopicIds:
        """Kafka topic ids (KIP-516) of `topics`; a topic whose id the broker does not tell is left out."""
        names = sorted(set(topics))
        if not names:
            return {}
        if self._admin is None:
            self._admin = AdminClient(with_logger(client_configs.admin(self._opts)))
        out: off.TopicIds = {}
        futures = self._admin.describe_topics(TopicCollection(names), request_timeout=self._timeout_s())
        for name, fut in futures.items():
            try:
                tid = str(fut.result().topic_id)
            except KafkaException as e:   # unknown topic, or a broker without DescribeTopics support
                log.debug("pylog: no topic id for %s: %s", name, e)
                continue
            if tid and tid != NO_TOPIC_ID:
                out[name] = tid
        return out

    # --- offsets ----------------------------------------------------------------------------------

    def _list(self, what: str, requests: dict[off.TopicPartition, int]) -> dict[off.TopicPartition, int]:
        """ListOffsets for many partitions in one call: -2 earliest, -1 latest, else a timestamp (-1 = none)."""
        if not requests:
            return {}

        def call() -> dict[off.TopicPartition, int]:
            deadline = time.monotonic() + self._timeout_s()
            pending = dict(requests)
            out: dict[off.TopicPartition, int] = {}
            for round_ in itertools.count():
                left = deadline - time.monotonic()
                moving: list[KafkaError] = []
                try:   # a request sent to a leader that just died waits for it: ask again before the deadline
                    res = self.consumer.offsets_for_times([KTP(t, p, ts) for (t, p), ts in pending.items()],
                                                          timeout=max(1.0, min(left, _ATTEMPT_S)))
                except KafkaException as e:
                    err = e.args[0] if e.args else None
                    if not (isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT and left > _ATTEMPT_S):
                        raise
                    res, moving = [], [err]
                for r in res:
                    if r.error is None:
                        out[(r.topic, r.partition)] = r.offset
                        pending.pop((r.topic, r.partition), None)
                    elif r.error.code() in LEADER_MOVING and time.monotonic() < deadline:
                        moving.append(r.error)
                    else:
                        raise KafkaException(r.error)
                if not moving:
                    return out
                log.info("pylog: %s: %d partition(s) without a leader to answer (%s); asking again", what,
                         len(moving), moving[0].name())
                time.sleep(_MOVING_BACKOFF_S[min(round_, len(_MOVING_BACKOFF_S) - 1)])
                self.refresh_metadata()
            raise AssertionError("unreachable")

        return self._retry(what, call)

    def earliest(self, tps: Iterable[off.TopicPartition]) -> dict[off.TopicPartition, int]:
        return self._list("fetching earliest offsets", {tp: off.EARLIEST for tp in tps})

    def latest(self, tps: Iterable[off.TopicPartition],
               known: Optional[off.PartitionOffsets] = None) -> dict[off.TopicPartition, int]:
        """The partitions' ends (high watermarks; last stable offsets under read_committed). With `known` offsets (where the query has read to), an end
        below one of them is asked again, fetchOffset.numRetries times in all, fetchOffset.retryIntervalMs
        apart, before it is believed (Spark's fetchLatestOffsets): a partition's new leader may answer with
        a high watermark that has not caught up with its predecessor's yet."""
        wanted = {tp: off.LATEST for tp in tps}
        attempts = self._opts.fetch_offset_retries if known else 1
        for attempt in range(1, attempts + 1):
            found = self._list("fetching latest offsets", wanted)
            behind = [(off.format_tp(tp), known[tp], o) for tp, o in sorted(found.items())
                      if known and 0 <= o < known.get(tp, -1)]
            if not behind:
                break
            log.warning("pylog: latest offsets below the offsets already read (partition, read, latest): %s%s",
                        behind, "; asking again" if attempt < attempts else "")
            if attempt < attempts:
                time.sleep(self._opts.fetch_offset_retry_ms / 1000.0)
        return found

    def by_timestamp(self, timestamps: dict[off.TopicPartition, int]) -> dict[off.TopicPartition, Optional[int]]:
        """The first offset whose timestamp is >= the given one, or None where no record is that late."""
        res = self._list("fetching offsets by timestamp", timestamps)
        return {tp: (o if o >= 0 else None) for tp, o in res.items()}

    # --- specs → numbers ----------------------------------------------------------------------------

    def resolve(self, spec: off.OffsetSpec, tps: list[off.TopicPartition], *, is_start: bool,
                report_data_loss: Optional[Callable[[str], None]] = None) -> dict[off.TopicPartition, int]:
        """Concrete offsets for `tps` with Spark's rules (all partitions must be named in JSON specs)."""
        if isinstance(spec, off.EarliestSpec):
            return self.earliest(tps)
        if isinstance(spec, off.LatestSpec):
            return self.latest(tps)
        if isinstance(spec, off.SpecificOffsetsSpec):
            if set(spec.offsets) != set(tps) and self._opts.strategy.kind != "assign":
                raise OptionError(
                    "If startingOffsets contains specific offsets, you must specify all TopicPartitions.\n"
                    "Use -1 for latest, -2 for earliest.\n"
                    f"Specified: {sorted(map(off.format_tp, spec.offsets))} Assigned: {sorted(map(off.format_tp, tps))}")
            wanted = sorted(spec.offsets)
            earliest = self.earliest(wanted)
            latest = self.latest(wanted)
            out = {}
            for tp in wanted:
                o = spec.offsets[tp]
                if o == off.EARLIEST:
                    out[tp] = earliest[tp]
                elif o == off.LATEST:
                    out[tp] = latest[tp]
                else:
                    if report_data_loss is not None and not earliest[tp] <= o <= latest[tp]:
                        report_data_loss(f"startingOffsets for {off.format_tp(tp)} was {o} but consumer reset "
                                         f"to {earliest[tp]}")
                        o = earliest[tp]
                    out[tp] = o
            return out
        if isinstance(spec, off.GlobalTimestampSpec):
            timestamps = {tp: spec.timestamp for tp in tps}
        elif isinstance(spec, off.SpecificTimestampsSpec):
            if set(spec.timestamps) != set(tps) and self._opts.strategy.kind != "assign":
                raise OptionError(
                    "If starting/endingOffsetsByTimestamp contains specific offsets, you must specify all topics. "
                    f"Specified: {sorted(map(off.format_tp, spec.timestamps))} Assigned: {sorted(map(off.format_tp, tps))}")
            timestamps = dict(spec.timestamps)
        else:
            raise TypeError(f"unknown offset spec {spec!r}")
        found = self.by_timestamp(timestamps)
        missing = [tp for tp, o in found.items() if o is None]
        if missing and is_start and spec.strategy == "error":
            tp = missing[0]
            raise RuntimeError(f"No offset matched from request of topic-partition {off.format_tp(tp)} and timestamp "
                               f"{timestamps[tp]}. Set startingOffsetsByTimestampStrategy to 'latest' to start at "
                               "the latest offset instead.")
        latest = self.latest(missing) if missing else {}
        return {tp: (o if o is not None else latest[tp]) for tp, o in found.items()}
