"""Cluster mode against a secured ZooKeeper, as Kafka's `zookeeper.set.acl`: the broker logs in with SASL
(DIGEST-MD5, `zookeeper.sasl.jaas.config`), its znodes may be changed by its user alone and read by anyone,
SCRAM credentials are readable by its user alone; a refused login or ACLs without a login stop the broker
at start with one line naming the setting."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from pylog.launch.local_zookeeper import LocalZooKeeper
from pylog.launch.process import BrokerProcess
from tests.support.cluster import create_replicated
from tests.support.secure_broker import create_scram_users

ZK_USER, ZK_PASSWORD = "kafka", "kafka-zk-secret"


def _login(password: str) -> str:
    return f'org.apache.zookeeper.server.auth.DigestLoginModule required username="{ZK_USER}" password="{password}";'


@pytest.fixture(scope="module")
def secured_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    zk = LocalZooKeeper(tmp_path_factory.mktemp("secured-zk"), sasl_users={ZK_USER: ZK_PASSWORD})
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


def _broker(tmp_path: Path, zk: LocalZooKeeper, chroot: str, **settings: object) -> BrokerProcess:
    return BrokerProcess(tmp_path / f"broker-{uuid.uuid4().hex[:6]}", settings={
        "zookeeper.connect": f"{zk.connect}{chroot}", "broker.id": 0, "offsets.topic.replication.factor": 1,
        "zookeeper.session.timeout.ms": 6000, **settings})


def test_a_broker_with_zookeeper_set_acl_keeps_its_znodes_its_own(secured_zookeeper: LocalZooKeeper,
                                                                   tmp_path: Path) -> None:
    chroot = f"/acl-{uuid.uuid4().hex[:6]}"
    broker = _broker(tmp_path, secured_zookeeper, chroot, **{"zookeeper.set.acl": "true",
                                                            "zookeeper.sasl.jaas.config": _login(ZK_PASSWORD)}).start()
    try:
        topic = "guarded"
        create_replicated(broker.bootstrap, topic, 1, rf=1)
        create_scram_users(broker.bootstrap, {"dana": "dana-secret"})
        anonymous = KazooClient(hosts=f"{secured_zookeeper.connect}{chroot}")
        anonymous.start()
        try:
            assert anonymous.get("/brokers/ids/0")[0]                     # the world reads what is not secret
            acls, _ = anonymous.get_acls(f"/brokers/topics/{topic}")
            assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {
                ("sasl", ZK_USER, Permissions.ALL), ("world", "anyone", Permissions.READ)}
            with pytest.raises(NoAuthError):
                anonymous.set(f"/brokers/topics/{topic}", b"{}")           # ... and changes nothing
            with pytest.raises(NoAuthError):
                anonymous.delete("/controller")
            with pytest.raises(NoAuthError):
                anonymous.get("/config/users/dana")                       # SCRAM credentials: the brokers' alone
        finally:
            anonymous.stop()
        own = KazooClient(hosts=f"{secured_zookeeper.connect}{chroot}", sasl_options={
            "mechanism": "DIGEST-MD5", "username": ZK_USER, "password": ZK_PASSWORD})
        own.start()
        try:
            assert b"SCRAM-SHA-512" in own.get("/config/users/dana")[0]
        finally:
            own.stop()
    finally:
        broker.close()


@pytest.mark.parametrize("settings, message", [
    ({"zookeeper.sasl.jaas.config": _login("wrong")},
     f"ZooKeeper at .* refused the SASL login of user '{ZK_USER}': check zookeeper.sasl.jaas.config"),
    ({"zookeeper.set.acl": "true"}, "zookeeper.set.acl=true, but the brokers do not log in to ZooKeeper"),
])
def test_a_zookeeper_login_that_cannot_work_stops_the_broker_at_start_in_one_line(
        secured_zookeeper: LocalZooKeeper, tmp_path: Path, settings: dict[str, object], message: str) -> None:
    broker = _broker(tmp_path, secured_zookeeper, f"/bad-{uuid.uuid4().hex[:6]}", **settings)
    try:
        with pytest.raises(RuntimeError) as failed:
            broker.start(timeout=20)
        import re
        assert re.search(message, str(failed.value)), str(failed.value)[-600:]
        assert "Traceback" not in broker.log_text()
    finally:
        broker.close()
