"""Cluster mode end to end (issue 11): a real ZooKeeper and three real `pylog broker` processes.

Each test starts from the shared three-broker cluster of this module (ZooKeeper session timeout 2.5 s,
replica.lag.time.max.ms 1 s, min.insync.replicas 2) with real clients: confluent-kafka for produce
and consume, raw protocol requests where a test must address one broker. A test that kills, stops
or freezes brokers brings every one of them back and waits for full ISRs before it ends.
"""
from __future__ import annotations

import datetime
import re
import time
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from broker.cluster import zk_layout
from broker.cluster.role_requests import ControllerStamp, PartitionInfo, leader_and_isr, update_metadata
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_layout import BrokerRegistration, PartitionState
from kafka_protocol.record_builder import Record, encode_batch
from pylog.launch.local_cluster import LocalCluster
from pylog.launch.local_zookeeper import LocalZooKeeper
from tests.support.clients import consume, unique_name
from tests.support.cluster import (AckedProducer, acks_all_producer as _producer, assert_replicas_identical,
                                   broker_metrics as _metrics, cluster_admin as _admin, cluster_meta as _partition_meta,
                                   create_replicated, leader, racked_cluster, wait_full_isr)
from tests.support.waiting import wait_for
from tests.support.wire import WireClient

@pytest.fixture(scope="module")
def cluster(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with racked_cluster(zookeeper, tmp_path_factory.mktemp("cluster"), "replication") as c:
        yield c


@pytest.fixture(autouse=True)
def _cluster_whole_after_each_test(cluster: LocalCluster) -> Iterator[None]:
    """A test that fails between its kills and restarts must not fail the tests after it (they share the cluster)."""
    yield
    cluster.restore()


def _create(c: LocalCluster, topic: str, partitions: int = 1, rf: int = 3, **config: str) -> None:
    create_replicated(c.bootstrap, topic, partitions, rf, **config)


def _leader(c: LocalCluster, topic: str, partition: int = 0) -> int:
    return leader(c.bootstrap, topic, partition)


def test_every_broker_serves_the_same_metadata_and_replicas_hold_identical_logs(cluster: LocalCluster) -> None:
    topic = unique_name("replicated")
    _create(cluster, topic, partitions=3)
    # CreateTopics answers once the broker that took it knows the leaders; the others follow in moments
    views = [wait_for(lambda: len(_partition_meta(cluster, topic, via=b)) == 3 and _partition_meta(cluster, topic, via=b),
                      10, f"broker {b} seeing {topic}") for b in range(3)]
    for p in range(3):
        leaders = {v[p].leader for v in views}
        assert len(leaders) == 1 and leaders.pop() in (0, 1, 2)
        assert sorted(views[0][p].replicas) == [0, 1, 2]
    wait_for(lambda: all(sorted(_partition_meta(cluster, topic)[p].isrs) == [0, 1, 2] for p in range(3)),
             10, "every replica in sync")
    producer = _producer(cluster)
    acked: list[tuple[int, int]] = []
    for i in range(3000):
        producer.produce(topic, key=str(i).encode(), value=b"v%d" % i,
                         on_delivery=lambda err, msg: acked.append((msg.partition(), msg.offset())) if err is None
                         else pytest.fail(f"delivery failed: {err}"))
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == 3000
    got = consume(cluster.bootstrap, topic, range(3), 3000)
    assert sorted(int(m.key()) for m in got) == list(range(3000))
    assert_replicas_identical(cluster, topic, 3, timeout_s=10)


def test_a_follower_refuses_produce_with_not_leader_or_follower(cluster: LocalCluster) -> None:
    topic = unique_name("notleader")
    _create(cluster, topic)
    leader = _leader(cluster, topic)
    follower = next(b for b in range(3) if b != leader)
    batch = encode_batch([Record(0, int(time.time() * 1000), None, b"x")])
    request = ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),))
    with WireClient("127.0.0.1", cluster.broker(follower).port) as wire:
        response = wire.request(request)
    assert response.responses[0].partition_responses[0].error_code == 6        # NOT_LEADER_OR_FOLLOWER
    with WireClient("127.0.0.1", cluster.broker(leader).port) as wire:
        response = wire.request(request)
    assert response.responses[0].partition_responses[0].error_code == 0


def test_replication_factor_above_the_live_brokers_is_refused(cluster: LocalCluster) -> None:
    topic = unique_name("toomany")
    with pytest.raises(KafkaException) as info:
        _create(cluster, topic, rf=4)
    assert info.value.args[0].code() == 38                                      # INVALID_REPLICATION_FACTOR
    assert "larger than available brokers: 3" in info.value.args[0].str()


def _full_isr(c: LocalCluster, topic: str, partitions: int = 1) -> None:
    wait_full_isr(c.bootstrap, topic, partitions)


def _read_keys(c: LocalCluster, topic: str, partitions: int, count: int) -> list[int]:
    return [int(m.key()) for m in consume(c.bootstrap, topic, range(partitions), count, timeout=60)]


def test_acked_records_survive_ten_leader_kills_exactly_once(cluster: LocalCluster) -> None:
    topic = unique_name("killloop")
    _create(cluster, topic, partitions=2)
    _full_isr(cluster, topic, 2)
    producer = AckedProducer(cluster.bootstrap, topic, partitions=2)
    producer.start()
    try:
        for round_ in range(10):
            wait_for(lambda: producer.acked_count() > 200 * (round_ + 1), 30, "the producer making progress")
            victim = _leader(cluster, topic, round_ % 2)
            cluster.kill(victim)
            before = producer.acked_count()
            cluster.restart(victim)           # registers once its old session has expired
            wait_for(lambda: producer.acked_count() > before + 100, 30, f"acks after killing broker {victim}")
            _full_isr(cluster, topic, 2)
    finally:
        producer.finish()
    assert not producer.failed, producer.failed[:3]
    keys = _read_keys(cluster, topic, 2, producer.sent)
    assert len(keys) == len(set(keys)), "a record was read twice"
    assert producer.acked <= set(keys), f"{len(producer.acked - set(keys))} acknowledged records were lost"
    assert len(producer.acked) == producer.sent
    assert_replicas_identical(cluster, topic, 2, brokers=(1, 2))


def test_a_frozen_follower_leaves_the_isr_produce_goes_on_and_it_rejoins_after_thawing(cluster: LocalCluster) -> None:
    topic = unique_name("frozen")
    _create(cluster, topic)
    _full_isr(cluster, topic)
    follower = next(b for b in range(3) if b != _leader(cluster, topic))
    producer = AckedProducer(cluster.bootstrap, topic)
    producer.start()
    try:
        wait_for(lambda: producer.acked_count() > 100, 20, "acks")
        cluster.freeze(follower)
        frozen_at = time.monotonic()
        wait_for(lambda: follower not in _partition_meta(cluster, topic)[0].isrs, 10, "the frozen follower leaving")
        left_after = time.monotonic() - frozen_at
        led_by = _leader(cluster, topic)
        # the leader's metrics tell the operator the same (the ISR change counters: of whichever broker led)
        assert _metrics(cluster, led_by)["pylog_under_replicated_partitions"] >= 1
        assert sum(_metrics(cluster, b)["pylog_isr_shrinks_total"] for b in range(3) if b != follower) >= 1
        before = producer.acked_count()
        wait_for(lambda: producer.acked_count() > before + 200, 10, "acks=all with two in-sync replicas")
    finally:
        cluster.thaw(follower)
    try:
        _full_isr(cluster, topic)
    finally:
        producer.finish()
    # replica.lag.time.max.ms (1 s) + the leader's check every half of it + the write and the controller's
    # UpdateMetadata; each poll above is a new AdminClient whose bootstrap may try the frozen broker first
    # (measured 1.5-3.0 s, once 3.04 s with three processes of the suite beside it)
    assert left_after < 1.0 + 3.0, f"left the ISR {left_after:.1f}s after freezing (replica.lag.time.max.ms 1 s)"
    assert sum(_metrics(cluster, b)["pylog_isr_expands_total"] for b in range(3)) >= 1
    # one active controller (a thawed broker that was the controller resigns once it sees its session gone)
    wait_for(lambda: sorted(_metrics(cluster, b)["pylog_controller"] for b in range(3)) == [0, 0, 1], 15,
             "exactly one broker reporting itself the controller")
    keys = _read_keys(cluster, topic, 1, producer.sent)
    assert sorted(keys) == list(range(producer.sent))
    assert_replicas_identical(cluster, topic, 1)


def _produce_one(c: LocalCluster, topic: str, acks: str, timeout_s: float = 8.0) -> Any:
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": acks, "message.timeout.ms": int(timeout_s * 1000),
                  "retries": 0, "log_level": 0})
    result: list[Any] = []
    p.produce(topic, value=b"one", on_delivery=lambda err, msg: result.append(err))
    p.flush(timeout_s + 5)
    return result[0]


def test_with_two_brokers_down_acks_all_is_refused_and_acks_1_still_works(cluster: LocalCluster) -> None:
    topic = unique_name("twodown")
    _create(cluster, topic)
    _full_isr(cluster, topic)
    leader = _leader(cluster, topic)
    others = [b for b in range(3) if b != leader]
    try:
        for b in others:
            cluster.kill(b)
        wait_for(lambda: list(_partition_meta(cluster, topic, via=leader)[0].isrs) == [leader], 15,
                 "the ISR shrinking to the leader")
        err = _produce_one(cluster, topic, "all")
        assert err is not None and err.code() == 19, f"acks=all answered {err}"       # NOT_ENOUGH_REPLICAS
        assert _produce_one(cluster, topic, "1") is None
        got = consume(cluster.broker(leader).bootstrap, topic, [0], 2, timeout=5)
        assert [m.value() for m in got] == [b"one"], "only the acks=1 record was written"
    finally:
        for b in others:
            cluster.restart(b)
    _full_isr(cluster, topic)


def test_a_new_controller_is_elected_and_still_elects_leaders(cluster: LocalCluster) -> None:
    topic = unique_name("controller")
    _create(cluster, topic, partitions=3)
    _full_isr(cluster, topic, 3)
    admin = _admin(cluster)
    controller = admin.list_topics(timeout=10).controller_id
    try:
        cluster.kill(controller)
        survivor = next(b for b in range(3) if b != controller)
        wait_for(lambda: AdminClient({"bootstrap.servers": cluster.broker(survivor).bootstrap})
                 .list_topics(timeout=5).controller_id not in (-1, controller), 15, "a new controller")
        meta = wait_for(lambda: (lambda m: m if all(p.leader not in (-1, controller) for p in m.values()) else None)(
            _partition_meta(cluster, topic, via=survivor)), 15, "the dead controller's leaderships moving")
        victim = next(m.leader for m in meta.values())
        cluster.kill(victim)
        last = next(b for b in range(3) if b not in (controller, victim))
        wait_for(lambda: all(m.leader == last for m in _partition_meta(cluster, topic, via=last).values()), 15,
                 "the new controller electing leaders again")
    finally:
        for b in range(3):
            if not cluster.broker(b).alive():
                cluster.restart(b)
    _full_isr(cluster, topic, 3)


def test_sigterm_moves_leadership_away_before_the_broker_stops(cluster: LocalCluster) -> None:
    topic = unique_name("controlled")
    _create(cluster, topic)
    _full_isr(cluster, topic)
    leader = _leader(cluster, topic)
    producer = AckedProducer(cluster.bootstrap, topic)
    producer.start()
    try:
        wait_for(lambda: producer.acked_count() > 100, 20, "acks")
        started = time.monotonic()
        assert cluster.stop_broker(leader) == 0
        stopped_after = time.monotonic() - started
        before = producer.acked_count()
        wait_for(lambda: producer.acked_count() > before + 100, 15, "acks from the new leader")
    finally:
        cluster.restart(leader)
        producer.finish()
    assert stopped_after < 5.0, f"controlled shutdown took {stopped_after:.1f}s"
    assert not producer.failed
    _full_isr(cluster, topic)
    # back in the ISR but not leading (auto.leader.rebalance.enable is off here): a preferred election
    # (ElectLeaders, KIP-460; kafka-leader-election --election-type preferred) gives it its leadership back
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka import ElectionType
    assert _leader(cluster, topic) != leader == _partition_meta(cluster, topic)[0].replicas[0]
    admin = _admin(cluster)
    result = admin.elect_leaders(ElectionType.PREFERRED, [TP(topic, 0)]).result(30)
    assert [(tp.topic, tp.partition, err) for tp, err in result.items()] == [(topic, 0, None)]
    assert _leader(cluster, topic) == leader
    again = admin.elect_leaders(ElectionType.PREFERRED, [TP(topic, 0), TP(topic, 9)]).result(30)
    assert {tp.partition: err.code() for tp, err in again.items()} == {
        0: KafkaError.ELECTION_NOT_NEEDED, 9: KafkaError.UNKNOWN_TOPIC_OR_PART}


def _raw_produce(c: LocalCluster, broker: int, topic: str, value: bytes, acks: int = -1, timeout_s: float = 3.0) -> int:
    """One record straight to `broker` (no client-side routing); the partition's error code."""
    batch = encode_batch([Record(0, int(time.time() * 1000), None, value)])
    request = ProduceRequest(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=timeout_s),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=0, records=batch),)),))
    with WireClient("127.0.0.1", c.broker(broker).port, timeout=timeout_s + 10) as wire:
        response = wire.request(request)
    return int(response.responses[0].partition_responses[0].error_code)


def test_a_zombie_leader_gets_no_write_acknowledged_and_truncates_its_divergent_tail(cluster: LocalCluster) -> None:
    topic = unique_name("zombie")
    _create(cluster, topic)
    _full_isr(cluster, topic)
    zombie = _leader(cluster, topic)
    survivor = next(b for b in range(3) if b != zombie)
    assert _raw_produce(cluster, zombie, topic, b"before") == 0
    cluster.freeze(zombie)
    try:
        wait_for(lambda: _partition_meta(cluster, topic, via=survivor)[0].leader not in (-1, zombie), 15,
                 "a new leader while the old one is frozen past its ZooKeeper session")
        new_leader = _partition_meta(cluster, topic, via=survivor)[0].leader
        assert _raw_produce(cluster, new_leader, topic, b"after") == 0
    finally:
        cluster.thaw(zombie)
    # straight after thawing, before it hears from ZooKeeper, the zombie still thinks it leads
    code = _raw_produce(cluster, zombie, topic, b"zombie write")
    assert code != 0, "a deposed leader acknowledged an acks=all write"
    _full_isr(cluster, topic)
    assert_replicas_identical(cluster, topic, 1)
    values = [m.value() for m in consume(cluster.bootstrap, topic, [0], 3, timeout=10)]
    assert values == [b"before", b"after"], values


def test_a_group_keeps_its_committed_offsets_when_its_coordinators_broker_is_killed(cluster: LocalCluster) -> None:
    topic, group = unique_name("grouped"), unique_name("group")
    _create(cluster, topic)
    producer = _producer(cluster)
    for i in range(100):
        producer.produce(topic, key=str(i).encode(), value=b"v")
    assert producer.flush(30) == 0

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "log_level": 0})
        c.subscribe([topic])
        return c

    first = consumer()
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < 40 and time.monotonic() < deadline:
        for m in first.consume(40 - len(got), 0.5):
            assert m.error() is None, m.error()
            got.append(int(m.key()))
    first.commit(asynchronous=False)
    first.close()
    assert got == list(range(40))
    admin = _admin(cluster)      # keep a reference: a collected client cancels its futures
    coordinator = admin.describe_consumer_groups([group])[group].result(10).coordinator.id
    cluster.kill(coordinator)
    try:
        second = consumer()
        rest: list[int] = []
        deadline = time.monotonic() + 40
        while len(rest) < 60 and time.monotonic() < deadline:
            for m in second.consume(60 - len(rest), 0.5):
                assert m.error() is None, m.error()
                rest.append(int(m.key()))
        second.close()
    finally:
        cluster.restart(coordinator)
    assert rest == list(range(40, 100)), "the group restarted from its committed offset, once"
    _full_isr(cluster, topic)


def test_a_deleted_and_recreated_topic_holds_only_its_new_records_on_every_broker(cluster: LocalCluster) -> None:
    topic = unique_name("recreated")
    _create(cluster, topic)
    producer = _producer(cluster)
    for i in range(50):
        producer.produce(topic, value=b"old")
    assert producer.flush(30) == 0
    admin = _admin(cluster)
    admin.delete_topics([topic], operation_timeout=15)[topic].result(20)
    def forgotten(b: int) -> bool:        # all topics: asking for this one would auto-create it again
        return topic not in AdminClient({"bootstrap.servers": cluster.broker(b).bootstrap}).list_topics(
            timeout=10).topics
    wait_for(lambda: all(forgotten(b) for b in range(3)), 15, "every broker forgetting the topic")
    _create(cluster, topic)
    _full_isr(cluster, topic)
    for i in range(5):
        producer.produce(topic, value=b"new")
    assert producer.flush(30) == 0
    assert [m.value() for m in consume(cluster.bootstrap, topic, [0], 6, timeout=8)] == [b"new"] * 5
    assert_replicas_identical(cluster, topic, 1)


def test_added_partitions_get_leaders_and_replicas(cluster: LocalCluster) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = unique_name("grown")
    _create(cluster, topic)
    admin = _admin(cluster)
    admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=15)[topic].result(20)
    wait_for(lambda: len(_partition_meta(cluster, topic)) == 3, 10, "three partitions in the metadata")
    _full_isr(cluster, topic, 3)
    producer = _producer(cluster)
    for p in range(3):
        producer.produce(topic, value=b"p%d" % p, partition=p)
    assert producer.flush(30) == 0
    assert_replicas_identical(cluster, topic, 3)


def test_a_topic_config_change_reaches_every_replica(cluster: LocalCluster) -> None:
    from confluent_kafka.admin import ConfigResource

    topic = unique_name("configured")
    _create(cluster, topic)
    admin = _admin(cluster)
    resource = ConfigResource("topic", topic, set_config={"retention.ms": "123456"})
    admin.alter_configs([resource])[resource].result(15)

    def retention(b: int) -> str:
        client = AdminClient({"bootstrap.servers": cluster.broker(b).bootstrap})
        described = client.describe_configs([ConfigResource("topic", topic)])
        return str(next(iter(described.values())).result(10)["retention.ms"].value)
    wait_for(lambda: all(retention(b) == "123456" for b in range(3)), 10, "retention.ms on every broker")


def _zk(c: LocalCluster) -> ZkClient:
    zk = ZkClient(c.zk_connect, 10000, 10000)
    zk.start()
    return zk


def _all_brokers_see_leader(c: LocalCluster, topic: str, expected: int) -> bool:
    return all(_partition_meta(c, topic, via=b)[0].leader == expected for b in range(3))


def _one_partition_topic(c: LocalCluster, prefix: str) -> tuple[str, int, int]:
    """A new in-sync topic of one partition: its name, its leader and another replica."""
    topic = unique_name(prefix)
    _create(c, topic)
    _full_isr(c, topic, 1)
    leader = _leader(c, topic)
    return topic, leader, next(b for b in range(3) if b != leader)


def test_brokers_take_their_roles_from_the_controllers_requests_not_from_the_state_znode(cluster: LocalCluster) -> None:
    """A partition state written to ZooKeeper behind the controller's back changes no broker's role: roles
    arrive in LeaderAndIsr (and UpdateMetadata) from the controller, as in Kafka's ZooKeeper mode."""
    topic, leader, other = _one_partition_topic(cluster, "wire-roles")
    zk = _zk(cluster)
    path = zk_layout.partition_state_path(topic, 0)
    try:
        data, stat = zk.kazoo.get(path)
        state = PartitionState.decode(topic, 0, data)
        rogue = PartitionState(other, state.leader_epoch + 1, state.isr, state.controller_epoch)
        zk.kazoo.set(path, rogue.encode(), stat.version)
        time.sleep(2.0)
        assert _all_brokers_see_leader(cluster, topic, leader)
        producer = _producer(cluster)
        producer.produce(topic, b"still-the-same-leader", partition=0)
        assert producer.flush(15) == 0
    finally:
        data, stat = zk.kazoo.get(path)
        zk.kazoo.set(path, state.encode(), stat.version)
        zk.stop()
    assert consume(cluster.bootstrap, topic, [0], 1, timeout=15)[0].value() == b"still-the-same-leader"


def test_cluster_brokers_advertise_and_fence_the_controllers_requests(cluster: LocalCluster) -> None:
    """ApiVersions lists LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8 (as Kafka 3.9's ZooKeeper-mode
    brokers do); a request from a deposed controller epoch or for an earlier registration of the broker is
    refused and changes no role, and a truncated one closes its connection only."""
    topic, leader, other = _one_partition_topic(cluster, "fenced")
    zk = _zk(cluster)
    try:
        controller_epoch = int(zk.kazoo.get(zk_layout.CONTROLLER_EPOCH)[0])
        broker_epoch = int(zk.kazoo.get(zk_layout.broker_path(other))[1].czxid)
        state = PartitionState.decode(topic, 0, zk.kazoo.get(zk_layout.partition_state_path(topic, 0))[0])
    finally:
        zk.stop()
    grab = {(topic, 0): PartitionInfo(PartitionState(other, state.leader_epoch + 5, (other,), controller_epoch),
                                      99, (0, 1, 2))}
    brokers = {b: BrokerRegistration(b, "127.0.0.1", cluster.broker(b).port) for b in range(3)}
    with WireClient("127.0.0.1", cluster.broker(other).port) as wire:
        versions = {k.api_key: (k.min_version, k.max_version) for k in wire.request(ApiVersionsRequest(
            client_software_name="pylog-tests", client_software_version="1")).api_keys}
        assert (versions[4], versions[5], versions[6]) == ((7, 7), (4, 4), (8, 8))
        stale = ControllerStamp(controller_id=other, controller_epoch=controller_epoch - 1)
        response = wire.request(leader_and_isr(stale, broker_epoch, grab, brokers))
        assert response.error_code == ErrorCode.stale_controller_epoch
        response = wire.request(update_metadata(stale, broker_epoch, grab, brokers))
        assert response.error_code == ErrorCode.stale_controller_epoch
        current = ControllerStamp(controller_id=other, controller_epoch=controller_epoch)
        response = wire.request(leader_and_isr(current, broker_epoch - 1, grab, brokers))
        assert response.error_code == ErrorCode.stale_broker_epoch
    with WireClient("127.0.0.1", cluster.broker(other).port) as wire:       # a truncated LeaderAndIsr
        frame = wire.encode(leader_and_isr(current, broker_epoch, grab, brokers))
        wire.send_raw((len(frame) - 14).to_bytes(4, "big") + frame[4:-10])
        assert wire.read_frame() is None            # that connection is closed, nothing is applied
    assert _all_brokers_see_leader(cluster, topic, leader)


def test_back_to_back_acks_all_produces_are_appended_and_answered_in_request_order(cluster: LocalCluster) -> None:
    """Produces sent back to back on one connection, each waiting for its in-sync replicas, with a Metadata
    among them: every response comes back in request order and the records are in the log in that order."""
    topic = unique_name("back-to-back")
    _create(cluster, topic)
    _full_isr(cluster, topic, 1)
    leader = _leader(cluster, topic)
    # the leader's own view too: under load the bootstrap broker's metadata can be ahead of the leader's roles
    wait_for(lambda: _all_brokers_see_leader(cluster, topic, leader), 30, f"every broker seeing {leader} lead")

    def produce(i: int) -> ProduceRequest:
        batch = encode_batch([Record(j, int(time.time() * 1000), None, f"r{i}-{j}".encode()) for j in range(50)])
        return ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10), topic_data=(
            TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),))

    requests: list[Any] = [produce(i) for i in range(6)]
    requests.insert(3, MetadataRequest(topics=(MetadataRequestTopic(name=topic, topic_id=None),),
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    requests += [produce(i) for i in range(6, 12)]
    with WireClient("127.0.0.1", cluster.broker(leader).port, timeout=30) as wire:
        frames = [wire.encode(r) for r in requests]
        wire.send_raw(b"".join(frames))
        answers = [wire.read_frame() for _ in requests]
    assert all(a is not None for a in answers)
    correlation_ids = [int.from_bytes(a[:4], "big") for a in answers if a is not None]
    assert correlation_ids == sorted(correlation_ids) and len(set(correlation_ids)) == len(requests)
    offsets = []
    for request, frame in zip(requests, answers):
        response = WireClient.decode_response(request, frame)
        if isinstance(request, ProduceRequest):
            part = response.responses[0].partition_responses[0]
            assert part.error_code == 0
            offsets.append(part.base_offset)
        else:
            assert response.topics[0].partitions[0].leader_id == leader
    assert offsets == [50 * i for i in range(12)]
    values = [m.value() for m in consume(cluster.bootstrap, topic, [0], 600, timeout=20)]
    assert values == [f"r{i}-{j}".encode() for i in range(12) for j in range(50)]


def test_explicit_replica_assignments_are_taken_and_checked_as_kafka_checks_them(cluster: LocalCluster) -> None:
    """kafka-topics --replica-assignment and kafka-topics --alter --partitions with one: the replicas (and so
    the preferred leaders) are the ones given; a duplicate broker, an unknown broker or a replication factor
    unlike the topic's is INVALID_REPLICA_ASSIGNMENT with Kafka's message."""
    from confluent_kafka.admin import NewPartitions, NewTopic
    topic = unique_name("placed")
    admin = _admin(cluster)
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[2, 0], [1, 2]])])[topic].result(30)
    wait_for(lambda: all(len(m.isrs) == 2 for m in _partition_meta(cluster, topic).values()), 15, "full ISRs")
    meta = _partition_meta(cluster, topic)
    assert [list(meta[p].replicas) for p in (0, 1)] == [[2, 0], [1, 2]]
    assert [meta[p].leader for p in (0, 1)] == [2, 1]
    admin.create_partitions([NewPartitions(topic, 3, replica_assignment=[[0, 1]])])[topic].result(30)
    wait_for(lambda: 2 in _partition_meta(cluster, topic) and _partition_meta(cluster, topic)[2].leader == 0, 15,
             "the added partition led by broker 0")
    assert list(_partition_meta(cluster, topic)[2].replicas) == [0, 1]
    for new, message in ((NewPartitions(topic, 4, replica_assignment=[[0, 7]]),
                          "Unknown broker(s) in replica assignment: 7."),
                         (NewPartitions(topic, 4, replica_assignment=[[1]]),
                          "Inconsistent replication factor between partitions")):
        with pytest.raises(KafkaException, match=re.escape(message)) as refused:
            admin.create_partitions([new])[topic].result(30)
        assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    dup = unique_name("dup")
    with pytest.raises(KafkaException, match="Duplicate replica assignment found") as refused:
        admin.create_topics([NewTopic(dup, 1, replica_assignment=[[1, 1]])])[dup].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
