"""Cluster mode: SCRAM users and ACLs live in ZooKeeper as Kafka 3.9's ZooKeeper mode keeps them, and every
broker follows a change within a second; brokers talk to each other over their inter-broker listener's
security. Three brokers, each with a PLAINTEXT listener (the tests' own clients, User:ANONYMOUS), a
SASL_PLAINTEXT one (SCRAM users) and INTERNAL, SASL_SSL with client certificates required and PLAIN,
between brokers (User:broker, a super user): replica fetchers, the controller's requests and the
transaction markers all log in there. ACLs are on with allow.everyone.if.no.acl.found."""
from __future__ import annotations

import datetime
import json
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest
from kio.static.primitive import i8, i32, i64

from kafka_protocol.security.scram import ScramClient
from pylog.launch.local_cluster import LocalCluster
from pylog.launch.process import BrokerProcess, free_port
from tests.support.certs import CertificateAuthority
from tests.support.cluster import create_replicated, leader, wait_full_isr
from tests.support.secure_broker import create_scram_users
from tests.support.wire import WireClient

REAUTH_MS = 3000          # the brokers' sessions with each other last 3 s: they renew them
SETTINGS = {"default.replication.factor": 3, "min.insync.replicas": 2, "offsets.topic.replication.factor": 3,
            "zookeeper.session.timeout.ms": 6000, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true", "super.users": "User:broker",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.internal.connections.max.reauth.ms": REAUTH_MS,
            "listener.name.internal.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                             'required username="broker" password="broker-secret" '
                                                             'user_broker="broker-secret";'}
SASL_PORTS: dict[int, int] = {}
INTERNAL_PORTS: dict[int, int] = {}


def _launch(broker_id: int, data_dir: Path, settings: dict[str, object]) -> BrokerProcess:
    port, SASL_PORTS[broker_id], INTERNAL_PORTS[broker_id] = free_port(), free_port(), free_port()
    listeners = (f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{SASL_PORTS[broker_id]},"
                 f"INTERNAL://127.0.0.1:{INTERNAL_PORTS[broker_id]}")
    return BrokerProcess(data_dir, port=port, settings={**settings, "listeners": listeners})


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("secure-cluster")
    ca = CertificateAuthority()
    tls = {"ssl.truststore.location": ca.write_pem(root / "ca.pem"),
           "ssl.keystore.location": ca.issue("localhost", hosts=("127.0.0.1",)).write_pem(root / "broker.pem")}
    c = LocalCluster(root, 3, {**SETTINGS, **tls}, zk_connect=zookeeper.connect,
                     chroot=f"/secure-{uuid.uuid4().hex[:6]}", launcher=_launch)
    try:
        yield c.start()
    finally:
        c.close()


def _logs_in(broker_id: int, user: str, password: str) -> bool:
    with WireClient("127.0.0.1", SASL_PORTS[broker_id]) as wire:
        if wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code != 0:
            return False
        client = ScramClient("SCRAM-SHA-512", user, password)
        first = wire.request(SaslAuthenticateRequest(auth_bytes=client.first()))
        if first is None or first.error_code != 0:
            return False
        final = wire.request(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)))
        return final is not None and final.error_code == 0


def _within(seconds: float, check) -> float:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if check():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds} s")


def test_a_user_created_on_one_broker_logs_in_on_every_broker_within_a_second(cluster: LocalCluster) -> None:
    create_scram_users(cluster.broker(0).bootstrap, {"dana": "dana-secret"})
    assert max(_within(5, lambda b=b: _logs_in(b, "dana", "dana-secret")) for b in (0, 1, 2)) < 1.0
    assert not _logs_in(2, "dana", "wrong")
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start()
    try:
        stored = json.loads(zk.get("/config/users/dana")[0])
        assert stored["version"] == 1 and stored["config"]["SCRAM-SHA-512"].startswith("salt=")
        assert "dana-secret" not in json.dumps(stored)
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/dana"} in changes
    finally:
        zk.stop()


def test_an_acl_created_on_one_broker_holds_on_every_leader_within_a_second(cluster: LocalCluster) -> None:
    topic = f"locked-{uuid.uuid4().hex[:6]}"
    create_replicated(cluster.bootstrap, topic, 3)
    wait_full_isr(cluster.bootstrap, topic, 3)
    assert {leader(cluster.bootstrap, topic, p) for p in range(3)} == {0, 1, 2}, "each broker leads one partition"
    admin = AdminClient({"bootstrap.servers": cluster.broker(0).bootstrap})
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*", "*", AclOperation.WRITE,
                      AclPermissionType.DENY)
    admin.create_acls([deny])[deny].result(timeout=20)

    def refused_everywhere() -> bool:
        results: list = []
        p = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0, "message.timeout.ms": 3000})
        for partition in range(3):
            p.produce(topic, b"x", partition=partition, on_delivery=lambda err, msg: results.append(err))
        p.flush(5)
        return len(results) == 3 and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                                          for e in results)
    assert _within(3.0, refused_everywhere) < 1.5      # a producer's own round trips included
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start()
    try:
        stored = json.loads(zk.get(f"/kafka-acl/Topic/{topic}")[0])
        assert stored == {"version": 1, "acls": [{"principal": "User:*", "permissionType": "Deny",
                                                   "operation": "Write", "host": "*"}]}
    finally:
        zk.stop()
    from confluent_kafka.admin import AclBindingFilter
    removed = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)])
    assert [len(f.result(timeout=20)) for f in removed.values()] == [1]
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start()
    try:
        _within(1.0, lambda: not zk.exists(f"/kafka-acl/Topic/{topic}"))
    finally:
        zk.stop()


def test_metadata_over_a_sasl_listener_gives_every_brokers_address_on_that_listener(cluster: LocalCluster) -> None:
    create_scram_users(cluster.broker(1).bootstrap, {"erin": "erin-secret"})
    conf = {"bootstrap.servers": f"127.0.0.1:{SASL_PORTS[2]}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "erin", "sasl.password": "erin-secret",
            "log_level": 0}

    def addresses() -> set[tuple[str, int]]:
        return {(b.host, b.port) for b in AdminClient(conf).list_topics(timeout=10).brokers.values()}
    _within(5, lambda: addresses() == {("127.0.0.1", SASL_PORTS[b]) for b in (0, 1, 2)})
    plain = {(b.host, b.port) for b in AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(
        timeout=10).brokers.values()}
    assert plain == {("127.0.0.1", cluster.broker(b).port) for b in (0, 1, 2)}


def _follower_fetch(topic: str) -> FetchRequest:
    return FetchRequest(cluster_id=None, replica_id=i32(1), max_wait=datetime.timedelta(0), min_bytes=i32(0),
                        max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
                        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), last_fetched_epoch=i32(-1),
                            log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
                        forgotten_topics_data=(), rack_id="")


def test_brokers_replicate_over_the_sasl_ssl_inter_broker_listener_as_their_own_user(cluster: LocalCluster) -> None:
    """Every broker registers INTERNAL as the address its peers connect to; with CLUSTER_ACTION denied to
    User:ANONYMOUS (what a PLAINTEXT peer would be) a new topic still gets leaders, a full ISR and acks=all
    writes, so fetchers and the controller log in as User:broker; an anonymous follower fetch is refused."""
    # Note: the controller's requests and follower fetches need CLUSTER_ACTION, so they would stop here
    # if the brokers still came in anonymously.
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start()
    try:
        for b in (0, 1, 2):
            registered = json.loads(zk.get(f"/brokers/ids/{b}")[0])
            assert f"INTERNAL://127.0.0.1:{INTERNAL_PORTS[b]}" in registered["endpoints"]
            assert registered["listener_security_protocol_map"]["INTERNAL"] == "SASL_SSL"
    finally:
        zk.stop()
    admin = AdminClient({"bootstrap.servers": cluster.broker(0).bootstrap})
    allow = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                      AclOperation.CLUSTER_ACTION, AclPermissionType.DENY)
    for future in admin.create_acls([allow, deny]).values():
        future.result(timeout=20)
    try:
        topic = f"internal-{uuid.uuid4().hex[:6]}"
        time.sleep(1.0)                                   # every broker follows the ACL change within a second
        create_replicated(cluster.bootstrap, topic, 3)
        wait_full_isr(cluster.bootstrap, topic, 3)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
        delivered: list = []
        for partition in range(3):
            p.produce(topic, b"v", partition=partition, on_delivery=lambda err, msg: delivered.append(err))
        assert p.flush(20) == 0 and delivered == [None, None, None]
        with WireClient("127.0.0.1", cluster.broker(leader(cluster.bootstrap, topic, 0)).port) as wire:
            answer = wire.request(_follower_fetch(topic))        # Kafka answers each partition so
            assert [p.error_code for t in answer.responses for p in t.partitions] == [
                ErrorCode.topic_authorization_failed]
    finally:
        from confluent_kafka.admin import AclBindingFilter
        admin.delete_acls([AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                            "User:ANONYMOUS", None, AclOperation.ANY, AclPermissionType.ANY)])
    # the cluster has run for several session lifetimes: each peer connection was replaced before its
    # session ran out, never cut by the broker for an expired session
    for b in (0, 1, 2):
        assert "SASL session expired" not in cluster.broker(b).log_text()
