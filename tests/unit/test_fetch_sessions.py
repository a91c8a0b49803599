"""KIP-227 fetch sessions: the cache's epoch rules, limits and what an incremental response keeps."""
from __future__ import annotations

from kafka_protocol.errors import ErrorCode
from broker.fetch_sessions import FetchSessionCache, Wanted

A, B = ("t", 0), ("t", 1)


def _open(cache: FetchSessionCache, now: int = 0):
    return cache.resolve(0, 0, [(A, Wanted(0, 100)), (B, Wanted(5, 100))], [], now)


def test_epoch_minus_one_fetches_without_a_session():
    cache = FetchSessionCache()
    fc = cache.resolve(0, -1, [(A, Wanted(0, 100))], [], 0)
    assert fc.session_id == 0 and list(fc.wanted) == [A] and len(cache) == 0


def test_a_session_opens_then_continues_with_only_the_changed_partitions():
    cache = FetchSessionCache()
    full = _open(cache)
    assert full.session_id != 0 and not full.incremental
    assert full.include(A, 0, 10, 10, 0, True) and full.include(B, 0, 10, 10, 0, False), "a full response has all"
    nxt = cache.resolve(full.session_id, 1, [(A, Wanted(3, 100))], [], 1)
    assert nxt.incremental and [(tp, w.fetch_offset) for tp, w in nxt.wanted.items()] == [(A, 3), (B, 5)]
    assert not nxt.include(B, 0, 10, 10, 0, False), "nothing new for B: left out"
    assert nxt.include(A, 0, 10, 10, 0, True), "records for A: kept"
    third = cache.resolve(full.session_id, 2, [], [], 2)
    assert third.include(B, 0, 11, 11, 0, False), "B's high watermark moved: kept"
    assert third.include(A, ErrorCode.offset_out_of_range, -1, -1, -1, False), "an error is always kept"


def test_forgotten_partitions_leave_the_session():
    cache = FetchSessionCache()
    full = _open(cache)
    nxt = cache.resolve(full.session_id, 1, [], [B], 1)
    assert list(nxt.wanted) == [A]


def test_wrong_epochs_and_unknown_sessions_are_refused():
    cache = FetchSessionCache()
    full = _open(cache)
    assert cache.resolve(full.session_id, 5, [], [], 1).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.resolve(12345, 1, [], [], 1).error == ErrorCode.fetch_session_id_not_found
    assert cache.resolve(full.session_id, 1, [], [], 1).error == ErrorCode.none
    assert cache.resolve(full.session_id, 1, [], [], 1).error == ErrorCode.invalid_fetch_session_epoch, "no replays"


def test_epoch_minus_one_on_a_session_closes_it():
    cache = FetchSessionCache()
    full = _open(cache)
    assert cache.resolve(full.session_id, -1, [(A, Wanted(0, 1))], [], 1).session_id == 0
    assert cache.resolve(full.session_id, 1, [], [], 1).error == ErrorCode.fetch_session_id_not_found


def test_a_full_cache_evicts_only_idle_sessions_else_serves_without_one():
    cache = FetchSessionCache(slots=2, eviction_ms=1000)
    first, second = _open(cache, now=0), _open(cache, now=0)
    assert first.session_id and second.session_id and len(cache) == 2
    assert _open(cache, now=500).session_id == 0, "both in recent use: no session, still a full fetch"
    third = _open(cache, now=2000)
    assert third.session_id != 0 and len(cache) == 2
    assert cache.resolve(first.session_id, 1, [], [], 2000).error == ErrorCode.fetch_session_id_not_found
