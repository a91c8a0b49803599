"""The controller's work against a real ZooKeeper (broker/cluster/controller.py): partition states
for new topics and partitions, leader election and ISR shrink when brokers go, a returning ISR
replica leading an offline partition, topic deletion, a controller failover that carries on with a
higher controller epoch, and Kafka's replication-factor error. Brokers here are registrations only
(cluster mode's broker side comes next)."""
from __future__ import annotations

import json
import logging
from typing import Callable

import pytest

from broker.cluster import zk_layout
from broker.cluster.controller import ClusterController, create_topic, request_topic_deletion
from broker.cluster.controller_election import ControllerElection
from broker.cluster.reassignment import Move
from broker.cluster.membership import BrokerMembership
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment
from kafka_protocol.errors import InvalidReplicationFactorError, TopicAlreadyExistsError
from tests.support.waiting import wait_for


class Member:
    """A registered broker id with its own session; `controller` runs if it wins the election."""

    def __init__(self, make: Callable[..., ZkClient], connect: str, broker_id: int, unclean: bool = False) -> None:
        self.broker_id = broker_id
        self.zk = make(connect)
        BrokerMembership(self.zk, BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id)).register()
        self.election = ControllerElection(self.zk, broker_id, on_elected=self._elected, on_resigned=self._resigned)
        self.controller = ClusterController(self.zk, self.election, unclean_leader_election=unclean)
        self.is_controller = False

    def _elected(self, token) -> None:
        self.is_controller = True
        self.controller.start(token)

    def _resigned(self) -> None:
        self.is_controller = False
        self.controller.stop()


def states(zk: ZkClient, topic: str) -> dict[int, PartitionState]:
    out: dict[int, PartitionState] = {}
    base = f"/brokers/topics/{topic}/partitions"
    for p in zk.kazoo.get_children(base) if zk.kazoo.exists(base) else []:
        out[int(p)] = PartitionState.decode(topic, int(p), zk.kazoo.get(zk_layout.partition_state_path(topic, int(p)))[0])
    return out


def start_cluster(make, connect, ids=(1, 2, 3), unclean: bool = False) -> dict[int, Member]:
    members = {b: Member(make, connect, b, unclean) for b in ids}
    for m in members.values():
        m.election.start()
    wait_for(lambda: [m for m in members.values() if m.is_controller], what="a controller")
    return members


def controller_of(members: dict[int, Member]) -> Member:
    return wait_for(lambda: next((m for m in members.values() if m.is_controller), None), what="a controller")


def test_a_new_topic_gets_leaders_and_isr_and_brokers_leaving_move_leadership_within_the_isr(zk_connect, zk_clients):
    members = start_cluster(zk_clients, zk_connect)
    admin = zk_clients(zk_connect)
    assignment = create_topic(admin, "orders", 6, 2, [1, 2, 3], {"retention.ms": "1000"})
    assert TopicAssignment.decode("orders", admin.kazoo.get("/brokers/topics/orders")[0]) == assignment
    assert zk_layout.decode_topic_config("orders", admin.kazoo.get("/config/topics/orders")[0]) == {"retention.ms": "1000"}
    ctl = controller_of(members)
    got = wait_for(lambda: len(s := states(admin, "orders")) == 6 and s, what="six partition states")
    for p, replicas in assignment.partitions.items():
        assert got[p] == PartitionState(replicas[0], 0, tuple(replicas), ctl.election.token.epoch)
    with pytest.raises(TopicAlreadyExistsError, match="Topic 'orders' already exists."):
        create_topic(admin, "orders", 1, 1, [1, 2, 3])
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor: 4 larger than available brokers: 3."):
        create_topic(admin, "big", 1, 4, [1, 2, 3])

    # a broker that is not the controller goes: its partitions elect the other ISR replica
    victim = next(b for b in members if not members[b].is_controller)
    members[victim].zk.stop()
    after = wait_for(lambda: (s := states(admin, "orders")) and all(victim not in st.isr for st in s.values()) and s,
                     what=f"broker {victim} out of every ISR")
    for p, replicas in assignment.partitions.items():
        survivors = tuple(r for r in replicas if r != victim)
        assert after[p].isr == survivors and after[p].leader == survivors[0]
        assert after[p].leader_epoch == (1 if victim in replicas else 0)


def _follower_gone(zk_clients, zk_connect, topic: str, unclean: bool = False):
    """Three members; a partition of `topic` on the two that are not the controller (leader others[0]), whose
    follower others[1] has gone and left the ISR. (members, admin, controller, others)."""
    members = start_cluster(zk_clients, zk_connect, unclean=unclean)
    admin = zk_clients(zk_connect)
    ctl = controller_of(members)
    others = [b for b in members if b != ctl.broker_id]
    admin.kazoo.create(f"/brokers/topics/{topic}", TopicAssignment(topic, {0: others}).encode())
    wait_for(lambda: admin.kazoo.exists(zk_layout.partition_state_path(topic, 0)), what="the partition state")
    members[others[1]].zk.stop()
    wait_for(lambda: states(admin, topic)[0].isr == (others[0],), what="the follower out of the ISR")
    return members, admin, ctl, others


def test_an_offline_partition_keeps_its_last_isr_member_and_elects_it_when_it_returns(zk_connect, zk_clients):
    members, admin, ctl, others = _follower_gone(zk_clients, zk_connect, "t")
    members[others[0]].zk.stop()
    offline = wait_for(lambda: (s := states(admin, "t")[0]).leader == -1 and s, what="no leader")
    assert offline.isr == (others[0],)          # kept, so that no un-replicated broker is elected
    # the follower that left the ISR comes back: it may not lead (unclean election is off)
    back = Member(zk_clients, zk_connect, others[1])
    ctl.controller.wait_idle()
    assert states(admin, "t")[0].leader == -1
    # the last ISR member comes back: it leads again, with a higher leader epoch
    Member(zk_clients, zk_connect, others[0])
    led = wait_for(lambda: (s := states(admin, "t")[0]).leader == others[0] and s, what="the ISR member leading")
    assert led.leader_epoch > offline.leader_epoch and led.isr == (others[0],)
    assert back.broker_id not in led.isr


def test_an_unclean_election_elects_a_live_replica_outside_the_isr_and_says_what_is_lost(zk_connect, zk_clients, caplog):
    """unclean.leader.election.enable: when the partition's last ISR member is gone, a live replica outside the ISR
    leads; the controller logs the partition and the loss it implies, and counts it (pylog_unclean_leader_elections)."""
    members, admin, ctl, others = _follower_gone(zk_clients, zk_connect, "u", unclean=True)
    assert ctl.controller.unclean_elections == 0
    with caplog.at_level(logging.WARNING, logger="broker.cluster.controller"):
        members[others[0]].zk.stop()
        Member(zk_clients, zk_connect, others[1], unclean=True)        # back, behind: the only live replica
        led = wait_for(lambda: (s := states(admin, "u")[0]).leader == others[1] and s, what="the unclean leader")
        ctl.controller.wait_idle()
    assert led.isr == (others[1],) and ctl.controller.unclean_elections == 1
    lines = [r.getMessage() for r in caplog.records if "unclean leader election" in r.getMessage()]
    assert lines == [f"u-0: unclean leader election: broker {others[1]} was not in the ISR [{others[0]}]; records the "
                     f"old ISR acknowledged beyond broker {others[1]}'s log end are lost "
                     "(unclean.leader.election.enable)"]


def test_a_new_controller_carries_on_with_a_higher_epoch_and_deletes_topics(zk_connect, zk_clients):
    members = start_cluster(zk_clients, zk_connect)
    admin = zk_clients(zk_connect)
    first = controller_of(members)
    assignment = create_topic(admin, "logs", 3, 3, [1, 2, 3])
    wait_for(lambda: admin.kazoo.exists(zk_layout.partition_state_path("logs", 2)), what="partition states")
    first_epoch = first.election.token.epoch
    first.zk.stop()
    rest = {b: m for b, m in members.items() if m is not first}
    second = controller_of(rest)
    assert second.election.token.epoch == first_epoch + 1
    got = wait_for(lambda: (s := states(admin, "logs")) and all(first.broker_id not in st.isr for st in s.values()) and s,
                   what="the old controller's broker out of every ISR")
    for p, st in got.items():
        assert st.controller_epoch == second.election.token.epoch
        assert st.leader in assignment.partitions[p] and st.leader != first.broker_id
    # partitions added to the assignment get states from the new controller
    grown = TopicAssignment("logs", {**assignment.partitions, 3: [2, 3, 1]}, assignment.topic_id)
    admin.kazoo.set("/brokers/topics/logs", grown.encode())
    new = wait_for(lambda: admin.kazoo.exists(zk_layout.partition_state_path("logs", 3)) and states(admin, "logs")[3],
                   what="the new partition's state")
    assert new.leader == 2 and set(new.isr) == {2, 3}
    request_topic_deletion(admin, "logs")
    wait_for(lambda: not admin.kazoo.exists("/brokers/topics/logs") and not admin.kazoo.exists("/admin/delete_topics/logs"),
             what="the topic deleted")


def test_a_new_controller_answers_its_first_request_with_every_topic_read(zk_connect, zk_clients):
    """A request that reaches a controller the moment it is elected (ListPartitionReassignments, asked on the
    election's own thread right after start) is answered from the topics in ZooKeeper, here a move a former
    controller began: the controller reads every topic before it takes a request (it once answered from an
    empty view, and the move looked finished)."""
    admin = zk_clients(zk_connect)
    for b in (1, 2, 3):
        BrokerMembership(zk_clients(zk_connect), BrokerRegistration(b, "127.0.0.1", 9000 + b)).register()
    first = Member(zk_clients, zk_connect, 8)
    first.election.start()
    for i in range(20):
        create_topic(admin, f"t{i}", 2, 2, [1, 2, 3])
    wait_for(lambda: all(len(states(admin, f"t{i}")) == 2 for i in range(20)), what="every partition's state")
    first.zk.stop()                                  # the former controller goes, its move half done
    moving = TopicAssignment.decode("t7", admin.kazoo.get("/brokers/topics/t7")[0])
    replicas = list(moving.partitions[1])
    new = next(b for b in (1, 2, 3) if b not in replicas)
    admin.kazoo.set("/brokers/topics/t7", TopicAssignment(
        "t7", {**moving.partitions, 1: [new, *replicas]}, moving.topic_id, {1: [new]}, {1: [replicas[-1]]}).encode())
    answers = []
    zk = zk_clients(zk_connect)
    election = ControllerElection(zk, 9, on_elected=lambda token: (controller.start(token), answers.append(
        controller.list_reassignments(None))), on_resigned=lambda: controller.stop())
    controller = ClusterController(zk, election)
    election.start()
    listed = wait_for(lambda: answers, what="the elected controller's answer")[0].result(30)
    assert listed == {("t7", 1): Move((new, *replicas), (new,), (replicas[-1],))}


def test_cluster_status_shows_brokers_controller_leaders_and_under_replicated_partitions(zk_connect, zk_clients, capsys):
    from pylog.cli import main

    members = start_cluster(zk_clients, zk_connect)
    admin = zk_clients(zk_connect)
    ctl = controller_of(members)
    assignment = create_topic(admin, "audit", 2, 3, [1, 2, 3])
    wait_for(lambda: len(states(admin, "audit")) == 2, what="partition states")
    victim = next(b for b in members if b != ctl.broker_id)
    members[victim].zk.stop()
    wait_for(lambda: all(victim not in s.isr for s in states(admin, "audit").values()), what="the ISR shrunk")
    assert main(["cluster", "status", "--zookeeper", zk_connect]) == 0
    out = capsys.readouterr().out
    assert f"controller: broker {ctl.broker_id} (epoch {ctl.election.token.epoch})" in out
    assert "brokers (2): " in out and f"{victim} " not in out.split("\n")[1]
    for p, replicas in assignment.partitions.items():
        assert f"audit-{p}: leader " in out and f"replicas {list(replicas)}" in out
    assert "under-replicated partitions: 2 (audit-0, audit-1)" in out and "offline partitions: 0" in out
    assert main(["cluster", "status", "--zookeeper", zk_connect, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["controller"] == ctl.broker_id and status["under_replicated"] == ["audit-0", "audit-1"]
    assert main(["cluster", "status", "--zookeeper", "127.0.0.1:1", "--timeout", "1"]) == 1
    assert "no ZooKeeper session with 127.0.0.1:1 within 1s" in capsys.readouterr().err


def _zk_packets(zookeeper) -> int:
    """Requests ZooKeeper has received so far (its `mntr` four-letter word)."""
    import socket
    with socket.create_connection((zookeeper.host, zookeeper.port), timeout=5) as s:
        s.sendall(b"mntr")
        text = b""
        while chunk := s.recv(65536):
            text += chunk
    return int(next(line.split()[1] for line in text.decode().splitlines() if line.startswith("zk_packets_received")))


def test_a_burst_of_isr_change_notifications_is_one_pass_not_one_per_notification(zookeeper, zk_connect, zk_clients):
    """Kafka's brokers leave one /isr_change_notification child per ISR change; a rolling restart leaves
    hundreds. The controller handles a burst in passes over the current children (the watch's firings
    coalesced), so the ZooKeeper requests grow with the notifications, not with their square (librdkafka's
    suite once saw 2,300 requests a second for 7 minutes, and a new topic without a leader meanwhile)."""
    members = start_cluster(zk_clients, zk_connect)
    admin = zk_clients(zk_connect)
    create_topic(admin, "churn", 3, 2, [1, 2, 3])
    wait_for(lambda: len(states(admin, "churn")) == 3, what="three partition states")
    controller_of(members).controller.wait_idle()
    n = 600
    before = _zk_packets(zookeeper)
    pending = [admin.kazoo.create_async(f"{zk_layout.ISR_CHANGES}/{zk_layout.ISR_CHANGE_PREFIX}",
                                        zk_layout.encode_isr_change([("churn", i % 3)]), sequence=True)
               for i in range(n)]
    for p in pending:
        p.get()
    wait_for(lambda: not admin.kazoo.get_children(zk_layout.ISR_CHANGES), timeout_s=30,
             what="every notification handled and deleted")
    # a new topic still gets its leaders at once afterwards
    create_topic(admin, "after", 1, 2, [1, 2, 3])
    wait_for(lambda: len(states(admin, "after")) == 1, timeout_s=10, what="the new topic's partition state")
    used = _zk_packets(zookeeper) - before
    assert used < 8 * n, f"{used} ZooKeeper requests for {n} notifications (creating them took {n})"


def test_a_broker_leaving_is_published_as_one_request_of_each_kind_per_broker_not_one_per_topic(zk_connect, zk_clients):
    """Kafka's controller batches the requests of one event (ControllerBrokerRequestBatch); each broker applies a
    LeaderAndIsr or UpdateMetadata to everything it holds, so sending one per topic made a failover of 100 topics
    cost every broker 100 passes over its partitions (10,000 partitions: most of the 21.5 s bench/failover_bench.py
    measured). What the controller sends is recorded on its way to the (real) channel."""
    members = start_cluster(zk_clients, zk_connect)
    admin = zk_clients(zk_connect)
    ctl = controller_of(members)
    others = [b for b in members if b != ctl.broker_id]
    topics = [f"many-{i}" for i in range(20)]
    for t in topics:      # every partition led by the broker that goes, followed by the one that stays
        admin.kazoo.create(f"/brokers/topics/{t}", TopicAssignment(t, {0: others, 1: others}).encode())
    wait_for(lambda: all(len(states(admin, t)) == 2 for t in topics), what="every partition state")
    ctl.controller.wait_idle()
    sent: list[tuple[int, str]] = []
    channel = ctl.controller._channel
    real_send = channel.send
    channel.send = lambda b, build: (sent.append((b, build.func.__name__)), real_send(b, build))[1]
    members[others[0]].zk.stop()
    wait_for(lambda: all(s.leader == others[1] for t in topics for s in states(admin, t).values()),
             what=f"every partition led by broker {others[1]}")
    ctl.controller.wait_idle()
    per_broker = {(b, kind): sent.count((b, kind)) for b, kind in set(sent)}
    assert per_broker.get((others[1], "leader_and_isr")) == 1, sent
    assert all(n <= 2 for n in per_broker.values()), per_broker   # UpdateMetadata: the partitions, the live set


def test_a_broker_leaving_is_written_from_the_controllers_states_and_a_stale_one_is_read_again(zk_connect, zk_clients):
    """The controller writes a broker's loss from the states it last wrote or read, as Kafka's controller context
    does, not by reading every state again. A state changed behind its back (here an ISR shrink whose notification
    never came) fails that topic's conditional write, and the topic is read again: the partition whose ISR no longer
    holds the survivor goes offline keeping its last ISR member instead of electing a replica outside the ISR."""
    members = start_cluster(zk_clients, zk_connect)
    admin = zk_clients(zk_connect)
    ctl = controller_of(members)
    leaving, staying = [b for b in members if b != ctl.broker_id]
    topics = [f"cached-{i}" for i in range(5)]
    for t in topics:
        admin.kazoo.create(f"/brokers/topics/{t}", TopicAssignment(t, {0: [leaving, staying], 1: [leaving, staying]}).encode())
    wait_for(lambda: all(len(states(admin, t)) == 2 for t in topics), what="every partition state")
    ctl.controller.wait_idle()
    path = zk_layout.partition_state_path("cached-0", 0)
    old = PartitionState.decode("cached-0", 0, admin.kazoo.get(path)[0])
    admin.kazoo.set(path, PartitionState(leaving, old.leader_epoch, (leaving,), old.controller_epoch).encode())
    members[leaving].zk.stop()
    wait_for(lambda: all(s.leader != leaving for t in topics for s in states(admin, t).values()), timeout_s=15,
             what=f"no partition led by broker {leaving}")
    after = {(t, p): s for t in topics for p, s in states(admin, t).items()}
    assert after[("cached-0", 0)].leader == -1 and after[("cached-0", 0)].isr == (leaving,), after[("cached-0", 0)]
    assert all(s.leader == staying and s.isr == (staying,) for tp, s in after.items() if tp != ("cached-0", 0)), after
