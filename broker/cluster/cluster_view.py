"""What every broker of a cluster knows of it: live brokers, the controller, topics, partition states.

Owns each broker's copy of the cluster metadata (Kafka's MetadataCache, ZooKeeper mode), from two
sources:

- the controller's requests on the wire (`update_from_controller`, given the pure appliers of
  `role_requests`): the live brokers, the controller, and every partition's leader, epoch and ISR
  (LeaderAndIsr for the partitions this broker replicates, UpdateMetadata for all). The fence (the
  newest controller epoch accepted, this broker's registration epoch) is kept beside the view;
- ZooKeeper watches (`ClusterWatcher`): `/brokers/topics` (each topic's assignment and topic id)
  and `/config/topics/<t>`, as Kafka's brokers follow configs from ZooKeeper. A topic leaving
  `/brokers/topics` is how a broker learns its data may be deleted.

`ClusterView` is an immutable snapshot; readers never see a half-applied change. After every
ZooKeeper change `on_change(view)` is called with the whole new view (on kazoo's thread or the caller's);
callers hand it to their own thread or loop. A partition state carries its znode version (the
partition epoch): a leader changes its ISR with a write conditional on that version (Kafka's
ZooKeeper mode), so a leader acting on a stale state changes nothing.

Never writes to ZooKeeper.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, TypeVar

from kio.schema.errors import ErrorCode
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from kafka_protocol.topic_partition import TopicPartition
from broker.cluster import zk_layout
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment, ZkDataError

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True)
class StateVersion:
    """A partition's state and the version of its znode (the fence for ISR changes)."""
    state: PartitionState
    zk_version: int


@dataclass(frozen=True)
class Fence:
    """The newest controller epoch a broker has accepted, and the broker's own registration epoch."""
    controller_epoch: int = -1
    broker_epoch: int = -1

    def check(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        if controller_epoch < self.controller_epoch:
            return ErrorCode.stale_controller_epoch
        if broker_epoch != -1 and self.broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.stale_broker_epoch
        return ErrorCode.none


@dataclass(frozen=True)
class ClusterView:
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    controller_id: int = -1
    topics: Mapping[str, TopicAssignment] = field(default_factory=dict)
    configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    states: Mapping[TopicPartition, StateVersion] = field(default_factory=dict)

    def partitions_of(self, topic: str) -> int:
        assignment = self.topics.get(topic)
        return len(assignment.partitions) if assignment is not None else 0

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        assignment = self.topics.get(topic)
        if assignment is None:
            return ()
        return tuple(assignment.partitions.get(partition, ()))

    def state(self, topic: str, partition: int) -> StateVersion | None:
        return self.states.get((topic, partition))

    def leader(self, topic: str, partition: int) -> int:
        """The partition's live leader, -1 when it has none (or its leader's registration is gone)."""
        sv = self.states.get((topic, partition))
        if sv is None or sv.state.leader not in self.brokers:
            return -1
        return sv.state.leader


class ClusterWatcher:
    def __init__(self, zk: ZkClient, on_change: Callable[[ClusterView], None]) -> None:
        self.zk = zk
        self._on_change = on_change
        self._lock = threading.Lock()
        self._view = ClusterView()
        self._fence = Fence()
        self._topic_watched: set[str] = set()

    @property
    def view(self) -> ClusterView:
        with self._lock:
            return self._view

    def start(self) -> None:
        ChildrenWatch(self.zk.kazoo, zk_layout.TOPICS, self._on_topics)

    def update_from_controller(self, apply: Callable[[ClusterView, Fence], tuple[ClusterView, Fence, R]]) -> R:
        """Apply a controller request, `apply(view, fence) -> (view, fence, result)`, under the lock; the result.
        `on_change` is not called: the request's handler brings the roles in line itself, before it answers."""
        with self._lock:
            self._view, self._fence, result = apply(self._view, self._fence)
        return result

    @property
    def broker_epoch(self) -> int:
        """This broker's registration epoch (-1 before it registered)."""
        return self._fence.broker_epoch

    def set_broker_epoch(self, broker_epoch: int) -> None:
        """This broker registered anew (a new session): requests for older registrations are stale."""
        with self._lock:
            self._fence = replace(self._fence, broker_epoch=broker_epoch)

    def _update(self, **changes: Any) -> None:
        with self._lock:
            self._view = replace(self._view, **changes)
            view = self._view
        self._on_change(view)

    # ------------------------------------------------------------ topics and partitions

    def _on_topics(self, children: list[str]) -> bool:
        current = set(children)
        with self._lock:
            gone = self._topic_watched - current
            new = current - self._topic_watched
            self._topic_watched = set(current)
        for topic in sorted(new):
            DataWatch(self.zk.kazoo, zk_layout.topic_path(topic), self._assignment_watch(topic))
            DataWatch(self.zk.kazoo, zk_layout.topic_config_path(topic), self._config_watch(topic))
        if gone:
            self._drop_topics(gone)
        return True

    def _drop_topics(self, gone: set[str]) -> None:
        with self._lock:
            view = self._view
            topics = {t: a for t, a in view.topics.items() if t not in gone}
            configs = {t: c for t, c in view.configs.items() if t not in gone}
            states = {tp: s for tp, s in view.states.items() if tp[0] not in gone}
        self._update(topics=topics, configs=configs, states=states)

    def _assignment_watch(self, topic: str) -> Callable[[bytes | None, Any], bool]:
        def watch(data: bytes | None, stat: Any) -> bool:
            with self._lock:
                if topic not in self._topic_watched:
                    return False
            if stat is None:
                return True                    # removed: the children watch drops the topic
            try:
                assignment = TopicAssignment.decode(topic, data)
            except ZkDataError as e:
                log.error("%s", e)
                return True
            with self._lock:
                topics = {**self._view.topics, topic: assignment}
            self._update(topics=topics)
            return True
        return watch

    def _config_watch(self, topic: str) -> Callable[[bytes | None, Any], bool]:
        def watch(data: bytes | None, stat: Any) -> bool:
            with self._lock:
                if topic not in self._topic_watched:
                    return False
            config: dict[str, str] = {}
            if stat is not None and data:
                try:
                    config = dict(zk_layout.decode_topic_config(topic, data))
                except ZkDataError as e:
                    log.error("%s", e)
                    return True
            with self._lock:
                configs = {**self._view.configs, topic: config}
            self._update(configs=configs)
            return True
        return watch
