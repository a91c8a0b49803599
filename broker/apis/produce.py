"""Produce: append each partition's record batches (opaque bytes) and report their offsets.

acks=0 gets no response, as in Kafka. With one replica, acks=1 and acks=-1 both answer once the
batches are written to the segment file (they then survive a killed broker process). In cluster
mode acks=-1 answers once every in-sync replica has the batches (the high watermark passed them),
or with REQUEST_TIMED_OUT after the request's timeout, NOT_LEADER_OR_FOLLOWER if leadership moved
meanwhile, NOT_ENOUGH_REPLICAS(_AFTER_APPEND) when the ISR is below min.insync.replicas. The request
body comes from `protocol.produce_codec` (record sets are views of the request frame, valid for
this call only) and the response is encoded there too, straight to frame bytes.

With ACLs (Kafka's checks): a request carrying transactional batches needs WRITE on its transactional id
(every partition is refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise), and each topic WRITE
(TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

import asyncio
from typing import Any, Coroutine

from broker.apis.common import error_result
from broker.context import BrokerContext
from kafka_protocol.errors import DuplicateSequenceError, ErrorCode, InvalidRecordError, KafkaError, RecordValidationError
from kafka_protocol.record_batch import HEADER_SIZE, BatchHeader, parse_header, single_batch
from kafka_protocol.builder import ms
from kafka_protocol.codec import Request
from kafka_protocol.produce_codec import PartitionResult, encode_produce_response
from kafka_protocol.security.acls import AclOperation, ResourceType

VALID_ACKS = (0, 1, -1)


def _append_one(ctx: BrokerContext, topic: str, index: int, records: bytes | memoryview | None,
                acks: int) -> PartitionResult:
    try:
        if not records:
            raise InvalidRecordError("Produce request carries no records")
        if not single_batch(records):
            raise InvalidRecordError("Produce requests of version 3 and above must carry exactly one record batch "
                                     "per partition")
        r = ctx.replicas.append(topic, index, records, acks)
        ctx.metrics.produced(topic, r.last_offset - r.base_offset + 1, len(records))
        return PartitionResult(index, ErrorCode.none, r.base_offset, r.log_append_time_ms, r.log_start_offset,
                               end_offset=r.last_offset + 1)
    except DuplicateSequenceError as e:
        return PartitionResult(index, e.code, e.base_offset, e.log_append_time, error_message=str(e))
    except RecordValidationError as e:
        return PartitionResult(index, e.code, log_start_offset=_log_start(ctx, topic, index), error_message=str(e),
                               record_errors=e.record_errors)
    except KafkaError as e:
        return PartitionResult(index, e.code, error_message=str(e),
                               log_start_offset=_log_start(ctx, topic, index) if e.from_validator else -1)
    except Exception as e:  # noqa: BLE001 - every failure becomes this partition's error code
        code, message = error_result(e)
        return PartitionResult(index, code, error_message=message)


def _unverified(ctx: BrokerContext, transactional_id: str | None, topic: str, index: int,
                records: bytes | memoryview | None) -> PartitionResult | None:
    """KIP-890 part 1: a transactional batch that would open a transaction in this partition is
    refused unless the coordinator added the partition to its producer's transaction."""
    h = _transactional_header(records)
    if h is None:
        return None
    if transactional_id is None:
        return PartitionResult(index, ErrorCode.transactional_id_authorization_failed,
                               error_message="a transactional batch needs the request's transactional id")
    if (ctx.transactions is None or not ctx.config["transaction.partition.verification.enable"]
            or not ctx.transactions.coordinated_here(transactional_id)):
        return None         # coordinated on another broker: checked before (`_verify_elsewhere`)
    try:
        plog = ctx.replicas.leader_log(topic, index)
    except KafkaError:
        return None      # the append answers for an unknown partition or a moved leader
    if h.producer_id in plog.producers.ongoing:
        return None
    error = ctx.transactions.verify_partition(transactional_id, h.producer_id, h.producer_epoch, (topic, index))
    if error == ErrorCode.none:
        return None
    return PartitionResult(index, error, error_message=f"{topic}-{index} is not part of the open transaction of "
                                                       f"transactional id {transactional_id}")


def _transactional_header(records: bytes | memoryview | None) -> BatchHeader | None:
    if not records or len(records) < HEADER_SIZE:
        return None
    h = parse_header(records)
    return h if h.is_transactional else None


def _log_start(ctx: BrokerContext, topic: str, index: int) -> int:
    """The partition's log start offset, which Kafka gives with per-record errors (-1 if no such partition)."""
    try:
        return ctx.replicas.partition(topic, index).log_start_offset
    except Exception:  # noqa: BLE001 - unknown topic or partition
        return -1


def handle(ctx: BrokerContext, req: Request) -> bytes | None | Coroutine[Any, Any, bytes | None]:
    body = req.body
    refused = _unauthorized(ctx, body)
    remote = {tp: p for tp, p in _verify_elsewhere(ctx, body).items() if tp not in refused}
    if remote:
        return _verified_then_appended(ctx, req, remote, refused)
    return _produce(ctx, req, refused)


def _unauthorized(ctx: BrokerContext, body: Any) -> dict[tuple[str, int], PartitionResult]:
    """The partitions the principal may not write (nothing without ACLs)."""
    if ctx.authorizer is None:
        return {}
    transactional = any(_transactional_header(pd.records) is not None for t in body.topic_data
                        for pd in t.partition_data)
    if transactional and (body.transactional_id is None or not ctx.authorized(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id)):
        return {(t.name, pd.index): PartitionResult(pd.index, ErrorCode.transactional_id_authorization_failed)
                for t in body.topic_data for pd in t.partition_data}
    return {(t.name, pd.index): PartitionResult(pd.index, ErrorCode.topic_authorization_failed)
            for t in body.topic_data if not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, t.name)
            for pd in t.partition_data}


def _produce(ctx: BrokerContext, req: Request, refused: dict[tuple[str, int], PartitionResult],
             ) -> bytes | None | Coroutine[Any, Any, bytes]:
    """Append every partition's batches (those in `refused` get that answer instead) and respond."""
    body = req.body
    acks = body.acks
    responses = []
    for topic in body.topic_data:
        parts = []
        for pd in topic.partition_data:
            if acks not in VALID_ACKS:
                parts.append(PartitionResult(pd.index, ErrorCode.invalid_required_acks,
                                             error_message=f"acks must be one of 0, 1, -1; got {acks}"))
            else:
                no = refused.get((topic.name, pd.index)) or _unverified(ctx, body.transactional_id, topic.name,
                                                                         pd.index, pd.records)
                parts.append(no or _append_one(ctx, topic.name, pd.index, pd.records, acks))
        responses.append((topic.name, parts))
    ctx.metrics.partition_errors("Produce", (p.error_code for _, parts in responses for p in parts))
    if acks == 0:
        return None
    if acks == -1 and ctx.replicas.replication is not None:
        waits = _replication_waits(ctx, responses, ms(body.timeout))
        if waits:
            return _when_replicated(req, responses, waits)
    return encode_produce_response(req.api_version, req.correlation_id, responses)


def _verify_elsewhere(ctx: BrokerContext, body: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """Cluster mode, KIP-890: the partitions whose first transactional batch of a transaction must be
    checked with a coordinator on another broker ((topic, partition) -> (producer id, epoch))."""
    txn_id = body.transactional_id
    if (txn_id is None or ctx.transactions is None or ctx.transactions.coordinated_here(txn_id)
            or not ctx.config["transaction.partition.verification.enable"]):
        return {}
    out = {}
    for topic in body.topic_data:
        for pd in topic.partition_data:
            h = _transactional_header(pd.records)
            if h is None:
                continue
            try:
                if h.producer_id in ctx.replicas.leader_log(topic.name, pd.index).producers.ongoing:
                    continue
            except KafkaError:
                continue            # the append answers for an unknown partition or a moved leader
            out[(topic.name, pd.index)] = (h.producer_id, h.producer_epoch)
    return out


async def _verified_then_appended(ctx: BrokerContext, req: Request, remote: dict[tuple[str, int], tuple[int, int]],
                                  refused: dict[tuple[str, int], PartitionResult]) -> bytes | None:
    """Ask the coordinator about `remote`'s partitions, then append (the record sets are copied first: the
    request's frame is only valid during the handler's call)."""
    for topic in req.body.topic_data:
        for pd in topic.partition_data:
            if pd.records is not None:
                pd.records = bytes(pd.records)
    assert ctx.transactions is not None
    txn_id = req.body.transactional_id
    refused = dict(refused)
    by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for tp, producer in remote.items():
        by_producer.setdefault(producer, []).append(tp)
    for (pid, epoch), tps in by_producer.items():
        for (topic, index), error in (await ctx.transactions.verify_elsewhere(txn_id, pid, epoch, tps)).items():
            if error != ErrorCode.none:
                refused[(topic, index)] = PartitionResult(
                    index, error, error_message=f"{topic}-{index} is not part of the open transaction of "
                                                f"transactional id {txn_id}")
    result = _produce(ctx, req, refused)
    return await result if asyncio.iscoroutine(result) else result


def _replication_waits(ctx: BrokerContext, responses: list[tuple[str, list[PartitionResult]]], timeout_ms: int,
                       ) -> list[tuple[PartitionResult, "asyncio.Future[None]"]]:
    """The appended partitions whose in-sync replicas do not all have the records yet."""
    waits = []
    for topic, parts in responses:
        for part in parts:
            if part.error_code != ErrorCode.none or part.end_offset < 0:
                continue
            try:
                fut = ctx.replicas.wait_replicated(topic, part.index, part.end_offset, timeout_ms)
            except KafkaError as e:
                _fail(part, e)
                continue
            if fut is not None:
                waits.append((part, fut))
    return waits


def _fail(part: PartitionResult, e: KafkaError) -> None:
    part.error_code, part.error_message, part.base_offset = e.code, str(e), -1


async def _when_replicated(req: Request, responses: list[tuple[str, list[PartitionResult]]],
                           waits: list[tuple[PartitionResult, "asyncio.Future[None]"]]) -> bytes:
    for part, fut in waits:
        try:
            await fut
        except KafkaError as e:
            _fail(part, e)
    return encode_produce_response(req.api_version, req.correlation_id, responses)
