"""Small helpers shared by handlers: per-item error results and request field access across versions."""
from __future__ import annotations

from typing import Any

from kafka_protocol.errors import ErrorCode, KafkaError, error_code_of


def field(obj: Any, name: str, default: Any = None) -> Any:
    """A request field that only some versions have."""
    return getattr(obj, name, default)


# Kafka's AclOperation codes; with no authorizer Kafka reports every operation that applies as allowed
# (a bit per operation code), and INT32_MIN when the client did not ask.
_TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)        # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
_GROUP_OPERATIONS = (3, 6, 8)                         # READ DELETE DESCRIBE
_CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12)        # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE/ALTER_CONFIGS IDEMPOTENT_WRITE
NOT_REQUESTED = -2147483648


def authorized_operations(kind: str, requested: bool) -> int:
    """The authorized-operations bit field of a topic, group or cluster (Kafka's, with no authorizer)."""
    if not requested:
        return NOT_REQUESTED
    ops = {"topic": _TOPIC_OPERATIONS, "group": _GROUP_OPERATIONS, "cluster": _CLUSTER_OPERATIONS}[kind]
    return sum(1 << op for op in ops)


def error_result(exc: BaseException) -> tuple[ErrorCode, str | None]:
    """(code, message) for a per-topic/per-partition result; unexpected errors are logged by error_code_of."""
    code = error_code_of(exc)
    message = str(exc) if isinstance(exc, KafkaError) else f"{type(exc).__name__}: {exc}"
    return code, message
