"""ApiVersions: advertise exactly the APIs and versions in the registry table (with the controller's in cluster mode)."""
from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from broker.errors import ErrorCode
from broker.protocol.builder import build
from broker.protocol.codec import Request, response_schema


def api_keys(cluster: bool = False) -> list[dict[str, int]]:
    from broker.apis.registry import apis

    return [{"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
            for a in sorted(apis(cluster).values(), key=lambda a: a.key)]


def handle(ctx: BrokerContext, req: Request) -> Any:
    return build(response_schema(18, req.api_version), {"error_code": ErrorCode.none, "throttle_time": 0,
                                                         "api_keys": api_keys(ctx.replicas.cluster is not None)})


def unsupported_version_response(cluster: bool = False) -> Any:
    """The v0 response Kafka sends when a client asks for an ApiVersions version it does not know."""
    return build(response_schema(18, 0), {"error_code": ErrorCode.unsupported_version, "api_keys": api_keys(cluster)})
