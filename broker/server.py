"""The asyncio listener: bytes in → frames → dispatch → bytes out. Nothing else.

Owns connections, per-connection request ordering (one request at a time per connection, as
Kafka does), sending fetch data with sendfile, the housekeeping timer and clean shutdown. A
malformed frame or an unsupported API closes that connection only; the broker carries on.
"""
from __future__ import annotations

import asyncio
import base64
import fcntl
import inspect
import logging
import os
import resource
import signal
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from broker.apis.api_versions import unsupported_version_response
from broker.apis.registry import supported
from broker.cluster.producer_ids import ProducerIdManager
from broker.cluster.topic_registry import TopicRegistry
from broker.config import BrokerConfig
from broker.context import CLIENT_HOST, BrokerContext
from broker.groups.service import GroupService
from broker.log.cleaner import LogCleaner
from broker.log.log_manager import LogManager
from broker.protocol.codec import (
    API_VERSIONS_KEY,
    MalformedRequestError,
    decode_request,
    encode_response,
    peek_header,
    request_schema,
)
from broker.protocol.framing import FrameError, frame_length
from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

HOUSEKEEPING_TICK_S = 0.5


def load_cluster_id(data_dir: Path, node_id: int) -> str:
    """Read or create `<data dir>/meta.properties` (cluster.id, node.id), as Kafka does."""
    path = data_dir / "meta.properties"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    path.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    return cluster_id


class DataDirLockedError(RuntimeError):
    pass


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.data_dir = config.data_dir
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._housekeeping: asyncio.Task[None] | None = None
        self._lock_fd: int | None = None
        self.ctx: BrokerContext | None = None
        self._cleaner: LogCleaner | None = None
        self.port: int = config["port"]

    # -- lifecycle
    def _lock_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLockedError(f"data directory {self.data_dir} is in use by another broker") from None
        self._lock_fd = fd

    @staticmethod
    def _raise_open_file_limit() -> None:
        """Storage keeps one fd per segment: raise the soft RLIMIT_NOFILE to the hard limit, as Kafka's docs advise."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            except (ValueError, OSError) as e:
                log.warning("cannot raise the open file limit from %d to %d: %s", soft, hard, e)

    async def start(self) -> None:
        started = time.monotonic()
        self._raise_open_file_limit()
        self._lock_data_dir()
        cfg = self.config
        registry = TopicRegistry(self.data_dir, cfg.topic_defaults())
        logs = LogManager(self.data_dir, producer_id_expiration_ms=cfg["producer.id.expiration.ms"])
        replicas = ReplicaManager(cfg, registry, logs)
        LogCleaner.recover_swaps(self.data_dir)
        replicas.startup()
        self._cleaner = LogCleaner(logs, enabled=cfg["log.cleaner.enable"], backoff_ms=cfg["log.cleaner.backoff.ms"])
        groups = GroupService(cfg, replicas, time.time)
        groups.startup()
        self._server = await asyncio.start_server(
            self._on_connection, host=cfg["host.name"], port=cfg["port"], limit=1 << 20, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.ctx = BrokerContext(
            config=cfg,
            replicas=replicas,
            producer_ids=ProducerIdManager(self.data_dir),
            cluster_id=load_cluster_id(self.data_dir, cfg["broker.id"]),
            node_id=cfg["broker.id"],
            host=cfg.advertised_host,
            port=cfg["advertised.port"] or self.port,
            groups=groups,
        )
        self._housekeeping = asyncio.create_task(self._housekeeping_loop())
        log.info(
            "pylog broker %d listening on %s:%d, data in %s, %d partitions, started in %.2fs",
            cfg["broker.id"], cfg["host.name"], self.port, self.data_dir, len(logs.all_logs()), time.monotonic() - started,
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self.ctx is not None:
            if self.ctx.groups is not None:
                self.ctx.groups.shutdown()
            self.ctx.replicas.shutdown()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("pylog broker stopped cleanly")

    async def _housekeeping_loop(self) -> None:
        assert self.ctx is not None
        replicas = self.ctx.replicas
        retention_every = self.config["log.retention.check.interval.ms"] / 1000.0
        next_retention = time.monotonic() + retention_every
        while True:
            await asyncio.sleep(HOUSEKEEPING_TICK_S)
            now_ms = self.ctx.now_ms()
            try:
                replicas.logs.flush_due(now_ms)
                replicas.logs.purge_deleted_files(now_ms)
                if self._cleaner is not None:
                    self._cleaner.maybe_clean(now_ms)
                if time.monotonic() >= next_retention:
                    next_retention = time.monotonic() + retention_every
                    deleted = replicas.run_retention(now_ms)
                    if deleted:
                        log.info("retention deleted %d segments", deleted)
            except Exception:  # noqa: BLE001 - housekeeping must never stop the broker
                log.exception("housekeeping failed")

    # -- connections
    def _tune_socket(self, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is None:
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for key, opt in (("socket.send.buffer.bytes", socket.SO_SNDBUF), ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
            if self.config[key] > 0:
                sock.setsockopt(socket.SOL_SOCKET, opt, self.config[key])

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        CLIENT_HOST.set(f"/{peer[0]}" if peer else "")
        self._tune_socket(writer)
        try:
            await self._serve(reader, writer, peer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # noqa: BLE001 - one connection's failure must not touch the others
            log.exception("connection %s failed", peer)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Any) -> None:
        assert self.ctx is not None
        max_bytes = self.config["socket.request.max.bytes"]
        idle_s = self.config["connections.max.idle.ms"] / 1000.0
        while True:
            try:
                prefix = await asyncio.wait_for(reader.readexactly(4), idle_s)
            except asyncio.TimeoutError:
                log.debug("closing idle connection %s", peer)
                return
            try:
                n = frame_length(prefix, max_bytes)
            except FrameError as e:
                log.warning("closing connection %s: %s", peer, e)
                return
            frame = await reader.readexactly(n)
            response = await self._dispatch(frame, peer)
            if response is False:
                return
            if response is not None:
                await self._send(writer, response)

    async def _dispatch(self, frame: bytes, peer: Any) -> Any:
        """The response to send: bytes, a chunk list, None (no response) or False (close the connection)."""
        assert self.ctx is not None
        try:
            api_key, version, correlation_id = peek_header(frame)
        except MalformedRequestError as e:
            log.warning("closing connection %s: %s", peer, e)
            return False
        api = supported(api_key, version)
        if api is None:
            if api_key == API_VERSIONS_KEY:
                return encode_response(api_key, correlation_id, unsupported_version_response())
            log.warning("closing connection %s: unsupported API key %d version %d", peer, api_key, version)
            return False
        try:
            request = decode_request(frame, request_schema(api_key, version))
        except MalformedRequestError as e:
            log.warning("closing connection %s: malformed %s v%d request: %s", peer, api.name, version, e)
            return False
        try:
            result = api.handler(self.ctx, request)
            if inspect.isawaitable(result):
                result = await result
        except Exception:  # noqa: BLE001
            log.exception("%s v%d from %s failed; closing the connection", api.name, version, peer)
            return False
        if result is None or isinstance(result, list):
            return result
        return encode_response(api_key, correlation_id, result)

    async def _send(self, writer: asyncio.StreamWriter, response: bytes | list[Any]) -> None:
        if isinstance(response, (bytes, bytearray)):
            writer.write(response)
            await writer.drain()
            return
        loop = asyncio.get_running_loop()
        for chunk in response:
            if isinstance(chunk, (bytes, bytearray)):
                writer.write(chunk)
            else:
                await writer.drain()
                with os.fdopen(chunk.fd, "rb", closefd=False) as f:
                    await loop.sendfile(writer.transport, f, chunk.position, chunk.length)
        await writer.drain()


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    """Run a broker until SIGTERM or SIGINT, then shut down cleanly."""
    server = BrokerServer(config)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        await server.stop()
