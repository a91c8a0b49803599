"""SaslHandshake and SaslAuthenticate: the connection's login (broker.security.authenticator decides).

On a listener without SASL both answer ILLEGAL_SASL_STATE, as Kafka's KafkaApis does. A failed login
is answered after `connection.failed.authentication.delay.ms` and the connection then closed.
"""
from __future__ import annotations

import asyncio
import datetime
from typing import Any

from broker.context import SESSION, BrokerContext, Session
from broker.security.authenticator import AFTER_LOGIN
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.errors import ErrorCode


def _session() -> Session:
    session = SESSION.get()
    assert session is not None, "the connection sets the session around every request"
    return session


def handle_sasl_handshake(ctx: BrokerContext, req: Request) -> Any:
    session = _session()
    schema = response_schema(ApiKey.SASL_HANDSHAKE, req.api_version)
    auth = session.authenticator
    if auth is None:
        return build(schema, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})
    code, mechanisms = auth.handshake(req.body.mechanism, req.api_version)
    if auth.state == "failed":
        session.close_after_response = True
    return build(schema, {"error_code": code, "mechanisms": mechanisms})


def handle_sasl_authenticate(ctx: BrokerContext, req: Request) -> Any:
    session = _session()
    schema = response_schema(ApiKey.SASL_AUTHENTICATE, req.api_version)
    auth = session.authenticator
    if auth is None:       # Kafka's KafkaApis answers so on a listener without SASL
        return build(schema, {"error_code": ErrorCode.illegal_sasl_state, "error_message": AFTER_LOGIN,
                              "auth_bytes": b""})
    was_in_login = auth.in_login
    result = auth.authenticate(bytes(req.body.auth_bytes), req.api_version)
    if not was_in_login and auth.state == "failed":        # before any SaslHandshake: closed, no answer
        session.close_after_response = True
        return None
    response = build(schema, {"error_code": result.error, "error_message": result.message or "",
                              "auth_bytes": result.token,
                              "session_lifetime": datetime.timedelta(milliseconds=result.session_lifetime_ms)})
    if auth.state == "complete" and auth.principal is not None:
        session.principal = auth.principal
    if auth.state != "failed":
        return response
    session.close_after_response = True
    return _after(auth.settings.failed_delay_ms / 1000.0, response)


async def _after(delay_s: float, response: Any) -> Any:
    """A failed login's answer, late (Kafka's delay slows password guessing without holding a thread)."""
    await asyncio.sleep(delay_s)
    return response


def illegal_sasl_state_response(api_key: int, version: int) -> Any:
    """The error answer to any other request sent in the middle of a login (Kafka's getErrorResponse)."""
    return build(response_schema(api_key, version), {"error_code": ErrorCode.illegal_sasl_state, "throttle_time": 0})
