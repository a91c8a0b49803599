"""A follower's fetcher: copies the partitions one leader leads into this broker's logs.

Owns, per leader broker, one connection and one loop (Kafka's ReplicaFetcherThread, as an asyncio
task on the broker's loop):

- a partition added for a new leader epoch first truncates its divergent tail by epoch: it asks the
  leader (OffsetsForLeaderEpoch) where its own latest epoch ends on the leader and truncates there,
  never by high watermark alone (KIP-101/279). A leader that knows no such epoch makes it fall back
  to its high watermark, as Kafka does;
- then it fetches with its replica id from its log end offset, naming the leader epoch it follows
  (a leader of another epoch answers FENCED/UNKNOWN_LEADER_EPOCH and nothing is copied), appends
  the batches as they are (offsets and leader epochs kept) and takes the leader's high watermark,
  bounded by its own log end offset;
- OFFSET_OUT_OF_RANGE: ahead of the leader → truncate to the leader's end; behind its log start →
  start over at the leader's log start (ListOffsets);
- OFFSET_MOVED_TO_TIERED_STORAGE (a tiered partition whose older segments the leader holds only in remote
  storage, KIP-405): start over at the leader's earliest local offset, with the log start offset below it
  and the producer state and leader epochs of the remote segment that ends there (`TieredRestore`);
- an incremental fetch session (KIP-227, as Kafka's followers keep one per leader): after a full
  fetch opens it, a request names only the partitions whose fetch position changed (and the ones
  it stops fetching), and the leader answers only the partitions with something new, so idle
  partitions cost nothing per fetch. A session the leader no longer knows, or a lost connection,
  starts a new one with a full fetch;
- a lost connection backs off `replica.fetch.backoff.ms` and connects again; the loop ends when no
  partition is left to follow.

Never changes roles: the replication manager adds and removes partitions as the cluster view says.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from kafka_protocol.topic_partition import TopicPartition
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.errors import ErrorCode, KafkaError
from broker.log.partition_log import PartitionLog
from kafka_protocol import fetch_request
from kafka_protocol.client_codec import list_offsets_request, offsets_for_leader_epoch_request
from kafka_protocol.fetch_request import FetchPartition
from kafka_protocol.fetch_response import FetchResponseError, decode_fetch_response
from kafka_protocol.quiet_logging import quiet
from broker.replication.peer_connection import PeerConnection, PeerUnavailableError
from broker.replication.quota import ReplicationQuota
from broker.security.inter_broker import PeerSecurity

log = logging.getLogger(__name__)
quiet_log = quiet(logging.getLogger(__name__ + ".repeats"))

FETCH_VERSION, OFFSET_FOR_LEADER_EPOCH_VERSION, LIST_OFFSETS_VERSION = 12, 4, 8     # ListOffsets 8: earliest local
EARLIEST, LATEST, EARLIEST_LOCAL = -2, -1, -4
# a follower starting over at the leader's earliest local offset: the remote log manager restores the producer
# state and leader epochs there (RemoteLogManager.restore_follower_state)
TieredRestore = Callable[[PartitionLog, int], Awaitable[None]]
RETRY_SOON_S = 0.05
THROTTLE_RECHECK_S = 0.1      # a throttled partition over its quota is looked at again after this


@dataclass(eq=False)
class FollowedPartition:
    topic: str
    partition: int
    log: PartitionLog
    leader_epoch: int
    truncated: bool = False
    fenced_until: float = field(default=0.0)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class FetcherSettings:
    replica_id: int
    max_wait_ms: int
    partition_max_bytes: int
    max_bytes: int
    backoff_ms: int
    request_timeout_ms: int
    security: PeerSecurity | None = None      # the inter-broker listener's, when not PLAINTEXT
    tiered_restore: TieredRestore | None = None   # tiered storage on this broker


FetchPosition = tuple[int, int, int, int]     # fetch offset, leader epoch, log start offset, max bytes


class FetchSessionState:
    """The follower's side of one incremental fetch session with its leader (KIP-227). No I/O.

    `next_request(wanted)` says what the next Fetch carries: a full one (session id 0, epoch 0: every
    wanted partition) when no session is open, else the session's id and next epoch with only the
    partitions whose position changed since the leader last heard it, and the ones no longer wanted.
    `answered(session_id)` records the leader's answer (0: it keeps no session; fetch in full), `reset()`
    forgets the session (an error, a lost connection).
    """

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0                   # the epoch of the next request
        self.sent: dict[TopicPartition, FetchPosition] = {}

    def reset(self) -> None:
        self.session_id, self.epoch, self.sent = 0, 0, {}

    def next_request(self, wanted: dict[TopicPartition, FetchPosition]
                     ) -> tuple[int, int, list[TopicPartition], list[TopicPartition]]:
        if self.session_id == 0:
            self.sent = dict(wanted)
            return 0, 0, list(wanted), []
        changed = [tp for tp, position in wanted.items() if self.sent.get(tp) != position]
        forgotten = [tp for tp in self.sent if tp not in wanted]
        self.sent = dict(wanted)
        epoch = self.epoch
        return self.session_id, epoch, changed, forgotten

    def answered(self, session_id: int) -> None:
        if self.session_id == 0:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < 2**31 - 1 else 1


class ReplicaFetcher:
    def __init__(self, leader_id: int, host: str, port: int, settings: FetcherSettings,
                 on_high_watermark: Callable[[TopicPartition], None],
                 throttle: Callable[[TopicPartition], ReplicationQuota | None] = lambda _tp: None) -> None:
        self.leader_id = leader_id
        self._throttle = throttle       # a throttled partition's quota (follower.replication.throttled.*)
        self.settings = settings
        self.conn = PeerConnection(host, port, f"replica-fetcher-{settings.replica_id}-from-{leader_id}",
                                   settings.security)
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        self._on_high_watermark = on_high_watermark
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self.session = FetchSessionState()

    @property
    def address(self) -> tuple[str, int]:
        return (self.conn.host, self.conn.port)

    def add(self, fp: FollowedPartition) -> None:
        self.partitions[fp.tp] = fp
        self._wakeup.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"fetcher-{self.leader_id}")

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        self.partitions.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.conn.close()

    # ------------------------------------------------------------ the loop

    async def _run(self) -> None:
        backoff_s = self.settings.backoff_ms / 1000.0
        while self.partitions:
            try:
                pending = [fp for fp in self.partitions.values() if not fp.truncated]
                if pending:
                    await self._truncate(pending)
                ready = [fp for fp in self.partitions.values()
                         if fp.truncated and fp.fenced_until <= asyncio.get_running_loop().time()]
                if ready:
                    await self._fetch(ready)
                else:
                    self._wakeup.clear()
                    try:
                        await asyncio.wait_for(self._wakeup.wait(), RETRY_SOON_S * 4)
                    except asyncio.TimeoutError:
                        pass
            except PeerUnavailableError as e:
                self.session.reset()
                quiet_log.warning("replica fetcher of broker %d: %s; retrying in %d ms", self.settings.replica_id,
                                  e, self.settings.backoff_ms)
                await asyncio.sleep(backoff_s)
            except asyncio.CancelledError:
                raise
            except Exception:   # noqa: BLE001 - one bad answer must not stop replication
                log.exception("replica fetcher of broker %d from broker %d failed; retrying",
                              self.settings.replica_id, self.leader_id)
                await asyncio.sleep(backoff_s)
        self.conn.close()

    def _current(self, fp: FollowedPartition) -> bool:
        """Still followed, for the same epoch (roles may change while a request is out)."""
        return self.partitions.get(fp.tp) is fp

    def _fence(self, fp: FollowedPartition, why: str) -> None:
        quiet_log.info("%s-%d: %s (leader %d, epoch %d); waiting for new metadata", fp.topic, fp.partition, why,
                       self.leader_id, fp.leader_epoch)
        fp.fenced_until = asyncio.get_running_loop().time() + self.settings.backoff_ms / 1000.0

    # ------------------------------------------------------------ truncation by leader epoch

    async def _truncate(self, pending: list[FollowedPartition]) -> None:
        asks: list[tuple[str, int, int, int]] = []
        for fp in pending:
            latest = fp.log.leader_epochs.latest_epoch
            if latest is None:
                # no epoch history: only records below the high watermark are known to be committed
                self._truncate_to(fp, fp.log.high_watermark, "no leader epoch history")
                fp.truncated = True
                continue
            asks.append((fp.topic, fp.partition, fp.leader_epoch, latest))
        if not asks:
            return
        body = offsets_for_leader_epoch_request(OFFSET_FOR_LEADER_EPOCH_VERSION, self.settings.replica_id, asks)
        resp = await self.conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body,
                                       self.settings.request_timeout_ms / 1000.0)
        by_tp = {(t.topic, p.partition): p for t in resp.topics for p in t.partitions}
        for fp in pending:
            if fp.truncated or not self._current(fp):
                continue
            answer = by_tp.get(fp.tp)
            if answer is None:
                continue
            if answer.error_code != ErrorCode.none:
                self._fence(fp, f"OffsetsForLeaderEpoch answered {ErrorCode(answer.error_code).name}")
                continue
            if answer.leader_epoch < 0 or answer.end_offset < 0:
                self._truncate_to(fp, fp.log.high_watermark, "the leader knows no epoch at or before ours")
            else:
                _, own_end = fp.log.leader_epochs.end_offset_for(answer.leader_epoch, fp.log.log_end_offset)
                target = min(answer.end_offset, own_end if own_end >= 0 else fp.log.log_end_offset)
                self._truncate_to(fp, target, f"epoch {answer.leader_epoch} ends at {answer.end_offset} on the leader")
            fp.truncated = True

    def _truncate_to(self, fp: FollowedPartition, offset: int, why: str) -> None:
        if offset >= fp.log.log_end_offset:
            return
        before = fp.log.log_end_offset
        after = fp.log.truncate_to(max(offset, fp.log.log_start_offset))
        log.info("%s-%d: truncated from %d to %d (%s)", fp.topic, fp.partition, before, after, why)

    # ------------------------------------------------------------ fetching

    async def _fetch(self, ready: list[FollowedPartition]) -> None:
        s = self.settings
        now = time.monotonic()
        held = [fp for fp in ready if (q := self._throttle(fp.tp)) is not None and q.exceeded(now)]
        if held:        # throttled replicas over their quota: not fetched until the rate falls
            ready = [fp for fp in ready if fp not in held]
            for h in held:
                h.fenced_until = asyncio.get_running_loop().time() + THROTTLE_RECHECK_S
            if not ready:
                return
        wanted = {fp.tp: (fp.log.log_end_offset, fp.leader_epoch, fp.log.log_start_offset, s.partition_max_bytes)
                  for fp in ready}
        session_id, epoch, changed, forgotten = self.session.next_request(wanted)
        parts = []
        for t, p in changed:
            offset, leader_epoch, log_start, max_bytes = wanted[(t, p)]
            parts.append(FetchPartition(t, p, offset, max_bytes, leader_epoch, log_start))
        body = fetch_request.for_replica(FETCH_VERSION, s.replica_id, parts, max_wait_ms=s.max_wait_ms,
                                         max_bytes=s.max_bytes, session_id=session_id, session_epoch=epoch,
                                         forgotten=forgotten)
        raw = await self.conn.request_raw(ApiKey.FETCH, FETCH_VERSION, body,
                                          (s.request_timeout_ms + s.max_wait_ms) / 1000.0)
        try:
            resp = decode_fetch_response(raw, FETCH_VERSION)
        except FetchResponseError as e:
            self.conn.close()
            raise PeerUnavailableError(f"broker {self.conn.address}: {e}") from None
        if resp.error_code in (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch):
            log.info("replica fetcher of broker %d: leader %d answered %s; starting a new fetch session",
                     s.replica_id, self.leader_id, ErrorCode(resp.error_code).name)
            self.session.reset()
            return
        if resp.error_code != ErrorCode.none:
            raise PeerUnavailableError(f"broker {self.conn.address} refused the fetch: "
                                       f"{ErrorCode(resp.error_code).name}")
        self.session.answered(resp.session_id)
        by_tp = {(fp.topic, fp.partition): fp for fp in ready}
        for part in resp.partitions:
            fp = by_tp.get((part.topic, part.index))
            if fp is None or not self._current(fp):
                continue
            code = part.error_code
            if code == ErrorCode.none:
                quota = self._throttle(fp.tp)
                if quota is not None and part.records is not None:
                    quota.record(len(part.records), time.monotonic())
                self._apply(fp, part.records, part.high_watermark, part.log_start_offset)
            elif code == ErrorCode.offset_out_of_range:
                await self._out_of_range(fp)
            elif code == ErrorCode.offset_moved_to_tiered_storage and s.tiered_restore is not None:
                await self._from_tiered(fp, s.tiered_restore)
            elif code in (ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                          ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition):
                self._fence(fp, f"the leader answered {ErrorCode(code).name}")
            else:
                quiet_log.warning("%s-%d: fetch from leader %d answered %s", fp.topic, fp.partition, self.leader_id,
                                  ErrorCode(code).name)
                fp.fenced_until = asyncio.get_running_loop().time() + s.backoff_ms / 1000.0

    def _apply(self, fp: FollowedPartition, records: memoryview | None, high_watermark: int,
               leader_log_start: int) -> None:
        plog = fp.log
        if records is not None and len(records):
            try:
                plog.append_as_follower(records)
            except KafkaError as e:
                log.warning("%s-%d: cannot append what leader %d sent (%s); truncating by epoch again",
                            fp.topic, fp.partition, self.leader_id, e)
                fp.truncated = False
                return
        if leader_log_start > plog.log_start_offset and leader_log_start <= plog.log_end_offset:
            plog.delete_records_before(leader_log_start)
        before = plog.high_watermark
        plog.update_high_watermark(min(high_watermark, plog.log_end_offset))
        if plog.high_watermark != before:
            self._on_high_watermark(fp.tp)

    async def _edges(self, fp: FollowedPartition, *which: int) -> dict[int, int] | None:
        """The leader's offsets for each ListOffsets timestamp in `which`; None (and the partition fenced) when it
        refuses or is no longer the one this partition follows."""
        timeout_s = self.settings.request_timeout_ms / 1000.0
        edges = {}
        for w in which:
            body = list_offsets_request(LIST_OFFSETS_VERSION, fp.topic, fp.partition, w, False,
                                        replica_id=self.settings.replica_id)
            resp = await self.conn.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, timeout_s)
            part = resp.topics[0].partitions[0]
            if part.error_code != ErrorCode.none:
                self._fence(fp, f"ListOffsets answered {ErrorCode(part.error_code).name}")
                return None
            edges[w] = part.offset
        return edges if self._current(fp) else None

    async def _from_tiered(self, fp: FollowedPartition, restore: TieredRestore) -> None:
        """Our fetch offset lies in the leader's remote segments: copy only its local log, as Kafka's followers."""
        edges = await self._edges(fp, EARLIEST, EARLIEST_LOCAL)
        if edges is None:
            return
        log_start, local_start = edges[EARLIEST], edges[EARLIEST_LOCAL]
        log.info("%s-%d: offsets below %d are in remote storage; starting at the leader's earliest local offset",
                 fp.topic, fp.partition, local_start)
        fp.log.truncate_fully_and_start_at(local_start, log_start=min(log_start, local_start))
        try:
            await restore(fp.log, local_start)
        except Exception as e:  # noqa: BLE001 - without it, only the producers' duplicate detection is weaker
            log.warning("%s-%d: producer state and leader epochs at %d not restored from remote storage: %s",
                        fp.topic, fp.partition, local_start, e)

    async def _out_of_range(self, fp: FollowedPartition) -> None:
        """Our fetch offset is outside the leader's log: ahead of its end, or behind its start."""
        edges = await self._edges(fp, EARLIEST, LATEST)
        if edges is None:
            return
        earliest, latest = edges[EARLIEST], edges[LATEST]
        end = fp.log.log_end_offset
        if end > latest:
            self._truncate_to(fp, latest, f"ahead of the leader's log end {latest}")
        elif end < earliest:
            log.info("%s-%d: behind the leader's log start %d; starting over there", fp.topic, fp.partition, earliest)
            fp.log.truncate_fully_and_start_at(earliest)
