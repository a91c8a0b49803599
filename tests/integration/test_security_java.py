"""Apache Kafka's own tools (3.9) against pylog's security, as an operator runs them: every tool is given its
security settings in a file (--command-config, --producer.config, --consumer.config) and talks to the
SASL_SSL listener as a SCRAM-SHA-512 user or to the SSL listener with a client certificate (mTLS).

kafka-topics, the console producer and consumer in a group, kafka-consumer-groups over both listeners;
kafka-configs creating a SCRAM user (AlterUserScramCredentials) who then logs in, and describing users;
wrong passwords and a missing client certificate ending the tool with its normal error within seconds.
One broker with every kind of listener (tests/support/secure_broker); each tool run is one JVM start.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.clients import unique_name
from tests.support.kafka_tools import group_rows, key_partition, run_tool
from tests.support.secure_broker import SecureBroker, start_secure_broker

# A tool that cannot log in must say so and stop within this (JVM start included), not hang.
FAILURE_BOUND_S = 30.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    # no initial rebalance delay: the console consumer's group forms at once (as in Kafka's test settings)
    broker = start_secure_broker(tmp_path_factory.mktemp("secure-java"), {"group.initial.rebalance.delay.ms": 0})
    try:
        yield broker
    finally:
        broker.broker.stop()


def config_file(directory: Path, name: str, props: dict[str, str]) -> str:
    """A client properties file, as passed to --command-config (java.util.Properties syntax)."""
    path = directory / f"{name}.properties"
    # Properties treats '\' as an escape; the values here (paths, JAAS lines) have none, keep it that way
    assert not any("\\" in v for v in props.values()), props
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def ok(tool: str, *args: str, stdin: str | None = None) -> str:
    done = run_tool(tool, *args, stdin=stdin)
    assert done.returncode == 0, f"{tool} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def refused(tool: str, *args: str) -> str:
    """Run a tool expected to fail its login: its stdout + stderr. It must end on its own within
    FAILURE_BOUND_S, with a nonzero exit or an ERROR line."""
    try:
        done = run_tool(tool, *args, timeout=FAILURE_BOUND_S)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"{tool} {' '.join(args)} still running after {FAILURE_BOUND_S} s:\n{out[-2000:]}\n{err[-2000:]}")
    output = done.stdout + done.stderr
    assert done.returncode != 0 or "ERROR" in output, f"{tool} {' '.join(args)} succeeded:\n{output[-3000:]}"
    return output


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_topics_console_producer_consumer_and_consumer_groups_over_scram_and_mtls(
        secure: SecureBroker, listener: str, tmp_path: Path) -> None:
    # SASL_SSL: alice logs in with SCRAM-SHA-512; SSL: alice's client certificate, required by the broker
    config = config_file(tmp_path, listener, secure.java_properties(listener, "SCRAM-SHA-512", "alice"))
    bs = ("--bootstrap-server", secure.bootstrap(listener))
    topic, group = unique_name(f"jsec-{listener.lower()}"), unique_name("jsec-group")

    created = ok("kafka-topics", *bs, "--command-config", config, "--create", "--topic", topic,
                 "--partitions", "2", "--replication-factor", "1")
    assert created.strip().splitlines()[-1] == f"Created topic {topic}."
    listed = ok("kafka-topics", *bs, "--command-config", config, "--list").split()
    assert topic in listed and "__consumer_offsets" in listed

    lines = [(f"key-{i}", f"{listener} value {i}") for i in range(40)]
    produced = run_tool("kafka-console-producer", *bs, "--producer.config", config, "--topic", topic,
                        "--property", "parse.key=true", "--property", "key.separator=:",
                        stdin="".join(f"{k}:{v}\n" for k, v in lines))
    assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced.stderr
    per_partition = {p: [(k, v) for k, v in lines if key_partition(k, 2) == p] for p in range(2)}
    assert all(per_partition.values())       # the keys spread over both partitions

    consumed = run_tool("kafka-console-consumer", *bs, "--consumer.config", config, "--topic", topic,
                        "--group", group, "--from-beginning", "--max-messages", str(len(lines)),
                        "--property", "print.partition=true", "--property", "print.offset=true",
                        "--property", "print.key=true")
    assert consumed.returncode == 0 and f"Processed a total of {len(lines)} messages" in consumed.stderr, (
        consumed.stdout[-2000:] + consumed.stderr[-3000:])
    rows = []
    for line in consumed.stdout.splitlines():
        partition, offset, key, value = line.split("\t")
        rows.append((int(partition.removeprefix("Partition:")), int(offset.removeprefix("Offset:")), key, value))
    # exactly what was produced: each line once, where the Java partitioner put it, in the order it came
    assert sorted(rows) == sorted((p, o, k, v) for p, kvs in per_partition.items() for o, (k, v) in enumerate(kvs))

    # the console consumer committed its position on leaving: the group is at the end of both partitions
    described = ok("kafka-consumer-groups", *bs, "--command-config", config, "--describe", "--group", group)
    offsets = {p: (r["TOPIC"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"])
               for p, r in group_rows(described, group).items()}
    assert offsets == {p: (topic, str(len(kvs)), str(len(kvs)), "0") for p, kvs in per_partition.items()}, described


def test_kafka_configs_creates_a_scram_user_who_then_logs_in(secure: SecureBroker, tmp_path: Path) -> None:
    bs = ("--bootstrap-server", secure.bootstrap("SASL_SSL"))
    admin = config_file(tmp_path, "admin", secure.java_properties("SASL_SSL", "SCRAM-SHA-512", "admin"))
    topic = unique_name("jsec-carol")
    ok("kafka-topics", *bs, "--command-config", admin, "--create", "--topic", topic, "--partitions", "1")

    # AlterUserScramCredentials, as an operator creates a user
    altered = ok("kafka-configs", *bs, "--command-config", admin, "--alter", "--entity-type", "users",
                 "--entity-name", "carol", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret]")
    assert altered.strip() == "Completed updating config for user carol."

    # carol logs in with the password just set (SCRAM-SHA-512: her only mechanism) and sees the topic
    carol = config_file(tmp_path, "carol", secure.java_properties("SASL_SSL", "SCRAM-SHA-512", "carol", "carol-secret"))
    assert topic in ok("kafka-topics", *bs, "--command-config", carol, "--list").split()
    # she has no SCRAM-SHA-256 credential, so a login by it is refused
    carol_256 = config_file(tmp_path, "carol-256",
                            secure.java_properties("SASL_SSL", "SCRAM-SHA-256", "carol", "carol-secret"))
    output = refused("kafka-topics", *bs, "--command-config", carol_256, "--list")
    assert "SaslAuthenticationException" in output and "SCRAM-SHA-256" in output, output[-3000:]

    # kafka-configs --describe --entity-type users: the users' quotas (DescribeClientQuotas), then their
    # SCRAM credentials (DescribeUserScramCredentials), one line a user
    described = ok("kafka-configs", *bs, "--command-config", admin, "--describe", "--entity-type", "users")
    scram = {line for line in described.splitlines() if line.startswith("SCRAM credential configs")}
    assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=8192" in scram, described
    assert "SCRAM credential configs for user-principal 'alice' are " \
           "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096" in scram, described


def test_a_wrong_password_or_no_client_certificate_ends_the_tool_with_its_error_within_seconds(
        secure: SecureBroker, tmp_path: Path) -> None:
    wrong = config_file(tmp_path, "wrong", secure.java_properties("SASL_SSL", "SCRAM-SHA-512", "alice", "not-hers"))
    output = refused("kafka-topics", "--bootstrap-server", secure.bootstrap("SASL_SSL"),
                     "--command-config", wrong, "--list")
    assert ("org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed during authentication "
            "due to invalid credentials with SASL mechanism SCRAM-SHA-512") in output, output[-3000:]

    # mTLS: the SSL listener requires a client certificate. Without one the broker ends the handshake with a TLS
    # alert (certificate_required in TLS 1.3), which the Java client reports as SslAuthenticationException and
    # does not retry; a connection merely dropped would look like a network fault, retried until the tool's timeout.
    no_cert = {k: v for k, v in secure.java_properties("SSL").items() if not k.startswith("ssl.keystore.")}
    assert "ssl.truststore.location" in no_cert and "ssl.keystore.location" not in no_cert
    output = refused("kafka-topics", "--bootstrap-server", secure.bootstrap("SSL"),
                     "--command-config", config_file(tmp_path, "no-cert", no_cert), "--list")
    assert "SslAuthenticationException" in output, output[-3000:]


def test_dynamic_passwords_are_encoded_as_kafkas_password_encoder_encodes_them() -> None:
    """Both ways with Kafka 3.9's own PasswordEncoder (password.encoder.secret's defaults): it decodes what pylog
    stored, and pylog decodes what it encodes."""
    from broker.security.password_encoder import PasswordEncoder
    from tests.support.kafka_tools import java_result
    encoder = PasswordEncoder("encoder-secret")
    result = java_result("password-codec", "encoder-secret", encoder.encode("from pylog"), "from kafka")
    assert result["decoded"] == "from pylog"
    assert encoder.decode(result["encoded"]) == "from kafka"
