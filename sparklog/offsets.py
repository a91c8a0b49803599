"""Offset specifications and the offset JSON of Spark's Kafka connector.

Owns: the `earliest`/`latest`/JSON/timestamp specs of `startingOffsets`, `endingOffsets`,
`startingTimestamp`, `startingOffsetsByTimestamp`, ...; parsing their JSON with Spark's error
messages; and the streaming offset format `{"topic":{"0":23}}` (partition numbers as strings, -2 for
earliest, -1 for latest), which `<checkpoint>/offsets/<batchId>` holds and the Delta sink reads back.
Never talks to a broker: resolving a spec to numbers is `offset_reader`'s job.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

# the one partition name (kafka_protocol.topic_partition), re-exported: the connectors and jobs use the offsets' names
from kafka_protocol.topic_partition import TopicPartition as TopicPartition
from kafka_protocol.topic_partition import format_tp as format_tp

EARLIEST = -2
LATEST = -1

PartitionOffsets = dict[TopicPartition, int]
TopicIds = dict[str, str]   # topic name -> Kafka topic id (KIP-516), base64 as Kafka prints it

# The streaming offset may carry the topic ids it was taken from under this key, so a re-created
# topic is told apart from the old one after a restart. ':' never occurs in a Kafka topic name.
TOPIC_IDS_KEY = "pylog:topicIds"

# The offsets a query began from (its resolved initial offset) ride in the end offset of its first batch
# under this key. Spark writes that end offset to `<checkpoint>/offsets/0` before it runs the batch, so a
# query killed during its first batch re-runs it from the same start instead of resolving `latest` (or a
# timestamp) afresh, and the Delta sink knows the first batch's start (Spark's Kafka source keeps its
# initial offsets in `<checkpoint>/sources/0/0` for the same reason).
ORIGIN_KEY = "pylog:origin"
_META_KEYS = (TOPIC_IDS_KEY, ORIGIN_KEY)

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_PARTITIONS_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0": 1000, "1": 1000}, "topicB": {"0": 2000, "1": 2000}}'


@dataclass(frozen=True)
class EarliestSpec:
    """Start (or end) at each partition's log start offset."""


@dataclass(frozen=True)
class LatestSpec:
    """Start (or end) at each partition's high watermark."""


@dataclass(frozen=True)
class SpecificOffsetsSpec:
    """Exact offsets per partition; -2 and -1 stand for earliest and latest."""

    offsets: PartitionOffsets


@dataclass(frozen=True)
class GlobalTimestampSpec:
    """`startingTimestamp`/`endingTimestamp`: one timestamp (ms) for every partition."""

    timestamp: int
    strategy: str = "error"  # startingOffsetsByTimestampStrategy: "error" or "latest"


@dataclass(frozen=True)
class SpecificTimestampsSpec:
    """`startingOffsetsByTimestamp`/`endingOffsetsByTimestamp`: a timestamp (ms) per partition."""

    timestamps: PartitionOffsets = field(default_factory=dict)
    strategy: str = "error"


OffsetSpec = Union[EarliestSpec, LatestSpec, SpecificOffsetsSpec, GlobalTimestampSpec, SpecificTimestampsSpec]


def _loads(text: str, example: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        raise ValueError(f"Expected e.g. {example}, got {text}") from None


def _partition_number(raw: str, text: str, example: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"Expected e.g. {example}, got {text}") from None


def parse_partition_offsets(text: str) -> PartitionOffsets:
    """`{"t":{"0":23,"1":-1}}` → {("t", 0): 23, ("t", 1): -1}; Spark's message on anything else."""
    data = _loads(text, _OFFSETS_EXAMPLE)
    if not isinstance(data, dict):
        raise ValueError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {text}")
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {text}")
        for p, off in parts.items():
            if isinstance(off, bool) or not isinstance(off, int):
                raise ValueError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {text}")
            out[(topic, _partition_number(p, text, _OFFSETS_EXAMPLE))] = off
    return out


def parse_partition_timestamps(text: str) -> PartitionOffsets:
    """`{"t":{"0":1700000000000}}` → {("t", 0): 1700000000000}."""
    data = _loads(text, _TIMESTAMPS_EXAMPLE)
    if not isinstance(data, dict):
        raise ValueError(f"Expected e.g. {_TIMESTAMPS_EXAMPLE}, got {text}")
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(f"Expected e.g. {_TIMESTAMPS_EXAMPLE}, got {text}")
        for p, ts in parts.items():
            if isinstance(ts, bool) or not isinstance(ts, int):
                raise ValueError(f"Expected e.g. {_TIMESTAMPS_EXAMPLE}, got {text}")
            out[(topic, _partition_number(p, text, _TIMESTAMPS_EXAMPLE))] = ts
    return out


def parse_partitions(text: str) -> list[TopicPartition]:
    """The `assign` option: `{"t":[0,1]}` → [("t", 0), ("t", 1)]."""
    data = _loads(text, _PARTITIONS_EXAMPLE)
    if not isinstance(data, dict):
        raise ValueError(f"Expected e.g. {_PARTITIONS_EXAMPLE}, got {text}")
    out: list[TopicPartition] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise ValueError(f"Expected e.g. {_PARTITIONS_EXAMPLE}, got {text}")
        out.extend((topic, p) for p in parts)
    return out


def to_offset_dict(offsets: Mapping[TopicPartition, int], topic_ids: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Partition offsets → the streaming offset, `{"topic": {"0": 23}}`, topics and partitions sorted.

    With `topic_ids`, the ids of the topics present are added under TOPIC_IDS_KEY.
    """
    out: dict[str, Any] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    ids = {t: topic_ids[t] for t in sorted(out) if topic_ids and topic_ids.get(t)}
    if ids:
        out[TOPIC_IDS_KEY] = ids
    return out


def from_offset_dict(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """The streaming offset `{"topic": {"0": 23}}` → {("topic", 0): 23} (topic ids left out)."""
    return {(topic, int(p)): int(off) for topic, parts in data.items() if topic not in _META_KEYS
            for p, off in parts.items()}


def topic_ids_of(data: Mapping[str, object]) -> TopicIds:
    """The topic ids a streaming offset carries ({} when it has none, e.g. one written by Spark's Kafka source)."""
    ids = data.get(TOPIC_IDS_KEY)
    return {str(t): str(i) for t, i in ids.items()} if isinstance(ids, dict) else {}


def origin_of(data: Mapping[str, object]) -> PartitionOffsets | None:
    """The query's origin a streaming offset carries (ORIGIN_KEY), or None."""
    origin = data.get(ORIGIN_KEY)
    return from_offset_dict(origin) if isinstance(origin, dict) else None


def with_origin(data: Mapping[str, Any], origin: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """`data` (a streaming offset) carrying `origin` as the offsets its query began from."""
    return {**data, ORIGIN_KEY: to_offset_dict(origin)}


def to_json(offsets: Mapping[TopicPartition, int]) -> str:
    """Spark Kafka's compact JSON form, e.g. `{"t":{"0":23,"1":-1}}`."""
    return json.dumps(to_offset_dict(offsets), separators=(",", ":"))


def from_json(text: str) -> PartitionOffsets:
    return parse_partition_offsets(text)


