"""Executor side: a minimal blocking Kafka client that keeps Fetch record sets as bytes.

Owns the sockets of the native read path (and of the sink's producer, `produce_client`): connecting
to the bootstrap servers and to partition leaders, negotiating versions with ApiVersions, Metadata
(leaders), ListOffsets and Fetch; sending frames built elsewhere (Produce). Every
message goes through the protocol layer's sans-I/O codecs (`kafka_protocol.client_codec` and
`fetch_response`), so this module only moves frames. A Fetch answer's record set is a `memoryview`
of the received frame: no per-record object, no copy.

Security as the Java client's settings say (`ClientConfig.security`, kafka_protocol.security): TLS
wraps the socket (file regions are then sent as bytes), a SASL login (PLAIN, SCRAM-SHA-256/512) follows
ApiVersions, and a session lifetime the broker grants (KIP-368) is renewed on the same connection
before it ends. A refused login or TLS handshake raises `KafkaClientError` (not retriable) naming the
setting to check. Never interprets records and never decides what to do about an error code: the reader does.
Connection failures raise `BrokerUnavailableError`; a broker answering nonsense raises
`KafkaClientError`. One client is used by one task at a time (see `client_pool`).
"""
from __future__ import annotations

import functools
import itertools
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any, Optional

from kafka_protocol import fetch_request
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.fetch_request import FetchPartition
from kafka_protocol.builder import build
from kafka_protocol.client_codec import (
    ResponseError,
    decode_response,
    encode_request,
    find_coordinator_request,
    list_offsets_request,
    log_dirs_request,
    metadata_request,
    request_class,
    response_body_start,
)
from kafka_protocol.fetch_response import FetchedPartition, FetchResponseError, decode_fetch_response
from kafka_protocol.security.client_login import AuthenticationError, login
from kafka_protocol.security.client_settings import ClientSecurity

# The versions this client speaks; the highest one the broker also speaks is used. Fetch stops at
# v12, the last version that names topics (v13+ address them by topic id). DescribeLogDirs is
# optional (only maxBytesPerTrigger needs it), and so are Produce and InitProducerId (only the sink).
SUPPORTED = {ApiKey.FETCH: (4, 12), ApiKey.LIST_OFFSETS: (1, 7), ApiKey.METADATA: (4, 12), ApiKey.API_VERSIONS: (0, 0)}
OPTIONAL = {ApiKey.DESCRIBE_LOG_DIRS: (1, 4), ApiKey.PRODUCE: (3, 9), ApiKey.INIT_PRODUCER_ID: (0, 4),
            # the exactly-once sink's transactions (sparklog.transactional_producer)
            ApiKey.FIND_COORDINATOR: (1, 4), ApiKey.ADD_PARTITIONS_TO_TXN: (1, 3),
            ApiKey.ADD_OFFSETS_TO_TXN: (1, 3), ApiKey.END_TXN: (1, 3), ApiKey.TXN_OFFSET_COMMIT: (2, 3),
            ApiKey.OFFSET_FETCH: (7, 7),
            # SASL logins (required when the connection is SASL_*)
            ApiKey.SASL_HANDSHAKE: (1, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}
REAUTHENTICATE_AT = 0.85        # of a session's lifetime, as Kafka's clients do (KIP-368: 85-95 %)
EARLIEST, LATEST = -2, -1
MAX_RESPONSE_BYTES = 1 << 30
_SIZE = struct.Struct(">i")
NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 0, 3, 5


class KafkaClientError(RuntimeError):
    """A broker's answer cannot be used (malformed, unsupported versions, unknown partition)."""


class BrokerUnavailableError(KafkaClientError):
    """A broker cannot be reached or dropped the connection: retriable."""


@dataclass(frozen=True)
class ClientConfig:
    """Everything that shapes a client; hashable, so it keys the per-worker pool."""

    bootstrap_servers: str
    client_id: str = "pylog-executor"
    request_timeout_ms: int = 30_000
    read_committed: bool = False
    fetch_max_bytes: int = 64 * 1024 * 1024
    partition_max_bytes: int = 8 * 1024 * 1024
    fetch_max_wait_ms: int = 100
    security: ClientSecurity = ClientSecurity()
    client_rack: str = ""       # client.rack: a leader may send the Fetch to a replica in this rack (KIP-392)


@functools.lru_cache(maxsize=8)
def _tls_context(security: ClientSecurity) -> ssl.SSLContext | None:
    """One TLS context per security settings in this process (loading the trust store is not free)."""
    return security.ssl_context()


def parse_servers(servers: str) -> list[tuple[str, int]]:
    """`host:port,host:port` (IPv6 hosts in brackets) as (host, port) pairs."""
    out = []
    for item in filter(None, (s.strip() for s in servers.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers")
    return out


class BrokerConnection:
    """One blocking TCP connection to one broker: a request out, its response in, one at a time."""

    def __init__(self, host: str, port: int, config: ClientConfig) -> None:
        self.address = f"{host}:{port}"
        self.config = config
        self._ids = itertools.count(1)
        try:
            sock = socket.create_connection((host, port), timeout=config.request_timeout_ms / 1000)
        except OSError as e:
            raise BrokerUnavailableError(f"cannot connect to {self.address}: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock: socket.socket = sock
        security = config.security
        if security.tls:
            context = _tls_context(security)
            assert context is not None
            try:
                self._sock = context.wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as e:
                sock.close()
                raise KafkaClientError(f"the TLS certificate of {self.address} is not trusted ({e.verify_message}): "
                                       f"check kafka.ssl.truststore.location (the CA that signed the broker's "
                                       f"certificate) and that the broker's certificate names {host}") from None
            except (ssl.SSLError, OSError) as e:
                sock.close()
                raise KafkaClientError(f"TLS handshake with {self.address} failed: {e}; check "
                                       f"kafka.security.protocol and the kafka.ssl.* settings") from None
        self.versions: dict[int, int] = {}
        self._session_renew_at: float | None = None
        self._negotiate()
        if security.sasl:
            self._login()

    def _login(self) -> None:
        for key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            if key not in self.versions:
                raise KafkaClientError(f"{self.address} does not speak SASL ({key.name} missing from its ApiVersions): "
                                       f"check kafka.security.protocol")
        security = self.config.security
        self._session_renew_at = None
        try:
            lifetime_ms = login(self.call, security, self.versions[ApiKey.SASL_AUTHENTICATE])
        except AuthenticationError as e:
            self.close()
            raise KafkaClientError(f"{self.address}: {e} (user {security.username}, mechanism {security.mechanism}); "
                                   f"check kafka.sasl.jaas.config and kafka.sasl.mechanism") from None
        if lifetime_ms > 0:
            self._session_renew_at = time.monotonic() + lifetime_ms * REAUTHENTICATE_AT / 1000.0

    def _renew_session(self) -> None:
        """KIP-368: log in again on this connection before the broker's session lifetime ends."""
        if self._session_renew_at is not None and time.monotonic() >= self._session_renew_at:
            self._login()

    def _negotiate(self) -> None:
        """Pick, per API, the highest version both sides speak (ApiVersions v0 is understood by all)."""
        cls = request_class(ApiKey.API_VERSIONS, 0)
        answer = self.call(ApiKey.API_VERSIONS, 0, cls())
        if answer.error_code.value != NONE:
            raise KafkaClientError(f"{self.address} refused ApiVersions: {answer.error_code.name}")
        offered = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
        for key, (low, high) in [*SUPPORTED.items(), *OPTIONAL.items()]:
            theirs = offered.get(key)
            if theirs is None or theirs[0] > high or theirs[1] < low:
                if key in OPTIONAL:
                    continue
                raise KafkaClientError(f"{self.address} speaks API {key} in versions {theirs}, this client in "
                                       f"{low}-{high}")
            self.versions[key] = min(high, theirs[1])

    def _send(self, api_key: int, version: int, body: Any) -> int:
        if api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            self._renew_session()
        correlation_id = next(self._ids)
        try:
            self._sock.sendall(encode_request(api_key, version, correlation_id, self.config.client_id, body))
        except OSError as e:
            raise BrokerUnavailableError(f"sending to {self.address} failed: {e}") from None
        return correlation_id

    def _receive(self) -> memoryview:
        size = self._read_exactly(4)
        (n,) = _SIZE.unpack(size)
        if not 4 <= n <= MAX_RESPONSE_BYTES:
            raise KafkaClientError(f"{self.address} announced a response of {n} bytes")
        return self._read_exactly(n)

    def _read_exactly(self, n: int) -> memoryview:
        buf = memoryview(bytearray(n))
        got = 0
        try:
            while got < n:
                k = self._sock.recv_into(buf[got:])
                if k == 0:
                    raise BrokerUnavailableError(f"{self.address} closed the connection")
                got += k
        except OSError as e:   # socket.timeout included
            raise BrokerUnavailableError(f"reading from {self.address} failed: {e}") from None
        return buf

    def next_correlation_id(self) -> int:
        return next(self._ids)

    def send_frame(self, parts: list[bytes | memoryview]) -> None:
        """Send a frame built elsewhere (a Produce request: its record sets are sent in place)."""
        self._renew_session()
        if isinstance(self._sock, ssl.SSLSocket):      # TLS has no scatter-gather send
            try:
                self._sock.sendall(b"".join(parts))
            except OSError as e:
                raise BrokerUnavailableError(f"sending to {self.address} failed: {e}") from None
            return
        views = [memoryview(p).cast("B") for p in parts]
        try:
            while views:
                sent = self._sock.sendmsg(views)
                while views and sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                if sent:
                    views[0] = views[0][sent:]
        except OSError as e:
            raise BrokerUnavailableError(f"sending to {self.address} failed: {e}") from None

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        """Read and decode the response to a request sent with `send_frame`."""
        try:
            return decode_response(self._receive(), api_key, version, correlation_id)
        except ResponseError as e:
            raise KafkaClientError(f"{self.address}: {e}") from None

    def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send one request and decode its kio response."""
        correlation_id = self._send(api_key, version, body)
        try:
            return decode_response(self._receive(), api_key, version, correlation_id)
        except ResponseError as e:
            raise KafkaClientError(f"{self.address}: {e}") from None

    def fetch(self, body: Any) -> list[FetchedPartition]:
        """Send a Fetch request; its partitions, record sets as views of the response."""
        version = self.versions[ApiKey.FETCH]
        correlation_id = self._send(ApiKey.FETCH, version, body)
        frame = self._receive()
        try:
            start = response_body_start(frame, ApiKey.FETCH, version, correlation_id)
            response = decode_fetch_response(frame[start:], version)
        except (ResponseError, FetchResponseError) as e:
            raise KafkaClientError(f"{self.address}: {e}") from None
        if response.error_code != NONE:
            raise BrokerUnavailableError(f"{self.address} answered Fetch with error code {response.error_code}")
        return response.partitions

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


@dataclass(frozen=True)
class PartitionLeader:
    node_id: int
    leader_epoch: int


class KafkaClient:
    """Leaders from Metadata, one connection per broker, Fetch (of one partition, or of several in one
    request per leader) and ListOffsets for one partition."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._bootstrap = parse_servers(config.bootstrap_servers)
        self._nodes: dict[int, tuple[str, int]] = {}
        self._leaders: dict[tuple[str, int], PartitionLeader] = {}
        self._topic_ids: dict[str, str] = {}
        self._read_replicas: dict[tuple[str, int], int] = {}    # KIP-392: where a leader sent this client
        self._connections: dict[int, BrokerConnection] = {}
        self._any: Optional[BrokerConnection] = None

    # --- connections and metadata ------------------------------------------------------------------

    def _any_connection(self) -> BrokerConnection:
        if self._connections:
            return next(iter(self._connections.values()))
        if self._any is None:
            errors = []
            for host, port in self._bootstrap:
                try:
                    self._any = BrokerConnection(host, port, self.config)
                    break
                except BrokerUnavailableError as e:
                    errors.append(str(e))
            else:
                raise BrokerUnavailableError("no bootstrap server reachable: " + "; ".join(errors))
        return self._any

    def _connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is None:
            if node_id not in self._nodes:
                raise BrokerUnavailableError(f"broker {node_id} is not in the cluster metadata")
            host, port = self._nodes[node_id]
            conn = self._connections[node_id] = BrokerConnection(host, port, self.config)
        return conn

    def refresh_metadata(self, topic: str, allow_auto_create: bool = False) -> dict[int, int]:
        """Reload the leaders of `topic`; {partition: error code} (UNKNOWN_TOPIC_OR_PARTITION for a missing topic,
        which a broker that allows it creates when `allow_auto_create`, as for Kafka's producers)."""
        conn = self._any_connection()
        version = conn.versions[ApiKey.METADATA]
        try:
            answer = conn.call(ApiKey.METADATA, version, metadata_request(version, topic, allow_auto_create))
        except BrokerUnavailableError:
            self.close()
            raise
        self._nodes.update({b.node_id: (b.host, b.port) for b in answer.brokers})
        errors: dict[int, int] = {}
        for t in answer.topics:
            if t.name != topic:
                continue
            if t.error_code.value != NONE:
                return {-1: t.error_code.value}
            topic_id = getattr(t, "topic_id", None)     # Metadata v10+
            if topic_id is not None and topic_id.int:
                self._topic_ids[topic] = str(topic_id)
            for p in t.partitions:
                errors[p.partition_index] = p.error_code.value
                if p.leader_id >= 0:
                    self._leaders[(topic, p.partition_index)] = PartitionLeader(
                        p.leader_id, getattr(p, "leader_epoch", -1))
                else:
                    self._leaders.pop((topic, p.partition_index), None)
        return errors or {-1: UNKNOWN_TOPIC_OR_PARTITION}

    def topic_id(self, topic: str) -> str | None:
        """The topic's id as the broker names it (Metadata v10+), or None (an older broker, or no such topic)."""
        if topic not in self._topic_ids:
            self.refresh_metadata(topic)
        return self._topic_ids.get(topic)

    def leader(self, topic: str, partition: int) -> PartitionLeader:
        """The partition's leader, from cached metadata or a refresh; KafkaClientError when it has none."""
        found = self._leaders.get((topic, partition))
        if found is None:
            errors = self.refresh_metadata(topic)
            found = self._leaders.get((topic, partition))
            if found is None:
                code = errors.get(partition, errors.get(-1, UNKNOWN_TOPIC_OR_PARTITION))
                raise PartitionError(topic, partition, code or LEADER_NOT_AVAILABLE)
        return found

    def leader_connection(self, topic: str, partition: int) -> BrokerConnection:
        """The connection to the partition's leader (connecting when needed). A leader that cannot be reached
        is forgotten: after it dies, the next attempt asks the cluster again instead of connecting to the
        dead broker until the caller's timeout."""
        leader = self.leader(topic, partition)
        try:
            return self._connection(leader.node_id)
        except BrokerUnavailableError:
            self.forget_leader(topic, partition)
            raise

    def any_connection(self) -> BrokerConnection:
        return self._any_connection()

    def coordinator_connection(self, key: str, key_type: int) -> BrokerConnection:
        """The connection to the coordinator of a group (`key_type` 0) or a transactional id (1);
        PartitionError("*", -1, code) when the cluster names none yet (COORDINATOR_NOT_AVAILABLE, ...)."""
        conn = self._any_connection()
        version = conn.versions.get(ApiKey.FIND_COORDINATOR)
        if version is None:
            raise KafkaClientError(f"{conn.address} does not answer FindCoordinator in versions 1-4")
        answer = conn.call(ApiKey.FIND_COORDINATOR, version, find_coordinator_request(version, key, key_type))
        found = answer.coordinators[0] if version >= 4 else answer
        if found.error_code.value != NONE:
            raise PartitionError("*", -1, found.error_code.value)
        self._nodes[found.node_id] = (found.host, found.port)
        return self._connection(found.node_id)

    def forget_leader(self, topic: str, partition: int) -> None:
        """Drop what is known of a partition's leader (after NOT_LEADER and the like) and its connection."""
        old = self._leaders.pop((topic, partition), None)
        self._read_replicas.pop((topic, partition), None)
        if old is not None and old.node_id in self._connections:
            self._connections.pop(old.node_id).close()

    # --- requests ------------------------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: Optional[int] = None) -> FetchedPartition:
        """One Fetch of one partition at `offset`: from its leader, or from the replica in this client's rack the
        leader named (KIP-392), until that replica fails to serve it (then from the leader again)."""
        tp = (topic, partition)
        for _ in range(3):      # leader, the replica it names, the leader again if that one cannot serve
            replica = self._read_replicas.get(tp)
            try:
                fp = self._fetch_from(replica, topic, partition, offset, max_bytes)
            except BrokerUnavailableError:
                if replica is None:
                    raise
                self._read_replicas.pop(tp, None)
                continue
            if replica is not None and fp.error_code != 0:
                self._read_replicas.pop(tp, None)     # not caught up, or no longer a replica: ask the leader
                continue
            if fp.preferred_read_replica < 0 or fp.preferred_read_replica == replica:
                return fp
            self._read_replicas[tp] = fp.preferred_read_replica
        return fp

    def _fetch_from(self, replica: Optional[int], topic: str, partition: int, offset: int,
                    max_bytes: Optional[int]) -> FetchedPartition:
        conn = self.leader_connection(topic, partition) if replica is None else self._connection(replica)
        part_bytes = max_bytes or self.config.partition_max_bytes
        request = fetch_request.for_consumer(
            conn.versions[ApiKey.FETCH], [FetchPartition(topic, partition, offset, part_bytes)],
            max_wait_ms=self.config.fetch_max_wait_ms, max_bytes=max(self.config.fetch_max_bytes, part_bytes),
            read_committed=self.config.read_committed, rack_id=self.config.client_rack)
        try:
            partitions = conn.fetch(request)
        except BrokerUnavailableError:
            if replica is None:
                self.forget_leader(topic, partition)
            else:
                self._connections.pop(replica, conn).close()
            raise
        for fp in partitions:
            if fp.topic == topic and fp.index == partition:
                return fp
        raise KafkaClientError(f"{conn.address} answered a Fetch of {topic}-{partition} without that partition")

    def fetch_many(self, wanted: list[tuple[str, int, int]], max_bytes: int) -> dict[tuple[str, int], FetchedPartition]:
        """One Fetch per leader for several (topic, partition, offset), at most `max_bytes` per answer
        (the broker fills partitions in order; those left out answer without records). Partitions
        whose leader is unknown are left out. A lost connection raises `BrokerUnavailableError`."""
        by_leader: dict[int, list[tuple[str, int, int]]] = {}
        for topic, partition, offset in wanted:
            found = self._leaders.get((topic, partition))
            if found is None:
                try:
                    found = self.leader(topic, partition)
                except PartitionError:
                    continue
            by_leader.setdefault(found.node_id, []).append((topic, partition, offset))
        out: dict[tuple[str, int], FetchedPartition] = {}
        for node, parts in by_leader.items():
            conn = self._connection(node)
            request = fetch_request.for_consumer(
                conn.versions[ApiKey.FETCH],
                [FetchPartition(t, p, o, self.config.partition_max_bytes) for t, p, o in parts],
                max_wait_ms=self.config.fetch_max_wait_ms, max_bytes=max_bytes,
                read_committed=self.config.read_committed, rack_id=self.config.client_rack)
            try:
                answers = conn.fetch(request)
            except BrokerUnavailableError:
                for topic, partition, _ in parts:
                    self.forget_leader(topic, partition)
                raise
            out.update({(fp.topic, fp.index): fp for fp in answers})
            self._read_replicas.update({(fp.topic, fp.index): fp.preferred_read_replica for fp in answers
                                        if fp.preferred_read_replica >= 0})
        return out

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """The partition's offset for `timestamp` (EARLIEST, LATEST or a time in ms) from its leader."""
        conn = self.leader_connection(topic, partition)
        version = conn.versions[ApiKey.LIST_OFFSETS]
        request = list_offsets_request(version, topic, partition, timestamp, self.config.read_committed)
        try:
            answer = conn.call(ApiKey.LIST_OFFSETS, version, request)
        except BrokerUnavailableError:
            self.forget_leader(topic, partition)
            raise
        for t in answer.topics:
            for r in t.partitions:
                if t.name == topic and r.partition_index == partition:
                    if r.error_code.value != NONE:
                        raise PartitionError(topic, partition, r.error_code.value)
                    return int(r.offset)
        raise KafkaClientError(f"{conn.address} answered ListOffsets of {topic}-{partition} without that partition")

    def log_sizes(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """Bytes each partition holds on its leader's disk (DescribeLogDirs); partitions a leader does
        not report are left out. KafkaClientError when a leader does not speak DescribeLogDirs."""
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            by_leader.setdefault(self.leader(topic, p).node_id, []).append(p)
        sizes: dict[int, int] = {}
        for node, parts in by_leader.items():
            conn = self._connection(node)
            version = conn.versions.get(ApiKey.DESCRIBE_LOG_DIRS)
            if version is None:
                raise KafkaClientError(f"{conn.address} does not answer DescribeLogDirs (API 35)")
            answer = conn.call(ApiKey.DESCRIBE_LOG_DIRS, version, log_dirs_request(version, topic, parts))
            for result in answer.results:
                for t in result.topics:
                    if t.name == topic:
                        for p in t.partitions:
                            if not p.is_future_key:
                                sizes[p.partition_index] = sizes.get(p.partition_index, 0) + int(p.partition_size)
        return sizes

    def close(self) -> None:
        for conn in [*self._connections.values(), *([self._any] if self._any else [])]:
            conn.close()
        self._connections.clear()
        self._any = None


class PartitionError(KafkaClientError):
    """A broker answered for one partition with a Kafka error code."""

    def __init__(self, topic: str, partition: int, code: int) -> None:
        super().__init__(f"{topic}-{partition}: Kafka error code {code}")
        self.topic, self.partition, self.code = topic, partition, code
