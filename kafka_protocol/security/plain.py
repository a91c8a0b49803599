"""SASL PLAIN (RFC 4616) as Kafka speaks it: one client token `authzid NUL user NUL password`, no answer.

Pure. The broker checks the password against the JAAS `user_<name>="<password>"` options of its
listener (Kafka's PlainServerCallbackHandler), comparing in constant time; an authorization id other
than empty or the user's own name is refused, as Kafka refuses it.
"""
from __future__ import annotations

import hmac
from typing import Callable


class PlainError(Exception):
    """A PLAIN login failed; the message is safe to show the client."""


def client_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode("utf-8") + b"\0" + password.encode("utf-8")


def authenticate(token: bytes, check: Callable[[str, str], bool]) -> str:
    """The authenticated user of `token`, or PlainError. `check(user, password)` says if they match."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise PlainError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise PlainError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not user:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    if not check(user, password):
        raise PlainError("Authentication failed: Invalid username or password")
    if authzid and authzid != user:      # checked after the password, as Kafka's PlainSaslServer does
        raise PlainError("Authentication failed: Client requested an authorization id that is different from username")
    return user


def passwords_match(expected: str | None, given: str) -> bool:
    """Constant-time comparison; an unknown user (None) still costs one comparison."""
    return hmac.compare_digest((expected if expected is not None else "\0" + given).encode("utf-8"),
                               given.encode("utf-8"))
