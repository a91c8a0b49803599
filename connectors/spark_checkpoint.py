"""Read what Spark Structured Streaming wrote in a checkpoint: each batch's source offsets and its state.

Spark writes `<checkpoint>/offsets/<batchId>` before running batch N (a version line ("v1"), a
metadata JSON line, then one JSON line per source) and `<checkpoint>/commits/<batchId>` once the sink
committed it. A batch's start is the previous batch's end; the first batch's start is the query's
origin, which the `pylog` source keeps in that batch's end offset (sparklog.offsets.ORIGIN_KEY) and
Spark's own Kafka source in `<checkpoint>/sources/0/0`. Read-only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparklog.offsets import PartitionOffsets, from_offset_dict, origin_of, topic_ids_of


def _local(path: str) -> Path:
    return Path(path[len("file:"):] if path.startswith("file:") else path)


def _log_entry(f: Path) -> list[str]:
    lines = f.read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError(f"{f} is not a Spark metadata log entry")
    return lines


def batch_offsets(checkpoint: str, batch_id: int) -> list[Any]:
    """The per-source end offsets of `batch_id` (parsed JSON, one entry per source); [] when absent."""
    f = _local(checkpoint) / "offsets" / str(batch_id)
    if not f.exists():
        return []
    out = []
    for line in _log_entry(f)[2:]:
        line = line.strip()
        out.append(None if line in ("", "-") else json.loads(line))
    return out


def _batch_ids(checkpoint: str, kind: str) -> list[int]:
    d = _local(checkpoint) / kind
    return sorted(int(f.name) for f in d.iterdir() if f.name.isdigit()) if d.is_dir() else []


@dataclass(frozen=True)
class SourcePosition:
    """Where a batch of the Kafka-style source ended: {(topic, partition): next offset} and topic ids, and
    where it began (None when the checkpoint does not say)."""

    offsets: PartitionOffsets
    topic_ids: dict[str, str]
    start: PartitionOffsets | None = None


def _kafka_source(entries: list[Any]) -> dict[str, Any] | None:
    for src in entries:
        if isinstance(src, dict) and src and all(isinstance(v, dict) for v in src.values()):
            try:
                from_offset_dict(src)
            except (TypeError, ValueError):
                continue
            return src
    return None


def _kafka_initial_offsets(checkpoint: str) -> PartitionOffsets | None:
    """The initial offsets Spark's own Kafka source persisted (`sources/0/0`), if any."""
    f = _local(checkpoint) / "sources" / "0" / "0"
    if not f.exists():
        return None
    try:
        text = f.read_text(errors="replace")   # "\0v1\n" then the JSON (Spark's KafkaSourceInitialOffsetWriter)
        data, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
        return from_offset_dict(data) if isinstance(data, dict) else None
    except (ValueError, TypeError, AttributeError):
        return None


def kafka_position(checkpoint: str, batch_id: int) -> SourcePosition | None:
    """The batch's start and end position of the (single) Kafka-style source, if any."""
    src = _kafka_source(batch_offsets(checkpoint, batch_id))
    if src is None:
        return None
    if batch_id == 0:
        start = origin_of(src)
        if start is None:
            start = _kafka_initial_offsets(checkpoint)
    else:
        before = _kafka_source(batch_offsets(checkpoint, batch_id - 1))
        start = from_offset_dict(before) if before is not None else None
    return SourcePosition(from_offset_dict(src), topic_ids_of(src), start)


@dataclass(frozen=True)
class CheckpointProgress:
    """How far a query's checkpoint got: the last batch planned (offsets/) and the last the sink committed
    (commits/), None when there is none, with the Kafka-style source's end offsets of each."""

    planned: int | None
    committed: int | None
    ends: dict[int, PartitionOffsets]
    origin: PartitionOffsets | None
    topic_ids: dict[int, dict[str, str]] = field(default_factory=dict)   # batch -> the ids its end was taken with


def progress(checkpoint: str) -> CheckpointProgress:
    planned = _batch_ids(checkpoint, "offsets")
    committed = _batch_ids(checkpoint, "commits")
    last_planned = planned[-1] if planned else None
    last_committed = committed[-1] if committed else None
    ends: dict[int, PartitionOffsets] = {}
    ids: dict[int, dict[str, str]] = {}
    for b in {last_planned, last_committed} - {None}:
        assert b is not None
        position = kafka_position(checkpoint, b)
        if position is not None:
            ends[b], ids[b] = position.offsets, position.topic_ids
    first = kafka_position(checkpoint, planned[0]) if planned and planned[0] == 0 else None
    return CheckpointProgress(last_planned, last_committed, ends, first.start if first else None, ids)
