"""A logging filter that lets each condition through once per interval.

A flood of bad requests, or a client library retrying an unreachable broker, repeats the same line
thousands of times a second. `OncePerInterval` keys a record by its text with the digits taken out
(so peers, ports, sizes and offsets do not make lines different) and drops a repeat that comes
less than `interval` seconds after the last one let through. The broker's connection logger and
the Spark source's librdkafka logger both use it.
"""
from __future__ import annotations

import logging
import re
import threading
import time

REPEAT_INTERVAL_S = 60.0
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


def quiet(logger: logging.Logger, interval: float = REPEAT_INTERVAL_S) -> logging.Logger:
    """`logger` with a OncePerInterval filter (added once)."""
    if not any(isinstance(f, OncePerInterval) for f in logger.filters):
        logger.addFilter(OncePerInterval(interval))
    return logger
