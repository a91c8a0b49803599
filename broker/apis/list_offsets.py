"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) and the first offset at or after a time; KIP-1005's
earliest local (-4, v8+) and latest tiered (-5, v9+) for tiered partitions. A time that falls in a tiered
partition's remote segments, or a max timestamp there, is looked up in them (the request becomes a coroutine).
With ACLs, DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED otherwise), as Kafka checks it."""
from __future__ import annotations

from typing import Any, Awaitable

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import error_result, field
from broker.context import BrokerContext
from kafka_protocol.errors import ErrorCode, InvalidRequestError
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import AclOperation, ResourceType

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


class _Remote:
    """A timestamp whose answer is in remote storage: looked up after the synchronous pass."""

    def __init__(self, plog: Any, timestamp: int, fetchable: int) -> None:
        self.plog, self.timestamp, self.fetchable = plog, timestamp, fetchable


def _lookup(ctx: BrokerContext, topic: str, partition: int, timestamp: int, version: int, leader_epoch: int,
            replica_id: int, read_committed: bool) -> dict[str, Any] | _Remote:
    plog = ctx.replicas.leader_log(topic, partition, leader_epoch)
    if replica_id < 0:
        ctx.replicas.check_offsets_available(topic, partition)
    # what a consumer may read: below the last stable offset (read_committed) or the high watermark;
    # a follower reads to the log end (Kafka's rules)
    if replica_id >= 0:
        fetchable = plog.log_end_offset
    else:
        fetchable = plog.last_stable_offset if read_committed else plog.high_watermark
    if timestamp == LATEST:
        return {"timestamp": -1, "offset": fetchable}
    if timestamp == EARLIEST:
        return {"timestamp": -1, "offset": plog.log_start_offset}
    remote = ctx.remote.remote_of(plog) if ctx.remote is not None and plog.tiered else None
    if timestamp == MAX_TIMESTAMP and version >= 7:
        ts, off = plog.max_timestamp()
        best = max((s.max_timestamp for s in remote.segments if s.next_offset > plog.log_start_offset), default=-1) \
            if remote is not None else -1
        if best >= 0 and best >= ts:     # in the bucket (on a tie, the bucket holds the earlier record: Kafka's)
            return _Remote(plog, best, fetchable)
        return {"timestamp": ts, "offset": off}
    if timestamp == EARLIEST_LOCAL and version >= 8:
        return {"timestamp": -1, "offset": plog.local_log_start_offset}
    if timestamp == LATEST_TIERED and version >= 9:
        return {"timestamp": -1, "offset": (plog.remote_next_offset or 0) - 1 if plog.tiered else -1}
    if timestamp < 0:
        raise InvalidRequestError(f"Unsupported ListOffsets timestamp {timestamp}")
    if remote is not None and any(s.max_timestamp >= timestamp and s.next_offset > plog.log_start_offset
                                  for s in remote.segments):
        return _Remote(plog, timestamp, fetchable)
    found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= fetchable:
        return {"timestamp": -1, "offset": -1}
    offset, ts = found
    return {"timestamp": ts, "offset": offset}


def handle(ctx: BrokerContext, req: Request) -> Any | Awaitable[Any]:
    topics = []
    pending: list[tuple[dict[str, Any], _Remote]] = []
    replica_id = field(req.body, "replica_id", -1)
    read_committed = field(req.body, "isolation_level", 0) == 1
    for t in req.body.topics:
        parts = []
        allowed = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "error_code": ErrorCode.none, "leader_epoch": -1}
            if not allowed:
                entry.update(error_code=ErrorCode.topic_authorization_failed, timestamp=-1, offset=-1)
                parts.append(entry)
                continue
            try:
                found = _lookup(ctx, t.name, p.partition_index, p.timestamp, req.api_version,
                                field(p, "current_leader_epoch", -1), replica_id, read_committed)
                if isinstance(found, _Remote):
                    pending.append((entry, found))
                else:
                    entry.update(found)
                entry["leader_epoch"] = ctx.replicas.leader_epoch(t.name, p.partition_index)
            except Exception as e:  # noqa: BLE001
                entry["error_code"], _ = error_result(e)
                entry.update(timestamp=-1, offset=-1)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    if pending:
        return _with_remote(ctx, req, topics, pending)
    return build(response_schema(ApiKey.LIST_OFFSETS, req.api_version), {"throttle_time": 0, "topics": topics})


async def _with_remote(ctx: BrokerContext, req: Request, topics: list[dict[str, Any]],
                       pending: list[tuple[dict[str, Any], _Remote]]) -> Any:
    """Fill in the timestamps found in remote segments (KAFKA_STORAGE_ERROR where the store fails)."""
    assert ctx.remote is not None
    for entry, lookup in pending:
        try:
            found = await ctx.remote.offset_for_timestamp(lookup.plog, lookup.timestamp)
        except OSError:
            entry.update(error_code=ErrorCode.kafka_storage_error, timestamp=-1, offset=-1)
            continue
        if found is None:
            found = lookup.plog.offset_for_timestamp(lookup.timestamp)
        if found is None or found[0] >= lookup.fetchable:
            entry.update(timestamp=-1, offset=-1)
        else:
            entry.update(timestamp=found[1], offset=found[0])
    return build(response_schema(ApiKey.LIST_OFFSETS, req.api_version), {"throttle_time": 0, "topics": topics})
