"""librdkafka's log lines through Python logging, each condition once a minute.

Without a `logger` in its config, librdkafka writes raw `%3|...|FAIL|rdkafka#consumer-1|...` lines to
stderr, one per retry, for as long as a broker is unreachable. Every Kafka client of the data source,
the sinks and the offset manager is configured through `with_logger`, so those lines go to the
`pylog.kafka` logger at WARNING and above, and a repeated condition (the same line apart from its
numbers) is logged once per REPEAT_INTERVAL_S. Consumers hand their log lines over when polled.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Mapping

REPEAT_INTERVAL_S = 60.0
LOGGER_NAME = "pylog.kafka"
_DIGITS = re.compile(r"\d+")


class OncePerInterval(logging.Filter):
    """Drops a record whose text, digits aside, was let through less than `interval` seconds ago."""

    def __init__(self, interval: float = REPEAT_INTERVAL_S) -> None:
        super().__init__()
        self.interval = interval
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = _DIGITS.sub("#", record.getMessage())
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key, -self.interval) < self.interval:
                return False
            self._last[key] = now
            if len(self._last) > 1000:
                self._last.clear()
        return True


def client_logger() -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(f, OncePerInterval) for f in logger.filters):
        logger.addFilter(OncePerInterval())
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
    return logger


def with_logger(conf: Mapping[str, Any]) -> dict[str, Any]:
    """`conf` for a confluent-kafka client, with librdkafka's logs routed to `pylog.kafka`."""
    return {**conf, "logger": client_logger()}
