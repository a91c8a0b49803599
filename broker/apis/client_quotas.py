"""DescribeClientQuotas (KIP-546): pylog enforces no client quotas, so every filter matches nothing.

Served because Kafka's tools ask for it: `kafka-configs --describe --entity-type users` reads a user's
quotas before its SCRAM credentials, and fails outright against a broker that does not speak this API.
AlterClientQuotas is not served (not advertised): setting a quota pylog would not enforce must fail.
"""
from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType

ENTITY_TYPES = ("user", "client-id", "ip")


def handle_describe_client_quotas(ctx: BrokerContext, req: Request) -> Any:
    schema = response_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, req.api_version)
    if not ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return build(schema, {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                              "error_message": "Cluster authorization failed.", "entries": None})
    for component in req.body.components:
        if component.entity_type not in ENTITY_TYPES:
            return build(schema, {"throttle_time": 0, "error_code": ErrorCode.invalid_request,
                                  "error_message": f"Custom entity type '{component.entity_type}' not supported",
                                  "entries": None})
    return build(schema, {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "entries": []})
