"""Day-two operations on a three-broker cluster with racks (issue 31), against real broker processes and a real
ZooKeeper: rack-aware placement and DescribeCluster, fetching from the closest replica (KIP-392), the console's
cluster pages, partition reassignment (KIP-455: pylog's tool and Kafka's own, throttles, cancel) and preferred
leader election with Kafka's tool. The replication rules themselves are in test_cluster_replication.py; this
module has a cluster of its own so the two run side by side."""
from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import time
from typing import Iterator

import pytest
from kio.schema.errors import ErrorCode

from pylog.launch.local_cluster import LocalCluster
from pylog.launch.local_zookeeper import LocalZooKeeper
from tests.support.clients import consume, unique_name
from tests.support.cluster import (RACKS, AckedProducer, log_bytes, acks_all_producer as _producer, assert_replicas_identical,
                                   broker_metrics as _metrics, cluster_admin as _admin, cluster_meta as _partition_meta,
                                   create_replicated, leader, racked_cluster, wait_full_isr)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with racked_cluster(zookeeper, tmp_path_factory.mktemp("cluster"), "operations") as c:
        yield c


@pytest.fixture(autouse=True)
def _cluster_whole_after_each_test(cluster: LocalCluster) -> Iterator[None]:
    """A test that fails between its kills and restarts must not fail the tests after it (they share the cluster)."""
    yield
    cluster.restore()


def _create(c: LocalCluster, topic: str, partitions: int = 1, rf: int = 3) -> None:
    create_replicated(c.bootstrap, topic, partitions, rf)


def _leader(c: LocalCluster, topic: str, partition: int = 0) -> int:
    return leader(c.bootstrap, topic, partition)


def test_replicas_are_spread_over_racks_and_clients_see_each_brokers_rack(cluster: LocalCluster) -> None:
    """broker.rack: Kafka's rack-aware assignment puts the two replicas of every partition in both zones (the
    rack-unaware rule would pair brokers 0 and 2, both in zone-a, for some); DescribeCluster (what the admin
    clients' describeCluster sends) and Metadata name each broker's rack."""
    topic = unique_name("racks")
    _create(cluster, topic, partitions=6, rf=2)
    meta = _partition_meta(cluster, topic)
    assert len(meta) == 6
    for p, m in meta.items():
        assert {RACKS[b] for b in m.replicas} == {"zone-a", "zone-b"}, (p, m.replicas)
    admin = _admin(cluster)
    described = admin.describe_cluster(request_timeout=15).result(20)
    assert {n.id: n.rack for n in described.nodes} == RACKS
    assert described.controller.id in RACKS and described.cluster_id


def test_a_consumer_fetches_from_an_in_sync_replica_in_its_rack(cluster: LocalCluster) -> None:
    """KIP-392 with Kafka's RackAwareReplicaSelector: the leader answers a consumer in another rack with the id of
    an in-sync follower in the consumer's rack, and the follower serves the records (its bytes-out count grows,
    the leader's does not); librdkafka's consumer and the Spark source's own Fetch client (client.rack) both
    follow it. A consumer without a rack reads from the leader."""
    from confluent_kafka import Consumer
    from sparklog.kafka_client import ClientConfig, KafkaClient
    topic = unique_name("nearby")
    _create(cluster, topic, partitions=1, rf=3)
    wait_full_isr(cluster.bootstrap, topic, 1)
    producer = _producer(cluster)
    for i in range(200):
        producer.produce(topic, value=b"r%d" % i, partition=0)
    assert producer.flush(30) == 0
    led_by = _leader(cluster, topic)
    rack = next(r for r in RACKS.values() if r != RACKS[led_by])        # the consumers' zone: not the leader's
    near = {b for b, r in RACKS.items() if r == rack}                    # its followers (two when broker 1 leads)

    def bytes_out(broker: int) -> float:
        return _metrics(cluster, broker, topic=topic).get("pylog_bytes_out_total", 0.0)

    before = {b: bytes_out(b) for b in range(3)}
    client = KafkaClient(ClientConfig(cluster.bootstrap, client_rack=rack))
    try:
        offset, deadline = 0, time.monotonic() + 15
        while offset < 200:         # a follower serves below the high watermark its leader last sent it
            fp = client.fetch(topic, 0, offset)
            assert fp.error_code == 0 and time.monotonic() < deadline, fp
            if fp.records is not None and len(fp.records) > 0:
                offset = _next_offset(bytes(fp.records))
        assert client._read_replicas[(topic, 0)] in near
    finally:
        client.close()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique_name("g"), "client.rack":
                         rack, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    assert got == [b"r%d" % i for i in range(200)]
    after = {b: bytes_out(b) for b in range(3)}
    served = sum(after[b] - before[b] for b in near)
    assert served >= 2 * 200 * 2, (before, after)                       # both readers, from the followers
    assert after[led_by] == before[led_by], (before, after)              # the leader only named the follower
    plain = KafkaClient(ClientConfig(cluster.bootstrap))
    try:
        assert len(plain.fetch(topic, 0, 0).records or b"") > 0 and (topic, 0) not in plain._read_replicas
    finally:
        plain.close()
    assert bytes_out(led_by) > after[led_by]


def _next_offset(records: bytes) -> int:
    """The offset after the last whole batch of a Fetch answer's record set."""
    from kafka_protocol.record_batch import parse_header, whole_batches_length
    pos, end, nxt = 0, whole_batches_length(records), -1
    while pos < end:
        h = parse_header(records, pos)
        nxt, pos = h.last_offset + 1, pos + h.size
    return nxt


def test_the_console_shows_the_clusters_brokers_racks_controller_and_isr(cluster: LocalCluster, tmp_path) -> None:
    """`pylog console` against the three brokers (plain HTTP; the browser tests run on one broker): each broker
    with its rack and the number of partitions it leads, the controller, and a topic's replicas and ISR."""
    import html
    import urllib.request
    from pylog.launch.process import ConsoleProcess
    topic = unique_name("seen")
    _create(cluster, topic, partitions=3, rf=3)
    wait_full_isr(cluster.bootstrap, topic, 3)
    meta = _partition_meta(cluster, topic)
    console = ConsoleProcess(tmp_path / "console", cluster.bootstrap).start()
    try:
        brokers = html.unescape(urllib.request.urlopen(console.url("/brokers"), timeout=20).read().decode())
        page = html.unescape(urllib.request.urlopen(console.url(f"/topics/{topic}"), timeout=20).read().decode())
    finally:
        console.close()
    controller = int(re.search(r'<span id="controller-id">(\d+)</span>', brokers).group(1))
    assert controller in RACKS
    for b, rack in RACKS.items():
        row = re.search(rf'<tr data-broker="{b}">(.*?)</tr>', brokers, re.S).group(1)
        assert f'<td class="rack">{rack}</td>' in row and ("controller" in row) == (b == controller), row
    for p, m in meta.items():
        row = re.search(rf'<tr data-partition="{p}"[^>]*>(.*?)(?=<tr|</tbody>)', page, re.S).group(1)
        cell = {k: re.search(rf'<td class="{k}">([^<]*)', row).group(1) for k in ("leader", "replicas", "isr")}
        assert cell == {"leader": str(m.leader), "replicas": ",".join(map(str, m.replicas)),
                        "isr": ",".join(map(str, m.isrs))}, (cell, m)


def _partitions_cmd(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", "partitions", "reassign", "--bootstrap-server",
                           cluster.bootstrap, *args], capture_output=True, text=True, timeout=60)


def test_replicas_move_to_another_broker_without_losing_a_record_and_the_old_copy_goes(cluster: LocalCluster,
                                                                                        tmp_path) -> None:
    """`pylog partitions reassign --execute` then `--verify` (KIP-455, Kafka's JSON): broker 2 takes broker 0's
    replicas of a topic while producers write acks=all; the new replica catches up before it joins the ISR, the
    move completes, broker 0 deletes its copy, and every acknowledged record is there once, on both replicas."""
    topic = unique_name("moved")
    admin = _admin(cluster)
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[0, 1], [1, 0]])])[topic].result(30)
    wait_for(lambda: all(len(m.isrs) == 2 for m in _partition_meta(cluster, topic).values()), 15, "full ISRs")
    producer = AckedProducer(cluster.bootstrap, topic, partitions=2)
    producer.start()
    wait_for(lambda: producer.acked_count() >= 300, 30, "records acknowledged before the move")
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 1]},
                                                             {"topic": topic, "partition": 1, "replicas": [1, 2]}]}))
    started = _partitions_cmd(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert started.returncode == 0, started.stderr
    rollback = json.loads(started.stdout.split("Current partition replica assignment")[1].split("Save this")[0])
    assert {(p["partition"], tuple(p["replicas"])) for p in rollback["partitions"]} == {(0, (0, 1)), (1, (1, 0))}
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in started.stdout

    def verified() -> bool:
        out = _partitions_cmd(cluster, "--verify", "--reassignment-json-file", str(plan))
        return out.returncode == 0 and out.stdout.count("is completed.") == 2
    wait_for(verified, 30, "both moves completed")
    producer.finish()
    meta = _partition_meta(cluster, topic)
    assert [list(meta[p].replicas) for p in (0, 1)] == [[2, 1], [1, 2]]
    wait_for(lambda: all(sorted(_partition_meta(cluster, topic)[p].isrs) == [1, 2] for p in (0, 1)), 15, "ISRs")
    wait_for(lambda: not (cluster.broker(0).data_dir / f"{topic}-0").exists() and
             not (cluster.broker(0).data_dir / f"{topic}-1").exists(), 15, "broker 0's copies deleted")
    keys = [int(m.key()) for m in consume(cluster.bootstrap, topic, [0, 1], producer.sent, timeout=60)]
    assert producer.failed == [] and len(producer.acked) == producer.sent
    assert sorted(keys) == sorted(producer.acked), "every acknowledged record, once"
    assert_replicas_identical(cluster, topic, 2, brokers=(1, 2))
    assert "No partition reassignments found." in _partitions_cmd(cluster, "--list").stdout


def test_a_move_in_progress_is_listed_and_cancelled_back_to_its_origin(cluster: LocalCluster) -> None:
    """A move whose new replica cannot catch up (broker 2 frozen) stays in progress; ListPartitionReassignments
    shows it with its adding replica, a cancel returns the partition to its original replicas at once, and a
    cancel of a partition not moving is NO_REASSIGNMENT_IN_PROGRESS; bad targets get Kafka's messages."""
    from pylog.tools.wire_admin import WireAdmin
    topic = unique_name("cancelled")
    admin = _admin(cluster)
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1]])])[topic].result(30)
    wait_for(lambda: len(_partition_meta(cluster, topic)[0].isrs) == 2, 15, "full ISR")
    producer = _producer(cluster)
    for i in range(100):
        producer.produce(topic, value=b"c%d" % i, partition=0)
    assert producer.flush(30) == 0
    with WireAdmin(cluster.bootstrap) as wire:
        bad = wire.alter_reassignments({(topic, 0): [0, 0], ("nope-" + topic, 0): [0, 1]})
        assert bad[(topic, 0)] == (ErrorCode.invalid_replica_assignment,
                                   "Duplicate replica ids in partition reassignment replica list: List(0, 0)")
        assert bad[("nope-" + topic, 0)][0] == ErrorCode.unknown_topic_or_partition
        assert wire.alter_reassignments({(topic, 0): None})[(topic, 0)][0] == ErrorCode.no_reassignment_in_progress
        frozen = cluster.broker(2)
        frozen.proc.send_signal(signal.SIGSTOP)
        try:
            assert wire.alter_reassignments({(topic, 0): [0, 1, 2]})[(topic, 0)] == (ErrorCode.none, None)
            assert wire.list_reassignments()[(topic, 0)] == ([0, 1, 2], [2], [])
            assert wire.alter_reassignments({(topic, 0): None})[(topic, 0)] == (ErrorCode.none, None)
            wait_for(lambda: (topic, 0) not in wire.list_reassignments(), 10, "the cancel done")
            assert list(_partition_meta(cluster, topic)[0].replicas) == [0, 1]
        finally:
            frozen.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: not (frozen.data_dir / f"{topic}-0").exists(), 30, "broker 2's partial copy deleted")
    assert [m.value() for m in consume(cluster.bootstrap, topic, [0], 100)] == [b"c%d" % i for i in range(100)]


def test_a_zookeeper_era_reassignment_znode_is_carried_out_and_removed(cluster: LocalCluster) -> None:
    """`/admin/reassign_partitions` written as ZooKeeper-era tools and scripts did: the controller starts each move
    it names, drops a partition that cannot move (an unknown one) at once, drops the others as they complete,
    and deletes the znode when it is empty; the records stay."""
    from confluent_kafka.admin import NewTopic
    from kazoo.client import KazooClient
    topic = unique_name("zkmoved")
    admin = _admin(cluster)     # kept referenced: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[0, 1], [1, 0]])])[topic].result(30)
    wait_for(lambda: all(len(m.isrs) == 2 for m in _partition_meta(cluster, topic).values()), 15, "full ISRs")
    producer = _producer(cluster)
    for i in range(200):
        producer.produce(topic, value=b"z%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=15)
    try:
        request = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 1]},
                                                {"topic": topic, "partition": 1, "replicas": [1, 2]},
                                                {"topic": "nope-" + topic, "partition": 0, "replicas": [0, 1]}]}
        zk.create("/admin/reassign_partitions", json.dumps(request).encode(), makepath=True)
        wait_for(lambda: not zk.exists("/admin/reassign_partitions"), 60, "the znode emptied and deleted")
    finally:
        zk.stop()
        zk.close()
    meta = _partition_meta(cluster, topic)
    assert (list(meta[0].replicas), list(meta[1].replicas)) == ([2, 1], [1, 2])
    got = sorted(m.value() for m in consume(cluster.bootstrap, topic, [0, 1], 200))
    assert got == sorted(b"z%d" % i for i in range(200))


def test_kafkas_reassign_tool_moves_a_throttled_partition_and_clears_its_throttles(cluster: LocalCluster,
                                                                                  tmp_path) -> None:
    """kafka-reassign-partitions from Kafka 3.9's jars, unchanged: --execute --throttle sets the brokers' rates and
    the topic's throttled replicas (KIP-73), the copy of ~1 MB to broker 2 runs at the throttle's pace, --verify
    reports the move completed and clears every throttle; then kafka-leader-election gives leadership back to the
    preferred replica."""
    from confluent_kafka.admin import ConfigResource, NewTopic
    from tests.support.kafka_tools import run_tool
    topic = unique_name("throttled")
    admin = _admin(cluster)
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1]])])[topic].result(30)
    wait_for(lambda: len(_partition_meta(cluster, topic)[0].isrs) == 2, 15, "full ISR")
    producer = _producer(cluster, **{"linger.ms": 20, "batch.size": 65536})
    for i in range(1000):
        producer.produce(topic, value=b"%04d" % i + b"t" * 1020, partition=0)
    assert producer.flush(30) == 0
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 0],
                                                             "log_dirs": ["any", "any"]}]}))
    bs = ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan)]
    started = time.monotonic()
    execute = run_tool("kafka-reassign-partitions", *bs, "--execute", "--throttle", "300000")
    assert execute.returncode == 0 and "Successfully started partition reassignment" in execute.stdout, \
        execute.stdout + execute.stderr
    described = admin.describe_configs([ConfigResource("TOPIC", topic)])
    topic_configs = list(described.values())[0].result(15)
    assert topic_configs["leader.replication.throttled.replicas"].value == "0:0,0:1"
    assert topic_configs["follower.replication.throttled.replicas"].value == "0:2"

    def done() -> str | None:
        out = run_tool("kafka-reassign-partitions", *bs, "--verify")
        return out.stdout if "is completed" in out.stdout else None
    verified = wait_for(done, 60, "the throttled move completed")
    took = time.monotonic() - started
    assert took >= 2.0, f"1 MB at 300 kB/s took {took:.1f} s"        # the throttle held the copy back
    assert "Clearing broker-level throttles" in verified and "Clearing topic-level throttles" in verified
    # the tool's AlterConfigs went to one broker; the one answering DescribeConfigs learns it from ZooKeeper
    wait_for(lambda: list(admin.describe_configs([ConfigResource("TOPIC", topic)]).values())[0].result(15)[
        "leader.replication.throttled.replicas"].value == "", 15, "the topic's throttled replicas cleared")
    assert list(_partition_meta(cluster, topic)[0].replicas) == [2, 0]
    assert [m.value()[:4] for m in consume(cluster.bootstrap, topic, [0], 1000)] == [b"%04d" % i for i in range(1000)]
    wait_for(lambda: 2 in _partition_meta(cluster, topic)[0].isrs and 0 in _partition_meta(cluster, topic)[0].isrs,
             15, "both replicas in sync")
    if _leader(cluster, topic) != 2:
        elected = run_tool("kafka-leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type",
                           "preferred", "--topic", topic, "--partition", "0")
        assert elected.returncode == 0, elected.stdout + elected.stderr
    wait_for(lambda: _leader(cluster, topic) == 2, 15, "the preferred leader")


def test_grow_to_five_brokers_and_shrink_back_under_load_losing_nothing(cluster: LocalCluster, tmp_path) -> None:
    """Two brokers join and `pylog cluster add-broker --broker 3,4` moves replicas onto them until the five brokers
    hold even shares; then `pylog cluster decommission --broker 3,4` empties them again and they stop. All the
    while an acks=all idempotent producer writes and a consumer group reads: every acknowledged record is there
    once, the group keeps consuming, and each partition's replicas end byte-identical."""
    from pylog.launch.process import BrokerProcess
    from tests.support.cluster import SETTINGS
    topic = unique_name("grown")
    _create(cluster, topic, partitions=5, rf=2)
    wait_full_isr(cluster.bootstrap, topic, 5, replicas=2)
    producer = AckedProducer(cluster.bootstrap, topic, partitions=5)
    producer.start()
    reader = _GroupReader(cluster, topic)
    joined = [BrokerProcess(tmp_path / f"broker-{b}", settings={**SETTINGS, "broker.id": b, "broker.rack": "zone-b",
                                                                "zookeeper.connect": cluster.zk_connect}).start()
              for b in (3, 4)]
    try:
        wait_for(lambda: {3, 4} <= {b.id for b in _admin(cluster).list_topics(timeout=10).brokers.values()}, 30,
                 "brokers 3 and 4 in the cluster")
        reader.read_for(1.0)
        grown = _cluster_cmd(cluster, "add-broker", "--broker", "3,4", "--execute", "--wait", "120")
        assert grown.returncode == 0 and "move(s) completed" in grown.stdout, grown.stdout + grown.stderr
        counts = _replica_counts(cluster)
        assert counts[3] >= 1 and counts[4] >= 1 and max(counts.values()) - min(counts.values()) <= 1, counts
        reader.read_for(1.0)
        before = len(reader.read)
        shrunk = _cluster_cmd(cluster, "decommission", "--broker", "3,4", "--execute", "--wait", "120")
        assert shrunk.returncode == 0 and "move(s) completed" in shrunk.stdout, shrunk.stdout + shrunk.stderr
        counts = _replica_counts(cluster)
        assert counts.get(3, 0) == 0 and counts.get(4, 0) == 0, counts
        assert reader.reads_beyond(before), "the group kept consuming through the moves"
    finally:
        for broker in joined:
            broker.close()
    reader.close()
    _every_acked_record_once_in_identical_replicas(cluster, producer, topic, 5)


def _a_move_held_up(cluster: LocalCluster, prefix: str) -> tuple[str, int, int, int]:
    """A partition on the controller's broker C and X holding records f0..f299, moving to X and Y while Y is frozen
    (SIGSTOP) before it can copy anything: (topic, C, X, Y)."""
    from confluent_kafka.admin import NewTopic
    from pylog.tools.wire_admin import WireAdmin
    topic = unique_name(prefix)
    admin = _admin(cluster)
    c = admin.list_topics(timeout=10).controller_id
    x, y = [b for b in sorted(cluster.brokers) if b != c]
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[c, x]])])[topic].result(30)
    wait_for(lambda: len(_partition_meta(cluster, topic)[0].isrs) == 2, 15, "full ISR")
    producer = _producer(cluster)
    for i in range(300):
        producer.produce(topic, value=b"f%d" % i, partition=0)
    assert producer.flush(30) == 0
    cluster.freeze(y)
    with WireAdmin(cluster.bootstrap) as wire:
        assert wire.alter_reassignments({(topic, 0): [x, y]})[(topic, 0)] == (ErrorCode.none, None)
    return topic, c, x, y


def _the_move_completes(cluster: LocalCluster, topic: str, c: int, x: int, y: int) -> None:
    """Once C and Y are back: the move of `_a_move_held_up` done, replicas X and Y byte-identical, C's copy deleted,
    every record once."""
    from pylog.tools.wire_admin import WireAdmin
    cluster.wait_ready()
    with WireAdmin(cluster.bootstrap) as wire:
        wait_for(lambda: (topic, 0) not in wire.list_reassignments(), 60, "the move completed")
    assert sorted(_partition_meta(cluster, topic)[0].replicas) == sorted([x, y])
    wait_for(lambda: not (cluster.broker(c).data_dir / f"{topic}-0").exists(), 30, f"broker {c}'s copy deleted")
    wait_for(lambda: log_bytes(cluster, x, topic, 0) == log_bytes(cluster, y, topic, 0), 30, "identical replicas")
    assert [m.value() for m in consume(cluster.bootstrap, topic, [0], 300)] == [b"f%d" % i for i in range(300)]


def test_a_move_survives_its_target_and_the_controller_killed_and_completes_when_they_return(
        cluster: LocalCluster) -> None:
    """Faults during a reassignment: the partition moves from the controller's broker C and X to X and Y. Y is
    frozen before it can copy anything, then SIGKILLed, then C, the controller, is SIGKILLed too: the move stays
    listed with Y still adding, never half-applied, and the partition keeps serving from X. When both come back,
    the move completes (under the new controller): replicas X and Y, byte-identical, every record once, and C
    deletes its copy."""
    from pylog.tools.errors import CliError
    from pylog.tools.wire_admin import WireAdmin
    topic, c, x, y = _a_move_held_up(cluster, "faults")
    cluster.thaw(y)        # SIGKILL needs no thaw, but a frozen process's session would hide the kill's timing
    cluster.kill(y)
    cluster.kill(c)
    survivor = cluster.broker(x).bootstrap
    at_x = _admin_at(survivor)
    # asked as soon as X answers as controller: its first answer already holds the move (it reads every topic
    # before it takes a request; it once answered from an empty view)
    first_answer: list[dict[tuple[str, int], tuple[list[int], list[int], list[int]]]] = []

    def listed_by_x() -> bool:
        with WireAdmin(survivor) as wire:
            wire.metadata([])
            try:
                if wire.controller_id == x:
                    first_answer.append(wire.list_reassignments())
            except CliError:
                pass                                                     # not the controller yet
        return bool(first_answer)
    wait_for(listed_by_x, 60, f"broker {x} controller")
    replicas, adding, removing = first_answer[0][(topic, 0)]
    assert (sorted(replicas), adding, removing) == (sorted([c, x, y]), [y], [c])   # neither done nor undone
    assert at_x.list_topics(timeout=5).controller_id == x
    assert [m.value() for m in consume(survivor, topic, [0], 300)] == [b"f%d" % i for i in range(300)]
    cluster.restart(y)
    cluster.restart(c)
    _the_move_completes(cluster, topic, c, x, y)
    wait_full_isr(cluster.bootstrap, "__consumer_offsets", 5, timeout_s=60)     # the cluster whole again


def test_a_move_survives_the_controller_and_its_target_losing_their_zookeeper_sessions(cluster: LocalCluster) -> None:
    """The move of the previous test, but the controller C and the target Y are frozen (SIGSTOP) until ZooKeeper
    expires their sessions, not killed: X becomes the controller and carries the move on. When C wakes, it is a
    zombie controller holding a stale view and an old epoch: it learns its session expired, resigns without a
    write (every controller write is fenced by the epoch), and rejoins as a broker. Y wakes, catches up, and the
    move completes under X: replicas X and Y, byte-identical, every record once, C's copy deleted, every broker
    naming X as the controller."""
    from pylog.tools.wire_admin import WireAdmin
    topic, c, x, y = _a_move_held_up(cluster, "expiry")
    cluster.freeze(c)
    at_x = _admin_at(cluster.broker(x).bootstrap)
    wait_for(lambda: at_x.list_topics(timeout=5).controller_id == x, 60, f"broker {x} controller")
    with WireAdmin(cluster.broker(x).bootstrap) as wire:
        replicas, adding, removing = wire.list_reassignments()[(topic, 0)]
    assert (sorted(replicas), adding, removing) == (sorted([c, x, y]), [y], [c])
    cluster.thaw(c)
    wait_for(lambda: "ZooKeeper session with" in cluster.broker(c).log_text(), 30, f"broker {c} noticing its expiry")
    cluster.thaw(y)
    _the_move_completes(cluster, topic, c, x, y)
    assert {_admin_at(b.bootstrap).list_topics(timeout=10).controller_id for b in cluster.brokers.values()} == {x}


def _admin_at(bootstrap: str) -> "AdminClient":
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


class _GroupReader:
    """A consumer group member reading `topic` from its start, committing as it goes; `read` holds the keys read."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique_name("g"), "log_level": 0,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": True,
                                  "auto.commit.interval.ms": 200})
        self.consumer.subscribe([topic])
        self.read: list[int] = []

    def read_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            m = self.consumer.poll(0.1)
            if m is not None and m.error() is None:
                self.read.append(int(m.key()))

    def reads_beyond(self, count: int, timeout_s: float = 30) -> bool:
        """Whether it reads past `count` records within `timeout_s` (its coordinator may have moved meanwhile)."""
        deadline = time.monotonic() + timeout_s
        while len(self.read) <= count and time.monotonic() < deadline:
            self.read_for(0.5)
        return len(self.read) > count

    def close(self) -> None:
        self.consumer.close()


def _replica_counts(cluster: LocalCluster) -> dict[int, int]:
    """Replicas each broker holds, over every topic."""
    md = _admin(cluster).list_topics(timeout=10)
    counts = {b: 0 for b in md.brokers}
    for t in md.topics.values():
        for p in t.partitions.values():
            for r in p.replicas:
                counts[r] = counts.get(r, 0) + 1
    return counts


def _cluster_cmd(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", "cluster", *args, "--bootstrap-server", cluster.bootstrap],
                          capture_output=True, text=True, timeout=180)


def test_a_rolling_restart_under_load_moves_leadership_first_and_loses_nothing(cluster: LocalCluster) -> None:
    """Each broker in turn is stopped with SIGTERM and started again, the next one only once every replica is back in
    sync (as operators do), while an acks=all idempotent producer writes and a consumer group reads. Controlled
    shutdown moves each broker's leaderships away before it stops (its log says so, and it exits 0); the producer
    sees no failed delivery, every acknowledged record is in the topic once, the group reads after the last
    restart, and the replicas end byte-identical. A topic created while the first broker is down has its leaders
    within 5 s (librdkafka's suite once waited 5.5 minutes for one after a rolling restart)."""
    topic = unique_name("rolling")
    _create(cluster, topic, partitions=3, rf=3)
    wait_full_isr(cluster.bootstrap, topic, 3)
    producer = AckedProducer(cluster.bootstrap, topic, partitions=3)
    producer.start()
    reader = _GroupReader(cluster, topic)
    try:
        for b in sorted(cluster.brokers):
            reader.read_for(1.0)
            led = [p for p, m in _partition_meta(cluster, topic).items() if m.leader == b]
            assert cluster.stop_broker(b) == 0, cluster.broker(b).log_text()[-3000:]
            log_text = cluster.broker(b).log_text()
            if led:
                assert "controlled shutdown: leadership moved away" in log_text, log_text[-3000:]
            if b == min(cluster.brokers):      # a topic created while a broker is down gets its leaders at once
                born = unique_name("born")
                created = time.monotonic()
                _create(cluster, born, partitions=3, rf=2)
                wait_for(lambda: _all_led(cluster, born, 3), 5, "the new topic's leaders within 5 s of its creation, "
                         "mid-restart")
                assert time.monotonic() - created < 5
            cluster.broker(b).start()
            cluster.wait_ready()
            wait_full_isr(cluster.bootstrap, topic, 3, timeout_s=60)
        assert reader.reads_beyond(len(reader.read)), "the group reads after the last restart"
    finally:
        reader.close()
    _every_acked_record_once_in_identical_replicas(cluster, producer, topic, 3)


def _all_led(cluster: LocalCluster, topic: str, partitions: int) -> bool:
    try:
        meta = _partition_meta(cluster, topic)
    except KeyError:       # not in the answering broker's metadata yet
        return False
    return len(meta) == partitions and all(m.leader >= 0 for m in meta.values())


def _every_acked_record_once_in_identical_replicas(cluster: LocalCluster, producer: AckedProducer, topic: str,
                                                   partitions: int) -> None:
    """The producer stops; it saw no failed delivery, the topic holds every acknowledged record once, and each
    partition's replicas are byte for byte the same."""
    producer.finish()
    assert producer.failed == [] and len(producer.acked) == producer.sent
    keys = [int(m.key()) for m in consume(cluster.bootstrap, topic, range(partitions), producer.sent, timeout=60)]
    assert sorted(keys) == sorted(producer.acked), "every acknowledged record, once"
    for p, m in _partition_meta(cluster, topic).items():
        wait_for(lambda: len({hashlib.sha256(log_bytes(cluster, b, topic, p)).digest() for b in m.replicas}) == 1,
                 30, f"byte-identical replicas of {topic}-{p}")
