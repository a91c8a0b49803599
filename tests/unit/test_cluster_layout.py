"""Cluster mode's pure parts: Kafka's ZooKeeper JSON (broker/cluster/zk_layout.py), Kafka's
rack-unaware replica assignment (assignment.py) and leader election rules (leader_election.py)."""
from __future__ import annotations

import json
import random
import uuid
from collections import Counter

import pytest

from broker.cluster import zk_layout
from broker.cluster.assignment import assign_replicas
from broker.cluster.leader_election import (NO_LEADER, initial_state, is_unclean, next_state, offline_leader,
                                          on_brokers_changed, rebalance_candidates)
from broker.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment, ZkDataError
from kafka_protocol.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def test_kafka_assignment_matches_kafkas_own_expected_table():
    # kafka.admin.AdminRackAwareTest / AdminUtilsTest: 5 brokers, 10 partitions, RF 3, fixed start 0
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_replicas([4, 2, 0, 3, 1], 10, 3, fixed_start=0) == expected


@pytest.mark.parametrize("brokers,partitions,rf", [([1, 2, 3], 12, 3), ([5, 9, 11, 20], 50, 2), ([7], 3, 1)])
def test_assignment_spreads_leaders_and_never_repeats_a_broker(brokers, partitions, rf):
    got = assign_replicas(brokers, partitions, rf, rng=random.Random(7))
    assert sorted(got) == list(range(partitions))
    assert all(len(r) == rf and len(set(r)) == rf and set(r) <= set(brokers) for r in got.values())
    leaders = Counter(r[0] for r in got.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1
    replicas = Counter(b for r in got.values() for b in r)
    assert max(replicas.values()) - min(replicas.values()) <= 1


def test_partition_increase_numbers_new_partitions_after_the_existing_and_continues_the_leaders():
    whole = assign_replicas([0, 1, 2], 9, 2, fixed_start=1)
    tail = assign_replicas([0, 1, 2], 3, 2, first_partition=6, fixed_start=1)
    assert sorted(tail) == [6, 7, 8]
    assert [tail[p][0] for p in (6, 7, 8)] == [whole[p][0] for p in (6, 7, 8)]
    assert all(len(set(r)) == 2 for r in tail.values())


def test_assignment_errors_are_kafkas():
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor: 4 larger than available brokers: 3."):
        assign_replicas([1, 2, 3], 1, 4)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([1, 2, 3], 1, 0)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas([1, 2, 3], 0, 1)


RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_aware_assignment_matches_kafkas_own_expected_table():
    """Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers."""
    expected = {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}
    assert assign_replicas(RACKS, 7, 3, fixed_start=0) == expected


@pytest.mark.parametrize("partitions, rf", [(6, 3), (12, 2), (7, 3), (5, 6)])
def test_rack_aware_assignment_puts_replicas_on_as_many_racks_as_it_can(partitions, rf):
    got = assign_replicas(RACKS, partitions, rf, rng=random.Random(3))
    for replicas in got.values():
        assert len(set(replicas)) == rf
        assert len({RACKS[b] for b in replicas}) == min(rf, 3)
    leaders = Counter(r[0] for r in got.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in RACKS) <= 1


def test_a_cluster_where_only_some_brokers_have_a_rack_refuses_to_assign():
    with pytest.raises(InvalidReplicaAssignmentError, match=r"Not all brokers have rack information.*\[2\]"):
        assign_replicas({0: "a", 1: "b", 2: None}, 3, 2)
    assert assign_replicas({0: None, 1: None, 2: None}, 3, 2, fixed_start=0) == \
        assign_replicas([0, 1, 2], 3, 2, fixed_start=0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas({0: "a", 1: "b"}, 1, 3)


def test_broker_registration_is_kafkas_version_5_and_reads_older_ones():
    reg = BrokerRegistration(3, "127.0.0.1", 9093, rack="r1", timestamp_ms=1700000000000)
    v = json.loads(reg.encode())
    assert v == {"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                 "endpoints": ["PLAINTEXT://127.0.0.1:9093"], "jmx_port": -1, "port": 9093,
                 "host": "127.0.0.1", "version": 5, "timestamp": "1700000000000", "rack": "r1"}
    assert BrokerRegistration.decode(3, reg.encode()) == reg
    # Kafka's documented v4 example: a named listener mapped to PLAINTEXT wins over host/port
    v4 = {"version": 4, "host": "localhost", "port": 9092, "jmx_port": 9999, "timestamp": "2233345666",
          "endpoints": ["CLIENT://host1:9092", "REPLICATION://host1:9093"], "rack": "dc1",
          "listener_security_protocol_map": {"CLIENT": "PLAINTEXT", "REPLICATION": "SSL"}}
    got = BrokerRegistration.decode(1, json.dumps(v4).encode())
    assert (got.host, got.port, got.rack) == ("host1", 9092, "dc1")
    # no PLAINTEXT listener: Kafka writes host null and port -1; peers use the inter-broker listener's address
    secure = BrokerRegistration(2, "h", 9093, listeners=(("INTERNAL", "SASL_SSL", "h", 9093),))
    stored = json.loads(secure.encode())
    assert (stored["host"], stored["port"], stored["endpoints"]) == (None, -1, ["INTERNAL://h:9093"])
    assert BrokerRegistration.decode(2, secure.encode()).address("INTERNAL") == ("h", 9093)
    v1 = {"version": 1, "host": "h", "port": 1234, "jmx_port": -1, "timestamp": "1"}
    assert BrokerRegistration.decode(1, json.dumps(v1).encode()).port == 1234


@pytest.mark.parametrize("data,problem", [(None, "no data"), (b"{", "not JSON"), (b"[]", "not a JSON object"),
                                          (b'{"version":0}', "unsupported registration version"),
                                          (b'{"version":4,"endpoints":["SSL:h"]}', "no endpoint")])
def test_a_bad_registration_names_its_node(data, problem):
    with pytest.raises(ZkDataError, match=f"/brokers/ids/7: {problem}"):
        BrokerRegistration.decode(7, data)


def test_topic_assignment_partition_state_and_config_round_trip_in_kafkas_format():
    tid = uuid.uuid4()
    ta = TopicAssignment("t", {1: [2, 3], 0: [1, 2]}, tid, adding={0: [3]})
    v = json.loads(ta.encode())
    assert v["version"] == 2 and v["partitions"] == {"0": [1, 2], "1": [2, 3]}
    assert v["adding_replicas"] == {"0": [3]} and v["removing_replicas"] == {}
    assert zk_layout.parse_kafka_uuid(v["topic_id"]) == tid and "=" not in v["topic_id"]
    assert TopicAssignment.decode("t", ta.encode()) == TopicAssignment("t", {0: [1, 2], 1: [2, 3]}, tid, {0: [3]}, {})
    ps = PartitionState(leader=2, leader_epoch=5, isr=(2, 3), controller_epoch=4)
    assert json.loads(ps.encode()) == {"controller_epoch": 4, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2, 3]}
    assert PartitionState.decode("t", 0, ps.encode()) == ps
    with pytest.raises(ZkDataError, match="/brokers/topics/t/partitions/0/state"):
        PartitionState.decode("t", 0, b'{"leader":1}')
    with pytest.raises(ZkDataError, match="partition 'x' is not a number"):
        TopicAssignment.decode("t", b'{"version":2,"partitions":{"x":[1]}}')
    assert zk_layout.decode_topic_config("t", zk_layout.encode_topic_config({"retention.ms": "5"})) == {"retention.ms": "5"}
    assert zk_layout.decode_controller(zk_layout.encode_controller(3, 1)) == 3
    assert zk_layout.decode_controller_epoch(b"17") == 17
    path = "/isr_change_notification/isr_change_0000000001"
    assert zk_layout.decode_isr_change(path, zk_layout.encode_isr_change([("t", 0), ("u", 2)])) == [("t", 0), ("u", 2)]


# ---------------------------------------------------------------- leader election (leader_election.py)


def test_a_new_partition_is_led_by_its_first_live_replica_with_the_live_replicas_in_sync():
    assert initial_state([3, 1, 2], {1, 2, 3}, 7) == PartitionState(3, 0, (3, 1, 2), 7)
    assert initial_state([3, 1, 2], {1, 2}, 7) == PartitionState(1, 0, (1, 2), 7)
    assert initial_state([3], set(), 7) == PartitionState(NO_LEADER, 0, (), 7)


def test_offline_election_takes_the_first_live_isr_replica_and_unclean_only_when_allowed():
    assert offline_leader([1, 2, 3], isr=[3, 2], live={2, 3}) == 2
    assert offline_leader([1, 2, 3], isr=[1], live={2, 3}) == NO_LEADER
    assert offline_leader([1, 2, 3], isr=[1], live={2, 3}, unclean=True) == 2


def test_brokers_leaving_shrink_the_isr_move_the_leader_and_bump_the_epoch_once():
    s = PartitionState(1, 4, (1, 2, 3), 2)
    assert on_brokers_changed([1, 2, 3], s, {1, 2, 3}, 5) is s                       # nothing changed
    assert on_brokers_changed([1, 2, 3], s, {1, 2}, 5) == PartitionState(1, 5, (1, 2), 5)   # follower out
    assert on_brokers_changed([1, 2, 3], s, {2, 3}, 5) == PartitionState(2, 5, (2, 3), 5)   # leader out
    # every ISR replica gone: no leader, the last leader stays in the ISR to be elected on return
    gone = on_brokers_changed([1, 2, 3], s, set(), 5)
    assert gone == PartitionState(NO_LEADER, 5, (1,), 5)
    assert on_brokers_changed([1, 2, 3], gone, {2}, 6) is gone                      # 2 is not in sync
    assert on_brokers_changed([1, 2, 3], gone, {1, 2}, 6) == PartitionState(1, 6, (1,), 6)
    # unclean: an out-of-sync replica leads, and is then all that is in sync
    assert on_brokers_changed([1, 2, 3], gone, {2}, 6, unclean=True) == PartitionState(2, 6, (2,), 6)


def test_a_broker_shutting_down_hands_leadership_to_another_isr_replica_and_leaves_the_isr():
    state = PartitionState(1, 4, (1, 2, 3), 7)
    new = next_state([1, 2, 3], state, live={1, 2, 3}, shutting_down={1}, controller_epoch=8)
    assert new == PartitionState(2, 5, (2, 3), 8)
    follower_leaving = next_state([1, 2, 3], state, live={1, 2, 3}, shutting_down={3}, controller_epoch=8)
    assert follower_leaving == PartitionState(1, 5, (1, 2), 8)


def test_a_shutting_down_leader_without_another_isr_replica_keeps_leading():
    state = PartitionState(1, 4, (1,), 7)
    assert next_state([1, 2, 3], state, live={1, 2, 3}, shutting_down={1}, controller_epoch=8) == state


def test_the_preferred_replica_takes_leadership_back_when_live_and_in_sync():
    state = PartitionState(2, 4, (1, 2, 3), 7)
    assert next_state([1, 2, 3], state, {1, 2, 3}, set(), 8, preferred=True) == PartitionState(1, 5, (1, 2, 3), 8)
    assert next_state([1, 2, 3], state, {1, 2, 3}, set(), 8) == state, "only when asked for"
    behind = PartitionState(2, 4, (2, 3), 7)
    assert next_state([1, 2, 3], behind, {1, 2, 3}, set(), 8, preferred=True) == behind, "not while out of sync"
    assert next_state([1, 2, 3], state, {1, 2, 3}, {1}, 8, preferred=True).leader == 2, "not while shutting down"


def test_the_auto_rebalance_moves_a_brokers_leaders_back_only_past_the_imbalance_percentage():
    """Kafka's rule (checkAndTriggerAutoLeaderRebalance): broker 0 prefers ten partitions; one led elsewhere is
    10 %, not above the default 10 %, so nothing moves; two are 20 %, and both move back, except where broker 0 is
    out of the ISR, dead or shutting down."""
    def state(leader: int, isr: tuple[int, ...] = (0, 1)) -> PartitionState:
        return PartitionState(leader, 3, isr, 1)
    parts = {("t", p): ((0, 1), state(0)) for p in range(10)}
    parts[("t", 0)] = ((0, 1), state(1))
    parts[("u", 0)] = ((1, 0), state(0))           # broker 1's only preferred partition, led by 0: 100 %
    assert rebalance_candidates(parts, {0, 1}, set(), 10) == {("u", 0)}
    parts[("t", 1)] = ((0, 1), state(1))
    assert rebalance_candidates(parts, {0, 1}, set(), 10) == {("t", 0), ("t", 1), ("u", 0)}
    assert rebalance_candidates(parts, {0, 1}, set(), 20) == {("u", 0)}
    parts[("t", 1)] = ((0, 1), state(1, isr=(1,)))  # 0 is behind on this one: it stays where it is
    assert rebalance_candidates(parts, {0, 1}, set(), 10) == {("t", 0), ("u", 0)}
    assert rebalance_candidates(parts, {1}, set(), 10) == {("u", 0)}       # broker 0 is gone: only 1 can move
    assert rebalance_candidates(parts, {0, 1}, {0}, 10) == {("u", 0)}


def test_an_election_outside_the_isr_is_unclean_and_nothing_else_is():
    old = PartitionState(0, 5, (0,), 1)
    assert is_unclean(old, PartitionState(2, 6, (2,), 1))
    assert not is_unclean(PartitionState(0, 5, (0, 2), 1), PartitionState(2, 6, (2,), 1))
    assert not is_unclean(old, PartitionState(NO_LEADER, 6, (0,), 1))
    assert not is_unclean(old, PartitionState(0, 6, (0, 2), 1))
