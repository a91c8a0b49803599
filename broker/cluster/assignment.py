"""Replica assignment for new topics and partitions: Kafka's rules, rack-unaware and rack-aware, pure.

Owns which brokers hold the replicas of each partition (kafka.admin.AdminUtils
.assignReplicasToBrokersRackUnaware, KIP-36's rack-unaware case):

- broker ids are sorted; partition p's first replica (its preferred leader) is broker
  `(p + start) mod n`, so leaders spread evenly over the brokers;
- the other replicas follow the first at a shift `1 + (shift + j) mod (n - 1)`, where `shift`
  grows by one every n partitions, so followers spread too and no broker holds two replicas of
  one partition;
- `start` and the initial `shift` are random unless fixed (tests fix them); an increase of
  partitions continues from the existing count, as Kafka's CreatePartitions does.

When every live broker has a `broker.rack`, the rack-aware rule (AdminUtils.assignReplicasToBrokersRackAware)
runs the same walk over the brokers listed one rack after another, and places each further replica on a rack
that has none of the partition's replicas while there is one; when only some brokers have a rack, creating a
topic is refused, as Kafka refuses it.

Errors are Kafka's: a replication factor below 1 or above the live brokers is
INVALID_REPLICATION_FACTOR (with Kafka's message), a partition count below 1 INVALID_PARTITIONS.

Explicit assignments (CreateTopics' and CreatePartitions' `assignments`) are checked as Kafka 3.9's
ZooKeeper mode checks them (AdminZkClient): `check_new_topic` (one replication factor, no broker twice in a
partition, partitions 0..n-1; brokers are not checked, as Kafka's TopicCommand logic) and
`check_new_partitions` (as many as added, each non-empty, no duplicates, only registered brokers, the
topic's replication factor), INVALID_REPLICA_ASSIGNMENT with Kafka's messages.
"""
from __future__ import annotations

import random
from typing import Iterator, Mapping, Sequence

from kafka_protocol.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def assign_replicas(brokers: Sequence[int] | Mapping[int, str | None], partitions: int, replication_factor: int, *,
                    first_partition: int = 0, fixed_start: int = -1,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Replicas per partition for partitions `first_partition .. first_partition + partitions - 1`, over `brokers`
    (ids, or ids with their racks: rack-aware when every broker has one, an error when only some have)."""
    racks = brokers if isinstance(brokers, Mapping) else {b: None for b in brokers}
    with_rack = {b: r for b, r in racks.items() if r is not None}
    if with_rack and len(with_rack) < len(racks):
        raise InvalidReplicaAssignmentError("Not all brokers have rack information for replica rack aware "
                                            f"assignment: brokers {sorted(set(racks) - set(with_rack))} have no "
                                            "broker.rack.")
    if with_rack:
        _check_counts(partitions, replication_factor, len(with_rack))
        return _rack_aware(with_rack, partitions, replication_factor, first_partition, fixed_start,
                           rng or random.Random())
    return _rack_unaware(sorted(racks), partitions, replication_factor, first_partition, fixed_start, rng)


def _check_counts(partitions: int, replication_factor: int, brokers: int) -> None:
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {brokers}.")


def _walk(n: int, partitions: int, first_partition: int, fixed_start: int,
          rng: random.Random) -> Iterator[tuple[int, int, int]]:
    """Kafka's walk over `n` brokers shared by both rules: (partition, index of its first replica, replica shift),
    the start and the initial shift random unless fixed, the shift growing by one every n partitions."""
    start = fixed_start if fixed_start >= 0 else rng.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    for p in range(max(0, first_partition), max(0, first_partition) + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        yield p, (p + start) % n, shift


def _rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """The brokers taken one from each rack in turn (racks sorted, brokers sorted within a rack): Kafka's
    getRackAlternatedBrokerList."""
    by_rack: dict[str, list[int]] = {}
    for b, r in sorted(racks.items()):
        by_rack.setdefault(r, []).append(b)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def _rack_aware(racks: Mapping[int, str], partitions: int, replication_factor: int, first_partition: int,
                fixed_start: int, rng: random.Random) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokersRackAware: leaders round the rack-alternated list; each further replica
    the next broker (at a shift that grows every n partitions) on a rack without a replica yet, while there is
    one, and on a broker without one."""
    arranged = _rack_alternated(racks)
    n, num_racks = len(arranged), len(set(racks.values()))
    out: dict[int, list[int]] = {}
    for p, first, shift in _walk(n, partitions, first_partition, fixed_start, rng):
        leader = arranged[first]
        replicas, used_racks, used = [leader], {racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[(first + 1 + (shift * num_racks + k) % (n - 1)) % n]
                k += 1
                rack = racks[broker]
                if (rack not in used_racks or len(used_racks) == num_racks) and (broker not in used or len(used) == n):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used.add(broker)
                    break
        out[p] = replicas
    return out


def _rack_unaware(ids: list[int], partitions: int, replication_factor: int, first_partition: int,
                  fixed_start: int, rng: random.Random | None) -> dict[int, list[int]]:
    _check_counts(partitions, replication_factor, len(ids))
    n = len(ids)
    out: dict[int, list[int]] = {}
    for p, first, shift in _walk(n, partitions, first_partition, fixed_start, rng or random.Random()):
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = replicas
    return out


def check_new_topic(assignment: dict[int, list[int]]) -> None:
    """A new topic's explicit assignment (partition -> brokers), as Kafka's validateTopicCreate."""
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(replicas) != len(set(replicas)):
            raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: {_scala_map(assignment)}")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")


def check_new_partitions(added: list[list[int]], increase: int, replication_factor: int,
                         brokers: Sequence[int], first_partition: int) -> dict[int, list[int]]:
    """The explicit assignment of `increase` new partitions (Kafka's createPartitions checks), numbered from
    `first_partition`."""
    if len(added) != increase:
        raise InvalidReplicaAssignmentError(f"Increasing the number of partitions by {increase} but "
                                            f"{len(added)} assignments provided.")
    proposed = {first_partition + i: list(replicas) for i, replicas in enumerate(added)}
    for partition, replicas in proposed.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(replicas) != len(set(replicas)):
            raise InvalidReplicaAssignmentError(f"Duplicate brokers not allowed in replica assignment: "
                                                f"{', '.join(map(str, replicas))} for partition id {partition}.")
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            raise InvalidReplicaAssignmentError(f"Unknown broker(s) in replica assignment: "
                                                f"{', '.join(map(str, unknown))}.")
    bad = {p: len(r) for p, r in proposed.items() if len(r) != replication_factor}
    if bad:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} while "
            f"partitions [{', '.join(map(str, bad))}] have replication factors "
            f"[{', '.join(map(str, bad.values()))}], respectively.")
    return proposed


def _scala_map(assignment: dict[int, list[int]]) -> str:
    return "Map(" + ", ".join(f"{p} -> ArrayBuffer({', '.join(map(str, r))})" for p, r in sorted(assignment.items())) + ")"
