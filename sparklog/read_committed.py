"""isolation.level=read_committed on the native read path: which records of a Fetch answer to drop.

Owns Kafka's consumer rule (Fetcher's aborted-transaction filtering), as a pure function over what
the decoder reports per batch and the Fetch answer's aborted-transactions list:
- a producer id joins the aborted set once a batch at or after the first offset of one of its
  aborted transactions is reached;
- a transactional data batch of a producer in the set is dropped;
- that producer's next control batch (its abort marker) takes it out of the set.
Control batches themselves never become rows (the decoder skips them). The broker bounds what it
returns by the last stable offset, so open transactions are never read.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sparklog.native_decoder import BatchInfo


class AbortedTransactions:
    """The filter over one Fetch answer, fed its batches in order, possibly in several pieces."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda a: a[1])   # (producer id, first offset)
        self._next = 0
        self._active: set[int] = set()

    def dropped(self, batches: Sequence[BatchInfo]) -> list[tuple[int, int]]:
        """[base, last] offset ranges of the data batches among `batches` that read_committed drops."""
        out: list[tuple[int, int]] = []
        for b in batches:
            while self._next < len(self._pending) and self._pending[self._next][1] <= b.last_offset:
                self._active.add(self._pending[self._next][0])
                self._next += 1
            if b.control:
                self._active.discard(b.producer_id)
            elif b.transactional and b.producer_id in self._active:
                out.append((b.base_offset, b.last_offset))
        return out


def aborted_ranges(batches: Sequence[BatchInfo], aborted: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """[base, last] offset ranges of the data batches read_committed drops, in order."""
    return AbortedTransactions(aborted).dropped(batches)


def drop_aborted(batch: pa.RecordBatch, ranges: Sequence[tuple[int, int]]) -> pa.RecordBatch:
    """The rows of `batch` whose offset is in none of `ranges`."""
    if not ranges or batch.num_rows == 0:
        return batch
    offsets = batch.column("offset")
    keep = None
    for base, last in ranges:
        outside = pc.or_(pc.less(offsets, base), pc.greater(offsets, last))
        keep = outside if keep is None else pc.and_(keep, outside)
    return batch.filter(keep)
