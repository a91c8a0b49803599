"""Executor side: reuse one idle confluent-kafka Consumer per configuration within a Python worker.

Spark reuses Python workers across tasks (spark.python.worker.reuse), so a consumer released by one
task serves the next one: its connections and metadata survive, which saves most of the fixed cost
of a small task (a micro-batch reads many small ranges). Owns only the idle consumers of this process;
a consumer is either checked out by exactly one reader or idle here, unassigned. Never shares a
consumer between concurrent readers and never keeps one that saw an error.
"""
from __future__ import annotations

import atexit
import logging
import threading
from typing import Mapping

from confluent_kafka import Consumer

from sparklog.kafka_log import with_logger

log = logging.getLogger(__name__)

_lock = threading.Lock()
_idle: dict[tuple, Consumer] = {}


def _key(conf: Mapping[str, object]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in conf.items()))


def acquire(conf: Mapping[str, object]) -> Consumer:
    """An idle consumer for `conf`, or a new one."""
    with _lock:
        consumer = _idle.pop(_key(conf), None)
    return consumer if consumer is not None else Consumer(with_logger(conf))


def release(conf: Mapping[str, object], consumer: Consumer, healthy: bool) -> None:
    """Give a consumer back: kept idle (unassigned) when healthy, closed otherwise."""
    if healthy:
        try:
            consumer.unassign()
            with _lock:
                previous = _idle.pop(_key(conf), None)
                _idle[_key(conf)] = consumer
            if previous is not None:
                previous.close()
            return
        except Exception:  # noqa: BLE001 - an unhealthy consumer is simply dropped
            log.debug("could not keep consumer idle", exc_info=True)
    try:
        consumer.close()
    except Exception:  # noqa: BLE001
        log.debug("closing consumer failed", exc_info=True)


@atexit.register
def close_all() -> None:
    with _lock:
        consumers = list(_idle.values())
        _idle.clear()
    for c in consumers:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass
