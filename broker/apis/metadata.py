"""Metadata: brokers, cluster id, topics and partition leaders; creates topics when auto-create is on."""
from __future__ import annotations

import uuid
from typing import Any

from broker.apis.common import authorized_operations, error_result, field
from broker.cluster.topic_registry import TopicInfo
from broker.context import BrokerContext
from broker.log.constants import LEADER_EPOCH
from broker.errors import ErrorCode, KafkaError
from broker.protocol.builder import build
from broker.protocol.codec import Request, response_schema

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


def handle(ctx: BrokerContext, req: Request) -> Any:
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
        response_schema(3, req.api_version),
        {
            "throttle_time": 0,
            "brokers": [{"node_id": ctx.node_id, "host": ctx.host, "port": ctx.port, "rack": None}],
            "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id,
            "topics": topics,
            "cluster_authorized_operations": authorized_operations(
                "cluster", field(body, "include_cluster_authorized_operations", False)),
        },
    )
