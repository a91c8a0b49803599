"""Whether any bootstrap server answers at all, checked before a Kafka client starts its long retries.

librdkafka and the sink's client retry an unreachable cluster for minutes (metadata timeouts times
fetchOffset.numRetries; delivery.timeout.ms), which for the commonest mistake, a wrong host or port,
means a user waits three minutes for a transport error. A TCP connection to one of the bootstrap
addresses, retried for a few seconds (a broker that is just starting), tells that apart at once.
`check_login` then does the same for TLS and SASL settings: one connection of the native client (TLS
handshake, SASL login) says in a second what librdkafka would report as a transport failure after its
retries: an untrusted certificate, a wrong password.
"""
from __future__ import annotations

import socket
import time

from kafka_protocol.security.client_settings import ClientSecurity
from sparklog.options import OptionError

PROBE_TIMEOUT_S = 8.0


class BrokerUnreachableError(OptionError):
    """No bootstrap server accepted a TCP connection: the message names each address and why."""


class LoginRefusedError(OptionError):
    """The TLS handshake or the SASL login with a reachable broker failed: the message says which setting to check."""


def check_login(bootstrap_servers: str, security: ClientSecurity | None, timeout_ms: int = 10_000) -> None:
    """With TLS or SASL settings, connect and log in once (the native client's handshake and login), else nothing."""
    if security is None or not (security.tls or security.sasl):
        return
    from sparklog.kafka_client import BrokerConnection, BrokerUnavailableError, ClientConfig, KafkaClientError

    host, port = _address(bootstrap_servers.split(",")[0])
    try:
        BrokerConnection(host, port, ClientConfig(bootstrap_servers, request_timeout_ms=timeout_ms,
                                                  security=security)).close()
    except BrokerUnavailableError:
        return          # the retries that follow report an unavailable broker as they always have
    except KafkaClientError as e:
        raise LoginRefusedError(f"cannot log in to the Kafka broker at {e}") from None


def _address(server: str) -> tuple[str, int]:
    server = server.strip()
    if "://" in server:
        server = server.split("://", 1)[1]
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        raise OptionError(f"Invalid value '{server}' in option 'kafka.bootstrap.servers': expected host:port")
    return host.strip("[]"), int(port)


def check_reachable(bootstrap_servers: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Return once one of the comma-separated `bootstrap_servers` accepts a TCP connection; raise
    BrokerUnreachableError (one line: each address and its error, and the fix) after `timeout_s`."""
    addresses = [_address(s) for s in bootstrap_servers.split(",") if s.strip()]
    deadline = time.monotonic() + timeout_s
    errors: dict[str, str] = {}
    while True:
        for host, port in addresses:
            try:
                with socket.create_connection((host, port), timeout=max(0.5, min(3.0, deadline - time.monotonic()))):
                    return
            except OSError as e:
                errors[f"{host}:{port}"] = e.strerror or str(e) or type(e).__name__
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    seen = "; ".join(f"{a}: {why}" for a, why in errors.items())
    raise BrokerUnreachableError(f"cannot reach any Kafka broker in kafka.bootstrap.servers={bootstrap_servers} "
                                 f"within {timeout_s:.0f} s ({seen}): check the host and port, and that the broker "
                                 "is running")
