"""The admin calls confluent-kafka's AdminClient lacks, spoken on the wire: `pylog transactions`' back end,
and the console's partition sizes.

confluent-kafka 2.16 has no listTransactions, describeTransactions, describeProducers or abortTransaction
(Kafka's Admin has them), so this module sends their requests itself: ListTransactions (to every
broker, as Kafka's Admin does), FindCoordinator (key type transaction) then DescribeTransactions,
DescribeProducers (to each partition's leader, or to one named broker), WriteTxnMarkers (an abort
marker, to the partition's leader), with Metadata for the brokers and leaders that route them;
DescribeLogDirs (to every broker: the bytes of each replica on its disks, for `pylog console`).

Owns: one blocking connection per broker (TLS and a SASL login as `ClientSecurity` says, with the
shared kafka_protocol.security pieces) and its ApiVersions (the highest version both sides
speak, per API); turning answers into plain records; turning every failure (unreachable broker, an
API the broker does not speak, an error code) into a `CliError` that names the problem and the fix.
Frames are built and read by the shared sans-I/O codec (`kafka_protocol.client_codec`); sparklog's
`kafka_client` is not reused because it refuses brokers without its Fetch range and keeps neither the
offered API versions nor the raw frames (DescribeTransactions needs them, see below).
Must never: print, or send anything but the request asked for (WriteTxnMarkers only from `abort`).
"""
from __future__ import annotations

import dataclasses
import itertools
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping


from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.client_codec import (
    ResponseError,
    decode_response,
    encode_request,
    request_class,
    response_body_start,
)
from kafka_protocol.codec import entity_decoder
from kafka_protocol.errors import ErrorCode
from kafka_protocol.length_guard import LengthError, check_lengths
from kafka_protocol.security.client_login import AuthenticationError, login
from kafka_protocol.security.client_settings import ClientSecurity
from pylog.tools.client import bootstrap_addresses
from pylog.tools.errors import CliError

TopicPartition = tuple[str, int]

# The versions this client speaks. kio (generated from Kafka 4) has no WriteTxnMarkers v0.
SPEAKS = {
    ApiKey.METADATA: (4, 12),
    ApiKey.FIND_COORDINATOR: (1, 4),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
}
API_NAMES = {
    ApiKey.METADATA: "Metadata", ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.LIST_TRANSACTIONS: "ListTransactions", ApiKey.DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    ApiKey.DESCRIBE_PRODUCERS: "DescribeProducers", ApiKey.WRITE_TXN_MARKERS: "WriteTxnMarkers",
    ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments",
}
TRANSACTION_APIS = {ApiKey.LIST_TRANSACTIONS, ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.DESCRIBE_PRODUCERS,
                    ApiKey.WRITE_TXN_MARKERS}
KEY_TYPE_TRANSACTION = 1
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
_SIZE = struct.Struct(">i")


def error_name(code: int) -> str:
    """Kafka's name of an error code (TRANSACTIONAL_ID_NOT_FOUND), or the number when unknown."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error code {code}"


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


# --- records the tool prints ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class TxnDescription:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int               # -1: no open transaction
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int      # -1: no marker written for this producer yet
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int       # -1: no open transaction


# --- one broker ------------------------------------------------------------------------------------------

class Connection:
    """One blocking TCP connection: ApiVersions once, then one request and its response at a time."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float, label: str | None = None,
                 security: ClientSecurity = ClientSecurity()) -> None:
        self.address = f"{host}:{port}"
        self.label = label or f"the broker at {self.address}"
        self.client_id = client_id
        self._ids = itertools.count(1)
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise CliError(f"broker unreachable at {self.address} ({e.strerror or e})") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security.tls:
            try:
                context = security.ssl_context()
                assert context is not None
                self._sock = context.wrap_socket(self._sock, server_hostname=host)
            except (ssl.SSLError, OSError, ValueError) as e:
                self._sock.close()
                raise CliError(f"TLS with {self.label} failed: {e}; check the ssl.* settings of --command-config") from None
        answer = self.call(ApiKey.API_VERSIONS, 0, request_class(ApiKey.API_VERSIONS, 0)())
        if _code(answer.error_code) != 0:
            raise CliError(f"{self.label} refused ApiVersions: {error_name(_code(answer.error_code))}")
        self.offered = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in answer.api_keys}
        if security.sasl:
            try:
                login(self.call, security, min(2, self.offered.get(int(ApiKey.SASL_AUTHENTICATE), (0, 0))[1]))
            except AuthenticationError as e:
                self.close()
                raise CliError(f"{self.label}: {e}; check sasl.jaas.config in --command-config") from None

    def version(self, api: ApiKey) -> int:
        """The highest version of `api` both sides speak; a CliError naming the gap when there is none."""
        low, high = SPEAKS[api]
        theirs = self.offered.get(int(api))
        if theirs is None or theirs[0] > high or theirs[1] < low:
            name = API_NAMES.get(api, api.name)
            what = "does not support" if theirs is None else f"speaks only versions {theirs[0]}-{theirs[1]} of"
            hint = "; transactions need Kafka 3.0 or later" if api in TRANSACTION_APIS and theirs is None else ""
            raise CliError(f"{self.label} {what} {name} (API {int(api)}; this tool speaks versions "
                           f"{low}-{high}){hint}")
        return min(high, theirs[1])

    def call(self, api: int, version: int, body: Any, schema: type | None = None) -> Any:
        """Send one request; its decoded response (with `schema` in place of kio's when given)."""
        correlation_id = next(self._ids)
        try:
            self._sock.sendall(encode_request(api, version, correlation_id, self.client_id, body))
            frame = self._receive()
        except OSError as e:   # socket.timeout included
            raise CliError(f"lost the connection to {self.label} ({e.strerror or e}); is the broker running?") \
                from None
        try:
            if schema is None:
                return decode_response(frame, api, version, correlation_id)
            pos = response_body_start(frame, api, version, correlation_id)
            check_lengths(schema, frame, pos)
            return entity_decoder(schema)(frame.toreadonly(), pos)[0]
        except (ResponseError, LengthError, ValueError, TypeError, IndexError, struct.error) as e:
            raise CliError(f"{self.label} sent an answer to {API_NAMES.get(ApiKey(api), api)} that cannot be read: "
                           f"{e}") from None

    def _receive(self) -> memoryview:
        (n,) = _SIZE.unpack(self._read_exactly(4))
        if not 4 <= n <= MAX_RESPONSE_BYTES:
            raise CliError(f"{self.label} announced a response of {n} bytes; is it a Kafka broker?")
        return self._read_exactly(n)

    def _read_exactly(self, n: int) -> memoryview:
        buf = memoryview(bytearray(n))
        got = 0
        while got < n:
            k = self._sock.recv_into(buf[got:])
            if k == 0:
                raise ConnectionResetError(0, "the broker closed the connection")
            got += k
        return buf

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


# --- the cluster ------------------------------------------------------------------------------------------

class WireAdmin:
    """The transaction admin calls against a cluster reached through `bootstrap`."""

    def __init__(self, bootstrap: str, client_id: str = "pylog-transactions", timeout_s: float = 15.0,
                 security: ClientSecurity = ClientSecurity()) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.nodes: dict[int, Node] = {}
        self.controller_id = -1
        self._by_node: dict[int, Connection] = {}
        self._any: Connection | None = None

    def __enter__(self) -> "WireAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in {id(c): c for c in [*self._by_node.values(), *([self._any] if self._any else [])]}.values():
            conn.close()
        self._by_node.clear()
        self._any = None

    # connections
    def _bootstrap(self) -> Connection:
        if self._any is None:
            errors = []
            for host, port in bootstrap_addresses(self.bootstrap):
                try:
                    self._any = Connection(host, port, self.client_id, self.timeout_s, security=self.security)
                    break
                except CliError as e:
                    errors.append(str(e).removeprefix("broker unreachable at "))
            else:
                raise CliError(f"broker unreachable at {', '.join(errors)}")
        return self._any

    def connection(self, node_id: int) -> Connection:
        conn = self._by_node.get(node_id)
        if conn is None:
            if not self.nodes:
                self.metadata([])
            node = self.nodes.get(node_id)
            if node is None:
                known = ", ".join(str(n) for n in sorted(self.nodes)) or "none"
                raise CliError(f"broker {node_id} is not in the cluster (brokers: {known})")
            conn = self._by_node[node_id] = Connection(node.host, node.port, self.client_id, self.timeout_s,
                                                       f"broker {node_id} ({node.address})", self.security)
        return conn

    # Metadata
    def metadata(self, topics: list[str] | None) -> dict[str, list[PartitionInfo]]:
        """The brokers (into `self.nodes`) and the partitions of `topics` (None: every topic); an unknown
        topic is a CliError."""
        conn = self._bootstrap()
        version = conn.version(ApiKey.METADATA)
        request = build(request_class(ApiKey.METADATA, version), {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False})
        answer = conn.call(ApiKey.METADATA, version, request)
        self.nodes = {int(b.node_id): Node(int(b.node_id), b.host, int(b.port), b.rack) for b in answer.brokers}
        self.controller_id = int(answer.controller_id)
        out: dict[str, list[PartitionInfo]] = {}
        for t in answer.topics:
            code = _code(t.error_code)
            if code == ErrorCode.unknown_topic_or_partition:
                raise CliError(f"unknown topic '{t.name}'")
            if code != 0:
                raise CliError(f"cannot read the metadata of topic '{t.name}': {error_name(code)}")
            out[t.name] = sorted((PartitionInfo(t.name, int(p.partition_index), int(p.leader_id),
                                                tuple(int(r) for r in p.replica_nodes)) for p in t.partitions),
                                 key=lambda p: p.partition)
        return out

    def partition(self, topic: str, partition: int) -> PartitionInfo:
        parts = self.metadata([topic]).get(topic, [])
        for p in parts:
            if p.partition == partition:
                return p
        raise CliError(f"partition {partition} does not exist in topic '{topic}' ({len(parts)} partitions)")

    def _leader(self, info: PartitionInfo) -> int:
        if info.leader < 0:
            raise CliError(f"{info.topic}-{info.partition} has no leader; wait for one "
                           f"(pylog topics describe --topic {info.topic})")
        return info.leader

    # AlterPartitionReassignments, ListPartitionReassignments (KIP-455): the controller's
    def _controller_call(self, api: ApiKey, body: dict[str, Any]) -> Any:
        """`api` on the controller; asked again once after NOT_CONTROLLER (it moved: metadata is read again)."""
        for attempt in (1, 2):
            self.metadata([])
            if self.controller_id < 0:
                raise CliError("the cluster has no controller now; try again in a moment")
            conn = self.connection(self.controller_id)
            version = conn.version(api)
            answer = conn.call(api, version, build(request_class(api, version), body))
            code = _code(answer.error_code)
            if code == ErrorCode.not_controller and attempt == 1:
                self._by_node.pop(self.controller_id, conn).close()
                continue
            if code != 0:
                raise CliError(f"{conn.label} refused {API_NAMES[api]}: {error_name(code)}"
                               + (f": {answer.error_message}" if answer.error_message else ""))
            return answer
        raise CliError(f"the controller kept moving; {API_NAMES[api]} not sent")

    def alter_reassignments(self, wanted: Mapping[tuple[str, int], list[int] | None], timeout_ms: int = 60_000
                            ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Start (a replica list) or cancel (None) each partition's move: {partition: (error code, message)}."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), replicas in sorted(wanted.items()):
            by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
        answer = self._controller_call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {(str(t.name), int(p.partition_index)): (_code(p.error_code), p.error_message)
                for t in answer.responses for p in t.partitions}

    def list_reassignments(self, topics: dict[str, list[int]] | None = None, timeout_ms: int = 60_000
                           ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """The moves in progress: {partition: (replicas, adding, removing)}."""
        answer = self._controller_call(ApiKey.LIST_PARTITION_REASSIGNMENTS, {
            "timeout": timeout_ms,
            "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
        return {(str(t.name), int(p.partition_index)): ([int(r) for r in p.replicas],
                                                        [int(r) for r in p.adding_replicas],
                                                        [int(r) for r in p.removing_replicas])
                for t in answer.topics for p in t.partitions}

    # ListTransactions
    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1) -> list[TxnListing]:
        """Every broker's transactions (each is the coordinator of its own), filtered by the broker."""
        if not self.nodes:
            self.metadata([])
        states, producer_ids = list(states), list(producer_ids)
        out: list[TxnListing] = []
        for node_id in sorted(self.nodes):
            conn = self.connection(node_id)
            version = conn.version(ApiKey.LIST_TRANSACTIONS)
            if duration_ms >= 0 and version < 1:
                raise CliError(f"{conn.label} speaks ListTransactions v0 only, which has no "
                               "duration filter (KIP-994, Kafka 3.8+); leave out --duration-filter")
            values: dict[str, Any] = {"state_filters": states, "producer_id_filters": producer_ids}
            if version >= 1:
                values["duration_filter"] = duration_ms
            answer = conn.call(ApiKey.LIST_TRANSACTIONS, version,
                               build(request_class(ApiKey.LIST_TRANSACTIONS, version), values))
            code = _code(answer.error_code)
            if code != 0:
                raise CliError(f"{conn.label} refused to list transactions: {error_name(code)}"
                               + ("; it is still loading its transaction state, try again in a few seconds"
                                  if code == ErrorCode.coordinator_load_in_progress else ""))
            if answer.unknown_state_filters:
                raise CliError(f"{conn.label} does not know the state(s) {', '.join(answer.unknown_state_filters)}")
            out.extend(TxnListing(s.transactional_id, int(s.producer_id), s.transaction_state, node_id)
                       for s in answer.transaction_states)
        return out

    # FindCoordinator + DescribeTransactions
    def coordinator(self, transactional_id: str) -> int:
        conn = self._bootstrap()
        version = conn.version(ApiKey.FIND_COORDINATOR)
        cls = request_class(ApiKey.FIND_COORDINATOR, version)
        if version >= 4:
            answer = conn.call(ApiKey.FIND_COORDINATOR, version, build(cls, {
                "key_type": KEY_TYPE_TRANSACTION, "coordinator_keys": [transactional_id]}))
            found = next((c for c in answer.coordinators if c.key == transactional_id), None)
            if found is None:
                raise CliError(f"{conn.label} answered FindCoordinator without transactional id '{transactional_id}'")
        else:
            found = conn.call(ApiKey.FIND_COORDINATOR, version, build(cls, {
                "key": transactional_id, "key_type": KEY_TYPE_TRANSACTION}))
        code = _code(found.error_code)
        if code != 0:
            detail = f" ({found.error_message})" if found.error_message else ""
            raise CliError(f"no transaction coordinator for transactional id '{transactional_id}': "
                           f"{error_name(code)}{detail}")
        node = Node(int(found.node_id), found.host, int(found.port))
        self.nodes.setdefault(node.node_id, node)
        return node.node_id

    def describe_transaction(self, transactional_id: str) -> TxnDescription | None:
        """The coordinator's state of `transactional_id`; None when it does not know the id."""
        coordinator = self.coordinator(transactional_id)
        conn = self.connection(coordinator)
        version = conn.version(ApiKey.DESCRIBE_TRANSACTIONS)
        request = build(request_class(ApiKey.DESCRIBE_TRANSACTIONS, version),
                        {"transactional_ids": [transactional_id]})
        answer = conn.call(ApiKey.DESCRIBE_TRANSACTIONS, version, request)
        for s in answer.transaction_states:
            if s.transactional_id != transactional_id:
                continue
            code = _code(s.error_code)
            if code == ErrorCode.transactional_id_not_found:
                return None
            if code != 0:
                raise CliError(f"cannot describe transactional id '{transactional_id}' on {conn.label}: "
                               f"{error_name(code)}")
            timeout = s.transaction_timeout
            timeout_ms = int(timeout.total_seconds() * 1000) if hasattr(timeout, "total_seconds") else int(timeout)
            return TxnDescription(coordinator, transactional_id, int(s.producer_id), int(s.producer_epoch),
                                  s.transaction_state, timeout_ms, int(s.transaction_start_time),
                                  tuple((t.topic, int(p)) for t in s.topics for p in t.partitions))
        raise CliError(f"{conn.label} answered DescribeTransactions without transactional id '{transactional_id}'")

    # DescribeProducers
    def describe_producers(self, partitions: list[PartitionInfo], broker_id: int | None = None,
                           batch: int = 500) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition, from its leader (or from replica `broker_id`)."""
        by_node: dict[int, list[PartitionInfo]] = {}
        for info in partitions:
            by_node.setdefault(broker_id if broker_id is not None else self._leader(info), []).append(info)
        out: dict[TopicPartition, list[ProducerState]] = {}
        for node_id, infos in sorted(by_node.items()):
            conn = self.connection(node_id)
            version = conn.version(ApiKey.DESCRIBE_PRODUCERS)
            for chunk in _chunks(infos, batch):
                topics: dict[str, list[int]] = {}
                for info in chunk:
                    topics.setdefault(info.topic, []).append(info.partition)
                request = build(request_class(ApiKey.DESCRIBE_PRODUCERS, version), {
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
                answer = conn.call(ApiKey.DESCRIBE_PRODUCERS, version, request)
                for t in answer.topics:
                    for p in t.partitions:
                        code = _code(p.error_code)
                        if code != 0:
                            raise CliError(_producers_error(t.name, int(p.partition_index), code, p.error_message,
                                                            conn.label, broker_id is not None))
                        out[(t.name, int(p.partition_index))] = [
                            ProducerState(int(s.producer_id), int(s.producer_epoch), int(s.coordinator_epoch),
                                          int(s.last_sequence), int(s.last_timestamp),
                                          int(s.current_txn_start_offset))
                            for s in p.active_producers]
        return out

    # DescribeLogDirs
    def replica_sizes(self, partitions: dict[str, list[int]] | None = None) -> dict[tuple[int, str, int], int]:
        """Bytes each broker holds of each replica, {(broker id, topic, partition): size} over its log
        directories (future replicas left out), for `partitions` ({topic: [partition, ...]}; None: all)."""
        if not self.nodes:
            self.metadata([])
        topics = None if partitions is None else [{"topic": t, "partitions": ps} for t, ps in partitions.items()]
        out: dict[tuple[int, str, int], int] = {}
        for node_id in sorted(self.nodes):
            conn = self.connection(node_id)
            version = conn.version(ApiKey.DESCRIBE_LOG_DIRS)
            answer = conn.call(ApiKey.DESCRIBE_LOG_DIRS, version,
                               build(request_class(ApiKey.DESCRIBE_LOG_DIRS, version), {"topics": topics}))
            code = _code(getattr(answer, "error_code", 0))
            if code != 0:
                raise CliError(f"{conn.label} refused DescribeLogDirs: {error_name(code)}")
            for result in answer.results:
                for t in result.topics:
                    for p in t.partitions:
                        if not p.is_future_key:
                            key = (node_id, t.name, int(p.partition_index))
                            out[key] = out.get(key, 0) + int(p.partition_size)
        return out

    # WriteTxnMarkers
    def abort(self, info: PartitionInfo, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Write an abort marker for `producer_id` into the partition (as its leader), closing its open
        transaction there: what Kafka's Admin.abortTransaction sends."""
        conn = self.connection(self._leader(info))
        version = conn.version(ApiKey.WRITE_TXN_MARKERS)
        request = build(request_class(ApiKey.WRITE_TXN_MARKERS, version), {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
            "topics": [{"name": info.topic, "partition_indexes": [info.partition]}],
            "coordinator_epoch": max(coordinator_epoch, 0)}]})
        answer = conn.call(ApiKey.WRITE_TXN_MARKERS, version, request)
        for marker in answer.markers:
            for t in marker.topics:
                for p in t.partitions:
                    code = _code(p.error_code)
                    if code != 0:
                        raise CliError(_marker_error(info, producer_id, producer_epoch, coordinator_epoch, code,
                                                     conn.label))


def _chunks(items: list[PartitionInfo], size: int) -> Iterator[list[PartitionInfo]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _producers_error(topic: str, partition: int, code: int, message: str | None, label: str,
                     named_broker: bool) -> str:
    where = f"{topic}-{partition}"
    if code == ErrorCode.unknown_topic_or_partition:
        return f"{label} has no partition {where}" + (
            "; name a broker holding a replica (pylog topics describe --topic " + topic + ")" if named_broker else "")
    if code == ErrorCode.not_leader_or_follower:
        return (f"{label} is not a replica of {where}" if named_broker else
                f"{label} is no longer the leader of {where}; run the command again")
    detail = f" ({message})" if message else ""
    return f"cannot describe the producers of {where} on {label}: {error_name(code)}{detail}"


def _marker_error(info: PartitionInfo, producer_id: int, epoch: int, coordinator_epoch: int, code: int,
                  label: str) -> str:
    where = f"{info.topic}-{info.partition}"
    what = f"cannot abort the transaction of producer {producer_id} in {where} on {label}: {error_name(code)}"
    if code == ErrorCode.invalid_producer_epoch:
        return (f"{what}; epoch {epoch} is older than the producer's (see pylog transactions describe-producers "
                f"--topic {info.topic} --partition {info.partition})")
    if code == ErrorCode.transaction_coordinator_fenced:
        return (f"{what}; coordinator epoch {coordinator_epoch} is older than the partition's "
                f"(see LatestCoordinatorEpoch in pylog transactions describe-producers)")
    if code == ErrorCode.not_leader_or_follower:
        return f"{what}; the leader moved, run the command again"
    return what
