"""Cluster mode's replication on one broker: partition roles from the cluster view, ISR and high watermark.

Owns, on the broker's event loop (Kafka's ReplicaManager and Partition, ZooKeeper mode):

- roles: `apply(view)` makes this broker leader or follower of each partition it replicates, as the
  partition states the controller sent (LeaderAndIsr, UpdateMetadata) say; `stop_replicas` ends
  roles on StopReplica. A new leader epoch starts a new `LeaderState` and an
  entry in the log's leader epoch cache; a follower is handed to the fetcher of its leader, which
  truncates by epoch before it copies. A topic is deleted here only when it leaves the view after
  this broker saw it there (the controller deleted it), or when ZooKeeper holds a topic of the same
  name with another topic id (it was deleted and re-created while this broker was away). A local
  topic ZooKeeper never listed (a wrong chroot, a ZooKeeper wiped by mistake) stays on disk, unserved,
  with a warning: no data is ever deleted for the absence of metadata;
- the leader's checks for client requests: not the leader → NOT_LEADER_OR_FOLLOWER (no live
  leader → LEADER_NOT_AVAILABLE); a stale or future leader epoch → FENCED/UNKNOWN_LEADER_EPOCH;
  acks=all with fewer in-sync replicas than `min.insync.replicas` → NOT_ENOUGH_REPLICAS before
  anything is written;
- follower fetches: their positions advance the high watermark, which releases acks=all produces
  waiting for it (`wait_replicated`) and consumers' fetches (they read below it only);
- ISR changes, written by the leader to the partition's state znode conditionally on the version
  it last saw (a stale leader writes nothing and learns it is stale): a follower not caught up for
  `replica.lag.time.max.ms` leaves, one that caught up with the high watermark rejoins. A shrink
  counts once committed in ZooKeeper (`LeaderState.commit_isr`), a rejoin from the moment it is
  proposed (Kafka's maximal ISR, `LeaderState.propose_isr`);
- losing leadership fails every waiting acks=all produce with NOT_LEADER_OR_FOLLOWER: a record is
  acknowledged only when every in-sync replica has it.

Never talks to ZooKeeper itself: `IsrWriter` (the cluster node) does the writes, on a worker thread.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Protocol

from kafka_protocol.topic_partition import TopicPartition
from broker.cluster.cluster_view import ClusterView, StateVersion
from broker.cluster.zk_layout import PartitionState
from broker.config import BrokerConfig
from kafka_protocol.errors import (
    FencedLeaderEpochError,
    LeaderNotAvailableError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from broker.cluster.topic_registry import TopicRegistry
from broker.log.fileutil import atomic_write_many
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.replication.leader_state import LeaderState
from broker.replication.quota import UNLIMITED, ReplicationQuota, is_throttled, parse_throttled_replicas
from broker.replication.read_replica import NO_PREFERENCE, preferred_read_replica
from broker.replication.replica_fetcher import FetcherSettings, FollowedPartition, ReplicaFetcher, TieredRestore
from broker.security.inter_broker import PeerSecurity, peer_address

log = logging.getLogger(__name__)


class LocalReplicas(Protocol):
    """What replication needs of the broker's local replicas (broker.replica_manager.ReplicaManager, which
    calls replication back): the partition logs and the topic registry."""

    logs: LogManager
    registry: TopicRegistry

# (partition, new state, znode version it must still have) -> the znode's new version; raises if it moved
IsrWriter = Callable[[TopicPartition, PartitionState, int], int]


def _epoch_checked(role: "ReplicaRole", current_leader_epoch: int) -> "ReplicaRole":
    """`role`, when the leader epoch a client knows (-1: none) is the partition's; else Kafka's error for it."""
    where = f"{role.topic}-{role.partition}"
    if current_leader_epoch > role.leader_epoch:
        raise UnknownLeaderEpochError(f"{where}: leader epoch {current_leader_epoch} is newer than {role.leader_epoch}")
    if 0 <= current_leader_epoch < role.leader_epoch:
        raise FencedLeaderEpochError(f"{where}: leader epoch {current_leader_epoch} is older than {role.leader_epoch}")
    return role


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"            # a replica whose partition has no live leader, or no state yet


@dataclass(eq=False)
class ReplicaRole:
    topic: str
    partition: int
    log: PartitionLog
    role: Role
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    zk_version: int
    controller_epoch: int
    leader_state: LeaderState | None = None
    isr_change_pending: bool = False
    waiters: list[tuple[int, "asyncio.Future[None]"]] = field(default_factory=list)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


class Replication:
    def __init__(self, node_id: int, config: BrokerConfig, replicas: LocalReplicas, isr_writer: IsrWriter,
                 on_high_watermark: Callable[[TopicPartition], None], peer_security: PeerSecurity | None = None,
                 tiered_restore: TieredRestore | None = None) -> None:
        self.node_id = node_id
        self.config = config
        self.replicas = replicas
        self.isr_writer = isr_writer
        self._on_high_watermark = on_high_watermark
        self.view = ClusterView()
        self.roles: dict[TopicPartition, ReplicaRole] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.lag_ms: int = config["replica.lag.time.max.ms"]
        self._isr_task: asyncio.Task[None] | None = None
        self.isr_shrinks = self.isr_expands = 0      # ISR changes written as leader (metrics)
        self._leadership_listeners: dict[str, list[Callable[[int, bool], None]]] = {}
        self._seen_topics: set[str] = set()       # topics some applied view listed: leaving it means deletion
        self._strays_reported: set[str] = set()
        windows, window_s = config["replication.quota.window.num"], config["replication.quota.window.size.seconds"]
        self.leader_quota = ReplicationQuota(config["leader.replication.throttled.rate"], windows, window_s)
        self.follower_quota = ReplicationQuota(config["follower.replication.throttled.rate"], windows, window_s)
        self._fetcher_settings = FetcherSettings(
            replica_id=node_id, max_wait_ms=config["replica.fetch.wait.max.ms"],
            partition_max_bytes=config["replica.fetch.max.bytes"],
            max_bytes=config["replica.fetch.response.max.bytes"], backoff_ms=config["replica.fetch.backoff.ms"],
            request_timeout_ms=max(config["replica.lag.time.max.ms"], 5000), security=peer_security,
            tiered_restore=tiered_restore)

    def on_leadership(self, topic: str, listener: Callable[[int, bool], None]) -> None:
        """Call `listener(partition, is_leader)` whenever this broker gains or loses leadership of a
        partition of `topic` (the group coordinator follows `__consumer_offsets` this way)."""
        self._leadership_listeners.setdefault(topic, []).append(listener)

    def _tell(self, tp: TopicPartition, leader: bool) -> None:
        for listener in self._leadership_listeners.get(tp[0], ()):
            try:
                listener(tp[1], leader)
            except Exception:   # noqa: BLE001 - a listener's failure must not stop role changes
                log.exception("leadership listener for %s-%d failed", *tp)

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    def start(self) -> None:
        self._isr_task = asyncio.get_running_loop().create_task(self._isr_loop(), name="isr-expiry")

    async def stop(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        for role in self.roles.values():
            self._fail_waiters(role, NotLeaderOrFollowerError(f"broker {self.node_id} is shutting down"))

    # ------------------------------------------------------------ roles from the cluster view

    def apply(self, view: ClusterView) -> None:
        """Bring local topics, logs and roles in line with `view` (on the event loop)."""
        self.view = view
        self._sync_topics(view)
        checkpoints: list[tuple[Path, bytes]] = []     # new leader epochs, made durable together below
        for (topic, partition), sv in view.states.items():
            replicas = view.replicas(topic, partition)
            if self.node_id not in replicas:
                continue
            plog = self.replicas.logs.get(topic, partition)
            if plog is None:
                continue
            self._apply_state(topic, partition, plog, replicas, sv, view, checkpoints)
        if checkpoints:
            # before this returns (and the loop serves a produce to a new leadership), as Kafka's makeLeader
            # writes each one; together, their fsyncs share journal commits (a failover's thousand leaderships)
            atomic_write_many(checkpoints)
        for tp in [tp for tp in self.roles if tp not in view.states or self.node_id not in view.replicas(*tp)]:
            self._drop(tp)
        for leader_id, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                asyncio.get_running_loop().create_task(fetcher.stop())
                del self.fetchers[leader_id]

    def stop_replicas(self, partitions: list[TopicPartition]) -> None:
        """StopReplica: stop leading or following these partitions now (their data goes when the topic
        leaves ZooKeeper, see `_sync_topics`)."""
        for tp in partitions:
            self._drop(tp)

    def _sync_topics(self, view: ClusterView) -> None:
        registry = self.replicas.registry
        for name, assignment in view.topics.items():
            count = len(assignment.partitions)
            overrides = dict(view.configs.get(name, {}))
            info = registry.get(name)
            if info is None or (assignment.topic_id is not None and info.topic_id != assignment.topic_id):
                if info is not None:      # re-created under the same name: the old logs go
                    self._delete_topic(name)
                registry.mirror(name, assignment.topic_id, count, overrides)
            else:
                if info.partitions != count:
                    registry.mirror(name, info.topic_id, count, overrides)
                if info.overrides != overrides:
                    registry.mirror(name, info.topic_id, count, overrides)
                    self.replicas.logs.update_topic_config(name, registry.config_of(name))
            config = registry.config_of(name)
            for p, replicas in assignment.partitions.items():
                if self.node_id in replicas and self.replicas.logs.get(name, p) is None:
                    plog = self.replicas.logs.create(name, p, config)
                    plog.replicated = True
                elif self.node_id not in replicas and self.replicas.logs.get(name, p) is not None:
                    self._drop((name, p))         # moved away by a reassignment: its data is not this broker's
                    self.replicas.logs.delete_partition(name, p)
                    log.info("%s-%d: no longer a replica on broker %d; its log is deleted", name, p, self.node_id)
        for info in list(registry):
            if info.name in view.topics:
                continue
            if info.name in self._seen_topics:
                self._seen_topics.discard(info.name)
                self._delete_topic(info.name)
            elif info.name not in self._strays_reported:
                self._strays_reported.add(info.name)
                log.warning("topic %s is on this broker's disk but not in ZooKeeper (%s): kept, not served",
                            info.name, "check zookeeper.connect and its chroot")
        self._seen_topics.update(view.topics)

    def _delete_topic(self, name: str) -> None:
        for tp in [tp for tp in self.roles if tp[0] == name]:
            self._drop(tp)
        registry = self.replicas.registry
        if name in registry:
            registry.delete(name)
        self.replicas.logs.delete_topic(name)
        log.info("topic %s deleted on broker %d", name, self.node_id)

    def _drop(self, tp: TopicPartition) -> None:
        role = self.roles.pop(tp, None)
        if role is None:
            return
        self._unfollow(tp)
        self._fail_waiters(role, NotLeaderOrFollowerError(f"{tp[0]}-{tp[1]} is gone from broker {self.node_id}"))
        if role.role == Role.LEADER:
            self._tell(tp, False)

    def _apply_state(self, topic: str, partition: int, plog: PartitionLog, replicas: tuple[int, ...],
                     sv: StateVersion, view: ClusterView, checkpoints: list[tuple[Path, bytes]]) -> None:
        state = sv.state
        tp = (topic, partition)
        role = self.roles.get(tp)
        same_epoch = role is not None and role.leader_epoch == state.leader_epoch and role.leader_id == state.leader
        if role is not None and same_epoch:
            if sv.zk_version >= role.zk_version:       # an ISR change (ours or the controller's)
                role.isr, role.zk_version, role.controller_epoch = state.isr, sv.zk_version, state.controller_epoch
                role.replicas = replicas
                if role.leader_state is not None:
                    role.leader_state.replicas = replicas
                    role.leader_state.commit_isr(state.isr)
                    self._maybe_advance(role)
            if role.role == Role.FOLLOWER and role.leader_id in view.brokers:
                self._follow(role, view)    # the leader's address may have changed (a restart)
            return
        waiting: list[tuple[int, "asyncio.Future[None]"]] = []
        if role is not None and role.role == Role.LEADER:
            if state.leader == self.node_id:
                waiting = role.waiters        # still the leader, in a new epoch: acks=all waits go on
            else:
                self._fail_waiters(role, NotLeaderOrFollowerError(
                    f"{topic}-{partition}: broker {self.node_id} is no longer the leader (epoch {state.leader_epoch})"))
                self._tell(tp, False)
        plog.replicated = True
        if state.leader == self.node_id:
            role = self._become_leader(topic, partition, plog, replicas, sv, checkpoints)
            role.waiters = waiting
            self._release(role)
        else:
            new_role = Role.FOLLOWER if state.leader in view.brokers else Role.NONE
            role = ReplicaRole(topic, partition, plog, new_role, state.leader, state.leader_epoch, replicas,
                               state.isr, sv.zk_version, state.controller_epoch)
            self.roles[tp] = role
            self._unfollow(tp)
            if new_role == Role.FOLLOWER:
                self._follow(role, view)
            log.info("%s-%d: broker %d follows %d (epoch %d)", topic, partition, self.node_id, state.leader,
                     state.leader_epoch)

    def _become_leader(self, topic: str, partition: int, plog: PartitionLog, replicas: tuple[int, ...],
                       sv: StateVersion, checkpoints: list[tuple[Path, bytes]]) -> ReplicaRole:
        state = sv.state
        self._unfollow((topic, partition))
        plog.leader_epochs.assign(state.leader_epoch, plog.log_end_offset, defer=checkpoints)
        leader_state = LeaderState(self.node_id, replicas, state.isr, plog.log_end_offset, plog.high_watermark,
                                   self.now_ms())
        role = ReplicaRole(topic, partition, plog, Role.LEADER, self.node_id, state.leader_epoch, replicas, state.isr,
                           sv.zk_version, state.controller_epoch, leader_state)
        self.roles[(topic, partition)] = role
        log.info("%s-%d: broker %d leads (epoch %d, isr %s, log end %d, high watermark %d)", topic, partition,
                 self.node_id, state.leader_epoch, list(state.isr), plog.log_end_offset, plog.high_watermark)
        self._maybe_advance(role)
        self._tell((topic, partition), True)
        return role

    def _follow(self, role: ReplicaRole, view: ClusterView) -> None:
        reg = view.brokers.get(role.leader_id)
        if reg is None:
            return
        fetcher = self.fetchers.get(role.leader_id)
        address = peer_address(self._fetcher_settings.security, reg)
        if fetcher is not None and fetcher.address != address:
            asyncio.get_running_loop().create_task(fetcher.stop())
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(role.leader_id, *address, self._fetcher_settings,
                                     self._on_high_watermark, self._follower_throttle)
            self.fetchers[role.leader_id] = fetcher
        current = fetcher.partitions.get(role.tp)
        if current is not None and current.leader_epoch == role.leader_epoch:
            return
        fetcher.add(FollowedPartition(role.topic, role.partition, role.log, role.leader_epoch))

    def _follower_throttle(self, tp: TopicPartition) -> ReplicationQuota | None:
        """The follower quota when this broker's replica of `tp` is throttled and not in sync (Kafka never holds
        back an in-sync replica), else None."""
        role = self.roles.get(tp)
        in_sync = role is not None and self.node_id in role.isr
        return self.follower_quota if not in_sync and self.throttled("follower", *tp) else None

    def _unfollow(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    # ------------------------------------------------------------ checks for client requests

    def leads(self, topic: str, partition: int) -> bool:
        role = self.roles.get((topic, partition))
        return role is not None and role.role == Role.LEADER

    def leader_role(self, topic: str, partition: int, current_leader_epoch: int = -1) -> ReplicaRole:
        """This broker's role as the partition's leader, or the error a client must get."""
        role = self.roles.get((topic, partition))
        if role is None or role.role != Role.LEADER:
            if self.view.partitions_of(topic) == 0:
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
            if not 0 <= partition < self.view.partitions_of(topic):
                raise UnknownTopicOrPartitionError(f"Partition {partition} of topic '{topic}' does not exist")
            leader = self.view.leader(topic, partition)
            if leader < 0:
                raise LeaderNotAvailableError(f"{topic}-{partition} has no live leader")
            raise NotLeaderOrFollowerError(f"broker {self.node_id} is not the leader of {topic}-{partition} "
                                           f"(broker {leader} is)")
        return _epoch_checked(role, current_leader_epoch)

    def throttled(self, side: str, topic: str, partition: int) -> bool:
        """Whether this broker's replica of the partition is throttled on `side` ("leader" or "follower"): a rate
        is set (a dynamic setting, read again) and the topic's *.replication.throttled.replicas name the replica.
        Called for every partition of every replica fetch: two dictionary lookups when no rate is set."""
        quota = self.leader_quota if side == "leader" else self.follower_quota
        quota.rate = self.config[f"{side}.replication.throttled.rate"]
        if quota.rate >= UNLIMITED:
            return False
        info = self.replicas.registry.get(topic)
        value = info.overrides.get(f"{side}.replication.throttled.replicas", "") if info is not None else ""
        return is_throttled(parse_throttled_replicas(value), partition, self.node_id)

    def read_role(self, topic: str, partition: int, current_leader_epoch: int = -1) -> ReplicaRole:
        """This broker's role for a consumer's Fetch (v11+, KIP-392): as leader, or as a follower, which serves up to
        the high watermark its leader sent it; the epoch the consumer knows is checked against the partition's."""
        role = self.roles.get((topic, partition))
        if role is None or role.role != Role.FOLLOWER:
            return self.leader_role(topic, partition, current_leader_epoch)
        return _epoch_checked(role, current_leader_epoch)

    def preferred_read_replica(self, role: ReplicaRole, client_rack: str) -> int:
        """KIP-392: the in-sync follower in `client_rack` a consumer should fetch from, else -1 (this leader)."""
        if role.role != Role.LEADER or role.leader_state is None or not client_rack:
            return NO_PREFERENCE
        racks = {b: reg.rack for b, reg in self.view.brokers.items()}
        return preferred_read_replica(client_rack, self.node_id, role.leader_state, racks, self.now_ms(),
                                      self.config["replica.lag.time.max.ms"])

    def check_offsets_available(self, role: ReplicaRole) -> None:
        """KIP-207: a consumer's ListOffsets waits until this leader's high watermark is known to be current,
        that is, reached the start of its epoch (before, it may trail the previous leader's)."""
        state = role.leader_state
        if state is not None and role.log.high_watermark < state.epoch_start_offset:
            raise OffsetNotAvailableError(
                f"{role.topic}-{role.partition}: the new leader's high watermark {role.log.high_watermark} has not "
                f"reached its epoch's start {state.epoch_start_offset} yet")

    def _isr_shortfall(self, role: ReplicaRole) -> str | None:
        """Why the ISR is too small for acks=all (below the topic's min.insync.replicas), else None."""
        needed = self.replicas.registry.config_of(role.topic).min_insync_replicas
        if len(role.isr) >= needed:
            return None
        return f"{role.topic}-{role.partition}: the ISR {list(role.isr)} is below min.insync.replicas={needed}"

    def check_min_isr(self, role: ReplicaRole) -> None:
        """acks=all: refuse before writing when the ISR is smaller than min.insync.replicas."""
        shortfall = self._isr_shortfall(role)
        if shortfall is not None:
            raise NotEnoughReplicasError(shortfall)

    def after_append(self, role: ReplicaRole) -> None:
        """A leader append: with no other in-sync replica the high watermark moves at once."""
        self._maybe_advance(role)

    def wait_replicated(self, role: ReplicaRole, end_offset: int, timeout_ms: int) -> "asyncio.Future[None] | None":
        """None when every in-sync replica already has the records below `end_offset`, else a future that
        completes when they do (or fails: timeout, lost leadership, ISR below min.insync.replicas)."""
        if role.log.high_watermark >= end_offset:
            self._check_after_append(role)
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        role.waiters.append((end_offset, fut))
        loop = asyncio.get_running_loop()

        def expire() -> None:
            if not fut.done():
                fut.set_exception(RequestTimedOutError(
                    f"{role.topic}-{role.partition}: the in-sync replicas {list(role.isr)} did not all have offset "
                    f"{end_offset - 1} within {timeout_ms} ms"))
        handle = loop.call_later(max(timeout_ms, 0) / 1000.0, expire)
        fut.add_done_callback(lambda _f: handle.cancel())
        return fut

    def _check_after_append(self, role: ReplicaRole) -> None:
        shortfall = self._isr_shortfall(role)
        if shortfall is not None:
            raise NotEnoughReplicasAfterAppendError(f"written, but {shortfall}")

    # ------------------------------------------------------------ followers, high watermark, ISR

    def on_follower_fetch(self, role: ReplicaRole, follower: int, fetch_offset: int) -> None:
        state = role.leader_state
        if state is None:
            return
        state.on_follower_fetch(follower, fetch_offset, role.log.log_end_offset, self.now_ms())
        self._maybe_advance(role)
        if not role.isr_change_pending and follower not in role.isr and follower in state.expand_candidates():
            self._change_isr(role, tuple(sorted({*role.isr, follower}, key=role.replicas.index)),
                             f"broker {follower} caught up")

    def _maybe_advance(self, role: ReplicaRole) -> None:
        state = role.leader_state
        if state is None:
            return
        if state.advance_high_watermark(role.log.log_end_offset):
            role.log.update_high_watermark(state.high_watermark)
            self._release(role)
            self._on_high_watermark(role.tp)

    def _release(self, role: ReplicaRole) -> None:
        hw = role.log.high_watermark
        keep = []
        for end_offset, fut in role.waiters:
            if fut.done():
                continue
            if hw >= end_offset:
                try:
                    self._check_after_append(role)
                    fut.set_result(None)
                except NotEnoughReplicasAfterAppendError as e:
                    fut.set_exception(e)
            else:
                keep.append((end_offset, fut))
        role.waiters = keep

    def _fail_waiters(self, role: ReplicaRole, error: Exception) -> None:
        for _, fut in role.waiters:
            if not fut.done():
                fut.set_exception(error)
        role.waiters = []

    async def _isr_loop(self) -> None:
        """Kafka's isr-expiration task: every half lag time, drop followers that fell behind."""
        while True:
            await asyncio.sleep(max(self.lag_ms / 2000.0, 0.05))
            now = self.now_ms()
            for role in list(self.roles.values()):
                state = role.leader_state
                if role.role != Role.LEADER or state is None or role.isr_change_pending:
                    continue
                out = state.shrink_candidates(now, self.lag_ms)
                if out:
                    self._change_isr(role, tuple(r for r in role.isr if r not in out),
                                     f"brokers {list(out)} not caught up for {self.lag_ms} ms")

    def _change_isr(self, role: ReplicaRole, isr: tuple[int, ...], why: str) -> None:
        role.isr_change_pending = True
        if role.leader_state is not None:
            role.leader_state.propose_isr(isr)
        state = PartitionState(self.node_id, role.leader_epoch, isr, role.controller_epoch)
        asyncio.get_running_loop().create_task(self._write_isr(role, state, role.zk_version, why))

    async def _write_isr(self, role: ReplicaRole, state: PartitionState, version: int, why: str) -> None:
        before = len(role.isr)
        try:
            new_version = await asyncio.to_thread(self.isr_writer, role.tp, state, version)
        except Exception as e:   # noqa: BLE001 - a stale version or a lost session: the view will tell
            log.warning("%s-%d: ISR change to %s not written (%s): %s", role.topic, role.partition,
                        list(state.isr), why, e)
            return
        finally:
            role.isr_change_pending = False
            if role.leader_state is not None:
                role.leader_state.settle()
        if len(state.isr) < before:        # written: counted whatever the role became meanwhile (metrics)
            self.isr_shrinks += 1
        elif len(state.isr) > before:
            self.isr_expands += 1
        if self.roles.get(role.tp) is not role or role.leader_epoch != state.leader_epoch:
            return
        log.info("%s-%d: ISR %s -> %s (%s)", role.topic, role.partition, list(role.isr), list(state.isr), why)
        if new_version > role.zk_version:
            role.isr, role.zk_version = state.isr, new_version
            if role.leader_state is not None:
                role.leader_state.commit_isr(state.isr)
        self._maybe_advance(role)
        self._release(role)
