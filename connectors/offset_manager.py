"""The offset manager: a Delta table's committed source offsets, for restarts, rewinds and lag.

    om = OffsetManager("/data/events_delta", app_id="events")
    om.committed()               # {"events": {0: 1200, 1: 1187}}
    om.starting_offsets_json()   # '{"events": {"0": 1200, "1": 1187}}' for startingOffsets
    om.mirror_to_group("localhost:9092", "events-delta")   # lag visible to any Kafka tool

The offsets live in the table's own log (txn actions, see connectors.offset_txns), so they are
exactly those of the data in the table, and survive checkpoints and log cleanup. Rewinds use
`rewind_offsets` to compute explicit offsets (earliest, a timestamp) for a new app id or generation.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from connectors.delta_commit import committed_offsets, current_generation
from connectors.delta_log_reader import list_app_transactions
from connectors.offset_txns import Offsets, apps_in, to_starting_offsets_json

log = logging.getLogger(__name__)


class OffsetManager:
    def __init__(self, table_path: str, app_id: str) -> None:
        self.table_path = table_path
        self.app_id = app_id

    def committed(self) -> Offsets:
        """{topic: {partition: next offset}} of the data in the table for this app (empty if none)."""
        return committed_offsets(self.table_path, self.app_id)

    def starting_offsets_json(self) -> str | None:
        """The committed offsets as a `startingOffsets` JSON string, or None when nothing is committed."""
        c = self.committed()
        return to_starting_offsets_json(c) if c else None

    def generation(self) -> int | None:
        return current_generation(self.table_path, self.app_id)

    def apps(self) -> list[str]:
        """Every app id that has committed offsets into this table."""
        return apps_in(list_app_transactions(self.table_path))

    def mirror_to_group(self, bootstrap: str, group_id: str, offsets: Offsets | None = None, **client_conf: str) -> Offsets:
        """Commit the table's offsets to a broker consumer group (generation -1), so lag tools see them."""
        offsets = offsets if offsets is not None else self.committed()
        tps = [TopicPartition(t, p, o) for t, parts in offsets.items() for p, o in parts.items()]
        if not tps:
            return offsets
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False, **client_conf})
        try:
            for tp in c.commit(offsets=tps, asynchronous=False) or []:
                if tp.error:
                    raise KafkaException(tp.error)
        finally:
            c.close()
        return offsets


def _per_partition(bootstrap: str, topics: Iterable[str], pick: Callable[[Consumer, str, int, int, int], int],
                   client_conf: dict[str, str]) -> Offsets:
    """{topic: {partition: pick(consumer, topic, partition, low, high)}} for every partition of `topics`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-offset-manager", "enable.auto.commit": False,
                  **client_conf})
    try:
        md = c.list_topics(timeout=10)
        out: Offsets = {}
        for t in topics:
            if t not in md.topics or md.topics[t].error is not None:
                raise KafkaException(f"unknown topic '{t}'")
            for p in md.topics[t].partitions:
                low, high = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                out.setdefault(t, {})[p] = pick(c, t, p, low, high)
        return out
    finally:
        c.close()


def end_offsets(bootstrap: str, topics: Iterable[str], **client_conf: str) -> Offsets:
    """The brokers' current log end offsets of every partition of `topics`."""
    return _per_partition(bootstrap, topics, lambda c, t, p, low, high: high, client_conf)


def rewind_offsets(bootstrap: str, topics: Iterable[str], *, timestamp_ms: int | None = None, **client_conf: str) -> Offsets:
    """Explicit offsets to rewind to: earliest of every partition, or the first offset at/after `timestamp_ms`."""

    def pick(c: Consumer, t: str, p: int, low: int, high: int) -> int:
        if timestamp_ms is None:
            return low
        [tp] = c.offsets_for_times([TopicPartition(t, p, timestamp_ms)], timeout=10)
        return high if tp.offset < 0 else tp.offset

    return _per_partition(bootstrap, topics, pick, client_conf)


def lag(committed: Offsets, ends: Offsets) -> int:
    return sum(max(0, o - committed.get(t, {}).get(p, 0)) for t, parts in ends.items() for p, o in parts.items())
