"""Read what Spark Structured Streaming wrote in a checkpoint: the source end offsets of each batch.

Spark writes `<checkpoint>/offsets/<batchId>` before running batch N: a version line ("v1"), a
metadata JSON line, then one JSON line per source (the `pylog` source's carries topic ids too,
see sparklog.offsets.TOPIC_IDS_KEY). Read-only.
"""
from __future__ import annotations

import json
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from sparklog.offsets import TOPIC_IDS_KEY, PartitionOffsets, from_offset_dict


def _local(path: str) -> Path:
    return Path(path[len("file:"):] if path.startswith("file:") else path)


def batch_offsets(checkpoint: str, batch_id: int) -> list[Any]:
    """The per-source end offsets of `batch_id` (parsed JSON, one entry per source); [] when absent."""
    f = _local(checkpoint) / "offsets" / str(batch_id)
    if not f.exists():
        return []
    lines = f.read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError(f"{f} is not a Spark offsets log entry")
    out = []
    for line in lines[2:]:
        line = line.strip()
        out.append(None if line in ("", "-") else json.loads(line))
    return out


@dataclass(frozen=True)
class SourcePosition:
    """Where a batch of the Kafka-style source ended: {(topic, partition): next offset} and topic ids."""

    offsets: PartitionOffsets
    topic_ids: dict[str, str]


def kafka_position(checkpoint: str, batch_id: int) -> SourcePosition | None:
    """The batch's end position of the (single) Kafka-style source, if any."""
    for src in batch_offsets(checkpoint, batch_id):
        if not (isinstance(src, dict) and src and all(isinstance(v, dict) for v in src.values())):
            continue
        try:
            offsets = from_offset_dict(src)
        except (TypeError, ValueError):
            continue
        return SourcePosition(offsets, {str(t): str(i) for t, i in src.get(TOPIC_IDS_KEY, {}).items()})
    return None
