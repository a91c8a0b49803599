"""Shared fixtures: real broker processes on free loopback ports and one real ZooKeeper for the session
(cluster mode's integration and end-to-end tests), always stopped at teardown."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import settings

from pylog.launch.local_zookeeper import LocalZooKeeper
from pylog.launch.object_store import LocalObjectStore
from tests.support.broker_process import BrokerProcess
from peers.kafka import FUNCTIONAL_JVM, KafkaBroker

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Every process the tests start (brokers, commands, jobs, Spark's Python workers) imports kio, which imports
# hypothesis when it is installed; hypothesis then loads its plugins' entry points, and trio's (installed with
# selenium, for the console's browser tests) imports trio and pytest: 0.18 s of CPU per process, thousands of
# processes per run. No test uses a hypothesis plugin.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")

# No per-example deadline (hypothesis' default is 200 ms): on a busy 2-core machine a plain example took
# 446 ms and failed tests/unit/test_sparklog_planner.py; the properties, not the timings, are the test.
# Each test's own settings (max_examples, ...) still apply.
settings.register_profile("pylog", deadline=None)
settings.load_profile("pylog")

# A skip can hide a regression. Every reason a test may skip for is listed here and reviewed; on a
# machine where `make test` installed everything, the list is empty. Any other skip fails the run.
ALLOWED_SKIP_REASONS: tuple[str, ...] = ()
_unexpected_skips: list[str] = []


# seconds each of the longest files took in `make test` (session 15's fresh clone, 2026-11-27 01:05, --durations):
# pytest-xdist hands files out in collection order (`--no-loadscope-reorder`), so the longest go first and none
# starts last
FILE_SECONDS = {"tests/e2e/test_delta_spark.py": 510, "tests/e2e/test_jobs_exactly_once.py": 330,
                "tests/e2e/test_readme_examples.py": 295, "tests/e2e/test_exactly_once_invariant.py": 245,
                "tests/e2e/test_jobs_user_actions.py": 240, "tests/e2e/test_jobs_stream_to_topic.py": 170,
                "tests/e2e/test_first_contact.py": 165, "tests/e2e/test_spark_streaming.py": 135,
                "tests/integration/test_cluster_replication.py": 115, "tests/e2e/test_spark_cluster.py": 105,
                "tests/integration/test_kafka_cli_tools.py": 90, "tests/e2e/test_jobs_leader_change.py": 80,
                "tests/e2e/test_exactly_once_topic_sink.py": 50, "tests/e2e/test_spark_batch.py": 40,
                "tests/e2e/test_demo.py": 40, "tests/integration/test_cluster_operations.py": 60,
                "tests/e2e/test_docs_security.py": 35, "tests/e2e/test_exactly_once_model.py": 30,
                "tests/integration/test_security_clients.py": 35,
                "tests/conformance/test_tiered_storage_vs_kafka.py": 40,   # its own Kafka with tiered storage
                "tests/conformance/test_reassignment_vs_kafka.py": 35,     # three Kafka brokers, then three pylog
                "tests/e2e/test_console_browser.py": 15,   # alone: 13-15 s (a broker, two consoles, chromium)
                "tests/integration/test_tiered_consumers.py": 45}   # alone: 40 s; collected late, it ended the run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (FILE_SECONDS), then the other deliberately slow cases (marked `slow`), then the
    files that need MinIO (marked `object_store`: `make test` builds it in the background meanwhile), then the
    rest, each file's cases in their usual order: long cases started early leave no long tail at the end."""
    def group(item: pytest.Item) -> int:
        if item.get_closest_marker("object_store") is not None:
            return 1
        return 0 if item.get_closest_marker("slow") is not None else 2

    items.sort(key=lambda item: (-FILE_SECONDS.get(item.nodeid.split("::")[0], 0), group(item)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not any(allowed in reason for allowed in ALLOWED_SKIP_REASONS):
            _unexpected_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _unexpected_skips:
        print("\nskipped for a reason not on tests/conftest.py's ALLOWED_SKIP_REASONS:\n  "
              + "\n  ".join(_unexpected_skips))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Apache Kafka broker for the whole run (starting one takes two JVMs and several seconds): the
    conformance peer, the Spark tests' second broker and the jobs' Kafka run share it. Its users create
    topics of their own, and put back any dynamic setting they change."""
    for attempt in range(3):
        # transactions past their timeout are aborted within a second (Kafka checks every 10 s by default)
        kafka = KafkaBroker(tmp_path_factory.mktemp("apache-kafka") / "kafka",
                            settings={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000},
                            jvm=FUNCTIONAL_JVM)
        try:
            kafka.start()
            break
        except RuntimeError as e:
            # its ports are picked free a few seconds before Kafka binds them (after formatting its storage);
            # on a busy machine another process may take one first: new ports, once or twice
            if "Address already in use" not in str(e) or attempt == 2:
                raise
    try:
        yield kafka
    finally:
        kafka.close()


@pytest.fixture(scope="session")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalObjectStore]:
    """One real S3 server (MinIO) per test process, with the bucket `tables`; tests use their own prefixes in it.
    `make test` builds MinIO in the background while the suite starts: this waits for that build."""
    store = LocalObjectStore(tmp_path_factory.mktemp("minio") / "data").start()
    store.create_bucket("tables")
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture
def s3_env(object_store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch) -> LocalObjectStore:
    """The standard AWS variables pointed at the test store, as a user's shell would set them."""
    for key, value in object_store.env().items():
        monkeypatch.setenv(key, value)
    return object_store


@pytest.fixture
def pylog_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    zk = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()
