"""Partition leader election and ISR changes, pure: Kafka's rules (PartitionLeaderElectionAlgorithms).

Owns how a partition's `PartitionState` changes when brokers come and go, with no I/O:

- offline election (the leader is gone, or the partition has none): the first replica in
  assignment order that is live and in the ISR; with `unclean.leader.election.enable`, failing
  that, the first live replica (acknowledged records may be lost, as Kafka warns);
- a replica going offline leaves the ISR, except the last member, which stays so that it can be
  elected when it returns (Kafka's rule, so that no un-replicated leader is chosen);
- every change of leader or ISR made by the controller increments the leader epoch (once per
  change, however many brokers it covers), and carries the controller's epoch.

- controlled shutdown: brokers shutting down count as gone for leadership and the ISR, except that
  a shutting-down leader with no other live ISR replica keeps leading (the partition stays online);
- preferred leader: when the first assigned replica is live, not shutting down and in the ISR, it
  takes leadership back (a new leader epoch); the auto leader rebalance does so only for brokers whose share
  of partitions led elsewhere is above `leader.imbalance.per.broker.percentage` (`rebalance_candidates`).
"""
from __future__ import annotations

from typing import Collection, Mapping, Sequence

from broker.cluster.zk_layout import PartitionState

NO_LEADER = -1


def initial_state(replicas: Sequence[int], live: Collection[int], controller_epoch: int) -> PartitionState:
    """A new partition: the first live replica leads, the live replicas are the ISR (Kafka's NewPartition)."""
    isr = tuple(r for r in replicas if r in live)
    return PartitionState(isr[0] if isr else NO_LEADER, 0, isr, controller_epoch)


def offline_leader(replicas: Sequence[int], isr: Collection[int], live: Collection[int],
                   unclean: bool = False) -> int:
    """The first live ISR replica in assignment order; with `unclean`, else the first live replica."""
    for r in replicas:
        if r in live and r in isr:
            return r
    if unclean:
        for r in replicas:
            if r in live:
                return r
    return NO_LEADER


def on_brokers_changed(replicas: Sequence[int], state: PartitionState, live: Collection[int],
                       controller_epoch: int, unclean: bool = False) -> PartitionState:
    """The partition's state once the live brokers are `live`: offline replicas leave the ISR (the last
    member stays), and a partition without a live leader elects one. `state` itself when nothing changes."""
    isr = tuple(r for r in state.isr if r in live)
    leader = state.leader if state.leader in live else NO_LEADER
    if leader == NO_LEADER:
        leader = offline_leader(replicas, isr, live, unclean)
        if leader != NO_LEADER and leader not in isr:      # unclean: the new leader is all that is in sync
            isr = (leader,)
    if not isr and state.isr:
        isr = (state.leader if state.leader in state.isr else state.isr[0],)
    if (leader, isr) == (state.leader, state.isr):
        return state
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


def next_state(replicas: Sequence[int], state: PartitionState, live: Collection[int], shutting_down: Collection[int],
               controller_epoch: int, unclean: bool = False, preferred: bool = False) -> PartitionState:
    """The partition's state the controller writes: brokers gone or shutting down, then (with
    `preferred`) the preferred leader. `state` itself when nothing changes."""
    eligible = [b for b in live if b not in shutting_down]
    new = on_brokers_changed(replicas, state, eligible, controller_epoch, unclean)
    if new.leader == NO_LEADER and state.leader in live:
        new = on_brokers_changed(replicas, state, live, controller_epoch, unclean)
    if preferred and replicas and new.leader != replicas[0] and replicas[0] in eligible and replicas[0] in new.isr:
        new = PartitionState(replicas[0], state.leader_epoch + 1, new.isr, controller_epoch)
    return new


def rebalance_candidates(partitions: Mapping[tuple[str, int], tuple[Sequence[int], PartitionState]],
                         live: Collection[int], shutting_down: Collection[int],
                         percentage: int) -> set[tuple[str, int]]:
    """The partitions the auto leader rebalance moves back to their preferred replica (Kafka's
    checkAndTriggerAutoLeaderRebalance): for each broker, the share of the partitions it is the preferred
    replica of that another replica leads; when that share is above `percentage` %, each of those partitions
    whose preferred replica is live, not shutting down and in the ISR. `partitions`: replicas and state."""
    preferred_by: dict[int, list[tuple[str, int]]] = {}
    for tp, (replicas, _) in partitions.items():
        if replicas:
            preferred_by.setdefault(replicas[0], []).append(tp)
    out: set[tuple[str, int]] = set()
    for broker, tps in preferred_by.items():
        elsewhere = [tp for tp in tps if partitions[tp][1].leader != broker]
        if len(elsewhere) * 100 <= percentage * len(tps) or broker not in live or broker in shutting_down:
            continue
        out.update(tp for tp in elsewhere if broker in partitions[tp][1].isr)
    return out


def is_unclean(before: PartitionState, after: PartitionState) -> bool:
    """Whether `after` made a leader that was not in `before`'s ISR: what the old ISR acknowledged beyond the
    new leader's log end is gone."""
    return after.leader != NO_LEADER and after.leader != before.leader and after.leader not in before.isr
