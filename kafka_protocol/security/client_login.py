"""A client's SASL login as a sequence of requests: SaslHandshake v1, then SaslAuthenticate until done.

Sans-I/O: `login_steps(security, authenticate_version)` is a generator that yields each request as
`(api_key, version, body)` and is sent the decoded response; it returns the session lifetime in ms the
broker granted (0: none). `login(call, ...)` drives it over a blocking `call(api_key, version, body) ->
response` (the Spark source's native client, the `pylog` tools' wire client, the controller's channel),
`login_async(call, ...)` over a coroutine `call` (a broker's connections to its peers). A refusal raises
`AuthenticationError` with the broker's message, as a Kafka client reports it.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Generator

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.client_codec import request_class
from kafka_protocol.security import plain
from kafka_protocol.security.client_settings import ClientSecurity
from kafka_protocol.security.scram import ScramClient, ScramError

Call = Callable[[int, int, Any], Any]
AsyncCall = Callable[[int, int, Any], Awaitable[Any]]
Steps = Generator[tuple[int, int, Any], Any, int]


class AuthenticationError(Exception):
    """The broker refused the login (wrong password, unknown user, mechanism not enabled)."""


def login(call: Call, security: ClientSecurity, authenticate_version: int) -> int:
    steps = login_steps(security, authenticate_version)
    answer = None
    try:
        while True:
            answer = call(*steps.send(answer))
    except StopIteration as done:
        return int(done.value)


async def login_async(call: AsyncCall, security: ClientSecurity, authenticate_version: int) -> int:
    steps = login_steps(security, authenticate_version)
    answer = None
    try:
        while True:
            answer = await call(*steps.send(answer))
    except StopIteration as done:
        return int(done.value)


def login_steps(security: ClientSecurity, authenticate_version: int) -> Steps:
    mechanism = security.mechanism or "PLAIN"
    answer = yield (ApiKey.SASL_HANDSHAKE, 1, build(request_class(ApiKey.SASL_HANDSHAKE, 1),
                                                     {"mechanism": mechanism}))
    if int(answer.error_code) != 0:
        raise AuthenticationError(f"the broker does not accept SASL mechanism {mechanism} (it offers "
                                  f"{', '.join(answer.mechanisms) or 'none'}): set sasl.mechanism to one of those")
    schema = request_class(ApiKey.SASL_AUTHENTICATE, authenticate_version)

    def authenticate(token: bytes) -> Generator[tuple[int, int, Any], Any, Any]:
        response = yield (ApiKey.SASL_AUTHENTICATE, authenticate_version, build(schema, {"auth_bytes": token}))
        if int(response.error_code) != 0:
            raise AuthenticationError(f"SASL authentication failed: {response.error_message or response.error_code}")
        return response

    user, password = security.username or "", security.password or ""
    if mechanism == "PLAIN":
        final = yield from authenticate(plain.client_token(user, password))
    else:
        client = ScramClient(mechanism, user, password)
        try:
            first = yield from authenticate(client.first())
            final = yield from authenticate(client.final(bytes(first.auth_bytes)))
            client.verify(bytes(final.auth_bytes))
        except ScramError as e:
            raise AuthenticationError(str(e)) from None
    lifetime = getattr(final, "session_lifetime", None)
    return int(lifetime.total_seconds() * 1000) if lifetime is not None else 0
