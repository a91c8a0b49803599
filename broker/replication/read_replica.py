"""Which replica a consumer should fetch from (KIP-392), as Kafka's RackAwareReplicaSelector chooses. Pure.

Asked by a partition's leader for a consumer's Fetch (v11+) that names its rack (client.rack), when
`replica.selector.class` is Kafka's RackAwareReplicaSelector. The candidates are the leader and the followers
that are in the ISR and caught up within replica.lag.time.max.ms (Kafka's isCaughtUp); those in the consumer's
rack are the choice: the leader when it is one of them, else the one with the highest log end offset (the most
recently caught up on a tie); no replica in the rack, or no rack given: the leader. The leader answers the
chosen follower's id as preferred_read_replica, without records, and the consumer fetches from it.
"""
from __future__ import annotations

from typing import Mapping

from broker.replication.leader_state import LeaderState

NO_PREFERENCE = -1


def preferred_read_replica(client_rack: str, leader_id: int, state: LeaderState, racks: Mapping[int, str | None],
                           now_ms: int, lag_ms: int) -> int:
    """The follower to name as preferred read replica, or NO_PREFERENCE (the leader serves)."""
    if not client_rack:
        return NO_PREFERENCE
    if racks.get(leader_id) == client_rack:
        return NO_PREFERENCE
    best: tuple[int, int, int] | None = None
    for follower, f in state.followers.items():
        if follower == leader_id or follower not in state.isr or racks.get(follower) != client_rack:
            continue
        if now_ms - f.last_caught_up_ms > lag_ms:
            continue
        key = (f.log_end_offset, f.last_caught_up_ms, -follower)
        if best is None or key > best:
            best = key
    return NO_PREFERENCE if best is None else -best[2]
