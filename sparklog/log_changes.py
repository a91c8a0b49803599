"""Is the log a stored offset points into still the log it was taken from? The rule, in one place.

A stored position is an offset per topic-partition plus, where the broker has them (KIP-516), the
topic ids it was read from. Compared with the broker's state now, a partition has changed when:
  - `recreated`: its topic's id differs (deleted and created again, whatever its offsets are now);
  - `offset-reset`: the stored offset is beyond the log end (re-created without ids, or truncated);
  - `aged-out`: the stored offset is below the log start (retention or DeleteRecords removed it);
  - `gone`: the partition no longer exists (topic deleted, not re-created yet).
Every user of stored offsets (the stream source, batch_load, reprocess, the offset manager) asks
this module, so they all agree. Callers report each change with `sparklog.errors.report_data_loss`
(failOnDataLoss) and, when they go on, resume where `resume_offsets` says: the new log's start.
Pure: no I/O, no clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Optional

from sparklog.offsets import PartitionOffsets, TopicPartition, format_tp

ChangeKind = Literal["recreated", "offset-reset", "aged-out", "gone"]


@dataclass(frozen=True)
class LogChange:
    tp: TopicPartition
    kind: ChangeKind
    stored: int                      # the offset the reader had reached in the old log
    earliest: Optional[int] = None   # the log as it is now (None when gone)
    latest: Optional[int] = None
    old_id: Optional[str] = None
    new_id: Optional[str] = None

    @property
    def resume_at(self) -> Optional[int]:
        """Where reading goes on when the change is tolerated: the start of the log as it is now."""
        return self.earliest

    def describe(self) -> str:
        where = format_tp(self.tp)
        if self.kind == "recreated":
            return (f"Topic {self.tp[0]} was re-created (topic id {self.old_id} is now {self.new_id}): partition "
                    f"{where} had been read up to offset {self.stored}; the new log holds offsets "
                    f"{self.earliest} to {self.latest}")
        if self.kind == "offset-reset":
            return (f"Partition {where}'s offset was changed from {self.stored} to {self.latest}, some data may "
                    "have been missed (was the topic deleted and re-created?)")
        if self.kind == "aged-out":
            return (f"Cannot fetch offset {self.stored} (TopicPartition: {where}): the log now starts at offset "
                    f"{self.earliest}; offsets {self.stored} to {self.earliest} are gone, some data may have been "
                    "missed")
        return f"Partition {where} is gone (read up to offset {self.stored}): the topic or partition was deleted"


def find_changes(stored: Mapping[TopicPartition, int], stored_ids: Mapping[str, str],
                 current_ids: Mapping[str, str], earliest: Mapping[TopicPartition, int],
                 latest: Mapping[TopicPartition, int]) -> list[LogChange]:
    """The partitions of `stored` whose log changed, sorted. Unresolved offsets (< 0) are not checked.

    `earliest`/`latest` hold the current log start and end of every partition that exists now; a
    partition of `stored` missing from `latest` is gone.
    """
    out: list[LogChange] = []
    for tp, offset in sorted(stored.items()):
        if offset < 0:
            continue
        if tp not in latest:
            out.append(LogChange(tp, "gone", offset))
            continue
        low, high = earliest.get(tp, 0), latest[tp]
        old, new = stored_ids.get(tp[0]), current_ids.get(tp[0])
        if old and new and old != new:
            out.append(LogChange(tp, "recreated", offset, low, high, old, new))
        elif offset > high:
            out.append(LogChange(tp, "offset-reset", offset, low, high, old, new))
        elif offset < low:
            out.append(LogChange(tp, "aged-out", offset, low, high, old, new))
    return out


def resume_offsets(stored: Mapping[TopicPartition, int], changes: list[LogChange]) -> PartitionOffsets:
    """`stored` with every changed partition moved to its new log start; gone partitions dropped."""
    out = dict(stored)
    for c in changes:
        if c.resume_at is None:
            out.pop(c.tp, None)
        else:
            out[c.tp] = c.resume_at
    return out
