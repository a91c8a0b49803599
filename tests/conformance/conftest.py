"""Conformance fixtures: one pylog broker and one Apache Kafka 3.9 broker for the whole directory.

Both start once (Kafka takes a few seconds; it is the run's one Kafka, tests/conftest.py), with the settings that make their answers comparable:
no automatic topic creation (Kafka's test peer has it off), and four __consumer_offsets partitions
on Kafka (only the coordinator's node id differs, which the comparison ignores).
"""
from __future__ import annotations

from typing import Iterator

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from pylog.launch.process import BrokerProcess
from tests.support.differential import Pair
from peers.kafka import KafkaBroker


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory,
            apache_kafka: KafkaBroker) -> Iterator[tuple[BrokerProcess, KafkaBroker]]:
    pylog = BrokerProcess(tmp_path_factory.mktemp("conformance") / "pylog",
                          settings={"auto.create.topics.enable": False, "group.initial.rebalance.delay.ms": 0,
                                    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    pylog.start()
    yield pylog, apache_kafka
    pylog.close()


@pytest.fixture(scope="session")
def coordinators_ready(brokers: tuple[BrokerProcess, KafkaBroker]) -> None:
    """Kafka creates __consumer_offsets on the first FindCoordinator and answers NOT_COORDINATOR (or
    COORDINATOR_NOT_AVAILABLE) until it is loaded; wait for that once, on both."""
    p = Pair(brokers[0].port, brokers[1].port)
    names = tuple(f"warm-up-{i}" for i in range(32))      # groups on every __consumer_offsets partition
    loading = {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}
    try:
        p.wait_until(FindCoordinatorRequest(key_type=0, coordinator_keys=names),
                     lambda r: r is not None and all(c.error_code == ErrorCode.none for c in r.coordinators), timeout=60)
        p.wait_until(DescribeGroupsRequest(groups=names, include_authorized_operations=False),
                     lambda r: r is not None and not any(g.error_code in loading for g in r.groups), timeout=60)
    finally:
        p.close()


@pytest.fixture
def pair(brokers: tuple[BrokerProcess, KafkaBroker], coordinators_ready: None) -> Iterator[Pair]:
    p = Pair(brokers[0].port, brokers[1].port)
    yield p
    p.close()
