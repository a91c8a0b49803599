"""The exactly-once invariant every commit keeps: a batch starts where the table says its app stopped.

The table's offsets are the truth (connectors.offset_txns: one `pylog.offsets` txn per partition, the
next offset of the app's data there, with the topic ids they were taken from). A batch that read
[start, end) of some partitions may be committed only if, on the snapshot it commits against:
  - each partition it started from (its start: the previous batch's end, or the query's origin) starts
    at the offset the table stores for the app;
  - each partition it read without a start (new to the query: an added partition, a topic that appeared)
    is one the table stores nothing for: a source reads such a partition from its log start, which would
    repeat whatever another writer of the app already stored.
A stored offset of another incarnation of the topic (its stored topic id differs from the batch's: the
topic was deleted and created again) does not count: that log is gone. A generation's claim
(connectors.delta_commit.claim_generation) stores the generation's declared start, so a new generation's
first batch is held to it. An overwrite (reprocess replace) replaces the rows the offsets describe and is
guarded by its read version instead.

Whether a batch is a replay is decided before this, by its identity (app id, generation, batch id); this
is the second check beside it. Every engine and job calls `check` on the snapshot it commits against:
the delta-rs commit (connectors.delta_commit), the delta-spark transaction (connectors.delta_spark_commit).
Pure: the stored offsets come in as values.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from connectors.errors import NotContiguousError
from sparklog.offsets import PartitionOffsets, TopicPartition, format_tp

RESTART_JOB = ("restart the job (it resumes from the table's offsets), or give this query a new checkpoint and "
               "startingOffsets=OffsetManager(table, app_id).starting_offsets_json()")


@dataclass(frozen=True)
class Stored:
    """What the table holds for one app: offsets, and the ids of the topics they were taken from."""

    offsets: Mapping[TopicPartition, int]
    topic_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Batch:
    """The batch as committed: where it started and ended, and the ids of the topics it read."""

    start: PartitionOffsets
    end: PartitionOffsets
    topic_ids: Mapping[str, str] = field(default_factory=dict)


def _same_log(topic: str, table: Stored, batch: Batch) -> bool:
    a, b = table.topic_ids.get(topic), batch.topic_ids.get(topic)
    return a is None or b is None or a == b


def gaps(batch: Batch, table: Stored) -> dict[TopicPartition, tuple[int | None, int]]:
    """{partition: (batch start or None for a partition new to the batch, table's offset)} where they differ."""
    out: dict[TopicPartition, tuple[int | None, int]] = {}
    for tp in sorted(set(batch.start) | set(batch.end)):
        have = table.offsets.get(tp)
        if have is None or not _same_log(tp[0], table, batch):
            continue
        if tp not in batch.start:
            out[tp] = (None, have)
        elif batch.start[tp] != have:
            out[tp] = (batch.start[tp], have)
    return out


def describe(app_id: str, batch: str, found: Mapping[TopicPartition, tuple[int | None, int]], hint: str) -> str:
    """One line: which partitions of which batch do not line up, and what to do."""
    def one(tp: TopicPartition, s: int | None, t: int) -> str:
        if s is None:
            return f"{format_tp(tp)} is new to this query (read from its log start) but the table's offset is {t}"
        return f"{format_tp(tp)} starts at {s} but the table's offset is {t}"

    shown = ", ".join(one(tp, s, t) for tp, (s, t) in list(found.items())[:4])
    more = f" (and {len(found) - 4} more partitions)" if len(found) > 4 else ""
    starts = [(s, t) for s, t in found.values() if s is not None]
    what = ("it would write records the table already holds" if all(s < t for s, t in starts) else
            "it would skip records the table does not hold" if all(s > t for s, t in starts) else
            "it would skip some records and repeat others")
    return (f"{batch} of app {app_id} does not start where the table's offsets for the app end: {shown}{more}; "
            f"{what}, so nothing was committed. Another writer of app {app_id} committed since this query "
            f"planned the batch, or the query started from other offsets than the table's: {hint}")


def check(table: str, version: int, app_id: str, name: str, batch: Batch, stored: Stored,
          hint: str = RESTART_JOB) -> None:
    """Raise NotContiguousError naming the table and version unless `batch` lines up with `stored`."""
    found = gaps(batch, stored)
    if found:
        raise NotContiguousError(table, describe(app_id, name, found, hint), version)
