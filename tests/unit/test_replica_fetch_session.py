"""The follower's side of a KIP-227 fetch session with its leader (replica_fetcher.FetchSessionState). Pure."""
from __future__ import annotations

from broker.replication.replica_fetcher import FetchSessionState


def test_a_full_fetch_opens_the_session_then_only_changes_are_sent() -> None:
    s = FetchSessionState()
    wanted = {("a", 0): (10, 1, 0, 1024), ("a", 1): (5, 1, 0, 1024), ("b", 0): (0, 2, 0, 1024)}
    assert s.next_request(wanted) == (0, 0, [("a", 0), ("a", 1), ("b", 0)], [])
    s.answered(77)
    assert s.next_request(wanted) == (77, 1, [], [])                 # nothing moved: an empty incremental fetch
    s.answered(77)
    moved = {**wanted, ("a", 1): (9, 1, 0, 1024)}
    del moved[("b", 0)]
    assert s.next_request(moved) == (77, 2, [("a", 1)], [("b", 0)])   # a new position; b forgotten
    s.answered(77)
    assert s.next_request(moved)[:2] == (77, 3)


def test_a_leader_without_sessions_or_a_reset_means_full_fetches() -> None:
    s = FetchSessionState()
    wanted = {("a", 0): (10, 1, 0, 1024)}
    s.next_request(wanted)
    s.answered(0)                                                     # the leader keeps no session (cache full)
    assert s.next_request(wanted) == (0, 0, [("a", 0)], [])
    s.answered(5)
    s.next_request(wanted)
    s.reset()                                                         # FETCH_SESSION_ID_NOT_FOUND, a lost connection
    assert s.next_request(wanted) == (0, 0, [("a", 0)], [])
