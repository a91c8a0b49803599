"""The lag chart's data: each group's total lag sampled every few seconds, kept in bounded memory.

Owns: `LagHistory` (per group, the last `max_points` samples; at most `max_groups` groups, the ones sampled
longest ago dropped first; safe to read from the request threads while the sampler writes) and `LagSampler`
(the background thread that asks for a sample every interval and records it).
Must never: grow without bound, or let a failed sample stop the sampling (the next interval tries again).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from typing import Callable, Mapping

log = logging.getLogger(__name__)

Point = tuple[int, int | None]          # (epoch ms, total lag; None: the group has no committed offsets)


class LagHistory:
    def __init__(self, max_points: int, max_groups: int = 1000) -> None:
        if max_points < 1 or max_groups < 1:
            raise ValueError("a lag history keeps at least one point of one group")
        self.max_points = max_points
        self.max_groups = max_groups
        self._points: OrderedDict[str, deque[Point]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, at_ms: int, lags: Mapping[str, int | None]) -> None:
        """One sample of every group in `lags` at `at_ms`."""
        with self._lock:
            for group, lag in lags.items():
                points = self._points.pop(group, None)
                if points is None:
                    points = deque(maxlen=self.max_points)
                points.append((at_ms, lag))
                self._points[group] = points            # most recently sampled last
            while len(self._points) > self.max_groups:
                self._points.popitem(last=False)

    def points(self, group: str) -> list[Point]:
        with self._lock:
            return list(self._points.get(group, ()))

    def groups(self) -> list[str]:
        with self._lock:
            return list(self._points)


class LagSampler:
    """Calls `sample()` ({group: total lag}) every `interval_s` on a daemon thread and records it (the first
    sample is the caller's: `sample_once()` before `start()`, so the first page already has a point)."""

    def __init__(self, history: LagHistory, sample: Callable[[], Mapping[str, int | None]], interval_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.history = history
        self.sample = sample
        self.interval_s = interval_s
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pylog-console-lag", daemon=True)

    def start(self) -> "LagSampler":
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def sample_once(self) -> None:
        at_ms = int(self.clock() * 1000)
        try:
            lags = self.sample()
        except Exception as e:  # noqa: BLE001 - a broker away for a while: the next interval tries again
            log.debug("lag sample failed: %s", e, exc_info=True)
            return
        self.history.record(at_ms, lags)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):      # a slow sample delays the next: samples never bunch
            self.sample_once()
