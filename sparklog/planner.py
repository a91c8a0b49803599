"""Turn offsets into Spark tasks, and cap a micro-batch: pure arithmetic, as Spark's Kafka connector does it.

Owns: `OffsetRange` (one topic-partition's [start, end)), the `RangePartition` handed to Spark (the
ranges one task reads), `split_ranges` (maxRecordsPerPartition and minPartitions splitting without
gaps or overlaps, like `KafkaOffsetRangeCalculator`), `coalesce` (small ranges of many partitions
packed into fewer tasks, which Spark's connector does not do), `plan_tasks` (the two together: the
one place tasks are planned; a small read is one task), `rate_limit` (maxOffsetsPerTrigger split across partitions in
proportion to their backlog, like `KafkaMicroBatchStream.rateLimit`) and `byte_limit`
(maxBytesPerTrigger, which Spark's connector lacks, shared the same way in stored bytes).
Never talks to a broker or to Spark.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import heapq
import os
from typing import Iterable, Mapping, Optional, Sequence

from pyspark.sql.datasource import InputPartition

from sparklog.offsets import PartitionOffsets, TopicPartition


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


class RangePartition(InputPartition):
    """What one Spark task reads: one or more offset ranges, one after the other."""

    def __init__(self, ranges: Sequence[OffsetRange]) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


def _divide(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    """`parts` contiguous pieces; the last ones take the rounding. Empty pieces are dropped."""
    out: list[OffsetRange] = []
    remaining = rng.size
    start = rng.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, rng.end)
        if end > start:
            out.append(OffsetRange(rng.topic, rng.partition, start, end))
        start = end
    return out


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: Optional[int] = None,
                 max_records_per_partition: Optional[int] = None) -> list[OffsetRange]:
    """Non-empty ranges, split so that none exceeds maxRecordsPerPartition and, when fewer than
    minPartitions remain, large ones are split in proportion to their share of the total."""
    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        pieces = [p for r in pieces for p in (_divide(r, math.ceil(r.size / max_records_per_partition))
                                              if r.size > max_records_per_partition else [r])]
    if not min_partitions or len(pieces) >= min_partitions:
        return pieces
    total = sum(r.size for r in pieces)
    out: list[OffsetRange] = []
    for r in pieces:
        parts = max(math.floor(r.size / total * min_partitions + 0.5), 1)  # Scala's math.round
        out.extend(_divide(r, parts))
    return out


# A task reading fewer records than this is mostly fixed cost (a Python worker round trip, a
# connection, a Fetch): coalescing packs ranges into tasks until each holds about this many.
TASK_RECORDS = 1_000_000
# A read of at most this many records is ONE task when minPartitions is not set: each task costs a
# Python worker round trip in Spark (tens of ms on a 2-core machine; a 10,000-record micro-batch
# took 207-285 ms as one task against 296-474 ms as two), while spreading it over the cores saves
# only about 0.3 us of JVM and decoder work per record. At 250,000 records two tasks won (730-876 ms
# against 981 ms); 100,000 was a toss-up (bench/RESULTS.md, 2026-11-25).
SINGLE_TASK_RECORDS = 50_000


def coalesce(ranges: Sequence[OffsetRange], slots: int, task_records: int = TASK_RECORDS) -> list[RangePartition]:
    """Pack ranges into tasks: as many as the total needs at `task_records` each, rounded up to a
    multiple of `slots` (so every slot gets work in each wave), never more than there are ranges.
    Largest ranges first into the least loaded task; each task reads its ranges in (topic,
    partition, start) order. No range is split or dropped."""
    if not ranges:
        return []
    total = sum(r.size for r in ranges)
    slots = max(slots, 1)
    tasks = max(slots, math.ceil(total / task_records))
    tasks = min(len(ranges), math.ceil(tasks / slots) * slots)
    heap: list[tuple[int, int]] = [(0, i) for i in range(tasks)]
    bins: list[list[OffsetRange]] = [[] for _ in range(tasks)]
    for r in sorted(ranges, key=lambda r: (-r.size, r.topic, r.partition, r.start)):
        load, i = heapq.heappop(heap)
        bins[i].append(r)
        heapq.heappush(heap, (load + r.size, i))
    return [RangePartition(sorted(b, key=lambda r: (r.topic, r.partition, r.start))) for b in bins if b]


def default_slots() -> int:
    """Tasks that run at once when minPartitions is not set: the cores of the planning machine
    (a Python data source is planned in a worker beside the driver and cannot see Spark's
    defaultParallelism; on a cluster, minPartitions says how many tasks to plan)."""
    return os.cpu_count() or 1


def plan_tasks(ranges: Iterable[OffsetRange], min_partitions: Optional[int] = None,
               max_records_per_partition: Optional[int] = None, slots: Optional[int] = None) -> list[RangePartition]:
    """The tasks of one read: ranges split as Spark's connector splits them, then coalesced to
    about `slots` (minPartitions when set) tasks; without minPartitions, a read of at most
    SINGLE_TASK_RECORDS records is one task. A task never reads more than
    maxRecordsPerPartition records: with that option, ranges are not packed beyond it."""
    pieces = split_ranges(ranges, min_partitions, max_records_per_partition)
    per_task = min(TASK_RECORDS, max_records_per_partition or TASK_RECORDS)
    if min_partitions:
        want = min_partitions
    elif sum(p.size for p in pieces) <= SINGLE_TASK_RECORDS:
        want = 1
    else:
        want = slots or default_slots()
    tasks = coalesce(pieces, want, per_task)
    if max_records_per_partition and any(t.size > max_records_per_partition for t in tasks):
        return [RangePartition([r]) for r in pieces]
    return tasks


def ranges_between(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """One range per partition of `end` that also has a start (sorted); the caller checks end < start."""
    return [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for (t, p) in sorted(end) if (t, p) in start]


def backlog(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """Records available beyond `start` (partitions missing from `start` count from 0): the one lag
    formula (admission control, the jobs' progress lines, the demo's group lag)."""
    return sum(max(0, o - start.get(tp, 0)) for tp, o in latest.items())


def rate_limit(limit: int, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               new_partition_start: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """End offsets admitting about `limit` records, shared in proportion to each partition's backlog.

    A partition's share is floor(limit * backlog / total), or 1 when that rounds below 1, so small
    partitions are never starved; no end passes `latest`. Partitions absent from `start` begin at
    `new_partition_start`.
    """
    return _share(limit, start, latest, new_partition_start, {tp: 1.0 for tp in latest})


def byte_limit(limit_bytes: int, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               new_partition_start: Mapping[TopicPartition, int],
               bytes_per_record: Mapping[TopicPartition, float]) -> PartitionOffsets:
    """End offsets admitting about `limit_bytes` bytes as stored in the log (maxBytesPerTrigger).

    Each partition's backlog is weighed in bytes (records x its average stored record size; a
    partition without an estimate takes the mean of the others) and the limit is shared in
    proportion, as `rate_limit` shares records: at least one record per partition with a backlog,
    no end past `latest`.
    """
    known = [b for b in bytes_per_record.values() if b > 0]
    fallback = sum(known) / len(known) if known else 1.0
    # a stored record takes at least a byte (its batch far more): the floor keeps shares finite
    return _share(limit_bytes, start, latest, new_partition_start,
                  {tp: max(bytes_per_record.get(tp, 0) or fallback, 1.0) for tp in latest})


def _share(limit: float, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
           new_partition_start: Mapping[TopicPartition, int], weight: Mapping[TopicPartition, float]) -> PartitionOffsets:
    """`limit` (in units of `weight` per record) shared in proportion to each partition's weighed backlog;
    at least one record per partition with a backlog, no end past `latest`."""
    backlog_weight: dict[TopicPartition, float] = {}
    for tp, end in latest.items():
        begin = start.get(tp, new_partition_start.get(tp))
        if begin is not None and end > begin:
            backlog_weight[tp] = (end - begin) * weight[tp]
    total = sum(backlog_weight.values())
    if total <= 0:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp not in backlog_weight:
            out[tp] = end
            continue
        begin = start.get(tp, new_partition_start.get(tp, 0))
        share = limit * backlog_weight[tp] / total
        out[tp] = min(end, begin + max(1, int(share // weight[tp])))
    return out
