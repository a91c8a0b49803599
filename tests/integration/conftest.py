"""Integration fixtures: `broker` is one real `pylog broker` process shared by a test module."""
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
