"""Transactions on a three-broker cluster: the coordinator of a transactional id is the leader of its
`__transaction_state` partition (replicated), markers reach the partition leaders on other brokers through
WriteTxnMarkers and replicate like any batch, and the coordinator's broker killed with kill -9 right
after a commit's prepare record (before any marker) leaves the transaction to its successor, which
completes it: read_committed consumers see all of it.

Real broker processes, a real ZooKeeper, librdkafka's transactional producer.
"""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from confluent_kafka import Producer
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from pylog.launch.local_cluster import LocalCluster
from pylog.launch.local_zookeeper import LocalZooKeeper
from tests.support.clients import read_to_end, unique_name
from tests.support.cluster import create_replicated, partition_meta, wait_full_isr
from tests.support.waiting import wait_for
from tests.support.wire import WireClient

FAULT = "PYLOG_FAULT_KILL_COORDINATOR_AFTER_PREPARE"
KILLED_TXN = "txn-killed-after-prepare"
SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    "group.initial.rebalance.delay.ms": 0,
    "zookeeper.session.timeout.ms": 2500,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "auto.leader.rebalance.enable": "false",
}


@pytest.fixture(scope="module")
def cluster(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    mp = pytest.MonkeyPatch()
    mp.setenv(FAULT, KILLED_TXN)        # inert for every other transactional id
    c = LocalCluster(tmp_path_factory.mktemp("txn-cluster"), 3, SETTINGS, zk_connect=zookeeper.connect,
                     chroot=f"/{unique_name('txn')}")
    try:
        c.start()
        yield c
    finally:
        c.close()
        mp.undo()


def coordinator(c: LocalCluster, txn_id: str) -> int:
    """The broker FindCoordinator names for `txn_id` (asked of every live broker until one answers)."""
    def ask() -> tuple[int] | None:          # a tuple: broker 0 is a coordinator too
        for b in c.brokers.values():
            if b.proc is None or b.proc.poll() is not None:
                continue
            try:
                with WireClient(b.host, b.port) as w:
                    r = w.request(FindCoordinatorRequest(key_type=1, coordinator_keys=(txn_id,))).coordinators[0]
                if r.error_code.value == 0:
                    return (r.node_id,)
            except OSError:
                continue
        return None
    return wait_for(ask, 30, f"a coordinator for {txn_id}")[0]


def describe(c: LocalCluster, txn_id: str) -> Any:
    node = coordinator(c, txn_id)
    b = c.brokers[node]
    with WireClient(b.host, b.port) as w:
        return w.request(DescribeTransactionsRequest(transactional_ids=(txn_id,))).transaction_states[0]


def producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(60)
    return p


def test_a_transaction_spans_partitions_led_by_every_broker(cluster):
    bs, topic = cluster.bootstrap, unique_name("spread")
    create_replicated(bs, topic, 6)
    wait_full_isr(bs, topic, 6)
    p = producer(bs, unique_name("tx"))
    p.begin_transaction()
    for i in range(60):
        p.produce(topic, value=b"c%d" % i, partition=i % 6)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(60):
        p.produce(topic, value=b"a%d" % i, partition=i % 6)
    p.flush(60)
    p.abort_transaction(60)
    assert read_to_end(bs, topic, 6, "read_committed") == sorted(b"c%d" % i for i in range(60))
    assert len(read_to_end(bs, topic, 6, "read_uncommitted")) == 120


def test_a_coordinator_killed_after_the_prepare_leaves_the_commit_to_its_successor(cluster):
    bs, topic = cluster.bootstrap, unique_name("failover")
    create_replicated(bs, topic, 3)
    wait_full_isr(bs, topic, 3)
    before = coordinator(cluster, KILLED_TXN)
    p = producer(bs, KILLED_TXN)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"v%d" % i, partition=i % 3)
    p.flush(60)
    try:
        p.commit_transaction(60)        # the coordinator dies after writing PrepareCommit
    except Exception:  # noqa: BLE001 - librdkafka may or may not see the commit through; the log decides
        pass
    wait_for(lambda: cluster.brokers[before].proc is not None and cluster.brokers[before].proc.poll() is not None
             or None, 30, "the fault to kill the coordinator")
    assert coordinator(cluster, KILLED_TXN) != before
    wait_for(lambda: describe(cluster, KILLED_TXN).transaction_state == "CompleteCommit" or None, 60,
             "the new coordinator to complete the commit")
    assert read_to_end(bs, topic, 3, "read_committed") == sorted(b"v%d" % i for i in range(30))
    cluster.restart(before)
    wait_full_isr(bs, topic, 3)


def test_a_leader_asks_the_coordinator_on_another_broker_before_a_transactions_first_batch(cluster):
    """KIP-890 part 1 across brokers: a transactional batch to a partition the coordinator never added is
    refused with INVALID_TXN_STATE by its leader, which asked the coordinator (AddPartitionsToTxn v4,
    verify only); once added, the batch is appended."""
    from tests.conformance.test_transactions import add_partitions, init_producer_id, produce, txn_batch

    bs, topic, txn_id = cluster.bootstrap, unique_name("verify"), unique_name("tx")
    create_replicated(bs, topic, 6)
    wait_full_isr(bs, topic, 6)
    node = coordinator(cluster, txn_id)
    with WireClient(cluster.brokers[node].host, cluster.brokers[node].port) as coord:
        r = init_producer_id(coord.request, txn_id)
        pid, epoch = r.producer_id, r.producer_epoch
        leaders = {p.id: p.leader for p in partition_meta(bs, topic).values()}
        elsewhere = [p for p, leader in leaders.items() if leader != node]
        assert elsewhere, "some partition should be led by another broker than the coordinator"
        added, other = elsewhere[0], (elsewhere[1] if len(elsewhere) > 1 else None)
        assert add_partitions(coord.request, txn_id, pid, epoch, {topic: [added]}) == {(topic, added): "none"}
    for partition, expected in [(added, "none")] + ([(other, "invalid_txn_state")] if other is not None else []):
        b = cluster.brokers[leaders[partition]]
        with WireClient(b.host, b.port) as leader:
            error, _ = produce(leader.request, topic, partition, txn_batch(pid, epoch, 0, b"x"), transactional_id=txn_id)
        assert error == expected, f"partition {partition}"
