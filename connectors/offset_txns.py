"""How source offsets and batch markers are stored in a Delta table: as `txn` actions.

A Delta `txn` action is (appId, version) and survives log checkpoints and log cleanup, unlike
commitInfo. Each commit of the sink carries:
  - the batch marker      `<app id>` (generation 0) or `<app id>#<generation>` → batch id, or
                          `<app id>#batch` for batch writes (batch_load, a plain `df.write`), which belong
                          to no generation: their own numbering, so they never collide with a stream's;
  - the generation        `pylog.generation:<app id>` → generation (not by batch writes);
  - one offset per source topic-partition `pylog.offsets:["<app id>","<topic>",<partition>]` → next offset;
  - the id of each source topic, where the broker has ids, `pylog.topicId:["<app id>","<topic>","<id>"]`
    → the table version of the commit (a txn holds a number, so the id goes into its name; the entry
    with the highest version is the current one).
`batch_txns` is that set for one commit, whichever engine makes it (delta-rs in connectors.delta_commit,
delta-spark in connectors.delta_spark_commit), so the tables they write read back the same.
`AppState` is what one app has stored, read from one snapshot of the table's txns.
Offsets are sparklog.offsets.PartitionOffsets ((topic, partition) → offset), the one shape of
offsets in the product; their JSON is sparklog.offsets' (Spark's). Pure functions only: no I/O.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from sparklog.offsets import PartitionOffsets, TopicPartition

OFFSETS_PREFIX = "pylog.offsets:"
GENERATION_PREFIX = "pylog.generation:"
TOPIC_ID_PREFIX = "pylog.topicId:"


BATCH_LANE = "batch"


def marker_app_id(app_id: str, generation: int | None) -> str:
    """The batch marker's txn app id: of a stream's generation, or (None) of batch writes."""
    if generation is None:
        return f"{app_id}#{BATCH_LANE}"
    return app_id if generation == 0 else f"{app_id}#{generation}"


def generation_app_id(app_id: str) -> str:
    return GENERATION_PREFIX + app_id


def offset_app_id(app_id: str, topic: str, partition: int) -> str:
    return OFFSETS_PREFIX + json.dumps([app_id, topic, int(partition)], separators=(",", ":"))


def offsets_to_txns(app_id: str, offsets: Mapping[TopicPartition, int]) -> dict[str, int]:
    """{txn app id: version} for a batch's end offsets; each must be a concrete offset (not -1/-2)."""
    out = {}
    for (topic, partition), offset in sorted(offsets.items()):
        if int(offset) < 0:
            raise ValueError(f"offset {offset} of {topic}-{partition} is not a concrete offset")
        out[offset_app_id(app_id, topic, int(partition))] = int(offset)
    return out


def _owned(txns: Mapping[str, int], prefix: str, app_id: str) -> list[tuple[list[Any], int]]:
    """(the JSON fields after the app id, version) of every `prefix[app id, ...]` txn of `app_id`."""
    out = []
    for key, version in txns.items():
        if not key.startswith(prefix):
            continue
        try:
            owner, *rest = json.loads(key[len(prefix):])
        except (ValueError, TypeError):
            continue
        if owner == app_id and len(rest) == 2:
            out.append((rest, int(version)))
    return out


def offsets_from_txns(txns: Mapping[str, int], app_id: str) -> PartitionOffsets:
    """The offsets stored for `app_id` among a table's txn actions: {(topic, partition): next offset}, sorted."""
    return dict(sorted(((str(topic), int(partition)), version)
                       for (topic, partition), version in _owned(txns, OFFSETS_PREFIX, app_id)))


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


def topic_ids_to_txns(app_id: str, topic_ids: Mapping[str, str], table_version: int) -> dict[str, int]:
    """{txn app id: version} recording the source topics' ids in the commit that makes `table_version`."""
    return {TOPIC_ID_PREFIX + json.dumps([app_id, t, i], separators=(",", ":")): table_version
            for t, i in sorted(topic_ids.items())}


def batch_txns(app_id: str, generation: int | None, batch_id: int, end_offsets: Mapping[TopicPartition, int] | None,
               topic_ids: Mapping[str, str], table_version: int) -> dict[str, int]:
    """Every txn of one batch's commit (the one that makes `table_version`): marker, generation (None: a batch
    write, which has none), topic ids and, when known, the end offsets. The same for every engine: the offsets
    model is this, and only this."""
    txns = {marker_app_id(app_id, generation): batch_id, **topic_ids_to_txns(app_id, topic_ids, table_version)}
    if generation is not None:
        txns[generation_app_id(app_id)] = generation
    if end_offsets:
        txns.update(offsets_to_txns(app_id, end_offsets))
    return txns


def topic_ids_from_txns(txns: Mapping[str, int], app_id: str) -> dict[str, str]:
    """{topic: id} last recorded for `app_id` (the entry with the highest table version wins)."""
    best: dict[str, tuple[int, str]] = {}
    for (topic, tid), version in _owned(txns, TOPIC_ID_PREFIX, app_id):
        if topic not in best or version > best[topic][0]:
            best[topic] = (version, str(tid))
    return {t: v[1] for t, v in sorted(best.items())}


@dataclass(frozen=True)
class AppState:
    """What one app id has stored in a table, as of `table_version` (-1: no table or no commit)."""

    table_version: int = -1
    offsets: PartitionOffsets = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    generation: int | None = None
    last_batch: int | None = None     # the batch writes' marker (what batch writers count from)
    markers: dict[int, int] = field(default_factory=dict)   # generation -> its last committed batch

    @classmethod
    def from_txns(cls, table_version: int, txns: Mapping[str, int], app_id: str) -> "AppState":
        # Tables written before batch writes had their own marker kept it in generation 0's.
        last = txns.get(marker_app_id(app_id, None), txns.get(marker_app_id(app_id, 0)))
        markers = {}
        for key, version in txns.items():
            if key == app_id:
                markers[0] = int(version)
            elif key.startswith(app_id + "#") and key[len(app_id) + 1:].isdigit():
                markers[int(key[len(app_id) + 1:])] = int(version)
        return cls(table_version, offsets_from_txns(txns, app_id), topic_ids_from_txns(txns, app_id),
                   txns.get(generation_app_id(app_id)), last, markers)

    def marker(self, generation: int) -> int | None:
        """The last batch of `generation` committed (None: none yet)."""
        return self.markers.get(generation)
