"""Incremental fetch sessions (KIP-227): the broker remembers what a fetcher asks for. Sans I/O.

A client that opens a session (session id 0, epoch 0) gets an id back; from then on it sends only
the partitions whose fetch position changed (and `forgotten` ones to drop), and the broker answers
only the partitions with something new: records, an error, or a moved high watermark, last stable
offset or log start offset. Epochs number the requests of a session so a stale or repeated request
is refused (INVALID_FETCH_SESSION_EPOCH); an unknown id gets FETCH_SESSION_ID_NOT_FOUND.

Owns `FetchSessionCache` (Kafka's limits: `max.incremental.fetch.session.cache.slots` sessions; when
full, a new session may evict one idle for `min.incremental.fetch.session.eviction.ms`, else the
client is served without a session) and `FetchContext`, the one request's view: which partitions to
read, and which of the results go into the response. Knows nothing about logs or the wire.

Epoch rules (the request's `session_epoch`): -1 closes any named session and fetches without one;
0 closes any named session and opens a new one (a full fetch); n > 0 continues session `id`.
"""
from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterable

from kafka_protocol.topic_partition import TopicPartition
from kafka_protocol.errors import ErrorCode

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass(slots=True)
class Wanted:
    """One partition a fetch reads: where from, how much, and the leader epoch the client knows."""

    fetch_offset: int
    max_bytes: int
    leader_epoch: int = -1
    # what the fetcher last received for it (incremental responses leave out what did not change)
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2


@dataclass
class FetchSession:
    session_id: int
    epoch: int                                   # the epoch the next request must carry
    partitions: OrderedDict[TopicPartition, Wanted] = field(default_factory=OrderedDict)
    last_used_ms: int = 0


@dataclass
class FetchContext:
    """One Fetch request resolved against the cache: what to read and what to answer."""

    wanted: OrderedDict[TopicPartition, Wanted]
    session: FetchSession | None = None          # None: a full fetch without a session
    incremental: bool = False
    error: ErrorCode = ErrorCode.none

    @property
    def session_id(self) -> int:
        return self.session.session_id if self.session is not None else 0

    def include(self, tp: TopicPartition, error: int, high_watermark: int, last_stable_offset: int,
                log_start_offset: int, has_records: bool) -> bool:
        """Whether a partition's result goes into the response; remembers what the fetcher got."""
        w = self.wanted[tp]
        changed = (has_records or error != 0 or high_watermark != w.high_watermark
                   or last_stable_offset != w.last_stable_offset or log_start_offset != w.log_start_offset)
        if changed:
            w.high_watermark, w.last_stable_offset, w.log_start_offset = (high_watermark, last_stable_offset,
                                                                          log_start_offset)
        return changed or not self.incremental


class FetchSessionCache:
    """The broker's fetch sessions, bounded as Kafka bounds them."""

    def __init__(self, slots: int = 1000, eviction_ms: int = 120_000) -> None:
        self.slots = slots
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()   # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def resolve(self, session_id: int, epoch: int, requested: Iterable[tuple[TopicPartition, Wanted]],
                forgotten: Iterable[TopicPartition], now_ms: int) -> FetchContext:
        """The context of one request (see the module's epoch rules)."""
        requested = list(requested)
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id != 0:
                self._sessions.pop(session_id, None)
            wanted = OrderedDict(requested)
            if epoch == FINAL_EPOCH:
                return FetchContext(wanted)
            session = self._open(wanted, now_ms)
            return FetchContext(session.partitions if session else wanted, session)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(OrderedDict(), error=ErrorCode.fetch_session_id_not_found)
        if epoch != session.epoch:
            return FetchContext(OrderedDict(), error=ErrorCode.invalid_fetch_session_epoch)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp, w in requested:
            old = session.partitions.get(tp)
            if old is not None:     # a new position or size; what the fetcher last got stays known
                w.high_watermark, w.last_stable_offset, w.log_start_offset = (
                    old.high_watermark, old.last_stable_offset, old.log_start_offset)
            session.partitions[tp] = w
        session.epoch = _next_epoch(session.epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session.session_id)
        return FetchContext(session.partitions, session, incremental=True)

    def _open(self, wanted: OrderedDict[TopicPartition, Wanted], now_ms: int) -> FetchSession | None:
        if self.slots <= 0:
            return None
        if len(self._sessions) >= self.slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now_ms - oldest.last_used_ms < self.eviction_ms:
                return None          # every slot is in recent use: serve this fetcher without a session
            del self._sessions[oldest_id]
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = random.randint(1, 2**31 - 1)
        session = FetchSession(session_id, 1, wanted, now_ms)
        self._sessions[session_id] = session
        return session


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1
