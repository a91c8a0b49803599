"""Small helpers shared by handlers: per-item error results and request field access across versions."""
from __future__ import annotations

from typing import Any

from kafka_protocol.errors import ErrorCode, KafkaError, error_code_of


def field(obj: Any, name: str, default: Any = None) -> Any:
    """A request field that only some versions have."""
    return getattr(obj, name, default)


# KIP-430: the authorized-operations field when the client did not ask for it
NOT_REQUESTED = -2147483648


def error_result(exc: BaseException) -> tuple[ErrorCode, str | None]:
    """(code, message) for a per-topic/per-partition result; unexpected errors are logged by error_code_of."""
    code = error_code_of(exc)
    message = str(exc) if isinstance(exc, KafkaError) else f"{type(exc).__name__}: {exc}"
    return code, message
