"""Metadata: brokers, cluster id, topics and partition leaders; creates topics when auto-create is on."""
from __future__ import annotations

import uuid
from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import authorized_operations, error_result, field
from broker.cluster.cluster_view import ClusterView
from broker.cluster.topic_registry import TopicInfo
from broker.context import BrokerContext
from broker.log.constants import LEADER_EPOCH
from kafka_protocol.errors import ErrorCode, KafkaError
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema

UUID_ZERO = uuid.UUID(int=0)


def _topic_entry(ctx: BrokerContext, info: TopicInfo, operations: int) -> dict[str, Any]:
    node = ctx.node_id
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": (node,),
                "isr_nodes": (node,),
                "offline_replicas": (),
            }
            for p in range(info.partitions)
        ],
        "topic_authorized_operations": operations,
    }


def _cluster_topic_entry(view: ClusterView, name: str, operations: int) -> dict[str, Any]:
    """A topic as the cluster view has it: every partition's leader, epoch, replicas, ISR, offline replicas."""
    assignment = view.topics[name]
    partitions = []
    for p, replicas in sorted(assignment.partitions.items()):
        sv = view.state(name, p)
        leader = view.leader(name, p)
        partitions.append({
            "error_code": ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
            "partition_index": p,
            "leader_id": leader,
            "leader_epoch": sv.state.leader_epoch if sv is not None else -1,
            "replica_nodes": tuple(replicas),
            "isr_nodes": tuple(sv.state.isr) if sv is not None else (),
            "offline_replicas": tuple(r for r in replicas if r not in view.brokers),
        })
    return {"error_code": ErrorCode.none, "name": name, "topic_id": assignment.topic_id or UUID_ZERO,
            "is_internal": name.startswith("__"), "partitions": partitions,
            "topic_authorized_operations": operations}


def _cluster_metadata(ctx: BrokerContext, req: Request, view: ClusterView) -> Any:
    body = req.body
    operations = authorized_operations("topic", field(body, "include_topic_authorized_operations", False))
    requested = body.topics
    topics: list[dict[str, Any]] = []
    if requested is None or (req.api_version == 0 and not requested):
        topics = [_cluster_topic_entry(view, t, operations) for t in sorted(view.topics)]
    else:
        by_id = {a.topic_id: n for n, a in view.topics.items() if a.topic_id is not None}
        for t in requested:
            name = t.name
            topic_id = field(t, "topic_id", None)
            if name is None:
                name = by_id.get(topic_id) if topic_id not in (None, UUID_ZERO) and req.api_version >= 12 else None
                if name is None:
                    code = ErrorCode.unknown_topic_id if topic_id not in (None, UUID_ZERO) else ErrorCode.invalid_request
                    topics.append({"error_code": code, "name": None if code == ErrorCode.unknown_topic_id else "",
                                   "topic_id": topic_id or UUID_ZERO, "partitions": []})
                    continue
            if name in view.topics:
                topics.append(_cluster_topic_entry(view, name, operations))
                continue
            code = ErrorCode.unknown_topic_or_partition
            if field(body, "allow_auto_topic_creation", True):
                try:
                    if ctx.replicas.auto_create(name) is not None:
                        code = ErrorCode.leader_not_available     # created; leaders come in a moment
                except KafkaError as e:
                    code = error_result(e)[0]
            topics.append({"error_code": code, "name": name, "topic_id": UUID_ZERO, "partitions": []})
    return build(response_schema(ApiKey.METADATA, req.api_version), {
        "throttle_time": 0,
        "brokers": [{"node_id": b, "host": r.host, "port": r.port, "rack": r.rack}
                    for b, r in sorted(view.brokers.items())],
        "cluster_id": ctx.cluster_id,
        "controller_id": view.controller_id,
        "topics": topics,
        "cluster_authorized_operations": authorized_operations(
            "cluster", field(body, "include_cluster_authorized_operations", False)),
    })


def handle(ctx: BrokerContext, req: Request) -> Any:
    if ctx.replicas.replication is not None:
        return _cluster_metadata(ctx, req, ctx.replicas.replication.view)
    body = req.body
    replicas = ctx.replicas
    topics: list[dict[str, Any]] = []
    requested = body.topics
    operations = authorized_operations("topic", field(body, "include_topic_authorized_operations", False))
    if requested is None or (req.api_version == 0 and not requested):
        topics = [_topic_entry(ctx, t, operations) for t in replicas.registry]
    else:
        allow_auto = field(body, "allow_auto_topic_creation", True)
        for t in requested:
            name = t.name
            topic_id = field(t, "topic_id", None)
            if name is None and (topic_id in (None, UUID_ZERO) or req.api_version < 12):
                # Kafka: "Topic name can not be null" below v12 (topic ids are looked up from v12 on);
                # any version needs a name or an id
                topics.append({"error_code": ErrorCode.invalid_request, "name": "", "topic_id": UUID_ZERO,
                               "partitions": []})
                continue
            if name is None and topic_id not in (None, UUID_ZERO):
                info = replicas.registry.by_id(topic_id)
                if info is None:
                    topics.append({"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id, "partitions": []})
                    continue
                name = info.name
            info = replicas.registry.get(name)
            if info is None and allow_auto:
                try:
                    info = replicas.auto_create(name)
                except KafkaError as e:
                    code, _ = error_result(e)
                    topics.append({"error_code": code, "name": name, "topic_id": UUID_ZERO, "partitions": []})
                    continue
            if info is None:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "topic_id": UUID_ZERO, "partitions": []})
            else:
                topics.append(_topic_entry(ctx, info, operations))
    return build(
        response_schema(ApiKey.METADATA, req.api_version),
        {
            "throttle_time": 0,
            "brokers": [{"node_id": ctx.node_id, "host": ctx.address()[0], "port": ctx.address()[1], "rack": None}],
            "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id,
            "topics": topics,
            "cluster_authorized_operations": authorized_operations(
                "cluster", field(body, "include_cluster_authorized_operations", False)),
        },
    )
