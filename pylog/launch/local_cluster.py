"""A development cluster on one machine: a local ZooKeeper and N `pylog broker` processes on loopback.

Owns what `pylog cluster up` runs, and what tests and benchmarks start a cluster with: broker i
gets `broker.id` i, its own data directory and port (a free one unless the launcher says), and `zookeeper.connect` pointing at the
local ZooKeeper (with a chroot, so that several clusters can share one ZooKeeper). Brokers can be
stopped (SIGTERM: controlled shutdown), killed (SIGKILL), frozen (SIGSTOP), thawed and restarted
with the same id, directory and port. A `launcher` may start a broker elsewhere than on loopback (the
network-partition test puts one in its own network namespace). `close()` stops everything it started,
whatever state it is in.
A production cluster runs `pylog broker` per machine against its own ZooKeeper ensemble instead.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable, Mapping

from pylog.launch.process import BrokerProcess
from pylog.launch.local_zookeeper import LocalZooKeeper

# How broker i is launched: (broker id, data directory, settings) -> a process not yet started.
BrokerLauncher = Callable[[int, Path, dict[str, object]], BrokerProcess]


def _loopback_broker(broker_id: int, data_dir: Path, settings: dict[str, object]) -> BrokerProcess:
    return BrokerProcess(data_dir, settings=settings)

# Settings a development cluster needs to be useful on one machine: replicated by default.
DEV_SETTINGS: Mapping[str, object] = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
}


class LocalCluster:
    def __init__(self, root: Path, brokers: int = 3, settings: Mapping[str, object] | None = None,
                 zk_connect: str | None = None, chroot: str = "/pylog",
                 launcher: BrokerLauncher = _loopback_broker, zk_port: int | None = None) -> None:
        self.root = Path(root)
        self.launcher = launcher
        self.zookeeper: LocalZooKeeper | None = None
        self._zk_connect = zk_connect
        self.zk_port = zk_port           # of the ZooKeeper it starts when not given zk_connect (default: free)
        self.chroot = chroot
        self.settings = dict(DEV_SETTINGS if settings is None else settings)
        self.brokers: dict[int, BrokerProcess] = {}
        self.count = brokers

    @property
    def zk_connect(self) -> str:
        """The brokers' zookeeper.connect, chroot included."""
        assert self._zk_connect is not None, "start() first"
        return self._zk_connect + self.chroot

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self, timeout_s: float = 60.0) -> "LocalCluster":
        if self._zk_connect is None:
            self.zookeeper = LocalZooKeeper(self.root / "zookeeper", port=self.zk_port)
            self._zk_connect = self.zookeeper.start()
        self._ensure_chroot()
        for i in range(self.count):
            settings = {**self.settings, "broker.id": i, "zookeeper.connect": self.zk_connect}
            self.brokers[i] = self.launcher(i, self.root / f"broker-{i}", settings)
        for b in self.brokers.values():
            b.start(timeout_s)
        self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float = 60.0, brokers: int | None = None) -> None:
        """Wait until every running broker's Metadata lists `brokers` live brokers (default: all started)."""
        from confluent_kafka.admin import AdminClient

        want = brokers if brokers is not None else sum(1 for b in self.brokers.values() if b.alive())
        deadline = time.monotonic() + timeout_s
        for b in self.brokers.values():
            if not b.alive():
                continue
            client = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
            seen: object = "no answer"
            while True:
                try:
                    listed = client.list_topics(timeout=2).brokers
                    seen = sorted(listed)
                    if len(listed) >= want:
                        break
                except Exception as e:   # noqa: BLE001 - not serving yet
                    seen = f"no answer ({e})"
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker at {b.bootstrap} did not see {want} live brokers within {timeout_s:g}s "
                                       f"(it saw {seen}); the brokers' last log lines:\n{self._log_tails()}")
                time.sleep(0.1)

    def _log_tails(self, lines: int = 15) -> str:
        """Each broker's last log lines with its id and state, for an error that has to explain itself."""
        parts = []
        for i, b in self.brokers.items():
            state = "running" if b.alive() else f"exited {b.proc.returncode}" if b.proc is not None else "not started"
            tail = b.log_text().splitlines()[-lines:]
            parts.append(f"--- broker {i} ({state}):\n" + "\n".join(tail))
        return "\n".join(parts)

    def _ensure_chroot(self) -> None:
        from kazoo.client import KazooClient
        client = KazooClient(hosts=self._zk_connect, timeout=10.0)
        client.start(timeout=10.0)
        try:
            client.ensure_path(self.chroot)
        finally:
            client.stop()
            client.close()

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop_broker(self, broker_id: int, timeout_s: float = 60.0) -> int:
        return self.brokers[broker_id].stop(timeout_s)

    def restart(self, broker_id: int, timeout_s: float = 60.0) -> None:
        b = self.brokers[broker_id]
        if b.alive():
            b.kill()
        b.start(timeout_s)

    def freeze(self, broker_id: int) -> None:
        proc = self.brokers[broker_id].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)

    def thaw(self, broker_id: int) -> None:
        proc = self.brokers[broker_id].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGCONT)

    def restore(self, timeout_s: float = 60.0) -> list[int]:
        """Every broker running again: frozen ones thawed, stopped or killed ones restarted, then ready. A module
        sharing one cluster calls it after each test, so a failed test's kills do not fail the tests after it.
        Returns the brokers it restarted."""
        for b in self.brokers.values():
            if b.alive():
                os.kill(b.proc.pid, signal.SIGCONT)           # type: ignore[union-attr]
        down = sorted(i for i, b in self.brokers.items() if not b.alive())
        for i in down:
            self.brokers[i].start(timeout_s)
        if down:
            self.wait_ready(timeout_s)
        return down

    def close(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                try:
                    os.kill(b.proc.pid, signal.SIGCONT)     # a frozen broker cannot handle SIGTERM
                except OSError:
                    pass
        for b in self.brokers.values():
            b.close()
        if self.zookeeper is not None:
            self.zookeeper.stop()

