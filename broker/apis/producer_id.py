"""InitProducerId for idempotent (non-transactional) producers."""
from __future__ import annotations

from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.apis.common import field
from broker.context import BrokerContext
from kafka_protocol.errors import ErrorCode
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema

MAX_EPOCH = 32767


def handle(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    schema = response_schema(ApiKey.INIT_PRODUCER_ID, req.api_version)
    if body.transactional_id is not None:
        # Transactions are not implemented (their APIs are not advertised), so say so clearly.
        return build(schema, {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed,
                              "producer_id": -1, "producer_epoch": -1})
    pid = field(body, "producer_id", -1)
    epoch = field(body, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH:
        # KIP-360: an idempotent producer bumping its own epoch after an error.
        return build(schema, {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": epoch + 1})
    return build(schema, {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": ctx.producer_ids.next_id(), "producer_epoch": 0})
