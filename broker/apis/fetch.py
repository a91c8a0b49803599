"""Fetch: serve record batches from segment files, long-polling until min_bytes or max_wait.

Record data is never copied into Python: each partition's data is a file region that the server
sends with sendfile. No fetch sessions: every response has session id 0, so clients send full
fetches, which Kafka permits.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from broker.apis.common import error_result, field
from broker.context import BrokerContext
from broker.errors import ErrorCode
from broker.protocol.builder import ms
from broker.protocol.codec import Request
from broker.protocol.fetch_response import PartitionData, encode_fetch_response


def _read_all(ctx: BrokerContext, body: Any, max_bytes: int) -> tuple[list[tuple[str, list[PartitionData]]], int, bool]:
    """One pass over the requested partitions: (topics, total bytes, any error)."""
    out: list[tuple[str, list[PartitionData]]] = []
    total = 0
    any_error = False
    for t in body.topics:
        parts = []
        for p in t.partitions:
            pd = PartitionData(p.partition, ErrorCode.none)
            try:
                plog = ctx.replicas.partition(t.topic, p.partition)
                pd.high_watermark = pd.last_stable_offset = plog.log_end_offset
                pd.log_start_offset = plog.log_start_offset
                budget = min(p.partition_max_bytes, max_bytes - total)
                if budget > 0 or total == 0:
                    region = plog.read(p.fetch_offset, max(budget, 0), min_one_batch=(total == 0))
                    if region.length:
                        pd.records = region
                        total += region.length
                    else:
                        pd.records = b""
                else:
                    pd.records = b""
            except Exception as e:  # noqa: BLE001
                pd.error_code, _ = error_result(e)
                pd.records = None
                any_error = True
            parts.append(pd)
        out.append((t.topic, parts))
    return out, total, any_error


async def handle(ctx: BrokerContext, req: Request) -> list:
    body = req.body
    max_wait_s = max(ms(body.max_wait), 0) / 1000.0
    min_bytes = body.min_bytes
    max_bytes = field(body, "max_bytes", 0x7FFFFFFF)
    max_bytes = min(max_bytes, ctx.config["fetch.max.bytes"])
    deadline = time.monotonic() + max_wait_s
    keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    while True:
        topics, total, any_error = _read_all(ctx, body, max_bytes)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or any_error or remaining <= 0 or not keys:
            break
        fut = ctx.replicas.waiter(keys)
        try:
            await asyncio.wait_for(fut, remaining)
        except asyncio.TimeoutError:
            pass
        finally:
            ctx.replicas.discard(fut, keys)
    return encode_fetch_response(req.api_version, req.correlation_id, topics)
