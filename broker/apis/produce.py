"""Produce: append each partition's record batches (opaque bytes) and report their offsets.

acks=0 gets no response, as in Kafka. With one replica, acks=1 and acks=-1 both answer once the
batches are written to the segment file (they then survive a killed broker process).
"""
from __future__ import annotations

from typing import Any

from broker.apis.common import error_result
from broker.context import BrokerContext
from broker.errors import DuplicateSequenceError, ErrorCode, InvalidRecordError, KafkaError
from broker.protocol.builder import build
from broker.protocol.codec import Request, response_schema

VALID_ACKS = (0, 1, -1)


def _append_one(ctx: BrokerContext, topic: str, index: int, records: bytes | None) -> dict[str, Any]:
    result: dict[str, Any] = {"index": index, "base_offset": -1, "log_append_time": -1, "log_start_offset": -1}
    try:
        if not records:
            raise InvalidRecordError("Produce request carries no records")
        r = ctx.replicas.append(topic, index, records)
        result.update(error_code=ErrorCode.none, base_offset=r.base_offset, log_append_time=r.log_append_time_ms, log_start_offset=r.log_start_offset)
    except DuplicateSequenceError as e:
        result.update(error_code=e.code, base_offset=e.base_offset, log_append_time=e.log_append_time, error_message=str(e))
    except Exception as e:  # noqa: BLE001 - every failure becomes this partition's error code
        code, message = error_result(e)
        result.update(error_code=code, error_message=message)
    return result


def handle(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    acks = body.acks
    responses = []
    for topic in body.topic_data:
        parts = []
        for pd in topic.partition_data:
            if acks not in VALID_ACKS:
                parts.append({"index": pd.index, "error_code": ErrorCode.invalid_required_acks, "base_offset": -1,
                              "error_message": f"acks must be one of 0, 1, -1; got {acks}"})
            elif body.transactional_id is not None:
                parts.append({"index": pd.index, "error_code": ErrorCode.transactional_id_authorization_failed, "base_offset": -1,
                              "error_message": "pylog does not support transactional producers"})
            else:
                parts.append(_append_one(ctx, topic.name, pd.index, pd.records))
        responses.append({"name": topic.name, "partition_responses": parts})
    if acks == 0:
        return None
    return build(response_schema(0, req.api_version), {"responses": responses, "throttle_time": 0})
