"""LeaderAndIsr, StopReplica and UpdateMetadata: the controller's requests to this broker; ControlledShutdown: a
stopping broker's request to the controller (cluster mode only).

Decode → apply to the cluster view (`ClusterNode`, which fences them by controller epoch and broker
epoch) → bring this broker's roles in line at once (`Replication.apply`) → answer, so the controller
hears back only after the roles it sent are in force, as Kafka's becomeLeaderOrFollower answers.
ControlledShutdown is answered once the controller's thread has moved the broker's leaderships
(STALE_CONTROLLER_EPOCH from a broker that is not the controller, as Kafka's; the stopping broker asks the one its
view names).
"""
from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.context import BrokerContext
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.controller_schemas import ControlledShutdownResponse, RemainingPartition
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType


def _refused(ctx: BrokerContext, req: Request) -> Any | None:
    """With ACLs, the controller's requests need CLUSTER_ACTION on the cluster (its brokers' principal: with a
    PLAINTEXT inter-broker listener that is User:ANONYMOUS, which super.users must then name, as in Kafka)."""
    if ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return build(response_schema(req.api_key, req.api_version), {"error_code": ErrorCode.cluster_authorization_failed})


def _cluster(ctx: BrokerContext) -> Any:
    node, replication = ctx.replicas.cluster, ctx.replicas.replication
    assert node is not None and replication is not None, "registry: controller APIs are served in cluster mode only"
    return node, replication


def handle_leader_and_isr(ctx: BrokerContext, req: Request) -> Any:
    refused = _refused(ctx, req)
    if refused is not None:
        return refused
    node, replication = _cluster(ctx)
    response = node.on_leader_and_isr(req.body)
    replication.apply(node.view)
    return response


def handle_update_metadata(ctx: BrokerContext, req: Request) -> Any:
    refused = _refused(ctx, req)
    if refused is not None:
        return refused
    node, replication = _cluster(ctx)
    response = node.on_update_metadata(req.body)
    replication.apply(node.view)
    return response


def handle_stop_replica(ctx: BrokerContext, req: Request) -> Any:
    refused = _refused(ctx, req)
    if refused is not None:
        return refused
    node, replication = _cluster(ctx)
    response, stopped = node.on_stop_replica(req.body)
    replication.stop_replicas([tp for tp, _delete in stopped])
    replication.apply(node.view)
    return response


# longest a ControlledShutdown waits for the controller's thread (the stopping broker's own timeout is shorter)
CONTROLLED_SHUTDOWN_WAIT_S = 120.0


def handle_controlled_shutdown(ctx: BrokerContext, req: Request) -> Any:
    refused = _refused(ctx, req)
    if refused is not None:
        return refused
    node, _replication = _cluster(ctx)
    body = req.body
    return _shut_down(node.controller.controlled_shutdown(int(body.broker_id), int(body.broker_epoch)))


async def _shut_down(pending: Any) -> ControlledShutdownResponse:
    try:
        error, remaining = await asyncio.wait_for(asyncio.wrap_future(pending), CONTROLLED_SHUTDOWN_WAIT_S)
    except asyncio.TimeoutError:
        return ControlledShutdownResponse(error_code=ErrorCode.request_timed_out)
    return ControlledShutdownResponse(error_code=error, remaining_partitions=tuple(
        RemainingPartition(topic_name=TopicName(t), partition_index=i32(p)) for t, p in remaining))
