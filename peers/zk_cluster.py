"""A ZooKeeper-mode broker cluster for tests and benchmarks: one local ZooKeeper and brokers 1..N.

Owns every process it starts: the ZooKeeper (pylog/launch/local_zookeeper.py, the Debian package) and
the brokers, which a factory builds from a work directory and their settings (Apache Kafka's
`peers.kafka.KafkaZkBroker`, or pylog's `pylog.launch.process.BrokerProcess`), all on loopback ports.
`close()` kills them all, and runs at interpreter exit too if the caller never reached it (start
failures included). Offers what a failover test needs: stop (SIGTERM) / kill (SIGKILL) / restart one
broker, and a partition's leader, replicas and ISR, or the controller, from Metadata answered by one
chosen broker (confluent-kafka's AdminClient). It must never decide anything about the cluster's
state itself: whatever it reports comes from the brokers. Never imported by the product.
"""
from __future__ import annotations

import atexit
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from confluent_kafka.admin import AdminClient

from pylog.launch.process import ServerProcess
from pylog.launch.local_zookeeper import LocalZooKeeper

if TYPE_CHECKING:   # the public names are re-exported without __all__, which strict mypy refuses
    from confluent_kafka.admin._metadata import ClusterMetadata, PartitionMetadata

log = logging.getLogger(__name__)

BrokerFactory = Callable[[Path, dict[str, object]], ServerProcess]
"""Builds one (unstarted) broker from its work directory and its settings (Kafka's names)."""


class ZkCluster:
    """`size` brokers with ids 1..size against a fresh ZooKeeper under `workdir`; `settings` apply to every broker.

    Every broker gets `zookeeper.connect` (with `chroot`), `broker.id`, `zookeeper.session.timeout.ms` and,
    unless `settings` say otherwise, replication factors of min(size, 3) and `min.insync.replicas` 1.
    """

    def __init__(self, workdir: Path, make_broker: BrokerFactory, size: int = 3,
                 settings: dict[str, object] | None = None, session_timeout_ms: int = 6000,
                 chroot: str = "/cluster") -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one broker, not {size}")
        self.workdir = Path(workdir)
        self.make_broker = make_broker
        self.size = size
        self.settings = dict(settings or {})
        self.session_timeout_ms = session_timeout_ms
        self.chroot = chroot
        # ZooKeeper grants sessions of 2 to 20 ticks: keep the asked-for timeout inside that window
        self.zookeeper = LocalZooKeeper(self.workdir / "zookeeper",
                                        tick_ms=max(500, math.ceil(session_timeout_ms / 20)))
        self.brokers: dict[int, ServerProcess] = {}
        self._admins: dict[int, AdminClient] = {}

    # -- lifecycle -------------------------------------------------------------------------------

    def broker_settings(self, broker_id: int) -> dict[str, object]:
        replicas = min(self.size, 3)
        return {"zookeeper.connect": f"{self.zookeeper.connect}{self.chroot}", "broker.id": broker_id,
                "zookeeper.session.timeout.ms": self.session_timeout_ms,
                "default.replication.factor": replicas, "offsets.topic.replication.factor": replicas,
                "min.insync.replicas": 1, **self.settings}

    def start(self, timeout: float = 120.0) -> "ZkCluster":
        """Start ZooKeeper and every broker; return once each broker's Metadata lists all of them."""
        atexit.register(self.close)
        try:
            self.zookeeper.start()
            for broker_id in range(1, self.size + 1):
                self.brokers[broker_id] = self.make_broker(self.workdir / f"broker-{broker_id}",
                                                           self.broker_settings(broker_id))
            with ThreadPoolExecutor(self.size) as pool:   # JVMs start faster side by side
                list(pool.map(lambda b: b.start(timeout), self.brokers.values()))
            for broker_id in self.brokers:
                self.wait_ready(broker_id, timeout)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill every broker (SIGKILL: the data is thrown away) and stop ZooKeeper; safe to call twice."""
        for broker in self.brokers.values():
            broker.kill()
        self._admins.clear()
        self.zookeeper.stop()
        atexit.unregister(self.close)

    def __enter__(self) -> "ZkCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one broker ------------------------------------------------------------------------------

    def broker(self, broker_id: int) -> ServerProcess:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id} in this cluster (ids {sorted(self.brokers)})") from None

    def alive(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.alive()]

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers of the brokers that are running."""
        return ",".join(self.brokers[i].bootstrap for i in self.alive())

    def kill(self, broker_id: int) -> None:
        """SIGKILL: no controlled shutdown; the cluster notices when its ZooKeeper session expires."""
        self.broker(broker_id).kill()
        self._admins.pop(broker_id, None)

    def terminate(self, broker_id: int) -> None:
        """SIGTERM without waiting (a Kafka broker then runs its controlled shutdown); see `wait_exit`."""
        proc = self.broker(broker_id).proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
        self._admins.pop(broker_id, None)

    def wait_exit(self, broker_id: int, timeout: float = 60.0) -> int:
        """Wait for a broker's process to end (SIGKILL after `timeout`); returns its exit code."""
        broker = self.broker(broker_id)
        if broker.proc is None:
            return 0
        try:
            return broker.proc.wait(timeout)
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it hangs, end it
            broker.kill()
            raise

    def stop(self, broker_id: int, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        self.terminate(broker_id)
        return self.wait_exit(broker_id, timeout)

    def restart(self, broker_id: int, timeout: float = 120.0) -> None:
        """Start a stopped or killed broker again on its port and data; return once it serves Metadata with
        every running broker (after a SIGKILL that can take up to the old session's timeout)."""
        broker = self.broker(broker_id)
        if broker.alive():
            raise RuntimeError(f"broker {broker_id} is still running (pid {broker.proc.pid if broker.proc else '?'})")
        broker.start(timeout)
        self.wait_ready(broker_id, timeout)

    # -- metadata --------------------------------------------------------------------------------

    def admin(self, broker_id: int) -> AdminClient:
        """An AdminClient bootstrapped at that one broker, so its Metadata comes from that broker's cache."""
        if broker_id not in self._admins:
            self._admins[broker_id] = AdminClient({"bootstrap.servers": self.broker(broker_id).bootstrap,
                                                   "log_level": 0})
        return self._admins[broker_id]

    def metadata(self, topic: str | None = None, via: int | None = None, timeout: float = 5.0) -> ClusterMetadata:
        """Metadata from broker `via` (default: the first running one)."""
        if via is None:
            running = self.alive()
            if not running:
                raise RuntimeError("no broker of the cluster is running")
            via = running[0]
        md: ClusterMetadata = self.admin(via).list_topics(topic, timeout=timeout)
        return md

    def wait_ready(self, broker_id: int, timeout: float = 120.0) -> None:
        """Until broker `broker_id` answers Metadata listing every running broker (itself included)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            expected = set(self.alive())
            try:
                listed = set(self.metadata(via=broker_id, timeout=2.0).brokers)
                if expected <= listed:
                    return
                last = f"it lists brokers {sorted(listed)}, running are {sorted(expected)}"
            except Exception as e:  # noqa: BLE001 - KafkaException while it starts: try again
                last = e
            if not self.broker(broker_id).alive():
                raise RuntimeError(f"broker {broker_id} exited while starting; its log ends:\n"
                                   f"{self.broker(broker_id).log_text()[-2000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"broker {broker_id} not ready after {timeout:.0f}s: {last}")

    def partition(self, topic: str, partition: int = 0, via: int | None = None) -> PartitionMetadata | None:
        """The partition's metadata (leader, replicas, isrs), or None while the topic or partition is unknown."""
        t = self.metadata(topic, via).topics.get(topic)
        if t is None or t.error is not None:
            return None
        p: PartitionMetadata | None = t.partitions.get(partition)
        return p

    def leader(self, topic: str, partition: int = 0, via: int | None = None) -> int:
        """The partition's leader id as broker `via` sees it; -1 while it has none (or is unknown)."""
        p = self.partition(topic, partition, via)
        return -1 if p is None else int(p.leader)

    def controller(self, via: int | None = None) -> int:
        return int(self.metadata(via=via).controller_id)

    def wait_in_sync(self, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, Any]:
        """Until every partition of `topic` has a leader and all its replicas in the ISR; returns the metadata."""
        deadline = time.monotonic() + timeout
        while True:
            found = {p: self.partition(topic, p) for p in range(partitions)}
            if all(m is not None and m.leader >= 0 and set(m.isrs) == set(m.replicas) for m in found.values()):
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not every replica in sync after {timeout:.0f}s: "
                                   + ", ".join(f"p{p} leader {m.leader} replicas {m.replicas} isr {m.isrs}"
                                               for p, m in found.items() if m is not None))
            time.sleep(0.1)
