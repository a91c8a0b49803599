"""Partition reassignment against Apache Kafka 3.9 in ZooKeeper mode (issue 31): a three-broker pylog cluster and a
three-broker Kafka cluster get the same topics with the same replica assignments, the same kafka-reassign-partitions
invocations (Kafka's own tool from its jars) with the same JSON, refusals included, and the same ZooKeeper-era
`/admin/reassign_partitions` znode. Both must end in the same states: every partition's replicas, ISR and leader,
every record still there, and the tool's refusals with the same messages. Then the ControlledShutdown a stopping
broker sends its controller, raw, refusals included: the same errors, remaining partitions and leaders after.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from peers.kafka import FUNCTIONAL_JVM, KafkaZkBroker
from peers.zk_cluster import ZkCluster
from pylog.launch.process import BrokerProcess
from tests.support.clients import consume
from tests.support.kafka_tools import run_tool
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(600)

LAYOUT = {"moved": [[1, 2], [2, 3], [3, 1]], "zkmoved": [[1, 2]]}
PLAN = {("moved", 0): [3, 1], ("moved", 1): [1, 2, 3], ("moved", 2): [2]}      # move, grow, shrink
REFUSED = {"duplicate replicas": {("moved", 0): [1, 1]}, "a broker that does not exist": {("moved", 1): [1, 9]},
           "a topic that does not exist": {("nope", 0): [1, 2]}}
ZK_PLAN = {("zkmoved", 0): [2, 3]}
RECORDS = 300


def _plan(moves: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                     for (t, p), r in sorted(moves.items())]})


def _states(cluster: ZkCluster) -> dict[str, Any]:
    """Replicas, ISR and leader of each partition of LAYOUT's topics the answering broker knows of (a broker may
    not have learnt of a topic just created yet: Kafka's metadata reaches its brokers asynchronously)."""
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=15)
    return {f"{t}-{p}": (list(m.replicas), sorted(m.isrs), m.leader) for t in LAYOUT if t in md.topics
            for p, m in sorted(md.topics[t].partitions.items())}


def _zk_leaders(cluster: ZkCluster) -> dict[str, tuple[list[int], int]]:
    """ISR and leader of each partition of LAYOUT as the controller wrote them in ZooKeeper (Kafka's layout, which
    pylog's cluster mode keeps): what the controller decided, whatever a broker's metadata has learnt yet."""
    zk = KazooClient(hosts=cluster.zookeeper.connect + cluster.chroot)
    zk.start(timeout=15)
    try:
        states = {}
        for topic, replicas in LAYOUT.items():
            for p in range(len(replicas)):
                state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
                states[f"{topic}-{p}"] = (sorted(state["isr"]), state["leader"])
        return states
    finally:
        zk.stop()
        zk.close()


def _settled(cluster: ZkCluster) -> bool:
    """Every partition of LAYOUT known, each with its whole replica set in sync."""
    states = _states(cluster)
    return len(states) == sum(map(len, LAYOUT.values())) and all(sorted(r) == isr for r, isr, _ in states.values())


def _error_line(out: str) -> str:
    """The tool's refusal: its last line naming an error, without the exception class's package."""
    lines = [ln.strip() for ln in out.splitlines() if "rror" in ln or "xception" in ln]
    return lines[-1].split("Exception: ")[-1] if lines else out.strip()[-300:]


def _run_scenario(system: str, root: Path) -> dict[str, Any]:
    make = (lambda wd, s: KafkaZkBroker(wd, s, heap="384m", jvm=FUNCTIONAL_JVM)) if system == "kafka" else \
        (lambda wd, s: BrokerProcess(wd, settings=s))
    cluster = ZkCluster(root / system, make, 3, {"auto.leader.rebalance.enable": "false",
                                                 "min.insync.replicas": 1}, 6000, chroot=f"/{system}")
    out: dict[str, Any] = {}
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for topic, replicas in LAYOUT.items():
            admin.create_topics([NewTopic(topic, len(replicas), replica_assignment=replicas)])[topic].result(30)
        wait_for(lambda: _settled(cluster), 60, f"{system}: full ISRs")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce("moved", value=b"r%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        bs = ["--bootstrap-server", cluster.bootstrap]
        for what, moves in REFUSED.items():
            (root / f"{system}-bad.json").write_text(_plan(moves))
            done = run_tool("kafka-reassign-partitions", *bs, "--reassignment-json-file", str(root / f"{system}-bad.json"),
                            "--execute")
            out[f"refused: {what}"] = (done.returncode != 0 or "rror" in done.stdout + done.stderr,
                                       _error_line(done.stdout + done.stderr))
        plan = root / f"{system}-plan.json"
        plan.write_text(_plan(PLAN))
        started = run_tool("kafka-reassign-partitions", *bs, "--reassignment-json-file", str(plan), "--execute")
        out["execute"] = (started.returncode, "Successfully started partition reassignment" in started.stdout)

        def verified() -> bool:
            done = run_tool("kafka-reassign-partitions", *bs, "--reassignment-json-file", str(plan), "--verify")
            return done.stdout.count("is completed") == len(PLAN)
        wait_for(verified, 90, f"{system}: the moves completed")
        zk = KazooClient(hosts=cluster.zookeeper.connect + cluster.chroot)
        zk.start(timeout=15)
        try:
            zk.create("/admin/reassign_partitions", _plan(ZK_PLAN).encode(), makepath=True)
            wait_for(lambda: not zk.exists("/admin/reassign_partitions"), 90, f"{system}: the znode's move done")
        finally:
            zk.stop()
            zk.close()
        wait_for(lambda: _settled(cluster), 60, f"{system}: ISRs settled")
        out["states"] = _states(cluster)
        out["records"] = sorted(m.value() for m in consume(cluster.bootstrap, "moved", [0, 1, 2], RECORDS))
        out.update(_controlled_shutdowns(cluster))
        return out
    finally:
        cluster.close()


def _controlled_shutdowns(cluster: ZkCluster) -> dict[str, Any]:
    """ControlledShutdown v3 as a stopping broker sends it, raw: to a broker that is not the controller, for a
    broker id that does not exist, with a stale broker epoch, then a real one (the broker's epoch is its
    registration znode's czxid): each answer's error and remaining partitions, and afterwards whether each partition
    is led by the leaving broker or one that stays (broker 2 leaves on both, whichever broker is the controller)."""
    from broker.cluster.controller_channel import PeerConnection
    from kafka_protocol.controller_schemas import ControlledShutdownRequest
    controller = cluster.controller()
    leaving = 2           # the only replica of moved-2 after PLAN: on both clusters, whichever is the controller
    other = next(b for b in sorted(cluster.brokers) if b != controller)
    zk = KazooClient(hosts=cluster.zookeeper.connect + cluster.chroot)
    zk.start(timeout=15)
    try:
        epoch = zk.get(f"/brokers/ids/{leaving}")[1].czxid
    finally:
        zk.stop()
        zk.close()

    def ask(via: int, broker_id: int, broker_epoch: int) -> tuple[str, list[tuple[str, int]]]:
        host, port = cluster.broker(via).bootstrap.rsplit(":", 1)
        connection = PeerConnection(host, int(port), "conformance", 30.0)
        try:
            answer = connection.call(ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch))
        finally:
            connection.close()
        return answer.error_code.name, sorted((str(r.topic_name), int(r.partition_index))
                                              for r in answer.remaining_partitions)
    out = {"shutdown: asked of a broker that is not the controller": ask(other, leaving, epoch),
           "shutdown: a broker that does not exist": ask(controller, 9, -1),
           "shutdown: a stale broker epoch": ask(controller, leaving, epoch - 1),
           "shutdown": ask(controller, leaving, epoch)}
    # read from ZooKeeper, the controller's record on both: a broker's metadata may lag the controller's moves
    wait_for(lambda: all(leader != leaving for isr, leader in _zk_leaders(cluster).values() if len(isr) > 1), 30,
             f"no partition with another replica in sync led by broker {leaving}")
    # a partition whose only replica is the leaving broker keeps it as leader, on both
    out["shutdown: who leads each partition"] = {tp: "the leaving broker" if leader == leaving else "one that stays"
                                                 for tp, (_, leader) in _zk_leaders(cluster).items()}
    return out


def test_reassignments_end_in_the_same_states_and_refusals_as_kafka_zookeeper_mode(tmp_path: Path) -> None:
    started = time.monotonic()
    kafka = _run_scenario("kafka", tmp_path)
    pylog = _run_scenario("pylog", tmp_path)
    assert kafka["records"] == sorted(b"r%d" % i for i in range(RECORDS))
    for key in kafka:
        assert pylog[key] == kafka[key], f"{key}: pylog {pylog[key]!r}, Kafka {kafka[key]!r}"
    assert time.monotonic() - started < 500
