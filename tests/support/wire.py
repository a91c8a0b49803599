"""A raw Kafka protocol client for tests: send kio request entities or arbitrary bytes, read responses.

Test support only. Real clients (confluent-kafka, kcat) are used for behaviour; this one exists to
send what real clients never send (duplicate batches, garbage, oversized frames) and to check
exact error codes.
"""
from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any


from kio.serial import entity_reader, entity_writer

from kafka_protocol.codec import response_schema


class WireClient:
    def __init__(self, host: str, port: int, client_id: str = "pylog-tests", timeout: float = 10.0,
                 ssl_context: "ssl.SSLContext | None" = None) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def encode(self, body: Any) -> bytes:
        self._correlation += 1
        cid = self.client_id.encode()
        header = struct.pack(">hhih", body.__api_key__, body.__version__, self._correlation, len(cid)) + cid
        if body.__flexible__:
            header += b"\x00"
        buf = io.BytesIO()
        entity_writer(type(body))(buf, body)
        payload = header + buf.getvalue()
        return struct.pack(">i", len(payload)) + payload

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """The next response frame, or None when the broker closed the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes | None:
        chunks = []
        while n:
            try:
                c = self.sock.recv(n)
            except ConnectionResetError:
                return None
            if not c:
                return None
            chunks.append(c)
            n -= len(c)
        return b"".join(chunks)

    def request(self, body: Any) -> Any:
        """Send a kio request entity and decode its response (None when the connection was closed)."""
        self.send_raw(self.encode(body))
        if body.__api_key__ == 0 and body.acks == 0:
            return None
        frame = self.read_frame()
        if frame is None:
            return None
        return self.decode_response(body, frame)

    @staticmethod
    def decode_response(body: Any, frame: bytes) -> Any:
        """The response entity in `frame` (a response frame without its size) answering request `body`."""
        schema = response_schema(body.__api_key__, body.__version__)   # kio's, or the controller APIs' own
        pos = 4
        if schema.__flexible__ and body.__api_key__ != 18:
            pos += 1
        entity, _ = entity_reader(schema)(frame, pos)
        return entity
