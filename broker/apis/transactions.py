"""Transaction APIs (KIP-98, KIP-664, KIP-890): decode → `ctx.transactions` / the logs → encode.

InitProducerId (with or without a transactional id), AddPartitionsToTxn (v4: a leader's verify-only
batch), AddOffsetsToTxn, EndTxn, TxnOffsetCommit (the group coordinator stores the pending offsets),
WriteTxnMarkers, DescribeTransactions, ListTransactions and DescribeProducers. PRODUCER_FENCED is
answered as INVALID_PRODUCER_EPOCH to the versions before KIP-588 added it, as Kafka does.
Holds no state. With ACLs, Kafka's checks: WRITE on the transactional id for every transactional call
(an idempotent InitProducerId: IDEMPOTENT_WRITE on the cluster or WRITE on some topic), WRITE on each
topic added, READ on the group whose offsets join a transaction and on their topics, CLUSTER_ACTION for
the brokers' WriteTxnMarkers and AddPartitionsToTxn v4, DESCRIBE on what is described or listed, READ on
the topics whose producers are described.
"""
from __future__ import annotations

from typing import Any

from broker.apis.common import error_result, field
from broker.context import BrokerContext
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.markers import write_markers
from broker.transactions.metadata import MAX_EPOCH, TxnState
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build, ms
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.control_records import Marker
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kafka_protocol.topic_partition import TopicPartition

E = ErrorCode

# the first version of each API that may carry PRODUCER_FENCED (KIP-588); older ones get INVALID_PRODUCER_EPOCH
_FENCED_SINCE = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2,
                 ApiKey.END_TXN: 2, ApiKey.TXN_OFFSET_COMMIT: 3}


def _coordinator(ctx: BrokerContext) -> TransactionCoordinator:
    assert ctx.transactions is not None, "the transaction coordinator is not running"
    return ctx.transactions


def _for_version(req: Request, error: ErrorCode) -> ErrorCode:
    if error == E.producer_fenced and req.api_version < _FENCED_SINCE[ApiKey(req.api_key)]:
        return E.invalid_producer_epoch
    return error


def _response(req: Request, values: dict[str, Any]) -> Any:
    return build(response_schema(req.api_key, req.api_version), {"throttle_time": 0, **values})


def _txn_ok(ctx: BrokerContext, txn_id: str | None, operation: AclOperation = AclOperation.WRITE) -> bool:
    return txn_id is not None and ctx.authorized(operation, ResourceType.TRANSACTIONAL_ID, txn_id)


def _cluster_action(ctx: BrokerContext) -> bool:
    return ctx.authorized(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)


async def handle_init_producer_id(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    pid, epoch = field(body, "producer_id", -1), field(body, "producer_epoch", -1)
    if body.transactional_id is not None and not _txn_ok(ctx, body.transactional_id):
        return _response(req, {"error_code": E.transactional_id_authorization_failed, "producer_id": -1,
                               "producer_epoch": -1})
    if body.transactional_id is None and not (
            ctx.authorized(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False)
            or ctx.authorized_any(AclOperation.WRITE, ResourceType.TOPIC)):
        return _response(req, {"error_code": E.cluster_authorization_failed, "producer_id": -1, "producer_epoch": -1})
    if body.transactional_id is None:
        if pid >= 0 and 0 <= epoch < MAX_EPOCH:
            # KIP-360: an idempotent producer bumping its own epoch after an error
            return _response(req, {"error_code": E.none, "producer_id": pid, "producer_epoch": epoch + 1})
        return _response(req, {"error_code": E.none, "producer_id": ctx.producer_ids.next_id(), "producer_epoch": 0})
    result = await _coordinator(ctx).init_producer_id(body.transactional_id, ms(body.transaction_timeout), pid, epoch)
    return _response(req, {"error_code": _for_version(req, result.error), "producer_id": result.producer_id,
                           "producer_epoch": result.producer_epoch})


def _unknown_partitions(ctx: BrokerContext, partitions: list[TopicPartition]) -> set[TopicPartition]:
    unknown = set()
    for topic, partition in partitions:
        info = ctx.replicas.registry.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            unknown.add((topic, partition))
    return unknown


def _by_topic(results: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": error})
    return [{"name": name, "results_by_partition": parts} for name, parts in topics.items()]


async def _add_partitions(ctx: BrokerContext, req: Request, txn_id: str, pid: int, epoch: int, topics: Any,
                          verify_only: bool = False) -> dict[TopicPartition, ErrorCode]:
    partitions = [(t.name, p) for t in topics for p in t.partitions]
    if not _txn_ok(ctx, txn_id):
        return {tp: E.transactional_id_authorization_failed for tp in partitions}
    denied = {t.name for t in topics if not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, t.name)}
    unknown = _unknown_partitions(ctx, [tp for tp in partitions if tp[0] not in denied])
    if denied or unknown:   # Kafka's rule: nothing is added, the others are OPERATION_NOT_ATTEMPTED
        return {tp: E.topic_authorization_failed if tp[0] in denied else E.unknown_topic_or_partition
                if tp in unknown else E.operation_not_attempted for tp in partitions}
    coordinator = _coordinator(ctx)
    if verify_only:
        return {tp: coordinator.verify_partition(txn_id, pid, epoch, tp) for tp in partitions}
    error = _for_version(req, await coordinator.add_partitions(txn_id, pid, epoch, partitions))
    return {tp: error for tp in partitions}


async def handle_add_partitions_to_txn(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if req.api_version <= 3:
        results = await _add_partitions(ctx, req, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                        body.v3_and_below_producer_epoch, body.v3_and_below_topics)
        return _response(req, {"results_by_topic_v3_and_below": _by_topic(results)})
    if not _cluster_action(ctx):      # v4 is the brokers' (KIP-890)
        return _response(req, {"error_code": E.cluster_authorization_failed, "results_by_transaction": []})
    out = []
    for txn in body.transactions:
        results = await _add_partitions(ctx, req, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                        txn.topics, txn.verify_only)
        out.append({"transactional_id": txn.transactional_id, "topic_results": _by_topic(results)})
    return _response(req, {"error_code": E.none, "results_by_transaction": out})


async def handle_add_offsets_to_txn(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if not _txn_ok(ctx, body.transactional_id):
        return _response(req, {"error_code": E.transactional_id_authorization_failed})
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _response(req, {"error_code": E.group_authorization_failed})
    coordinator = _coordinator(ctx)
    tp = coordinator.offsets_partition(body.group_id)
    error = await coordinator.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch, [tp])
    return _response(req, {"error_code": _for_version(req, error)})


async def handle_end_txn(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if not _txn_ok(ctx, body.transactional_id):
        return _response(req, {"error_code": E.transactional_id_authorization_failed})
    error = await _coordinator(ctx).end_txn(body.transactional_id, body.producer_id, body.producer_epoch,
                                            body.committed)
    return _response(req, {"error_code": _for_version(req, error)})


def handle_txn_offset_commit(ctx: BrokerContext, req: Request) -> Any:
    """TxnOffsetCommit, after KIP-890's check that AddOffsetsToTxn added the group's partition to the
    transaction (asked of the transaction's coordinator when it is on another broker)."""
    body = req.body
    if not _txn_ok(ctx, body.transactional_id):
        return _txn_offset_commit(ctx, req, E.transactional_id_authorization_failed)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _txn_offset_commit(ctx, req, E.group_authorization_failed)
    coordinator = _coordinator(ctx)
    if coordinator.coordinated_here(body.transactional_id):
        return _txn_offset_commit(ctx, req, coordinator.verify_offsets(
            body.transactional_id, body.group_id, body.producer_id, body.producer_epoch))
    return _txn_offset_commit_verified_elsewhere(ctx, req)


async def _txn_offset_commit_verified_elsewhere(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    coordinator = _coordinator(ctx)
    tp = coordinator.offsets_partition(body.group_id)
    answers = await coordinator.verify_elsewhere(body.transactional_id, body.producer_id, body.producer_epoch, [tp])
    return _txn_offset_commit(ctx, req, answers.get(tp, E.not_enough_replicas))


def _txn_offset_commit(ctx: BrokerContext, req: Request, refused: ErrorCode) -> Any:
    body = req.body
    assert ctx.groups is not None, "the group coordinator is not running"
    offsets: dict[TopicPartition, tuple[int, int, str | None]] = {}
    for t in body.topics:
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = (
                p.committed_offset, field(p, "committed_leader_epoch", -1), p.committed_metadata)
    if refused != E.none:
        results: dict[TopicPartition, int] = {tp: refused for tp in offsets}
    else:
        denied = {t for t, _ in offsets if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t)}
        results = {tp: E.topic_authorization_failed for tp in offsets if tp[0] in denied}
        allowed = {tp: o for tp, o in offsets.items() if tp[0] not in denied}
        if allowed:
            results.update(ctx.groups.txn_commit_offsets(
                body.group_id, body.producer_id, body.producer_epoch, field(body, "generation_id", -1),
                field(body, "member_id", ""), field(body, "group_instance_id", None), allowed))
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "error_code": _for_version(req, ErrorCode(error))})
    return _response(req, {"topics": [{"name": n, "partitions": parts} for n, parts in topics.items()]})


def handle_write_txn_markers(ctx: BrokerContext, req: Request) -> Any:
    hook = ctx.groups.on_txn_marker if ctx.groups is not None else None
    allowed = _cluster_action(ctx)
    out = []
    for m in req.body.markers:
        marker = Marker(m.producer_id, m.producer_epoch, bool(m.transaction_result), m.coordinator_epoch)
        partitions = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        results = write_markers(ctx.replicas, marker, partitions, hook) if allowed else \
            {tp: E.cluster_authorization_failed for tp in partitions}
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), error in results.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
        out.append({"producer_id": m.producer_id,
                    "topics": [{"name": n, "partitions": parts} for n, parts in topics.items()]})
    return build(response_schema(req.api_key, req.api_version), {"markers": out})


def handle_describe_transactions(ctx: BrokerContext, req: Request) -> Any:
    coordinator = _coordinator(ctx)
    states = []
    for txn_id in req.body.transactional_ids:
        found = coordinator.describe(txn_id)
        entry: dict[str, Any] = {"transactional_id": txn_id, "error_code": E.none, "transaction_state": "",
                                 "transaction_timeout": 0, "transaction_start_time": 0, "producer_id": 0,
                                 "producer_epoch": 0, "topics": []}     # Kafka's values for an error
        if not _txn_ok(ctx, txn_id, AclOperation.DESCRIBE):
            entry["error_code"] = E.transactional_id_authorization_failed
        elif isinstance(found, int):
            entry["error_code"] = found
        else:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(found.partitions):
                if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_if_denied=False):
                    by_topic.setdefault(topic, []).append(partition)
            entry.update(transaction_state=found.state.kafka_name, transaction_timeout=found.timeout_ms,
                         transaction_start_time=found.start_ms, producer_id=found.producer_id,
                         producer_epoch=found.producer_epoch,
                         topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        states.append(entry)
    return _response(req, {"transaction_states": states})


def handle_list_transactions(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    unknown = [s for s in body.state_filters if TxnState.from_kafka_name(s) is None]
    duration = field(body, "duration_filter", -1)
    found = _coordinator(ctx).list(body.state_filters, body.producer_id_filters,
                                   duration if isinstance(duration, int) else ms(duration))
    return _response(req, {"error_code": E.none, "unknown_state_filters": unknown, "transaction_states": [
        {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
         "transaction_state": m.state.kafka_name} for m in found
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id, False)]})


def handle_describe_producers(ctx: BrokerContext, req: Request) -> Any:
    topics = []
    for t in req.body.topics:
        parts = []
        allowed = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.name)
        for p in t.partition_indexes:
            entry: dict[str, Any] = {"partition_index": p, "error_code": E.none, "error_message": None,
                                     "active_producers": []}
            if not allowed:
                entry.update(error_code=E.topic_authorization_failed, error_message="Topic authorization failed.")
                parts.append(entry)
                continue
            try:
                plog = ctx.replicas.leader_log(t.name, p)
                entry["active_producers"] = [
                    {"producer_id": e.producer_id, "producer_epoch": e.epoch,
                     "last_sequence": e.last_seq if e.last_seq is not None else -1,
                     "last_timestamp": e.last_timestamp,
                     "coordinator_epoch": e.coordinator_epoch,
                     "current_txn_start_offset": -1 if e.txn_first_offset is None else e.txn_first_offset}
                    for e in plog.producers.producers.values()]
            except Exception as exc:  # noqa: BLE001 - per-partition error
                entry["error_code"], entry["error_message"] = error_result(exc)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return _response(req, {"topics": topics})
