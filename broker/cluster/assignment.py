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
"""
from __future__ import annotations

import random
from typing import Sequence

from kafka_protocol.errors import InvalidPartitionsError, InvalidReplicationFactorError


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
