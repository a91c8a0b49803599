"""One client connection: bytes in → frames → dispatch → bytes out, as an asyncio BufferedProtocol.

Owns: driving the sans-I/O `FrameReceiver` (kafka_protocol/framing.py: the receive buffers and
frame cutting) from asyncio's callbacks, running requests strictly in order, writing the responses
of one read pass together, sending fetch data with sendfile, backpressure, waiting (not reading)
while the broker's request memory pool is exhausted, and the clocks the server's housekeeping checks
(idle since, and how long the current request has been arriving).

Ordering (Kafka's rule): responses leave in request order. Synchronous handlers run inline, in the
read callback, with no task. A handler that returns an awaitable (a fetch long-poll, a group join)
gets one task; frames that arrive meanwhile are copied into a queue and run after it.

In cluster mode a broker that has not yet heard from the controller (its first UpdateMetadata)
holds client requests, in order, for up to `CLUSTER_READY_WAIT_S`: before that it knows neither the
live brokers nor its roles. ApiVersions, the SASL login and the controller's own requests are never held
(the controller logs in before it sends that UpdateMetadata).

Security (issue 28): the listener's `Endpoint` gives the connection its TLS (file regions are then
read and written through TLS, never sendfile'd), its principal (an mTLS client's certificate) and,
on a SASL listener, an `Authenticator`: until its login completes only ApiVersions, SaslHandshake
and SaslAuthenticate are served; any other request closes the connection, as does a request after
the session's lifetime (KIP-368) or a failed login once answered. The `Session` (listener, principal,
client address) is visible to handlers through `broker.context.SESSION`.

A frame over `socket.request.max.bytes`, a malformed request, an unsupported API key or a
failing handler closes this connection only, with one warning per condition per minute (a flood
of bad requests cannot flood the log). Never touches storage except through handlers and the file
regions of fetch responses.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import time
from collections import deque
from typing import Any, Awaitable, Callable, Iterable, Protocol

from kafka_protocol.api_keys import ApiKey
from broker.apis.api_versions import unsupported_version_response
from broker.apis.registry import CONTROLLER_API_TABLE, advertised, supported
from broker.config import BrokerConfig
from broker.context import CLIENT_HOST, SESSION, BrokerContext, Session
from broker.security.authenticator import SASL_APIS
from broker.apis.sasl import illegal_sasl_state_response
from broker.security.endpoint import Endpoint
from broker.log.fetch_slice import FetchSlice
from broker.metrics import response_errors
from kafka_protocol.framing import FrameError, FrameReceiver, RequestMemoryPool
from kafka_protocol.quiet_logging import quiet
from kafka_protocol.codec import MalformedRequestError, decode_request, encode_response, peek_header, request_schema


class Acceptor(Protocol):
    """What a connection needs of the server that accepted it (broker.server.BrokerServer): a callback
    interface, so that this module does not import the server that imports it."""

    config: BrokerConfig
    connections: set["Connection"]
    request_memory: RequestMemoryPool
    ctx: BrokerContext | None

    def admit(self, conn: "Connection") -> str | None: ...

log = quiet(logging.getLogger(__name__))

CLUSTER_READY_WAIT_S = 30.0        # longest a client request waits for a joining broker's first word from the controller
MAX_QUEUED_FRAMES = 256             # stop reading while this many requests wait behind an async one
SMALL_REGION_BYTES = 64 * 1024      # fetch data below this is copied with pread instead of sendfile
TLS_PIECE_BYTES = 64 * 1024     # a TLS connection's fetch data is read and encrypted this much at a time


class Connection(asyncio.BufferedProtocol):
    """The protocol instance of one accepted socket."""

    def __init__(self, server: Acceptor, endpoint: Endpoint | None = None) -> None:
        self.server = server
        self.endpoint = endpoint
        listener = endpoint.listener if endpoint is not None else None
        self.session = Session(listener=listener.name, security_protocol=listener.protocol,
                               advertised_host=listener.advertised_host, advertised_port=listener.advertised_port) \
            if listener is not None else Session()
        self._tls = listener is not None and listener.tls
        self.max_bytes: int = server.config["socket.request.max.bytes"]
        self.transport: asyncio.Transport | None = None
        self.peer: Any = None
        self.host = ""
        self.last_active = time.monotonic()
        self.arriving_since: float | None = None  # when the request now arriving started (None: none is)
        self._pool = server.request_memory
        self._frames = FrameReceiver(self.max_bytes, pool=self._pool)
        self._queue: deque[tuple[bytes | memoryview, int]] = deque()   # (frame, reserved bytes) behind the async request
        self._task: asyncio.Task[None] | None = None
        self._pending: Awaitable[Any] | None = None   # the async handler's awaitable that _task runs
        self._waited_for_cluster = False             # cluster mode: requests were held once until the controller spoke
        self._out: list[Any] = []                # response bytes gathered during this pass
        self._backlog: list[Any] = []            # chunks waiting behind a slow sendfile
        self._send_task: asyncio.Task[None] | None = None
        self._sock_fd = -1
        self._closing = False
        self._writing_paused = False
        self._writable: asyncio.Event | None = None   # set when the transport takes writes again (TLS pieces)
        self._counted: Any = None                # this connection's open-connections gauge, once admitted
        self._eof = False

    # --- asyncio callbacks ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport     # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        self.peer = transport.get_extra_info("peername")
        self.host = f"/{self.peer[0]}" if self.peer else ""
        self.session.client_host = self.host
        refusal = self.server.admit(self)
        if refusal is None:
            refusal = self._authenticate_transport(transport)
        if refusal is not None:
            log.warning("refusing connection from %s: %s", self.peer, refusal)
            self._closing = True
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            if not self._tls:         # TLS: bytes must pass through the TLS layer, never sendfile
                self._sock_fd = sock.fileno()
            self._tune_socket(sock)
        self.server.connections.add(self)
        if self.server.ctx is not None:
            self._counted = self.server.ctx.metrics.connections.labels(self.session.listener)
            self._counted.inc()
            self.server.ctx.metrics.connections_opened.labels(self.session.listener).inc()

    def _authenticate_transport(self, transport: asyncio.BaseTransport) -> str | None:
        """The principal of the listener's transport (an SSL client's certificate) and its SASL login, if
        any; why the connection may not stay, or None."""
        endpoint = self.endpoint
        if endpoint is None:
            return None
        if self._tls and endpoint.listener.protocol == "SSL":
            ssl_object = transport.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            principal = endpoint.certificate_principal(der)
            if principal is None:
                return "no ssl.principal.mapping.rules rule matches its certificate's name"
            self.session.principal = principal
        server_ctx = self.server.ctx
        clock = server_ctx.clock if server_ctx is not None else time.time
        self.session.authenticator = endpoint.authenticator(lambda: clock() * 1000.0)
        return None

    def _tune_socket(self, sock: socket.socket) -> None:
        config = self.server.config
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for key, opt in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                             ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
                if config[key] > 0:
                    sock.setsockopt(socket.SOL_SOCKET, opt, config[key])
        except OSError as e:
            log.debug("cannot tune socket of %s: %s", self.peer, e)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.server.connections.discard(self)
        if self._counted is not None:
            self._counted.dec()
            self._counted = None
        for task in (self._task, self._send_task):
            if task is not None and not task.done():
                task.cancel()
        pending, self._pending = self._pending, None
        if inspect.iscoroutine(pending) and inspect.getcoroutinestate(pending) == inspect.CORO_CREATED:
            pending.close()    # cancelled before it started: close it, so it is not "never awaited"
        self._pool.forget(self._memory_released)
        self._frames.close()
        for _, reserved in self._queue:
            self._pool.release(reserved)
        self._queue.clear()
        self._backlog = []
        self._out = []
        # asyncio's TLS layer keeps this protocol's bound methods, so connection and transport form a cycle
        # that only the cycle collector frees; letting go of the transport frees a closed connection at once
        self.transport = None

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        self._take(self._frames.received(nbytes))

    def _memory_released(self) -> None:
        """The request memory pool gave memory back: the frame waiting for it may go on."""
        if not self._closing:
            self._take(self._frames.retry())

    def _take(self, frames: Iterable[tuple[memoryview, bool]]) -> None:
        """Run the frames completed by a read (or by memory becoming free), then update the clocks."""
        try:
            completed = False
            for frame, owned in frames:
                completed = True
                if self._closing:
                    if owned:
                        self._pool.release(len(frame))
                    continue
                self._on_frame(frame, len(frame) if owned else 0)
            if self._frames.waiting_for_memory:
                self.arriving_since = None
                self._pool.wait(self._memory_released)
            elif self._frames.buffered == 0:
                self.arriving_since = None
            elif completed or self.arriving_since is None:
                self.arriving_since = time.monotonic()
            self._flush()
            self._update_reading()
        except FrameError as e:
            log.warning("closing connection %s: %s", self.peer, e)
            self.close()
        except Exception:  # noqa: BLE001 - one connection's failure must not touch the others
            log.exception("connection %s failed", self.peer)
            self.close()

    def eof_received(self) -> bool | None:
        """The client shut down its sending side: answer what it already sent, then close."""
        self._eof = True
        if self._busy() and not self._tls:      # asyncio's TLS transport closes on EOF whatever this returns
            return True      # keep the transport open until the pending responses are written
        return None          # close now (the transport still writes what it has buffered)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._writable is not None:
            self._writable.set()
        self._update_reading()

    # --- framing ---------------------------------------------------------------------------------

    def _on_frame(self, frame: memoryview, reserved: int) -> None:
        """Run one request now, or queue it behind the async one in progress (keeping order).

        `reserved`: bytes of the request memory pool the frame holds (its own buffer, which the
        receive buffer does not reuse, so it may be kept); given back once the request has run.
        """
        if self._task is not None or self._queue:
            self._queue.append((frame, reserved) if reserved else (bytes(frame), 0))
            return
        self._run(frame, reserved)

    def _run(self, frame: memoryview | bytes, reserved: int) -> None:
        try:
            self._process(frame)
        finally:
            if reserved:
                self._pool.release(reserved)

    # --- dispatch ------------------------------------------------------------------------------

    def _process(self, frame: memoryview | bytes) -> None:
        ctx = self.server.ctx
        assert ctx is not None
        auth = self.session.authenticator
        if auth is not None and auth.raw_tokens and auth.state == "authenticate":
            self._raw_token(bytes(frame))
            return
        try:
            api_key, version, correlation_id = peek_header(frame)
        except MalformedRequestError as e:
            log.warning("closing connection %s: %s", self.peer, e)
            self.close()
            return
        node = ctx.replicas.cluster
        api = supported(api_key, version, node is not None)
        if api is None:
            if api_key == ApiKey.API_VERSIONS:
                self._out.append(encode_response(api_key, correlation_id,
                                                 unsupported_version_response(advertised(node is not None))))
                return
            log.warning("closing connection %s: unsupported API key %d version %d", self.peer, api_key, version)
            self.close()
            return
        if auth is not None and api_key not in SASL_APIS and not auth.may_serve(api_key):
            why = ("its SASL session expired (connections.max.reauth.ms)" if auth.principal is not None
                   and not auth.in_login else f"{api.name} before a SASL login")
            log.warning("closing connection %s on listener %s: %s", self.peer, self.session.listener, why)
            if auth.in_login:        # Kafka answers ILLEGAL_SASL_STATE before closing, mid-login
                self._out.append(encode_response(api_key, correlation_id, illegal_sasl_state_response(api_key, version)))
            self.close()
            return
        if (node is not None and not self._waited_for_cluster and not node.ready.is_set()
                and api_key != ApiKey.API_VERSIONS and api_key not in CONTROLLER_API_TABLE
                and api_key not in SASL_APIS):
            self._task = asyncio.get_running_loop().create_task(self._when_cluster_ready(bytes(frame)))
            return
        if api_key != ApiKey.PRODUCE and not isinstance(frame, bytes):
            frame = bytes(frame)     # kio reads read-only buffers; only Produce keeps views of the frame
        schema = request_schema(api_key, version)
        assert schema is not None, "supported() only names APIs whose schema exists"
        try:
            request = decode_request(frame, schema)
        except MalformedRequestError as e:
            log.warning("closing connection %s: malformed %s v%d request: %s", self.peer, api.name, version, e)
            self.close()
            return
        token = CLIENT_HOST.set(self.host)
        session_token = SESSION.set(self.session)
        started = time.perf_counter()
        try:
            result = api.handler(ctx, request)
            if result is not None and type(result) is not bytes and hasattr(result, "__await__"):
                loop = asyncio.get_running_loop()
                self._pending = result
                self._task = loop.create_task(self._finish(result, api.name, api_key, version, correlation_id,
                                                           started))
                return
        except MalformedRequestError as e:      # a request the handler finds unparseable, as Kafka would
            log.warning("closing connection %s: malformed %s v%d request: %s", self.peer, api.name, version, e)
            self.close()
            return
        except Exception:  # noqa: BLE001
            log.exception("%s v%d from %s failed; closing the connection", api.name, version, self.peer)
            self.close()
            return
        finally:
            CLIENT_HOST.reset(token)
            SESSION.reset(session_token)
        ctx.metrics.answered(api.name, time.perf_counter() - started, response_errors(result))
        self._respond(api_key, correlation_id, result)

    async def _finish(self, pending: Awaitable[Any], name: str, api_key: int, version: int, correlation_id: int,
                      started: float) -> None:
        """Await an async handler, send its response, then run the requests queued behind it."""
        try:
            result = await pending
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("%s v%d from %s failed; closing the connection", name, version, self.peer)
            self.close()
            return
        finally:
            self._pending = None
        if self._closing:
            return
        self._task = None
        if self.server.ctx is not None:
            self.server.ctx.metrics.answered(name, time.perf_counter() - started, response_errors(result))
        self._carry_on(lambda: self._respond(api_key, correlation_id, result))

    async def _when_cluster_ready(self, frame: bytes) -> None:
        """Run `frame` (and what queued behind it) once the controller has spoken, or after the wait."""
        node = self.server.ctx.replicas.cluster if self.server.ctx is not None else None
        deadline = time.monotonic() + CLUSTER_READY_WAIT_S
        while node is not None and not node.ready.is_set() and time.monotonic() < deadline and not self._closing:
            await asyncio.sleep(0.05)
        self._waited_for_cluster = True
        self._task = None
        if not self._closing:
            self._carry_on(lambda: self._run(frame, 0))

    def _carry_on(self, first: Callable[[], None]) -> None:
        """After a task: `first` (its response, or the request it held), then the requests queued behind."""
        try:
            first()
            while self._queue and self._task is None and not self._closing:
                self._run(*self._queue.popleft())
            self._flush()
            self._update_reading()
        except Exception:  # noqa: BLE001
            log.exception("connection %s failed", self.peer)
            self.close()

    def _respond(self, api_key: int, correlation_id: int, result: Any) -> None:
        if result is None:
            if self.session.close_after_response:
                self.close()
            return
        if isinstance(result, (bytes, bytearray)):
            self._out.append(result)
        elif isinstance(result, list):
            self._emit_chunks(result)
        else:
            self._out.append(encode_response(api_key, correlation_id, result))
        if self.session.close_after_response:
            log.warning("closing connection %s on listener %s: failed SASL login", self.peer, self.session.listener)
            self.close()

    def _raw_token(self, token: bytes) -> None:
        """A SASL token framed bare (after SaslHandshake v0): answer the mechanism's token the same way."""
        auth = self.session.authenticator
        assert auth is not None
        result = auth.authenticate(token)
        if result.failed:        # v0 has no error response: the client sees the connection close
            log.warning("closing connection %s on listener %s: %s", self.peer, self.session.listener, result.message)
            self._task = asyncio.get_running_loop().create_task(self._close_after(auth.settings.failed_delay_ms))
            return
        if auth.principal is not None and auth.state == "complete":
            self.session.principal = auth.principal
        self._out.append(len(result.token).to_bytes(4, "big") + result.token)

    async def _close_after(self, delay_ms: int) -> None:
        await asyncio.sleep(delay_ms / 1000.0)
        self._task = None
        self.close()

    # --- output --------------------------------------------------------------------------------

    def _flush(self) -> None:
        """Write the responses gathered so far in one call (or queue them behind a slow sendfile)."""
        if not self._out or self._closing:
            self._out = []
            return
        out, self._out = self._out, []
        if self._send_task is not None:
            self._backlog.extend(out)
            return
        assert self.transport is not None
        self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        self.last_active = time.monotonic()

    def _emit_chunks(self, chunks: Iterable[Any]) -> None:
        """A fetch response: bytes and file regions. Small regions are read; big ones sendfile'd."""
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray)):
                self._out.append(chunk)
            elif self._send_task is not None:
                self._to_backlog(chunk)
            elif chunk.length <= SMALL_REGION_BYTES:
                self._out.append(_read_region(chunk))
            elif self._tls:         # TLS encrypts in user space: read and write in pieces, as the client takes them
                self._to_backlog(chunk)
                self._send_task = asyncio.get_running_loop().create_task(self._send_backlog())
            else:
                self._flush()
                sent = self._sendfile_now(chunk)
                if sent < chunk.length:
                    rest = FetchSlice(chunk.fd, chunk.position + sent, chunk.length - sent, 0)
                    self._backlog.append(rest)
                    self._send_task = asyncio.get_running_loop().create_task(self._send_backlog())

    def _to_backlog(self, region: Any) -> None:
        self._backlog.extend(self._out)
        self._out = []
        self._backlog.append(region)

    def _sendfile_now(self, region: Any) -> int:
        """Bytes of `region` the socket takes right now (zero-copy); 0 unless the transport is idle."""
        assert self.transport is not None
        if self._sock_fd < 0 or self.transport.get_write_buffer_size() or self.transport.is_closing():
            return 0
        sent = 0
        while sent < region.length:
            try:
                n = os.sendfile(self._sock_fd, region.fd, region.position + sent, region.length - sent)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                break
            sent += n
        self.last_active = time.monotonic()
        return sent

    async def _send_backlog(self) -> None:
        """Send queued chunks in order, waiting for the socket; file regions with loop.sendfile."""
        loop = asyncio.get_running_loop()
        transport = self.transport
        assert transport is not None
        try:
            while self._backlog and not self._closing:
                items, self._backlog = self._backlog, []
                for item in items:
                    if isinstance(item, (bytes, bytearray)):
                        transport.write(item)
                    elif item.length <= SMALL_REGION_BYTES:
                        transport.write(_read_region(item))
                    elif self._tls:
                        await self._write_in_pieces(item)
                    else:
                        with os.fdopen(item.fd, "rb", closefd=False) as f:
                            await loop.sendfile(transport, f, item.position, item.length)
                    self.last_active = time.monotonic()
        except (ConnectionError, OSError, RuntimeError) as e:
            log.debug("connection %s: send failed: %s", self.peer, e)
            self.close()
            return
        finally:
            self._send_task = None
        self._update_reading()

    async def _write_in_pieces(self, region: Any) -> None:
        """A file region through TLS: read and write TLS_PIECE_BYTES at a time, each once the transport takes
        more. Written whole, a 50 MB response was copied four times in memory (read, joined, encrypted,
        buffered by the transport); in pieces the socket takes most of each piece as it is encrypted."""
        transport = self.transport
        assert transport is not None
        position, end = region.position, region.position + region.length
        while position < end and not self._closing:
            want = min(TLS_PIECE_BYTES, end - position)
            piece = os.pread(region.fd, want, position)
            if len(piece) < want:           # the segment was rolled over or cleaned meanwhile: the slow read
                transport.write(FetchSlice(region.fd, position, end - position, 0).read_bytes())
                return
            transport.write(piece)
            position += want
            self.last_active = time.monotonic()
            if self._writing_paused and position < end:
                self._writable = self._writable or asyncio.Event()
                self._writable.clear()
                await self._writable.wait()

    # --- flow control and closing --------------------------------------------------------------

    def _update_reading(self) -> None:
        """Read only while the client's responses flow and few requests wait (Kafka's muting)."""
        transport = self.transport
        if transport is None or self._closing:
            return
        if self._eof:
            if not self._busy():
                self.close()
            return
        stop = (self._writing_paused or self._send_task is not None or len(self._queue) >= MAX_QUEUED_FRAMES
                or self._frames.waiting_for_memory)
        reading = transport.is_reading()   # loop.sendfile pauses and resumes reading by itself
        if stop and reading:
            transport.pause_reading()
        elif not stop and not reading:
            transport.resume_reading()

    def _busy(self) -> bool:
        return self._task is not None or self._send_task is not None or bool(self._queue)

    def tasks(self) -> list[asyncio.Task[None]]:
        """The tasks working for this connection (for shutdown)."""
        return [t for t in (self._task, self._send_task) if t is not None and not t.done()]

    def is_idle(self, now: float, idle_s: float) -> bool:
        return not self._busy() and now - self.last_active > idle_s

    def is_arriving_too_slowly(self, now: float, limit_s: float) -> bool:
        """A request has been arriving for longer than `limit_s` (not counting a wait for memory)."""
        return self.arriving_since is not None and now - self.arriving_since > limit_s

    def close(self) -> None:
        if self._closing:
            return
        self._flush()
        self._closing = True
        if self.transport is not None:
            self.transport.close()


def _read_region(region: Any) -> bytes:
    data = os.pread(region.fd, region.length, region.position)
    if len(data) == region.length:
        return data
    return FetchSlice(region.fd, region.position, region.length, 0).read_bytes()
