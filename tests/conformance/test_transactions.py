"""Transactions (KIP-98) on pylog and on Apache Kafka 3.9: the same sequences, the same observations.

Each scenario is a function `scenario(send, seen)` that runs a whole sequence on ONE broker through
`send` (a kio request entity in, the decoded response out; its own connection): its own topics,
transactional ids and groups (the same names on both brokers), recording with `seen(label, value)`
what a client can observe: error code names, offsets, high watermarks and last stable offsets, the
batches a Fetch returns (values, control markers), `aborted_transactions` of read_committed Fetches
(isolation_level=1), what a read_committed consumer would hand the application, ListOffsets latest
under read_committed, what DescribeTransactions, ListTransactions and DescribeProducers report.
Producer ids differ between brokers, so they are observed only relatively: the first producer id a
scenario meets is "pid#1", the next new one "pid#2" (same label, same id); likewise a
__consumer_offsets partition is named by its group (the brokers have different partition counts),
a marker's timestamp (the coordinator's clock) is "now".

Request versions are those Kafka 3.9's clients send: InitProducerId v4, AddPartitionsToTxn v3 (v1 once,
for its older fencing error), AddOffsetsToTxn v3, EndTxn v3, TxnOffsetCommit v3, Produce v9, Fetch v12,
ListOffsets v7, OffsetFetch v8 (require_stable), DescribeTransactions v0, ListTransactions v0 and v1,
DescribeProducers v0.

A test runs its scenario on Kafka first, asserts the key expectations on Kafka's answers (each
test is meaningful on its own: it states what Kafka 3.9 does), then runs it on pylog and asserts
the two lists are equal (the differing labels are named in the failure).

Retries: like Kafka's clients, requests to the transaction coordinator are repeated while it
answers COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
CONCURRENT_TRANSACTIONS (Kafka answers the last one while it writes the markers of the previous
transaction, for up to a few hundred ms); only the final answer is observed, except where the
first answer itself is the point (a second InitProducerId during a transaction). Waiting for
markers (the LSO reaching the high watermark, a transaction becoming CompleteCommit, a stable
offset) polls with a deadline and observes the value it settled on.

PYLOG_CONFORMANCE_KAFKA_ONLY=1 runs only the Kafka half (the expectations on Kafka's answers),
skipping pylog: useful to check the scenarios themselves, or while pylog lacks an API.

The transaction-timeout scenario waits for Kafka's timed-out-transaction sweep
(transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by default, which the test
peer keeps): up to ~25 s, marked slow.
"""
from __future__ import annotations

import datetime
import os
import struct
import time
import uuid
from typing import Any, Callable

import pytest
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v1.request import AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV1
from kio.schema.add_partitions_to_txn.v1.request import AddPartitionsToTxnTopic as AddPartitionsToTxnTopicV1
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.list_transactions.v0.request import ListTransactionsRequest as ListTransactionsRequestV0
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

from tests.support.batches import decode_batches, encode_batch, transactional_batch
from tests.support.differential import Pair
from tests.support.wire import WireClient

KAFKA_ONLY = os.environ.get("PYLOG_CONFORMANCE_KAFKA_ONLY", "") not in ("", "0")

Send = Callable[[Any], Any]
TIMEOUT = datetime.timedelta(seconds=30)
TXN_TIMEOUT = datetime.timedelta(seconds=60)       # what a producer asks for by default (transaction.timeout.ms)
# record timestamps: the same on both brokers, a day old (far from any retention, never mistaken for a marker's
# wall-clock timestamp)
TS = (int(time.time()) - 86_400) * 1000

LOADING = frozenset({ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
                     ErrorCode.coordinator_load_in_progress})
RETRIABLE = LOADING | {ErrorCode.concurrent_transactions}


# --- the harness ------------------------------------------------------------------------------------

class Observed:
    """What one scenario saw on one broker: (label, value) pairs, producer ids made relative."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []
        self._pids: dict[int, str] = {}

    def __call__(self, label: str, value: Any) -> Any:
        assert label not in dict(self.items), f"label {label!r} observed twice"
        self.items.append((label, value))
        return value

    def pid(self, producer_id: int) -> str | int:
        """A producer id as "pid#N", N the order in which this scenario first met it (-1 stays -1)."""
        if producer_id < 0:
            return producer_id
        return self._pids.setdefault(producer_id, f"pid#{len(self._pids) + 1}")


Scenario = Callable[[Send, Observed], None]


class _Connection:
    """One broker's raw connection for a scenario (reopened when the broker closes it)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.client: WireClient | None = None

    def send(self, request: Any) -> Any:
        if self.client is None:
            self.client = WireClient("127.0.0.1", self.port, timeout=30)
        response = self.client.request(request)
        if response is None:
            self.close()
        return response

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


def _run(pair: Pair, broker: str, scenario: Scenario) -> dict[str, Any]:
    seen = Observed()
    connection = _Connection(pair.ports[broker])
    try:
        scenario(connection.send, seen)
    except Exception as e:
        if broker == "kafka":
            raise
        last = seen.items[-1][0] if seen.items else "nothing"
        raise AssertionError(f"on pylog the scenario broke after observing {last!r}: {e!r}\n"
                             f"observed so far: {seen.items!r}") from e
    finally:
        connection.close()
    return dict(seen.items)


def run_on_kafka(pair: Pair, scenario: Scenario) -> dict[str, Any]:
    """The scenario's observations on Apache Kafka (the test asserts its expectations on them, then calls
    `same_on_pylog`)."""
    return _run(pair, "kafka", scenario)


def same_on_pylog(pair: Pair, scenario: Scenario, kafka: dict[str, Any]) -> None:
    """Run the scenario on pylog and assert it observes exactly what Kafka did (skipped with
    PYLOG_CONFORMANCE_KAFKA_ONLY=1)."""
    if KAFKA_ONLY:
        return
    pylog = _run(pair, "pylog", scenario)
    diff = [f"{k}: pylog {pylog.get(k, '<absent>')!r}, Kafka {kafka.get(k, '<absent>')!r}"
            for k in list(kafka) + [k for k in pylog if k not in kafka] if pylog.get(k, "<absent>") != kafka.get(k, "<absent>")]
    assert not diff, "pylog and Kafka differ:\n  " + "\n  ".join(diff)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- requests ---------------------------------------------------------------------------------------

def _retry(send: Send, request: Any, errors: Callable[[Any], list[ErrorCode]],
           retriable: frozenset[ErrorCode] = RETRIABLE, timeout: float = 30.0) -> Any:
    """Send `request` until none of its errors is retriable (as Kafka's producer does); the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        response = send(request)
        if response is None or not set(errors(response)) & retriable or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def _wait(send: Send, request: Any, ready: Callable[[Any], bool], timeout: float = 15.0) -> Any:
    """Send `request` until `ready(response)` or the deadline; the last answer (observed as it is)."""
    deadline = time.monotonic() + timeout
    while True:
        response = send(request)
        if response is None or ready(response) or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def create_topic(send: Send, name: str, partitions: int = 2) -> None:
    response = send(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),),
        timeout=TIMEOUT, validate_only=False))
    assert response.topics[0].error_code == ErrorCode.none, response
    _wait(send, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=name),),
                                allow_auto_topic_creation=False, include_topic_authorized_operations=False),
          lambda r: r.topics[0].error_code == ErrorCode.none and len(r.topics[0].partitions) == partitions
          and all(p.leader_id >= 0 and p.error_code == ErrorCode.none for p in r.topics[0].partitions))
    for partition in range(partitions):       # the leader's replica answers only a moment after Metadata says so
        _wait(send, list_offsets(name, partition, -1), lambda r: r.topics[0].partitions[0].error_code == ErrorCode.none)


def wait_for_txn_coordinator(send: Send, transactional_id: str) -> None:
    """Kafka creates __transaction_state on the first FindCoordinator(key_type=1) and answers
    COORDINATOR_NOT_AVAILABLE (or NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) until the id's partition
    is loaded. Waits only while the answer is one of those (any other answer is the scenario's to see)."""
    _retry(send, FindCoordinatorRequest(key_type=1, coordinator_keys=(transactional_id,)),
           lambda r: [c.error_code for c in r.coordinators], retriable=LOADING, timeout=60)


def init_producer_id(send: Send, transactional_id: str | None, timeout: datetime.timedelta = TXN_TIMEOUT, *,
                     producer_id: int = -1, producer_epoch: int = -1, retry: bool = True) -> Any:
    request = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=timeout,
                                    producer_id=producer_id, producer_epoch=producer_epoch)
    if not retry:
        return send(request)
    return _retry(send, request, lambda r: [r.error_code])


def add_partitions(send: Send, txn: str, pid: int, epoch: int, partitions: dict[str, list[int]],
                   version: int = 3) -> dict[tuple[str, int], str]:
    """AddPartitionsToTxn (v3, or v1): each partition's error name."""
    if version == 3:
        request: Any = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=tuple(AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in partitions.items()))
    else:
        request = AddPartitionsToTxnRequestV1(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=tuple(AddPartitionsToTxnTopicV1(name=t, partitions=tuple(ps)) for t, ps in partitions.items()))
    response = _retry(send, request, lambda r: [p.partition_error_code for t in r.results_by_topic_v3_and_below
                                                for p in t.results_by_partition])
    return {(t.name, p.partition_index): p.partition_error_code.name
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_offsets(send: Send, txn: str, pid: int, epoch: int, group: str) -> str:
    return _retry(send, AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                               group_id=group), lambda r: [r.error_code]).error_code.name


def end_txn(send: Send, txn: str, pid: int, epoch: int, commit: bool) -> str:
    return _retry(send, EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit),
                  lambda r: [r.error_code]).error_code.name


def txn_offset_commit(send: Send, txn: str, group: str, pid: int, epoch: int, topic: str,
                      offsets: dict[int, int]) -> dict[int, str]:
    request = TxnOffsetCommitRequest(
        transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
        group_instance_id=None, topics=(TxnOffsetCommitRequestTopic(name=topic, partitions=tuple(
            TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                            committed_metadata="m") for p, o in offsets.items())),))
    response = _retry(send, request, lambda r: [p.error_code for t in r.topics for p in t.partitions])
    return {p.partition_index: p.error_code.name for t in response.topics for p in t.partitions}


def produce(send: Send, topic: str, partition: int, records: bytes, transactional_id: str | None = None) -> tuple[str, int]:
    """Produce v9 (acks=all): (error name, base offset)."""
    response = send(ProduceRequest(transactional_id=transactional_id, acks=-1, timeout=TIMEOUT, topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)),)))
    p = response.responses[0].partition_responses[0]
    return p.error_code.name, p.base_offset


def txn_batch(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    return transactional_batch(pid, epoch, seq, list(values), timestamps=[TS + i for i in range(len(values))])


def plain_batch(*values: bytes) -> bytes:
    return encode_batch(list(values), timestamps=[TS + i for i in range(len(values))])


def fetch(topic: str, partition: int, offset: int = 0, isolation_level: int = 1) -> FetchRequest:
    return FetchRequest(cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=10), min_bytes=0,
                        max_bytes=1 << 20, isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=(
                            FetchTopic(topic=topic, partitions=(FetchPartition(
                                partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                        forgotten_topics_data=(), rack_id="")


def list_offsets(topic: str, partition: int, timestamp: int = -1, isolation_level: int = 1) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=(ListOffsetsTopic(
        name=topic, partitions=(ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                     timestamp=timestamp),)),))


def latest(send: Send, topic: str, partition: int, isolation_level: int = 1) -> int:
    """ListOffsets v7 latest (-1): the last stable offset under read_committed, the high watermark otherwise."""
    p = send(list_offsets(topic, partition, -1, isolation_level)).topics[0].partitions[0]
    assert p.error_code == ErrorCode.none, p
    return p.offset


def read(send: Send, seen: Observed, topic: str, partition: int, isolation_level: int = 1) -> dict[str, Any]:
    """A Fetch v12 from offset 0 as plain values: error, high watermark, last stable offset, aborted
    transactions (relative producer ids), each batch (offsets, flags, values; control batches by type)
    and `visible`: the values a read_committed consumer hands the application (Kafka's Fetcher: batches of
    aborted transactions skipped, control batches never returned)."""
    p = send(fetch(topic, partition, 0, isolation_level)).responses[0].partitions[0]
    batches = decode_batches(p.records)
    aborted = None if p.aborted_transactions is None else sorted(
        (seen.pid(a.producer_id), a.first_offset) for a in p.aborted_transactions)
    return {
        "error": p.error_code.name, "high_watermark": p.high_watermark, "last_stable_offset": p.last_stable_offset,
        "aborted_transactions": aborted,
        "batches": [(b["base_offset"], b["last_offset"], seen.pid(b["producer_id"]), b["producer_epoch"],
                     f"control:{b['control_type']}" if b["control"] else ("txn" if b["transactional"] else "plain"),
                     [] if b["control"] else [r[2] for r in b["records"]])
                    for b in batches],
        "visible": visible(batches, p.aborted_transactions or ()),
    }


def visible(batches: list[dict[str, Any]], aborted: Any) -> list[bytes | None]:
    """What Kafka's read_committed consumer returns of these batches (Fetcher/CompletedFetch logic)."""
    pending = sorted((a.first_offset, a.producer_id) for a in aborted)
    skipping: set[int] = set()
    out: list[bytes | None] = []
    for b in batches:
        while pending and pending[0][0] <= b["last_offset"]:
            skipping.add(pending.pop(0)[1])
        if b["control"]:
            if b["control_type"] == "abort":
                skipping.discard(b["producer_id"])
            continue
        if b["transactional"] and b["producer_id"] in skipping:
            continue
        out += [r[2] for r in b["records"]]
    return out


def settled(send: Send, topic: str, partition: int) -> None:
    """Wait until the partition's transactions are decided (LSO = high watermark: the markers are written)."""
    deadline = time.monotonic() + 15
    while latest(send, topic, partition, 1) != latest(send, topic, partition, 0) and time.monotonic() < deadline:
        time.sleep(0.05)


def describe_txn(send: Send, seen: Observed, txn: str, groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """DescribeTransactions of one id. A __consumer_offsets partition is named by the group it belongs to
    (one of `groups`): the two brokers have different numbers of __consumer_offsets partitions."""
    s = send(DescribeTransactionsRequest(transactional_ids=(txn,))).transaction_states[0]
    topics = []
    for t in s.topics:
        partitions: list[Any] = sorted(t.partitions)
        if t.topic == "__consumer_offsets":
            by_partition = {_group_partition(send, g): g for g in groups}
            partitions = sorted(f"group {by_partition[p]}" if p in by_partition else p for p in partitions)
        topics.append((t.topic, partitions))
    return {"error": s.error_code.name, "state": s.transaction_state,
            "timeout_ms": int(s.transaction_timeout.total_seconds() * 1000),
            "start_time": "set" if s.transaction_start_time > 0 else s.transaction_start_time,
            "producer_id": seen.pid(s.producer_id) if s.error_code == ErrorCode.none else s.producer_id,
            "producer_epoch": s.producer_epoch,
            "topics": sorted(topics)}


def _group_partition(send: Send, group: str) -> int:
    """Kafka's partitionFor(group): Utils.abs(group.hashCode) % the number of __consumer_offsets partitions."""
    topic = send(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="__consumer_offsets"),),
                                 allow_auto_topic_creation=False, include_topic_authorized_operations=False)).topics[0]
    h = 0
    for unit in struct.unpack(f">{len(group.encode('utf-16-be')) // 2}H", group.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % len(topic.partitions)


def wait_state(send: Send, txn: str, states: set[str]) -> None:
    _wait(send, DescribeTransactionsRequest(transactional_ids=(txn,)),
          lambda r: r.transaction_states[0].transaction_state in states)


def describe_producers(send: Send, seen: Observed, topic: str, partition: int) -> dict[str, Any]:
    p = send(DescribeProducersRequest(topics=(TopicRequest(name=topic, partition_indexes=(partition,)),))
             ).topics[0].partitions[0]
    return {"error": p.error_code.name, "producers": sorted(
        (seen.pid(s.producer_id), s.producer_epoch, s.last_sequence, _timestamp(s.last_timestamp),
         s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers)}


def _timestamp(t: int) -> str | int:
    """A batch timestamp: "TS+n" for the records' own (TS + n), "now" for a marker's (the coordinator's clock)."""
    if TS <= t < TS + 1000:
        return f"TS+{t - TS}"
    if abs(t - time.time() * 1000) < 600_000:
        return "now"
    return t


def offset_fetch(send: Send, group: str, topic: str, partitions: list[int], require_stable: bool) -> dict[str, Any]:
    response = send(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=(
        OffsetFetchRequestTopics(name=topic, partition_indexes=tuple(partitions)),)),), require_stable=require_stable))
    g = response.groups[0]
    return {"error": g.error_code.name, "partitions": sorted(
        (p.partition_index, p.error_code.name, p.committed_offset, p.metadata) for t in g.topics for p in t.partitions)}


def wait_for_group_coordinator(send: Send, group: str) -> None:
    """As `wait_for_txn_coordinator`, for a group (Kafka loads __consumer_offsets on the first FindCoordinator)."""
    _retry(send, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)),
           lambda r: [c.error_code for c in r.coordinators], retriable=LOADING, timeout=60)


def begin(send: Send, txn: str, timeout: datetime.timedelta = TXN_TIMEOUT) -> tuple[str, int, int]:
    """InitProducerId for `txn` once its coordinator is ready: (error name, producer id, epoch)."""
    wait_for_txn_coordinator(send, txn)
    r = init_producer_id(send, txn, timeout)
    return r.error_code.name, r.producer_id, r.producer_epoch


# --- 1. commit --------------------------------------------------------------------------------------

def test_commit(pair):
    topic, txn = _name("txn-commit"), _name("tid")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 2)
        seen("plain produce p0", produce(send, topic, 0, plain_batch(b"before")))
        error, pid, epoch = begin(send, txn)
        seen("init", (error, seen.pid(pid), epoch))
        seen("add partitions", add_partitions(send, txn, pid, epoch, {topic: [0, 1]}))
        seen("produce p0", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"a0", b"a1"), txn))
        seen("produce p1", produce(send, topic, 1, txn_batch(pid, epoch, 0, b"b0"), txn))
        seen("produce p0 again", produce(send, topic, 0, txn_batch(pid, epoch, 2, b"a2"), txn))
        for partition in (0, 1):
            seen(f"p{partition} latest read_uncommitted, open", latest(send, topic, partition, 0))
            seen(f"p{partition} latest read_committed, open", latest(send, topic, partition, 1))
            seen(f"p{partition} fetch read_committed, open", read(send, seen, topic, partition, 1))
            seen(f"p{partition} fetch read_uncommitted, open", read(send, seen, topic, partition, 0))
        seen("end commit", end_txn(send, txn, pid, epoch, True))
        for partition in (0, 1):
            settled(send, topic, partition)
            seen(f"p{partition} latest read_uncommitted, committed", latest(send, topic, partition, 0))
            seen(f"p{partition} latest read_committed, committed", latest(send, topic, partition, 1))
            seen(f"p{partition} fetch read_committed, committed", read(send, seen, topic, partition, 1))
        seen("produce p0 plain after", produce(send, topic, 0, plain_batch(b"after")))

    k = run_on_kafka(pair, scenario)
    assert k["init"] == ("none", "pid#1", 0)
    assert k["add partitions"] == {(topic, 0): "none", (topic, 1): "none"}
    assert k["produce p0"] == ("none", 1) and k["produce p1"] == ("none", 0) and k["produce p0 again"] == ("none", 3)
    # open: the LSO stays at the transaction's first offset, read_committed returns only what precedes it
    assert k["p0 latest read_uncommitted, open"] == 4 and k["p0 latest read_committed, open"] == 1
    assert k["p1 latest read_uncommitted, open"] == 1 and k["p1 latest read_committed, open"] == 0
    open0 = k["p0 fetch read_committed, open"]
    assert (open0["high_watermark"], open0["last_stable_offset"], open0["aborted_transactions"]) == (4, 1, [])
    assert open0["visible"] == [b"before"]
    assert k["p1 fetch read_committed, open"]["batches"] == []
    assert k["p0 fetch read_uncommitted, open"]["visible"] == [b"before", b"a0", b"a1", b"a2"]
    assert k["p0 fetch read_uncommitted, open"]["aborted_transactions"] is None
    # committed: a commit marker takes one offset after the records; LSO = high watermark
    assert k["end commit"] == "none"
    assert k["p0 latest read_committed, committed"] == k["p0 latest read_uncommitted, committed"] == 5
    assert k["p1 latest read_committed, committed"] == k["p1 latest read_uncommitted, committed"] == 2
    done0 = k["p0 fetch read_committed, committed"]
    assert done0["visible"] == [b"before", b"a0", b"a1", b"a2"] and done0["aborted_transactions"] == []
    assert done0["batches"][-1] == (4, 4, "pid#1", 0, "control:commit", [])
    assert k["p1 fetch read_committed, committed"]["batches"][-1] == (1, 1, "pid#1", 0, "control:commit", [])
    assert k["produce p0 plain after"] == ("none", 5)
    same_on_pylog(pair, scenario, k)


# --- 2. abort -----------------------------------------------------------------------------------

def test_abort_then_commit(pair):
    topic, txn = _name("txn-abort"), _name("tid")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 2)
        error, pid, epoch = begin(send, txn)
        seen("init", (error, seen.pid(pid), epoch))
        seen("add partitions", add_partitions(send, txn, pid, epoch, {topic: [0, 1]}))
        seen("produce p0", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"x0", b"x1"), txn))
        seen("produce p1", produce(send, topic, 1, txn_batch(pid, epoch, 0, b"y0"), txn))
        seen("end abort", end_txn(send, txn, pid, epoch, False))
        for partition in (0, 1):
            settled(send, topic, partition)
            seen(f"p{partition} latest read_committed, aborted", latest(send, topic, partition, 1))
            seen(f"p{partition} fetch read_committed, aborted", read(send, seen, topic, partition, 1))
        # the same producer (same epoch, sequences continuing) commits a second transaction on p0
        seen("add p0 again", add_partitions(send, txn, pid, epoch, {topic: [0]}))
        seen("produce p0 committed", produce(send, topic, 0, txn_batch(pid, epoch, 2, b"z0"), txn))
        seen("end commit", end_txn(send, txn, pid, epoch, True))
        settled(send, topic, 0)
        seen("p0 fetch read_committed, then committed", read(send, seen, topic, 0, 1))
        seen("p0 fetch read_committed from offset 3", _fetch_from(send, seen, topic, 0, 3))

    k = run_on_kafka(pair, scenario)
    assert k["end abort"] == "none"
    assert k["p0 latest read_committed, aborted"] == 3 and k["p1 latest read_committed, aborted"] == 2
    a0 = k["p0 fetch read_committed, aborted"]
    assert a0["aborted_transactions"] == [("pid#1", 0)] and a0["visible"] == []
    assert a0["batches"] == [(0, 1, "pid#1", 0, "txn", [b"x0", b"x1"]), (2, 2, "pid#1", 0, "control:abort", [])]
    assert k["p1 fetch read_committed, aborted"]["aborted_transactions"] == [("pid#1", 0)]
    assert k["add p0 again"] == {(topic, 0): "none"} and k["produce p0 committed"] == ("none", 3)
    assert k["end commit"] == "none"
    c0 = k["p0 fetch read_committed, then committed"]
    assert c0["aborted_transactions"] == [("pid#1", 0)], "only the aborted transaction is listed"
    assert c0["visible"] == [b"z0"] and (c0["high_watermark"], c0["last_stable_offset"]) == (5, 5)
    assert c0["batches"][-1] == (4, 4, "pid#1", 0, "control:commit", [])
    # a fetch starting after the aborted transaction's markers no longer lists it
    assert k["p0 fetch read_committed from offset 3"]["aborted_transactions"] == []
    same_on_pylog(pair, scenario, k)


def _fetch_from(send: Send, seen: Observed, topic: str, partition: int, offset: int) -> dict[str, Any]:
    p = send(fetch(topic, partition, offset, 1)).responses[0].partitions[0]
    return {"error": p.error_code.name, "aborted_transactions": None if p.aborted_transactions is None else sorted(
        (seen.pid(a.producer_id), a.first_offset) for a in p.aborted_transactions),
        "batches": [(b["base_offset"], b["control_type"]) for b in decode_batches(p.records)]}


# --- 3. errors ----------------------------------------------------------------------------------

def test_errors(pair):
    topic, txn, other = _name("txn-errors"), _name("tid"), _name("tid")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 2)
        wait_for_txn_coordinator(send, txn)
        seen("init timeout above max", init_producer_id(send, txn, datetime.timedelta(milliseconds=900_001)).error_code.name)
        seen("init timeout 0", init_producer_id(send, txn, datetime.timedelta(0)).error_code.name)
        seen("init empty id", init_producer_id(send, "").error_code.name)
        error, pid, epoch = begin(send, txn)
        seen("init", (error, seen.pid(pid), epoch))
        seen("add, unknown transactional id", add_partitions(send, other, pid, epoch, {topic: [0]}))
        seen("add, wrong producer id", add_partitions(send, txn, pid + 1000, epoch, {topic: [0]}))
        seen("end, unknown transactional id", end_txn(send, other, pid, epoch, True))
        seen("add offsets, unknown transactional id", add_offsets(send, other, pid, epoch, "g"))
        # Empty: nothing added yet
        seen("end commit in Empty", end_txn(send, txn, pid, epoch, True))
        seen("end abort in Empty", end_txn(send, txn, pid, epoch, False))
        # a second InitProducerId (no transaction open) bumps the epoch: the old one is fenced
        r = init_producer_id(send, txn)
        seen("init again", (r.error_code.name, seen.pid(r.producer_id), r.producer_epoch))
        old, epoch = epoch, r.producer_epoch
        seen("add, old epoch v3", add_partitions(send, txn, pid, old, {topic: [0]}))
        seen("add, old epoch v1", add_partitions(send, txn, pid, old, {topic: [0]}, version=1))
        seen("add, future epoch v3", add_partitions(send, txn, pid, epoch + 1, {topic: [0]}))
        seen("end, old epoch", end_txn(send, txn, pid, old, True))
        seen("add offsets, old epoch", add_offsets(send, txn, pid, old, "g"))
        seen("add, unknown topic", add_partitions(send, txn, pid, epoch, {topic: [0], _UNKNOWN: [0]}))
        seen("add, unknown partition", add_partitions(send, txn, pid, epoch, {topic: [0, 7]}))
        seen("describe after failed adds", describe_txn(send, seen, txn))
        seen("add", add_partitions(send, txn, pid, epoch, {topic: [0]}))
        seen("produce", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"e0"), txn))
        seen("end commit", end_txn(send, txn, pid, epoch, True))
        seen("end commit again", end_txn(send, txn, pid, epoch, True))
        seen("end abort after commit", end_txn(send, txn, pid, epoch, False))
        wait_state(send, txn, {"CompleteCommit"})
        seen("end abort after commit completed", end_txn(send, txn, pid, epoch, False))
        seen("end commit after commit completed", end_txn(send, txn, pid, epoch, True))
        # aborting straight after a commit request, before its markers are written (PrepareCommit)
        seen("add for abort race", add_partitions(send, txn, pid, epoch, {topic: [1]}))
        seen("produce for abort race", produce(send, topic, 1, txn_batch(pid, epoch, 0, b"r0"), txn))
        seen("end commit for abort race", end_txn(send, txn, pid, epoch, True))
        seen("end abort while committing", end_txn(send, txn, pid, epoch, False))

    k = run_on_kafka(pair, scenario)
    assert k["init timeout above max"] == "invalid_transaction_timeout"
    assert k["init timeout 0"] == "invalid_transaction_timeout"
    assert k["init empty id"] == "invalid_request"
    assert k["add, unknown transactional id"] == {(topic, 0): "invalid_producer_id_mapping"}
    assert k["add, wrong producer id"] == {(topic, 0): "invalid_producer_id_mapping"}
    assert k["end, unknown transactional id"] == "invalid_producer_id_mapping"
    assert k["add offsets, unknown transactional id"] == "invalid_producer_id_mapping"
    assert k["end commit in Empty"] == "invalid_txn_state" and k["end abort in Empty"] == "invalid_txn_state"
    assert k["init again"] == ("none", "pid#1", 1)
    assert k["add, old epoch v3"] == {(topic, 0): "producer_fenced"}
    assert k["add, old epoch v1"] == {(topic, 0): "invalid_producer_epoch"}
    assert k["add, future epoch v3"] == {(topic, 0): "producer_fenced"}
    assert k["end, old epoch"] == "producer_fenced" and k["add offsets, old epoch"] == "producer_fenced"
    assert k["add, unknown topic"] == {(topic, 0): "operation_not_attempted", (_UNKNOWN, 0): "unknown_topic_or_partition"}
    assert k["add, unknown partition"] == {(topic, 0): "operation_not_attempted", (topic, 7): "unknown_topic_or_partition"}
    assert k["describe after failed adds"] == {"error": "none", "state": "Empty", "timeout_ms": 60000, "start_time": -1,
                                               "producer_id": "pid#1", "producer_epoch": 1, "topics": []}
    assert k["end commit"] == "none" and k["end commit again"] == "none"
    assert k["end abort after commit"] == "invalid_txn_state"
    assert k["end abort after commit completed"] == "invalid_txn_state"
    assert k["end commit after commit completed"] == "none"
    assert k["end abort while committing"] == "invalid_txn_state"
    same_on_pylog(pair, scenario, k)


_UNKNOWN = "no-such-topic-" + uuid.uuid4().hex[:8]


# --- 4. fencing -----------------------------------------------------------------------------------

def test_fencing(pair):
    topic, txn = _name("txn-fence"), _name("tid")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 1)
        error, pid, epoch = begin(send, txn)
        seen("init A", (error, seen.pid(pid), epoch))
        seen("A add", add_partitions(send, txn, pid, epoch, {topic: [0]}))
        seen("A produce", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"A0", b"A1"), txn))
        # B, a new instance with the same transactional id: the first answer, then the one it retries to
        first = init_producer_id(send, txn, retry=False)
        seen("init B, first answer", first.error_code.name)
        r = init_producer_id(send, txn)
        seen("init B", (r.error_code.name, seen.pid(r.producer_id), r.producer_epoch))
        b_pid, b_epoch = r.producer_id, r.producer_epoch
        settled(send, topic, 0)
        seen("fetch after fencing", read(send, seen, topic, 0, 1))
        seen("A produce, old epoch", produce(send, topic, 0, txn_batch(pid, epoch, 2, b"A2"), txn))
        seen("A add, old epoch", add_partitions(send, txn, pid, epoch, {topic: [0]}))
        seen("A end commit, old epoch", end_txn(send, txn, pid, epoch, True))
        seen("A end abort, old epoch", end_txn(send, txn, pid, epoch, False))
        seen("B add", add_partitions(send, txn, b_pid, b_epoch, {topic: [0]}))
        seen("B produce", produce(send, topic, 0, txn_batch(b_pid, b_epoch, 0, b"B0"), txn))
        seen("B end commit", end_txn(send, txn, b_pid, b_epoch, True))
        settled(send, topic, 0)
        seen("fetch read_committed", read(send, seen, topic, 0, 1))
        seen("describe producers", describe_producers(send, seen, topic, 0))

    k = run_on_kafka(pair, scenario)
    assert k["init A"] == ("none", "pid#1", 0)
    assert k["init B, first answer"] == "concurrent_transactions"
    assert k["init B"] == ("none", "pid#1", 2), "same producer id, epoch bumped for the abort (1) and for B (2)"
    fenced = k["fetch after fencing"]
    assert fenced["aborted_transactions"] == [("pid#1", 0)] and fenced["visible"] == []
    assert fenced["batches"][-1] == (2, 2, "pid#1", 1, "control:abort", []), "the abort marker carries the fencing epoch"
    assert k["A produce, old epoch"] == ("invalid_producer_epoch", -1)
    assert k["A add, old epoch"] == {(topic, 0): "producer_fenced"}
    assert k["A end commit, old epoch"] == "producer_fenced" and k["A end abort, old epoch"] == "producer_fenced"
    assert k["B produce"] == ("none", 3) and k["B end commit"] == "none"
    done = k["fetch read_committed"]
    assert done["visible"] == [b"B0"] and done["aborted_transactions"] == [("pid#1", 0)]
    assert (done["high_watermark"], done["last_stable_offset"]) == (5, 5)
    same_on_pylog(pair, scenario, k)


# --- 5. KIP-890 part 1: the partition must be in the transaction ------------------------------------

def test_produce_to_a_partition_not_in_the_transaction(pair):
    topic, txn = _name("txn-verify"), _name("tid")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 2)
        error, pid, epoch = begin(send, txn)
        seen("init", (error, seen.pid(pid), epoch))
        seen("produce, nothing added (Empty)", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"v0"), txn))
        seen("add p0", add_partitions(send, txn, pid, epoch, {topic: [0]}))
        seen("produce p1, not added", produce(send, topic, 1, txn_batch(pid, epoch, 0, b"v1"), txn))
        seen("produce p0", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"v2"), txn))
        seen("produce p1 without transactional id", produce(send, topic, 1, txn_batch(pid, epoch, 0, b"v3")))
        seen("p1 high watermark", latest(send, topic, 1, 0))
        seen("end commit", end_txn(send, txn, pid, epoch, True))
        settled(send, topic, 0)
        seen("p0 fetch read_committed", read(send, seen, topic, 0, 1))
        seen("p1 fetch read_committed", read(send, seen, topic, 1, 1))

    k = run_on_kafka(pair, scenario)
    assert k["produce, nothing added (Empty)"] == ("invalid_txn_state", -1)
    assert k["produce p1, not added"] == ("invalid_txn_state", -1)
    assert k["produce p0"] == ("none", 0) and k["end commit"] == "none"
    assert k["p0 fetch read_committed"]["visible"] == [b"v2"]
    same_on_pylog(pair, scenario, k)


# --- 6. transaction timeout -----------------------------------------------------------------------

@pytest.mark.slow
def test_transaction_timeout_aborts(pair):
    topic, txn = _name("txn-timeout"), _name("tid")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 1)
        error, pid, epoch = begin(send, txn, datetime.timedelta(seconds=1))
        seen("init", (error, seen.pid(pid), epoch))
        seen("add", add_partitions(send, txn, pid, epoch, {topic: [0]}))
        seen("produce", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"t0", b"t1"), txn))
        seen("latest read_committed, open", latest(send, topic, 0, 1))
        deadline = time.monotonic() + 30      # Kafka sweeps every 10 s for transactions older than their timeout
        while latest(send, topic, 0, 1) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        settled(send, topic, 0)
        seen("latest read_committed, timed out", latest(send, topic, 0, 1))
        seen("fetch read_committed, timed out", read(send, seen, topic, 0, 1))
        seen("describe", describe_txn(send, seen, txn))
        seen("produce, old epoch", produce(send, topic, 0, txn_batch(pid, epoch, 2, b"t2"), txn))
        seen("end commit, old epoch", end_txn(send, txn, pid, epoch, True))
        seen("end abort, old epoch", end_txn(send, txn, pid, epoch, False))
        # KIP-360: the producer may recover its id by presenting the old epoch
        r = init_producer_id(send, txn, datetime.timedelta(seconds=1), producer_id=pid, producer_epoch=epoch)
        seen("init with the old id and epoch", (r.error_code.name, seen.pid(r.producer_id), r.producer_epoch))
        r = init_producer_id(send, txn, datetime.timedelta(seconds=1))
        seen("init anew", (r.error_code.name, seen.pid(r.producer_id), r.producer_epoch))

    k = run_on_kafka(pair, scenario)
    assert k["latest read_committed, open"] == 0
    assert k["latest read_committed, timed out"] == 3
    timed_out = k["fetch read_committed, timed out"]
    assert timed_out["aborted_transactions"] == [("pid#1", 0)] and timed_out["visible"] == []
    assert timed_out["batches"][-1] == (2, 2, "pid#1", 1, "control:abort", [])
    assert k["describe"] == {"error": "none", "state": "CompleteAbort", "timeout_ms": 1000, "start_time": "set",
                             "producer_id": "pid#1", "producer_epoch": 1, "topics": []}
    assert k["produce, old epoch"] == ("invalid_producer_epoch", -1)
    assert k["end commit, old epoch"] == "producer_fenced" and k["end abort, old epoch"] == "producer_fenced"
    assert k["init with the old id and epoch"] == ("producer_fenced", -1, -1)
    assert k["init anew"] == ("none", "pid#1", 2)
    same_on_pylog(pair, scenario, k)


# --- 7. offsets in a transaction ------------------------------------------------------------------

def test_txn_offset_commit(pair):
    topic, txn, group, aborted_group = _name("txn-offsets"), _name("tid"), _name("g"), _name("g")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 2)
        wait_for_group_coordinator(send, group)
        wait_for_group_coordinator(send, aborted_group)
        error, pid, epoch = begin(send, txn)
        seen("init", (error, seen.pid(pid), epoch))
        seen("add offsets", add_offsets(send, txn, pid, epoch, group))
        seen("describe, offsets added", describe_txn(send, seen, txn, (group,)))
        seen("txn offset commit", txn_offset_commit(send, txn, group, pid, epoch, topic, {0: 5, 1: 7}))
        seen("offset fetch stable, open", offset_fetch(send, group, topic, [0, 1], True))
        seen("offset fetch, open", offset_fetch(send, group, topic, [0, 1], False))
        seen("end commit", end_txn(send, txn, pid, epoch, True))
        seen("offset fetch stable, committed", _wait_stable(send, group, topic))
        # a second transaction aborts its offsets: the committed ones stay
        seen("add offsets 2", add_offsets(send, txn, pid, epoch, group))
        seen("txn offset commit 2", txn_offset_commit(send, txn, group, pid, epoch, topic, {0: 9}))
        seen("end abort", end_txn(send, txn, pid, epoch, False))
        seen("offset fetch stable, aborted", _wait_stable(send, group, topic))
        # a group whose only offsets were aborted has none
        seen("add offsets 3", add_offsets(send, txn, pid, epoch, aborted_group))
        seen("txn offset commit 3", txn_offset_commit(send, txn, aborted_group, pid, epoch, topic, {0: 3}))
        seen("offset fetch stable, other group open", offset_fetch(send, aborted_group, topic, [0], True))
        seen("end abort 3", end_txn(send, txn, pid, epoch, False))
        seen("offset fetch stable, other group aborted", _wait_stable(send, aborted_group, topic, [0]))
        # TxnOffsetCommit without AddOffsetsToTxn first
        seen("txn offset commit without add offsets", txn_offset_commit(send, txn, group, pid, epoch, topic, {1: 11}))
        # a fenced producer's offsets: a new InitProducerId bumps the epoch, the new one adds the group
        r = init_producer_id(send, txn)
        seen("init again", (r.error_code.name, seen.pid(r.producer_id), r.producer_epoch))
        seen("add offsets, new epoch", add_offsets(send, txn, pid, r.producer_epoch, group))
        seen("txn offset commit, old epoch", txn_offset_commit(send, txn, group, pid, epoch, topic, {1: 12}))
        seen("end abort, new epoch", end_txn(send, txn, pid, r.producer_epoch, False))
        seen("offset fetch stable, end", _wait_stable(send, group, topic))

    k = run_on_kafka(pair, scenario)
    assert k["add offsets"] == "none" and k["txn offset commit"] == {0: "none", 1: "none"}
    assert k["describe, offsets added"]["state"] == "Ongoing"
    assert k["describe, offsets added"]["topics"] == [("__consumer_offsets", [f"group {group}"])]
    assert k["offset fetch stable, open"]["error"] == "none"
    assert k["offset fetch stable, open"]["partitions"] == [(0, "unstable_offset_commit", -1, ""),
                                                            (1, "unstable_offset_commit", -1, "")]
    assert k["offset fetch, open"]["partitions"] == [(0, "none", -1, ""), (1, "none", -1, "")]
    assert k["end commit"] == "none"
    assert k["offset fetch stable, committed"]["partitions"] == [(0, "none", 5, "m"), (1, "none", 7, "m")]
    assert k["end abort"] == "none"
    assert k["offset fetch stable, aborted"]["partitions"] == [(0, "none", 5, "m"), (1, "none", 7, "m")]
    assert k["offset fetch stable, other group open"]["partitions"] == [(0, "unstable_offset_commit", -1, "")]
    assert k["offset fetch stable, other group aborted"]["partitions"] == [(0, "none", -1, "")]
    assert k["txn offset commit without add offsets"] == {1: "invalid_txn_state"}
    assert k["init again"] == ("none", "pid#1", 1) and k["add offsets, new epoch"] == "none"
    assert k["txn offset commit, old epoch"] == {1: "invalid_producer_epoch"}
    assert k["offset fetch stable, end"]["partitions"] == [(0, "none", 5, "m"), (1, "none", 7, "m")]
    same_on_pylog(pair, scenario, k)


def _wait_stable(send: Send, group: str, topic: str, partitions: list[int] = [0, 1]) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        r = offset_fetch(send, group, topic, partitions, True)
        if not any(p[1] == "unstable_offset_commit" for p in r["partitions"]) or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


# --- 8. DescribeTransactions, ListTransactions, DescribeProducers ---------------------------------

def test_describe_and_list_transactions(pair):
    topic, txn, idle = _name("txn-describe"), _name("tid"), _name("tid")

    def scenario(send: Send, seen: Observed) -> None:
        create_topic(send, topic, 2)
        error, pid, epoch = begin(send, txn)
        seen("init", (error, seen.pid(pid), epoch))
        seen("describe, Empty", describe_txn(send, seen, txn))
        seen("describe, unknown id", describe_txn(send, seen, _name("tid")))
        seen("describe producers, none yet", describe_producers(send, seen, topic, 0))
        seen("add", add_partitions(send, txn, pid, epoch, {topic: [1, 0]}))
        seen("produce p0", produce(send, topic, 0, plain_batch(b"plain")))
        seen("produce p0 txn", produce(send, topic, 0, txn_batch(pid, epoch, 0, b"d0", b"d1"), txn))
        seen("describe, Ongoing", describe_txn(send, seen, txn))
        seen("describe producers, Ongoing", describe_producers(send, seen, topic, 0))
        seen("describe producers, p1 (added, nothing written)", describe_producers(send, seen, topic, 1))
        seen("describe producers, unknown partition", describe_producers(send, seen, topic, 5))
        seen("describe producers, unknown topic", describe_producers(send, seen, _name("nope"), 0))
        seen("list v0 by producer id", _list(send, seen, ListTransactionsRequestV0(producer_id_filters=(pid,))))
        seen("list v0 Ongoing", _list(send, seen, ListTransactionsRequestV0(state_filters=("Ongoing",)), {txn}))
        seen("list v0 Empty", _list(send, seen, ListTransactionsRequestV0(state_filters=("Empty",)), {txn}))
        seen("list v0 unknown state", _list(send, seen, ListTransactionsRequestV0(state_filters=("Bogus", "Ongoing")), {txn}))
        seen("list v1 running over an hour", _list(send, seen, ListTransactionsRequest(duration_filter=3_600_000), {txn}))
        seen("list v1 running at least 0 ms", _list(send, seen, ListTransactionsRequest(duration_filter=0), {txn}))
        seen("end commit", end_txn(send, txn, pid, epoch, True))
        wait_state(send, txn, {"CompleteCommit"})
        seen("describe, CompleteCommit", describe_txn(send, seen, txn))
        seen("describe producers, committed", describe_producers(send, seen, topic, 0))
        seen("list v0 by producer id, committed", _list(send, seen, ListTransactionsRequestV0(producer_id_filters=(pid,))))
        # a second transactional id, never used past InitProducerId, described beside the first
        error, idle_pid, idle_epoch = begin(send, idle)
        seen("init idle", (error, seen.pid(idle_pid), idle_epoch))
        r = send(DescribeTransactionsRequest(transactional_ids=(txn, idle)))
        seen("describe both", [(s.transactional_id, s.error_code.name, s.transaction_state, seen.pid(s.producer_id))
                               for s in r.transaction_states])

    k = run_on_kafka(pair, scenario)
    assert k["describe, Empty"] == {"error": "none", "state": "Empty", "timeout_ms": 60000, "start_time": -1,
                                    "producer_id": "pid#1", "producer_epoch": 0, "topics": []}
    assert k["describe, unknown id"] == {"error": "transactional_id_not_found", "state": "", "timeout_ms": 0,
                                         "start_time": 0, "producer_id": 0, "producer_epoch": 0, "topics": []}
    ongoing = k["describe, Ongoing"]
    assert ongoing["state"] == "Ongoing" and ongoing["start_time"] == "set" and ongoing["topics"] == [(topic, [0, 1])]
    # (producer, epoch, last sequence, last timestamp, coordinator epoch, open transaction's first offset)
    assert k["describe producers, Ongoing"] == {"error": "none", "producers": [("pid#1", 0, 1, "TS+1", -1, 1)]}
    assert k["describe producers, p1 (added, nothing written)"] == {"error": "none", "producers": []}
    assert k["describe producers, unknown topic"]["error"] == "unknown_topic_or_partition"
    assert k["list v0 by producer id"] == {"error": "none", "unknown_state_filters": [],
                                          "states": [(txn, "pid#1", "Ongoing")]}
    assert k["list v0 Empty"]["states"] == []
    assert k["list v0 unknown state"]["unknown_state_filters"] == ["Bogus"]
    assert k["list v1 running over an hour"]["states"] == []
    assert k["list v1 running at least 0 ms"]["states"] == [(txn, "pid#1", "Ongoing")]
    assert k["describe, CompleteCommit"]["state"] == "CompleteCommit" and k["describe, CompleteCommit"]["topics"] == []
    assert k["describe producers, committed"]["producers"] == [("pid#1", 0, 1, "now", 0, -1)], \
        "the commit marker sets the last timestamp (the coordinator's clock) and the coordinator epoch"
    assert k["list v0 by producer id, committed"]["states"] == [(txn, "pid#1", "CompleteCommit")]
    same_on_pylog(pair, scenario, k)


def _list(send: Send, seen: Observed, request: Any, only: set[str] | None = None) -> dict[str, Any]:
    """ListTransactions; `only` keeps these transactional ids (other tests' transactions share the broker)."""
    r = send(request)
    return {"error": r.error_code.name, "unknown_state_filters": sorted(r.unknown_state_filters),
            "states": sorted((s.transactional_id, seen.pid(s.producer_id), s.transaction_state)
                             for s in r.transaction_states if only is None or s.transactional_id in only)}
