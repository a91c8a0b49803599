"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), as Kafka 3.9's ZooKeeper mode answers them.

`kafka-reassign-partitions` and the admin clients' alterPartitionReassignments / listPartitionReassignments send
them to the controller. Both need ALTER (alter) or DESCRIBE (list) on the cluster, else
CLUSTER_AUTHORIZATION_FAILED at the top level. In cluster mode the controller's thread starts, replaces or
cancels the moves (`ClusterController.alter_reassignments`, rules in broker/cluster/reassignment.py): each
partition answers NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (with Kafka's message) or
NO_REASSIGNMENT_IN_PROGRESS (a cancel of a partition not moving); a broker that is not the controller answers
NOT_CONTROLLER and the client asks the controller. The embedded broker holds every replica already: a target of
itself alone is a move with nothing to do, any other is INVALID_REPLICA_ASSIGNMENT, and nothing is ever moving.
"""
from __future__ import annotations

import asyncio
from typing import Any

from broker.cluster.reassignment import Move, target_problem
from broker.context import BrokerContext
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.errors import ErrorCode, NotControllerError
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType

Outcomes = dict[tuple[str, int], tuple[ErrorCode, str | None]]


def alter(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    wanted: dict[tuple[str, int], list[int] | None] = {
        (str(t.name), int(p.partition_index)): None if p.replicas is None else [int(r) for r in p.replicas]
        for t in body.topics for p in t.partitions}
    if not ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _altered(req, {}, ErrorCode.cluster_authorization_failed)
    cluster = ctx.replicas.cluster
    if cluster is None:
        return _altered(req, _embedded(ctx, wanted))
    return _await_alter(req, cluster.controller.alter_reassignments(wanted), body.timeout)


def _embedded(ctx: BrokerContext, wanted: dict[tuple[str, int], list[int] | None]) -> Outcomes:
    out: Outcomes = {}
    for (topic, p), target in wanted.items():
        info = ctx.replicas.registry.get(topic)
        if info is None or not 0 <= p < info.partitions:
            out[(topic, p)] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
        elif target is None:
            out[(topic, p)] = (ErrorCode.no_reassignment_in_progress, None)
        else:
            problem = target_problem(target, Move((ctx.node_id,), (), ()), {ctx.node_id})
            out[(topic, p)] = (ErrorCode.none, None) if problem is None else \
                (ErrorCode.invalid_replica_assignment, problem)
    return out


async def _await_alter(req: Request, pending: Any, timeout_ms: Any) -> Any:
    try:
        outcomes: Outcomes = await asyncio.wait_for(asyncio.wrap_future(pending), _seconds(timeout_ms))
    except asyncio.TimeoutError:
        return _altered(req, {}, ErrorCode.request_timed_out)
    if outcomes and all(code == ErrorCode.not_controller for code, _ in outcomes.values()):
        return _altered(req, {}, ErrorCode.not_controller)
    return _altered(req, outcomes)


def _seconds(timeout: Any) -> float:
    ms = timeout.total_seconds() * 1000 if hasattr(timeout, "total_seconds") else float(timeout)
    return max(ms, 1.0) / 1000.0


def _altered(req: Request, outcomes: Outcomes, error: ErrorCode = ErrorCode.none) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (code, message) in sorted(outcomes.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code, "error_message": message})
    return build(response_schema(ApiKey.ALTER_PARTITION_REASSIGNMENTS, req.api_version), {
        "throttle_time": 0, "error_code": error, "error_message": None,
        "responses": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]})


def list_(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return _listed(req, {}, ErrorCode.cluster_authorization_failed)
    cluster = ctx.replicas.cluster
    if cluster is None:
        return _listed(req, {})
    wanted = None if body.topics is None else [(str(t.name), int(p)) for t in body.topics
                                                for p in t.partition_indexes]
    return _await_list(req, cluster.controller.list_reassignments(wanted), body.timeout)


async def _await_list(req: Request, pending: Any, timeout_ms: Any) -> Any:
    try:
        moves: dict[tuple[str, int], Move] = await asyncio.wait_for(asyncio.wrap_future(pending), _seconds(timeout_ms))
    except asyncio.TimeoutError:
        return _listed(req, {}, ErrorCode.request_timed_out)
    except NotControllerError:
        return _listed(req, {}, ErrorCode.not_controller)
    return _listed(req, moves)


def _listed(req: Request, moves: dict[tuple[str, int], Move], error: ErrorCode = ErrorCode.none) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), m in sorted(moves.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": list(m.replicas),
                                               "adding_replicas": list(m.adding),
                                               "removing_replicas": list(m.removing)})
    return build(response_schema(ApiKey.LIST_PARTITION_REASSIGNMENTS, req.api_version), {
        "throttle_time": 0, "error_code": error, "error_message": None,
        "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()]})
