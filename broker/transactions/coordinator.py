"""TransactionCoordinator: transactional ids, their producer ids and epochs, and ending transactions.

Owns: `__transaction_state` (created on first use, compacted, `transaction.state.log.*`; loaded at
startup: the latest value per transactional id), the in-memory `TxnMetadata` of each id, the
requests a transactional producer sends its coordinator (InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) and the tools' (DescribeTransactions,
ListTransactions), KIP-890's check that a transactional produce names a partition of its producer's
open transaction, aborting transactions open longer than their timeout (fencing their producer),
forgetting ids unused for `transactional.id.expiration.ms`, and completing a transaction: its
markers written to every partition, then Complete* written.

Every change is written to `__transaction_state` before it takes effect (`_write`); a transactional id
with a write or its markers in flight answers CONCURRENT_TRANSACTIONS, which clients retry. After a
restart, transactions found in PrepareCommit/PrepareAbort get their markers again (a marker written
twice is harmless: the second closes nothing); Ongoing ones are aborted when they time out.

The embedded single broker coordinates every transactional id. In cluster mode a broker coordinates
the ids whose `__transaction_state` partition it leads (Kafka's rule, as groups follow
`__consumer_offsets`): leadership loads that partition's ids and resumes their prepared transactions,
losing it forgets them, and a request for an id coordinated elsewhere is answered NOT_COORDINATOR.
Markers for partitions led here are appended directly (`markers.write_markers`); the others go to their
leaders as WriteTxnMarkers (`broker_channel`), retried until every partition has its marker. Never sees
protocol types or sockets: handlers get Kafka error codes back.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from broker.cluster.producer_ids import ProducerIdManager
from broker.config import BrokerConfig
from broker.groups.records import partition_for
from broker.log.record_reader import read_batches
from broker.replica_manager import ReplicaManager
from broker.transactions.log_records import TRANSACTION_STATE_TOPIC, decode_key, decode_value, encode_key, encode_value
from broker.transactions.broker_channel import BrokerChannel
from broker.transactions.markers import OFFSETS_TOPIC, OffsetsMarkerHook, write_markers
from broker.transactions.metadata import COMPLETE, PREPARE, NO_PRODUCER_EPOCH, TxnMetadata, TxnState
from kafka_protocol.control_records import Marker
from kafka_protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError
from kafka_protocol.record_builder import Record, decode_records, encode_batch
from kafka_protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

E = ErrorCode
MARKER_RETRY_S = 0.5
WRITE_TIMEOUT_MS = 30000        # a state write's wait for its replicas (Kafka's request.timeout.ms default)


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, producer_ids: ProducerIdManager | None,
                 clock: Callable[[], float] = time.time, channel: BrokerChannel | None = None) -> None:
        self.config = config
        self.replicas = replicas
        self.producer_ids = producer_ids     # cluster mode: set once the broker has joined (its id blocks)
        self.clock = clock
        self.channel = channel               # cluster mode: markers to other brokers' partitions
        self.led: set[int] = set()           # cluster mode: the __transaction_state partitions led here
        self.num_partitions: int = config["transaction.state.log.num.partitions"]
        self.max_timeout_ms: int = config["transaction.max.timeout.ms"]
        self.txns: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, str] = {}          # producer id -> transactional id
        self._busy: set[str] = set()                    # ids with a write or markers in flight
        self._loaded = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_offsets_marker: OffsetsMarkerHook | None = None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- lifecycle --------------------------------------------------------------------------------

    @property
    def cluster(self) -> bool:
        return self.replicas.replication is not None

    def startup(self) -> None:
        """Start the periodic checks; on the single broker, load `__transaction_state` if it exists (else
        it is created on first use) and resume the markers of transactions caught between prepare and
        complete. In cluster mode loading follows leadership (`on_state_partition`)."""
        if not self.cluster and self.replicas.registry.get(TRANSACTION_STATE_TOPIC) is not None:
            self._load(range(self.replicas.registry.require(TRANSACTION_STATE_TOPIC).partitions))
            self._loaded = True
        self._spawn(self._periodic(self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                                   self.abort_timed_out))
        self._spawn(self._periodic(self.config["transaction.remove.expired.transaction.cleanup.interval.ms"],
                                   self.expire_ids))

    def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.channel is not None:
            self.channel.close()

    def on_state_partition(self, partition: int, leader: bool) -> None:
        """Cluster mode: leadership of `__transaction_state` partition `partition` arrived (load its ids,
        resume their prepared transactions) or left (forget them)."""
        if leader and partition not in self.led:
            self.num_partitions = self.replicas.replication.view.partitions_of(TRANSACTION_STATE_TOPIC) \
                if self.replicas.replication is not None else self.num_partitions
            self.led.add(partition)
            self._load([partition])
        elif not leader and partition in self.led:
            self.led.discard(partition)
            gone = [t for t in self.txns if self.partition_for(t) == partition]
            for txn_id in gone:
                m = self.txns.pop(txn_id)
                self.by_producer.pop(m.producer_id, None)
                self._busy.discard(txn_id)
            log.info("no longer coordinating the %d transactional ids of %s-%d", len(gone),
                     TRANSACTION_STATE_TOPIC, partition)

    def _spawn(self, coro) -> None:  # type: ignore[no-untyped-def]
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _create_topic(self) -> None:
        rf = self.config["transaction.state.log.replication.factor"] if self.cluster else 1
        overrides = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                     "segment.bytes": str(self.config["transaction.state.log.segment.bytes"])}
        if self.cluster:
            overrides["min.insync.replicas"] = str(self.config["transaction.state.log.min.isr"])
        try:
            self.replicas.create_topic(TRANSACTION_STATE_TOPIC, self.num_partitions, rf, overrides)
            log.info("created %s with %d partitions (replication factor %d)", TRANSACTION_STATE_TOPIC,
                     self.num_partitions, rf)
        except TopicAlreadyExistsError:
            pass

    def ensure_ready(self) -> None:
        """Create `__transaction_state` on the first transactional request (as Kafka does); the single
        broker loads it at once, a cluster's brokers as leadership of its partitions arrives."""
        if self._loaded:
            return
        if self.cluster:
            view = self.replicas.replication.view if self.replicas.replication is not None else None
            if view is not None and view.partitions_of(TRANSACTION_STATE_TOPIC) == 0:
                self._create_topic()
            return
        if self.replicas.registry.get(TRANSACTION_STATE_TOPIC) is None:
            self._create_topic()
        self._load(range(self.replicas.registry.require(TRANSACTION_STATE_TOPIC).partitions))
        self._loaded = True

    def coordinator_node(self, txn_id: str) -> tuple[int, str | None]:
        """Cluster mode FindCoordinator: the broker leading the id's `__transaction_state` partition, or
        (-1, why) while there is none (the topic is created on first use, as Kafka does)."""
        replication = self.replicas.replication
        assert replication is not None
        count = replication.view.partitions_of(TRANSACTION_STATE_TOPIC)
        if count == 0:
            try:
                self._create_topic()
            except KafkaError as e:
                return -1, f"cannot create {TRANSACTION_STATE_TOPIC}: {e}"
            return -1, f"{TRANSACTION_STATE_TOPIC} is being created"
        self.num_partitions = count
        partition = self.partition_for(txn_id)
        leader = replication.view.leader(TRANSACTION_STATE_TOPIC, partition)
        if leader < 0:
            return -1, f"{TRANSACTION_STATE_TOPIC}-{partition} has no leader"
        return leader, None

    def coordinator_error(self, txn_id: str) -> ErrorCode:
        """NOT_COORDINATOR when another broker coordinates `txn_id` (cluster mode), COORDINATOR_NOT_AVAILABLE
        while `__transaction_state` does not exist yet; else NONE."""
        if not self.cluster:
            return E.none
        replication = self.replicas.replication
        if replication is None or replication.view.partitions_of(TRANSACTION_STATE_TOPIC) == 0:
            self.ensure_ready()
            return E.coordinator_not_available
        if self.partition_for(txn_id) not in self.led:
            return E.not_coordinator
        return E.none

    def _load(self, partitions: Iterable[int]) -> None:
        """Read the ids of `partitions` of `__transaction_state` (the latest value of each) and resume the
        markers of the transactions found prepared."""
        started = time.monotonic()
        txns: dict[str, TxnMetadata] = {}
        partitions = list(partitions)
        for p in partitions:
            plog = self.replicas.partition(TRANSACTION_STATE_TOPIC, p)
            records = [r for h, batch in read_batches(plog) if not h.is_control for r in decode_records(batch)]
            for record in records:
                if record.key is None:
                    continue
                try:
                    txn_id = decode_key(record.key)
                    if record.value is None:
                        txns.pop(txn_id, None)
                    else:
                        txns[txn_id] = decode_value(txn_id, record.value)
                except (ValueError, UnicodeDecodeError) as e:
                    log.error("%s-%d offset %d: unreadable record skipped: %s", TRANSACTION_STATE_TOPIC, p,
                              record.offset, e)
        self.txns.update(txns)
        self.by_producer.update({m.producer_id: txn_id for txn_id, m in txns.items()})
        log.info("loaded %d transactional ids from %d partition(s) of %s in %.2fs", len(txns), len(partitions),
                 TRANSACTION_STATE_TOPIC, time.monotonic() - started)
        loop = asyncio.get_running_loop()
        for m in txns.values():
            if m.state in PREPARE:
                loop.call_soon(self._spawn, self._complete(m))

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _new_producer_id(self) -> int:
        assert self.producer_ids is not None, "the broker has not joined its cluster yet"
        return self.producer_ids.next_id()

    # --- writes to __transaction_state ----------------------------------------------------------------

    async def _write(self, new: TxnMetadata) -> ErrorCode:
        """Append `new` to the id's partition; it becomes current once written (and replicated)."""
        txn_id = new.transactional_id
        partition = self.partition_for(txn_id)
        batch = encode_batch([Record(0, self.now_ms(), encode_key(txn_id), encode_value(new))])
        self._busy.add(txn_id)
        try:
            result = self.replicas.append(TRANSACTION_STATE_TOPIC, partition, batch, acks=-1)
            wait = self.replicas.wait_replicated(TRANSACTION_STATE_TOPIC, partition, result.last_offset + 1,
                                                 WRITE_TIMEOUT_MS)
            if wait is not None:
                await wait
        except KafkaError as e:
            log.warning("transactional id %s: cannot write its state: %s", txn_id, e)
            return E.not_coordinator if e.code == E.not_leader_or_follower else E.coordinator_not_available
        finally:
            self._busy.discard(txn_id)
        old = self.txns.get(txn_id)
        if old is not None and old.producer_id != new.producer_id:
            self.by_producer.pop(old.producer_id, None)
        self.txns[txn_id] = new
        self.by_producer[new.producer_id] = txn_id
        return E.none

    # --- InitProducerId ----------------------------------------------------------------------------

    async def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                               ) -> InitResult:
        if not txn_id:
            return InitResult(E.invalid_request)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitResult(E.invalid_transaction_timeout)
        self.ensure_ready()
        if (error := self.coordinator_error(txn_id)) != E.none:
            return InitResult(error)
        now = self.now_ms()
        m = self.txns.get(txn_id)
        if m is None:
            m = TxnMetadata(txn_id, self._new_producer_id(), NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY,
                            last_update_ms=now)
        if txn_id in self._busy:
            return InitResult(E.concurrent_transactions)
        expected = producer_epoch if producer_id >= 0 else None
        if producer_id >= 0 and m.producer_epoch != NO_PRODUCER_EPOCH and producer_id != m.producer_id:
            return InitResult(E.producer_fenced)
        if m.state in PREPARE:
            return InitResult(E.concurrent_transactions)
        if m.state == TxnState.ONGOING:
            # fence the producer of the open transaction: abort it at a bumped epoch, and let the
            # caller retry once the abort is complete (it then gets the epoch after that one)
            fenced = m.prepare_end(False, now, epoch=m.fenced_epoch())
            error = await self._write(fenced)
            if error != E.none:
                return InitResult(error)
            log.info("transactional id %s: a new producer fenced epoch %d; aborting its open transaction",
                     txn_id, m.producer_epoch)
            await self._complete(fenced)
            return InitResult(E.concurrent_transactions)
        if m.epoch_exhausted and (expected is None or expected == m.producer_epoch):
            new: TxnMetadata | int = m.rotate_producer_id(self._new_producer_id(), timeout_ms, now,
                                                          expected is not None)
        else:
            new = m.init_producer(timeout_ms, expected, now)
        if isinstance(new, int):
            return InitResult(ErrorCode(new))
        error = await self._write(new)
        if error != E.none:
            return InitResult(error)
        log.info("transactional id %s: producer id %d epoch %d", txn_id, new.producer_id, new.producer_epoch)
        return InitResult(E.none, new.producer_id, new.producer_epoch)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------

    def _request_error(self, txn_id: str) -> ErrorCode:
        """INVALID_REQUEST for an empty id; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE as `coordinator_error`."""
        if not txn_id:
            return E.invalid_request
        self.ensure_ready()
        return self.coordinator_error(txn_id)

    def _check_producer(self, txn_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata | ErrorCode:
        """The id's state for a request of its current producer; else Kafka's error for the request."""
        if (error := self._request_error(txn_id)) != E.none:
            return error
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if m.producer_epoch != producer_epoch:
            return E.producer_fenced
        if txn_id in self._busy:
            return E.concurrent_transactions
        return m

    async def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        m = self._check_producer(txn_id, producer_id, producer_epoch)
        if isinstance(m, int):
            return ErrorCode(m)
        if m.state in PREPARE:
            return E.concurrent_transactions
        wanted = frozenset(partitions)
        if m.state == TxnState.ONGOING and wanted <= m.partitions:
            return E.none
        return await self._write(m.add_partitions(wanted, self.now_ms()))

    def offsets_partition(self, group_id: str) -> TopicPartition:
        groups = self.replicas.registry.get(OFFSETS_TOPIC)
        count = groups.partitions if groups is not None else self.config["offsets.topic.num.partitions"]
        return OFFSETS_TOPIC, partition_for(group_id, count)

    # --- EndTxn ------------------------------------------------------------------------------------

    async def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        m = self._check_producer(txn_id, producer_id, producer_epoch)
        if isinstance(m, int):
            return ErrorCode(m)
        wanted = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if m.state == TxnState.ONGOING:
            prepared = m.prepare_end(commit, self.now_ms())
            error = await self._write(prepared)
            if error != E.none:
                return error
            _fault_after_prepare(txn_id)
            if all(self._led_here(tp) for tp in prepared.partitions):
                await self._complete(prepared)       # local appends: answer once they are done
            else:
                self._spawn(self._complete(prepared))   # as Kafka: answer now, markers follow
            return E.none
        if m.state in COMPLETE:
            return E.none if m.state == wanted else E.invalid_txn_state
        if m.state in PREPARE:
            same = (m.state == TxnState.PREPARE_COMMIT) == commit
            return E.concurrent_transactions if same else E.invalid_txn_state
        return E.invalid_txn_state      # Empty

    async def _complete(self, prepared: TxnMetadata) -> None:
        """Write the markers of a prepared transaction, then Complete*; markers that fail are retried
        (the id answers CONCURRENT_TRANSACTIONS meanwhile)."""
        txn_id = prepared.transactional_id
        marker = Marker(prepared.producer_id, prepared.producer_epoch, prepared.state == TxnState.PREPARE_COMMIT,
                        self._coordinator_epoch(txn_id))
        remaining = set(prepared.partitions)
        self._busy.add(txn_id)
        try:
            while True:
                if self.txns.get(txn_id) is not prepared and self.txns.get(txn_id) != prepared:
                    return          # leadership moved: the new coordinator completes it
                results = await self._write_markers(marker, sorted(remaining))
                remaining = {tp for tp, error in results.items()
                             if error not in (E.none, E.unknown_topic_or_partition)}
                if not remaining:
                    break
                log.warning("transactional id %s: markers not written to %s; retrying", txn_id,
                            {f"{t}-{p}": results[(t, p)].name for t, p in remaining})
                await asyncio.sleep(MARKER_RETRY_S)
        finally:
            self._busy.discard(txn_id)
        error = await self._write(prepared.complete(self.now_ms()))
        if error != E.none:
            log.error("transactional id %s: markers written but its completion not: %s", txn_id, error.name)

    def _led_here(self, tp: TopicPartition) -> bool:
        replication = self.replicas.replication
        return replication is None or replication.view.leader(*tp) == replication.node_id

    async def _write_markers(self, marker: Marker, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Append `marker` to the partitions led here; send it to the leaders of the others."""
        local = [tp for tp in partitions if self._led_here(tp)]
        results = write_markers(self.replicas, marker, local, self.on_offsets_marker) if local else {}
        replication = self.replicas.replication
        if replication is None or self.channel is None:
            return results
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            if tp not in results:
                by_leader.setdefault(replication.view.leader(*tp), []).append(tp)
        for leader, tps in by_leader.items():
            if leader < 0:
                results.update({tp: E.leader_not_available for tp in tps})
            else:
                results.update(await self.channel.send_markers(leader, marker, tps))
        return results

    def _coordinator_epoch(self, txn_id: str) -> int:
        try:
            return self.replicas.leader_epoch(TRANSACTION_STATE_TOPIC, self.partition_for(txn_id))
        except KafkaError:
            return 0

    # --- KIP-890: a transactional produce must name a partition of the open transaction -----------------

    def verify_partition(self, txn_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """For a transactional batch opening a transaction in `tp`: INVALID_TXN_STATE unless the
        coordinator added `tp` to the producer's open transaction (older epochs: fenced)."""
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if producer_epoch < m.producer_epoch:
            return E.invalid_producer_epoch
        if m.state != TxnState.ONGOING or tp not in m.partitions:
            return E.invalid_txn_state
        return E.none

    def verify_offsets(self, txn_id: str, group_id: str, producer_id: int, producer_epoch: int) -> ErrorCode:
        """TxnOffsetCommit: the group's __consumer_offsets partition must be in the open transaction
        (AddOffsetsToTxn first), as Kafka 3.6+ verifies; a fenced epoch is INVALID_PRODUCER_EPOCH."""
        return self.verify_partition(txn_id, producer_id, producer_epoch, self.offsets_partition(group_id))

    def coordinated_here(self, txn_id: str) -> bool:
        """Whether this broker coordinates `txn_id` (always on the single broker)."""
        return not self.cluster or self.partition_for(txn_id) in self.led

    async def verify_elsewhere(self, txn_id: str, producer_id: int, producer_epoch: int,
                               partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 in cluster mode: ask the coordinator of `txn_id` on another broker whether `partitions`
        are in the producer's open transaction; NOT_ENOUGH_REPLICAS (retriable for every producer, as
        Kafka answers) when no coordinator can be asked."""
        node, _why = self.coordinator_node(txn_id)
        if node < 0 or self.channel is None:
            return {tp: E.not_enough_replicas for tp in partitions}
        answers = await self.channel.verify(node, txn_id, producer_id, producer_epoch, partitions)
        retriable = (E.request_timed_out, E.not_coordinator, E.coordinator_not_available,
                     E.coordinator_load_in_progress, E.concurrent_transactions)
        fenced = (E.producer_fenced, E.invalid_producer_id_mapping)
        return {tp: E.not_enough_replicas if e in retriable else E.invalid_producer_epoch if e in fenced else e
                for tp, e in answers.items()}

    # --- timeouts and expiry -------------------------------------------------------------------------

    async def _periodic(self, interval_ms: int, work: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                work()
            except Exception:  # noqa: BLE001 - a periodic check must keep running
                log.exception("transaction coordinator: periodic check failed")

    def abort_timed_out(self) -> None:
        """Abort every transaction open longer than its timeout, fencing its producer (a bumped epoch)."""
        now = self.now_ms()
        for m in list(self.txns.values()):
            if (m.state == TxnState.ONGOING and m.transactional_id not in self._busy
                    and m.start_ms + m.timeout_ms < now):
                log.info("transactional id %s: transaction open for %d ms, longer than its timeout %d ms; aborting",
                         m.transactional_id, now - m.start_ms, m.timeout_ms)
                self._spawn(self._abort_fenced(m, now))

    async def _abort_fenced(self, m: TxnMetadata, now: int) -> None:
        fenced = m.prepare_end(False, now, epoch=m.fenced_epoch())
        if await self._write(fenced) == E.none:
            await self._complete(fenced)

    def expire_ids(self) -> None:
        """Forget transactional ids idle for transactional.id.expiration.ms (a tombstone each)."""
        cutoff = self.now_ms() - self.config["transactional.id.expiration.ms"]
        for m in list(self.txns.values()):
            if (m.state in (TxnState.EMPTY, *COMPLETE) and m.last_update_ms < cutoff
                    and m.transactional_id not in self._busy):
                partition = self.partition_for(m.transactional_id)
                try:
                    self.replicas.append(TRANSACTION_STATE_TOPIC, partition, encode_batch(
                        [Record(0, self.now_ms(), encode_key(m.transactional_id), None)]), acks=-1)
                except KafkaError as e:
                    log.warning("transactional id %s: cannot expire it: %s", m.transactional_id, e)
                    continue
                del self.txns[m.transactional_id]
                self.by_producer.pop(m.producer_id, None)
                log.info("transactional id %s expired", m.transactional_id)

    # --- tools ---------------------------------------------------------------------------------

    def describe(self, txn_id: str) -> TxnMetadata | ErrorCode:
        if (error := self._request_error(txn_id)) != E.none:
            return error
        m = self.txns.get(txn_id)
        return E.transactional_id_not_found if m is None else m

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
             duration_ms: int = -1) -> list[TxnMetadata]:
        """Transactional ids, filtered as ListTransactions asks: states by Kafka's names, producer ids,
        and (v1, KIP-994) transactions open longer than `duration_ms`."""
        self.ensure_ready()
        wanted_states = {s.lower() for s in states}
        wanted_pids = set(producer_ids)
        now = self.now_ms()
        out = []
        for m in self.txns.values():
            if wanted_states and m.state.kafka_name.lower() not in wanted_states:
                continue
            if wanted_pids and m.producer_id not in wanted_pids:
                continue
            if duration_ms >= 0 and (m.state != TxnState.ONGOING or now - m.start_ms < duration_ms):
                continue
            out.append(m)
        return out


def _fault_after_prepare(txn_id: str) -> None:
    """Crash tests: PYLOG_FAULT_KILL_COORDINATOR_AFTER_PREPARE=<transactional id> SIGKILLs this broker right
    after that id's Prepare* is written and before any marker (the coordinator failover window). Inert
    unless set."""
    if os.environ.get("PYLOG_FAULT_KILL_COORDINATOR_AFTER_PREPARE") == txn_id:
        log.warning("fault injection: killing this broker after %s's prepare", txn_id)
        os.kill(os.getpid(), signal.SIGKILL)
