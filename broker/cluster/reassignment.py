"""Partition reassignment (KIP-455) as Kafka 3.9's ZooKeeper-mode controller does it, pure: the replica sets of a
move, Kafka's checks of a requested target, and the state a partition takes when its move completes.

A partition moving from its origin replicas ORS to target replicas TRS has, in its topic's znode, the full set
RS = TRS then ORS (distinct, so TRS's first replica is the preferred leader), adding = RS - ORS and
removing = RS - TRS (`reassign_to`). The added replicas fetch as followers until the leader takes them into the
ISR; once every target replica is in the ISR the move completes (`completed_state`): the leader is kept when it
is a target replica (else the first live in-sync target replica leads), the ISR loses the removed replicas, the
leader epoch goes up, and the znode keeps TRS alone. Cancelling goes back to ORS the same way; a new target for
a partition already moving replaces the old one, from the same origin (Kafka's `reassignTo`).
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from broker.cluster.zk_layout import PartitionState


@dataclass(frozen=True)
class Move:
    """A partition's replicas during a move; `replicas` is what the topic's znode lists."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)


def reassign_to(current: Move, target: Sequence[int]) -> Move:
    """The move of a partition (moving or not) to `target`, from its origin (Kafka's ReplicaAssignment.reassignTo)."""
    origin = current.origin
    full = tuple(dict.fromkeys([*target, *origin]))
    return Move(full, tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target))


def target_problem(target: Sequence[int], move: Move, live: Collection[int]) -> str | None:
    """Kafka's message for a target it refuses with INVALID_REPLICA_ASSIGNMENT, else None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {_scala(target)}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {_scala(target)}"
    adding = reassign_to(move, target).adding
    if not set(adding) <= set(live):
        return (f"Replica assignment has brokers that are not alive. Replica list: {_scala(adding)}, live broker "
                f"list: {_scala_set(live)}")
    return None


def completed_state(move: Move, state: PartitionState, live: Collection[int],
                    controller_epoch: int) -> PartitionState | None:
    """The partition's state once its move completes, or None while a target replica is not in the ISR yet."""
    target = move.target
    if not set(target) <= set(state.isr):
        return None
    leader = state.leader if state.leader in target and state.leader in live else \
        next((r for r in target if r in live and r in state.isr), -1)
    isr = tuple(r for r in state.isr if r in target)
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


def _scala(ids: Sequence[int]) -> str:
    return f"List({', '.join(map(str, ids))})"


def _scala_set(ids: Collection[int]) -> str:
    return f"Set({', '.join(map(str, sorted(ids)))})"
