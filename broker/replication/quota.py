"""Replication throttles, as Kafka's ReplicationQuotaManager applies them (KIP-73), pure.

A reassignment copies whole partitions; throttles keep the copy from starving producers and consumers. A topic
names its throttled replicas (`leader.replication.throttled.replicas` on the leaders' side,
`follower.replication.throttled.replicas` on the followers', each `partition:broker,...` or `*`), and each
broker caps the bytes per second of throttled replication it serves as a leader
(`leader.replication.throttled.rate`) and fetches as a follower (`follower.replication.throttled.rate`). The rate
is measured over `replication.quota.window.num` windows of `replication.quota.window.size.seconds` (Kafka's
defaults: 11 of 1 s); while it is above the cap, throttled partitions get no data: a leader leaves them out of a
follower's Fetch answer, a follower leaves them out of its Fetch. Unthrottled replication is never held back.
"""
from __future__ import annotations

from collections import deque

UNLIMITED = 9223372036854775807       # Long.MAX_VALUE: Kafka's "no throttle"


def parse_throttled_replicas(value: str) -> str:
    """A `*.replication.throttled.replicas` value, checked as Kafka checks it (ValueError naming the problem)."""
    v = value.strip()
    if v in ("", "*"):
        return v
    for item in v.split(","):
        part, sep, broker = item.strip().partition(":")
        if not sep or not part.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError("must be the literal '*' or a list of replicas in the following format: "
                             "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return ",".join(item.strip() for item in v.split(","))


def is_throttled(value: str, partition: int, broker: int) -> bool:
    """Whether `value` (a parsed `*.replication.throttled.replicas`) throttles `partition`'s replica on `broker`."""
    if not value:
        return False
    if value == "*":
        return True
    return f"{partition}:{broker}" in value.split(",")


class ReplicationQuota:
    """Bytes of throttled replication per second over a sliding window of `windows` samples of `window_s` seconds."""

    def __init__(self, rate: int = UNLIMITED, windows: int = 11, window_s: float = 1.0) -> None:
        self.rate, self.windows, self.window_s = rate, max(windows, 1), max(window_s, 0.001)
        self._samples: deque[tuple[float, int]] = deque()     # (window start, bytes)

    def _trim(self, now: float) -> None:
        oldest = now - self.windows * self.window_s
        while self._samples and self._samples[0][0] <= oldest:
            self._samples.popleft()

    def record(self, nbytes: int, now: float) -> None:
        start = now - (now % self.window_s)
        if self._samples and self._samples[-1][0] == start:
            self._samples[-1] = (start, self._samples[-1][1] + nbytes)
        else:
            self._samples.append((start, nbytes))
        self._trim(now)

    def bytes_per_second(self, now: float) -> float:
        """The measured rate: the window's bytes over its elapsed span (at least one window)."""
        self._trim(now)
        if not self._samples:
            return 0.0
        span = max(now - self._samples[0][0], self.window_s)
        return sum(n for _, n in self._samples) / span

    def exceeded(self, now: float) -> bool:
        return self.rate < UNLIMITED and self.bytes_per_second(now) > self.rate
