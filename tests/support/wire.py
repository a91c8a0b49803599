"""A raw Kafka protocol client for tests: send kio request entities or arbitrary bytes, read responses.

Test support only. Real clients (confluent-kafka, kcat) are used for behaviour; this one exists to
send what real clients never send (duplicate batches, garbage, oversized frames) and to check
exact error codes.
"""
from __future__ import annotations

import dataclasses
import io
import socket
import struct
from typing import Any

from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse
from kio.schema.describe_transactions.v0.response import TransactionState as DescribeTransactionsState
from kio.static.primitive import i64

from kio.serial import entity_reader, entity_writer

from kafka_protocol.codec import response_schema


class WireClient:
    def __init__(self, host: str, port: int, client_id: str = "pylog-tests", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
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


# DescribeTransactions answers carry transaction_start_time -1 when no transaction is open, which kio's
# timestamp type refuses: its response is decoded with that field as a plain int64.
def _raw_start_time(cls: type, nested: type | None = None) -> type:
    """kio's DescribeTransactions v0 response entity `cls` with transaction_start_time an int64 (and its
    transaction_states of type `nested`)."""
    fields: list[Any] = []
    for f in dataclasses.fields(cls):
        kind, metadata = f.type, f.metadata
        if f.name == "transaction_start_time":
            kind, metadata = i64, {"kafka_type": "int64"}
        elif f.name == "transaction_states":
            kind = tuple[nested, ...]  # type: ignore[valid-type]
        kw: dict[str, Any] = {"metadata": metadata}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        fields.append((f.name, kind, dataclasses.field(**kw)))
    namespace = {k: getattr(cls, k) for k in ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")}
    return dataclasses.make_dataclass(cls.__name__, fields, namespace=namespace, frozen=True, slots=True, kw_only=True)


_DESCRIBE_TRANSACTIONS_RESPONSE = _raw_start_time(DescribeTransactionsResponse,
                                                _raw_start_time(DescribeTransactionsState))


def describe_transactions(client: WireClient, request: Any) -> Any:
    """Send a DescribeTransactions v0 request; its response (start times as ints), None if the broker closed."""
    client.send_raw(client.encode(request))
    frame = client.read_frame()
    return None if frame is None else entity_reader(_DESCRIBE_TRANSACTIONS_RESPONSE)(frame, 5)[0]
