"""A broker without sockets, for calling API handlers from a fuzz target in-process.

`InProcessBroker` builds the same `BrokerContext` as `broker/server.py` (`BrokerServer.start`: topic
registry, log manager, replica manager, group service, transaction coordinator, producer ids, fetch
sessions, SCRAM credentials and an ACL authorizer (on by default here, so the checks are fuzzed too);
keep the two in step) over a temporary data directory,
on a private asyncio loop, but opens no listener. `call(api, request)` runs the handler as the
connection does (awaiting an async result for at most `timeout` seconds, then cancelling it, as a
closed connection would); `encode(request, result)` makes the bytes the connection would send. Log records with
a traceback (the broker's `log.exception`, what a live broker would write as "Traceback") are
collected in `logged_tracebacks`. `reset()` starts over in a fresh directory, so state and disk use
stay bounded over a long run.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from broker.cluster.producer_ids import ProducerIdManager
from broker.cluster.topic_registry import TopicRegistry
from broker.config import BrokerConfig
from broker.context import CLIENT_HOST, SESSION, BrokerContext, Session
from broker.security.authenticator import Authenticator, SaslSettings
from broker.security.authorizer import make_authorizer
from broker.security.credentials import CredentialStore
from broker.fetch_sessions import FetchSessionCache
from broker.groups.service import GroupService
from broker.log.log_manager import LogManager
from kafka_protocol.codec import encode_response
from broker.replica_manager import ReplicaManager
from broker.transactions.coordinator import TransactionCoordinator
from broker import meta_properties

# Bounded state: a fuzzed CreateTopics may ask for thousands of partitions; small segments roll often.
SETTINGS: dict[str, object] = {"max.broker.partitions": 64, "log.segment.bytes": 1 << 20,
                               "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2,
                               "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                               "allow.everyone.if.no.acl.found": "true"}
# every request comes from a SASL connection's session, so the login APIs have their state machine to drive
SASL = SaslSettings(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), lambda user, mechanism: None,
                    lambda user, password: False, reauth_ms=60_000, failed_delay_ms=0)


class _TracebackCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


class InProcessBroker:
    def __init__(self, root: Path | None = None, settings: dict[str, object] | None = None) -> None:
        self._root = Path(root or tempfile.mkdtemp(prefix="pylog-fuzz-"))
        self._settings = {**SETTINGS, **(settings or {})}
        self._generation = 0
        self.loop = asyncio.new_event_loop()
        self.collector = _TracebackCollector()
        logging.getLogger("broker").addHandler(self.collector)
        logging.getLogger("broker").setLevel(logging.WARNING)
        self.ctx: BrokerContext | None = None
        self.calls = 0
        self._start()

    @property
    def logged_tracebacks(self) -> list[logging.LogRecord]:
        return self.collector.records

    def _start(self) -> None:
        self._generation += 1
        data_dir = self._root / f"data{self._generation}"
        cfg = BrokerConfig.load(None, {**self._settings, "log.dirs": str(data_dir)})
        data_dir.mkdir(parents=True, exist_ok=True)

        async def start() -> BrokerContext:
            registry = TopicRegistry(data_dir, cfg.topic_defaults())
            logs = LogManager(data_dir, producer_id_expiration_ms=cfg["producer.id.expiration.ms"])
            replicas = ReplicaManager(cfg, registry, logs)
            replicas.startup()
            groups = GroupService(cfg, replicas, time.time)
            groups.startup()
            producer_ids = ProducerIdManager(data_dir)
            transactions = TransactionCoordinator(cfg, replicas, producer_ids)
            transactions.on_offsets_marker = groups.on_txn_marker
            transactions.startup()
            return BrokerContext(config=cfg, replicas=replicas, producer_ids=producer_ids,
                                 cluster_id=meta_properties.load(data_dir, cfg["broker.id"]).cluster_id, node_id=cfg["broker.id"],
                                 host="127.0.0.1", port=9092, groups=groups, transactions=transactions,
                                 fetch_sessions=FetchSessionCache(cfg["max.incremental.fetch.session.cache.slots"],
                                                                  cfg["min.incremental.fetch.session.eviction.ms"]),
                                 credentials=CredentialStore(data_dir), authorizer=make_authorizer(cfg, data_dir))

        self.ctx = self.loop.run_until_complete(start())
        self.data_dir = data_dir

    def _stop(self) -> None:
        if self.ctx is None:
            return
        ctx, self.ctx = self.ctx, None
        if ctx.groups is not None:
            ctx.groups.shutdown()
        if ctx.transactions is not None:
            ctx.transactions.shutdown()
        ctx.replicas.shutdown()
        pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def reset(self) -> None:
        self._stop()
        self._start()

    def close(self) -> None:
        self._stop()
        self.loop.close()
        logging.getLogger("broker").removeHandler(self.collector)
        shutil.rmtree(self._root, ignore_errors=True)

    def call(self, api: Any, request: Any, timeout: float = 0.05) -> Any:
        """Run `api.handler` on `request` and return its result (None: no response, or an async
        result still pending after `timeout`). Exceptions of the handler propagate, as they reach
        the connection."""
        assert self.ctx is not None
        self.calls += 1
        ctx = self.ctx

        async def run() -> Any:
            token = CLIENT_HOST.set("/127.0.0.1")
            session = SESSION.set(Session(listener="SASL_PLAINTEXT", security_protocol="SASL_PLAINTEXT",
                                          client_host="/127.0.0.1", authenticator=Authenticator(SASL, time.time)))
            try:
                result = api.handler(ctx, request)
            finally:
                CLIENT_HOST.reset(token)
                SESSION.reset(session)
            if result is not None and type(result) is not bytes and hasattr(result, "__await__"):
                try:
                    result = await asyncio.wait_for(result, timeout)
                except asyncio.TimeoutError:
                    return None       # still waiting (long poll, join): the client went away
            return result

        return self.loop.run_until_complete(run())

    @staticmethod
    def encode(request: Any, result: Any) -> Any:
        """What the connection would write for `result` (`Connection._respond`): bytes as they are,
        a fetch response's chunks (file regions by their length), an entity encoded."""
        if result is None or isinstance(result, (bytes, bytearray)):
            return result
        if isinstance(result, list):
            return [c if isinstance(c, (bytes, bytearray)) else c.length for c in result]
        return encode_response(request.api_key, request.correlation_id, result)
