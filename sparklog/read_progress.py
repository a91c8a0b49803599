"""Records read by a query's executors, reported as they go to a listener on the driver (option `progressAddress`).

A Spark task reports its rows only when it ends, so a job's progress counted from Spark moves in steps of whole
tasks. With `progressAddress=host:port/token` each task of the pylog source sends the driver a UDP datagram
every `SEND_INTERVAL_S` (and when it ends) with the rows it read since its last one; `ProgressListener` sums
them. Best effort by design: a lost datagram makes a progress bar lag, never a result wrong, and a listener that
is gone costs a task nothing. The token keeps strays (another job's late datagrams) out of the count.
"""
from __future__ import annotations

import logging
import secrets
import socket
import struct
import threading
import time
from typing import Iterator

import pyarrow as pa

log = logging.getLogger(__name__)

SEND_INTERVAL_S = 0.25
_DATAGRAM = struct.Struct(">8sQ")     # token, rows since the sender's last datagram


def parse_address(value: str) -> tuple[str, int, bytes]:
    """`host:port/token` (token: 16 hex digits) → (host, port, token); ValueError naming the problem."""
    where, _, token = value.strip().partition("/")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"progressAddress must be host:port/token, got {value!r}")
    try:
        raw = bytes.fromhex(token)
    except ValueError:
        raw = b""
    if len(raw) != 8:
        raise ValueError(f"progressAddress's token must be 16 hex digits, got {token!r}")
    return host, int(port), raw


class ProgressSender:
    """Executor side: counts the rows of the batches passing through `counted` and reports them."""

    def __init__(self, address: str) -> None:
        host, port, self.token = parse_address(address)
        self.target = (host, port)
        self.sock: socket.socket | None = None
        self.unsent = 0
        self.last = time.monotonic()

    def counted(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            for batch in batches:
                self.unsent += batch.num_rows
                if time.monotonic() - self.last >= SEND_INTERVAL_S:
                    self._send()
                yield batch
        finally:
            self._send()
            if self.sock is not None:
                self.sock.close()

    def _send(self) -> None:
        self.last = time.monotonic()
        if not self.unsent:
            return
        try:
            if self.sock is None:
                self.sock = socket.socket(socket.AF_INET6 if ":" in self.target[0] else socket.AF_INET,
                                          socket.SOCK_DGRAM)
            self.sock.sendto(_DATAGRAM.pack(self.token, self.unsent), self.target)
        except OSError as e:   # the driver's listener is gone or unreachable: the task goes on
            log.debug("pylog: could not report read progress to %s: %s", self.target, e)
        self.unsent = 0


class ProgressListener:
    """Driver side: a UDP socket on `host` summing the rows that executors report; `address` is the option value."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.token = secrets.token_bytes(8)
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.2)
        self.records = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pylog-read-progress", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}/{self.token.hex()}"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._count(self.sock.recv(64))
            except socket.timeout:
                continue
            except OSError:
                return

    def _count(self, data: bytes) -> None:
        if len(data) == _DATAGRAM.size:
            token, rows = _DATAGRAM.unpack(data)
            if token == self.token:
                self.records += rows

    def close(self) -> None:
        """Stop listening, after counting what has arrived (a task's last datagram precedes its end)."""
        self._stop.set()
        self._thread.join(2)
        self.sock.setblocking(False)
        try:
            while True:
                self._count(self.sock.recv(64))
        except OSError:
            pass
        self.sock.close()
