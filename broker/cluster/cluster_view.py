"""What every broker of a cluster knows of it: live brokers, the controller, topics, partition states.

Owns each broker's copy of the cluster metadata, kept from ZooKeeper watches (Kafka's brokers get
the same from the controller's UpdateMetadata and LeaderAndIsr requests; pylog's read the znodes the
fenced controller writes, which carry the same facts and the same epochs):

- `ClusterView` is an immutable snapshot; readers never see a half-applied change;
- `ClusterWatcher` follows `/brokers/ids`, `/controller`, `/brokers/topics`, each topic's assignment,
  its config and each partition's state, and calls `on_change(view)` (on kazoo's thread) after every
  change, with the whole new view. Callers hand it to their own thread or loop;
- a partition state carries its znode version: a leader changes its ISR with a write conditional on
  that version (Kafka's ZooKeeper mode), so a leader acting on a stale state changes nothing.

Never writes to ZooKeeper.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.cluster import zk_layout
from broker.cluster.membership import read_registrations
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment, ZkDataError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class StateVersion:
    """A partition's state and the version of its znode (the fence for ISR changes)."""
    state: PartitionState
    zk_version: int


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
        self._topic_watched: set[str] = set()
        self._partition_watched: set[TopicPartition] = set()

    @property
    def view(self) -> ClusterView:
        with self._lock:
            return self._view

    def start(self) -> None:
        kazoo = self.zk.kazoo
        ChildrenWatch(kazoo, zk_layout.BROKER_IDS, self._on_brokers)
        DataWatch(kazoo, zk_layout.CONTROLLER, self._on_controller)
        ChildrenWatch(kazoo, zk_layout.TOPICS, self._on_topics)

    def _update(self, **changes: Any) -> None:
        with self._lock:
            self._view = replace(self._view, **changes)
            view = self._view
        self._on_change(view)

    # ------------------------------------------------------------ brokers and controller

    def _on_brokers(self, children: list[str]) -> None:
        self._update(brokers=read_registrations(self.zk, children))

    def _on_controller(self, data: bytes | None, stat: Any) -> None:
        controller = -1
        if stat is not None:
            try:
                controller = zk_layout.decode_controller(data)
            except ZkDataError as e:
                log.warning("%s", e)
        self._update(controller_id=controller)

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
            self._partition_watched = {tp for tp in self._partition_watched if tp[0] not in gone}
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
                new = [(topic, p) for p in assignment.partitions if (topic, p) not in self._partition_watched]
                self._partition_watched.update(new)
            self._update(topics=topics)
            for tp in new:
                DataWatch(self.zk.kazoo, zk_layout.partition_state_path(*tp), self._state_watch(tp))
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

    def _state_watch(self, tp: TopicPartition) -> Callable[[bytes | None, Any], bool]:
        def watch(data: bytes | None, stat: Any) -> bool:
            with self._lock:
                if tp not in self._partition_watched:
                    return False
            if stat is None:
                with self._lock:
                    states = {k: v for k, v in self._view.states.items() if k != tp}
                self._update(states=states)
                return True        # not created yet (the controller writes it soon) or deleted
            try:
                state = PartitionState.decode(tp[0], tp[1], data)
            except ZkDataError as e:
                log.error("%s", e)
                return True
            with self._lock:
                states = {**self._view.states, tp: StateVersion(state, stat.version)}
            self._update(states=states)
            return True
        return watch
