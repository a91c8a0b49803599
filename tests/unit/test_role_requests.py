"""The controller's LeaderAndIsr / UpdateMetadata / StopReplica: built, framed, decoded and applied (issue 11).

Pure: requests are built by the controller's builders, framed by the client codec and decoded by the
broker's request codec (the bytes the wire carries), then applied to a `ClusterView` with the
broker's fences.
"""
from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_view import ClusterView, Fence, StateVersion
from broker.cluster.role_requests import (
    ControllerStamp,
    PartitionInfo,
    apply_leader_and_isr,
    apply_stop_replica,
    apply_update_metadata,
    leader_and_isr,
    stop_replica,
    update_metadata,
)
from broker.cluster.zk_layout import BrokerRegistration, PartitionState
from kafka_protocol.client_codec import encode_request
from kafka_protocol.codec import decode_request, request_schema

TOPIC_ID = uuid.UUID("6f1b7c3e-2a4d-4c1e-9a0b-0f5e6d7c8b9a")
BROKERS = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b) for b in (0, 1, 2)}
STAMP = ControllerStamp(controller_id=1, controller_epoch=5)


def _wire(body: Any) -> Any:
    """`body` as the receiving broker decodes it from the frame the controller sends."""
    frame = encode_request(body.__api_key__, body.__version__, 7, "controller-1", body)
    schema = request_schema(body.__api_key__, body.__version__)
    assert schema is type(body)
    return decode_request(frame[4:], schema).body


def _info(leader: int, epoch: int, isr: tuple[int, ...], version: int) -> PartitionInfo:
    return PartitionInfo(PartitionState(leader, epoch, isr, STAMP.controller_epoch), version, (0, 1, 2), TOPIC_ID)


def test_leader_and_isr_survives_the_wire_and_gives_the_broker_its_roles() -> None:
    request = _wire(leader_and_isr(STAMP, 42, {("t", 0): _info(2, 3, (2, 0), 4), ("t", 1): _info(0, 1, (0, 1, 2), 0)},
                                   BROKERS, full=True))
    assert request.type == 1 and request.broker_epoch == 42 and request.controller_epoch == 5
    assert request.topic_states[0].topic_id == TOPIC_ID
    assert {leader.broker_id for leader in request.live_leaders} == {0, 2}
    view, fence, response = apply_leader_and_isr(ClusterView(), Fence(broker_epoch=42), request)
    assert response.error_code == ErrorCode.none
    assert [e.error_code for e in response.topics[0].partition_errors] == [ErrorCode.none, ErrorCode.none]
    assert view.states[("t", 0)] == StateVersion(PartitionState(2, 3, (2, 0), 5), 4)
    assert view.controller_id == 1 and fence.controller_epoch == 5
    assert view.brokers[2].port == 9002          # a live leader's address, to follow it


def test_a_deposed_controllers_request_changes_nothing() -> None:
    view = ClusterView(states={("t", 0): StateVersion(PartitionState(0, 3, (0, 1), 5), 4)})
    old = ControllerStamp(controller_id=2, controller_epoch=4)
    request = _wire(leader_and_isr(old, -1, {("t", 0): _info(2, 9, (2,), 9)}, BROKERS))
    new_view, fence, response = apply_leader_and_isr(view, Fence(controller_epoch=5), request)
    assert response.error_code == ErrorCode.stale_controller_epoch
    assert new_view is view and fence.controller_epoch == 5
    um = _wire(update_metadata(old, -1, {}, {}))
    new_view, _, um_response = apply_update_metadata(view, Fence(controller_epoch=5), um)
    assert um_response.error_code == ErrorCode.stale_controller_epoch and new_view is view


def test_a_request_for_an_earlier_registration_of_the_broker_is_refused() -> None:
    request = _wire(leader_and_isr(STAMP, 41, {("t", 0): _info(2, 3, (2,), 1)}, BROKERS))
    view, _, response = apply_leader_and_isr(ClusterView(), Fence(broker_epoch=42), request)
    assert response.error_code == ErrorCode.stale_broker_epoch and not view.states


def test_an_older_partition_state_is_refused_per_partition_and_a_newer_one_applied() -> None:
    view = ClusterView(states={("t", 0): StateVersion(PartitionState(0, 3, (0, 1), 5), 4),
                               ("t", 1): StateVersion(PartitionState(0, 3, (0, 1), 5), 4)})
    request = _wire(leader_and_isr(STAMP, -1, {("t", 0): _info(1, 2, (1,), 9), ("t", 1): _info(1, 4, (1, 0), 5)},
                                   BROKERS))
    new_view, _, response = apply_leader_and_isr(view, Fence(), request)
    errors = {e.partition_index: e.error_code for e in response.topics[0].partition_errors}
    assert errors == {0: ErrorCode.stale_controller_epoch, 1: ErrorCode.none}
    assert new_view.states[("t", 0)].state.leader == 0          # kept
    assert new_view.states[("t", 1)] == StateVersion(PartitionState(1, 4, (1, 0), 5), 5)


def test_update_metadata_replaces_the_live_brokers_merges_states_and_forgets_deleted_partitions() -> None:
    view = ClusterView(brokers=dict(BROKERS), states={("gone", 0): StateVersion(PartitionState(0, 1, (0,), 5), 1),
                                                      ("t", 0): StateVersion(PartitionState(0, 3, (0, 1), 5), 4)})
    live = {b: r for b, r in BROKERS.items() if b != 2}
    request = _wire(update_metadata(STAMP, -1, {("t", 0): _info(0, 3, (0,), 5)}, live, deleted=[("gone", 0)]))
    assert request.topic_states[-1].partition_states[0].offline_replicas == (2,)
    new_view, _, response = apply_update_metadata(view, Fence(), request)
    assert response.error_code == ErrorCode.none
    assert sorted(new_view.brokers) == [0, 1]
    assert ("gone", 0) not in new_view.states
    assert new_view.states[("t", 0)] == StateVersion(PartitionState(0, 3, (0,), 5), 5)   # an ISR change


def test_stop_replica_says_which_to_stop_and_leaves_the_metadata_as_it_is() -> None:
    """As Kafka's: clients still find the partition (a reassignment stops the replicas it moved away; their
    leader is elsewhere); an UpdateMetadata removes a deleted topic's partitions."""
    view = ClusterView(states={("t", 0): StateVersion(PartitionState(0, 3, (0, 1), 5), 4),
                               ("t", 1): StateVersion(PartitionState(1, 3, (0, 1), 5), 4)})
    request = _wire(stop_replica(STAMP, -1, [("t", 1)], delete=True))
    new_view, _, response, stopped = apply_stop_replica(view, Fence(), request)
    assert response.error_code == ErrorCode.none and stopped == [(("t", 1), True)]
    assert new_view.states == view.states
