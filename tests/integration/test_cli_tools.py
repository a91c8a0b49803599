"""The client CLI tools (`pylog topics|produce|consume|perf`) run as real subprocesses against a real broker."""
from __future__ import annotations

import json
import subprocess
import time
import uuid
import sys
from pathlib import Path

from pylog.launch.process import BrokerProcess, free_port


def pylog_executable() -> str:
    """The `pylog` console script of the running interpreter's environment."""
    return str(Path(sys.executable).with_name("pylog"))

TIMEOUT_S = 60


def pylog(*args: str, stdin: str | None = None, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([pylog_executable(), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def pylog_concurrently(commands: list[tuple[str, ...]], stdin: str = "") -> list[subprocess.CompletedProcess[str]]:
    """Run several independent invocations at once (each pays the interpreter start-up)."""
    procs = [subprocess.Popen([pylog_executable(), *cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for cmd in commands]
    results = []
    for cmd, proc in zip(commands, procs):
        try:
            out, err = proc.communicate(stdin, timeout=TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        results.append(subprocess.CompletedProcess(list(cmd), proc.returncode, out, err))
    return results


def ok(*args: str, stdin: str | None = None) -> str:
    result = pylog(*args, stdin=stdin)
    assert result.returncode == 0, f"pylog {' '.join(args)} failed:\n{result.stderr}"
    return result.stdout


def new_topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"cli-{uuid.uuid4().hex[:10]}"
    ok("topics", "create", "--topic", name, "--partitions", str(partitions),
       "--bootstrap-server", broker.bootstrap)
    return name


def test_topics_create_list_describe_delete_round_trip(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    name = f"cli-{uuid.uuid4().hex[:10]}"
    out = ok("topics", "create", "--topic", name, "--partitions", "3", "--replication-factor", "1",
             "--config", "retention.ms=60000", *bs)
    assert f"Created topic {name}" in out
    assert name in ok("topics", "list", *bs).split()

    described = ok("topics", "describe", "--topic", name, "--all-configs", *bs)
    header, *partition_lines = described.strip().splitlines()
    assert f"Topic: {name}" in header and "PartitionCount: 3" in header and "ReplicationFactor: 1" in header
    assert "retention.ms=60000" in header
    assert [line.split("\t")[2] for line in partition_lines] == [f"Partition: {p}" for p in range(3)]
    assert all("Leader: " in line and "Replicas: " in line and "Isr: " in line for line in partition_lines)

    again = pylog("topics", "create", "--topic", name, *bs)
    assert again.returncode == 1 and f"topic '{name}' already exists" in again.stderr
    ok("topics", "create", "--topic", name, "--if-not-exists", *bs)

    assert f"Deleted topic {name}" in ok("topics", "delete", "--topic", name, *bs)
    deadline = time.monotonic() + 10
    while name in ok("topics", "list", *bs).split() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert name not in ok("topics", "list", *bs).split()


def test_produced_lines_come_back_with_their_keys_from_beginning(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    lines = [f"key-{i}:value {i}" for i in range(50)]
    ok("produce", "--topic", topic, "--key-separator", ":", "--bootstrap-server", broker.bootstrap,
       stdin="\n".join(lines) + "\n")
    more = ["key-x:via properties", "key-y:and zstd"]
    ok("produce", "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
       "--compression", "zstd", "--acks", "1", "--bootstrap-server", broker.bootstrap,
       stdin="\n".join(more) + "\n")

    out = ok("consume", "--topic", topic, "--from-beginning", "--max-messages", "52", "--print-key",
             "--key-separator", ":", "--timeout-ms", "10000", "--bootstrap-server", broker.bootstrap)
    assert out.splitlines() == lines + more

    formatted = ok("consume", "--topic", topic, "--offset", "50", "--partition", "0", "--max-messages", "2",
                   "--format", "%p/%o %k=%v", "--timeout-ms", "10000", "--bootstrap-server", broker.bootstrap)
    assert formatted.splitlines() == ["0/50 key-x=via properties", "0/51 key-y=and zstd"]


def test_json_formatter_prints_one_object_per_record(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    ok("produce", "--topic", topic, "--key-separator", "\\t", "--header", "source=test",
       "--bootstrap-server", broker.bootstrap, stdin="k1\tv1\nk2\tv2\n")
    out = ok("consume", "--topic", topic, "--from-beginning", "--max-messages", "2", "--formatter", "json",
             "--timeout-ms", "10000", "--bootstrap-server", broker.bootstrap)
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"], r["offset"]) for r in records] == [("k1", "v1", 0), ("k2", "v2", 1)]
    for r in records:
        assert r["topic"] == topic and r["partition"] == 0
        assert isinstance(r["timestamp"], int) and r["timestamp"] > 0
        assert r["headers"] == [["source", "test"]]


def test_consume_stops_after_idle_timeout_without_a_group(broker: BrokerProcess) -> None:
    topic = new_topic(broker, partitions=2)
    started = time.monotonic()
    result = pylog("consume", "--topic", topic, "--timeout-ms", "1000", "--bootstrap-server", broker.bootstrap)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "Processed a total of 0 messages" in result.stderr
    assert time.monotonic() - started < 10


def test_unreachable_broker_fails_fast_naming_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    commands = [
        ("topics", "list"),
        ("topics", "create", "--topic", "t"),
        ("produce", "--topic", "t"),
        ("consume", "--topic", "t"),
        ("perf", "produce", "--topic", "t", "--num-records", "10", "--record-size", "10"),
        ("perf", "consume", "--topic", "t", "--messages", "10"),
    ]
    for cmd in commands:
        started = time.monotonic()
        result = pylog(*cmd, "--bootstrap-server", address, stdin="x\n", timeout=30)
        assert time.monotonic() - started < 15, cmd
        assert result.returncode == 1, result.args
        assert f"broker unreachable at {address}" in result.stderr, (result.args, result.stderr)
        assert "Traceback" not in result.stderr


def test_unknown_topic_is_an_error_naming_the_topic(broker: BrokerProcess) -> None:
    name = f"missing-{uuid.uuid4().hex[:8]}"
    commands = [("topics", "describe", "--topic", name), ("topics", "delete", "--topic", name),
                ("topics", "alter", "--topic", name, "--config", "retention.ms=1"),
                ("consume", "--topic", name, "--timeout-ms", "1000"),
                ("perf", "consume", "--topic", name, "--messages", "1")]
    results = pylog_concurrently([(*cmd, "--bootstrap-server", broker.bootstrap) for cmd in commands])
    for result in results:
        assert result.returncode == 1, result.args
        assert f"unknown topic '{name}'" in result.stderr, (result.args, result.stderr)
    assert name not in ok("topics", "list", "--bootstrap-server", broker.bootstrap).split()


def test_bad_arguments_are_reported(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    bad_config, bad_flag, bad_offset = pylog_concurrently([
        ("topics", "create", "--topic", "x", "--config", "retention.ms", *bs),
        ("topics", "list", "--no-such-flag", *bs),
        ("consume", "--topic", "x", "--offset", "soon", *bs),
    ])
    assert bad_config.returncode == 1 and "bad --config 'retention.ms': expected key=value" in bad_config.stderr
    assert bad_flag.returncode == 2
    assert bad_offset.returncode == 1 and "bad --offset 'soon'" in bad_offset.stderr


def test_produce_reports_unsendable_lines_and_exits_non_zero(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    result = pylog("produce", "--topic", topic, "--key-separator", ":", "--bootstrap-server", broker.bootstrap,
                   stdin="k:good\nno separator here\n")
    assert result.returncode == 1
    assert "line 2: no key separator ':' found" in result.stderr
    assert "1 record(s) failed; 1 delivered" in result.stderr
    wrong_partition = pylog("produce", "--topic", topic, "--partition", "5",
                            "--bootstrap-server", broker.bootstrap, stdin="x\n")
    assert wrong_partition.returncode == 1 and "partition 5 does not exist" in wrong_partition.stderr


def test_perf_produce_and_consume_print_throughput_and_latency_percentiles(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    bs = ("--bootstrap-server", broker.bootstrap)
    produced = ok("perf", "produce", "--topic", topic, "--num-records", "20000", "--record-size", "100",
                  "--json", "--producer-props", "linger.ms=2", *bs)
    text, json_line = produced.strip().splitlines()[-2:]
    assert "20000 records sent" in text and "records/sec" in text and "MB/sec" in text
    assert "50th" in text and "99th" in text and "99.9th" in text
    summary = json.loads(json_line)
    assert summary["records"] == 20000 and summary["failed"] == 0 and summary["records_per_sec"] > 0
    assert 0 < summary["latency_p50_ms"] <= summary["latency_p99_ms"] <= summary["latency_p999_ms"]

    consumed = ok("perf", "consume", "--topic", topic, "--messages", "20000", "--timeout-ms", "10000",
                  "--json", *bs)
    text, json_line = consumed.strip().splitlines()[-2:]
    assert "20000 records consumed" in text and "records/sec" in text and "99.9th" in text
    summary = json.loads(json_line)
    assert summary["records"] == 20000 and summary["bytes"] == 20000 * 100
    assert summary["mb_per_sec"] > 0 and "latency_p99_ms" in summary


def test_consume_says_so_when_its_broker_goes_away_and_comes_back(broker_factory) -> None:
    import select

    broker = broker_factory()
    topic = new_topic(broker)
    ok("produce", "--topic", topic, "--bootstrap-server", broker.bootstrap, stdin="before\n")
    proc = subprocess.Popen([pylog_executable(), "consume", "--topic", topic, "--from-beginning", "--bootstrap-server",
                             broker.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == "before\n"
        broker.kill()
        said, deadline = "", time.monotonic() + 30
        while "lost the connection" not in said and time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], 1.0)[0]:
                said += proc.stderr.readline()
        assert f"lost the connection to every broker ({broker.bootstrap}); still trying" in said, said
        broker.start()
        ok("produce", "--topic", topic, "--bootstrap-server", broker.bootstrap, stdin="after\n")
        assert proc.stdout.readline() == "after\n"
    finally:
        proc.kill()
        proc.communicate()
