"""GroupService: the group coordinator plus committed offsets and group administration.

Owns: startup (create and load `__consumer_offsets`, restore groups), OffsetCommit validation
(generation fencing; commits with generation -1 from outside an Empty group, as Kafka allows),
OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups, and the periodic expiry of
offsets after offsets.retention.minutes. This is the object API handlers reach as `ctx.groups`.

Never sees protocol types or sockets; returns Kafka error codes for handlers to put in responses.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable

from broker.config import BrokerConfig
from broker.errors import ErrorCode
from broker.groups.coordinator import GroupCoordinator
from broker.groups.group import Group, GroupState
from broker.groups.offset_store import OffsetStore, TopicPartition
from broker.groups.records import OffsetValue
from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState


class GroupService(GroupCoordinator):
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, clock: Callable[[], float]) -> None:
        store = OffsetStore(replicas, config["offsets.topic.num.partitions"], config["offsets.topic.segment.bytes"])
        super().__init__(store, initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                         min_session_timeout_ms=config["group.min.session.timeout.ms"],
                         max_session_timeout_ms=config["group.max.session.timeout.ms"], clock=clock)
        self.replicas = replicas
        self.retention_ms = config["offsets.retention.minutes"] * 60_000
        self.retention_check_ms = config["offsets.retention.check.interval.ms"]
        self.metadata_max_bytes = config["offset.metadata.max.bytes"]
        self._expiry_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Create/load `__consumer_offsets` and restore groups; call from the event loop before serving."""
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
        """Validate and store a commit: `offsets` maps (topic, partition) to (offset, leader epoch, metadata)."""
        group = self.groups.get(group_id)
        error = self._commit_error(group, group_id, member_id, instance_id, generation_id)
        if error != E.none:
            return {tp: error for tp in offsets}
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.now_ms())
        member = group.get(member_id)
        if member is not None and generation_id >= 0:
            self._schedule_session(group, member)   # a commit counts as a heartbeat, as in Kafka
        now = self.now_ms()
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
        try:
            self.store.commit(group_id, accepted, now)
        except Exception:  # noqa: BLE001
            log.exception("group %s: cannot store offsets", group_id)
            for tp in accepted:
                results[tp] = E.unknown_server_error
        return results

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
