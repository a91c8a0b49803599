"""The client's side of the wire: request frames out, response bodies in. Sans I/O.

Owns what a Kafka client (the Spark source's own fetcher, the sink's producer) needs beyond the broker's codecs: the
requests it sends, built for whichever version the broker negotiated (`builder.build` keeps only the
fields that version has), encoding them with a request header v1/v2 into a frame, and reading a
response frame's header and body. Fetch bodies are read by `fetch_response.decode_fetch_response`, so their record
sets stay views of the frame (Produce frames are built by `produce_codec.encode_produce_request`);
every other body through kio, after the same length guard the broker
applies to requests. Knows nothing about sockets.
"""
from __future__ import annotations

import io
import struct
from typing import Any

from kio.serial.errors import DecodeError

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import entity_decoder, entity_encoder, request_schema, response_schema
from kafka_protocol.length_guard import LengthError, check_lengths
from kafka_protocol.varint import VarintError, skip_tagged_fields

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">ihhi")   # size, api key, api version, correlation id


class ResponseError(ValueError):
    """A response that cannot be decoded, or that answers another request."""


def request_class(api_key: int, version: int) -> type:
    cls = request_schema(api_key, version)
    if cls is None:
        raise ValueError(f"no request schema for API key {api_key} v{version}")
    return cls




def offsets_for_leader_epoch_request(version: int, replica_id: int,
                                     partitions: list[tuple[str, int, int, int]]) -> Any:
    """OffsetsForLeaderEpoch: `partitions` are (topic, partition, current leader epoch, epoch to look up)."""
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, partition, current, epoch in partitions:
        topics.setdefault(topic, []).append(
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch})
    return build(request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, version), {
        "replica_id": replica_id, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]})


def metadata_request(version: int, topic: str, allow_auto_create: bool = False) -> Any:
    """Metadata of one topic; `allow_auto_create` lets a broker that allows it create the topic (a producer's)."""
    return build(request_class(ApiKey.METADATA, version), {"topics": [{"name": topic}],
                                                    "allow_auto_topic_creation": allow_auto_create})


def list_offsets_request(version: int, topic: str, partition: int, timestamp: int, read_committed: bool,
                         replica_id: int = -1) -> Any:
    """The offset of one partition for `timestamp` (-2 earliest, -1 latest, or a time in ms); a follower
    (`replica_id` >= 0) gets the leader's log end offset for latest, a consumer its high watermark."""
    return build(request_class(ApiKey.LIST_OFFSETS, version), {
        "replica_id": replica_id, "isolation_level": int(read_committed),
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                   "timestamp": timestamp, "max_num_offsets": 1}]}]})


def init_producer_id_request(version: int, timeout_ms: int, transactional_id: str | None = None,
                             producer_id: int = -1, producer_epoch: int = -1) -> Any:
    """A producer id: for an idempotent producer (no transactional id), or a transactional producer's
    (re)initialisation, which fences any earlier producer of the same transactional id."""
    return build(request_class(ApiKey.INIT_PRODUCER_ID, version), {
        "transactional_id": transactional_id, "transaction_timeout": timeout_ms, "producer_id": producer_id,
        "producer_epoch": producer_epoch})


def find_coordinator_request(version: int, key: str, key_type: int) -> Any:
    """The coordinator of a group (`key_type` 0) or a transactional id (1); v4 asks in a batch of one."""
    return build(request_class(ApiKey.FIND_COORDINATOR, version), {
        "key": key, "key_type": key_type, "coordinator_keys": [key]})


def add_partitions_to_txn_request(version: int, transactional_id: str, producer_id: int, producer_epoch: int,
                                  partitions: list[tuple[str, int]]) -> Any:
    """AddPartitionsToTxn as a producer sends it (v0-3)."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return build(request_class(ApiKey.ADD_PARTITIONS_TO_TXN, version), {
        "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id,
        "v3_and_below_producer_epoch": producer_epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})


def verify_partitions_request(version: int, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: list[tuple[str, int]]) -> Any:
    """AddPartitionsToTxn v4+ as a partition leader sends it: verify only (KIP-890), one transaction."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return build(request_class(ApiKey.ADD_PARTITIONS_TO_TXN, version), {"transactions": [{
        "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
        "verify_only": True, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]})


def add_offsets_to_txn_request(version: int, transactional_id: str, producer_id: int, producer_epoch: int,
                               group_id: str) -> Any:
    return build(request_class(ApiKey.ADD_OFFSETS_TO_TXN, version), {
        "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
        "group_id": group_id})


def txn_offset_commit_request(version: int, transactional_id: str, group_id: str, producer_id: int,
                              producer_epoch: int, offsets: dict[tuple[str, int], tuple[int, str]]) -> Any:
    """TxnOffsetCommit of `offsets` ((topic, partition) -> (offset, metadata)), outside any group generation."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": metadata})
    return build(request_class(ApiKey.TXN_OFFSET_COMMIT, version), {
        "transactional_id": transactional_id, "group_id": group_id, "producer_id": producer_id,
        "producer_epoch": producer_epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})


def end_txn_request(version: int, transactional_id: str, producer_id: int, producer_epoch: int,
                    commit: bool) -> Any:
    return build(request_class(ApiKey.END_TXN, version), {
        "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
        "committed": commit})


def write_txn_markers_request(version: int, markers: list[tuple[int, int, bool, int, list[tuple[str, int]]]]) -> Any:
    """WriteTxnMarkers (a coordinator to a partition leader): each marker is (producer id, producer epoch,
    committed, coordinator epoch, partitions)."""
    entries = []
    for producer_id, epoch, committed, coordinator_epoch, partitions in markers:
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        entries.append({"producer_id": producer_id, "producer_epoch": epoch, "transaction_result": committed,
                        "coordinator_epoch": coordinator_epoch,
                        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
    return build(request_class(ApiKey.WRITE_TXN_MARKERS, version), {"markers": entries})


def offset_fetch_request(version: int, group_id: str, partitions: list[tuple[str, int]],
                         require_stable: bool = False) -> Any:
    """OffsetFetch of one group (v1-7); `require_stable` (v7, KIP-447) waits out open transactions."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return build(request_class(ApiKey.OFFSET_FETCH, version), {
        "group_id": group_id, "require_stable": require_stable,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})


def log_dirs_request(version: int, topic: str, partitions: list[int]) -> Any:
    """DescribeLogDirs of some partitions of one topic (their size on disk)."""
    return build(request_class(ApiKey.DESCRIBE_LOG_DIRS, version), {"topics": [{"topic": topic, "partitions": partitions}]})


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
    """A complete request frame (size prefix included) for a kio request entity of `version`."""
    out = io.BytesIO()
    raw_id = client_id.encode()
    out.write(_HEADER.pack(0, api_key, version, correlation_id))
    out.write(_I16.pack(len(raw_id)) + raw_id)
    cls: type = body.__class__
    if getattr(cls, "__flexible__"):
        out.write(b"\x00")   # request header v2: no tagged fields
    entity_encoder(cls)(out, body)
    frame = out.getbuffer()
    _I32.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def response_body_start(frame: memoryview, api_key: int, version: int, correlation_id: int) -> int:
    """Check the response header of `frame` (without its size prefix); the position of the body."""
    if len(frame) < 4:
        raise ResponseError(f"a response of {len(frame)} bytes has no header")
    (got,) = _I32.unpack_from(frame, 0)
    if got != correlation_id:
        raise ResponseError(f"response to correlation id {got} arrived while waiting for {correlation_id}")
    flexible = getattr(request_class(api_key, version), "__flexible__")
    try:
        return skip_tagged_fields(frame, 4) if flexible and api_key != ApiKey.API_VERSIONS else 4
    except VarintError as e:
        raise ResponseError(f"malformed response header: {e}") from None


def decode_response(frame: memoryview, api_key: int, version: int, correlation_id: int) -> Any:
    """The kio response entity in `frame` (a response frame without its size prefix)."""
    pos = response_body_start(frame, api_key, version, correlation_id)
    schema = response_schema(api_key, version)
    try:
        check_lengths(schema, frame, pos)
        body, _size = entity_decoder(schema)(frame.toreadonly(), pos)
    except (DecodeError, LengthError, struct.error, ValueError, TypeError, IndexError, OverflowError) as e:
        raise ResponseError(f"cannot decode {schema.__name__} v{version}: {e}") from None
    return body
