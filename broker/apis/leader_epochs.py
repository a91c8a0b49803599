"""OffsetsForLeaderEpoch: where a leader epoch ends in this leader's log (KIP-101, KIP-320).

A follower asks before it copies from a new leader, to truncate a divergent tail; a consumer asks
after a leader change, to detect truncation. The answer is the largest epoch at or below the one
asked for and the offset where it ends (the log end for the current epoch), from the log's leader
epoch cache; (-1, -1) when the log knows no such epoch. Decode → ask the replica manager → encode.
"""
from __future__ import annotations

from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import error_result, field
from broker.context import BrokerContext
from kafka_protocol.errors import ErrorCode
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType

UNDEFINED = -1


def _end_of(ctx: BrokerContext, topic: str, partition: int, current_epoch: int, requested: int) -> tuple[int, int]:
    plog = ctx.replicas.leader_log(topic, partition, current_epoch)
    if plog.leader_epochs.latest_epoch is None:
        # no epoch was ever assigned (the single broker's logs): the whole log is the current epoch
        current = ctx.replicas.leader_epoch(topic, partition)
        return (current, plog.log_end_offset) if requested >= current else (UNDEFINED, UNDEFINED)
    return plog.leader_epochs.end_offset_for(requested, plog.log_end_offset)


def handle(ctx: BrokerContext, req: Request) -> Any:
    topics = []
    # with ACLs: a broker's CLUSTER_ACTION, or a consumer's DESCRIBE on the topic (KIP-320), as Kafka checks
    replica = ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False)
    for t in req.body.topics:
        parts = []
        allowed = replica or ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
        for p in t.partitions:
            entry: dict[str, Any] = {"error_code": ErrorCode.none, "partition": p.partition,
                                     "leader_epoch": UNDEFINED, "end_offset": UNDEFINED}
            if not allowed:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                parts.append(entry)
                continue
            try:
                entry["leader_epoch"], entry["end_offset"] = _end_of(
                    ctx, t.topic, p.partition, field(p, "current_leader_epoch", -1), p.leader_epoch)
            except Exception as e:  # noqa: BLE001 - every failure becomes this partition's error code
                entry["error_code"], _ = error_result(e)
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return build(response_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, req.api_version), {"throttle_time": 0, "topics": topics})
