"""ACLs with real clients: `pylog acls` grants and revokes, librdkafka clients over SASL see Kafka's errors
(TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED), topics they may not describe are not listed, a
revoked grant takes effect mid-session, and the ACLs survive a restart. The broker is
tests/support/secure_broker's with authorizer.class.name set; its loopback PLAINTEXT listener is the
operator's (User:ANONYMOUS, a super user, as a Kafka operator would configure a PLAINTEXT listener)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.secure_broker import SecureBroker, start_secure_broker

REPO = Path(__file__).resolve().parents[2]
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:admin;User:ANONYMOUS"}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = start_secure_broker(tmp_path_factory.mktemp("acls"), AUTHORIZER)
    try:
        yield broker
    finally:
        broker.broker.stop()


def pylog(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pylog", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _produce_errors(conf: dict, topic: str, n: int = 3) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    producer = Producer({**conf, "log_level": 0, "message.timeout.ms": 10000})
    for i in range(n):
        producer.produce(topic, f"{i}".encode(), on_delivery=lambda err, msg: results.append(err))
    producer.flush(15)
    return results


def test_grants_revocations_and_denials_reach_librdkafka_as_kafkas_errors(secure: SecureBroker) -> None:
    admin = AdminClient({"bootstrap.servers": secure.plaintext})
    names = {k: f"{k}-{uuid.uuid4().hex[:6]}" for k in ("orders", "secret", "group")}
    for t in (names["orders"], names["secret"]):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(20)
    base = ["--bootstrap-server", secure.plaintext]
    pylog("acls", "add", *base, "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
          "--topic", names["orders"])
    pylog("acls", "add", *base, "--allow-principal", "User:alice", "--operation", "Read", "--group", names["group"])
    listed = pylog("acls", "list", *base, "--topic", names["orders"])
    assert "principal=User:alice" in listed and "operation=READ" in listed and "operation=WRITE" in listed

    alice = secure.client_config("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice")
    assert _produce_errors(alice, names["orders"]) == [None, None, None]
    secret = _produce_errors(alice, names["secret"], 1)
    assert [e.code() if e else None for e in secret] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    visible = set(AdminClient({**alice, "log_level": 0}).list_topics(timeout=10).topics)
    assert names["orders"] in visible and names["secret"] not in visible        # READ implies DESCRIBE

    consumer = Consumer({**alice, "group.id": names["group"], "auto.offset.reset": "earliest", "log_level": 0})
    consumer.subscribe([names["orders"]])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == [b"0", b"1", b"2"]

    other_group = Consumer({**alice, "group.id": "not-granted", "log_level": 0})
    other_group.subscribe([names["orders"]])
    errors = []
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        m = other_group.poll(0.5)
        if m is not None and m.error():
            errors.append(m.error().code())
    other_group.close()
    assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]

    bob = secure.client_config("SASL_PLAINTEXT", "PLAIN", "bob")             # no ACL names him
    assert [e.code() if e else None for e in _produce_errors(bob, names["orders"], 1)] == \
        [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    # a revoked grant holds from the next request of an open session
    producer = Producer({**alice, "log_level": 0, "message.timeout.ms": 10000})
    results: list[KafkaError | None] = []
    producer.produce(names["orders"], b"before", on_delivery=lambda err, msg: results.append(err))
    producer.flush(15)
    pylog("acls", "remove", *base, "--allow-principal", "User:alice", "--operation", "Write", "--topic", names["orders"])
    producer.produce(names["orders"], b"after", on_delivery=lambda err, msg: results.append(err))
    started = time.monotonic()
    producer.flush(15)
    assert results[0] is None and results[1] is not None
    assert results[1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and time.monotonic() - started < 5
    assert "operation=WRITE" not in pylog("acls", "list", *base, "--topic", names["orders"])


def test_acls_survive_a_restart_and_need_an_authorizer(secure: SecureBroker, tmp_path: Path) -> None:
    base = ["--bootstrap-server", secure.plaintext]
    pylog("acls", "add", *base, "--allow-principal", "User:carol", "--operation", "Describe", "--topic", "kept-",
          "--resource-pattern-type", "prefixed")
    secure.broker.stop()
    secure.broker.start()
    listed = pylog("acls", "list", *base, "--allow-principal", "User:carol")
    assert "name=kept-, patternType=PREFIXED" in listed and "principal=User:carol" in listed
    stored = (secure.dir / "data" / "acls.json").read_text()
    assert '"/kafka-acl-extended/prefixed/Topic/kept-"' in stored and '"operation": "Describe"' in stored
    # a broker without authorizer.class.name answers SECURITY_DISABLED, which the tool reports in one line
    from tests.support.broker_process import BrokerProcess
    plain = BrokerProcess(tmp_path / "plain").start()
    try:
        done = subprocess.run([sys.executable, "-m", "pylog", "acls", "list", "--bootstrap-server", plain.bootstrap],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "SECURITY_DISABLED" in done.stderr and len(done.stderr.splitlines()) <= 2
    finally:
        plain.stop()
