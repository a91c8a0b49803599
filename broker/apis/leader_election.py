"""ElectLeaders (KIP-460): preferred or unclean leader election on request, as Kafka 3.9's ZooKeeper mode does it.

`kafka-leader-election --election-type preferred|unclean` and the admin clients' electLeaders send it to the
controller. Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, top level and per partition). In
cluster mode the controller's thread elects (`ClusterController.elect_leaders`): each partition comes back
NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE or
UNKNOWN_TOPIC_OR_PARTITION; a broker that is not the controller answers NOT_CONTROLLER, and the client asks the
controller. An elected partition is answered once this broker's view shows its new leader (Kafka's
DelayedElectLeader), or at the request's timeout. The embedded broker leads every partition already: its
answer is ELECTION_NOT_NEEDED (or UNKNOWN_TOPIC_OR_PARTITION).
"""
from __future__ import annotations

import asyncio
from typing import Any

from broker.apis.common import field
from broker.context import BrokerContext
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType

PREFERRED, UNCLEAN = 0, 1
NOT_NEEDED = "Leader election not needed for topic partition."

Outcomes = dict[tuple[str, int], tuple[ErrorCode, str | None]]


def handle(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    unclean = field(body, "election_type", PREFERRED) == UNCLEAN
    wanted = None if body.topic_partitions is None else [
        (str(t.topic), int(p)) for t in body.topic_partitions for p in t.partitions]
    if not ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(req, {tp: (ErrorCode.cluster_authorization_failed, None) for tp in wanted or ()},
                         ErrorCode.cluster_authorization_failed)
    cluster = ctx.replicas.cluster
    if cluster is None:
        return _response(req, _embedded(ctx, wanted))
    return _elected(ctx, req, cluster.controller.elect_leaders(wanted, unclean), int(body.timeout.total_seconds()
                                                                                    * 1000), unclean)


def _embedded(ctx: BrokerContext, wanted: list[tuple[str, int]] | None) -> Outcomes:
    if wanted is None:
        wanted = [(info.name, p) for info in ctx.replicas.registry for p in range(info.partitions)]
    out: Outcomes = {}
    for topic, p in wanted:
        info = ctx.replicas.registry.get(topic)
        out[(topic, p)] = (ErrorCode.election_not_needed, NOT_NEEDED) if info is not None and 0 <= p < info.partitions \
            else (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    return out


async def _elected(ctx: BrokerContext, req: Request, pending: Any, timeout_ms: int, unclean: bool) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000.0
    try:
        outcomes: Outcomes = await asyncio.wait_for(asyncio.wrap_future(pending), max(deadline - loop.time(), 0.001))
    except asyncio.TimeoutError:
        return _response(req, {}, ErrorCode.request_timed_out)
    elected = [tp for tp, (code, _) in outcomes.items() if code == ErrorCode.none]
    replication = ctx.replicas.replication
    while elected and replication is not None and loop.time() < deadline:
        view = replication.view
        if all(view.leader(t, p) >= 0 and (unclean or view.leader(t, p) == _preferred(ctx, t, p)) for t, p in elected):
            break
        await asyncio.sleep(0.02)
    return _response(req, outcomes)


def _preferred(ctx: BrokerContext, topic: str, partition: int) -> int:
    view = ctx.replicas.replication.view if ctx.replicas.replication is not None else None
    replicas = view.replicas(topic, partition) if view is not None else ()
    return replicas[0] if replicas else -1


def _response(req: Request, outcomes: Outcomes, error: ErrorCode = ErrorCode.none) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (code, message) in sorted(outcomes.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    return build(response_schema(ApiKey.ELECT_LEADERS, req.api_version), {
        "throttle_time": 0, "error_code": error,
        "replica_election_results": [{"topic": t, "partition_result": parts} for t, parts in by_topic.items()]})
