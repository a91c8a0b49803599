"""Executor side: keep one idle Kafka client per configuration within a Python worker.

Spark reuses Python workers across tasks (spark.python.worker.reuse), so a client released by one
task serves the next one: its connections and metadata survive, which saves most of the fixed cost
of a small task (a micro-batch reads many small ranges). Owns only the idle clients of this process;
a client is either checked out by exactly one reader or idle here. Never shares a client between
concurrent readers and never keeps one that saw an error. Used for both readers: the native
fetcher's `KafkaClient` and librdkafka's `Consumer`.
"""
from __future__ import annotations

import atexit
import logging
import threading
from typing import Callable, Generic, Hashable, TypeVar

log = logging.getLogger(__name__)

C = TypeVar("C")


class ClientPool(Generic[C]):
    """Idle clients by configuration key; `reset` readies a released client for reuse."""

    def __init__(self, close: Callable[[C], object], reset: Callable[[C], object] = lambda c: None) -> None:
        self._close = close
        self._reset = reset
        self._lock = threading.Lock()
        self._idle: dict[Hashable, C] = {}
        atexit.register(self.close_all)

    def acquire(self, key: Hashable, create: Callable[[], C]) -> C:
        """An idle client for `key`, or a new one from `create`."""
        with self._lock:
            client = self._idle.pop(key, None)
        return client if client is not None else create()

    def release(self, key: Hashable, client: C, healthy: bool) -> None:
        """Give a client back: kept idle when healthy, closed otherwise."""
        if healthy:
            try:
                self._reset(client)
                with self._lock:
                    previous = self._idle.pop(key, None)
                    self._idle[key] = client
                if previous is not None:
                    self._quietly_close(previous)
                return
            except Exception:  # noqa: BLE001 - an unhealthy client is simply dropped
                log.debug("could not keep client idle", exc_info=True)
        self._quietly_close(client)

    def _quietly_close(self, client: C) -> None:
        try:
            self._close(client)
        except Exception:  # noqa: BLE001
            log.debug("closing client failed", exc_info=True)

    def close_all(self) -> None:
        with self._lock:
            clients = list(self._idle.values())
            self._idle.clear()
        for c in clients:
            self._quietly_close(c)
