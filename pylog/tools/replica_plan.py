"""Plans of replica moves for growing and shrinking a cluster, pure: which replicas go where.

`decommission_plan` empties brokers that leave for good: each replica they hold goes to the live broker, not
yet a replica of that partition, that holds the fewest replicas (a broker on a rack the partition does not use
yet first, when brokers have racks); the leaving broker's place in the replica list is kept, so preferred
leaders stay spread. `add_broker_plan` fills brokers that joined: replicas move one at a time from the broker
holding the most to the joining broker holding the fewest, while that makes the counts more even (never two
replicas of a partition on one broker). Both return only the partitions that change, as {(topic, partition): new
replicas}, ready for
AlterPartitionReassignments (`pylog partitions reassign --execute` takes the same as Kafka's JSON).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

TP = tuple[str, int]
Assignment = Mapping[TP, Sequence[int]]


def replica_counts(assignment: Assignment, brokers: Sequence[int]) -> Counter[int]:
    counts: Counter[int] = Counter({b: 0 for b in brokers})
    for replicas in assignment.values():
        counts.update(r for r in replicas if r in counts)
    return counts


def decommission_plan(assignment: Assignment, brokers: Sequence[int], racks: Mapping[int, str | None],
                      leaving: int | Collection[int]) -> dict[TP, list[int]]:
    """Every partition with a replica on a `leaving` broker (one id or several), each such replica moved to another
    of `brokers`; ValueError when a partition has nowhere to go (its replication factor is above the brokers that
    stay)."""
    gone = {leaving} if isinstance(leaving, int) else set(leaving)
    staying = [b for b in brokers if b not in gone]
    counts = replica_counts(assignment, staying)
    plan: dict[TP, list[int]] = {}
    for tp, replicas in sorted(assignment.items()):
        if not gone.intersection(replicas):
            continue
        new = list(replicas)
        for i, r in enumerate(replicas):
            if r not in gone:
                continue
            others = [x for x in new if x not in gone]
            candidates = [b for b in staying if b not in others]
            if not candidates:
                raise ValueError(f"{tp[0]}-{tp[1]} has {len(replicas)} replicas and only {len(staying)} brokers "
                                 "would stay: lower its replication factor first")
            used = {racks.get(x) for x in others}
            target = min(candidates, key=lambda b: (racks.get(b) in used and racks.get(b) is not None, counts[b], b))
            counts[target] += 1
            new[i] = target
        plan[tp] = new
    return plan


def add_broker_plan(assignment: Assignment, brokers: Sequence[int], joining: int | Collection[int]
                    ) -> dict[TP, list[int]]:
    """Replicas moved onto the `joining` brokers (one id or several, all among `brokers`), each move from the
    fullest other broker to the emptiest joining one, until the counts are even."""
    new = {joining} if isinstance(joining, int) else set(joining)
    current = {tp: list(r) for tp, r in assignment.items()}
    counts = replica_counts(current, brokers)
    changed: set[TP] = set()
    while True:
        fullest = max((b for b in brokers if b not in new), key=lambda b: (counts[b], -b), default=None)
        target = min(new, key=lambda b: (counts[b], b))
        if fullest is None or counts[fullest] - counts[target] <= 1:
            break
        movable = sorted(tp for tp, r in current.items() if fullest in r and target not in r)
        if not movable:
            break
        tp = movable[0]
        current[tp] = [target if r == fullest else r for r in current[tp]]
        counts[fullest] -= 1
        counts[target] += 1
        changed.add(tp)
    return {tp: current[tp] for tp in sorted(changed)}
