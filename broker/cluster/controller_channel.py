"""The controller's connections to the brokers: one queue and one sender thread per live broker.

Owns delivery of the controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica), as Kafka's
ControllerChannelManager does:

- each live broker has a FIFO queue and a thread that sends its requests one at a time over one
  connection to the broker's listener and waits for each answer, so a broker applies the
  controller's requests in the order they were made;
- a request that cannot be delivered (connection refused or dropped, no answer within
  `controller.socket.timeout.ms`) is sent again, after a back-off, until it is answered or the
  broker leaves the channel: a request is never skipped while its broker lives;
- a broker that leaves (its registration went) or registers anew (a new broker epoch) gets a new
  queue: requests meant for its previous registration are dropped with it;
- an answer with an error is logged, not retried: a broker answers STALE_CONTROLLER_EPOCH to a
  deposed controller and STALE_BROKER_EPOCH to a request for its previous registration, and
  neither improves by sending again.

Over a TLS or SASL inter-broker listener each connection is wrapped in TLS and logs in first
(`client_login`), and is replaced before a session the broker limits in time expires, as
`replication.peer_connection` does for the asyncio side.

`PeerConnection`, the blocking connection each sender uses, also carries a broker's own ControlledShutdown
to the controller (`cluster_node`). Encoding and decoding are the protocol layer's (`client_codec`); this
module owns sockets and threads.
"""
from __future__ import annotations

import itertools
import logging
import queue
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from kio.schema.errors import ErrorCode

from broker.security.inter_broker import PeerSecurity
from kafka_protocol.client_codec import ResponseError, decode_response, encode_request
from kafka_protocol.quiet_logging import quiet
from kafka_protocol.security.client_login import AuthenticationError, login

log = logging.getLogger(__name__)
retry_log = quiet(logging.getLogger(__name__ + ".retry"))

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 64 << 20
BACKOFF_S = 0.1


@dataclass(frozen=True)
class BrokerAddress:
    broker_id: int
    host: str
    port: int
    broker_epoch: int


class PeerConnection:
    """One blocking connection to another broker's inter-broker listener: `call` sends a request entity and returns
    its answer, connecting (TLS, SASL login) first when needed and again before a session the peer limits expires.
    OSError, ResponseError or AuthenticationError when it cannot; the caller decides whether to try again."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 security: PeerSecurity | None = None) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._renew_at: float | None = None
        self._sock: socket.socket | None = None
        self._ids = itertools.count(1)

    def call(self, body: Any) -> Any:
        if self._renew_at is not None and time.monotonic() >= self._renew_at:
            self.close()                     # a new connection and login before the session expires
        if self._sock is None:
            self._connect()
        return self._call(int(body.__api_key__), int(body.__version__), body)

    def _connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        security = self.security
        if security is not None and security.ssl_context is not None:
            try:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except OSError:
                sock.close()
                raise
        self._sock = sock
        if security is not None and security.client is not None and security.client.sasl:
            lifetime_ms = login(self._call, security.client, 1)
            self._renew_at = PeerSecurity.renew_at(lifetime_ms)

    def _call(self, api_key: int, version: int, body: Any) -> Any:
        assert self._sock is not None
        correlation_id = next(self._ids)
        self._sock.sendall(encode_request(api_key, version, correlation_id, self.client_id, body))
        (size,) = _SIZE.unpack(self._read(4))
        if not 0 < size <= MAX_RESPONSE_BYTES:
            raise ResponseError(f"response of {size} bytes")
        return decode_response(memoryview(self._read(size)), api_key, version, correlation_id)

    def _read(self, n: int) -> bytes:
        assert self._sock is not None
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self._renew_at = None
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None


class _Sender:
    """One broker's queue and the thread that empties it."""

    def __init__(self, address: BrokerAddress, client_id: str, timeout_s: float,
                 security: PeerSecurity | None = None) -> None:
        self.address = address
        self.queue: "queue.Queue[Any | None]" = queue.Queue()
        self._stopped = threading.Event()
        self._connection = PeerConnection(address.host, address.port, client_id, timeout_s, security)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"controller-to-broker-{address.broker_id}")
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self.queue.put(None)

    def _run(self) -> None:
        while not self._stopped.is_set():
            body = self.queue.get()
            if body is None:
                break
            api_key = int(body.__api_key__)
            while not self._stopped.is_set():
                try:
                    answer = self._connection.call(body)
                except (OSError, ResponseError, AuthenticationError) as e:
                    self._connection.close()
                    retry_log.warning("controller request (API %d) to broker %d at %s:%d not delivered, retrying: %s",
                                      api_key, self.address.broker_id, self.address.host, self.address.port, e)
                    self._stopped.wait(BACKOFF_S)
                    continue
                if answer.error_code != ErrorCode.none:
                    log.warning("broker %d answered controller request (API %d) with %s", self.address.broker_id,
                                api_key, answer.error_code.name)
                break
        self._connection.close()


class ControllerChannel:
    """The controller's senders, one per live broker; `send` queues, never blocks on the network."""

    def __init__(self, controller_id: int, timeout_s: float = 30.0, security: PeerSecurity | None = None) -> None:
        self.client_id = f"controller-{controller_id}"
        self.timeout_s = timeout_s
        self.security = security
        self._senders: dict[int, _Sender] = {}
        self._lock = threading.Lock()

    def set_brokers(self, brokers: dict[int, BrokerAddress]) -> list[int]:
        """Follow the live brokers; the ids whose sender is new (joined, or registered anew)."""
        fresh = []
        with self._lock:
            for broker_id in list(self._senders):
                sender = self._senders[broker_id]
                if brokers.get(broker_id) != sender.address:
                    sender.stop()
                    del self._senders[broker_id]
            for broker_id, address in brokers.items():
                if broker_id not in self._senders:
                    self._senders[broker_id] = _Sender(address, self.client_id, self.timeout_s, self.security)
                    fresh.append(broker_id)
        return sorted(fresh)

    def send(self, broker_id: int, build: Callable[[int], Any]) -> None:
        """Queue `build(broker epoch)`, a request entity stamped with the live registration's epoch."""
        with self._lock:
            sender = self._senders.get(broker_id)
        if sender is not None:
            sender.queue.put(build(sender.address.broker_epoch))

    def stop(self) -> None:
        with self._lock:
            for sender in self._senders.values():
                sender.stop()
            self._senders.clear()
