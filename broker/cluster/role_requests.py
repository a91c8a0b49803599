"""Roles on the wire: the controller's LeaderAndIsr, UpdateMetadata and StopReplica, built and applied. No I/O.

Owns both ends of how a ZooKeeper-mode controller tells brokers their roles (Kafka's
ControllerChannelManager requests on one side, ReplicaManager's and MetadataCache's checks on the
other), as pure functions over `ClusterView`, so a test feeds a view and a request and reads the
new view:

- the controller side builds requests from partition states it has written or read
  (`leader_and_isr`, `update_metadata`, `stop_replica`), each carrying its controller epoch and
  the receiving broker's epoch (the czxid of its registration znode);
- the broker side applies them (`apply_leader_and_isr`, `apply_update_metadata`,
  `apply_stop_replica`) with Kafka's fences:
  - a request from an older controller epoch than the newest seen changes nothing and gets
    STALE_CONTROLLER_EPOCH;
  - a request addressed to an earlier registration of this broker (a broker epoch below its own) gets
    STALE_BROKER_EPOCH, so a restarted broker ignores what was meant for its previous life;
  - a partition state older than the one held (leader epoch, then partition epoch) is refused
    with STALE_CONTROLLER_EPOCH for that partition, as Kafka's ReplicaManager answers;
  - UpdateMetadata replaces the live brokers and the controller id, and merges partition states
    (a leader of -2 removes the partition: its topic is being deleted).

The partition epoch is the version of the partition's state znode, so a leader's conditional ISR
write (cluster_node.write_isr) and the states the controller sends are ordered by one counter.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i64

from broker.cluster.cluster_view import ClusterView, Fence, StateVersion, TopicPartition
from broker.cluster.zk_layout import BrokerRegistration, PartitionState
from kafka_protocol.controller_schemas import (
    FULL,
    INCREMENTAL,
    LEADER_DURING_DELETE,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
    StopReplicaPartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
)

PLAINTEXT = 0      # SecurityProtocol id
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}   # Kafka's SecurityProtocol ids


@dataclass(frozen=True)
class PartitionInfo:
    """What the controller knows of one partition: its state, the state znode's version, its replicas."""
    state: PartitionState
    zk_version: int
    replicas: tuple[int, ...]
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True)
class ControllerStamp:
    """Who sends: the controller's broker id and epoch."""
    controller_id: int
    controller_epoch: int


# ---------------------------------------------------------------- the controller's side

def _by_topic(partitions: Mapping[TopicPartition, PartitionInfo]) -> dict[str, list[tuple[int, PartitionInfo]]]:
    topics: dict[str, list[tuple[int, PartitionInfo]]] = {}
    for (topic, p), info in sorted(partitions.items()):
        topics.setdefault(topic, []).append((p, info))
    return topics


def leader_and_isr(stamp: ControllerStamp, broker_epoch: int, partitions: Mapping[TopicPartition, PartitionInfo],
                   brokers: Mapping[int, BrokerRegistration], full: bool = False,
                   listener: str = "PLAINTEXT") -> LeaderAndIsrRequest:
    """The roles of `partitions` for one broker; `full`: they are every partition it replicates. Each leader
    is named by its endpoint on `listener`, the inter-broker one, as Kafka's controller does."""
    leaders = sorted({info.state.leader for info in partitions.values() if info.state.leader in brokers})
    return LeaderAndIsrRequest(
        controller_id=BrokerId(stamp.controller_id), controller_epoch=i32(stamp.controller_epoch),
        broker_epoch=i64(broker_epoch), type=i8(FULL if full else INCREMENTAL),
        topic_states=tuple(
            LeaderAndIsrTopicState(topic_name=TopicName(topic), topic_id=ps[0][1].topic_id, partition_states=tuple(
                LeaderAndIsrPartitionState(
                    partition_index=i32(p), controller_epoch=i32(info.state.controller_epoch),
                    leader=BrokerId(info.state.leader), leader_epoch=i32(info.state.leader_epoch),
                    isr=tuple(BrokerId(b) for b in info.state.isr), partition_epoch=i32(info.zk_version),
                    replicas=tuple(BrokerId(b) for b in info.replicas))
                for p, info in ps))
            for topic, ps in _by_topic(partitions).items()),
        live_leaders=tuple(LeaderAndIsrLiveLeader(broker_id=BrokerId(b), host_name=brokers[b].address(listener)[0],
                                                  port=i32(brokers[b].address(listener)[1])) for b in leaders))


def update_metadata(stamp: ControllerStamp, broker_epoch: int, partitions: Mapping[TopicPartition, PartitionInfo],
                    brokers: Mapping[int, BrokerRegistration],
                    deleted: Iterable[TopicPartition] = ()) -> UpdateMetadataRequest:
    """The live brokers and the states of `partitions` (and `deleted` ones, leader -2) for any broker."""
    states = dict(partitions)
    gone = PartitionState(LEADER_DURING_DELETE, 0, (), stamp.controller_epoch)
    for tp in deleted:
        states[tp] = PartitionInfo(gone, 0, ())
    return UpdateMetadataRequest(
        controller_id=BrokerId(stamp.controller_id), controller_epoch=i32(stamp.controller_epoch),
        broker_epoch=i64(broker_epoch),
        topic_states=tuple(
            UpdateMetadataTopicState(topic_name=TopicName(topic), topic_id=ps[0][1].topic_id, partition_states=tuple(
                UpdateMetadataPartitionState(
                    partition_index=i32(p), controller_epoch=i32(info.state.controller_epoch),
                    leader=BrokerId(info.state.leader), leader_epoch=i32(info.state.leader_epoch),
                    isr=tuple(BrokerId(b) for b in info.state.isr), zk_version=i32(info.zk_version),
                    replicas=tuple(BrokerId(b) for b in info.replicas),
                    offline_replicas=tuple(BrokerId(b) for b in info.replicas if b not in brokers))
                for p, info in ps))
            for topic, ps in _by_topic(states).items()),
        live_brokers=tuple(
            UpdateMetadataBroker(id=BrokerId(b), rack=reg.rack, endpoints=tuple(UpdateMetadataEndpoint(
                port=i32(port), host=host, listener=name, security_protocol=i16(SECURITY_PROTOCOLS.get(protocol, 0)))
                for name, protocol, host, port in reg.endpoints()))
            for b, reg in sorted(brokers.items())))


def stop_replica(stamp: ControllerStamp, broker_epoch: int, partitions: Iterable[TopicPartition],
                 delete: bool) -> StopReplicaRequest:
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        topics.setdefault(topic, []).append(p)
    return StopReplicaRequest(
        controller_id=BrokerId(stamp.controller_id), controller_epoch=i32(stamp.controller_epoch),
        broker_epoch=i64(broker_epoch),
        topic_states=tuple(StopReplicaTopicState(topic_name=TopicName(t), partition_states=tuple(
            StopReplicaPartitionState(partition_index=i32(p), delete_partition=delete) for p in ps))
            for t, ps in topics.items()))


# ---------------------------------------------------------------- the broker's side

def _newer(new: StateVersion, old: StateVersion | None) -> bool:
    """Whether `new` may replace `old`: a higher leader epoch, or the same with a partition epoch not older."""
    if old is None:
        return True
    return (new.state.leader_epoch, new.zk_version) >= (old.state.leader_epoch, old.zk_version)


def apply_leader_and_isr(view: ClusterView, fence: Fence, req: LeaderAndIsrRequest
                         ) -> tuple[ClusterView, Fence, LeaderAndIsrResponse]:
    error = fence.check(req.controller_epoch, req.broker_epoch)
    if error != ErrorCode.none:
        return view, fence, LeaderAndIsrResponse(error_code=error, topics=())
    states = dict(view.states)
    brokers = dict(view.brokers)
    for leader in req.live_leaders:
        if leader.broker_id not in brokers:
            brokers[int(leader.broker_id)] = BrokerRegistration(int(leader.broker_id), leader.host_name,
                                                                int(leader.port))
    topics = []
    for ts in req.topic_states:
        errors = []
        for ps in ts.partition_states:
            tp = (str(ts.topic_name), int(ps.partition_index))
            new = StateVersion(PartitionState(int(ps.leader), int(ps.leader_epoch), tuple(int(b) for b in ps.isr),
                                              int(ps.controller_epoch)), int(ps.partition_epoch))
            if _newer(new, states.get(tp)):
                states[tp] = new
                code = ErrorCode.none
            else:
                code = ErrorCode.stale_controller_epoch
            errors.append(LeaderAndIsrPartitionError(partition_index=ps.partition_index, error_code=code))
        topics.append(LeaderAndIsrTopicError(topic_id=ts.topic_id, partition_errors=tuple(errors)))
    new_view = replace(view, states=states, brokers=brokers, controller_id=int(req.controller_id))
    return (new_view, replace(fence, controller_epoch=int(req.controller_epoch)),
            LeaderAndIsrResponse(error_code=ErrorCode.none, topics=tuple(topics)))


def apply_update_metadata(view: ClusterView, fence: Fence, req: UpdateMetadataRequest
                          ) -> tuple[ClusterView, Fence, UpdateMetadataResponse]:
    error = fence.check(req.controller_epoch, req.broker_epoch)
    if error != ErrorCode.none:
        return view, fence, UpdateMetadataResponse(error_code=error)
    brokers: dict[int, BrokerRegistration] = {}
    names = {code: name for name, code in SECURITY_PROTOCOLS.items()}
    for b in req.live_brokers:
        plain = [e for e in b.endpoints if e.security_protocol == PLAINTEXT] or list(b.endpoints)
        if plain:
            listeners = tuple((str(e.listener), names.get(int(e.security_protocol), "PLAINTEXT"), str(e.host),
                               int(e.port)) for e in b.endpoints)
            brokers[int(b.id)] = BrokerRegistration(int(b.id), plain[0].host, int(plain[0].port), b.rack,
                                                    listeners=listeners if len(listeners) > 1 else ())
    states = dict(view.states)
    for ts in req.topic_states:
        for ps in ts.partition_states:
            tp = (str(ts.topic_name), int(ps.partition_index))
            if ps.leader == LEADER_DURING_DELETE:
                states.pop(tp, None)
                continue
            new = StateVersion(PartitionState(int(ps.leader), int(ps.leader_epoch), tuple(int(b) for b in ps.isr),
                                              int(ps.controller_epoch)), int(ps.zk_version))
            if _newer(new, states.get(tp)):
                states[tp] = new
    new_view = replace(view, states=states, brokers=brokers, controller_id=int(req.controller_id))
    return (new_view, replace(fence, controller_epoch=int(req.controller_epoch)),
            UpdateMetadataResponse(error_code=ErrorCode.none))


def apply_stop_replica(view: ClusterView, fence: Fence, req: StopReplicaRequest
                       ) -> tuple[ClusterView, Fence, StopReplicaResponse, list[tuple[TopicPartition, bool]]]:
    """The view (its metadata unchanged: StopReplica stops a replica, as Kafka's, and leaves the partition in the
    metadata clients read until an UpdateMetadata says otherwise) and the (partition, delete) pairs to stop."""
    error = fence.check(req.controller_epoch, req.broker_epoch)
    if error != ErrorCode.none:
        return view, fence, StopReplicaResponse(error_code=error, partition_errors=()), []
    stopped = [((str(ts.topic_name), int(ps.partition_index)), bool(ps.delete_partition))
               for ts in req.topic_states for ps in ts.partition_states]
    errors = tuple(StopReplicaPartitionError(topic_name=TopicName(tp[0]), partition_index=i32(tp[1]), error_code=ErrorCode.none)
                   for tp, _ in stopped)
    return (view, replace(fence, controller_epoch=int(req.controller_epoch)),
            StopReplicaResponse(error_code=ErrorCode.none, partition_errors=errors), stopped)
