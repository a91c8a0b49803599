"""Two repairs to asyncio's TLS transport: send a failed handshake's alert, and share the receive buffer.

CPython 3.11's asyncio TLS transport (`asyncio.sslproto.SSLProtocol._do_handshake`) closes the socket at
once when OpenSSL fails a handshake, without writing the alert OpenSSL has just put in its outgoing
buffer. A client refused for a missing or untrusted certificate then sees a bare close, which the Java
client takes for a network fault and retries until its timeout, where Kafka's broker sends the alert
(`certificate_required`, `unknown_ca`) and the client fails at once with SslAuthenticationException.
`install()` wraps that one method: on a handshake error it first writes the pending alert, and logs the
reason (at most once a minute per reason).

The same transport gives every connection its own 256 KiB receive buffer (`_ssl_buffer`, zero-filled), most of
a TLS connection's ~370 KB: 1,000 idle TLS clients cost the broker 373 MB (bench/RESULTS.md, the security
benchmark). The buffer is only ever filled and consumed within one read callback of the event loop (recv_into,
then handed to OpenSSL's memory BIO before the callback returns), so every connection of a loop can share
one; `install()` makes new TLS connections use one buffer per thread.
"""
from __future__ import annotations

import asyncio.sslproto as sslproto
import logging
import ssl
import threading
from typing import Any

from kafka_protocol.quiet_logging import quiet

log = quiet(logging.getLogger("broker.security.tls"))
_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    protocol: Any = sslproto.SSLProtocol
    original = getattr(protocol, "_do_handshake", None)
    again = getattr(sslproto, "SSLAgainErrors", None)
    if original is None or again is None or not hasattr(protocol, "_process_outgoing"):
        log.warning("this Python's asyncio TLS transport is not the one pylog knows: a failed TLS handshake may "
                    "close without its alert")
        _installed = True
        return

    def _do_handshake(self: Any) -> None:
        try:
            self._sslobj.do_handshake()
        except again:
            self._process_outgoing()
        except ssl.SSLError as exc:
            try:
                self._process_outgoing()          # the alert OpenSSL wrote for this failure
            except Exception:  # noqa: BLE001 - the connection is failing anyway
                pass
            peer = self._transport.get_extra_info("peername") if self._transport else None
            log.warning("TLS handshake with %s failed: %s", peer[0] if peer else "a client", exc.reason or exc)
            self._on_handshake_complete(exc)
        else:
            self._on_handshake_complete(None)

    protocol._do_handshake = _do_handshake
    original_init = protocol.__init__
    if hasattr(protocol, "max_size"):
        shared = threading.local()

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            if getattr(shared, "buffer", None) is None:
                shared.buffer = bytearray(protocol.max_size)
                shared.view = memoryview(shared.buffer)
            if len(self._ssl_buffer) == len(shared.buffer):
                self._ssl_buffer, self._ssl_buffer_view = shared.buffer, shared.view

        protocol.__init__ = __init__
    _installed = True
