"""One asyncio connection from this broker to another (a follower to its leader): frames out, frames in.

Owns the socket only: requests are encoded and responses decoded by the protocol layer
(`broker.protocol.client_codec`, `fetch_response`), so a Fetch response's record sets stay views of
the received frame. Requests are sent one at a time and answered in order. A refused or dropped
connection, or an answer that does not come within the timeout, is `PeerUnavailableError`: the caller
backs off and connects again.
"""
from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from broker.protocol.client_codec import ResponseError, decode_response, encode_request, response_body_start

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30


class PeerUnavailableError(ConnectionError):
    """The other broker cannot be reached, dropped the connection or did not answer in time."""


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def connect(self, timeout_s: float) -> None:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20), timeout_s)
        except (OSError, asyncio.TimeoutError) as e:
            raise PeerUnavailableError(f"cannot connect to broker {self.address}: {e}") from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _exchange(self, api_key: int, version: int, body: Any, timeout_s: float) -> tuple[memoryview, int, int]:
        if self._writer is None or self._reader is None:
            await self.connect(timeout_s)
        assert self._writer is not None and self._reader is not None
        correlation_id = next(self._ids)
        try:
            self._writer.write(encode_request(api_key, version, correlation_id, self.client_id, body))
            size_bytes = await asyncio.wait_for(self._reader.readexactly(4), timeout_s)
            (size,) = _SIZE.unpack(size_bytes)
            if not 0 < size <= MAX_RESPONSE_BYTES:
                raise ResponseError(f"response of {size} bytes from {self.address}")
            frame = await asyncio.wait_for(self._reader.readexactly(size), timeout_s)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ResponseError) as e:
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
