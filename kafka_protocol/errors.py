"""Kafka error codes and the exceptions that carry them: the one place errors become codes.

Every layer (storage, cluster metadata, API handlers) raises a `KafkaError` subclass; the API
handlers turn any exception into a wire error code with `error_code_of`. Nothing else in the
broker maps exceptions to numbers. Every class here is raised somewhere (the group coordinator
answers with codes directly, as its state machine decides them); add a class when code raises it.
"""
from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error_code_of"]

log = logging.getLogger(__name__)


class KafkaError(Exception):
    """An error with a Kafka error code. `str(e)` is the human-readable message sent to clients."""

    code: ErrorCode = ErrorCode.unknown_server_error
    # Found by the record validator (Kafka's LogValidator), whose rejections Kafka answers with the
    # partition's log start offset; request-level rejections carry -1.
    from_validator: bool = False

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = code


class CorruptRecordError(KafkaError):
    code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    code = ErrorCode.invalid_record


class RecordValidationError(KafkaError):
    """Records rejected one by one (KIP-467): the code of the first, and every (record index, message)."""

    from_validator = True

    def __init__(self, code: ErrorCode, record_errors: list[tuple[int, str]], message: str) -> None:
        super().__init__(message, code)
        self.record_errors = record_errors


class UnsupportedMessageFormatError(KafkaError):
    """Message format v0/v1 (magic < 2): pylog stores record batch v2 only."""

    code = ErrorCode.unsupported_for_message_format


class MessageTooLargeError(KafkaError):
    code = ErrorCode.message_too_large


class RecordListTooLargeError(KafkaError):
    code = ErrorCode.record_list_too_large


class OffsetOutOfRangeError(KafkaError):
    code = ErrorCode.offset_out_of_range


class OffsetMovedToTieredStorageError(KafkaError):
    """The offset is below the local log start of a tiered partition: it is served from remote storage."""
    code = ErrorCode.offset_moved_to_tiered_storage


class KafkaStorageError(KafkaError):
    """A storage failure the client retries: a remote segment the object store did not give in time."""
    code = ErrorCode.kafka_storage_error


class UnknownTopicOrPartitionError(KafkaError):
    code = ErrorCode.unknown_topic_or_partition


class InvalidTopicError(KafkaError):
    code = ErrorCode.invalid_topic_exception


class TopicAuthorizationError(KafkaError):
    code = ErrorCode.topic_authorization_failed


class ClusterAuthorizationError(KafkaError):
    code = ErrorCode.cluster_authorization_failed


class TopicAlreadyExistsError(KafkaError):
    code = ErrorCode.topic_already_exists


class InvalidPartitionsError(KafkaError):
    code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(KafkaError):
    code = ErrorCode.invalid_replication_factor


class InvalidConfigError(KafkaError):
    code = ErrorCode.invalid_config


class PolicyViolationError(KafkaError):
    """A request the broker's limits forbid (partitions per request, max.broker.partitions)."""

    code = ErrorCode.policy_violation


class InvalidRequestError(KafkaError):
    code = ErrorCode.invalid_request


class OutOfOrderSequenceError(KafkaError):
    code = ErrorCode.out_of_order_sequence_number


class DuplicateSequenceError(KafkaError):
    """A retried batch that is already in the log. Carries the offsets it was first written at."""

    code = ErrorCode.duplicate_sequence_number

    def __init__(self, message: str, base_offset: int, log_append_time: int = -1) -> None:
        super().__init__(message)
        self.base_offset = base_offset
        self.log_append_time = log_append_time


class UnexpectedAppendOffsetError(KafkaError):
    """A follower's append of batches copied from the leader does not start at its log end offset
    (Kafka's UnexpectedAppendOffsetException: an internal error, UNKNOWN_SERVER_ERROR on the wire)."""

    def __init__(self, message: str, first_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class UnknownLeaderEpochError(KafkaError):
    """The client knows a newer leader epoch than this broker's (KIP-320)."""

    code = ErrorCode.unknown_leader_epoch


class FencedLeaderEpochError(KafkaError):
    """The client's leader epoch is older than this broker's (KIP-320)."""

    code = ErrorCode.fenced_leader_epoch


class InvalidProducerEpochError(KafkaError):
    code = ErrorCode.invalid_producer_epoch


class TopicDeletionDisabledError(KafkaError):
    code = ErrorCode.topic_deletion_disabled


def error_code_of(exc: BaseException) -> ErrorCode:
    """The wire error code for any exception; unexpected ones are logged and become UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, KafkaError):
        return exc.code
    if isinstance(exc, OSError):
        log.error("storage error: %s", exc)
        return ErrorCode.kafka_storage_error
    log.exception("unexpected error", exc_info=exc)
    return ErrorCode.unknown_server_error


class InvalidReplicaAssignmentError(KafkaError):
    code = ErrorCode.invalid_replica_assignment


class UnknownTopicIdError(KafkaError):
    code = ErrorCode.unknown_topic_id


# --- Consumer groups (broker/groups) ---------------------------------------------------------




# ---------------------------------------------------------------- cluster mode (replication)

class NotLeaderOrFollowerError(KafkaError):
    """This broker does not lead the partition (any more): the client refreshes its metadata."""

    code = ErrorCode.not_leader_or_follower


class LeaderNotAvailableError(KafkaError):
    """The partition has no live leader right now (an election is under way, or every ISR replica is down)."""

    code = ErrorCode.leader_not_available


class NotEnoughReplicasError(KafkaError):
    """acks=all with fewer in-sync replicas than min.insync.replicas: nothing was written."""

    code = ErrorCode.not_enough_replicas


class NotEnoughReplicasAfterAppendError(KafkaError):
    """acks=all: written by the leader, but the ISR shrank below min.insync.replicas before it was replicated."""

    code = ErrorCode.not_enough_replicas_after_append


class RequestTimedOutError(KafkaError):
    """acks=all: the in-sync replicas did not all have the records within the request's timeout."""

    code = ErrorCode.request_timed_out


class ReplicaNotAvailableError(KafkaError):
    code = ErrorCode.replica_not_available


class NotControllerError(KafkaError):
    code = ErrorCode.not_controller


class OffsetNotAvailableError(KafkaError):
    """KIP-207: a new leader whose high watermark has not yet reached its epoch's start answers
    ListOffsets with this (retriable) rather than an offset that could go backwards."""

    code = ErrorCode.offset_not_available


class InvalidTxnStateError(KafkaError):
    """A produce or marker that the producer's transaction state forbids (KIP-98), or a transactional
    produce to a partition not yet added to the transaction (KIP-890 part 1)."""

    code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedError(KafkaError):
    """A transaction marker from a coordinator older than one this partition has seen."""

    code = ErrorCode.transaction_coordinator_fenced
