"""What a partition's leader knows of its followers: positions, the ISR and the high watermark. Pure.

Owns Kafka's leader-side rules (kafka.cluster.Partition and Replica), with no I/O and no clock of its
own (every call takes `now_ms`):

- a follower's log end offset is the offset it fetches from: it holds everything below;
- a follower is caught up at the time of a fetch from at least the leader's log end offset; a fetch
  from at least the leader's end offset at the follower's previous fetch means it was caught up then
  (Kafka's lastCaughtUpTimeMs rule);
- the high watermark is the smallest log end offset among the ISR (the leader included), and never
  moves back while this broker leads;
- an ISR follower not caught up for `replica.lag.time.max.ms` is out of sync (`shrink_candidates`);
  a follower outside the ISR whose log end offset reached the high watermark and this leader epoch's
  start offset is in sync again (`expand_candidates`);
- the ISR used for the high watermark is Kafka's maximal ISR (KIP-497): the one committed in ZooKeeper
  together with a change being written (`propose_isr` .. `settle`). A shrink counts only once written
  (`commit_isr`), an expansion counts from the moment it is proposed: a follower written into the ISR
  then holds every record below the high watermark, so an acknowledged record is always on every
  replica a new leader could be elected from.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FollowerState:
    log_end_offset: int = -1             # unknown until its first fetch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = -1


class LeaderState:
    """One partition's leader-side replication state, for one leader epoch."""

    def __init__(self, leader_id: int, replicas: tuple[int, ...], isr: tuple[int, ...], epoch_start_offset: int,
                 high_watermark: int, now_ms: int) -> None:
        self.leader_id = leader_id
        self.replicas = replicas
        self.isr = tuple(isr)
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        self.pending_isr: tuple[int, ...] = ()     # an ISR change being written to ZooKeeper
        # Kafka: followers in the ISR count as caught up at the election, so they are not dropped at once
        self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
                          for r in replicas if r != leader_id}

    def on_follower_fetch(self, follower: int, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """Record a follower's fetch from `fetch_offset` while the leader's log ends at `leader_end_offset`."""
        f = self.followers.get(follower)
        if f is None:
            f = self.followers[follower] = FollowerState()
        if fetch_offset >= leader_end_offset:
            f.last_caught_up_ms = now_ms
        elif f.leader_end_at_last_fetch >= 0 and fetch_offset >= f.leader_end_at_last_fetch:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        f.last_fetch_ms = now_ms
        f.leader_end_at_last_fetch = leader_end_offset

    def advance_high_watermark(self, leader_end_offset: int) -> bool:
        """Recompute the high watermark from the ISR; True if it moved forward."""
        hw = leader_end_offset
        for r in self.maximal_isr:
            if r == self.leader_id:
                continue
            f = self.followers.get(r)
            hw = min(hw, f.log_end_offset if f is not None else -1)
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    def shrink_candidates(self, now_ms: int, lag_ms: int) -> tuple[int, ...]:
        """ISR followers that have not caught up for more than `lag_ms`."""
        return tuple(r for r in self.isr if r != self.leader_id
                     and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms > lag_ms)

    def expand_candidates(self) -> tuple[int, ...]:
        """Followers outside the ISR that have caught up with the high watermark in this epoch."""
        return tuple(r for r, f in sorted(self.followers.items())
                     if r not in self.isr and r in self.replicas
                     and f.log_end_offset >= max(self.high_watermark, self.epoch_start_offset))

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus the replicas a pending change adds: what the high watermark waits for."""
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def propose_isr(self, isr: tuple[int, ...]) -> None:
        """An ISR change is being written: replicas it adds count for the high watermark from now on."""
        self.pending_isr = tuple(isr)

    def settle(self) -> None:
        """The pending ISR change was written (then `commit_isr` followed) or refused."""
        self.pending_isr = ()

    def commit_isr(self, isr: tuple[int, ...]) -> None:
        """The ISR as now written in ZooKeeper."""
        self.isr = tuple(isr)
