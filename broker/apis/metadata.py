"""Metadata: brokers, cluster id, topics and partition leaders; creates topics when auto-create is on.

With ACLs (Kafka's rules): a topic the principal may not DESCRIBE is left out of an all-topics answer and is
TOPIC_AUTHORIZATION_FAILED when named (its existence undisclosed); auto-creating one needs CREATE on the
cluster or on the topic; the authorized-operations fields (KIP-430) are the principal's."""
from __future__ import annotations

import uuid
from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import NOT_REQUESTED, error_result, field
from broker.cluster.cluster_view import ClusterView
from broker.cluster.topic_registry import TopicInfo
from broker.context import SESSION, BrokerContext
from broker.log.constants import LEADER_EPOCH
from kafka_protocol.errors import ErrorCode, KafkaError
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType

UUID_ZERO = uuid.UUID(int=0)


def _listener() -> str:
    """The listener the running request came in on: Metadata answers with each broker's endpoint of that name."""
    session = SESSION.get()
    return session.listener if session is not None else "PLAINTEXT"


def _brokers(ctx: BrokerContext) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of each live broker, by its endpoint on the request's listener."""
    if ctx.replicas.replication is None:
        return [(ctx.node_id, ctx.address()[0], ctx.address()[1], ctx.config["broker.rack"])]
    listener = _listener()
    return [(b, *r.address(listener), r.rack) for b, r in sorted(ctx.replicas.replication.view.brokers.items())]


def describe_cluster(ctx: BrokerContext, req: Request) -> Any:
    """DescribeCluster (KIP-700, what the admin clients' describeCluster sends): the live brokers with their racks,
    the controller and the cluster id, as Kafka 3.9's ZooKeeper mode answers it; a broker is no controller
    endpoint (endpoint type 2 is MISMATCHED_ENDPOINT_TYPE)."""
    body = req.body
    view = ctx.replicas.replication.view if ctx.replicas.replication is not None else None
    out: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none, "cluster_id": ctx.cluster_id,
                           "controller_id": ctx.node_id if view is None else view.controller_id,
                           "brokers": [{"broker_id": b, "host": h, "port": p, "rack": r} for b, h, p, r in _brokers(ctx)],
                           "cluster_authorized_operations": _operations(ctx, body, ResourceType.CLUSTER, CLUSTER_NAME)}
    if req.api_version >= 1:
        out["endpoint_type"] = 1
        if int(field(body, "endpoint_type", 1)) != 1:
            out.update(error_code=ErrorCode.mismatched_endpoint_type, brokers=[], controller_id=-1,
                       error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                                     "of type CONTROLLER")
    return build(response_schema(ApiKey.DESCRIBE_CLUSTER, req.api_version), out)


def _visible(ctx: BrokerContext, name: str, log_if_denied: bool = True) -> bool:
    return ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied)


def _may_create(ctx: BrokerContext, name: str) -> bool:
    return (ctx.authorized(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False)
            or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name))


def _denied(name: str | None, topic_id: Any) -> dict[str, Any]:
    """A topic the principal may not see: no partitions, no id unless it asked by id (Kafka's)."""
    return {"error_code": ErrorCode.topic_authorization_failed, "name": name,
            "topic_id": topic_id if name is None else UUID_ZERO, "partitions": []}


def _operations(ctx: BrokerContext, body: Any, resource_type: ResourceType, name: str) -> int:
    """KIP-430's field: NOT_REQUESTED unless asked; the cluster's only to who may DESCRIBE it (else 0), as Kafka."""
    flag = "include_topic_authorized_operations" if resource_type == ResourceType.TOPIC \
        else "include_cluster_authorized_operations"
    if not field(body, flag, False):
        return NOT_REQUESTED
    if resource_type == ResourceType.CLUSTER and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER,
                                                                    CLUSTER_NAME, log_if_denied=False):
        return 0
    return ctx.authorized_operations(resource_type, name)


def _with_operations(ctx: BrokerContext, body: Any, topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every named topic of the answer gets its authorized operations, errors included, but not those refused
    for lack of DESCRIBE (Kafka's)."""
    for t in topics:
        if t.get("name") and "topic_authorized_operations" not in t \
                and t["error_code"] != ErrorCode.topic_authorization_failed:
            t["topic_authorized_operations"] = _operations(ctx, body, ResourceType.TOPIC, t["name"])
    return topics


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
    requested = body.topics
    topics: list[dict[str, Any]] = []
    if requested is None or (req.api_version == 0 and not requested):
        topics = [_cluster_topic_entry(view, t, _operations(ctx, body, ResourceType.TOPIC, t))
                  for t in sorted(view.topics) if _visible(ctx, t, log_if_denied=False)]
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
            if not _visible(ctx, name):          # named by id: refused without the name (Kafka's)
                topics.append(_denied(None if t.name is None else name, topic_id))
                continue
            if name in view.topics:
                topics.append(_cluster_topic_entry(view, name, _operations(ctx, body, ResourceType.TOPIC, name)))
                continue
            code = ErrorCode.unknown_topic_or_partition
            if field(body, "allow_auto_topic_creation", True) and ctx.config["auto.create.topics.enable"] \
                    and not _may_create(ctx, name):
                topics.append(_denied(name, UUID_ZERO))
                continue
            if field(body, "allow_auto_topic_creation", True):
                try:
                    if ctx.replicas.auto_create(name) is not None:
                        code = ErrorCode.leader_not_available     # created; leaders come in a moment
                except KafkaError as e:
                    code = error_result(e)[0]
            topics.append({"error_code": code, "name": name, "topic_id": UUID_ZERO, "partitions": []})
    return build(response_schema(ApiKey.METADATA, req.api_version), {
        "throttle_time": 0,
        "brokers": [{"node_id": b, "host": h, "port": p, "rack": r} for b, h, p, r in _brokers(ctx)],
        "cluster_id": ctx.cluster_id,
        "controller_id": view.controller_id,
        "topics": _with_operations(ctx, body, topics),
        "cluster_authorized_operations": _operations(ctx, body, ResourceType.CLUSTER, CLUSTER_NAME),
    })


def handle(ctx: BrokerContext, req: Request) -> Any:
    if ctx.replicas.replication is not None:
        return _cluster_metadata(ctx, req, ctx.replicas.replication.view)
    body = req.body
    replicas = ctx.replicas
    topics: list[dict[str, Any]] = []
    requested = body.topics
    if requested is None or (req.api_version == 0 and not requested):
        topics = [_topic_entry(ctx, t, _operations(ctx, body, ResourceType.TOPIC, t.name)) for t in replicas.registry
                  if _visible(ctx, t.name, log_if_denied=False)]
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
            if not _visible(ctx, name):          # named by id: refused without the name (Kafka's)
                topics.append(_denied(None if t.name is None else name, topic_id))
                continue
            info = replicas.registry.get(name)
            if info is None and allow_auto and ctx.config["auto.create.topics.enable"] and not _may_create(ctx, name):
                topics.append(_denied(name, UUID_ZERO))
                continue
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
                topics.append(_topic_entry(ctx, info, _operations(ctx, body, ResourceType.TOPIC, name)))
    return build(
        response_schema(ApiKey.METADATA, req.api_version),
        {
            "throttle_time": 0,
            "brokers": [{"node_id": b, "host": h, "port": p, "rack": r} for b, h, p, r in _brokers(ctx)],
            "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id,
            "topics": _with_operations(ctx, body, topics),
            "cluster_authorized_operations": _operations(ctx, body, ResourceType.CLUSTER, CLUSTER_NAME),
        },
    )
