"""Micro-batch reads: `spark.readStream.format("pylog")`.

Owns the streaming offsets (`{"topic":{"0":23}}`, next offset to read per partition), admission
control (maxOffsetsPerTrigger as `ReadMaxRows`, split in proportion to backlog; maxBytesPerTrigger
as `ReadMaxBytes`, in bytes as stored, weighed from each partition's size on disk; minOffsetsPerTrigger
with maxTriggerDelay), Trigger.AvailableNow (a target fixed once, then capped batches up to it),
partition discovery (new partitions and new pattern topics start from earliest), the query's origin
(its resolved initial offsets, kept in the first batch's end offset so a restart re-runs that batch from
them), the driver-side
data-loss checks (failOnDataLoss), query progress (`reportLatestOffset`) and the optional progress
mirroring into a consumer group (`commitToGroup`).
Runs on the driver except `read()`, which runs on executors and touches nothing but its range.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Iterator, Optional, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from sparklog import client_configs
from sparklog import offsets as off
from sparklog.errors import report_data_loss, in_one_line
from sparklog.executor import read_task
from sparklog.log_changes import LogChange, find_changes, resume_offsets
from sparklog.offset_reader import OffsetReader
from sparklog.options import ReadOptions
from sparklog.kafka_client import KafkaClient, KafkaClientError
from sparklog.planner import OffsetRange, RangePartition, backlog, byte_limit, plan_tasks, rate_limit
from sparklog.progress import GroupProgress
from sparklog.reader_settings import ReaderSettings

log = logging.getLogger(__name__)

IDLE_POLL_INTERVAL_S = 0.1    # an idle query's least time between two looks at the partitions' ends


@in_one_line
class PylogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.settings = ReaderSettings.from_options(opts)
        self._offsets: Optional[OffsetReader] = None
        self._progress: Optional[GroupProgress] = None
        self._sizes: Optional[KafkaClient] = None                 # maxBytesPerTrigger's DescribeLogDirs
        self._target: Optional[off.PartitionOffsets] = None      # Trigger.AvailableNow end
        self._latest: Optional[off.PartitionOffsets] = None      # last seen, for reportLatestOffset
        self._last_trigger_ms = 0.0
        self._idle_at: Optional[float] = None                    # when the last poll found nothing new
        self._reported: set[tuple[off.TopicPartition, int]] = set()   # each change reported once

    # Kafka clients live in the driver's long-lived Python process only; executors get a clean copy.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_offsets"] = None
        state["_progress"] = None
        state["_sizes"] = None
        return state

    @property
    def kafka(self) -> OffsetReader:
        if self._offsets is None:
            self._offsets = OffsetReader(self.opts)
        return self._offsets

    def _report(self, message: str) -> None:
        report_data_loss(message, self.opts.fail_on_data_loss, log)

    def _report_changes(self, changes: list[LogChange]) -> None:
        for c in changes:
            key = (c.tp, c.stored)
            if key not in self._reported:
                self._report(c.describe())
                self._reported.add(key)

    def _topic_ids(self, tps: Any) -> off.TopicIds:
        return self.kafka.topic_ids({tp[0] for tp in tps})

    # --- offsets ---------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = self.kafka.partitions()
        start = self.kafka.resolve(self.opts.starting, tps, is_start=True, report_data_loss=self._report)
        log.info("pylog stream: initial offsets %s", off.to_json(start))
        return off.with_origin(off.to_offset_dict(start, self._topic_ids(start)), start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)   # maxBytesPerTrigger also applies
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.kafka.latest(self.kafka.partitions())
        log.info("pylog stream: Trigger.AvailableNow target %s", off.to_json(self._target))

    def _delay(self, min_rows: int, start: off.PartitionOffsets, latest: off.PartitionOffsets) -> bool:
        """minOffsetsPerTrigger: wait for enough records unless maxTriggerDelay has passed (Spark's delayBatch)."""
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        if backlog(start, latest) < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def _resume_points(self, start: dict, latest: off.PartitionOffsets, ids: off.TopicIds,
                       earliest: off.PartitionOffsets) -> off.PartitionOffsets:
        """Where each partition of `start` goes on: its offset, or the new log's start when the log changed
        (re-created topic, offset beyond the end, aged out); reported once each, as failOnDataLoss says."""
        begin = off.from_offset_dict(start)
        watched = {tp: earliest[tp] for tp in begin if tp in latest and tp in earliest}
        changes = find_changes(begin, off.topic_ids_of(start), ids, watched, latest)
        self._report_changes(changes)
        return resume_offsets(begin, changes)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next batch; the query's first batch carries its origin (offsets.ORIGIN_KEY)."""
        self._pace_idle_polls()
        end = self._next_end(start, limit)
        origin = off.origin_of(start)
        idle = off.from_offset_dict(end) == off.from_offset_dict(start) and off.topic_ids_of(end) == off.topic_ids_of(start)
        self._idle_at = time.monotonic() if idle else None
        if origin is None:
            return end
        if idle:
            return start          # nothing new: the same offset, so Spark runs no batch
        return off.with_origin(end, origin) if off.from_offset_dict(start) == origin else end

    def _pace_idle_polls(self) -> None:
        """An idle query asks again at most every IDLE_POLL_INTERVAL_S. Spark asks for the latest offsets again
        10 ms after a trigger found nothing (its default trigger), and each answer takes a Metadata and two
        ListOffsets requests: a quarter of a core between this process, the broker and the JVM for a stream that
        reads nothing (bench/RESULTS.md). Records arriving at an idle stream wait at most that much longer."""
        if self._idle_at is not None and self._target is None:
            wait = self._idle_at + IDLE_POLL_INTERVAL_S - time.monotonic()
            if wait > 0:
                time.sleep(wait)

    def _next_end(self, start: dict, limit: ReadLimit) -> dict:
        # Spark plans batch N+1 only after batch N committed, so `start` is durable progress.
        self._mirror(off.from_offset_dict(start))
        latest = (dict(self._target) if self._target is not None
                  else self.kafka.latest(self.kafka.partitions(), known=off.from_offset_dict(start)))
        ids = self._topic_ids(latest)
        self._latest = latest
        earliest = self.kafka.earliest(list(latest)) if latest else {}   # one lookup for every use below
        begin = self._resume_points(start, latest, ids, earliest)
        if isinstance(limit, ReadAllAvailable):
            return off.to_offset_dict(latest, ids)
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.opts.min_offsets_per_trigger
        if min_rows is not None and self._target is None and self._delay(min_rows, begin, latest):
            log.debug("pylog stream: delaying batch, fewer than %d new records", min_rows)
            return start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.opts.max_offsets_per_trigger
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else self.opts.max_bytes_per_trigger
        if max_rows is None and max_bytes is None:
            return off.to_offset_dict(latest, ids)
        new_start = {tp: earliest[tp] for tp in latest if tp not in begin and tp in earliest}
        end = dict(latest)
        if max_rows is not None:
            end = rate_limit(max_rows, begin, latest, new_start)
        if max_bytes is not None:
            by_bytes = byte_limit(max_bytes, begin, latest, new_start, self._record_sizes(latest, earliest))
            end = {tp: min(o, by_bytes[tp]) for tp, o in end.items()}
        return off.to_offset_dict(end, ids)

    def _record_sizes(self, latest: off.PartitionOffsets,
                      earliest: off.PartitionOffsets) -> dict[off.TopicPartition, float]:
        """Average stored bytes per offset of each partition: its size on disk (DescribeLogDirs) over
        its offsets; what maxBytesPerTrigger weighs records with."""
        if self._sizes is None:
            self._sizes = KafkaClient(client_configs.native_client(self.opts))
        out: dict[off.TopicPartition, float] = {}
        try:
            for topic in sorted({tp[0] for tp in latest}):
                parts = sorted(p for t, p in latest if t == topic)
                for p, size in self._sizes.log_sizes(topic, parts).items():
                    records = latest[(topic, p)] - earliest.get((topic, p), 0)
                    if records > 0 and size > 0:
                        out[(topic, p)] = size / records
        except KafkaClientError as e:
            self._sizes.close()
            self._sizes = None
            raise RuntimeError(f"maxBytesPerTrigger needs the partitions' sizes on disk, which the broker does not "
                               f"give: {e}") from None
        return out

    def reportLatestOffset(self) -> Optional[dict]:
        if self._latest is None:   # e.g. a batch re-run from the offset log after a restart
            try:
                self._latest = self.kafka.latest(self.kafka.partitions())
            except Exception:  # noqa: BLE001 - progress reporting must never fail the query
                log.debug("pylog stream: latest offsets unavailable for progress", exc_info=True)
                return None
        return off.to_offset_dict(self._latest)

    # --- planning --------------------------------------------------------------------------------

    @staticmethod
    def _planned_start(start: dict, end: dict) -> dict:
        """The start a batch was planned with. A first batch re-run after a restart gets a freshly resolved
        initial offset from Spark; the origin its end offset carries (written to the checkpoint before the
        batch first ran) is where it really began."""
        fresh, planned = off.origin_of(start), off.origin_of(end)
        if fresh is None or planned is None or off.from_offset_dict(start) != fresh or planned == fresh:
            return start
        log.info("pylog stream: re-running the first batch from the offsets it was planned with, %s (not %s)",
                 off.to_json(planned), off.to_json(fresh))
        ids = off.topic_ids_of(end)
        return off.to_offset_dict(planned, ids)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        start = self._planned_start(start, end)
        begin = off.from_offset_dict(start)
        until = off.from_offset_dict(end)
        # A changed log (its topic id differs, or the end is below the start) is read from its new start.
        old_ids, new_ids = off.topic_ids_of(start), off.topic_ids_of(end)
        changed = [tp for tp in begin if tp in until and (until[tp] < begin[tp] or (
            old_ids.get(tp[0]) and new_ids.get(tp[0]) and old_ids[tp[0]] != new_ids[tp[0]]))]
        if changed:
            earliest = self.kafka.earliest(changed)
            self._report_changes(find_changes({tp: begin[tp] for tp in changed}, old_ids, new_ids, earliest,
                                              {tp: max(until[tp], earliest[tp]) for tp in changed}))
            begin.update({tp: min(earliest[tp], until[tp]) for tp in changed})
        new_tps = sorted(tp for tp in until if tp not in begin)
        new_start = self.kafka.earliest(new_tps) if new_tps else {}
        for tp, o in new_start.items():
            if o != 0:
                self._report(f"Added partition {off.format_tp(tp)} starts from {o} instead of 0")
        deleted = sorted(tp for tp in begin if tp not in until)
        if deleted:
            self._report(f"{[off.format_tp(tp) for tp in deleted]} are gone")
        ranges = []
        for tp in sorted(until):
            frm = begin.get(tp, new_start.get(tp))
            if frm is None:
                continue
            ranges.append(OffsetRange(tp[0], tp[1], frm, until[tp]))
        return plan_tasks(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition), f"unexpected partition {partition!r}"
        return read_task(partition, self.settings)

    # --- progress ----------------------------------------------------------------------------------

    def _mirror(self, done: off.PartitionOffsets) -> None:
        if not self.opts.commit_to_group:
            return
        if self._progress is None:
            self._progress = GroupProgress(self.opts.bootstrap_servers, self.opts.librdkafka_params,
                                           self.opts.commit_to_group)
        self._progress.commit(done)

    def commit(self, end: dict) -> None:
        self._mirror(off.from_offset_dict(end))

    def stop(self) -> None:
        for client in (self._progress, self._offsets, self._sizes):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - best effort at shutdown
                    log.debug("closing a Kafka client failed", exc_info=True)
        self._progress = None
        self._offsets = None
        self._sizes = None
