"""The exactly-once sink's Kafka transactions (KIP-98), over the sink's own client.

Owns the conversations with a transaction coordinator and a group coordinator that a transactional
producer has: InitProducerId with a transactional id (which fences any earlier producer of that id
and aborts its open transaction), AddPartitionsToTxn before a partition's first batch,
AddOffsetsToTxn + TxnOffsetCommit (the batch marker committed with the records), OffsetFetch with
require_stable (has this batch been committed before?), and EndTxn, which the driver sends for the
executors' prepared transactions (`end_transaction`: any client may end a transaction it names with
its producer id and epoch). Retriable answers (coordinator moving or loading, a concurrent
transaction still completing, an unstable offset) are retried until delivery.timeout.ms; a fenced
producer raises `TransactionError` naming the transactional id and what to do.

Never encodes records or decides partitions (`native_sink`), never sends Produce (`produce_client`).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.client_codec import (
    add_offsets_to_txn_request,
    add_partitions_to_txn_request,
    end_txn_request,
    init_producer_id_request,
    offset_fetch_request,
    txn_offset_commit_request,
)
from kafka_protocol.topic_partition import TopicPartition
from sparklog.errors import UserError
from sparklog.kafka_client import BrokerConnection, BrokerUnavailableError, KafkaClient, PartitionError
from sparklog.produce_client import ProduceClient, ProducerConfig, error_name

log = logging.getLogger(__name__)

GROUP, TRANSACTION = 0, 1
NONE = 0
# answers a transactional client waits out (Kafka's TransactionManager retries them)
RETRIABLE = frozenset({7, 14, 15, 16, 19, 20, 51, 88})   # REQUEST_TIMED_OUT, COORDINATOR_*, NOT_ENOUGH_REPLICAS*,
                                                          # CONCURRENT_TRANSACTIONS, UNSTABLE_OFFSET_COMMIT
COORDINATOR_MOVED = frozenset({15, 16})
FENCED = frozenset({47, 49, 90})     # INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED


class TransactionError(UserError, RuntimeError):
    """A transaction could not be begun, filled or ended; the message names the transactional id and the fix."""


@dataclass(frozen=True)
class TxnHandle:
    """What ends a prepared transaction: its id, producer id and epoch (sent from executor to driver)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class _Coordinators:
    """Calls to a coordinator, retried through Kafka's retriable answers until delivery.timeout.ms."""

    def __init__(self, client: KafkaClient, config: ProducerConfig, transactional_id: str) -> None:
        self.client, self.config, self.transactional_id = client, config, transactional_id

    def call(self, what: str, key: str, key_type: int, api: int, body: Callable[[int], Any],
             errors: Callable[[Any], Iterable[int]]) -> Any:
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        last = ""
        while True:
            try:
                conn: BrokerConnection = self.client.coordinator_connection(key, key_type)
                version = conn.versions.get(api)
                if version is None:
                    raise TransactionError(f"pylog sink: {conn.address} does not answer {what}, which "
                                           "deliveryGuarantee=exactly-once needs (a Kafka 2.5+ broker)")
                answer = conn.call(api, version, body(version))
                codes = [c for c in errors(answer) if c != NONE]
                if not codes:
                    return answer
                code = codes[0]
                if code in FENCED:
                    raise TransactionError(
                        f"pylog sink: transactional id {self.transactional_id} was fenced ({error_name(code)}) "
                        f"during {what}: another producer took it over, or the transaction outlived "
                        f"kafka.transaction.timeout.ms; the batch is written again when the query restarts")
                if code not in RETRIABLE:
                    hint = ("; kafka.transaction.timeout.ms is above the broker's transaction.max.timeout.ms"
                            if code == 50 else "")
                    raise TransactionError(f"pylog sink: {what} for transactional id {self.transactional_id} "
                                           f"failed: {error_name(code)}{hint}")
                last = error_name(code)
                if code in COORDINATOR_MOVED:
                    self.client.close()
            except PartitionError as e:         # FindCoordinator: none yet
                last = error_name(e.code)
            except BrokerUnavailableError as e:
                last = str(e)
                self.client.close()
            if time.monotonic() > deadline:
                raise TransactionError(f"pylog sink: {what} for transactional id {self.transactional_id} did not "
                                       f"succeed within delivery.timeout.ms ({self.config.delivery_timeout_ms} ms): "
                                       f"{last}")
            time.sleep(self.config.retry_backoff_ms / 1000)


class Transaction:
    """One task's transaction: begun by `init`, filled through the task's ProduceClient, prepared by
    `handle` once every batch is acknowledged; the driver commits or aborts it (`end_transaction`)."""

    def __init__(self, producer: ProduceClient, transactional_id: str, timeout_ms: int) -> None:
        self.producer = producer
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self._calls = _Coordinators(producer.client, producer.config, transactional_id)
        self._added: set[TopicPartition] = set()
        self._offsets_added: set[str] = set()

    def init(self) -> None:
        """Take the transactional id (fencing any earlier holder) with a new epoch."""
        txn = self.transactional_id
        answer = self._calls.call(
            "InitProducerId", txn, TRANSACTION, ApiKey.INIT_PRODUCER_ID,
            lambda v: init_producer_id_request(v, self.timeout_ms, txn), lambda a: [a.error_code.value])
        self.producer.use_producer(txn, int(answer.producer_id), int(answer.producer_epoch))
        self._added.clear()
        self._offsets_added.clear()

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for the partitions not in the transaction yet (before their first batch)."""
        new = sorted(set(partitions) - self._added)
        if not new:
            return
        p = self.producer
        self._calls.call(
            "AddPartitionsToTxn", self.transactional_id, TRANSACTION, ApiKey.ADD_PARTITIONS_TO_TXN,
            lambda v: add_partitions_to_txn_request(v, self.transactional_id, p.producer_id, p.producer_epoch, new),
            lambda a: [r.partition_error_code.value for t in a.results_by_topic_v3_and_below
                       for r in t.results_by_partition])
        self._added.update(new)

    def committed_offset(self, group: str, tp: TopicPartition) -> Optional[int]:
        """The group's committed offset of `tp`, once no open transaction holds one back (None: none)."""
        answer = self._calls.call(
            "OffsetFetch", group, GROUP, ApiKey.OFFSET_FETCH,
            lambda v: offset_fetch_request(v, group, [tp], require_stable=True),
            lambda a: [a.error_code.value] + [p.error_code.value for t in a.topics for p in t.partitions])
        for t in answer.topics:
            for part in t.partitions:
                if (t.name, part.partition_index) == tp and part.committed_offset >= 0:
                    return int(part.committed_offset)
        return None

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, tuple[int, str]]) -> None:
        """Offsets of `group` committed with the transaction (AddOffsetsToTxn, then TxnOffsetCommit)."""
        p, txn = self.producer, self.transactional_id
        if group not in self._offsets_added:
            self._calls.call(
                "AddOffsetsToTxn", txn, TRANSACTION, ApiKey.ADD_OFFSETS_TO_TXN,
                lambda v: add_offsets_to_txn_request(v, txn, p.producer_id, p.producer_epoch, group),
                lambda a: [a.error_code.value])
            self._offsets_added.add(group)
        self._calls.call(
            "TxnOffsetCommit", group, GROUP, ApiKey.TXN_OFFSET_COMMIT,
            lambda v: txn_offset_commit_request(v, txn, group, p.producer_id, p.producer_epoch, offsets),
            lambda a: [part.error_code.value for t in a.topics for part in t.partitions])

    def handle(self) -> TxnHandle:
        return TxnHandle(self.transactional_id, self.producer.producer_id, self.producer.producer_epoch)


def end_transaction(config: ProducerConfig, handle: TxnHandle, commit: bool) -> None:
    """EndTxn for a transaction an executor prepared (the driver's commit or abort of a batch).
    Ending one already ended the same way is answered NONE by the coordinator, so a retry is safe."""
    client = KafkaClient(config.client())
    try:
        _Coordinators(client, config, handle.transactional_id).call(
            "EndTxn " + ("commit" if commit else "abort"), handle.transactional_id, TRANSACTION, ApiKey.END_TXN,
            lambda v: end_txn_request(v, handle.transactional_id, handle.producer_id, handle.producer_epoch, commit),
            lambda a: [a.error_code.value])
    finally:
        client.close()
