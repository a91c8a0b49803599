"""Committed offset APIs: OffsetCommit, OffsetFetch (single and batched groups) and OffsetDelete.

Decode → call `ctx.groups` → encode. Metadata strings and committed leader epochs round-trip.
Holds no state. With ACLs, Kafka's checks: READ on the group and on each topic to commit, DESCRIBE on the
group and on each topic to fetch (topics the principal may not describe are left out of an all-topics
fetch), DELETE on the group and READ on each topic to delete offsets.
"""
from __future__ import annotations

import asyncio
from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import field
from broker.context import BrokerContext
from kafka_protocol.errors import ErrorCode, KafkaError
from broker.groups.offset_store import OFFSETS_TOPIC
from broker.groups.service import GroupService
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import AclOperation, ResourceType


def _groups(ctx: BrokerContext) -> GroupService:
    assert ctx.groups is not None, "the group coordinator is not running"
    return ctx.groups


def _topic_ok(ctx: BrokerContext, operation: AclOperation, topic: str, log_if_denied: bool = True) -> bool:
    return ctx.authorized(operation, ResourceType.TOPIC, topic, log_if_denied)


def _group_ok(ctx: BrokerContext, operation: AclOperation, group: str) -> bool:
    return ctx.authorized(operation, ResourceType.GROUP, group)


def _commit_response(req: Request, results: dict[tuple[str, int], int]) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    return build(response_schema(ApiKey.OFFSET_COMMIT, req.api_version), {
        "throttle_time": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    })


async def _when_replicated(req: Request, results: dict[tuple[str, int], int], fut: "asyncio.Future[None]") -> Any:
    """Cluster mode: answer a commit once every in-sync replica of its __consumer_offsets partition has it
    (Kafka's coordinator writes with acks=all); a failure is COORDINATOR_NOT_AVAILABLE, or NOT_COORDINATOR
    when leadership moved, so the client retries the commit."""
    try:
        await fut
    except KafkaError as e:
        code = ErrorCode.not_coordinator if e.code == ErrorCode.not_leader_or_follower \
            else ErrorCode.coordinator_not_available
        results = {tp: code if err == ErrorCode.none else err for tp, err in results.items()}
    return _commit_response(req, results)


def handle_offset_commit(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if not _group_ok(ctx, AclOperation.READ, body.group_id):
        return _commit_response(req, {(t.name, p.partition_index): ErrorCode.group_authorization_failed
                                      for t in body.topics for p in t.partitions})
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    denied: dict[tuple[str, int], int] = {}
    for t in body.topics:
        allowed = _topic_ok(ctx, AclOperation.READ, t.name)
        for p in t.partitions:
            if not allowed:
                denied[(t.name, p.partition_index)] = ErrorCode.topic_authorization_failed
                continue
            offsets[(t.name, p.partition_index)] = (
                p.committed_offset, field(p, "committed_leader_epoch", -1), p.committed_metadata)
    groups = _groups(ctx)
    results = groups.commit_offsets(body.group_id, body.member_id, field(body, "group_instance_id", None),
                                    body.generation_id_or_member_epoch, offsets) if offsets else {}
    results = {**denied, **results}
    if groups.cluster and groups.last_commit is not None:
        partition, end_offset = groups.last_commit
        try:
            fut = ctx.replicas.wait_replicated(OFFSETS_TOPIC, partition, end_offset,
                                               ctx.config["offsets.commit.timeout.ms"])
        except KafkaError:
            fut = None
            results = {tp: ErrorCode.not_coordinator if e == ErrorCode.none else e for tp, e in results.items()}
        if fut is not None:
            return _when_replicated(req, results, fut)
    return _commit_response(req, results)


def _fetch_group(ctx: BrokerContext, group_id: str, topics: Any, require_stable: bool) -> list[dict[str, Any]]:
    """The committed offsets of the partitions asked for (None: all the group has); with `require_stable`
    (KIP-447), a partition with a commit in an open transaction answers UNSTABLE_OFFSET_COMMIT. Topics the
    principal may not describe: TOPIC_AUTHORIZATION_FAILED when named, left out of "all"."""
    groups = _groups(ctx)
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    found = groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in sorted(found.items()):
        entry: dict[str, Any] = {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                                 "metadata": "", "error_code": ErrorCode.none}
        if not _topic_ok(ctx, AclOperation.DESCRIBE, topic, log_if_denied=wanted is not None):
            if wanted is None:
                continue
            entry["error_code"] = ErrorCode.topic_authorization_failed
        elif require_stable and wanted is not None and groups.unstable(group_id, (topic, partition)):
            entry["error_code"] = ErrorCode.unstable_offset_commit
        elif value is not None:
            entry.update(committed_offset=value.offset, committed_leader_epoch=value.leader_epoch,
                         metadata=value.metadata)
        by_topic.setdefault(topic, []).append(entry)
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def handle_offset_fetch(ctx: BrokerContext, req: Request) -> Any:
    body, groups = req.body, _groups(ctx)
    schema = response_schema(ApiKey.OFFSET_FETCH, req.api_version)
    stable = bool(field(body, "require_stable", False))
    if req.api_version >= 8:
        answers = []
        for g in body.groups:
            if not _group_ok(ctx, AclOperation.DESCRIBE, g.group_id):
                answers.append({"group_id": g.group_id, "error_code": ErrorCode.group_authorization_failed,
                                "topics": []})
                continue
            error = groups.coordinator_error(g.group_id)
            answers.append({"group_id": g.group_id, "error_code": error,
                            "topics": [] if error else _fetch_group(ctx, g.group_id, g.topics, stable)})
        return build(schema, {"throttle_time": 0, "groups": answers})
    if body.group_id and not _group_ok(ctx, AclOperation.DESCRIBE, body.group_id):
        # Kafka's error response: v1 repeats the error for each partition asked for, v2+ only at the top
        topics = _failed(body.topics, ErrorCode.group_authorization_failed) if req.api_version < 2 else []
        return build(schema, {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                              "topics": topics})
    error = (groups.coordinator_error(body.group_id) or ErrorCode.none) if body.group_id else ErrorCode.invalid_group_id
    topics = _fetch_group(ctx, body.group_id, body.topics, stable) if error == ErrorCode.none else []
    return build(schema, {"throttle_time": 0, "topics": topics, "error_code": error})


def _failed(topics: Any, error: int) -> list[dict[str, Any]]:
    """Every partition asked for, with `error` (Kafka's OffsetFetch error response)."""
    return [{"name": t.name, "partitions": [{"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                                             "metadata": "", "error_code": error} for p in t.partition_indexes]}
            for t in topics or ()]


def handle_offset_delete(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if not _group_ok(ctx, AclOperation.DELETE, body.group_id):
        return build(response_schema(ApiKey.OFFSET_DELETE, req.api_version), {
            "error_code": ErrorCode.group_authorization_failed, "throttle_time": 0, "topics": []})
    denied = {(t.name, p.partition_index): ErrorCode.topic_authorization_failed for t in body.topics
              if not _topic_ok(ctx, AclOperation.READ, t.name) for p in t.partitions}
    tps = [(t.name, p.partition_index) for t in body.topics for p in t.partitions
           if (t.name, p.partition_index) not in denied]
    error, results = _groups(ctx).delete_offsets(body.group_id, tps)
    results = {**denied, **results}
    topics: dict[str, list[dict[str, Any]]] = {}
    if error == ErrorCode.none:
        for (topic, partition), e in results.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "error_code": e})
    return build(response_schema(ApiKey.OFFSET_DELETE, req.api_version), {
        "error_code": error, "throttle_time": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    })
