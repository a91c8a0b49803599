"""Integration fixtures: `broker` is one real `pylog broker` process shared by a test module;
`quick_groups_broker` the same with no initial rebalance delay (as Kafka's own test settings), for
modules whose clients join groups one after another."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from broker.process import BrokerProcess


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
