"""The Spark source, the exactly-once sink and the stream_to_delta job over SASL_SSL and mTLS, on the native path,
configured with Spark's Kafka option names (kafka.security.protocol, kafka.sasl.jaas.config, kafka.ssl.*), as a
Spark user's job already is. Checks go through the broker's loopback PLAINTEXT listener."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, Producer

from kafka_protocol.security.jaas import client_entry
from tests.support.jobs import assert_exactly_once, finish, run_job, stream_settings
from tests.support.secure_broker import USERS, SecureBroker, start_secure_broker


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = start_secure_broker(tmp_path_factory.mktemp("spark-secure"))
    try:
        yield broker
    finally:
        broker.broker.stop()


def spark_options(secure: SecureBroker, listener: str = "SASL_SSL") -> dict[str, str]:
    """What a Spark user writes for the Java connector: Java client names behind `kafka.`."""
    opts = {"kafka.bootstrap.servers": secure.bootstrap(listener), "kafka.security.protocol": listener,
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(secure.dir / "ca.pem")}
    if listener == "SASL_SSL":
        opts.update({"kafka.sasl.mechanism": "SCRAM-SHA-512",
                     "kafka.sasl.jaas.config": client_entry("SCRAM-SHA-512", "alice", USERS["alice"])})
    else:
        opts.update({"kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": str(secure.client_cert)})
    return opts


def _fill(secure: SecureBroker, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": secure.plaintext, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=json.dumps({"event_id": str(i), "user_id": "u", "type": "t",
                                                                    "amount": 1.0, "ts": i}).encode(), partition=i % 2)
    assert p.flush(30) == 0


def _create(secure: SecureBroker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": secure.plaintext})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)


def test_a_batch_read_and_an_exactly_once_write_over_sasl_ssl_and_mtls_on_the_native_path(
        spark: Any, secure: SecureBroker) -> None:
    _create(secure, "secure-in")
    _fill(secure, "secure-in", 5000)
    for listener in ("SASL_SSL", "SSL"):
        df = (spark.read.format("pylog").options(**spark_options(secure, listener))
              .option("subscribe", "secure-in").option("fetcher", "native").load())
        rows = df.selectExpr("CAST(value AS STRING) AS v").collect()
        assert sorted(json.loads(r["v"])["event_id"] for r in rows) == sorted(str(i) for i in range(5000)), listener
    _create(secure, "secure-out")
    (spark.read.format("pylog").options(**spark_options(secure)).option("subscribe", "secure-in").load()
     .selectExpr("key", "value").write.format("pylog").options(**spark_options(secure))
     .option("topic", "secure-out").option("deliveryGuarantee", "exactly-once").mode("append").save())
    consumer = Consumer({"bootstrap.servers": secure.plaintext, "group.id": "secure-check",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["secure-out"])
    got: list[bytes] = []
    for _ in range(200):
        got += [m.value() for m in consumer.consume(1000, 0.2) if not m.error()]
        if len(got) >= 5000:
            break
    consumer.close()
    assert sorted(json.loads(v)["event_id"] for v in got) == sorted(str(i) for i in range(5000))


def test_a_wrong_password_stops_a_spark_read_with_one_line_naming_the_setting(spark: Any, secure: SecureBroker) -> None:
    import time
    opts = {**spark_options(secure), "kafka.sasl.jaas.config": client_entry("SCRAM-SHA-512", "alice", "wrong")}
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        spark.read.format("pylog").options(**opts).option("subscribe", "secure-in").load().count()
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert "cannot log in to the Kafka broker" in message and "invalid credentials" in message, message[-2000:]
    assert "check kafka.sasl.jaas.config" in message and len(message.splitlines()) < 8, message[-2000:]


def test_the_stream_to_delta_job_over_sasl_ssl_is_exactly_once_and_mirrors_its_group(secure: SecureBroker,
                                                                                       tmp_path: Path) -> None:
    _create(secure, "events")
    _fill(secure, "events", 3000)
    settings = stream_settings(secure.bootstrap("SASL_SSL"), tmp_path, "secure-app", 1000,
                               **{"group.mirror": "secure-mirror",
                                  **{f"source.{k}": v for k, v in spark_options(secure).items()
                                     if k != "kafka.bootstrap.servers"}})
    finish(run_job("stream_to_delta", settings))
    assert_exactly_once(tmp_path / "table", "secure-app", secure.plaintext, "events", 3000)
    from confluent_kafka import TopicPartition
    consumer = Consumer({"bootstrap.servers": secure.plaintext, "group.id": "secure-mirror"})
    committed = consumer.committed([TopicPartition("events", p) for p in (0, 1)], timeout=10)
    consumer.close()
    assert sum(tp.offset for tp in committed) == 3000
