"""Cluster mode's ZooKeeper parts against a real ZooKeeper (the Debian package, started by
pylog/launch/local_zookeeper.py): broker registration in Kafka's layout, the live broker set,
duplicate broker ids, a restart after SIGKILL, and controller election fenced by epoch, including
a controller frozen (SIGSTOP) past its session, which must not get a write through afterwards.
Each test works under its own chroot, so they share one ZooKeeper."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from broker.cluster import zk_layout
from broker.cluster.controller_election import ControllerElection, ControllerMovedError, ControllerToken
from broker.cluster.membership import BrokerIdInUseError, BrokerMembership
from broker.cluster.zk_client import ZkClient, ZooKeeperUnavailableError
from broker.cluster.zk_layout import BrokerRegistration, PartitionState
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
def test_brokers_register_in_kafkas_layout_and_leave_the_live_set_with_their_session(zk_connect, zk_clients):
    zk1, zk2, observer = zk_clients(zk_connect), zk_clients(zk_connect), zk_clients(zk_connect)
    BrokerMembership(zk1, BrokerRegistration(1, "127.0.0.1", 9001)).register()
    BrokerMembership(zk2, BrokerRegistration(2, "127.0.0.1", 9002)).register()
    seen: list[list[int]] = []
    view = BrokerMembership(observer, BrokerRegistration(99, "127.0.0.1", 1))
    view.watch(lambda live: seen.append(sorted(live)))
    wait_for(lambda: sorted(view.live()) == [1, 2], what="both brokers live")
    data, stat = observer.kazoo.get("/brokers/ids/1")
    assert stat.ephemeralOwner == zk1.session_id
    v = json.loads(data)
    assert v["version"] == 5 and v["endpoints"] == ["PLAINTEXT://127.0.0.1:9001"] and v["port"] == 9001
    for path in zk_layout.TOP_LEVEL_PATHS:
        assert observer.kazoo.exists(path), path
    zk2.stop()
    wait_for(lambda: sorted(view.live()) == [1], what="broker 2 gone")
    assert seen[-1] == [1] and [1, 2] in seen


def test_a_second_live_broker_with_the_same_id_is_refused_naming_the_id(zk_connect, zk_clients):
    BrokerMembership(zk_clients(zk_connect), BrokerRegistration(5, "127.0.0.1", 9005)).register()
    other = zk_clients(zk_connect, session_ms=1000)
    started = time.monotonic()
    with pytest.raises(BrokerIdInUseError, match="broker.id 5 is registered at /brokers/ids/5 by another live"):
        BrokerMembership(other, BrokerRegistration(5, "127.0.0.1", 9006)).register()
    assert time.monotonic() - started < 8


def _member(connect: str, broker_id: int, session_ms: int, stderr_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.support.zk_member", connect, str(broker_id), str(session_ms)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=open(stderr_path, "w"), text=True,
                            start_new_session=True)


class Events:
    """The JSON lines a tests.support.zk_member process prints, collected by a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.lines = proc, []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def seen(self, **match) -> list[dict]:
        return [e for e in list(self.lines) if all(e.get(k) == v for k, v in match.items())]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def test_a_broker_restarted_after_sigkill_reregisters_once_its_old_session_expires(zk_connect, zk_clients, tmp_path):
    member = Events(_member(zk_connect, 7, 2000, tmp_path / "member.err"))
    try:
        wait_for(lambda: member.seen(event="registered"), what="member registered")
    finally:
        member.stop()                                    # SIGKILL: its session lingers for up to 2 s
    zk = zk_clients(zk_connect, session_ms=2000)
    started = time.monotonic()
    BrokerMembership(zk, BrokerRegistration(7, "127.0.0.1", 9007)).register()
    assert time.monotonic() - started < 2000 / 1000 + 3
    assert zk.kazoo.get("/brokers/ids/7")[1].ephemeralOwner == zk.session_id


def test_one_controller_is_elected_and_a_new_one_with_a_higher_epoch_when_it_goes(zk_connect, zk_clients):
    elected: dict[int, list[ControllerToken]] = {1: [], 2: [], 3: []}
    elections = {}
    zks = {b: zk_clients(zk_connect) for b in (1, 2, 3)}
    for b, zk in zks.items():
        elections[b] = ControllerElection(zk, b, on_elected=elected[b].append)
        elections[b].start()
    first = wait_for(lambda: [b for b in elected if elected[b]], what="a controller")
    assert len(first) == 1
    winner = first[0]
    token = elected[winner][0]
    assert token.epoch == 1 and elections[winner].token == token
    assert all(e.active_controller == winner for e in elections.values()) or wait_for(
        lambda: all(e.active_controller == winner for e in elections.values()), what="everyone sees the controller")
    assert zk_layout.decode_controller(zks[winner].kazoo.get("/controller")[0]) == winner
    # the controller writes a partition state under its token
    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=token.epoch)
    zks[winner].kazoo.ensure_path("/brokers/topics/t/partitions/0")
    elections[winner].commit_fenced(token, lambda tx: tx.create("/brokers/topics/t/partitions/0/state", state.encode()))
    zks[winner].stop()                                   # its session ends: /controller goes at once
    second = wait_for(lambda: [b for b in (1, 2, 3) if b != winner and elected[b]], what="a new controller")
    assert len(second) == 1
    new = elected[second[0]][0]
    assert new.epoch == 2
    assert zk_layout.decode_controller_epoch(zks[second[0]].kazoo.get("/controller_epoch")[0]) == 2
    # the old token is fenced off, the new one writes
    with pytest.raises(ControllerMovedError, match="controller epoch 1 is over"):
        elections[second[0]].commit_fenced(token, lambda tx: tx.set_data("/brokers/topics/t/partitions/0/state", b"x"))
    moved = PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=new.epoch)
    elections[second[0]].commit_fenced(new, lambda tx: tx.set_data("/brokers/topics/t/partitions/0/state", moved.encode()))
    data, _ = zks[second[0]].kazoo.get("/brokers/topics/t/partitions/0/state")
    assert PartitionState.decode("t", 0, data) == moved


def test_a_controller_frozen_past_its_session_cannot_write_after_a_new_one_is_elected(zk_connect, zk_clients, tmp_path):
    zk = zk_clients(zk_connect)
    zk.kazoo.ensure_path("/pylog-test-fenced")
    zombie = Events(_member(zk_connect, 1, 1500, tmp_path / "zombie.err"))
    try:
        wait_for(lambda: zombie.seen(event="elected"), what="the member elected")
        wait_for(lambda: zombie.seen(event="write", ok=True), what="its first fenced write")
        os.killpg(zombie.proc.pid, signal.SIGSTOP)
        stopped_at = len(zombie.lines)
        elected: list[ControllerToken] = []
        rival = ControllerElection(zk, 2, on_elected=elected.append)
        rival.start()
        wait_for(lambda: elected, timeout_s=10, what="a new controller once the frozen one's session expired")
        assert elected[0].epoch == 2
        os.killpg(zombie.proc.pid, signal.SIGCONT)
        try:
            wait_for(lambda: [e for e in zombie.lines[stopped_at:] if e.get("error") == "moved"],
                     what="the zombie's write refused for its epoch, once it has a session again")
        except AssertionError as e:
            os.kill(zombie.proc.pid, signal.SIGUSR2)
            time.sleep(0.5)
            raise AssertionError(f"{e}; events {zombie.lines[stopped_at:][:12]}; stderr "
                                 f"{(tmp_path / 'zombie.err').read_text()[-6000:]}") from None
        after = [e for e in zombie.lines[stopped_at:] if e["event"] == "write"]
        # a write may have been in flight at SIGSTOP; none succeeds once the rival has been elected
        assert not [e for e in after[1:] if e["ok"]]
        assert zk.kazoo.get("/pylog-test-fenced")[0] in (b"", b"1")
        assert zk_layout.decode_controller(zk.kazoo.get("/controller")[0]) == 2
        wait_for(lambda: zombie.seen(event="resigned"), what="the zombie resigned")
    finally:
        zombie.stop()


def test_no_zookeeper_is_a_clear_error_naming_the_connect_string():
    zk = ZkClient("127.0.0.1:1", session_timeout_ms=2000, connection_timeout_ms=1000)
    with pytest.raises(ZooKeeperUnavailableError, match=r"no ZooKeeper session with 127.0.0.1:1 within 1000 ms"):
        zk.start()
    zk.kazoo.close()


def test_sigterm_stops_a_broker_whose_zookeeper_is_gone(tmp_path: Path) -> None:
    """Two brokers, a replicated topic each leads a partition of, then ZooKeeper killed: SIGTERM still stops
    a broker (its controlled shutdown gives up on ZooKeeper within controlled.shutdown.timeout.ms), where it
    used to wait for ZooKeeper forever."""
    from pylog.launch.local_cluster import LocalCluster
    from pylog.launch.local_zookeeper import LocalZooKeeper
    from tests.support.cluster import create_replicated, wait_full_isr
    zk = LocalZooKeeper(tmp_path / "zk")
    zk.start()
    cluster = LocalCluster(tmp_path / "cluster", 2, {"default.replication.factor": 2,
                                                     "offsets.topic.replication.factor": 2,
                                                     "controlled.shutdown.timeout.ms": 2000,
                                                     "zookeeper.session.timeout.ms": 6000},
                           zk_connect=zk.connect, chroot="/gone")
    try:
        cluster.start()
        create_replicated(cluster.bootstrap, "both", 2, 2)
        wait_full_isr(cluster.bootstrap, "both", 2, replicas=2)
        zk.kill9()
        broker = cluster.broker(0)
        started = time.monotonic()
        code = broker.stop(timeout=40)
        assert time.monotonic() - started < 30 and code == 0, broker.log_text()[-3000:]
        assert "Traceback" not in broker.log_text()
    finally:
        cluster.close()
        zk.stop()


def test_a_single_brokers_data_seeds_a_new_cluster_and_is_refused_by_another(zk_connect: str, tmp_path: Path) -> None:
    """Growing the embedded default into a cluster: its data directory started with zookeeper.connect to a new
    cluster brings its topics along (same topic ids, records and committed offsets, served at once); a data
    directory of another cluster, or of another broker id, is refused at start in one line, as Kafka refuses it."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from pylog.launch.process import BrokerProcess
    from tests.support.clients import consume, create_topic, produce

    seed = tmp_path / "seed"
    alone = BrokerProcess(seed, settings={"group.initial.rebalance.delay.ms": 0}).start()
    try:
        create_topic(alone.bootstrap, "orders", partitions=2)
        produce(alone.bootstrap, "orders", [b"o%d" % i for i in range(6)], partition=1)
        c = Consumer({"bootstrap.servers": alone.bootstrap, "group.id": "billing", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("orders", 1, 4)], asynchronous=False)
        c.close()
        topic_id = _topic_id(alone.bootstrap, "orders")
    finally:
        alone.close()
    clustered = BrokerProcess(seed, settings={"zookeeper.connect": zk_connect, "broker.id": 0,
                                              "zookeeper.session.timeout.ms": 4000,
                                              "group.initial.rebalance.delay.ms": 0}).start()
    try:
        assert [m.value() for m in consume(clustered.bootstrap, "orders", [1], 6)] == [b"o%d" % i for i in range(6)]
        c = Consumer({"bootstrap.servers": clustered.bootstrap, "group.id": "billing", "enable.auto.commit": False})
        assert [tp.offset for tp in c.committed([TopicPartition("orders", 1)], timeout=20)] == [4]
        c.close()
        meta = AdminClient({"bootstrap.servers": clustered.bootstrap}).list_topics(timeout=10).topics["orders"]
        assert len(meta.partitions) == 2 and _topic_id(clustered.bootstrap, "orders") == topic_id
        assert "seeded the new cluster with the topics on its disk" in clustered.log_text()
        other = tmp_path / "other"
        BrokerProcess(other, settings={"broker.id": 1}).start().close()          # its own cluster id
        refused = subprocess.run([sys.executable, "-m", "pylog", "broker", "--data-dir", str(other), "--port", "0",
                                  "--set", "broker.id=1", "--set", f"zookeeper.connect={zk_connect}"],
                                 capture_output=True, text=True, timeout=60)
        last = refused.stderr.strip().splitlines()[-1]
        assert refused.returncode == 1 and last.startswith("pylog broker: error: the cluster id ") and \
            "trying to join the wrong cluster" in last, refused.stderr
        assert "Traceback" not in refused.stderr and " expired" not in refused.stderr, refused.stderr
    finally:
        clustered.close()
    moved = subprocess.run([sys.executable, "-m", "pylog", "broker", "--data-dir", str(seed), "--port", "0",
                            "--set", "broker.id=7"], capture_output=True, text=True, timeout=60)
    assert moved.returncode == 1 and "doesn't match stored broker.id 0" in moved.stderr, moved.stderr


def _topic_id(bootstrap: str, topic: str) -> str:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_topics(TopicCollection([topic]))[topic].result(15).topic_id)
