"""Integration fixtures: `broker` is one real `pylog broker` process shared by a test module;
`quick_groups_broker` the same with no initial rebalance delay (as Kafka's own test settings), for
modules whose clients join groups one after another; `zk_connect` (on tests/conftest.py's session
`zookeeper`) a connect string with a fresh chroot on it, `zk_clients` a maker of broker sessions
(cluster mode's tests)."""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from broker.cluster.zk_client import ZkClient
from pylog.launch.process import BrokerProcess
from pylog.launch.local_zookeeper import LocalZooKeeper

_chroots = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root: Path = tmp_path_factory.mktemp("broker")
    process = BrokerProcess(root / "data").start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture(scope="module")
def quick_groups_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data",
                            settings={"group.initial.rebalance.delay.ms": 0}).start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture
def zk_connect(zookeeper: LocalZooKeeper) -> str:
    """A connect string with a fresh chroot (created here, as a Kafka operator would)."""
    chroot = f"/t{next(_chroots)}"
    admin = KazooClient(hosts=zookeeper.connect)
    admin.start()
    admin.ensure_path(chroot)
    admin.stop()
    admin.close()
    return zookeeper.connect + chroot


@pytest.fixture
def zk_clients() -> Iterator[Callable[..., ZkClient]]:
    made: list[ZkClient] = []

    def make(connect: str, session_ms: int = 4000) -> ZkClient:
        zk = ZkClient(connect, session_timeout_ms=session_ms)
        zk.start()
        made.append(zk)
        return zk

    yield make
    for zk in made:
        zk.stop()
