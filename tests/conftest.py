"""Shared fixtures: real broker processes on free loopback ports, always stopped at teardown."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.broker_process import BrokerProcess

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers: `broker_factory(settings={...})`. Each gets its own data dir and port."""
    started: list[BrokerProcess] = []

    def make(settings: dict[str, object] | None = None, data_dir: Path | None = None) -> BrokerProcess:
        b = BrokerProcess(data_dir or tmp_path / f"broker{len(started)}", settings=settings)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.close()


@pytest.fixture
def pylog_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()
