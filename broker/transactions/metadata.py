"""The state of one transactional id and its transitions (Kafka's TransactionMetadata), pure.

A transactional id has one producer id and epoch at a time, a state, the partitions of its open
transaction and its timeout. Every change is first computed as a new `TxnMetadata` (a transition),
written to `__transaction_state`, and only then made current (`TransactionCoordinator`): while a
transition is in flight (`pending`), other requests for the id are answered CONCURRENT_TRANSACTIONS.

States and transitions, as Kafka's:
  Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing
  Ongoing --EndTxn--> PrepareCommit | PrepareAbort --markers written--> CompleteCommit | CompleteAbort
  Empty / Complete* --InitProducerId--> Empty with the epoch bumped (a new producer id when exhausted)
  Ongoing --InitProducerId or timeout--> PrepareAbort with the epoch bumped (the old producer is fenced)
`lastProducerEpoch` remembers the epoch before a bump so that a producer's retried InitProducerId
(KIP-360) gets the same answer instead of being fenced. No I/O, no clock: callers pass `now_ms`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kafka_protocol.errors import ErrorCode
from kafka_protocol.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.IntEnum):
    """Kafka's states, with the numbers `__transaction_state` stores and the names tools print."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> "TxnState | None":
        for s in cls:
            if s.kafka_name.lower() == name.lower():
                return s
        return None


COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass(frozen=True)
class TxnMetadata:
    """One transactional id's state as `__transaction_state` stores it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1               # when the open transaction began (-1: none)
    last_update_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH   # in memory only: the epoch before the last bump

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1

    # --- transitions: each returns the metadata to write ------------------------------------------

    def init_producer(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> "TxnMetadata | int":
        """Empty/Complete*: bump the epoch for a (re)initialising producer; an int is an error code
        (PRODUCER_FENCED for a producer that is not the current one nor its retry)."""
        if expected_epoch is None:
            bumped, last = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            bumped, last = self.producer_epoch + 1, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            bumped, last = self.producer_epoch, self.last_producer_epoch      # a retry: same answer
        else:
            return ErrorCode.producer_fenced
        return replace(self, producer_epoch=bumped, last_producer_epoch=last, timeout_ms=timeout_ms,
                       state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1, last_update_ms=now_ms)

    def rotate_producer_id(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                           recovering: bool) -> "TxnMetadata":
        """The epoch is exhausted: a new producer id at epoch 0."""
        return replace(self, producer_id=new_producer_id, producer_epoch=0,
                       last_producer_epoch=self.producer_epoch if recovering else NO_PRODUCER_EPOCH,
                       timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1,
                       last_update_ms=now_ms)

    def add_partitions(self, partitions: frozenset[TopicPartition], now_ms: int) -> "TxnMetadata":
        start = now_ms if self.state in (TxnState.EMPTY, *COMPLETE) else self.start_ms
        return replace(self, state=TxnState.ONGOING, partitions=self.partitions | partitions, start_ms=start,
                       last_update_ms=now_ms)

    def prepare_end(self, commit: bool, now_ms: int, epoch: int | None = None) -> "TxnMetadata":
        """Ongoing -> PrepareCommit/PrepareAbort; `epoch` bumps it (a fencing or timeout abort)."""
        bumped = {} if epoch is None else {"producer_epoch": epoch, "last_producer_epoch": NO_PRODUCER_EPOCH}
        return replace(self, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                       last_update_ms=now_ms, **bumped)   # type: ignore[arg-type]

    def complete(self, now_ms: int) -> "TxnMetadata":
        """Prepare* -> Complete*, once every partition has its marker."""
        done = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return replace(self, state=done, partitions=frozenset(), last_update_ms=now_ms)

    def fenced_epoch(self) -> int:
        """The epoch an abort that fences the current producer writes (not bumped past the maximum)."""
        return self.producer_epoch if self.producer_epoch >= MAX_EPOCH else self.producer_epoch + 1
