"""Executor side: what one Spark task reads, with which reader.

Owns `read_task`: the ranges of one `RangePartition`, read one after the other through the native
fetcher (`fetch_reader`; a small task's first records asked for in one Fetch, `prefetch`) or
librdkafka (`partition_reader`) as `ReaderSettings` chose on the driver. Both readers yield `pyarrow.RecordBatch`es of the source's exact Arrow schema.
"""
from __future__ import annotations

from typing import Iterator, Optional

import pyarrow as pa

from broker.protocol.fetch_response import FetchedPartition
from sparklog.fetch_reader import FetchRangeReader, prefetch
from sparklog.partition_reader import RangeReader
from sparklog.planner import OffsetRange, RangePartition
from sparklog.reader_settings import ReaderSettings


def read_range(rng: OffsetRange, settings: ReaderSettings,
               first: Optional[FetchedPartition] = None) -> Iterator[pa.RecordBatch]:
    """The batches of one range, in offset order; empty ranges yield nothing. `first`: a Fetch
    answer at the range's start (native path only)."""
    if rng.end <= rng.start:
        return iter(())
    return iter(FetchRangeReader(rng, settings, first) if settings.native else RangeReader(rng, settings))


def read_task(task: RangePartition, settings: ReaderSettings) -> Iterator[pa.RecordBatch]:
    """The batches of every range of one task, range after range."""
    first = prefetch(task.ranges, settings) if settings.native else {}
    for rng in task.ranges:
        yield from read_range(rng, settings, first.pop(rng, None))
