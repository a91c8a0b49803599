"""GroupCoordinator: the classic group membership protocol for every group on this broker.

Owns: JoinGroup (member ids, the MEMBER_ID_REQUIRED rejoin flow, static membership, protocol vote,
leader election, group.initial.rebalance.delay.ms and rebalance timeouts), SyncGroup, Heartbeat,
LeaveGroup, and the asyncio timers behind them (session expiry, join deadlines, pending members).
Group admin (describe, list, delete), offset commits and expiry live in `service.py`, whose
GroupService extends this class.

Error semantics follow Kafka's GroupCoordinator. Results carry Kafka error codes; the API handlers
only translate them to responses. Never sees protocol types or sockets; metadata stays opaque.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Callable

from kafka_protocol.errors import ErrorCode
from broker.groups.group import Group, GroupState
from broker.groups.member import JoinResult, Member, SyncResult
from broker.groups.offset_store import OffsetStore
from broker.groups.records import GroupValue, MemberRecord

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState


class GroupCoordinator:
    def __init__(self, store: OffsetStore, *, initial_rebalance_delay_ms: int = 3000,
                 min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1800000,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self.rebalances = 0   # completed join phases, for observability and benchmarks

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                         client_id: str, client_host: str, version: int) -> JoinResult:
        if not group_id:
            return JoinResult(E.invalid_group_id, member_id=member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(E.invalid_session_timeout, member_id=member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(E.unknown_member_id, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, self.now_ms())
        if group.is_(S.DEAD):
            return JoinResult(E.coordinator_not_available, member_id=member_id)
        if not group.supports(protocol_type, (name for name, _ in protocols)):
            return JoinResult(E.inconsistent_group_protocol, member_id=member_id)
        member = Member(member_id, instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                        protocol_type, protocols, join_version=version)
        if not member_id:
            outcome = self._join_unknown(group, member, version)
        else:
            outcome = self._join_known(group, member)
        if isinstance(outcome, JoinResult):
            if outcome.error != E.none and not group.members and not group.pending_members and group.is_(S.EMPTY) \
                    and not self.store.has_offsets(group_id) and group.generation_id == 0:
                self.groups.pop(group_id, None)   # a failed first join leaves no trace
            return outcome
        return await outcome

    def _join_unknown(self, group: Group, member: Member, version: int) -> JoinResult | asyncio.Future[JoinResult]:
        prefix = member.group_instance_id or member.client_id
        member.member_id = f"{prefix}-{uuid.uuid4()}"
        if member.group_instance_id is not None:
            old_id = group.static_member_id(member.group_instance_id)
            if old_id is not None:
                return self._rejoin_static(group, old_id, member, version)
        elif version >= 4:
            group.pending_members.add(member.member_id)
            self._schedule_pending_expiry(group, member.member_id, member.session_timeout_ms)
            return JoinResult(E.member_id_required, member_id=member.member_id)
        return self._add_and_rebalance(group, member, "new member joined")

    def _join_known(self, group: Group, member: Member) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = member.member_id
        if member_id in group.pending_members:
            return self._add_and_rebalance(group, member, "pending member rejoined")
        if group.is_static_fenced(member_id, member.group_instance_id):
            return JoinResult(E.fenced_instance_id, member_id=member_id)
        current = group.get(member_id)
        if current is None or group.is_(S.EMPTY, S.DEAD):
            return JoinResult(E.unknown_member_id, member_id=member_id)
        if group.is_(S.PREPARING_REBALANCE):
            fut = self._update_member(current, member)
            self._check_join_complete(group)
            return fut
        if group.is_(S.COMPLETING_REBALANCE) and current.matches(member.protocols):
            return self._current_join_result(group, current)
        if group.is_(S.STABLE) and not group.is_leader(member_id) and current.matches(member.protocols):
            return self._current_join_result(group, current)
        fut = self._update_member(current, member)
        self._prepare_rebalance(group, f"member {member_id} rejoined with new metadata or as leader")
        return fut

    def _rejoin_static(self, group: Group, old_id: str, member: Member, version: int) -> JoinResult | asyncio.Future[JoinResult]:
        old = group.members[old_id]
        unchanged = old.matches(member.protocols)
        old.complete_join(JoinResult(E.fenced_instance_id, member_id=old_id))
        old.complete_sync(SyncResult(E.fenced_instance_id))
        current = group.replace_static_member(member.group_instance_id or "", old_id, member.member_id)
        current.client_id, current.client_host = member.client_id, member.client_host
        current.session_timeout_ms, current.rebalance_timeout_ms = member.session_timeout_ms, member.rebalance_timeout_ms
        log.info("group %s: static member %s rejoined as %s", group.group_id, member.group_instance_id, member.member_id)
        if group.is_(S.STABLE) and unchanged:
            # KIP-345: a static member back within its session keeps its place; no one rebalances
            self._schedule_session(group, current)
            self._persist(group)
            result = self._current_join_result(group, current)
            if group.is_leader(member.member_id):
                if version >= 9:
                    result.skip_assignment = True    # KIP-814: the leader sees the members, assigns nothing
                else:
                    result.members = []              # as Kafka before KIP-814: nothing to assign; its
                                                     # SyncGroup returns the assignment it had
            return result
        fut = self._update_member(current, member)
        if group.is_(S.PREPARING_REBALANCE):
            self._check_join_complete(group)
        else:
            self._prepare_rebalance(group, f"static member {member.group_instance_id} rejoined")
        return fut

    def _add_and_rebalance(self, group: Group, member: Member, reason: str) -> asyncio.Future[JoinResult]:
        fut: asyncio.Future[JoinResult] = self._loop.create_future()
        member.join_future = fut
        group.add(member)
        group.new_member_added = True
        group.last_join_ms = self.now_ms()
        if group.is_(S.PREPARING_REBALANCE):
            self._check_join_complete(group)
        else:
            self._prepare_rebalance(group, f"{reason}: {member.member_id}")
        return fut

    def _update_member(self, current: Member, joining: Member) -> asyncio.Future[JoinResult]:
        current.protocols = joining.protocols
        current.session_timeout_ms = joining.session_timeout_ms
        current.rebalance_timeout_ms = joining.rebalance_timeout_ms
        current.client_id, current.client_host = joining.client_id, joining.client_host
        current.join_version = joining.join_version
        current.complete_join(JoinResult(E.rebalance_in_progress, member_id=current.member_id))
        current.join_future = self._loop.create_future()
        return current.join_future

    def _current_join_result(self, group: Group, member: Member) -> JoinResult:
        leader = group.is_leader(member.member_id)
        return JoinResult(E.none, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", member.member_id, self._member_list(group) if leader else [])

    @staticmethod
    def _member_list(group: Group) -> list[tuple[str, str | None, bytes]]:
        assert group.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name)) for m in group.members.values()]

    # ------------------------------------------------------------------ rebalance
    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                m.complete_sync(SyncResult(E.rebalance_in_progress))
        initial = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, self.now_ms())
        group.rebalance_started_ms = self.now_ms()
        self._cancel_join_timer(group)
        log.info("group %s: preparing to rebalance generation %d (%s)", group.group_id, group.generation_id, reason)
        max_timeout = group.max_rebalance_timeout_ms()
        if initial and self.initial_rebalance_delay_ms > 0:
            delay = min(self.initial_rebalance_delay_ms, max_timeout)
            group.new_member_added = False
            group.join_timer = ("initial", self._loop.call_later(
                delay / 1000, self._initial_delay_expired, group, max(max_timeout - delay, 0)))
            return
        group.join_timer = ("deadline", self._loop.call_later(max_timeout / 1000, self._complete_join, group))
        self._check_join_complete(group)

    def _initial_delay_expired(self, group: Group, remaining_ms: int) -> None:
        """KIP-134: members that joined during the delay extend it, counted from the latest join."""
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            since_last_join = self.now_ms() - group.last_join_ms
            delay = min(max(self.initial_rebalance_delay_ms - since_last_join, 1), remaining_ms)
            group.join_timer = ("initial", self._loop.call_later(
                delay / 1000, self._initial_delay_expired, group, max(remaining_ms - delay, 0)))
            return
        self._complete_join(group)

    def _cancel_join_timer(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer[1].cancel()   # type: ignore[index]
            group.join_timer = None

    def _check_join_complete(self, group: Group) -> None:
        timer = group.join_timer
        in_initial_delay = timer is not None and timer[0] == "initial"   # type: ignore[index]
        if group.is_(S.PREPARING_REBALANCE) and not in_initial_delay and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._cancel_join_timer(group)
        if not group.is_(S.PREPARING_REBALANCE):
            return
        for m in group.not_yet_rejoined():
            log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, m.member_id)
            group.remove(m.member_id)
            m.complete_sync(SyncResult(E.unknown_member_id))
        now = self.now_ms()
        group.generation_id += 1
        self.rebalances += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, now)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._persist(group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(S.COMPLETING_REBALANCE, now)
        log.info("group %s: generation %d with %d members, protocol %s, leader %s (%d ms)", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id,
                 now - group.rebalance_started_ms)
        members = self._member_list(group)
        for m in group.members.values():
            leader = group.is_leader(m.member_id)
            m.is_new = False
            m.complete_join(JoinResult(E.none, group.generation_id, group.protocol_type, group.protocol_name,
                                       group.leader_id or "", m.member_id, members if leader else []))
            self._schedule_session(group, m)

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(E.unknown_member_id)
        if group.is_(S.DEAD):
            return SyncResult(E.coordinator_not_available)
        if group.is_static_fenced(member_id, instance_id):
            return SyncResult(E.fenced_instance_id)
        member = group.get(member_id)
        if member is None:
            return SyncResult(E.unknown_member_id)
        if generation_id != group.generation_id:
            return SyncResult(E.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(E.inconsistent_group_protocol)
        if group.is_(S.EMPTY):
            return SyncResult(E.unknown_member_id)
        if group.is_(S.PREPARING_REBALANCE):
            return SyncResult(E.rebalance_in_progress)
        self._schedule_session(group, member)
        if group.is_(S.STABLE):
            return SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name)
        member.complete_sync(SyncResult(E.rebalance_in_progress))
        fut: asyncio.Future[SyncResult] = self._loop.create_future()
        member.sync_future = fut
        if group.is_leader(member_id):
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self._persist(group)
            group.transition(S.STABLE, self.now_ms())
            log.info("group %s: generation %d is stable", group.group_id, group.generation_id)
            for m in group.members.values():
                m.complete_sync(SyncResult(E.none, m.assignment, group.protocol_type, group.protocol_name))
        return await fut

    # ------------------------------------------------------------------ Heartbeat and LeaveGroup
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if group.is_static_fenced(member_id, instance_id):
            return E.fenced_instance_id
        member = group.get(member_id)
        if member is None:
            return E.unknown_member_id
        if generation_id != group.generation_id:
            return E.illegal_generation
        if group.is_(S.EMPTY):
            return E.unknown_member_id
        self._schedule_session(group, member)
        if group.is_(S.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return E.none

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per leaving (member id, instance id))."""
        group = self.groups.get(group_id)
        if group is None:
            return E.none, [E.unknown_member_id] * len(leaving)
        if group.is_(S.DEAD):
            return E.coordinator_not_available, [E.coordinator_not_available] * len(leaving)
        errors = []
        for member_id, instance_id in leaving:
            if not member_id and instance_id is not None:
                found = group.static_member_id(instance_id)
                if found is None:
                    errors.append(E.unknown_member_id)
                    continue
                member_id = found
            if group.is_static_fenced(member_id, instance_id):
                errors.append(E.fenced_instance_id)
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._check_join_complete(group)
                errors.append(E.none)
            elif not group.has(member_id):
                errors.append(E.unknown_member_id)
            else:
                self._remove_member(group, member_id, "left the group")
                errors.append(E.none)
        return E.none, errors

    # ------------------------------------------------------------------ timers and removal
    def _schedule_session(self, group: Group, member: Member) -> None:
        member.cancel_timer()
        member.session_timer = self._loop.call_later(member.session_timeout_ms / 1000, self._session_expired,
                                                     group, member)

    def _session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            self._schedule_session(group, member)
            return
        self._remove_member(group, member.member_id, f"session timeout of {member.session_timeout_ms} ms expired")

    def _schedule_pending_expiry(self, group: Group, member_id: str, timeout_ms: int) -> None:
        def expire() -> None:
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                log.info("group %s: pending member %s did not rejoin", group.group_id, member_id)
                self._check_join_complete(group)
        self._loop.call_later(timeout_ms / 1000, expire)

    def _remove_member(self, group: Group, member_id: str, reason: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        log.info("group %s: member %s %s", group.group_id, member_id, reason)
        member.complete_join(JoinResult(E.unknown_member_id, member_id=member_id))
        member.complete_sync(SyncResult(E.unknown_member_id))
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member_id} {reason}")
        elif group.is_(S.PREPARING_REBALANCE):
            self._check_join_complete(group)

    def _persist(self, group: Group) -> None:
        """Write the group's metadata record; a storage failure is logged, the group carries on in memory."""
        name = group.protocol_name
        value = GroupValue(group.protocol_type or "", group.generation_id, name, group.leader_id,
                           group.state_timestamp_ms,
                           [MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                         m.rebalance_timeout_ms, m.session_timeout_ms,
                                         m.metadata_for(name) if name else b"", m.assignment)
                            for m in group.members.values()])
        try:
            self.store.store_group(group.group_id, value, self.now_ms())
        except Exception:  # noqa: BLE001
            log.exception("group %s: cannot store group metadata", group.group_id)

    def restore(self, group_id: str, value: GroupValue) -> Group:
        """Rebuild a group from its stored metadata at startup; its members must heartbeat again."""
        group = self.groups[group_id] = Group(group_id, value.current_state_timestamp)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for rec in value.members:
            m = Member(rec.member_id, rec.group_instance_id, rec.client_id, rec.client_host,
                       rec.session_timeout_ms, rec.rebalance_timeout_ms, value.protocol_type,
                       [(value.protocol or "", rec.subscription)], rec.assignment, is_new=False)
            group.add(m)
            self._schedule_session(group, m)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        if group.members and value.protocol:
            group.state = S.STABLE
        return group
