"""`pylog transactions` (kafka-transactions), `pylog consume --isolation-level` and the last stable offset in
`pylog groups describe`, run as subprocesses against a real broker.

An open transaction is made by librdkafka's transactional producer and left open: `list`, `describe` and
`describe-producers` show it, `find-hanging` does not report it (its coordinator tracks the partition), a
read_committed consumer stops at its first offset and `groups describe` shows that last stable offset
below the high watermark; `abort --start-offset` ends it and the read_committed consumer gets past it.
A hanging transaction is what pre-KIP-890 Kafka let happen: a transactional batch that reached a
partition without its coordinator knowing the partition. The broker here runs with
`transaction.partition.verification.enable=false` (as Kafka before 3.6) so that a raw transactional
produce from a producer id no coordinator gave out opens one; `find-hanging` finds it, and `abort` with
the producer id, epoch and coordinator epoch ends it.
"""
from __future__ import annotations

import random
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.client_codec import decode_response
from kafka_protocol.produce_codec import encode_produce_request
from kafka_protocol.record_builder import Record, encode_batch
from pylog.launch.process import BrokerProcess
from tests.support.clients import create_topic, produce, unique_name

TIMEOUT_S = 60
PYLOG = str(Path(sys.executable).with_name("pylog"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("txn-cli") / "data",
                            settings={"transaction.partition.verification.enable": "false"}).start()
    try:
        yield process
    finally:
        process.close()


def run(*commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Run independent `pylog` invocations at once (each pays the interpreter's start-up)."""
    procs = [subprocess.Popen([PYLOG, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for cmd in commands]
    results = []
    for cmd, proc in zip(commands, procs):
        try:
            out, err = proc.communicate(timeout=TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        results.append(subprocess.CompletedProcess(list(cmd), proc.returncode, out, err))
    return results


def ok(*commands: tuple[str, ...]) -> list[str]:
    results = run(*commands)
    for r in results:
        assert r.returncode == 0, f"pylog {' '.join(r.args)} exited {r.returncode}:\n{r.stderr}"
    return [r.stdout for r in results]


def table(out: str) -> list[dict[str, str]]:
    """The rows of a table the tools print (a header line, then one line per row) as dicts."""
    header, *lines = [line for line in out.splitlines() if line.strip()]
    names = header.split()
    rows = [dict(zip(names, line.split())) for line in lines]
    assert all(len(line.split()) == len(names) for line in lines), out
    return rows


def group_rows(out: str, group: str) -> dict[int, dict[str, str]]:
    """`pylog groups describe`'s rows by partition (the table after its "no active members" line)."""
    lines = [line for line in out.splitlines() if line.split()[:1] in (["GROUP"], [group])]
    return {int(r["PARTITION"]): r for r in table("\n".join(lines))}


def open_transaction(bootstrap: str, txn_id: str, topic: str, committed: list[bytes], pending: list[bytes],
                     partition: int = 0) -> Producer:
    """Commit `committed`, then produce `pending` in a transaction left open."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(20)
    if committed:
        p.begin_transaction()
        for v in committed:
            p.produce(topic, v, partition=partition)
        p.commit_transaction(20)
    p.begin_transaction()
    for v in pending:
        p.produce(topic, v, partition=partition)
    assert p.flush(20) == 0
    return p


def produce_unknown_transaction(broker: BrokerProcess, topic: str, partition: int, producer_id: int,
                                values: list[bytes]) -> int:
    """A transactional batch from a producer id no coordinator gave out (Produce v9, acks=-1); its base offset."""
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None, v) for i, v in enumerate(values)], producer_id=producer_id,
                         producer_epoch=0, base_sequence=0, transactional=True)
    frame = encode_produce_request(9, 1, "hanging-maker", -1, 10_000, [(topic, [(partition, batch)])],
                                   transactional_id=unique_name("ghost"))
    with socket.create_connection((broker.host, broker.port), timeout=10) as s:
        s.sendall(b"".join(bytes(part) for part in frame))
        (size,) = struct.unpack(">i", _read(s, 4))
        answer = decode_response(memoryview(_read(s, size)), ApiKey.PRODUCE, 9, 1)
    (result,) = answer.responses[0].partition_responses
    assert result.error_code.value == 0, result
    return int(result.base_offset)


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def commit_offset(bootstrap: str, group: str, topic: str, offset: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def consume_cmd(bootstrap: str, topic: str, *extra: str) -> tuple[str, ...]:
    return ("consume", "--topic", topic, "--from-beginning", "--exit-at-end", "--timeout-ms", "15000",
            "--bootstrap-server", bootstrap, *extra)


def test_an_open_transaction_listed_described_and_aborted_at_its_start_offset(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic, txn_id, group = unique_name("txcli"), unique_name("txid"), unique_name("txgroup")
    create_topic(broker.bootstrap, topic)
    # offsets: c0 c1, commit marker (2), open0..open2 (3-5) open, then a plain record (6)
    producer = open_transaction(broker.bootstrap, txn_id, topic, [b"c0", b"c1"], [b"open0", b"open1", b"open2"])
    produce(broker.bootstrap, topic, [b"after"], partition=0)
    commit_offset(broker.bootstrap, group, topic, 1)

    listed, ongoing, committed_only, young, old, described, producers, not_hanging, lag_hw, lag_lso, \
        committed_read, all_read = ok(
            ("transactions", *bs, "list"),
            ("transactions", "list", "--state", "ongoing", *bs),      # options after the subcommand too
            ("transactions", *bs, "list", "--state", "CompleteCommit"),
            ("transactions", *bs, "list", "--duration-filter", "0"),
            ("transactions", *bs, "list", "--duration-filter", "600000"),
            ("transactions", *bs, "describe", "--transactional-id", txn_id),
            ("transactions", *bs, "describe-producers", "--topic", topic, "--partition", "0"),
            ("transactions", *bs, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"),
            ("groups", "describe", "--group", group, *bs),
            ("groups", "describe", "--group", group, "--isolation-level", "read_committed", *bs),
            consume_cmd(broker.bootstrap, topic, "--isolation-level", "read_committed"),
            consume_cmd(broker.bootstrap, topic))

    (mine,) = [r for r in table(listed) if r["TransactionalId"] == txn_id]
    assert mine["Coordinator"] == "0" and mine["TransactionState"] == "Ongoing"
    pid = mine["ProducerId"]
    assert [r["TransactionalId"] for r in table(ongoing) if r["TransactionalId"] == txn_id] == [txn_id]
    assert all(r["TransactionState"] == "Ongoing" for r in table(ongoing))
    assert txn_id not in committed_only and txn_id in young and txn_id not in old

    (d,) = table(described)
    assert (d["TransactionalId"], d["ProducerId"], d["TransactionState"], d["TopicPartitions"]) == \
        (txn_id, pid, "Ongoing", f"{topic}-0")
    assert d["TransactionTimeoutMs"] == "60000" and d["CurrentTransactionStartTimeMs"] != "None"
    assert 0 <= int(d["TransactionDurationMs"]) < 60_000

    (state,) = [r for r in table(producers) if r["ProducerId"] == pid]
    assert state["CurrentTransactionStartOffset"] == "3" and state["LastSequence"] == "4"
    assert table(not_hanging) == []        # open, but its coordinator tracks the partition

    # the last stable offset (3) below the high watermark (7); LAG to either as asked
    row = group_rows(lag_hw, group)[0]
    assert [row[k] for k in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAST-STABLE-OFFSET")] == ["1", "7", "6", "3"]
    assert group_rows(lag_lso, group)[0]["LAG"] == "2"
    assert committed_read.splitlines() == ["c0", "c1"]                 # stops at the open transaction
    assert all_read.splitlines() == ["c0", "c1", "open0", "open1", "open2", "after"]   # the default

    aborted = ok(("transactions", *bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "3"))[0]
    assert f"Aborted the transaction of producer {pid} (epoch 0" in aborted and "offset 3" in aborted
    lag_after, producers_after, committed_after = ok(
        ("groups", "describe", "--group", group, *bs),
        ("transactions", *bs, "describe-producers", "--topic", topic, "--partition", "0"),
        consume_cmd(broker.bootstrap, topic, "--isolation-level", "read_committed"))
    row = group_rows(lag_after, group)[0]
    assert row["LOG-END-OFFSET"] == row["LAST-STABLE-OFFSET"] == "8"      # the abort marker at 7
    assert [r["CurrentTransactionStartOffset"] for r in table(producers_after) if r["ProducerId"] == pid] == ["None"]
    assert committed_after.splitlines() == ["c0", "c1", "after"]          # past it; its records skipped
    producer.abort_transaction(20)      # the coordinator still had it Ongoing: it ends now, its producer too


def test_find_hanging_reports_a_transaction_no_coordinator_tracks_and_abort_ends_it(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic = unique_name("hang")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, [b"before"], partition=0)
    ghost = (1 << 40) + random.randrange(1 << 20)
    start = produce_unknown_transaction(broker, topic, 0, ghost, [b"lost0", b"lost1"])
    produce(broker.bootstrap, topic, [b"after"], partition=0)
    tracked = open_transaction(broker.bootstrap, unique_name("txid"), topic, [], [b"tracked"], partition=1)
    assert start == 1

    by_topic, by_partition, by_broker, too_young, other_partition, blocked = ok(
        ("transactions", *bs, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"),
        ("transactions", *bs, "find-hanging", "--topic", topic, "--partition", "0", "--max-transaction-timeout", "0"),
        ("transactions", *bs, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0"),
        ("transactions", *bs, "find-hanging", "--topic", topic),     # default: open longer than 15 minutes
        ("transactions", *bs, "find-hanging", "--topic", topic, "--partition", "1", "--max-transaction-timeout", "0"),
        consume_cmd(broker.bootstrap, topic, "--partition", "0", "--isolation-level", "read_committed"))
    expected = {"Topic": topic, "Partition": "0", "ProducerId": str(ghost), "ProducerEpoch": "0",
                "CoordinatorEpoch": "-1", "StartOffset": "1"}
    for out in (by_topic, by_partition):
        (row,) = table(out)
        assert {k: row[k] for k in expected} == expected and row["Duration(min)"] == "0"
    assert [r for r in table(by_broker) if r["Topic"] == topic] == table(by_topic)
    assert table(too_young) == [] and table(other_partition) == []
    assert blocked.splitlines() == ["before"]

    aborted = ok(("transactions", *bs, "abort", "--topic", topic, "--partition", "0", "--producer-id", str(ghost),
                  "--producer-epoch", "0", "--coordinator-epoch", "-1"))[0]
    assert f"producer {ghost} (epoch 0, coordinator epoch 0) in {topic}-0" in aborted
    after, read = ok(("transactions", *bs, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"),
                     consume_cmd(broker.bootstrap, topic, "--partition", "0", "--isolation-level", "read_committed"))
    assert table(after) == []
    assert read.splitlines() == ["before", "after"]
    tracked.abort_transaction(20)


def test_mistakes_are_one_line_errors_with_exit_status_1(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic = unique_name("txerr")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"plain"])
    cases = {
        ("describe", "--transactional-id", "no-such-id"): "transactional id 'no-such-id' is not known",
        ("describe-producers", "--topic", "no-such-topic", "--partition", "0"): "unknown topic 'no-such-topic'",
        ("describe-producers", "--topic", topic, "--partition", "3"): f"partition 3 does not exist in topic '{topic}'",
        ("abort", "--topic", topic, "--partition", "0", "--start-offset", "0"):
            f"no open transaction starts at offset 0 in {topic}-0 (it has no open transaction)",
        ("abort", "--topic", topic, "--partition", "0"): "name the transaction to abort",
        ("abort", "--topic", topic, "--partition", "0", "--producer-id", "7"): "missing --producer-epoch",
        ("find-hanging",): "find-hanging needs --topic or --broker-id",
        ("find-hanging", "--broker-id", "9"): "broker 9 is not in the cluster (brokers: 0)",
        ("list", "-X", "sasl.mechanism=PLAIN"): "unsupported setting 'sasl.mechanism'",
    }
    dead = ("transactions", "--bootstrap-server", f"127.0.0.1:{_closed_port()}", "list")
    results = run(*[("transactions", *bs, *case) for case in cases], dead)
    for (case, expected), r in zip([*cases.items(), (dead, "broker unreachable at 127.0.0.1:")], results):
        assert r.returncode == 1, (case, r.stdout, r.stderr)
        assert r.stderr.startswith("pylog transactions: error: ") and len(r.stderr.splitlines()) == 1, r.stderr
        assert expected in r.stderr, (case, r.stderr)
        assert r.stdout == ""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
