"""Fetch: serve record batches from segment files, long-polling until min_bytes or max_wait.

Record data is never copied into Python here: each partition's data is a file region that the
connection sends with sendfile (or reads, when small). A fetch that can be answered at once is
answered synchronously; only a long poll becomes a coroutine. No fetch sessions: every response
has session id 0, so clients send full fetches, which Kafka permits.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable

from broker.apis.common import error_result, field
from broker.context import BrokerContext
from broker.errors import ErrorCode, KafkaError, UnknownTopicOrPartitionError

LEADER_EPOCH = 0     # one broker, leaders never change: every partition's leader epoch is 0


class UnknownLeaderEpochError(KafkaError):
    """The client knows a newer leader epoch than this broker's (Kafka: UNKNOWN_LEADER_EPOCH)."""

    code = ErrorCode.unknown_leader_epoch


class FencedLeaderEpochError(KafkaError):
    """The client's leader epoch is older than this broker's (Kafka: FENCED_LEADER_EPOCH)."""

    code = ErrorCode.fenced_leader_epoch


def check_leader_epoch(current_leader_epoch: int) -> None:
    """KIP-320: a request naming the leader epoch it knows (-1: none) must name the current one."""
    if current_leader_epoch > LEADER_EPOCH:
        raise UnknownLeaderEpochError(f"leader epoch {current_leader_epoch} is newer than {LEADER_EPOCH}")
    if 0 <= current_leader_epoch < LEADER_EPOCH:
        raise FencedLeaderEpochError(f"leader epoch {current_leader_epoch} is older than {LEADER_EPOCH}")
from broker.protocol.builder import ms
from broker.protocol.codec import Request
from broker.protocol.fetch_response import PartitionData, encode_fetch_response


def _read_all(ctx: BrokerContext, body: Any, max_bytes: int) -> tuple[list[tuple[str, list[PartitionData]]], int, bool]:
    """One pass over the requested partitions: (topics, total bytes, any error)."""
    out: list[tuple[str, list[PartitionData]]] = []
    total = 0
    any_error = False
    read_uncommitted = field(body, "isolation_level", 0) == 0
    for t in body.topics:
        parts = []
        for p in t.partitions:
            pd = PartitionData(p.partition, ErrorCode.none, aborted_transactions_null=read_uncommitted)
            try:
                plog = ctx.replicas.partition(t.topic, p.partition)
                check_leader_epoch(field(p, "current_leader_epoch", -1))
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
                # as Kafka: an errored partition has no watermarks and an empty (not null) record set; its
                # aborted transactions are [] when the partition is unknown, else as for any partition
                unknown = isinstance(e, UnknownTopicOrPartitionError)
                pd = PartitionData(p.partition, error_result(e)[0], records=b"",
                                   aborted_transactions_null=read_uncommitted and not unknown)
                any_error = True
            parts.append(pd)
        out.append((t.topic, parts))
    return out, total, any_error


def handle(ctx: BrokerContext, req: Request) -> list | Awaitable[list]:
    """The response chunks now if the first read satisfies the request, else a long-poll coroutine."""
    body = req.body
    max_wait_s = max(ms(body.max_wait), 0) / 1000.0
    min_bytes = body.min_bytes
    max_bytes = field(body, "max_bytes", 0x7FFFFFFF)
    max_bytes = min(max_bytes, ctx.config["fetch.max.bytes"])
    deadline = time.monotonic() + max_wait_s
    keys = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    topics, total, any_error = _read_all(ctx, body, max_bytes)
    if total >= min_bytes or any_error or max_wait_s <= 0 or not keys:
        return encode_fetch_response(req.api_version, req.correlation_id, topics)
    return _long_poll(ctx, req, max_bytes, min_bytes, deadline, keys)


async def _long_poll(ctx: BrokerContext, req: Request, max_bytes: int, min_bytes: int, deadline: float,
                     keys: list[tuple[str, int]]) -> list:
    """Wait for appends to the fetched partitions until min_bytes are there or the deadline passes."""
    body = req.body
    while True:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            fut = ctx.replicas.waiter(keys)
            try:
                await asyncio.wait_for(fut, remaining)
            except asyncio.TimeoutError:
                pass
            finally:
                ctx.replicas.discard(fut, keys)
        topics, total, any_error = _read_all(ctx, body, max_bytes)
        if total >= min_bytes or any_error or deadline - time.monotonic() <= 0:
            return encode_fetch_response(req.api_version, req.correlation_id, topics)
