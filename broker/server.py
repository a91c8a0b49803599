"""The asyncio listener and the broker's lifecycle: start, housekeeping timer, clean shutdown.

Owns the listening sockets (one per listener, broker.security: TLS and SASL as each listener says),
the set of live connections (each a `broker.connection.Connection`,
which owns framing, dispatch and responses), the connection limits (max.connections,
max.connections.per.ip), the broker-wide request memory pool (queued.max.request.bytes), closing
idle and too-slow connections, and the storage
housekeeping (flush policy, deferred file deletion, log cleaner, retention). A malformed frame or
an unsupported API closes that connection only; the broker carries on.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import asyncio
import fcntl
import logging
import os
import resource
import signal
import time
from pathlib import Path

from broker import dynamic_configs, meta_properties
from broker.cluster.cluster_node import ClusterNode, node_settings
from broker.cluster.cluster_view import ClusterView
from broker.cluster.producer_ids import ProducerIdManager
from broker.cluster.security_sync import SecuritySync
from broker.cluster.topic_registry import TopicRegistry
from broker.config import BrokerConfig
from broker.meta_properties import MetaProperties
from broker.connection import Connection
from broker.context import BrokerContext
from broker.security import tls_alerts
from broker.security.authorizer import make_authorizer
from broker.security.credentials import CredentialStore
from broker.security.endpoint import Endpoint, build_endpoints
from broker.cluster.zk_security import zk_security
from broker.metrics import BrokerMetrics
from broker.security.inter_broker import PeerSecurity, peer_security
from broker.security.listeners import Listener, configured_listeners, exposure_problem, inter_broker_listener
from kafka_protocol.errors import InvalidConfigError

if TYPE_CHECKING:
    from broker.log.partition_log import PartitionLog
    from broker.tiered.remote_log_manager import RemoteLogManager
from broker.fetch_sessions import FetchSessionCache
from broker.groups.offset_store import OFFSETS_TOPIC
from broker.groups.service import GroupService
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.log_records import TRANSACTION_STATE_TOPIC
from broker.transactions.broker_channel import BrokerChannel
from broker.log.cleaner import LogCleaner
from broker.log.log_manager import LogManager
from kafka_protocol.framing import RequestMemoryPool
from kafka_protocol.quiet_logging import quiet
from broker.replica_manager import ReplicaManager
from broker.replication.manager import Replication

log = logging.getLogger(__name__)
slow_log = quiet(logging.getLogger(__name__ + ".limits"))

HOUSEKEEPING_TICK_S = 0.5


class DataDirLockedError(RuntimeError):
    pass


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.data_dir = config.data_dir
        self._servers: list[asyncio.base_events.Server] = []
        self.endpoints: list[Endpoint] = []
        self.listeners: list[Listener] = []      # as bound (a port 0 resolved)
        self.peer_security: PeerSecurity | None = None   # how this broker logs in to its peers (cluster mode)
        self.metrics_port: int | None = None            # where /metrics is served (metrics.port)
        self.connections: set[Connection] = set()
        self.request_memory = RequestMemoryPool(config["queued.max.request.bytes"])
        self._housekeeping: asyncio.Task[None] | None = None
        self._lock_fd: int | None = None
        self.ctx: BrokerContext | None = None
        self._cleaner: LogCleaner | None = None
        self._tiering: asyncio.Task[None] | None = None
        self.port: int = config["port"]
        self.cluster: ClusterNode | None = None

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
        listeners = configured_listeners(cfg)
        problem = exposure_problem(cfg, listeners)
        if problem is not None:
            raise InvalidConfigError(problem)
        # how this broker logs in to its peers and to ZooKeeper, checked before anything binds (cluster mode)
        if cfg["zookeeper.connect"]:
            self.peer_security = peer_security(cfg, inter_broker_listener(cfg, listeners))
            zk_security(cfg)
        dynamic_configs.encoder(cfg)          # its settings checked now, not at the first dynamic password
        dynamic_configs.load(cfg, self.data_dir)
        # SCRAM users and ACLs: the data directory's, or ZooKeeper's in cluster mode (SecuritySync, below)
        security_dir = None if cfg["zookeeper.connect"] else self.data_dir
        credentials = CredentialStore(security_dir)
        authorizer = make_authorizer(cfg, security_dir)
        self.endpoints = build_endpoints(cfg, listeners, credentials)
        if any(e.ssl_context is not None for e in self.endpoints):
            tls_alerts.install()
        registry = TopicRegistry(self.data_dir, cfg.topic_defaults())
        logs = LogManager(self.data_dir, producer_id_expiration_ms=cfg["producer.id.expiration.ms"])
        replicas = ReplicaManager(cfg, registry, logs)
        LogCleaner.recover_swaps(self.data_dir)
        metrics = BrokerMetrics()
        logs.flush_observer = metrics.flush_seconds.observe
        loading = time.monotonic()
        replicas.startup()
        metrics.recovery_seconds.set(time.monotonic() - loading)
        self._cleaner = LogCleaner(logs, enabled=cfg["log.cleaner.enable"], backoff_ms=cfg["log.cleaner.backoff.ms"])
        remote = self._remote_log_manager(registry, logs, replicas)
        groups = GroupService(cfg, replicas, time.time, cluster=bool(cfg["zookeeper.connect"]))
        groups.startup()
        loop = asyncio.get_running_loop()
        # bound now (the port goes into the cluster registration), accepting once the services exist; a broker
        # joining a cluster then answers clients only once the controller has told it the cluster's state
        for endpoint in self.endpoints:
            listener = endpoint.listener
            server = await loop.create_server(
                lambda endpoint=endpoint: Connection(self, endpoint), host=listener.host or None, port=listener.port,
                ssl=endpoint.ssl_context, backlog=1024, start_serving=False)
            self._servers.append(server)
            endpoint.listener = listener.with_port(server.sockets[0].getsockname()[1])
        self.listeners = [e.listener for e in self.endpoints]
        self.port = self.listeners[0].port
        stored = meta_properties.read(self.data_dir, cfg["broker.id"])   # cluster mode: written once joined
        producer_ids = ProducerIdManager(self.data_dir)
        transactions = TransactionCoordinator(cfg, replicas, None)
        transactions.on_offsets_marker = groups.on_txn_marker
        if cfg["zookeeper.connect"]:
            node, meta = await self._join_cluster(replicas, groups, transactions, stored, remote)
            await asyncio.to_thread(SecuritySync(node.zk, credentials,
                                                 authorizer.store if authorizer is not None else None).start)
            producer_ids = ProducerIdManager(self.data_dir, block_source=node.producer_id_block)
        else:
            meta = stored or meta_properties.load(self.data_dir, cfg["broker.id"])
        transactions.producer_ids = producer_ids
        transactions.startup()
        self.ctx = BrokerContext(
            config=cfg,
            replicas=replicas,
            producer_ids=producer_ids,
            cluster_id=meta.cluster_id,
            node_id=cfg["broker.id"],
            host=self.listeners[0].advertised_host,
            port=self.listeners[0].advertised_port,
            groups=groups,
            transactions=transactions,
            fetch_sessions=FetchSessionCache(cfg["max.incremental.fetch.session.cache.slots"],
                                             cfg["min.incremental.fetch.session.eviction.ms"]),
            credentials=credentials,
            reload_tls=self.reload_tls,
            authorizer=authorizer,
            metrics=metrics,
            remote=remote,
        )
        metrics.watch(self.ctx)
        if cfg["metrics.port"] is not None:
            self.metrics_port = metrics.serve(cfg["metrics.host"], cfg["metrics.port"])
        for server in self._servers:
            await server.start_serving()
        if self.cluster is not None:
            await self._await_controller(self.cluster)
        self._housekeeping = asyncio.create_task(self._housekeeping_loop())
        if remote is not None:
            self._tiering = asyncio.create_task(self._tiering_loop(remote))
        log.info(
            "pylog broker %d listening on %s:%d, data in %s, %d partitions, started in %.2fs",
            cfg["broker.id"], self.listeners[0].host or "0.0.0.0", self.port, self.data_dir, len(logs.all_logs()),
            time.monotonic() - started,
        )
        for lst in self.listeners[1:] if len(self.listeners) > 1 else ():
            log.info("listener %s (%s) on %s:%d, advertised as %s:%d", lst.name, lst.protocol, lst.host or "0.0.0.0",
                     lst.port, lst.advertised_host, lst.advertised_port)

    def reload_tls(self) -> None:
        """A dynamic TLS setting changed: every TLS listener loads its keystore and truststore again (new
        connections get them; open ones keep theirs). TlsConfigError when one cannot be used."""
        for endpoint in self.endpoints:
            endpoint.reload_tls(self.config)

    async def _join_cluster(self, replicas: ReplicaManager, groups: GroupService,
                            transactions: TransactionCoordinator,
                            meta: MetaProperties | None,
                            remote: "RemoteLogManager | None") -> tuple[ClusterNode, MetaProperties]:
        """Cluster mode: check the data directory belongs to the cluster (a new cluster takes its id and its
        topics), register in ZooKeeper and follow the cluster view; roles arrive from the controller."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        pending = False

        def apply_view() -> None:
            nonlocal pending
            pending = False
            if replicas.replication is not None and replicas.cluster is not None:
                replicas.replication.apply(replicas.cluster.view)

        def on_view(_view: ClusterView) -> None:      # kazoo's thread: coalesce, then apply on the loop
            nonlocal pending
            if not pending:
                pending = True
                loop.call_soon_threadsafe(apply_view)

        between = inter_broker_listener(cfg, self.listeners)
        legacy = next((lst for lst in self.listeners if lst.protocol == "PLAINTEXT"), between)
        endpoints = tuple((lst.name, lst.protocol, lst.advertised_host, lst.advertised_port) for lst in self.listeners)
        node = ClusterNode(cfg["zookeeper.connect"], cfg["broker.id"], legacy.advertised_host,
                           legacy.advertised_port, on_view=on_view,
                           listeners=() if [(n, p) for n, p, _, _ in endpoints] == [("PLAINTEXT", "PLAINTEXT")]
                           else endpoints,
                           peer_security=self.peer_security, **node_settings(cfg))
        replication = Replication(cfg["broker.id"], cfg, replicas, node.write_isr, replicas.wake,
                                  peer_security=self.peer_security,
                                  tiered_restore=remote.restore_follower_state if remote is not None else None)
        replication.on_leadership(OFFSETS_TOPIC, groups.on_offsets_partition)
        replication.on_leadership(TRANSACTION_STATE_TOPIC, transactions.on_state_partition)
        transactions.channel = BrokerChannel(cfg["broker.id"], lambda: replication.view.brokers, self.peer_security)
        await asyncio.to_thread(node.connect)
        try:
            proposed = meta.cluster_id if meta is not None else meta_properties.new_cluster_id()
            zk_cluster_id, created = await asyncio.to_thread(node.cluster_id, proposed)
            meta_properties.check_cluster(meta, zk_cluster_id, self.data_dir, cfg["zookeeper.connect"])
            if meta is None:
                meta = meta_properties.write(self.data_dir, zk_cluster_id, cfg["broker.id"])
            if created:
                await asyncio.to_thread(node.register_local_topics, list(replicas.registry))
            await asyncio.to_thread(node.join)
        except BaseException:
            node.stop()
            raise
        self.cluster = node
        replicas.attach_cluster(node, replication)
        replication.start()
        apply_view()
        log.info("broker %d registered in the cluster at %s", cfg["broker.id"], cfg["zookeeper.connect"])
        return node, meta

    async def _await_controller(self, node: ClusterNode) -> None:
        """Wait for the controller's first UpdateMetadata (client requests wait for it too, in `Connection`)."""
        timeout_s = self.config["zookeeper.session.timeout.ms"] / 1000.0 + 10.0
        if await asyncio.to_thread(node.ready.wait, timeout_s):
            log.info("broker %d: the controller (broker %d) sent the cluster's state: %d live brokers, %d partition "
                     "states", self.config["broker.id"], node.view.controller_id, len(node.view.brokers),
                     len(node.view.states))
        else:
            log.warning("broker %d: no word from a controller after %.0fs; serving what ZooKeeper shows",
                        self.config["broker.id"], timeout_s)

    async def controlled_shutdown(self) -> None:
        """Cluster mode, controlled.shutdown.enable: move this broker's leaderships away before stopping."""
        node = self.cluster
        if node is None or not self.config["controlled.shutdown.enable"]:
            return
        timeout_s = self.config["controlled.shutdown.timeout.ms"] / 1000.0
        started = time.monotonic()
        moved = await asyncio.to_thread(node.controlled_shutdown, timeout_s)
        if moved:
            log.info("controlled shutdown: leadership moved away in %.2fs", time.monotonic() - started)
        else:
            log.warning("controlled shutdown: this broker still leads partitions after %.0fs; stopping anyway",
                        timeout_s)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        if self._tiering is not None:
            self._tiering.cancel()
            await asyncio.gather(self._tiering, return_exceptions=True)
        if self.ctx is not None and self.ctx.remote is not None:
            self.ctx.remote.close()
        tasks = [t for c in list(self.connections) for t in c.tasks()]
        for conn in list(self.connections):
            conn.close()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.ctx is not None:
            if self.ctx.groups is not None:
                self.ctx.groups.shutdown()
            if self.ctx.transactions is not None:
                self.ctx.transactions.shutdown()
            if self.ctx.replicas.replication is not None:
                await self.ctx.replicas.replication.stop()
            if self.cluster is not None:
                await asyncio.to_thread(self.cluster.stop)
            self.ctx.replicas.shutdown()
        if self.ctx is not None:
            self.ctx.metrics.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("pylog broker stopped cleanly")

    def _remote_log_manager(self, registry: TopicRegistry, logs: LogManager,
                            replicas: ReplicaManager) -> "RemoteLogManager | None":
        """Tiered storage's manager when remote.log.storage.system.enable is set (InvalidConfigError when it
        cannot run: no remote.log.storage.url). In cluster mode every broker names the same store, and a
        partition's leader uploads (`Replication.leads`)."""
        cfg = self.config
        if not cfg["remote.log.storage.system.enable"]:
            return None
        if not cfg["remote.log.storage.url"]:
            raise InvalidConfigError("remote.log.storage.system.enable needs remote.log.storage.url "
                                     "(s3://bucket/prefix, or a local directory)")
        from broker.tiered.remote_log_manager import RemoteLogManager

        def topic_id(topic: str) -> str | None:
            info = registry.get(topic)
            return None if info is None else str(info.topic_id)

        def leads(plog: "PartitionLog") -> bool:
            replication = replicas.replication
            return replication is not None and replication.leads(plog.topic, plog.partition)

        return RemoteLogManager(cfg["remote.log.storage.url"], cache_bytes=cfg["remote.log.reader.cache.bytes"],
                                fetch_wait_s=cfg["remote.fetch.max.wait.ms"] / 1000.0, topic_id=topic_id,
                                logs=logs.all_logs, leads=leads if cfg["zookeeper.connect"] else None,
                                orphan_grace_s=cfg["remote.log.orphan.grace.ms"] / 1000.0)

    async def _tiering_loop(self, remote: "RemoteLogManager") -> None:
        """Tiered storage's periodic work: the first pass at once (it takes the tiered partitions on), then
        every remote.log.manager.task.interval.ms."""
        every = self.config["remote.log.manager.task.interval.ms"] / 1000.0
        while True:
            try:
                await remote.run_cycle()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - tiering must never stop the broker
                log.exception("tiered storage: a pass failed")
            await asyncio.sleep(every)

    async def _housekeeping_loop(self) -> None:
        assert self.ctx is not None
        replicas = self.ctx.replicas
        retention_every = self.config["log.retention.check.interval.ms"] / 1000.0
        idle_s = self.config["connections.max.idle.ms"] / 1000.0
        arrival_s = self.config["request.arrival.timeout.ms"] / 1000.0
        next_retention = time.monotonic() + retention_every
        hw_every = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000.0
        next_hw_checkpoint = time.monotonic() + hw_every
        while True:
            await asyncio.sleep(HOUSEKEEPING_TICK_S)
            now_ms = self.ctx.now_ms()
            self._close_stale_connections(idle_s, arrival_s)
            try:
                replicas.logs.flush_due(now_ms)
                replicas.logs.purge_deleted_files(now_ms)
                if self._cleaner is not None:
                    self._cleaner.maybe_clean(now_ms)
                if self.cluster is not None and time.monotonic() >= next_hw_checkpoint:
                    next_hw_checkpoint = time.monotonic() + hw_every
                    for plog in replicas.logs.all_logs():
                        plog.checkpoint_high_watermark()
                if time.monotonic() >= next_retention:
                    next_retention = time.monotonic() + retention_every
                    deleted = replicas.run_retention(now_ms)
                    if deleted:
                        log.info("retention deleted %d segments", deleted)
            except Exception:  # noqa: BLE001 - housekeeping must never stop the broker
                log.exception("housekeeping failed")

    def admit(self, conn: Connection) -> str | None:
        """Why a new connection may not stay (max.connections, max.connections.per.ip), or None."""
        cfg = self.config
        if len(self.connections) >= cfg["max.connections"]:
            return f"max.connections={cfg['max.connections']} reached"
        host = conn.peer[0] if conn.peer else None
        limit = cfg["max.connections.per.ip"]
        if host is not None and limit < len(self.connections) + 1:
            same = sum(1 for c in self.connections if c.peer and c.peer[0] == host)
            if same >= limit:
                return f"max.connections.per.ip={limit} reached for {host}"
        return None

    def _close_stale_connections(self, idle_s: float, arrival_s: float) -> None:
        """connections.max.idle.ms: close connections with no request or response for that long;
        request.arrival.timeout.ms: close those whose request is still arriving after that long."""
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.is_idle(now, idle_s):
                log.debug("closing idle connection %s", conn.peer)
                conn.close()
            elif conn.is_arriving_too_slowly(now, arrival_s):
                slow_log.warning("closing connection %s: its request has been arriving for more than %d ms "
                                 "(request.arrival.timeout.ms)", conn.peer, int(arrival_s * 1000))
                conn.close()


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    """Run a broker until SIGTERM or SIGINT, then shut down cleanly. A signal that arrives while the broker
    starts (its ports may already accept) stops it cleanly once it has started."""
    server = BrokerServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
        await server.controlled_shutdown()
    finally:
        await server.stop()
