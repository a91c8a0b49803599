"""Fetch: serve record batches from segment files, long-polling until min_bytes or max_wait.

Record data is never copied into Python here: each partition's data is a file region that the
connection sends with sendfile (or reads, when small). A fetch that can be answered at once is
answered synchronously; only a long poll becomes a coroutine. Fetch sessions (KIP-227, v7+) are
resolved first (broker/fetch_sessions.py): an incremental request reads every partition of its
session and answers only those with something new.

With ACLs (Kafka's checks): a consumer needs READ on each topic, a follower CLUSTER_ACTION on the cluster;
the partitions refused answer TOPIC_AUTHORIZATION_FAILED, beside the others' data.

Tiered storage: a consumer's offset below a tiered partition's local log start is served from the remote log
manager's cache (bytes, not a file region); when the cache does not hold it, the request becomes a coroutine
that waits for the chunk (at most remote.fetch.max.wait.ms), and a store that fails answers the retriable
KAFKA_STORAGE_ERROR for that partition.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
import logging
from typing import TYPE_CHECKING, Any, Awaitable

from broker.apis.common import error_result, field
from broker.context import BrokerContext
from kafka_protocol.errors import (ErrorCode, KafkaStorageError, OffsetMovedToTieredStorageError,
                                   UnknownTopicOrPartitionError)
from broker.fetch_sessions import FINAL_EPOCH, FetchContext, Wanted


from kafka_protocol.builder import ms
from kafka_protocol.record_batch import parse_header
from kafka_protocol.codec import Request
from kafka_protocol.fetch_response import PartitionData, encode_fetch_response, records_length
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType


if TYPE_CHECKING:
    from broker.log.partition_log import PartitionLog

log = logging.getLogger(__name__)


def _context(ctx: BrokerContext, body: Any) -> FetchContext:
    """The request's partitions, resolved against its fetch session (KIP-227; v7+)."""
    requested = [((t.topic, p.partition), Wanted(p.fetch_offset, p.partition_max_bytes,
                                                 field(p, "current_leader_epoch", -1)))
                 for t in body.topics for p in t.partitions]
    epoch = field(body, "session_epoch", FINAL_EPOCH)
    forgotten = [(t.topic, p) for t in field(body, "forgotten_topics_data", ()) or () for p in t.partitions]
    return ctx.fetch_sessions.resolve(field(body, "session_id", 0), epoch, requested, forgotten, ctx.now_ms())


def _refused_topics(ctx: BrokerContext, fc: FetchContext, replica_id: int) -> frozenset[str]:
    """The fetched topics the principal may not read (a follower: all of them without CLUSTER_ACTION)."""
    if ctx.authorizer is None:
        return frozenset()
    topics = {t for t, _ in fc.wanted}
    if replica_id >= 0:
        return frozenset() if ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME) \
            else frozenset(topics)
    return frozenset(t for t in topics if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t))


RemoteWanted = list[tuple["PartitionLog", int, int]]   # (log, fetch offset, bytes): chunks to load first


def _read_all(ctx: BrokerContext, fc: FetchContext, max_bytes: int, read_uncommitted: bool, replica_id: int = -1,
              refused: frozenset[str] = frozenset(), client: "Consumer | None" = None,
              remote_wanted: RemoteWanted | None = None, remote_failed: dict[tuple[str, int], str] | None = None
              ) -> tuple[list[tuple[str, list[PartitionData]]], int, bool]:
    """One pass over the wanted partitions: (topics, total bytes, any error). A consumer reads below the
    high watermark; a follower (`replica_id` >= 0, cluster mode) up to the log end, and its fetch offset
    is its position for the ISR and the high watermark. In cluster mode a consumer's Fetch v11+ (`client`) may
    be served by a follower, and a leader may send it to a follower in its rack instead (KIP-392). Tiered offsets
    missing from the remote cache are added to `remote_wanted`; those whose load failed (`remote_failed`)
    answer KAFKA_STORAGE_ERROR."""
    replication = ctx.replicas.replication if replica_id >= 0 else None
    reader = ctx.replicas.replication if replica_id < 0 and client is not None else None
    out: list[tuple[str, list[PartitionData]]] = []
    total = 0
    any_error = False
    for (topic, partition), w in fc.wanted.items():
        pd = PartitionData(partition, ErrorCode.none, aborted_transactions_null=read_uncommitted)
        if topic in refused:
            pd = PartitionData(partition, ErrorCode.topic_authorization_failed, records=b"",
                               aborted_transactions_null=read_uncommitted)
            _add(out, topic, pd)
            continue
        try:
            quota = None
            if replication is not None:
                role = replication.leader_role(topic, partition, w.leader_epoch)
                plog = role.log
                replication.on_follower_fetch(role, replica_id, w.fetch_offset)
                limit = None
                if replica_id not in role.isr and replication.throttled("leader", topic, partition):
                    quota = replication.leader_quota     # a reassignment's copy to a new replica, capped
            elif reader is not None and client is not None:
                role = reader.read_role(topic, partition, w.leader_epoch)
                plog = role.log
                limit = plog.high_watermark if read_uncommitted else plog.last_stable_offset
                preferred = reader.preferred_read_replica(role, client.rack) if client.rack_aware else -1
                if preferred >= 0:      # no records: the consumer fetches from `preferred`
                    pd.preferred_read_replica = preferred
                    pd.high_watermark, pd.last_stable_offset = plog.high_watermark, plog.last_stable_offset
                    pd.log_start_offset, pd.records = plog.log_start_offset, b""
                    _add(out, topic, pd)
                    continue
            else:
                plog = ctx.replicas.leader_log(topic, partition, w.leader_epoch)
                limit = plog.high_watermark if read_uncommitted else plog.last_stable_offset
            pd.high_watermark = plog.high_watermark
            pd.last_stable_offset = plog.last_stable_offset
            pd.log_start_offset = plog.log_start_offset
            budget = min(w.max_bytes, max_bytes - total)
            pd.records = b""
            if quota is not None and quota.exceeded(time.monotonic()):
                budget = -1             # over leader.replication.throttled.rate: no data for it this time
            if budget > 0 or (total == 0 and budget == 0):
                try:
                    region = plog.read(w.fetch_offset, max(budget, 0), min_one_batch=(total == 0), max_offset=limit)
                except OffsetMovedToTieredStorageError:
                    if replication is not None or ctx.remote is None or remote_wanted is None:
                        raise
                    if remote_failed and (topic, partition) in remote_failed:
                        raise KafkaStorageError(remote_failed[(topic, partition)]) from None
                    data = ctx.remote.cached(plog, w.fetch_offset, max(budget, 0), total == 0)
                    if data is None:
                        remote_wanted.append((plog, w.fetch_offset, max(budget, 0)))
                    else:
                        pd.records = data
                        total += len(data)
                        if not read_uncommitted:
                            upper = _last_offset(data) + 1
                            pd.aborted_transactions = [(a.producer_id, a.first_offset) for a in
                                                       ctx.remote.aborted_transactions(plog, w.fetch_offset, upper)]
                    _add(out, topic, pd)
                    continue
                if region.length:
                    pd.records = region
                    total += region.length
                    if quota is not None:
                        quota.record(region.length, time.monotonic())
                    if not read_uncommitted:
                        upper = plog.fetch_upper_bound(region)
                        pd.aborted_transactions = [(a.producer_id, a.first_offset) for a in
                                                   plog.aborted_transactions(w.fetch_offset, upper)]
        except Exception as e:  # noqa: BLE001
            # as Kafka: an errored partition has no watermarks and an empty (not null) record set; its
            # aborted transactions are [] when the partition is unknown, else as for any partition
            unknown = isinstance(e, UnknownTopicOrPartitionError)
            pd = PartitionData(partition, error_result(e)[0], records=b"",
                               aborted_transactions_null=read_uncommitted and not unknown)
            any_error = True
        _add(out, topic, pd)
    return out, total, any_error


def _last_offset(data: bytes) -> int:
    """The last offset of the last of the whole batches in `data`."""
    pos, last = 0, -1
    while pos < len(data):
        h = parse_header(data, pos)
        last, pos = h.last_offset, pos + h.size
    return last


def _add(out: list[tuple[str, list[PartitionData]]], topic: str, pd: PartitionData) -> None:
    if out and out[-1][0] == topic:
        out[-1][1].append(pd)
    else:
        out.append((topic, [pd]))


@dataclass(frozen=True)
class Consumer:
    """A consumer's Fetch v11+ in cluster mode: its rack (client.rack), and whether this broker picks replicas."""

    rack: str
    rack_aware: bool


def _respond(ctx: BrokerContext, req: Request, fc: FetchContext, topics: list[tuple[str, list[PartitionData]]],
             follower: bool) -> list:
    """The response: in an incremental session only the partitions with something new."""
    kept = []
    for topic, parts in topics:
        sent = [pd for pd in parts if fc.include((topic, pd.index), pd.error_code, pd.high_watermark,
                                                 pd.last_stable_offset, pd.log_start_offset,
                                                 records_length(pd.records) > 0)]
        if sent:
            kept.append((topic, sent))
            nbytes = sum(records_length(pd.records) for pd in sent)
            if nbytes:
                ctx.metrics.fetched(topic, nbytes, follower)
            ctx.metrics.partition_errors("Fetch", (pd.error_code for pd in sent))
    return encode_fetch_response(req.api_version, req.correlation_id, kept, session_id=fc.session_id)


def handle(ctx: BrokerContext, req: Request) -> list | Awaitable[list]:
    """The response chunks now if the first read satisfies the request, else a long-poll coroutine."""
    body = req.body
    max_wait_s = max(ms(body.max_wait), 0) / 1000.0
    min_bytes = body.min_bytes
    max_bytes = field(body, "max_bytes", 0x7FFFFFFF)
    max_bytes = min(max_bytes, ctx.config["fetch.max.bytes"])
    deadline = time.monotonic() + max_wait_s
    fc = _context(ctx, body)
    if fc.error != ErrorCode.none:
        return encode_fetch_response(req.api_version, req.correlation_id, [], error_code=fc.error)
    read_uncommitted = field(body, "isolation_level", 0) == 0
    replica_id = field(body, "replica_id", -1) if ctx.replicas.replication is not None else -1
    refused = _refused_topics(ctx, fc, replica_id)
    keys = [tp for tp in fc.wanted if tp[0] not in refused]
    client = None
    if ctx.replicas.replication is not None and replica_id < 0 and req.api_version >= 11:
        client = Consumer(str(field(body, "rack_id", "") or ""), ctx.config["replica.selector.class"] is not None)
    remote_wanted: RemoteWanted = []
    topics, total, any_error = _read_all(ctx, fc, max_bytes, read_uncommitted, replica_id, refused, client,
                                         remote_wanted)
    if remote_wanted and ctx.remote is not None:
        if total < max(min_bytes, 1):
            return _remote_read(ctx, req, fc, max_bytes, read_uncommitted, replica_id, refused, client, remote_wanted)
        ctx.remote.prefetch(remote_wanted)     # answered with the others' data now; these are cached for next time
    if total >= min_bytes or any_error or max_wait_s <= 0 or not keys or _redirected(topics):
        return _respond(ctx, req, fc, topics, replica_id >= 0)
    # registered now, in the same callback as the read: an append before the coroutine first runs
    # must wake it (else a follower, and so every acks=all produce, waits the whole max_wait)
    first = ctx.replicas.waiter(keys)
    return _long_poll(ctx, req, fc, max_bytes, min_bytes, deadline, read_uncommitted, replica_id, first, refused,
                      client)


async def _remote_read(ctx: BrokerContext, req: Request, fc: FetchContext, max_bytes: int, read_uncommitted: bool,
                       replica_id: int, refused: frozenset[str], client: Consumer | None, wanted: RemoteWanted) -> list:
    """Load the tiered chunks the first pass missed (in parallel, each at most remote.fetch.max.wait.ms), then
    answer from the cache; a partition whose chunk failed answers KAFKA_STORAGE_ERROR (the client retries)."""
    assert ctx.remote is not None
    remote = ctx.remote
    results = await asyncio.gather(*(remote.load(plog, offset, nbytes) for plog, offset, nbytes in wanted),
                                   return_exceptions=True)
    failed = {(plog.topic, plog.partition): str(r) for (plog, _, _), r in zip(wanted, results)
              if isinstance(r, BaseException)}
    for message in failed.values():
        log.warning("fetch from remote storage: %s", message)
    topics, _, _ = _read_all(ctx, fc, max_bytes, read_uncommitted, replica_id, refused, client, [], failed)
    return _respond(ctx, req, fc, topics, replica_id >= 0)


def _redirected(topics: list[tuple[str, list[PartitionData]]]) -> bool:
    """Whether a partition names a preferred read replica: the consumer is told at once (Kafka does not wait)."""
    return any(pd.preferred_read_replica >= 0 for _, parts in topics for pd in parts)


async def _long_poll(ctx: BrokerContext, req: Request, fc: FetchContext, max_bytes: int, min_bytes: int,
                     deadline: float, read_uncommitted: bool, replica_id: int, first: "asyncio.Future[None]",
                     refused: frozenset[str] = frozenset(), client: Consumer | None = None) -> list:
    """Wait for appends to the fetched partitions until min_bytes are there or the deadline passes."""
    keys = [tp for tp in fc.wanted if tp[0] not in refused]
    pending: "asyncio.Future[None] | None" = first
    while True:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            fut = pending if pending is not None else ctx.replicas.waiter(keys)
            pending = None
            try:
                await asyncio.wait_for(fut, remaining)
            except asyncio.TimeoutError:
                pass
            finally:
                ctx.replicas.discard(fut, keys)
        topics, total, any_error = _read_all(ctx, fc, max_bytes, read_uncommitted, replica_id, refused, client)
        if total >= min_bytes or any_error or deadline - time.monotonic() <= 0 or _redirected(topics):
            if pending is not None:
                ctx.replicas.discard(pending, keys)
            return _respond(ctx, req, fc, topics, replica_id >= 0)
