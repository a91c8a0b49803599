"""Who may use the console (pylog/console/access.py): the binding rule, the token check and the Host check."""
from __future__ import annotations

import pytest

from pylog.console.access import AccessError, Verdict, bearer, check_binding, host_allowed, is_loopback, verdict

TOKEN = "0123456789abcdef0123"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(host: str) -> None:
    assert is_loopback(host)
    check_binding(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "console.example.com"])
def test_any_other_address_needs_a_token_in_one_line(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(AccessError) as e:
        check_binding(host, None)
    assert str(e.value) == (f"binding to {host} needs a token: pass --token or set PYLOG_CONSOLE_TOKEN "
                            "(or keep the default --host 127.0.0.1)")
    check_binding(host, TOKEN)


def test_a_short_token_is_refused_even_on_loopback() -> None:
    with pytest.raises(AccessError, match="too short: use at least 16 characters"):
        check_binding("127.0.0.1", "secret")


def test_without_a_token_every_request_passes() -> None:
    assert verdict(None, None, None, None) is Verdict.ALLOW
    assert verdict(None, "Bearer whatever", "x", "y") is Verdict.ALLOW


def test_with_a_token_a_request_passes_only_with_it() -> None:
    assert verdict(TOKEN, None, None, None) is Verdict.MISSING
    assert verdict(TOKEN, f"Bearer {TOKEN}", None, None) is Verdict.ALLOW
    assert verdict(TOKEN, f"bearer  {TOKEN} ", None, None) is Verdict.ALLOW
    assert verdict(TOKEN, None, None, TOKEN) is Verdict.ALLOW
    assert verdict(TOKEN, None, TOKEN, None) is Verdict.ALLOW_AND_SET_COOKIE
    assert verdict(TOKEN, "Bearer nope", None, TOKEN) is Verdict.WRONG        # the header is the one that counts
    assert verdict(TOKEN, None, TOKEN[:-1], TOKEN) is Verdict.WRONG
    assert verdict(TOKEN, None, None, TOKEN + "x") is Verdict.WRONG
    assert verdict(TOKEN, f"Basic {TOKEN}", None, None) is Verdict.MISSING     # not a bearer token
    assert bearer("Bearer ") is None and bearer(None) is None


def test_a_loopback_console_without_token_answers_only_loopback_names() -> None:
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "localhost"):
        assert host_allowed("127.0.0.1", None, host), host
    for host in ("evil.example:8080", "192.168.1.9:8080", None):
        assert not host_allowed("127.0.0.1", None, host), host
    assert host_allowed("127.0.0.1", TOKEN, "evil.example:8080")       # the token guards it instead
    assert host_allowed("0.0.0.0", TOKEN, "console.example.com")
