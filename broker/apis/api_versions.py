"""ApiVersions: advertise exactly the APIs and versions of the registry table, which broker.apis.registry
hands in (with the controller's in cluster mode): the table imports this handler, never the reverse."""
from __future__ import annotations

from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.context import BrokerContext
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.errors import ErrorCode

ApiKeys = list[dict[str, int]]   # [{"api_key", "min_version", "max_version"}], as the response carries them


def handle(ctx: BrokerContext, req: Request, api_keys: ApiKeys) -> Any:
    return build(response_schema(ApiKey.API_VERSIONS, req.api_version), {"error_code": ErrorCode.none, "throttle_time": 0,
                                                         "api_keys": api_keys})


def unsupported_version_response(api_keys: ApiKeys) -> Any:
    """The v0 response Kafka sends when a client asks for an ApiVersions version it does not know."""
    return build(response_schema(ApiKey.API_VERSIONS, 0), {"error_code": ErrorCode.unsupported_version, "api_keys": api_keys})
