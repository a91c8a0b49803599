"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import error_result, field
from broker.cluster.topic_registry import TopicInfo
from broker.config import TOPIC_KEYS
from broker.context import BrokerContext
from kafka_protocol.errors import (
    TopicAuthorizationError,
    ErrorCode,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    PolicyViolationError,
    UnknownTopicIdError,
)
from kafka_protocol.builder import build, ms
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from broker.replica_manager import MAX_PARTITIONS_PER_REQUEST, parse_config_entries

UUID_ZERO = uuid.UUID(int=0)
CONFIG_SOURCE_DYNAMIC_TOPIC, CONFIG_SOURCE_DEFAULT = 1, 5
_ALL_TOPIC_KEYS = TOPIC_KEYS


def _check_assignments(ctx: BrokerContext, name: str, num_partitions: int, assignments: Any) -> int:
    if not assignments:
        return num_partitions
    if num_partitions not in (-1, len(assignments)):
        raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set. "
                                  "Both cannot be used at the same time.")
    _check_brokers(ctx, name, assignments)
    return len(assignments)


def _check_brokers(ctx: BrokerContext, name: str, assignments: Any) -> None:
    """The embedded broker holds every replica: an assignment may name it alone (a cluster checks its own)."""
    if ctx.replicas.cluster is not None:
        return
    for a in assignments or ():
        if tuple(a.broker_ids) != (ctx.node_id,):
            raise InvalidReplicaAssignmentError(
                f"Replica assignment {list(a.broker_ids)} for topic '{name}' names brokers other than this one ({ctx.node_id})"
            )


def _explicit(assignments: Any) -> dict[int, list[int]] | None:
    """CreateTopics' assignments as partition -> brokers (None when the request has none)."""
    if not assignments:
        return None
    return {int(a.partition_index): [int(b) for b in a.broker_ids] for a in assignments}


def _replication_factor(ctx: BrokerContext, requested: int) -> int:
    if ctx.replicas.cluster is None:
        return 1
    return int(ctx.config["default.replication.factor"]) if requested in (None, -1) else requested


def _too_many_partitions(total: int) -> PolicyViolationError | None:
    """Kafka's rule: a request creating more than 10,000 partitions in all is refused whole."""
    if total <= MAX_PARTITIONS_PER_REQUEST:
        return None
    return PolicyViolationError(f"Excessively large number of partitions per request: {total} requested, "
                                f"limit {MAX_PARTITIONS_PER_REQUEST}.")


def _requested_partitions(ctx: BrokerContext, t: Any) -> int:
    if t.assignments:
        return len(t.assignments)
    return t.num_partitions if t.num_partitions > 0 else int(ctx.config["num.partitions"])


def _existing_partitions(ctx: BrokerContext, name: str) -> int:
    info = ctx.replicas.registry.get(name)
    return info.partitions if info is not None else 0


def _topic_allowed(ctx: BrokerContext, operation: AclOperation, name: str, log_if_denied: bool = True) -> bool:
    return ctx.authorized(operation, ResourceType.TOPIC, name, log_if_denied)


def handle_create_topics(ctx: BrokerContext, req: Request) -> Any:
    """With ACLs: CREATE on the cluster or the topic (Kafka's TOPIC_AUTHORIZATION_FAILED "Authorization
    failed."), and the created topic's configs only with DESCRIBE_CONFIGS on it."""
    body = req.body
    validate_only = field(body, "validate_only", False)
    results = []
    seen: set[str] = set()
    refused = _too_many_partitions(sum(_requested_partitions(ctx, t) for t in body.topics))
    cluster_create = ctx.authorized(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False)
    for t in body.topics:
        entry: dict[str, Any] = {"name": t.name, "topic_id": UUID_ZERO, "error_code": ErrorCode.none}
        try:
            if refused is not None:
                raise refused
            if t.name in seen:
                raise InvalidRequestError(f"Topic '{t.name}' appears more than once in the request")
            seen.add(t.name)
            if not cluster_create and not _topic_allowed(ctx, AclOperation.CREATE, t.name):
                raise TopicAuthorizationError("Authorization failed.")
            partitions = _check_assignments(ctx, t.name, t.num_partitions, t.assignments)
            overrides = parse_config_entries((c.name, c.value) for c in t.configs)
            if t.assignments and t.replication_factor not in (None, -1):
                raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were "
                                          "set. Both cannot be used at the same time.")
            result = ctx.replicas.create_topic(t.name, partitions, t.replication_factor, overrides, validate_only,
                                               assignment=_explicit(t.assignments))
            config = ctx.replicas.registry.defaults.with_overrides(overrides)
            if isinstance(result, TopicInfo):
                entry["topic_id"] = result.topic_id
                partitions = result.partitions
            entry.update(
                num_partitions=partitions if partitions not in (None, -1) else ctx.config["num.partitions"],
                replication_factor=(len(t.assignments[0].broker_ids) if t.assignments
                                    else _replication_factor(ctx, t.replication_factor)),
                configs=[
                    {"name": k, "value": str(config.value_of(k)), "read_only": False, "is_sensitive": False,
                     "config_source": CONFIG_SOURCE_DYNAMIC_TOPIC if k in overrides else CONFIG_SOURCE_DEFAULT}
                    for k in sorted(config.overrides.keys() | _ALL_TOPIC_KEYS)
                ],
            )
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = error_result(e)
        if ctx.authorizer is not None and not _topic_allowed(ctx, AclOperation.DESCRIBE_CONFIGS, t.name,
                                                             log_if_denied=False):
            entry.update(configs=[], topic_config_error_code=ErrorCode.topic_authorization_failed)
        results.append(entry)
    response = build(response_schema(ApiKey.CREATE_TOPICS, req.api_version), {"throttle_time": 0, "topics": results})
    created = [r["name"] for r in results if r["error_code"] == ErrorCode.none]
    if ctx.replicas.cluster is None or validate_only or not created:
        return response
    return _when_led(ctx, created, ms(body.timeout), response)


async def _when_led(ctx: BrokerContext, topics: list[str], timeout_ms: int, response: Any) -> Any:
    """Cluster mode: answer once every partition of the new topics has a leader in this broker's view
    (Kafka's CreateTopics waits the same way), or when the request's timeout is up."""
    deadline = asyncio.get_running_loop().time() + min(max(timeout_ms, 0), 30_000) / 1000.0
    while asyncio.get_running_loop().time() < deadline:
        view = ctx.replicas.replication.view if ctx.replicas.replication is not None else None
        if view is not None and all(
                view.partitions_of(t) > 0 and all(view.leader(t, p) >= 0 for p in range(view.partitions_of(t)))
                for t in topics):
            break
        await asyncio.sleep(0.02)
    return response


def handle_delete_topics(ctx: BrokerContext, req: Request) -> Any:
    """With ACLs (Kafka's order): DELETE on the topic before its existence is looked at; a topic named by id
    the principal may not DESCRIBE is refused without its name."""
    body = req.body
    if req.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(n, None) for n in body.topic_names]
    results = []
    for name, topic_id in wanted:
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id or UUID_ZERO, "error_code": ErrorCode.none}
        try:
            if name is None:
                info = ctx.replicas.registry.by_id(topic_id) if topic_id else None
                if info is None:
                    raise UnknownTopicIdError(f"Topic id {topic_id} does not exist")
                if not _topic_allowed(ctx, AclOperation.DESCRIBE, info.name):
                    raise TopicAuthorizationError("Topic authorization failed.")
                name = entry["name"] = info.name
            if not _topic_allowed(ctx, AclOperation.DELETE, name):
                raise TopicAuthorizationError("Topic authorization failed.")
            entry["topic_id"] = ctx.replicas.registry.require(name).topic_id
            ctx.replicas.delete_topic(name)
        except TopicAuthorizationError:
            entry["error_code"], entry["error_message"] = ErrorCode.topic_authorization_failed, None    # Kafka's null
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = error_result(e)
        results.append(entry)
    return build(response_schema(ApiKey.DELETE_TOPICS, req.api_version), {"throttle_time": 0, "responses": results})


def handle_create_partitions(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    results = []
    refused = _too_many_partitions(sum(max(t.count - _existing_partitions(ctx, t.name), 0) for t in body.topics))
    for t in body.topics:
        entry: dict[str, Any] = {"name": t.name, "error_code": ErrorCode.none}
        try:
            if refused is not None:
                raise refused
            if not _topic_allowed(ctx, AclOperation.ALTER, t.name):
                raise TopicAuthorizationError("The topic authorization is failed.")
            _check_brokers(ctx, t.name, t.assignments)
            ctx.replicas.create_partitions(t.name, t.count, body.validate_only,
                                           [[int(b) for b in a.broker_ids] for a in t.assignments]
                                           if t.assignments is not None else None)
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = error_result(e)
        results.append(entry)
    return build(response_schema(ApiKey.CREATE_PARTITIONS, req.api_version), {"throttle_time": 0, "results": results})


def handle_delete_records(ctx: BrokerContext, req: Request) -> Any:
    topics = []
    for t in req.body.topics:
        parts = []
        allowed = _topic_allowed(ctx, AclOperation.DELETE, t.name)
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": ErrorCode.none}
            if not allowed:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                parts.append(entry)
                continue
            try:
                entry["low_watermark"] = ctx.replicas.leader_log(t.name, p.partition_index).delete_records_before(p.offset)
            except Exception as e:  # noqa: BLE001
                entry["error_code"], _ = error_result(e)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return build(response_schema(ApiKey.DELETE_RECORDS, req.api_version), {"throttle_time": 0, "topics": topics})

