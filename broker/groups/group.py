"""The state of one classic group: members, generation, chosen protocol, leader, state machine.

Owns: the group state machine (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead) and
its legal transitions, membership bookkeeping (dynamic, pending and static members), the protocol
vote, leader choice, and the summaries DescribeGroups/ListGroups show.

Never schedules timers, answers requests or writes records: the coordinator drives it. Pure state.
"""
from __future__ import annotations

import enum
import logging
from typing import Iterable

from broker.groups.member import Member
from broker.groups.records import subscribed_topics

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, set[GroupState]] = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE, GroupState.EMPTY},
    GroupState.DEAD: set(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.pending_members: set[str] = set()
        self.static_members: dict[str, str] = {}   # group.instance.id -> member id
        # Rebalance scheduling, owned by the coordinator but kept with the group it concerns.
        self.join_timer: object | None = None
        self.rebalance_started_ms = 0
        self.new_member_added = False
        self.last_join_ms = 0

    def __repr__(self) -> str:
        return f"Group({self.group_id}, {self.state.value}, generation {self.generation_id}, {len(self.members)} members)"

    # -- state
    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        log.debug("group %s: %s -> %s", self.group_id, self.state.value, target.value)
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- membership
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> Member | None:
        return self.members.get(member_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_members.discard(member_id)
        if member is None:
            return None
        member.cancel_timer()
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member rejoined with a new member id: keep its place, assignment and leadership."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to another member id (a zombie)."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & names)

    def select_protocol(self) -> str:
        """The vote: each member names its most preferred common protocol; the most votes win."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])   # ties: first voted, i.e. earliest member's choice

    def subscribed_topics(self) -> set[str] | None:
        """Topics any member subscribes to (consumer protocol only); None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscribed_topics(m.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def describe(self) -> dict[str, object]:
        stable = self.state == GroupState.STABLE
        return {
            "group_id": self.group_id,
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [
                {**m.describe(),
                 "member_metadata": m.metadata_for(self.protocol_name) if stable and self.protocol_name else b"",
                 "member_assignment": m.assignment if stable else b""}
                for m in self.members.values()
            ],
        }
