"""One asyncio connection from this broker to another (a follower to its leader): frames out, frames in.

Owns the socket only: requests are encoded and responses decoded by the protocol layer
(`kafka_protocol.client_codec`, `fetch_response`), so a Fetch response's record sets stay views of
the received frame. Each response is received straight into a buffer of its own size (a
BufferedProtocol: one copy from the kernel, where a StreamReader made three of every replicated
byte). Requests are sent one at a time and answered in order. A refused or dropped connection, a
malformed size, or an answer that does not come within the timeout, is `PeerUnavailableError`: the
caller backs off and connects again.

Over a TLS or SASL inter-broker listener (`broker.security.inter_broker.PeerSecurity`) the connection is
wrapped in TLS and logs in before its first request; a session the peer limits in time
(`connections.max.reauth.ms`, KIP-368) is replaced by a new connection and login before it expires.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import time
from typing import Any

from broker.security.inter_broker import PeerSecurity
from kafka_protocol.client_codec import ResponseError, decode_response, encode_request, response_body_start
from kafka_protocol.quiet_logging import quiet
from kafka_protocol.security.client_login import AuthenticationError, login_async

log = quiet(logging.getLogger(__name__))

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30


class PeerUnavailableError(ConnectionError):
    """The other broker cannot be reached, dropped the connection or did not answer in time."""


class _ResponseFrames(asyncio.BufferedProtocol):
    """Cuts response frames: a 4-byte size, then a body read into a bytearray of exactly that size."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._head = bytearray(4)
        self._body: bytearray | None = None
        self._pos = 0
        self._frames: "asyncio.Queue[bytearray | BaseException]" = asyncio.Queue()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport    # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self._body if self._body is not None else self._head)[self._pos:]

    def buffer_updated(self, nbytes: int) -> None:
        self._pos += nbytes
        if self._body is None:
            if self._pos < len(self._head):
                return
            (size,) = _SIZE.unpack(self._head)
            if not 0 < size <= MAX_RESPONSE_BYTES:
                self._frames.put_nowait(ResponseError(f"response of {size} bytes"))
                if self.transport is not None:
                    self.transport.close()
                return
            self._body, self._pos = bytearray(size), 0
        elif self._pos == len(self._body):
            self._frames.put_nowait(self._body)
            self._body, self._pos = None, 0

    def connection_lost(self, exc: Exception | None) -> None:
        self._frames.put_nowait(ConnectionError(f"connection closed{f': {exc}' if exc else ''}"))

    async def next_frame(self) -> bytearray:
        item = await self._frames.get()
        if isinstance(item, BaseException):
            self._frames.put_nowait(item)      # the connection stays failed for whoever asks next
            raise item
        return item


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str, security: PeerSecurity | None = None) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self._protocol: _ResponseFrames | None = None
        self._ids = itertools.count(1)
        self._renew_at: float | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def connect(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        context = self.security.ssl_context if self.security is not None else None
        try:
            _, self._protocol = await asyncio.wait_for(
                loop.create_connection(_ResponseFrames, self.host, self.port, ssl=context,
                                       server_hostname=self.host if context is not None else None), timeout_s)
        except (OSError, asyncio.TimeoutError) as e:
            raise PeerUnavailableError(f"cannot connect to broker {self.address}: {e}") from None
        self._renew_at = None
        client = self.security.client if self.security is not None else None
        if client is not None and client.sasl:
            try:
                lifetime_ms = await login_async(lambda k, v, body: self.request(k, v, body, timeout_s), client, 1)
            except AuthenticationError as e:
                self.close()
                log.warning("broker %s refused this broker's login (inter-broker listener): %s", self.address, e)
                raise PeerUnavailableError(f"broker {self.address} refused the login: {e}") from None
            self._renew_at = PeerSecurity.renew_at(lifetime_ms)

    def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None
        self._renew_at = None

    async def _exchange(self, api_key: int, version: int, body: Any, timeout_s: float) -> tuple[memoryview, int, int]:
        if self._renew_at is not None and time.monotonic() >= self._renew_at:
            self.close()                       # a new connection and login before the session expires
        if self._protocol is None:
            await self.connect(timeout_s)
        protocol = self._protocol
        assert protocol is not None and protocol.transport is not None
        correlation_id = next(self._ids)
        try:
            protocol.transport.write(encode_request(api_key, version, correlation_id, self.client_id, body))
            frame = await asyncio.wait_for(protocol.next_frame(), timeout_s)
        except (OSError, asyncio.TimeoutError, ResponseError) as e:
            self.close()
            raise PeerUnavailableError(f"broker {self.address} did not answer: {e or type(e).__name__}") from None
        return memoryview(frame), correlation_id, api_key

    async def request(self, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        """Send a request; its decoded kio response body."""
        frame, correlation_id, _ = await self._exchange(api_key, version, body, timeout_s)
        try:
            return decode_response(frame, api_key, version, correlation_id)
        except ResponseError as e:
            self.close()
            raise PeerUnavailableError(f"broker {self.address}: {e}") from None

    async def request_raw(self, api_key: int, version: int, body: Any, timeout_s: float) -> memoryview:
        """Send a request; the response body (after its header) as a view of the frame (for Fetch)."""
        frame, correlation_id, _ = await self._exchange(api_key, version, body, timeout_s)
        try:
            start = response_body_start(frame, api_key, version, correlation_id)
        except ResponseError as e:
            self.close()
            raise PeerUnavailableError(f"broker {self.address}: {e}") from None
        return frame[start:]
