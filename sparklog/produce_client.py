"""Executor side: the sink's own Produce client (blocking sockets, plain TCP), over `kafka_client`.

Owns sending encoded record batches (`record_encoder`) to partition leaders: InitProducerId for an
idempotent producer, per-partition sequences, Produce requests carrying at most one batch per
partition (Kafka's rule for v3+) and several partitions per request up to max.request.size, acks,
retries and the errors users see. Record sets go out as they were encoded (`send_frame` sends the
pieces in place).

Invariants:
- per partition, batches are sent strictly in order and one at a time: a batch is sent only after
  the one before it was acknowledged, so a retry never reorders;
- a retried batch is the same bytes with the same producer id, epoch and sequence, so the broker
  drops it as a duplicate if an earlier attempt was appended (idempotence: retries after
  NOT_LEADER_OR_FOLLOWER, timeouts or a dropped connection never duplicate);
- a batch not acknowledged within delivery.timeout.ms, or refused with a non-retriable error,
  raises `ProduceError` naming the topic-partition and Kafka's error.
Never encodes records and never decides which partition a row goes to.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Optional

from kio.schema.errors import ErrorCode

from kafka_protocol.topic_partition import TopicPartition
from sparklog.errors import UserError
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.client_codec import init_producer_id_request
from kafka_protocol.produce_codec import encode_produce_request
from kafka_protocol.security.client_settings import ClientSecurity
from sparklog.kafka_client import BrokerUnavailableError, ClientConfig, KafkaClient, KafkaClientError, PartitionError

log = logging.getLogger(__name__)

# Kafka's retriable produce errors (RetriableException subclasses), and what counts as delivered.
UNKNOWN_TOPIC_OR_PARTITION = 3
MISSING_TOPIC_GRACE_S = 2.0   # a topic just created elsewhere may take a moment to reach every broker
RETRIABLE = frozenset({3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 51, 56, 74, 75, 78, 89})
NONE, DUPLICATE_SEQUENCE_NUMBER = 0, 46
REQUEST_OVERHEAD = 512      # request header, topic names and partition entries, generously


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error code {code}"


@dataclass(frozen=True)
class ProducerConfig:
    """Everything that shapes the sink's producer (built by `client_configs.native_producer`)."""

    bootstrap_servers: str
    client_id: str = "pylog-sink"
    acks: int = -1
    idempotent: bool = True
    codec: int = 0
    batch_bytes: int = 1_000_000
    max_request_bytes: int = 1_048_576
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100
    allow_auto_create: bool = True    # allow.auto.create.topics, the Java producer's default
    security: ClientSecurity = ClientSecurity()

    @property
    def max_batch_bytes(self) -> int:
        """A batch always fits in one request."""
        return max(1, min(self.batch_bytes, self.max_request_bytes - REQUEST_OVERHEAD))

    def client(self) -> ClientConfig:
        return ClientConfig(bootstrap_servers=self.bootstrap_servers, client_id=self.client_id,
                            request_timeout_ms=self.request_timeout_ms, security=self.security)


class ProduceError(UserError, RuntimeError):
    """Records of one topic-partition could not be delivered; the message says why."""

    def __init__(self, topic: str, partition: int, message: str, code: int = -1) -> None:
        where = f"{topic}-{partition}" if partition >= 0 else f"topic {topic}"
        super().__init__(f"pylog sink: producing to {where} failed: {message}")
        self.topic, self.partition, self.code = topic, partition, code


@dataclass
class _Batch:
    data: Any
    records: int
    first_try: float = 0.0
    last_error: str = ""


class ProduceClient:
    """One task's producer: enqueue encoded batches per partition, `flush` sends them all."""

    def __init__(self, config: ProducerConfig) -> None:
        self.config = config
        self.client = KafkaClient(config.client())
        self.producer_id, self.producer_epoch = -1, -1
        self.transactional_id: Optional[str] = None     # a transactional producer's (use_producer)
        self._sequences: dict[TopicPartition, int] = {}
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self.delivered = 0

    # --- set-up ------------------------------------------------------------------------------------

    def _retrying(self, what: str, topic: str, attempt: Any) -> Any:
        """Run `attempt` until it succeeds, a non-retriable error, or delivery.timeout.ms."""
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        while True:
            try:
                return attempt()
            except BrokerUnavailableError as e:
                self.client.close()
                last = str(e)
            except PartitionError as e:
                if e.code not in RETRIABLE:
                    raise ProduceError(topic, e.partition, f"{what}: {error_name(e.code)}", e.code) from None
                last = error_name(e.code)
            if time.monotonic() > deadline:
                raise ProduceError(topic, -1, f"{what} did not succeed within delivery.timeout.ms "
                                              f"({self.config.delivery_timeout_ms} ms): {last}")
            time.sleep(self.config.retry_backoff_ms / 1000)

    def init_producer(self) -> None:
        """An idempotent producer's id and epoch (InitProducerId), before anything is encoded."""
        if not self.config.idempotent or self.config.acks != -1:
            return

        def attempt() -> None:
            conn = self.client.any_connection()
            version = conn.versions.get(ApiKey.INIT_PRODUCER_ID)
            if version is None:
                raise ProduceError("*", -1, f"{conn.address} does not answer InitProducerId (API 22), which an "
                                            "idempotent producer needs; set kafka.enable.idempotence=false")
            answer = conn.call(ApiKey.INIT_PRODUCER_ID, version, init_producer_id_request(version, 60_000))
            if answer.error_code.value != NONE:
                raise PartitionError("*", -1, answer.error_code.value)
            self.producer_id, self.producer_epoch = int(answer.producer_id), int(answer.producer_epoch)

        self._retrying("InitProducerId", "*", attempt)

    def use_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> None:
        """A transactional producer's id and epoch (from its InitProducerId): sequences start again at 0."""
        self.transactional_id = transactional_id
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._sequences.clear()

    def partitions(self, topic: str) -> int:
        """How many partitions `topic` has (Metadata). A missing topic is created by a broker that allows it, as
        Kafka's producer asks (allow.auto.create.topics); a broker that does not fails in seconds naming it."""
        missing_since: list[float] = []

        def attempt() -> int:
            errors = self.client.refresh_metadata(topic, self.config.allow_auto_create)
            if errors.get(-1) == UNKNOWN_TOPIC_OR_PARTITION:
                missing_since.append(time.monotonic())
                if missing_since[-1] - missing_since[0] >= MISSING_TOPIC_GRACE_S:
                    raise ProduceError(topic, -1, f"topic '{topic}' does not exist on {self.config.bootstrap_servers}"
                                       + (" and the broker does not create topics on use "
                                          "(auto.create.topics.enable=false)" if self.config.allow_auto_create else
                                          " (kafka.allow.auto.create.topics=false)")
                                       + f": create it first, e.g. pylog topics create {topic} --bootstrap-server "
                                       f"{self.config.bootstrap_servers.split(',')[0]}", UNKNOWN_TOPIC_OR_PARTITION)
            if -1 in errors:
                raise PartitionError(topic, -1, errors[-1])
            return len(errors)
        return int(self._retrying("Metadata", topic, attempt))

    # --- batches -----------------------------------------------------------------------------------

    def take_sequence(self, topic: str, partition: int, records: int) -> int:
        """The base sequence of the next `records` records of a partition (-1 without idempotence)."""
        if self.producer_id < 0:
            return -1
        tp = (topic, partition)
        base = self._sequences.get(tp, 0)
        self._sequences[tp] = (base + records) % 2**31
        return base

    def enqueue(self, topic: str, partition: int, data: Any, records: int) -> None:
        self._queues.setdefault((topic, partition), deque()).append(_Batch(data, records))

    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def flush(self) -> None:
        """Send every queued batch; returns when all are acknowledged (or sent, with acks=0)."""
        while any(self._queues.values()):
            if not self._send_round():
                time.sleep(self.config.retry_backoff_ms / 1000)

    def _send_round(self) -> bool:
        """One request per leader with the head batch of each ready partition; False when any failed."""
        by_leader: dict[int, list[TopicPartition]] = {}
        ok = True
        now = time.monotonic()
        for tp, queue in self._queues.items():
            if not queue:
                continue
            head = queue[0]
            head.first_try = head.first_try or now
            self._check_deadline(tp, head, now)
            try:
                by_leader.setdefault(self.client.leader(*tp).node_id, []).append(tp)
            except PartitionError as e:
                self._failed(tp, head, e.code, "")
                ok = False
            except BrokerUnavailableError as e:
                head.last_error = str(e)
                self.client.close()
                return False
        for tps in by_leader.values():
            ok = self._send_request(tps) and ok
        return ok

    def _check_deadline(self, tp: TopicPartition, head: _Batch, now: float) -> None:
        if now - head.first_try > self.config.delivery_timeout_ms / 1000:
            raise ProduceError(tp[0], tp[1], f"{head.records} record(s) not acknowledged within delivery.timeout.ms "
                                             f"({self.config.delivery_timeout_ms} ms); last error: "
                                             f"{head.last_error or 'none'}")

    def _failed(self, tp: TopicPartition, head: _Batch, code: int, message: str) -> None:
        detail = error_name(code) + (f" ({message})" if message else "")
        if code not in RETRIABLE:
            hint = ""
            if code == 10:
                hint = "; a batch is larger than the topic's max.message.bytes: lower kafka.batch.size"
            raise ProduceError(tp[0], tp[1], f"the broker refused {head.records} record(s): {detail}{hint}", code)
        head.last_error = detail
        self.client.forget_leader(*tp)

    def _send_request(self, tps: list[TopicPartition]) -> bool:
        room = self.config.max_request_bytes - REQUEST_OVERHEAD
        chosen: list[TopicPartition] = []
        for tp in tps:
            size = len(self._queues[tp][0].data)
            if chosen and size > room:
                continue                     # next round
            chosen.append(tp)
            room -= size + 16
        try:
            conn = self.client.leader_connection(*chosen[0])
            version = conn.versions.get(ApiKey.PRODUCE)
            if version is None:
                raise KafkaClientError(f"{conn.address} does not answer Produce in versions 3-9")
            topics: dict[str, list[tuple[int, Any]]] = {}
            for t, p in chosen:
                topics.setdefault(t, []).append((p, self._queues[(t, p)][0].data))
            correlation_id = conn.next_correlation_id()
            conn.send_frame(encode_produce_request(version, correlation_id, self.config.client_id, self.config.acks,
                                                   self.config.request_timeout_ms, list(topics.items()),
                                                   self.transactional_id))
            if self.config.acks == 0:       # the broker does not answer
                for tp in chosen:
                    self._delivered(tp)
                return True
            answer = conn.receive(ApiKey.PRODUCE, version, correlation_id)
        except BrokerUnavailableError as e:
            for tp in chosen:
                self._queues[tp][0].last_error = str(e)
                self.client.forget_leader(*tp)
            self.client.close()
            return False
        return self._handle(chosen, answer)

    def _handle(self, chosen: list[TopicPartition], answer: Any) -> bool:
        results = {(t.name, r.index): r for t in answer.responses for r in t.partition_responses}
        ok = True
        for tp in chosen:
            r = results.get(tp)
            if r is None:
                raise ProduceError(tp[0], tp[1], "the broker's Produce response leaves this partition out")
            code = r.error_code.value
            if code in (NONE, DUPLICATE_SEQUENCE_NUMBER):
                self._delivered(tp)
                continue
            message = getattr(r, "error_message", None) or ""
            errors = getattr(r, "record_errors", ())
            if errors:
                message += f"; record {errors[0].batch_index}: {errors[0].batch_index_error_message}"
            self._failed(tp, self._queues[tp][0], code, message)
            ok = False
        return ok

    def _delivered(self, tp: TopicPartition) -> None:
        self.delivered += self._queues[tp].popleft().records

    def close(self) -> None:
        self.client.close()
