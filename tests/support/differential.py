"""Test support: send the same request to pylog and to Apache Kafka, and compare the answers.

`Pair` holds one raw connection to each broker (tests/support/wire.py). `Pair.both(request)` sends a
kio request entity to both and returns the two decoded responses; `Pair.same(request)` also asserts
they agree. Responses are compared as nested plain values (`shape`), field by field, leaving out what
must differ between two brokers: node ids, host and port, cluster ids, topic ids, throttle times,
log-append timestamps and the wording of error messages (their presence still counts where the
caller asks). `differences` names each differing field by its path, so a failure says exactly where
the two brokers part.
"""
from __future__ import annotations

import dataclasses
import enum
import time
import uuid
from typing import Any, Callable, Iterable

from tests.support.wire import WireClient

# Fields whose values legitimately differ between two brokers (compared nowhere).
IGNORED = frozenset({
    "throttle_time", "throttle_time_ms", "node_id", "leader_id", "host", "port", "rack", "cluster_id",
    "controller_id", "topic_id", "error_message", "log_append_time", "log_append_time_ms", "brokers",
    "cluster_authorized_operations", "session_id", "coordinator_key", "member_id", "leader",
    "batch_index_error_message", "supported_features", "finalized_features", "finalized_features_epoch",
    "zk_migration_ready", "documentation", "config_type", "leader_epoch", "current_leader",
    "node_endpoints", "log_dir", "replica_nodes", "isr_nodes", "offline_replicas",
})


def shape(value: Any, ignore: frozenset[str] = IGNORED) -> Any:
    """A response as plain nested values, without the fields in `ignore`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: shape(getattr(value, f.name), ignore) for f in dataclasses.fields(value)
                if f.name not in ignore}
    if isinstance(value, (list, tuple)):
        items = [shape(v, ignore) for v in value]
        if items and all(isinstance(v, dict) and "partition_index" in v for v in items):
            items.sort(key=lambda v: v["partition_index"])   # partition order carries no meaning
        elif items and all(isinstance(v, dict) and "name" in v and "value" in v for v in items):
            items.sort(key=lambda v: v["name"])              # nor does the order of config entries
        return items
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where `a` (pylog) and `b` (Kafka) differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(a.keys() | b.keys()):
            out += differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} entries in pylog, {len(b)} in Kafka: {a!r} / {b!r}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: pylog {a!r}, Kafka {b!r}"]


class Pair:
    """One connection to pylog and one to Apache Kafka (reopened if a broker closes it)."""

    def __init__(self, pylog_port: int, kafka_port: int) -> None:
        self.ports = {"pylog": pylog_port, "kafka": kafka_port}
        self.clients: dict[str, WireClient] = {}

    def _client(self, name: str) -> WireClient:
        if name not in self.clients:
            self.clients[name] = WireClient("127.0.0.1", self.ports[name], timeout=30)
        return self.clients[name]

    def send(self, name: str, request: Any) -> Any:
        """The decoded response of one broker (None when it closed the connection)."""
        resp = self._client(name).request(request)
        if resp is None:
            self.clients.pop(name).close()
        return resp

    def both(self, request: Any) -> tuple[Any, Any]:
        return self.send("pylog", request), self.send("kafka", request)

    def same(self, request: Any, *, ignore: Iterable[str] = ()) -> tuple[Any, Any]:
        """Send `request` to both; assert the responses agree apart from IGNORED and `ignore`."""
        p, k = self.both(request)
        skip = IGNORED | frozenset(ignore)
        diff = differences(shape(p, skip), shape(k, skip))
        assert not diff, f"{type(request).__name__} v{request.__version__}: pylog and Kafka differ:\n  " + "\n  ".join(diff)
        return p, k

    def wait_until(self, request: Any, ready: Callable[[Any], bool], timeout: float = 30.0) -> None:
        """Repeat `request` on both brokers until `ready(response)` holds for each (e.g. leaders elected)."""
        deadline = time.monotonic() + timeout
        for name in self.ports:
            while not ready(self.send(name, request)):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} not ready for {type(request).__name__} after {timeout}s")
                time.sleep(0.05)

    def close(self) -> None:
        for c in self.clients.values():
            c.close()
        self.clients.clear()
