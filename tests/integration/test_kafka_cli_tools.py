"""Apache Kafka's own command-line tools (3.9, run from the fetched jars) against a real pylog broker.

kafka-topics, kafka-configs, the console producer and consumer, kafka-consumer-groups and
kafka-producer-perf-test, as an operator would run them (tests/support/kafka_tools.TOOLS names the
class behind each bin/*.sh script). Every test checks what the broker did, read back through
another tool or client, not only the exit code.
"""
from __future__ import annotations

import re
import subprocess
import time
from typing import Callable

import pytest

from pylog.launch.process import BrokerProcess
from tests.support.clients import create_topic, produce, unique_name
from tests.support.kafka_tools import group_rows, key_partition, run_tool, start_tool


@pytest.fixture(scope="module")
def broker(quick_groups_broker: BrokerProcess) -> BrokerProcess:
    return quick_groups_broker      # no initial rebalance delay: each group test saves 3 s


def _name(prefix: str) -> str:
    return unique_name(prefix)


def tool(name: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_tool(name, *args, stdin=stdin)


def ok(name: str, *args: str, stdin: str | None = None) -> str:
    done = tool(name, *args, stdin=stdin)
    assert done.returncode == 0, f"{name} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def failing(name: str, *args: str) -> str:
    done = tool(name, *args)
    assert done.returncode != 0, f"{name} {' '.join(args)} succeeded:\n{done.stdout}"
    return done.stdout + done.stderr


def wait_until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


def end_offsets(broker: BrokerProcess, topic: str, time_spec: str = "-1") -> dict[int, int]:
    """kafka-get-offsets: `topic:partition:offset` lines (-1 latest, -2 earliest)."""
    out = ok("kafka-get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", time_spec)
    return {int(p): int(o) for t, p, o in (line.rsplit(":", 2) for line in out.split()) if t == topic}


def describe_topic(broker: BrokerProcess, topic: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    out = ok("kafka-topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic)
    lines = [line.strip() for line in out.strip().splitlines()]

    def fields(line: str) -> dict[str, str]:
        return {k: v.strip() for k, v in (f.split(":", 1) for f in line.split("\t") if ":" in f)}

    return fields(lines[0]), [fields(line) for line in lines[1:]]


def test_kafka_topics_create_describe_list_alter_delete(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic = _name("kt")
    out = ok("kafka-topics", *bs, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
             "--config", "retention.ms=60000")
    assert out.strip() == f"Created topic {topic}."

    header, partitions = describe_topic(broker, topic)
    assert header["Topic"] == topic and header["PartitionCount"] == "2" and header["ReplicationFactor"] == "1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", header["TopicId"]) and header["TopicId"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert header["Configs"] == "retention.ms=60000"
    assert [p["Partition"] for p in partitions] == ["0", "1"]
    leader = partitions[0]["Leader"]
    assert leader.isdigit() and all(p["Leader"] == p["Replicas"] == p["Isr"] == leader for p in partitions)

    again = failing("kafka-topics", *bs, "--create", "--topic", topic, "--partitions", "1")
    assert f"Topic '{topic}' already exists" in again
    ok("kafka-topics", *bs, "--create", "--if-not-exists", "--topic", topic, "--partitions", "1")

    listed = ok("kafka-topics", *bs, "--list").split()
    assert topic in listed and "__consumer_offsets" in listed  # pylog creates it at start (Kafka: at first use)
    assert "__consumer_offsets" not in ok("kafka-topics", *bs, "--list", "--exclude-internal").split()

    ok("kafka-topics", *bs, "--alter", "--topic", topic, "--partitions", "4")
    header, partitions = describe_topic(broker, topic)
    assert header["PartitionCount"] == "4" and [p["Partition"] for p in partitions] == ["0", "1", "2", "3"]
    assert all(p["Leader"] == leader for p in partitions)
    shrink = failing("kafka-topics", *bs, "--alter", "--topic", topic, "--partitions", "3")
    assert "InvalidPartitionsException" in shrink and "4 partitions" in shrink
    produce(broker.bootstrap, topic, [b"x"], partition=3)  # the new partitions take records
    assert end_offsets(broker, topic) == {0: 0, 1: 0, 2: 0, 3: 1}

    ok("kafka-topics", *bs, "--delete", "--topic", topic)
    wait_until(lambda: topic not in ok("kafka-topics", *bs, "--list").split(), "the topic is gone")
    assert "does not exist" in failing("kafka-topics", *bs, "--describe", "--topic", topic)


def _dynamic_configs(broker: BrokerProcess, topic: str, *extra: str) -> dict[str, str]:
    out = ok("kafka-configs", "--bootstrap-server", broker.bootstrap, "--describe", "--entity-type", "topics",
             "--entity-name", topic, *extra)
    head, *lines = out.strip().splitlines()
    assert head in (f"Dynamic configs for topic {topic} are:", f"All configs for topic {topic} are:")
    return dict(line.strip().split(" ", 1)[0].split("=", 1) for line in lines)


def test_kafka_configs_alter_and_describe_a_topic(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic = _name("kc")
    create_topic(broker.bootstrap, topic, partitions=1)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    assert _dynamic_configs(broker, topic) == {}

    out = ok("kafka-configs", *bs, "--alter", *entity, "--add-config", "retention.ms=12345,max.message.bytes=20000")
    assert out.strip() == f"Completed updating config for topic {topic}."
    assert _dynamic_configs(broker, topic) == {"retention.ms": "12345", "max.message.bytes": "20000"}
    every = _dynamic_configs(broker, topic, "--all")
    assert every["retention.ms"] == "12345" and every["max.message.bytes"] == "20000"
    assert every["cleanup.policy"] == "delete" and every["segment.bytes"] == "1073741824"

    # The new limit holds: a 30 000-byte record is refused, a small one is not. (--sync: one record
    # per batch; the client would otherwise keep splitting a two-record batch it cannot split.)
    big = tool("kafka-console-producer", *bs, "--topic", topic, "--sync", stdin="x" * 30000 + "\n")
    assert big.returncode == 1 and "RecordTooLargeException" in big.stderr
    ok("kafka-console-producer", *bs, "--topic", topic, "--sync", stdin="small\n")
    assert end_offsets(broker, topic) == {0: 1}

    ok("kafka-configs", *bs, "--alter", *entity, "--delete-config", "retention.ms")
    assert _dynamic_configs(broker, topic) == {"max.message.bytes": "20000"}
    assert _dynamic_configs(broker, topic, "--all")["retention.ms"] == "604800000"
    unknown = failing("kafka-configs", *bs, "--alter", *entity, "--add-config", "no.such.config=1")
    assert "InvalidConfigurationException" in unknown
    assert _dynamic_configs(broker, topic) == {"max.message.bytes": "20000"}


# Topic configs Kafka 3.9 accepts and lists (kafka-configs --describe --all) that pylog does not know.
KAFKA_TOPIC_CONFIGS = {
    "min.compaction.lag.ms": "1000",
    "max.compaction.lag.ms": "86400000",
    "message.timestamp.before.max.ms": "3600000",
    "message.timestamp.after.max.ms": "3600000",
    "unclean.leader.election.enable": "false",
    "preallocate": "false",
    "compression.zstd.level": "5",
    "message.downconversion.enable": "true",
}


def test_kafka_configs_sets_kafka_topic_configs(broker: BrokerProcess) -> None:
    topic = _name("kc-all")
    create_topic(broker.bootstrap, topic, partitions=1)
    ok("kafka-configs", "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "topics",
       "--entity-name", topic, "--add-config", ",".join(f"{k}={v}" for k, v in KAFKA_TOPIC_CONFIGS.items()))
    assert _dynamic_configs(broker, topic) == KAFKA_TOPIC_CONFIGS


def test_kafka_configs_describe_synonyms_as_kafka_does(broker: BrokerProcess) -> None:
    topic = _name("kc-syn")
    create_topic(broker.bootstrap, topic, partitions=1, config={"retention.ms": "12345", "max.message.bytes": "20000"})
    out = ok("kafka-configs", "--bootstrap-server", broker.bootstrap, "--describe", "--entity-type", "topics",
             "--entity-name", topic, "--all")
    synonyms = dict(line.strip().split("=", 1)[0:1] + line.split(" synonyms=", 1)[1:] for line in out.splitlines()[1:])
    # What Kafka 3.9 prints for these entries.
    assert synonyms["max.message.bytes"] == "{DYNAMIC_TOPIC_CONFIG:max.message.bytes=20000, " \
                                            "DEFAULT_CONFIG:message.max.bytes=1048588}"
    assert synonyms["cleanup.policy"] == "{DEFAULT_CONFIG:log.cleanup.policy=delete}"
    assert synonyms["retention.ms"] == "{DYNAMIC_TOPIC_CONFIG:retention.ms=12345}"
    assert synonyms["segment.ms"] == synonyms["segment.jitter.ms"] == synonyms["flush.ms"] == "{}"
    assert [k for k, v in synonyms.items() if "=null" in v] == []


def _consumed(out: str) -> list[tuple[int, int, str, str]]:
    """print.partition/offset/key lines: `Partition:P\tOffset:O\tkey\tvalue`."""
    rows = []
    for line in out.splitlines():
        partition, offset, key, value = line.split("\t")
        rows.append((int(partition.removeprefix("Partition:")), int(offset.removeprefix("Offset:")), key, value))
    return rows


PRINT = ("--property", "print.partition=true", "--property", "print.offset=true", "--property", "print.key=true")


def test_console_producer_then_console_consumer(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic = _name("kcon")
    create_topic(broker.bootstrap, topic, partitions=2)
    lines = [(f"key-{i}", f"value {i}") for i in range(100)]
    produced = tool("kafka-console-producer", *bs, "--topic", topic, "--property", "parse.key=true",
                    "--property", "key.separator=:", "--producer-property", "acks=all",
                    stdin="".join(f"{k}:{v}\n" for k, v in lines))
    assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced.stderr

    done = tool("kafka-console-consumer", *bs, "--topic", topic, "--from-beginning", "--max-messages", "100", *PRINT)
    assert done.returncode == 0 and "Processed a total of 100 messages" in done.stderr, done.stderr
    rows = _consumed(done.stdout)
    assert len(rows) == 100 and sorted((k, v) for _, _, k, v in rows) == sorted(lines)
    # Each key went where the Java partitioner sends it, each partition in the order the lines came.
    for p in range(2):
        expected = [(k, v) for k, v in lines if key_partition(k, 2) == p]
        got = sorted((o, k, v) for q, o, k, v in rows if q == p)
        assert got == [(o, k, v) for o, (k, v) in enumerate(expected)]
    assert end_offsets(broker, topic) == {p: sum(key_partition(k, 2) == p for k, _ in lines) for p in range(2)}

    # A partition read from an offset, without a group.
    some = tool("kafka-console-consumer", *bs, "--topic", topic, "--partition", "0", "--offset", "5",
                "--max-messages", "3", *PRINT)
    assert some.returncode == 0, some.stderr
    on_zero = [(k, v) for k, v in lines if key_partition(k, 2) == 0]
    assert _consumed(some.stdout) == [(0, o, *on_zero[o]) for o in range(5, 8)]


def _group_state(broker: BrokerProcess, group: str) -> dict[str, str]:
    out = ok("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group, "--state")
    for line in out.splitlines():
        if line.startswith(group + " "):
            cols = line.split()
            # GROUP  COORDINATOR (ID)  ASSIGNMENT-STRATEGY  STATE  #MEMBERS; the strategy is blank when Empty
            return {"state": cols[-2], "members": cols[-1], "strategy": cols[-3] if len(cols) == 6 else ""}
    raise AssertionError(f"no state line for {group}:\n{out}")


def test_kafka_consumer_groups_list_describe_and_reset(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic, group = _name("kcg"), _name("kcg-group")
    create_topic(broker.bootstrap, topic, partitions=2)
    for p in range(2):
        produce(broker.bootstrap, topic, [f"p{p}-{i}".encode() for i in range(20)], partition=p)

    read = tool("kafka-console-consumer", *bs, "--topic", topic, "--group", group, "--from-beginning",
                "--max-messages", "40")
    assert read.returncode == 0 and len(read.stdout.split()) == 40, read.stderr
    assert group in ok("kafka-consumer-groups", *bs, "--list").split()
    rows = group_rows(ok("kafka-consumer-groups", *bs, "--describe", "--group", group), group)
    assert {p: (r["TOPIC"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["CONSUMER-ID"])
            for p, r in rows.items()} == {0: (topic, "20", "20", "0", "-"), 1: (topic, "20", "20", "0", "-")}
    assert _group_state(broker, group) == {"state": "Empty", "members": "0", "strategy": ""}

    # A live member: the group is Stable with one consumer owning both partitions.
    member = start_tool("kafka-console-consumer", *bs, "--topic", topic, "--group", group, "--timeout-ms", "30000")
    try:
        wait_until(lambda: _group_state(broker, group)["state"] == "Stable", "the console consumer joined")
        assert _group_state(broker, group) == {"state": "Stable", "members": "1", "strategy": "range"}
        members = ok("kafka-consumer-groups", *bs, "--describe", "--group", group, "--members")
        member_rows = [line.split() for line in members.splitlines() if line.startswith(group + " ")]
        assert len(member_rows) == 1 and member_rows[0][-1] == "2"  # #PARTITIONS
        assert member_rows[0][1].startswith("console-consumer-")
        # Refused while the member is there (the tool reports it and still exits 0).
        busy = ok("kafka-consumer-groups", *bs, "--reset-offsets", "--to-earliest", "--group", group,
                  "--topic", topic, "--execute")
        assert f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable." \
            in busy
    finally:
        member.terminate()  # the console consumer's shutdown hook closes it and leaves the group
        member.communicate(timeout=30)
    wait_until(lambda: _group_state(broker, group)["state"] == "Empty", "the member left")

    reset = ok("kafka-consumer-groups", *bs, "--reset-offsets", "--to-earliest", "--group", group, "--topic", topic,
               "--execute")
    assert sorted(re.findall(rf"{re.escape(group)}\s+{re.escape(topic)}\s+(\d+)\s+(\d+)", reset)) == [
        ("0", "0"), ("1", "0")]
    rows = group_rows(ok("kafka-consumer-groups", *bs, "--describe", "--group", group), group)
    assert {p: (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for p, r in rows.items()} == {
        0: ("0", "20", "20"), 1: ("0", "20", "20")}
    # The group reads everything again from its committed offsets (no --from-beginning).
    again = tool("kafka-console-consumer", *bs, "--topic", topic, "--group", group, "--max-messages", "40")
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.split()) == sorted(f"p{p}-{i}" for p in range(2) for i in range(20))

    deleted = ok("kafka-consumer-groups", *bs, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted
    assert group not in ok("kafka-consumer-groups", *bs, "--list").split()


def test_kafka_producer_perf_test(broker: BrokerProcess) -> None:
    topic = _name("kperf")
    create_topic(broker.bootstrap, topic, partitions=3)
    out = ok("kafka-producer-perf-test", "--topic", topic, "--num-records", "20000", "--record-size", "100",
             "--throughput", "-1", "--print-metrics", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
             "acks=all")
    summary = [line for line in out.splitlines() if "records sent" in line]
    assert summary and summary[-1].startswith("20000 records sent, "), out[:2000]
    metrics = dict(re.findall(r"^producer-metrics:([a-z-]+):\{client-id=[^}]*\}\s*:\s*([0-9.NaInf-]+)$", out, re.M))
    assert float(metrics["record-send-total"]) == 20000
    assert float(metrics["record-error-total"]) == 0 and float(metrics["record-retry-total"]) == 0
    ends = end_offsets(broker, topic)
    assert set(ends) == {0, 1, 2} and sum(ends.values()) == 20000
    assert end_offsets(broker, topic, "-2") == {0: 0, 1: 0, 2: 0}
