"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) and the first offset at or after a time.
With ACLs, DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED otherwise), as Kafka checks it."""
from __future__ import annotations

from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import error_result, field
from broker.context import BrokerContext
from kafka_protocol.errors import ErrorCode, InvalidRequestError
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import AclOperation, ResourceType

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _lookup(ctx: BrokerContext, topic: str, partition: int, timestamp: int, version: int, leader_epoch: int,
            replica_id: int, read_committed: bool) -> dict[str, Any]:
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
    if timestamp == MAX_TIMESTAMP and version >= 7:
        ts, off = plog.max_timestamp()
        return {"timestamp": ts, "offset": off}
    if timestamp < 0:
        raise InvalidRequestError(f"Unsupported ListOffsets timestamp {timestamp}")
    found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= fetchable:
        return {"timestamp": -1, "offset": -1}
    offset, ts = found
    return {"timestamp": ts, "offset": offset}


def handle(ctx: BrokerContext, req: Request) -> Any:
    topics = []
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
                entry.update(_lookup(ctx, t.name, p.partition_index, p.timestamp, req.api_version,
                                     field(p, "current_leader_epoch", -1), replica_id, read_committed))
                entry["leader_epoch"] = ctx.replicas.leader_epoch(t.name, p.partition_index)
            except Exception as e:  # noqa: BLE001
                entry["error_code"], _ = error_result(e)
                entry.update(timestamp=-1, offset=-1)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return build(response_schema(ApiKey.LIST_OFFSETS, req.api_version), {"throttle_time": 0, "topics": topics})
