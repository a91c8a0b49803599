"""Executor side: what one Spark task reads, with which reader.

Owns `read_task`: the ranges of one `RangePartition`, read one after the other through the native
fetcher (`fetch_reader`; a small task's first records asked for in one Fetch, `prefetch`) or
librdkafka (`partition_reader`) as `ReaderSettings` chose on the driver; small batches of
consecutive ranges are joined before they go to Spark (`coalesce_batches`). Both readers yield `pyarrow.RecordBatch`es of the source's exact Arrow schema.
"""
from __future__ import annotations

from typing import Iterator, Optional

import pyarrow as pa

from kafka_protocol.fetch_response import FetchedPartition
from sparklog.fetch_reader import FetchRangeReader, prefetch
from sparklog.partition_reader import RangeReader
from sparklog.planner import OffsetRange, RangePartition
from sparklog.read_progress import ProgressSender
from sparklog.reader_settings import ReaderSettings
from sparklog.schema import ARROW_BATCH_ROWS, COALESCE_BYTES


def read_range(rng: OffsetRange, settings: ReaderSettings,
               first: Optional[FetchedPartition] = None) -> Iterator[pa.RecordBatch]:
    """The batches of one range, in offset order; empty ranges yield nothing. `first`: a Fetch
    answer at the range's start (native path only)."""
    if rng.end <= rng.start:
        return iter(())
    return iter(FetchRangeReader(rng, settings, first) if settings.native else RangeReader(rng, settings))


def coalesce_batches(batches: Iterator[pa.RecordBatch], max_rows: int = ARROW_BATCH_ROWS,
                     max_bytes: int = COALESCE_BYTES) -> Iterator[pa.RecordBatch]:
    """Consecutive small batches joined (copied) into batches of at most `max_rows` rows and `max_bytes`
    bytes, in order; a batch that fills a group alone passes as it is. Each batch costs Spark an Arrow
    IPC message and a JVM batch: a micro-batch of 8 partitions gave 8 batches of 1,250 rows."""
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if pending and (rows + batch.num_rows > max_rows or size + batch.nbytes > max_bytes):
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, rows, size = [], 0, 0
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _task_batches(task: RangePartition, settings: ReaderSettings) -> Iterator[pa.RecordBatch]:
    first = prefetch(task.ranges, settings) if settings.native else {}
    for rng in task.ranges:
        yield from read_range(rng, settings, first.pop(rng, None))


def read_task(task: RangePartition, settings: ReaderSettings) -> Iterator[pa.RecordBatch]:
    """The batches of every range of one task, range after range, small ones joined; their rows reported to the
    driver as they go when it listens (option progressAddress)."""
    batches = coalesce_batches(_task_batches(task, settings))
    if settings.progress_address is None:
        return batches
    return ProgressSender(settings.progress_address).counted(batches)
