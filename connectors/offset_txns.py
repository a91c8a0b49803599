"""How source offsets and batch markers are stored in a Delta table: as `txn` actions.

A Delta `txn` action is (appId, version) and survives log checkpoints and log cleanup, unlike
commitInfo. Each commit of the sink carries:
  - the batch marker      `<app id>` (generation 0) or `<app id>#<generation>` → batch id;
  - the generation        `pylog.generation:<app id>` → generation;
  - one offset per source topic-partition `pylog.offsets:["<app id>","<topic>",<partition>]` → next offset.
Pure functions only: no I/O.
"""
from __future__ import annotations

import json
from typing import Mapping

OFFSETS_PREFIX = "pylog.offsets:"
GENERATION_PREFIX = "pylog.generation:"

Offsets = dict[str, dict[int, int]]


def marker_app_id(app_id: str, generation: int) -> str:
    return app_id if generation == 0 else f"{app_id}#{generation}"


def generation_app_id(app_id: str) -> str:
    return GENERATION_PREFIX + app_id


def offset_app_id(app_id: str, topic: str, partition: int) -> str:
    return OFFSETS_PREFIX + json.dumps([app_id, topic, int(partition)], separators=(",", ":"))


def offsets_to_txns(app_id: str, offsets: Mapping[str, Mapping[int | str, int]]) -> dict[str, int]:
    """{txn app id: version} for a batch's end offsets."""
    out = {}
    for topic, parts in offsets.items():
        for partition, offset in parts.items():
            if int(offset) < 0:
                raise ValueError(f"offset {offset} of {topic}-{partition} is not a concrete offset")
            out[offset_app_id(app_id, topic, int(partition))] = int(offset)
    return out


def offsets_from_txns(txns: Mapping[str, int], app_id: str) -> Offsets:
    """The offsets stored for `app_id` among a table's txn actions, as {topic: {partition: next offset}}."""
    out: Offsets = {}
    for key, version in txns.items():
        if not key.startswith(OFFSETS_PREFIX):
            continue
        try:
            owner, topic, partition = json.loads(key[len(OFFSETS_PREFIX):])
        except (ValueError, TypeError):
            continue
        if owner == app_id:
            out.setdefault(topic, {})[int(partition)] = int(version)
    return {t: dict(sorted(p.items())) for t, p in sorted(out.items())}


def apps_in(txns: Mapping[str, int]) -> list[str]:
    """App ids that have stored offsets in the table."""
    apps = set()
    for key in txns:
        if key.startswith(OFFSETS_PREFIX):
            try:
                apps.add(json.loads(key[len(OFFSETS_PREFIX):])[0])
            except (ValueError, TypeError, IndexError):
                continue
    return sorted(apps)


def to_starting_offsets_json(offsets: Offsets) -> str:
    """Spark Kafka connector `startingOffsets` JSON: {"topic": {"0": 23}}."""
    return json.dumps({t: {str(p): o for p, o in parts.items()} for t, parts in offsets.items()}, sort_keys=True)


def parse_offsets_json(text: str) -> Offsets:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object of topics, got {text!r}")
    return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in data.items()}


def covers(committed: Offsets, end: Offsets) -> bool:
    """True when every partition of `end` is already committed at or beyond its end offset."""
    if not end:
        return False
    return all(committed.get(t, {}).get(p, -1) >= o for t, parts in end.items() for p, o in parts.items())
