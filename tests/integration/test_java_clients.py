"""Apache Kafka's Java client (3.9) against a real pylog broker: tests/java/ClientCheck.java.

An idempotent lz4 producer with several requests in flight, consumer groups of three members under
each of the client's assignors (members join one after another, so partitions change hands while
records are being read), the AdminClient's topic, config, record and group calls, and the
transactional producer (KIP-98: commit and abort across partitions, consume-transform-produce with
sendOffsetsToTransaction, a zombie fenced by its successor; with the AdminClient's transaction calls),
whose expectations are checked against Apache Kafka 3.9 too. The check prints its observations as
JSON; the assertions on them are here.
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from pylog.launch.process import BrokerProcess
from tests.support.clients import create_topic, produce, unique_name
from tests.support.kafka_tools import java_client, java_result


@pytest.fixture(scope="module")
def broker(quick_groups_broker: BrokerProcess) -> BrokerProcess:
    return quick_groups_broker      # no initial rebalance delay: each group test saves 3 s


def _name(prefix: str) -> str:
    return unique_name(prefix)


def _stored_batches(data_dir: Path, topic: str, partition: int) -> list[dict[str, int]]:
    """The v2 batch headers in a partition's segment files, as the broker stored them."""
    batches = []
    for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            attributes, last_delta = struct.unpack_from(">hi", data, pos + 21)
            producer_id, epoch, base_sequence, count = struct.unpack_from(">qhii", data, pos + 43)
            batches.append({"base_offset": base_offset, "codec": attributes & 7, "last_offset_delta": last_delta,
                            "producer_id": producer_id, "epoch": epoch, "base_sequence": base_sequence,
                            "count": count})
            pos += 12 + length
    return batches


def test_idempotent_producer_with_lz4_and_requests_in_flight(broker: BrokerProcess) -> None:
    topic = _name("java-idem")
    create_topic(broker.bootstrap, topic, partitions=3)
    result = java_result("produce-idempotent", broker.bootstrap, topic, "3000")

    assert result["partitions"] == 3
    assert result["record_error_total"] == 0 and result["record_retry_total"] == 0
    # Every acknowledged offset, in send order: each partition's 1000 records are 0..999.
    assert result["offsets"] == {str(p): list(range(1000)) for p in range(3)}
    assert result["end_offsets"] == {str(p): 1000 for p in range(3)}
    assert result["read_back"] == 3000 and result["read_back_in_order"] and result["read_offsets_match"]
    assert result["requests"] > 3  # more than one request per partition: several were in flight

    # On disk: lz4 batches of one producer id and epoch whose sequences follow each other.
    producer_ids = set()
    for p in range(3):
        batches = _stored_batches(broker.data_dir, topic, p)
        assert len(batches) > 1
        assert {b["codec"] for b in batches} == {3}  # lz4, as the producer sent them
        assert {b["epoch"] for b in batches} == {0}
        producer_ids |= {b["producer_id"] for b in batches}
        expected_sequence = 0
        expected_offset = 0
        for b in batches:
            assert b["base_sequence"] == expected_sequence and b["base_offset"] == expected_offset
            assert b["last_offset_delta"] == b["count"] - 1
            expected_sequence += b["count"]
            expected_offset += b["count"]
        assert expected_offset == 1000
    assert len(producer_ids) == 1 and producer_ids.pop() >= 0


# Members, sorted by member id, own these partitions of a 6-partition topic (None: any balanced split).
EXPECTED_ASSIGNMENT = {
    "range": [[0, 1], [2, 3], [4, 5]],
    "roundrobin": [[0, 3], [1, 4], [2, 5]],
    "sticky": None,
    "cooperative-sticky": None,
}


@pytest.mark.parametrize("assignor", list(EXPECTED_ASSIGNMENT))
def test_consumer_group_of_three_with_each_assignor(broker: BrokerProcess, assignor: str) -> None:
    topic, group = _name("java-group"), _name(f"java-{assignor}")
    create_topic(broker.bootstrap, topic, partitions=6)
    for p in range(6):
        produce(broker.bootstrap, topic, [f"r{p}-{i}".encode() for i in range(200)], partition=p)
    result = java_result("consume-group", broker.bootstrap, topic, group, assignor, "3", "1200")

    assert result["total"] == 1200 and result["distinct"] == 1200 and result["duplicates"] == 0
    ends = {str(p): 200 for p in range(6)}
    assert result["end_offsets"] == ends
    assert result["committed"] == ends  # every member committed where it stopped, handovers included

    members = result["members"]
    assert len({m["generation"] for m in members}) == 1 and members[0]["generation"] >= 2
    by_id = sorted(members, key=lambda m: m["member_id"])
    owned = [m["partitions"] for m in by_id]
    assert sorted(p for ps in owned for p in ps) == list(range(6))
    if EXPECTED_ASSIGNMENT[assignor] is not None:
        assert owned == EXPECTED_ASSIGNMENT[assignor]
    else:
        assert [len(ps) for ps in owned] == [2, 2, 2]

    # The first member read alone, with all six partitions, before the others joined.
    first = members[0]
    assert first["consumed"] > 0 and first["revocations"]
    if assignor == "cooperative-sticky":
        # Incremental: only the partitions that moved were ever revoked, and the kept ones never were.
        revoked = [p for r in first["revocations"] for p in r]
        assert sorted(revoked) == sorted(set(range(6)) - set(first["partitions"]))
        assert members[0]["assigned_callbacks"] >= 2 and members[1]["generation"] >= 3
    else:
        assert first["revocations"][0] == list(range(6))  # eager: everything is given back first

    described = result["described"]
    assert described["state"] == "Stable" and described["assignor"] == assignor and described["simple"] is False
    assert described["members"] == {m["member_id"]: m["partitions"] for m in members}
    assert result["state_after_close"] == "Empty" and result["members_after_close"] == 0


def test_admin_client_topics_configs_records_and_groups(broker: BrokerProcess) -> None:
    r = java_result("admin", broker.bootstrap)
    assert r["failed"] == []

    assert r["describeCluster"] == {"nodes": 1, "cluster_id_set": True, "controller": r["describeCluster"]["controller"]}
    assert r["createTopics"] == "ok"
    assert r["listTopics"] == {"a": True, "b": True, "internal_hidden": True}
    described = r["describeTopics"]
    assert described["name"] == r["topics"][0] and described["internal"] is False and described["topic_id_set"]
    assert [(p["partition"], p["replicas"], p["isr"]) for p in described["partitions"]] == [(0, 1, 1), (1, 1, 1)]
    assert all(p["leader"] >= 0 for p in described["partitions"])

    dyn, default = "DYNAMIC_TOPIC_CONFIG", "DEFAULT_CONFIG"
    assert r["describeConfigs"] == {
        "retention.ms": {"value": "3600000", "source": dyn},
        "cleanup.policy": {"value": "compact", "source": dyn},
        "segment.ms": {"value": "604800000", "source": default},
        "max.message.bytes": {"value": "1048588", "source": default},
    }
    assert r["incrementalAlterConfigs"] == {  # SET, SET and DELETE (back to the default)
        "retention.ms": {"value": "7200000", "source": dyn},
        "max.message.bytes": {"value": "2000000", "source": dyn},
        "cleanup.policy": {"value": "delete", "source": default},
    }
    assert r["alterConfigs"] == {  # the legacy call replaces every override
        "segment.ms": {"value": "600000", "source": dyn},
        "retention.ms": {"value": "604800000", "source": default},
        "max.message.bytes": {"value": "1048588", "source": default},
    }
    assert r["createPartitions"] == 4

    assert r["produce"] == 9  # ten records on each of partitions 0 and 1
    assert r["deleteRecords"] == 4
    assert r["listOffsets"] == {"earliest": [4, 0], "latest": [10, 10]}

    assert r["consume"] == 16  # 6 left on partition 0 after the deletion, 10 on partition 1
    assert r["listConsumerGroups"] == {"listed": True, "state": "Stable", "simple": False}
    live = r["describeConsumerGroups"]
    assert live["state"] == "Stable" and live["assignor"] == "range" and live["coordinator"] >= 0
    assert live["members"] == [{"client_id": "admin-check-member", "partitions": [0, 1, 2, 3]}]
    left = r["describeConsumerGroupsAfterLeave"]
    assert left["state"] == "Empty" and left["members"] == []

    assert r["listConsumerGroupOffsets"] == {"0": 10, "1": 10, "2": 0, "3": 0}
    assert r["alterConsumerGroupOffsets"] == {"0": 5, "1": 2, "2": 0, "3": 0}
    assert r["deleteConsumerGroupOffsets"] == {"0": 5, "2": 0, "3": 0}
    assert r["deleteConsumerGroups"] == {"listed": False}
    assert r["deleteTopics"] == {"a": False, "b": False}


# ---------------------------------------------------------------- transactions (KIP-98)

@pytest.fixture(scope="module")
def transactions(request: pytest.FixtureRequest, broker: BrokerProcess) -> dict[str, Any]:
    """One JVM runs the three transactional steps (`ClientCheck transactions`) against pylog's broker. Each
    expectation below is Apache Kafka 3.9's own: the same assertions passed against Kafka when they were
    written (`PYLOG_JAVA_TXN_ON_KAFKA=1` runs them there again; the run's one Kafka, tests/conftest.py). A step
    that threw is reported by its test."""
    target: Any = broker
    if os.environ.get("PYLOG_JAVA_TXN_ON_KAFKA") == "1":
        target = request.getfixturevalue("apache_kafka")
    done = java_client("transactions", target.bootstrap, timeout=150)
    lines = done.stdout.strip().splitlines()
    assert lines, f"ClientCheck transactions exited {done.returncode}\nstderr:\n{done.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    result["stderr"] = done.stderr[-4000:]
    return result


def _step(result: dict[str, Any], name: str) -> dict[str, Any]:
    step = result.get(name)
    assert name not in result["failed"] and isinstance(step, dict) and "error" not in step, (
        f"step {name}: {step} (failed: {result['failed']}, error: {result.get('error')})\nstderr:\n{result['stderr']}")
    return step


def test_transactional_producer_commits_and_aborts_across_three_partitions(transactions: dict[str, Any]) -> None:
    r = _step(transactions, "commitAbort")
    # 30 records over 3 partitions, committed; 30 more, aborted. The commit marker takes offset 10.
    assert r["committed_offsets"] == {str(p): list(range(10)) for p in range(3)}
    assert r["aborted_offsets"] == {str(p): list(range(11, 21)) for p in range(3)}
    committed = [[p, k, f"committed-{i}"] for p in range(3) for k, i in enumerate(range(p, 30, 3))]
    aborted = [[p, 11 + k, f"aborted-{i}"] for p in range(3) for k, i in enumerate(range(p, 30, 3))]
    assert r["read_committed"] == committed
    assert r["read_uncommitted"] == sorted(committed + aborted)
    # Each partition: 10 records, a commit marker, 10 records, an abort marker.
    assert r["end_offsets"] == {"read_committed": {str(p): 22 for p in range(3)},
                                "read_uncommitted": {str(p): 22 for p in range(3)}}
    pid, epoch = r["after_abort"]["producer_id"], r["after_abort"]["producer_epoch"]
    assert pid >= 0 and epoch == 0                                   # a new transactional id
    settled = {"producer_id": pid, "producer_epoch": epoch, "timeout_ms": 60000, "start_time_set": True,
               "partitions": []}
    assert r["after_abort"] == {"state": "CompleteAbort", **settled}

    # A third transaction open with two records on partition 0: its last stable offset stays at 22.
    assert r["open_offsets"] == {"0": [22, 23]}
    open_ = r["open"]
    assert open_["end_offsets"] == {"read_committed": {"0": 22, "1": 22, "2": 22},
                                    "read_uncommitted": {"0": 24, "1": 22, "2": 22}}
    assert open_["read_committed"] == 30
    assert open_["describeTransactions"] == {"state": "Ongoing", "producer_id": pid, "producer_epoch": epoch,
                                             "timeout_ms": 60000, "start_time_set": True, "partitions": ["0"]}
    assert open_["listTransactions"] == [f"Ongoing/{pid}"]
    # sequences on partition 0: 0-9 committed, 10-19 aborted, 20-21 open; the open one began at 22
    assert open_["describeProducers"] == [{"producer_id": pid, "producer_epoch": epoch, "last_sequence": 21,
                                           "txn_start_offset": 22}]
    assert r["after_commit"] == {"state": "CompleteCommit", **settled}
    assert r["final_end_offsets"] == {"0": 25, "1": 22, "2": 22}
    assert r["open_read_after_commit"] == [22, 23]


def test_transactional_consume_transform_produce_commits_offsets_with_the_output(transactions: dict[str, Any]) -> None:
    r = _step(transactions, "consumeTransformProduce")
    first, aborted, last = r["rounds"]
    # The input (2 partitions of 10) is read in rounds of 8 (committed), 6 (aborted, read again) and 12.
    assert [first["taken"], aborted["taken"], last["taken"]] == [8, 6, 12]
    assert first["committed"] == first["sent_offsets"] and sum(first["sent_offsets"].values()) == 8
    assert sum(aborted["sent_offsets"].values()) == 14
    # Offsets pending in an open transaction: the read_committed consumer's committed() waits (KIP-447's
    # require_stable, UNSTABLE_OFFSET_COMMIT) until its timeout.
    assert aborted["committed_while_pending"] == "TimeoutException"
    assert aborted["committed"] == first["committed"]                # the abort did not move them
    assert last["committed"] == last["sent_offsets"] == {"0": 10, "1": 10}
    assert r["more_input"] == 0 and r["generation"] >= 1
    # The output holds each input exactly once; the aborted round's 6 are only visible uncommitted.
    assert r["output_read_committed"] == sorted(f"x-in-{i}" for i in range(20))
    assert r["output_read_uncommitted"] == 26


def test_transactional_producer_is_fenced_by_a_successor_with_the_same_id(transactions: dict[str, Any]) -> None:
    r = _step(transactions, "fencing")
    fenced = "ProducerFencedException"
    # Produce at the old epoch: INVALID_PRODUCER_EPOCH, an abortable error the commit repeats; the
    # abort's EndTxn is then fenced (fatal), as is everything after.
    assert r["produce"] == {"after_fence": "Empty", "send": "InvalidProducerEpochException",
                            "commit": "InvalidProducerEpochException", "abort": fenced, "begin_again": fenced}
    # AddPartitionsToTxn and EndTxn at the old epoch: PRODUCER_FENCED at once.
    assert r["add_partition"] == {"after_fence": "Empty", "send": fenced, "commit": fenced, "abort": fenced,
                                  "begin_again": fenced}
    assert r["commit"] == {"after_fence": "Empty", "commit": fenced, "abort": fenced, "begin_again": fenced}
    # Each fence aborts at a bumped epoch and the successor's InitProducerId bumps it again.
    assert r["epochs"] == [0, 2, 4, 6]
    assert r["final"] == "CompleteCommit"
    # Only the last successor's record is committed; the three zombies' records on partition 0 were
    # aborted (three abort markers), their late sends never written.
    assert r["read_committed"] == ["1:successor"]
    assert r["read_uncommitted"] == 4
    assert r["end_offsets"] == {"0": 6, "1": 2}
