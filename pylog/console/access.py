"""Who may use the console: the binding rule and the checks every request passes (pure; app.py applies them).

Owns: which addresses may be bound without a token (loopback only), the token's minimum length, where a request's
token comes from (`Authorization: Bearer`, or `?token=` once, which the app turns into an HttpOnly SameSite=Strict
cookie), comparing tokens in constant time (hmac.compare_digest), the Host check that keeps a loopback console
without a token from answering a DNS-rebound name, and the form key that keeps another site's page from posting
an offset reset.
Must never: log or echo a token, or compare secrets with ==.
"""
from __future__ import annotations

import enum
import hmac
import ipaddress
import secrets

TOKEN_ENV = "PYLOG_CONSOLE_TOKEN"
COOKIE = "pylog_console_token"
QUERY = "token"
MIN_TOKEN_LENGTH = 16
LOOPBACK_NAMES = ("localhost",)


class AccessError(ValueError):
    """A console that must not start as asked (one line, for the command)."""


class Verdict(enum.Enum):
    ALLOW = "allow"
    ALLOW_AND_SET_COOKIE = "allow-and-set-cookie"     # a right ?token=: set the cookie, drop it from the URL
    MISSING = "missing"
    WRONG = "wrong"


def is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """A console on any address but loopback needs a token, and a token must not be guessable."""
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise AccessError(f"the console token is too short: use at least {MIN_TOKEN_LENGTH} characters "
                          f"(e.g. openssl rand -hex 16)")
    if not token and not is_loopback(host):
        raise AccessError(f"binding to {host} needs a token: pass --token or set {TOKEN_ENV} "
                          f"(or keep the default --host 127.0.0.1)")


def same_secret(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def verdict(expected: str | None, authorization: str | None, query: str | None, cookie: str | None) -> Verdict:
    """Whether a request may pass: without a configured token always; with one, the first token presented
    (header, then query, then cookie) must be it."""
    if expected is None:
        return Verdict.ALLOW
    header = bearer(authorization)
    if header is not None:
        return Verdict.ALLOW if same_secret(expected, header) else Verdict.WRONG
    if query is not None:
        return Verdict.ALLOW_AND_SET_COOKIE if same_secret(expected, query) else Verdict.WRONG
    if cookie is not None:
        return Verdict.ALLOW if same_secret(expected, cookie) else Verdict.WRONG
    return Verdict.MISSING


def host_allowed(bound_host: str, token: str | None, host_header: str | None) -> bool:
    """A loopback console without a token answers only requests addressed to a loopback name (a page elsewhere
    whose name resolves to 127.0.0.1, DNS rebinding, is refused); a console with a token answers any Host."""
    if token is not None or not is_loopback(bound_host):
        return True
    if not host_header:
        return False
    host = host_header.strip()
    if host.startswith("["):
        host = host[1:host.find("]")] if "]" in host else host
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return is_loopback(host)


def new_form_key() -> str:
    """A per-process secret the console's own forms carry (another site cannot read it)."""
    return secrets.token_urlsafe(24)
