"""Replica assignment for new topics and partitions: Kafka's rack-unaware rule, pure.

Owns which brokers hold the replicas of each partition (kafka.admin.AdminUtils
.assignReplicasToBrokersRackUnaware, KIP-36's rack-unaware case):

- broker ids are sorted; partition p's first replica (its preferred leader) is broker
  `(p + start) mod n`, so leaders spread evenly over the brokers;
- the other replicas follow the first at a shift `1 + (shift + j) mod (n - 1)`, where `shift`
  grows by one every n partitions, so followers spread too and no broker holds two replicas of
  one partition;
- `start` and the initial `shift` are random unless fixed (tests fix them); an increase of
  partitions continues from the existing count, as Kafka's CreatePartitions does.

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
from typing import Sequence

from kafka_protocol.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int, *,
                    first_partition: int = 0, fixed_start: int = -1,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Replicas per partition for partitions `first_partition .. first_partition + partitions - 1`."""
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    ids = sorted(set(brokers))
    if replication_factor > len(ids):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(ids)}.")
    n = len(ids)
    rng = rng or random.Random()
    start = fixed_start if fixed_start >= 0 else rng.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    out: dict[int, list[int]] = {}
    for p in range(max(0, first_partition), max(0, first_partition) + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
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
