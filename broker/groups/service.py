"""GroupService: the group coordinator plus committed offsets and group administration.

Owns: startup (create and load `__consumer_offsets`, restore groups), OffsetCommit validation
(generation fencing; commits with generation -1 from outside an Empty group, as Kafka allows),
OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups, and the periodic expiry of
offsets after offsets.retention.minutes. This is the object API handlers reach as `ctx.groups`.

In cluster mode a broker coordinates the groups whose `__consumer_offsets` partition it leads
(Kafka's rule): leadership of such a partition loads its groups and offsets from the log
(`on_offsets_partition`), losing it forgets them, and every request for a group coordinated
elsewhere gets NOT_COORDINATOR so that the client looks the coordinator up again.

Never sees protocol types or sockets; returns Kafka error codes for handlers to put in responses.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable

from broker.config import BrokerConfig
from kafka_protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError
from broker.groups.coordinator import GroupCoordinator
from broker.groups.group import Group, GroupState
from broker.groups.member import JoinResult, SyncResult
from broker.groups.offset_store import OFFSETS_TOPIC, OffsetStore, TopicPartition
from broker.groups.records import OffsetValue
from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState


class GroupService(GroupCoordinator):
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, clock: Callable[[], float],
                 cluster: bool = False) -> None:
        store = OffsetStore(replicas, config["offsets.topic.num.partitions"], config["offsets.topic.segment.bytes"])
        super().__init__(store, initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                         min_session_timeout_ms=config["group.min.session.timeout.ms"],
                         max_session_timeout_ms=config["group.max.session.timeout.ms"], clock=clock)
        self.replicas = replicas
        self.retention_ms = config["offsets.retention.minutes"] * 60_000
        self.retention_check_ms = config["offsets.retention.check.interval.ms"]
        self.metadata_max_bytes = config["offset.metadata.max.bytes"]
        self._expiry_task: asyncio.Task[None] | None = None
        self.cluster = cluster
        self.led_partitions: set[int] = set()      # cluster mode: the __consumer_offsets partitions led here
        self.last_commit: tuple[int, int] | None = None   # (partition, end offset) of the last stored commit
        self.offsets_replication_factor: int = config["offsets.topic.replication.factor"]

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Create/load `__consumer_offsets` and restore groups; call from the event loop before serving.
        In cluster mode groups are loaded partition by partition as leadership arrives."""
        if self.cluster:
            self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())
            return
        self.store.ensure_topic()
        loaded = self.store.load()
        for group_id, value in loaded.groups.items():
            self.restore(group_id, value)
        for group_id in self.store.groups():
            if group_id not in self.groups:
                self.groups[group_id] = Group(group_id, self.now_ms())
        log.info("loaded %d groups and %d committed offsets from %s in %.2fs", len(self.groups), loaded.offsets,
                 "__consumer_offsets", loaded.seconds)
        self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())

    def shutdown(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for group in self.groups.values():
            self._cancel_join_timer(group)
            for m in group.members.values():
                m.cancel_timer()

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_ms / 1000)
            try:
                self.expire_offsets(self.now_ms())
            except Exception:  # noqa: BLE001 - expiry must never stop the broker
                log.exception("offset expiry failed")

    # ------------------------------------------------------------------ cluster mode: who coordinates
    def on_offsets_partition(self, partition: int, leader: bool) -> None:
        """Leadership of `__consumer_offsets` partition `partition` arrived (load its groups) or left."""
        if leader and partition not in self.led_partitions:
            loaded = self.store.load([partition])
            for group_id, value in loaded.groups.items():
                self.restore(group_id, value)
            for group_id in self.store.groups():
                if self.store.partition_of(group_id) == partition and group_id not in self.groups:
                    self.groups[group_id] = Group(group_id, self.now_ms())
            self.led_partitions.add(partition)
            log.info("coordinating %d groups of __consumer_offsets-%d (%d offsets, loaded in %.2fs)",
                     len(loaded.groups), partition, loaded.offsets, loaded.seconds)
        elif not leader and partition in self.led_partitions:
            self.led_partitions.discard(partition)
            for group_id in [g for g in self.groups if self.store.partition_of(g) == partition]:
                group = self.groups.pop(group_id)
                self._cancel_join_timer(group)
                for m in group.members.values():
                    m.cancel_timer()
            self.store.unload(partition)
            log.info("no longer coordinating the groups of __consumer_offsets-%d", partition)

    def coordinator_node(self, group_id: str) -> tuple[int, str | None]:
        """Cluster mode FindCoordinator: the broker leading the group's `__consumer_offsets` partition, or
        (-1, why) while there is none (the topic is created here on first use, as Kafka does)."""
        replication = self.replicas.replication
        assert replication is not None
        count = replication.view.partitions_of(OFFSETS_TOPIC)
        if count == 0:
            try:
                self.store.ensure_topic(self.offsets_replication_factor)
            except TopicAlreadyExistsError:
                pass
            except KafkaError as e:
                return -1, f"cannot create {OFFSETS_TOPIC}: {e}"
            return -1, f"{OFFSETS_TOPIC} is being created"
        self.store.num_partitions = count           # the topic's partition count wins over the setting
        partition = self.store.partition_of(group_id)
        leader = replication.view.leader(OFFSETS_TOPIC, partition)
        if leader < 0:
            return -1, f"{OFFSETS_TOPIC}-{partition} has no leader"
        return leader, None

    def coordinator_error(self, group_id: str) -> int:
        """NOT_COORDINATOR when another broker coordinates `group_id` (cluster mode), else NONE."""
        if self.cluster and group_id and self.store.partition_of(group_id) not in self.led_partitions:
            return E.not_coordinator
        return E.none

    async def join_group(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                         client_id: str, client_host: str, version: int) -> JoinResult:
        error = self.coordinator_error(group_id)
        if error != E.none:
            return JoinResult(error, member_id=member_id)
        return await super().join_group(group_id, member_id, instance_id, protocol_type, protocols,
                                        session_timeout_ms, rebalance_timeout_ms, client_id, client_host, version)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        error = self.coordinator_error(group_id)
        if error != E.none:
            return SyncResult(error)
        return await super().sync_group(group_id, generation_id, member_id, instance_id, protocol_type,
                                        protocol_name, assignments)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        return self.coordinator_error(group_id) or super().heartbeat(group_id, generation_id, member_id, instance_id)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self.coordinator_error(group_id)
        if error != E.none:
            return ErrorCode(error), [ErrorCode(error)] * len(leaving)
        return super().leave_group(group_id, leaving)

    # ------------------------------------------------------------------ offsets
    def _commit_error(self, group: Group | None, group_id: str, member_id: str, instance_id: str | None,
                      generation_id: int) -> int:
        if not group_id:
            return E.invalid_group_id
        if group is None:
            return E.none if generation_id < 0 else E.illegal_generation
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation_id < 0 and group.is_(S.EMPTY):
            return E.none
        if generation_id >= 0 or member_id or instance_id is not None:
            if group.is_static_fenced(member_id, instance_id):
                return E.fenced_instance_id
            if not group.has(member_id):
                return E.unknown_member_id
            if generation_id != group.generation_id:
                return E.illegal_generation
        else:
            return E.unknown_member_id
        if group.is_(S.COMPLETING_REBALANCE):
            return E.rebalance_in_progress
        return E.none

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                       offsets: dict[TopicPartition, tuple[int, int, str | None]]) -> dict[TopicPartition, int]:
        """Validate and store a commit: `offsets` maps (topic, partition) to (offset, leader epoch, metadata).
        `last_commit` is then where it was written (cluster mode: the handler waits for its replication)."""
        self.last_commit = None
        group = self.groups.get(group_id)
        error = self.coordinator_error(group_id) or self._commit_error(group, group_id, member_id, instance_id,
                                                                       generation_id)
        if error != E.none:
            return {tp: error for tp in offsets}
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.now_ms())
        member = group.get(member_id)
        if member is not None and generation_id >= 0:
            self._schedule_session(group, member)   # a commit counts as a heartbeat, as in Kafka
        now = self.now_ms()
        results, accepted = self._accept(offsets, now)
        try:
            self.last_commit = self.store.commit(group_id, accepted, now)
        except KafkaError as e:     # cluster mode: not the leader any more, or the ISR is too small
            for tp in accepted:
                results[tp] = E.not_coordinator if e.code == E.not_leader_or_follower else E.coordinator_not_available
        except Exception:  # noqa: BLE001
            log.exception("group %s: cannot store offsets", group_id)
            for tp in accepted:
                results[tp] = E.unknown_server_error
        return results

    def _accept(self, offsets: dict[TopicPartition, tuple[int, int, str | None]], now: int,
                ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetValue]]:
        """Per partition: UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, or accepted (to store)."""
        results: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        for (topic, partition), (offset, epoch, metadata) in offsets.items():
            info = self.replicas.registry.get(topic)
            if info is None or not 0 <= partition < info.partitions:
                results[(topic, partition)] = E.unknown_topic_or_partition
            elif metadata is not None and len(metadata.encode()) > self.metadata_max_bytes:
                results[(topic, partition)] = E.offset_metadata_too_large
            else:
                accepted[(topic, partition)] = OffsetValue(offset, epoch, metadata or "", now)
                results[(topic, partition)] = E.none
        return results, accepted

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                           member_id: str, instance_id: str | None,
                           offsets: dict[TopicPartition, tuple[int, int, str | None]]) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: store a transaction's commit, pending until its marker (Kafka's checks:
        a member id must be a member, a generation >= 0 the current one; no rebalance check)."""
        error = self.coordinator_error(group_id) or (E.invalid_group_id if not group_id else E.none)
        group = self.groups.get(group_id)
        if error == E.none and group is not None:
            if group.is_(S.DEAD):
                error = E.coordinator_not_available
            elif member_id and not group.has(member_id):
                error = E.unknown_member_id
            elif group.is_static_fenced(member_id, instance_id):
                error = E.fenced_instance_id
            elif generation_id >= 0 and generation_id != group.generation_id:
                error = E.illegal_generation
        if error != E.none:
            return {tp: error for tp in offsets}
        if group is None:
            self.groups[group_id] = Group(group_id, self.now_ms())
        now = self.now_ms()
        results, accepted = self._accept(offsets, now)
        try:
            self.store.txn_commit(group_id, producer_id, producer_epoch, accepted, now)
        except KafkaError as e:
            for tp in accepted:
                results[tp] = e.code if e.code == E.invalid_producer_epoch else E.coordinator_not_available
        return results

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to `partition` of __consumer_offsets."""
        self.store.complete_txn(partition, producer_id, commit)

    def unstable(self, group_id: str, tp: TopicPartition) -> bool:
        """An open transaction holds a commit of `tp` (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        return self.store.has_pending(group_id, tp)

    def fetch_offsets(self, group_id: str, tps: Iterable[TopicPartition] | None) -> dict[TopicPartition, OffsetValue | None]:
        """Committed offsets of `tps` (None: all the group has); None for partitions without one."""
        if tps is None:
            return dict(self.store.offsets_of(group_id))
        return {tp: self.store.get(group_id, tp) for tp in tps}

    def delete_offsets(self, group_id: str, tps: list[TopicPartition]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: (group error, per-partition errors). Refuses topics a live group subscribes to."""
        group = self.groups.get(group_id)
        if not group_id:
            return E.invalid_group_id, {}
        if self.coordinator_error(group_id):
            return ErrorCode(self.coordinator_error(group_id)), {}
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found, {}
        results = {tp: E.none for tp in tps}
        if not group.is_(S.EMPTY):
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return E.non_empty_group, {}
            for tp in tps:
                if tp[0] in subscribed:
                    results[tp] = E.group_subscribed_to_topic
        self.store.delete_offsets(group_id, [tp for tp, err in results.items() if err == E.none], self.now_ms())
        return E.none, results

    def expire_offsets(self, now_ms: int) -> int:
        """Drop offsets past offsets.retention.minutes, Kafka's way; remove groups left with nothing."""
        expired_total = 0
        for group_id, group in list(self.groups.items()):
            if group.is_(S.DEAD):
                continue
            offsets = self.store.offsets_of(group_id)
            expired: list[TopicPartition] = []
            if group.is_(S.EMPTY):
                # Empty consumer groups: retention runs from when the group became empty (or from a
                # later commit, e.g. reset-offsets); groups that only commit: from each commit.
                base = group.state_timestamp_ms if group.protocol_type else -1
                expired = [tp for tp, v in offsets.items() if max(base, v.commit_timestamp) + self.retention_ms <= now_ms]
            else:
                subscribed = group.subscribed_topics()
                if subscribed is not None:
                    expired = [tp for tp, v in offsets.items()
                               if tp[0] not in subscribed and v.commit_timestamp + self.retention_ms <= now_ms]
            if expired:
                self.store.delete_offsets(group_id, expired, now_ms)
                expired_total += len(expired)
            if group.is_(S.EMPTY) and not group.members and not group.pending_members \
                    and not self.store.has_offsets(group_id):
                group.transition(S.DEAD, now_ms)
                del self.groups[group_id]
                self.store.delete_group(group_id, now_ms)
                log.info("group %s: removed after its offsets expired", group_id)
        if expired_total:
            log.info("expired %d committed offsets", expired_total)
        return expired_total

    # ------------------------------------------------------------------ admin
    def describe_group(self, group_id: str) -> dict[str, Any]:
        if self.coordinator_error(group_id):
            return {"group_id": group_id, "group_state": "", "protocol_type": "", "protocol_data": "",
                    "members": [], "error_code": self.coordinator_error(group_id)}
        group = self.groups.get(group_id)
        if group is None:
            return {"group_id": group_id, "group_state": S.DEAD.value, "protocol_type": "", "protocol_data": "",
                    "members": [], "error_code": E.none}
        return {**group.describe(), "error_code": E.none}

    def list_groups(self, states: Iterable[str] = ()) -> list[dict[str, str]]:
        wanted = {s.lower() for s in states}
        return [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value,
                 "group_type": "classic"}
                for g in self.groups.values()
                if not g.is_(S.DEAD) and (not wanted or g.state.value.lower() in wanted)]

    def delete_group(self, group_id: str) -> int:
        if not group_id:
            return E.invalid_group_id
        if self.coordinator_error(group_id):
            return self.coordinator_error(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found
        if not group.is_(S.EMPTY) or group.members:
            return E.non_empty_group
        group.transition(S.DEAD, self.now_ms())
        del self.groups[group_id]
        self.store.delete_group(group_id, self.now_ms())
        log.info("group %s: deleted", group_id)
        return E.none
