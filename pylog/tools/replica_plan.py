"""Plans of replica moves for growing and shrinking a cluster, pure: which replicas go where.

`decommission_plan` empties a broker that leaves for good: each replica it holds goes to the live broker, not
yet a replica of that partition, that holds the fewest replicas (a broker on a rack the partition does not use
yet first, when brokers have racks); the leaving broker's place in the replica list is kept, so preferred
leaders stay spread. `add_broker_plan` fills a broker that joined: replicas move to it one at a time from the
broker holding the most, while that makes the counts more even (never two replicas of a partition on one
broker). Both return only the partitions that change, as {(topic, partition): new replicas}, ready for
AlterPartitionReassignments (`pylog partitions reassign --execute` takes the same as Kafka's JSON).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

TP = tuple[str, int]
Assignment = Mapping[TP, Sequence[int]]


def replica_counts(assignment: Assignment, brokers: Sequence[int]) -> Counter[int]:
    counts: Counter[int] = Counter({b: 0 for b in brokers})
    for replicas in assignment.values():
        counts.update(r for r in replicas if r in counts)
    return counts


def decommission_plan(assignment: Assignment, brokers: Sequence[int], racks: Mapping[int, str | None],
                      leaving: int) -> dict[TP, list[int]]:
    """Every partition with a replica on `leaving`, that replica moved to another of `brokers`; ValueError when a
    partition has nowhere to go (its replication factor is above the brokers that stay)."""
    staying = [b for b in brokers if b != leaving]
    counts = replica_counts(assignment, staying)
    plan: dict[TP, list[int]] = {}
    for tp, replicas in sorted(assignment.items()):
        if leaving not in replicas:
            continue
        others = [r for r in replicas if r != leaving]
        candidates = [b for b in staying if b not in others]
        if not candidates:
            raise ValueError(f"{tp[0]}-{tp[1]} has {len(replicas)} replicas and only {len(staying)} brokers would "
                             "stay: lower its replication factor first")
        used = {racks.get(r) for r in others}
        target = min(candidates, key=lambda b: (racks.get(b) in used and racks.get(b) is not None, counts[b], b))
        counts[target] += 1
        plan[tp] = [target if r == leaving else r for r in replicas]
    return plan


def add_broker_plan(assignment: Assignment, brokers: Sequence[int], joining: int) -> dict[TP, list[int]]:
    """Replicas moved onto `joining` (one of `brokers`) from the fullest brokers until the counts are even."""
    current = {tp: list(r) for tp, r in assignment.items()}
    counts = replica_counts(current, brokers)
    changed: set[TP] = set()
    while True:
        fullest = max((b for b in brokers if b != joining), key=lambda b: (counts[b], -b), default=None)
        if fullest is None or counts[fullest] - counts[joining] <= 1:
            break
        movable = sorted(tp for tp, r in current.items() if fullest in r and joining not in r)
        if not movable:
            break
        tp = movable[0]
        current[tp] = [joining if r == fullest else r for r in current[tp]]
        counts[fullest] -= 1
        counts[joining] += 1
        changed.add(tp)
    return {tp: current[tp] for tp in sorted(changed)}
