"""LogManager: every partition log under one data directory, and the periodic storage chores.

Owns: discovering `<topic>-<partition>` directories at startup (recovery unless the clean-shutdown
marker `.kafka_cleanshutdown` exists; the marker is removed once loaded so a crash forces recovery
next time), creating and deleting partition logs, topic config changes, and the chores the server
schedules on its event loop: retention, time-based flush, removal of `*.deleted` files. At shutdown
it flushes and closes every log, then writes the fsync'd marker.

Directories whose topic has no entry in `topic_configs` are opened with `default_config` if one is
given, and otherwise left alone (not opened, not deleted) with a warning.

Never knows about the network protocol or asyncio; never decides topic metadata (which topics
exist is the caller's knowledge, passed in as configs).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, Mapping

from broker.config import TopicConfig
from broker.log.constants import CLEAN_SHUTDOWN_FILE, IGNORED_TOPIC_DIRS
from broker.log.fileutil import atomic_write, remove_quietly, fsync_dir
from broker.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

INDEX_IDLE_S = 600.0     # a sealed segment's indexes are released after this long without a lookup


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """('my-topic', 3) for 'my-topic-3'; None for anything that is not a partition directory."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or name.startswith("."):
        return None
    if topic in IGNORED_TOPIC_DIRS:
        return None
    return topic, int(part)


class LogManager:
    """All partition logs of one broker's data directory."""

    CLEAN_SHUTDOWN_FILE = CLEAN_SHUTDOWN_FILE

    def __init__(self, data_dir: Path, *, producer_id_expiration_ms: int = 86400000,
                 clock: Callable[[], float] = time.time) -> None:
        self.data_dir = Path(data_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.clock = clock
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self.flush_observer: Callable[[float], None] | None = None    # told each log flush's seconds (metrics)

    def startup(self, topic_configs: Mapping[str, TopicConfig], *,
                default_config: TopicConfig | None = None) -> None:
        """Open every partition directory; recover them unless the last shutdown was clean."""
        started = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        recover = not marker.exists()
        if recover:
            log.info("no clean shutdown marker in %s: recovering partition logs", self.data_dir)
        skipped: set[str] = set()
        for path in sorted(self.data_dir.iterdir()):
            parsed = parse_partition_dir(path.name) if path.is_dir() else None
            if parsed is None:
                continue
            topic, partition = parsed
            config = topic_configs.get(topic, default_config)
            if config is None:
                skipped.add(topic)
                continue
            self._logs[(topic, partition)] = self._open(path, topic, partition, config, recover=recover)
        for topic in sorted(skipped):
            log.warning("leaving directories of unknown topic %r in %s untouched", topic, self.data_dir)
        if not recover:
            remove_quietly(marker)
            fsync_dir(self.data_dir)
        log.info("loaded %d partition logs from %s in %.2fs", len(self._logs), self.data_dir,
                 time.monotonic() - started)

    def _open(self, path: Path, topic: str, partition: int, config: TopicConfig, *, recover: bool) -> PartitionLog:
        plog = PartitionLog(path, topic, partition, config, recover=recover,
                            producer_id_expiration_ms=self.producer_id_expiration_ms, clock=self.clock)
        plog.on_flush = self._flushed
        return plog

    def _flushed(self, seconds: float) -> None:
        if self.flush_observer is not None:
            self.flush_observer(seconds)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def create(self, topic: str, partition: int, config: TopicConfig) -> PartitionLog:
        """The log of (topic, partition), created empty if it does not exist yet (idempotent)."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        created = self._open(self.data_dir / f"{topic}-{partition}", topic, partition, config, recover=False)
        self._logs[(topic, partition)] = created
        return created

    def delete_topic(self, topic: str) -> None:
        """Remove every partition log of `topic`, files included."""
        for key in [k for k in self._logs if k[0] == topic]:
            self._logs.pop(key).delete()

    def delete_partition(self, topic: str, partition: int) -> None:
        """Remove one partition's log, files included (a replica moved away by a reassignment)."""
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()

    def update_topic_config(self, topic: str, config: TopicConfig) -> None:
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.update_config(config)

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log, expire idle producers and release idle segment indexes;
        returns segments deleted."""
        deleted = 0
        for plog in self._logs.values():
            deleted += plog.apply_retention(now_ms)
            plog.expire_producers(now_ms)
            plog.release_idle_indexes(INDEX_IDLE_S)
        return deleted

    def flush_due(self, now_ms: int) -> None:
        for plog in self._logs.values():
            plog.maybe_flush(now_ms)

    def purge_deleted_files(self, now_ms: int) -> None:
        for plog in self._logs.values():
            plog.purge_deleted(now_ms)

    def shutdown(self) -> None:
        """Flush and close every log, then write the clean-shutdown marker (fsync'd)."""
        for plog in self._logs.values():
            plog.close()
        self._logs.clear()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.data_dir / CLEAN_SHUTDOWN_FILE, b"")
        log.info("log manager shut down cleanly")
