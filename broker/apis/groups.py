"""Group membership and admin APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups.

Decode → call `ctx.groups` (broker/groups/service.py) → encode. Holds no state: every group lives
in the coordinator, which also owns the timers. With ACLs, Kafka's checks: DESCRIBE on the group (or
transactional id) to find its coordinator or describe it, READ to be a member, DELETE to delete it;
ListGroups lists every group with DESCRIBE on the cluster, else those the principal may describe.
"""
from __future__ import annotations

from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import NOT_REQUESTED, field
from broker.context import CLIENT_HOST, SESSION, BrokerContext
from kafka_protocol.errors import ErrorCode
from broker.groups.service import GroupService
from kafka_protocol.builder import build, ms
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def _groups(ctx: BrokerContext) -> GroupService:
    assert ctx.groups is not None, "the group coordinator is not running"
    return ctx.groups


def _may(ctx: BrokerContext, operation: AclOperation, group: str) -> bool:
    return ctx.authorized(operation, ResourceType.GROUP, group)


def handle_find_coordinator(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    key_type = field(body, "key_type", KEY_TYPE_GROUP)

    def lookup(key: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"key": key, "node_id": ctx.node_id, "host": ctx.address()[0], "port": ctx.address()[1],
                                 "error_code": ErrorCode.none, "error_message": None}
        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION) or ctx.transactions is None \
                and key_type == KEY_TYPE_TRANSACTION:
            entry.update(node_id=-1, host="", port=-1, error_code=ErrorCode.invalid_request,
                         error_message=f"unknown coordinator key type {key_type}")
        elif not key:
            entry.update(node_id=-1, host="", port=-1, error_code=ErrorCode.invalid_request,
                         error_message="empty transactional id" if key_type == KEY_TYPE_TRANSACTION
                         else "empty group id")
        elif key_type == KEY_TYPE_GROUP and not _may(ctx, AclOperation.DESCRIBE, key):
            entry.update(node_id=-1, host="", port=-1, error_code=ErrorCode.group_authorization_failed,
                         error_message="" if req.api_version >= 4 else "Group authorization failed.")
        elif key_type == KEY_TYPE_TRANSACTION and not ctx.authorized(AclOperation.DESCRIBE,
                                                                     ResourceType.TRANSACTIONAL_ID, key):
            entry.update(node_id=-1, host="", port=-1, error_code=ErrorCode.transactional_id_authorization_failed,
                         error_message="" if req.api_version >= 4 else "Transactional Id authorization failed.")
        elif key_type == KEY_TYPE_TRANSACTION and ctx.replicas.replication is None:
            assert ctx.transactions is not None
            ctx.transactions.ensure_ready()
        elif ctx.replicas.replication is not None:
            if key_type == KEY_TYPE_TRANSACTION:
                assert ctx.transactions is not None
                node, why = ctx.transactions.coordinator_node(key)
            else:
                node, why = _groups(ctx).coordinator_node(key)
            broker = ctx.replicas.replication.view.brokers.get(node)
            if broker is None:
                entry.update(node_id=-1, host="", port=-1, error_code=ErrorCode.coordinator_not_available,
                             error_message=why or f"the coordinator {node} is not live")
            else:
                session = SESSION.get()
                host, port = broker.address(session.listener if session is not None else "PLAINTEXT")
                entry.update(node_id=node, host=host, port=port)
        return entry

    schema = response_schema(ApiKey.FIND_COORDINATOR, req.api_version)
    if req.api_version >= 4:
        return build(schema, {"throttle_time": 0, "coordinators": [lookup(k) for k in body.coordinator_keys]})
    return build(schema, {"throttle_time": 0, **lookup(body.key)})


async def handle_join_group(ctx: BrokerContext, req: Request) -> Any:
    body, version = req.body, req.api_version
    if not _may(ctx, AclOperation.READ, body.group_id):
        return build(response_schema(ApiKey.JOIN_GROUP, version), {
            "throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "generation_id": -1,
            "protocol_type": None, "protocol_name": None if version >= 7 else "", "leader": "", "member_id": "",
            "members": []})
    session_ms = ms(body.session_timeout)
    rebalance_ms = ms(field(body, "rebalance_timeout", None)) if version >= 1 else session_ms
    result = await _groups(ctx).join_group(
        body.group_id, body.member_id, field(body, "group_instance_id", None), body.protocol_type,
        [(p.name, bytes(p.metadata)) for p in body.protocols], session_ms, rebalance_ms,
        req.client_id or "", CLIENT_HOST.get(), version)
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return build(response_schema(ApiKey.JOIN_GROUP, version), {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in result.members],
    })


async def handle_sync_group(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if not _may(ctx, AclOperation.READ, body.group_id):
        return build(response_schema(ApiKey.SYNC_GROUP, req.api_version), {
            "throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "assignment": b"",
            "protocol_type": None, "protocol_name": None})
    result = await _groups(ctx).sync_group(
        body.group_id, body.generation_id, body.member_id, field(body, "group_instance_id", None),
        field(body, "protocol_type", None), field(body, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in body.assignments})
    return build(response_schema(ApiKey.SYNC_GROUP, req.api_version), {
        "throttle_time": 0, "error_code": result.error, "assignment": result.assignment,
        "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
    })


def handle_heartbeat(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if not _may(ctx, AclOperation.READ, body.group_id):
        return build(response_schema(ApiKey.HEARTBEAT, req.api_version),
                     {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed})
    error = _groups(ctx).heartbeat(body.group_id, body.generation_id, body.member_id,
                                   field(body, "group_instance_id", None))
    return build(response_schema(ApiKey.HEARTBEAT, req.api_version), {"throttle_time": 0, "error_code": error})


def handle_leave_group(ctx: BrokerContext, req: Request) -> Any:
    body, version = req.body, req.api_version
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    if not _may(ctx, AclOperation.READ, body.group_id):
        return build(response_schema(ApiKey.LEAVE_GROUP, version), {
            "throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "members": []})
    group_error, errors = _groups(ctx).leave_group(body.group_id, leaving)
    if version < 3 and group_error == ErrorCode.none:
        group_error = errors[0]
    return build(response_schema(ApiKey.LEAVE_GROUP, version), {
        "throttle_time": 0,
        "error_code": group_error,
        "members": [{"member_id": m, "group_instance_id": i, "error_code": e} for (m, i), e in zip(leaving, errors)],
    })


def handle_describe_groups(ctx: BrokerContext, req: Request) -> Any:
    groups = _groups(ctx)
    described = []
    include = field(req.body, "include_authorized_operations", False)
    for group_id in req.body.groups:
        if not _may(ctx, AclOperation.DESCRIBE, group_id):
            described.append({"error_code": ErrorCode.group_authorization_failed, "group_id": group_id,
                              "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                              "authorized_operations": NOT_REQUESTED})
            continue
        entry = groups.describe_group(group_id)
        entry["authorized_operations"] = (ctx.authorized_operations(ResourceType.GROUP, group_id) if include
                                          else NOT_REQUESTED)
        described.append(entry)
    return build(response_schema(ApiKey.DESCRIBE_GROUPS, req.api_version), {"throttle_time": 0, "groups": described})


def handle_list_groups(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    listed = _groups(ctx).list_groups(field(body, "states_filter", ()) or ())
    types = {t.lower() for t in field(body, "types_filter", ()) or ()}
    if types and "classic" not in types:
        listed = []
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
        listed = [g for g in listed if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"],
                                                      log_if_denied=False)]
    return build(response_schema(ApiKey.LIST_GROUPS, req.api_version), {"throttle_time": 0, "error_code": ErrorCode.none,
                                                        "groups": listed})


def handle_delete_groups(ctx: BrokerContext, req: Request) -> Any:
    groups = _groups(ctx)
    results = [{"group_id": g, "error_code": groups.delete_group(g) if _may(ctx, AclOperation.DELETE, g)
                else ErrorCode.group_authorization_failed} for g in req.body.groups_names]
    return build(response_schema(ApiKey.DELETE_GROUPS, req.api_version), {"throttle_time": 0, "results": results})
