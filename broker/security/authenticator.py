"""One connection's SASL login, as Kafka's SaslServerAuthenticator runs it; sans-I/O.

A SASL listener serves nothing but ApiVersions until a login completes: SaslHandshake picks a
mechanism (UNSUPPORTED_SASL_MECHANISM and the enabled list otherwise), then the mechanism's tokens
arrive in SaslAuthenticate requests (handshake v1) or as bare length-prefixed frames (handshake v0,
`raw_tokens`). A failed login is answered SASL_AUTHENTICATION_FAILED and the connection is closed
after `connection.failed.authentication.delay.ms` (the connection does both). With
`connections.max.reauth.ms` the session has a lifetime (SaslAuthenticate v1+ tells the client): before
it ends the client logs in again on the same connection (KIP-368) as the same principal; a request after
it ends closes the connection.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security import plain
from kafka_protocol.security.principal import KafkaPrincipal
from kafka_protocol.security.scram import MECHANISMS, Lookup, ScramError, ScramServer

SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
AFTER_LOGIN = "SaslAuthenticate request received after successful authentication"     # Kafka's words


def _java_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as an unsigned 32-bit number."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h


def kafka_order(mechanisms: tuple[str, ...]) -> list[str]:
    """The mechanisms in the order Kafka's broker lists them: a Java HashMap's iteration order (Kafka's
    SaslChannelBuilder keys its JAAS contexts by mechanism), bucket by bucket, so clients see the same list."""
    capacity = 16
    while len(mechanisms) > capacity * 0.75:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(mechanisms, key=lambda m: (bucket(m), mechanisms.index(m)))


@dataclass(frozen=True)
class SaslSettings:
    """What a SASL listener's logins need: its mechanisms and where each finds its users."""

    mechanisms: tuple[str, ...]
    scram_lookup: Lookup
    plain_check: Callable[[str, str], bool]
    reauth_ms: int = 0
    failed_delay_ms: int = 100


@dataclass(frozen=True)
class AuthResult:
    error: ErrorCode
    message: str | None
    token: bytes
    session_lifetime_ms: int = 0

    @property
    def failed(self) -> bool:
        return self.error != ErrorCode.none


class Authenticator:
    def __init__(self, settings: SaslSettings, now_ms: Callable[[], float]) -> None:
        self.settings = settings
        self._now_ms = now_ms
        self.state = "handshake"           # handshake → authenticate → complete; failed
        self.raw_tokens = False            # handshake v0: tokens arrive as bare frames
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        self.expires_at_ms: float | None = None
        self._previous: KafkaPrincipal | None = None     # during re-authentication: who must log in again
        self._scram: ScramServer | None = None
        self._authenticate_version = 0

    def expired(self) -> bool:
        return self.expires_at_ms is not None and self._now_ms() >= self.expires_at_ms

    def may_serve(self, api_key: int) -> bool:
        """May a request of `api_key` (not a SASL one) run now? Between SaslHandshake and the end of the login
        nothing else may (Kafka answers it ILLEGAL_SASL_STATE and closes: see `in_login`)."""
        if api_key == ApiKey.API_VERSIONS and self.state in ("handshake", "complete"):
            return True
        return self.state == "complete" and self.principal is not None and not self.expired()

    @property
    def in_login(self) -> bool:
        """Between a SaslHandshake and the end of its login."""
        return self.state == "authenticate"

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, list[str]]:
        enabled = kafka_order(self.settings.mechanisms)
        if self.state == "complete":
            if version < 1 or self.settings.reauth_ms <= 0:
                return ErrorCode.illegal_sasl_state, []            # no re-authentication without a lifetime
            self._previous = self.principal
        elif self.state != "handshake":
            self.state = "failed"
            return ErrorCode.illegal_sasl_state, []
        if mechanism not in enabled:
            self.state = "failed"
            return ErrorCode.unsupported_sasl_mechanism, enabled
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._scram = ScramServer(mechanism, self.settings.scram_lookup) if mechanism in MECHANISMS else None
        self.state = "authenticate"
        return ErrorCode.none, enabled

    def authenticate(self, token: bytes, version: int = 0) -> AuthResult:
        """The answer to a SaslAuthenticate. Before any SaslHandshake the state becomes "failed" and the
        connection closes with no answer (Kafka's); after a completed login the answer is ILLEGAL_SASL_STATE."""
        if self.state == "complete":
            return AuthResult(ErrorCode.illegal_sasl_state, AFTER_LOGIN, b"")
        if self.state != "authenticate" or self.mechanism is None:
            self.state = "failed"
            return AuthResult(ErrorCode.illegal_sasl_state, None, b"")
        self._authenticate_version = version
        try:
            if self._scram is not None:
                answer = self._scram.respond(token)
                if not self._scram.complete:
                    return AuthResult(ErrorCode.none, None, answer)
                user = self._scram.user
                assert user is not None
            else:
                user = plain.authenticate(token, self.settings.plain_check)
                answer = b""
        except ScramError:
            return self._fail("Authentication failed during authentication due to invalid credentials with SASL "
                              f"mechanism {self.mechanism}")
        except plain.PlainError as e:
            return self._fail(str(e))
        principal = KafkaPrincipal.user(user)
        if self._previous is not None and principal != self._previous:
            return self._fail(f"Cannot change principals during re-authentication from {self._previous}: {principal}")
        self.principal, self._previous, self._scram = principal, None, None
        self.state = "complete"
        lifetime = self.settings.reauth_ms if version >= 1 else 0
        self.expires_at_ms = self._now_ms() + self.settings.reauth_ms if self.settings.reauth_ms > 0 else None
        return AuthResult(ErrorCode.none, None, answer, lifetime)

    def _fail(self, message: str) -> AuthResult:
        self.state = "failed"
        self._scram = None
        return AuthResult(ErrorCode.sasl_authentication_failed, message, b"")
