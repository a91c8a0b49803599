"""Executor side: what one Spark task reads, with which reader.

Owns `read_task`: the ranges of one `RangePartition`, read one after the other through the native
fetcher (`fetch_reader`) or librdkafka (`partition_reader`) as `ReaderSettings` chose on the
driver. Both readers yield `pyarrow.RecordBatch`es of the source's exact Arrow schema.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from sparklog.fetch_reader import FetchRangeReader
from sparklog.partition_reader import RangeReader
from sparklog.planner import OffsetRange, RangePartition
from sparklog.reader_settings import ReaderSettings


def read_range(rng: OffsetRange, settings: ReaderSettings) -> Iterator[pa.RecordBatch]:
    """The batches of one range, in offset order; empty ranges yield nothing."""
    if rng.end <= rng.start:
        return iter(())
    return iter(FetchRangeReader(rng, settings) if settings.native else RangeReader(rng, settings))


def read_task(task: RangePartition, settings: ReaderSettings) -> Iterator[pa.RecordBatch]:
    """The batches of every range of one task, range after range."""
    for rng in task.ranges:
        yield from read_range(rng, settings)
