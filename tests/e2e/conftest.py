"""Fixtures for the Spark end-to-end tests: ONE local[2] SparkSession for the whole run, one shared
pylog broker, unique topic names, and small producer/reader helpers.

The session has delta-spark (jobs.spark_session.with_delta_spark, the jobs' own set-up): its jars and
extension are static settings of the JVM, so a module that needs Spark's Delta engine cannot get a
second session with it; format("delta") is unused by the other modules.

Tests that need their own broker settings (retention, ...) use `broker_factory` from tests/conftest.py.
"""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pytest
from confluent_kafka import Producer, KafkaException

from pylog.launch.process import ServerProcess
from tests.support.broker_process import BrokerProcess

REPO = Path(__file__).resolve().parents[2]

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Spark's defaults for the tests (conf/spark-defaults.conf) as a properties file, not through SPARK_CONF_DIR: a
# configuration folder on the driver's class path rules out the class archive (jobs/class_archive.py)
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--properties-file {REPO / 'conf' / 'spark-defaults.conf'} pyspark-shell")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from jobs import class_archive, spark_home
    from jobs.spark_session import with_delta_spark

    spark_home.use()            # as build_session: Spark's Python processes import the installed pyspark

    session = with_delta_spark(
        SparkSession.builder.master("local[2]").appName("pylog-e2e")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.driver.extraJavaOptions",
                f"-Dlog4j.configurationFile=file:{REPO / 'conf' / 'log4j2.properties'} {class_archive.jvm_options()}")
    ).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    for q in session.streams.active:
        q.stop()
    session.stop()


@pytest.fixture(scope="session", params=["pylog", "apache-kafka"])
def shared_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One broker for the tests that only need topics of their own: every such test runs against
    pylog's broker and against Apache Kafka itself (the run's one Kafka, tests/conftest.py: the source
    must read any Kafka-protocol broker)."""
    if request.param == "apache-kafka":
        yield request.getfixturevalue("apache_kafka")
        return
    b: ServerProcess = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data").start()
    yield b
    b.close()


@pytest.fixture
def topic_name() -> Callable[[str], str]:
    return lambda prefix="t": f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_records(bootstrap: str, topic: str, records: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    """Produce dicts with value and optional key, partition, timestamp (ms), headers; raise on any failure."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    out: list[Any] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any, i: int) -> None:
        if err is not None:
            errors.append(err)
        else:
            out[i] = (msg.partition(), msg.offset())

    for i, r in enumerate(records):
        out.append(None)
        kwargs = {k: r[k] for k in ("key", "partition", "timestamp", "headers") if r.get(k) is not None}
        while True:
            try:
                p.produce(topic, r["value"], on_delivery=lambda e, m, i=i: report(e, m, i), **kwargs)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(30)
    if left or errors:
        raise KafkaException(errors[0] if errors else f"{left} undelivered")
    return out


def read_pylog(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()
