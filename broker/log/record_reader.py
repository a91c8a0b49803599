"""Reading a partition's batches back in order, for the broker's own internal topics.

The group coordinator (`__consumer_offsets`) and the transaction coordinator (`__transaction_state`)
replay their topics at load: each whole batch with its header, read a chunk at a time. Not for the
Fetch path (that sends file regions without reading them).
"""
from __future__ import annotations

from typing import Iterator

from broker.log.partition_log import PartitionLog
from kafka_protocol.record_batch import BatchHeader, parse_header
from kafka_protocol.record_builder import iter_batches

CHUNK_BYTES = 1 << 20


def read_batches(plog: PartitionLog) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch from the log start to the log end: (header, the batch's bytes)."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = memoryview(plog.read(offset, CHUNK_BYTES).read_bytes())
        last = offset - 1
        for pos, size in iter_batches(data):
            h = parse_header(data, pos)
            if h.last_offset >= offset:
                yield h, data[pos:pos + size]
            last = max(last, h.last_offset)
        if last < offset:
            break
        offset = last + 1
