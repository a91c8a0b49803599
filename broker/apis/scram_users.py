"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) over the broker's credential store."""
from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from broker.security.credentials import Deletion, Upsertion
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kafka_protocol.security.scram import MECHANISM_CODES

_CODES = {name: code for code, name in MECHANISM_CODES.items()}


def _cluster(ctx: BrokerContext, operation: AclOperation) -> bool:
    return ctx.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def handle_describe_user_scram_credentials(ctx: BrokerContext, req: Request) -> Any:
    assert ctx.credentials is not None
    if not _cluster(ctx, AclOperation.DESCRIBE):       # with ACLs: DESCRIBE on the cluster, as Kafka
        # Kafka's error response: one nameless result per user asked for
        return build(response_schema(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, req.api_version),
                     {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None,
                      "results": [{"user": "", "error_code": ErrorCode.cluster_authorization_failed,
                                   "error_message": None, "credential_infos": []} for _ in req.body.users or ()]})
    users = [u.name for u in req.body.users] if req.body.users else None     # null or empty: every user (Kafka)
    results = [{"user": user, "error_code": code, "error_message": message or "",
                "credential_infos": [{"mechanism": _CODES[m], "iterations": i} for m, i in infos]}
               for user, code, message, infos in ctx.credentials.describe(users)]
    return build(response_schema(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, req.api_version),
                 {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": "", "results": results})


def handle_alter_user_scram_credentials(ctx: BrokerContext, req: Request) -> Any:
    assert ctx.credentials is not None
    body = req.body
    if not _cluster(ctx, AclOperation.ALTER):          # with ACLs: ALTER on the cluster, every user refused
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return build(response_schema(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, req.api_version), {
            "throttle_time": 0, "results": [{"user": u, "error_code": ErrorCode.cluster_authorization_failed,
                                             "error_message": "Cluster authorization failed."} for u in users]})
    deletions = [Deletion(d.name, MECHANISM_CODES.get(d.mechanism, "")) for d in body.deletions]
    upsertions = [Upsertion(u.name, MECHANISM_CODES.get(u.mechanism, ""), u.iterations, bytes(u.salt),
                            bytes(u.salted_password)) for u in body.upsertions]
    outcome = ctx.credentials.alter(deletions, upsertions)
    results = [{"user": user, "error_code": code, "error_message": message or ""}     # Kafka's "" on success
               for user, (code, message) in outcome.items()]
    return build(response_schema(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, req.api_version),
                 {"throttle_time": 0, "results": results})
