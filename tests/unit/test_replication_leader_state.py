"""The leader's replication rules, pure (broker/replication/leader_state.py): follower catch-up times,
the high watermark over the ISR, and which followers leave or rejoin the ISR."""
from __future__ import annotations

from broker.replication.leader_state import LeaderState

LEADER, F1, F2 = 0, 1, 2


def state(isr: tuple[int, ...] = (0, 1, 2), hw: int = 0, epoch_start: int = 0, now: int = 1000) -> LeaderState:
    return LeaderState(LEADER, (0, 1, 2), isr, epoch_start, hw, now)


def test_the_high_watermark_is_the_smallest_log_end_of_the_isr_and_never_moves_back():
    s = state()
    s.on_follower_fetch(F1, 10, 10, 1001)
    assert not s.advance_high_watermark(10), "F2 has not fetched: nothing is committed"
    s.on_follower_fetch(F2, 7, 10, 1002)
    assert s.advance_high_watermark(10) and s.high_watermark == 7
    s.on_follower_fetch(F2, 5, 10, 1003)          # a follower truncated and fetches from lower down
    assert not s.advance_high_watermark(10) and s.high_watermark == 7


def test_followers_outside_the_isr_do_not_hold_the_high_watermark_back():
    s = state(isr=(0, 1))
    s.on_follower_fetch(F1, 10, 10, 1001)
    assert s.advance_high_watermark(12) and s.high_watermark == 10
    s.commit_isr((0,))
    assert s.advance_high_watermark(12) and s.high_watermark == 12, "alone in the ISR the leader commits at once"


def test_a_follower_is_caught_up_when_it_fetches_from_the_leaders_end_or_from_its_end_at_the_last_fetch():
    s = state(now=0)
    s.on_follower_fetch(F1, 10, 10, 500)           # at the end: caught up now
    assert s.followers[F1].last_caught_up_ms == 500
    s.on_follower_fetch(F1, 10, 20, 900)           # behind the end: not caught up now
    assert s.followers[F1].last_caught_up_ms == 500
    s.on_follower_fetch(F1, 20, 30, 1400)          # reached the end of its previous fetch: caught up then
    assert s.followers[F1].last_caught_up_ms == 900


def test_isr_followers_not_caught_up_for_the_lag_time_leave():
    s = state(now=0)
    s.on_follower_fetch(F1, 10, 10, 100)
    s.on_follower_fetch(F2, 3, 10, 100)            # F2 never reached the end: last caught up at the election
    assert s.shrink_candidates(now_ms=1000, lag_ms=1000) == ()
    assert s.shrink_candidates(now_ms=1001, lag_ms=1000) == (F2,)
    assert s.shrink_candidates(now_ms=1101, lag_ms=1000) == (F1, F2)


def test_a_follower_rejoins_once_it_reaches_the_high_watermark_and_this_epochs_start():
    s = state(isr=(0, 1), epoch_start=50, hw=40)
    s.on_follower_fetch(F2, 45, 60, 1001)
    assert s.expand_candidates() == (), "below the epoch's start offset"
    s.on_follower_fetch(F2, 50, 60, 1002)
    assert s.expand_candidates() == (F2,)
    s.commit_isr((0, 1, 2))
    assert s.expand_candidates() == ()


def test_a_rejoining_follower_holds_the_high_watermark_back_while_its_isr_change_is_written():
    """Kafka's maximal ISR (KIP-497): between proposing an expansion and ZooKeeper confirming it, records must not
    be acknowledged without the joining follower, or it enters the ISR lacking them and, elected leader, loses them."""
    s = state(isr=(0, 1))
    s.on_follower_fetch(F1, 100, 100, 1001)
    s.on_follower_fetch(F2, 100, 100, 1001)
    assert s.advance_high_watermark(100) and s.high_watermark == 100
    assert s.expand_candidates() == (F2,)
    s.propose_isr((0, 1, 2))
    s.on_follower_fetch(F1, 120, 120, 1002)       # the leader appended 20 more; F1 has them, F2 not yet
    assert not s.advance_high_watermark(120) and s.high_watermark == 100
    s.commit_isr((0, 1, 2))
    s.settle()
    s.on_follower_fetch(F2, 120, 120, 1003)
    assert s.advance_high_watermark(120) and s.high_watermark == 120


def test_a_shrink_counts_only_once_written():
    s = state()
    s.on_follower_fetch(F1, 50, 50, 1001)
    s.on_follower_fetch(F2, 10, 50, 1001)
    assert s.advance_high_watermark(50) and s.high_watermark == 10
    s.propose_isr((0, 1))
    assert not s.advance_high_watermark(50), "F2 may still be elected until the shrink is in ZooKeeper"
    s.commit_isr((0, 1))
    s.settle()
    assert s.advance_high_watermark(50) and s.high_watermark == 50
