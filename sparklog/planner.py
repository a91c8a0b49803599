"""Turn offsets into Spark tasks, and cap a micro-batch: pure arithmetic, as Spark's Kafka connector does it.

Owns: `OffsetRange` (one topic-partition's [start, end)), the `RangePartition` handed to Spark (one
task per range), `split_ranges` (maxRecordsPerPartition and minPartitions splitting without gaps or
overlaps, like `KafkaOffsetRangeCalculator`) and `rate_limit` (maxOffsetsPerTrigger split across
partitions in proportion to their backlog, like `KafkaMicroBatchStream.rateLimit`).
Never talks to a broker or to Spark.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

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
    """What one Spark task reads: one offset range."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


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


def ranges_between(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """One range per partition of `end` that also has a start (sorted); the caller checks end < start."""
    return [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for (t, p) in sorted(end) if (t, p) in start]


def backlog(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """Records available beyond `start` (partitions missing from `start` count from 0)."""
    return sum(max(0, o - start.get(tp, 0)) for tp, o in latest.items())


def rate_limit(limit: int, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               new_partition_start: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """End offsets admitting about `limit` records, shared in proportion to each partition's backlog.

    A partition's share is floor(limit * backlog / total), or 1 when that rounds below 1, so small
    partitions are never starved; no end passes `latest`. Partitions absent from `start` begin at
    `new_partition_start`.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, new_partition_start.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, new_partition_start.get(tp, 0))
        prorate = limit * (sizes[tp] / total)
        share = int(math.ceil(prorate) if prorate < 1 else math.floor(prorate))
        out[tp] = min(end, begin + share)
    return out
