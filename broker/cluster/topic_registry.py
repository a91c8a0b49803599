"""Topic metadata of the embedded (no ZooKeeper) broker: names, ids, partition counts, config overrides.

Owns the durable record of which topics exist (`<data dir>/meta/topics.json`, replaced atomically)
and the validation of topic names, partition counts and topic configs. Knows nothing about log
files or the protocol.
"""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from broker.config import TopicConfig
from kafka_protocol.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
META_DIR = "meta"


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name cannot be '{name}'")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"Topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"Topic name '{name}' is illegal: it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, str] = field(default_factory=dict)
    internal: bool = False


class TopicRegistry:
    """The set of topics, persisted on every change. Single-threaded use only."""

    def __init__(self, data_dir: Path, defaults: TopicConfig) -> None:
        self.defaults = defaults
        self._path = Path(data_dir) / META_DIR / "topics.json"
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._load()

    # -- queries
    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist")
        return info

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self._topics.values()))

    def __contains__(self, name: str) -> bool:
        return name in self._topics

    def config_of(self, name: str) -> TopicConfig:
        return self.defaults.with_overrides(self.require(name).overrides)

    def configs(self) -> dict[str, TopicConfig]:
        return {t.name: self.defaults.with_overrides(t.overrides) for t in self._topics.values()}

    # -- changes
    def check_new(self, name: str, partitions: int, overrides: Mapping[str, str]) -> TopicConfig:
        """Validate a topic creation without doing it; returns the topic's effective config."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        colliding = name.replace(".", "_")
        for other in self._topics:
            if other.replace(".", "_") == colliding:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic '{other}' ('.' and '_' collide)")
        if partitions < 1:
            raise InvalidPartitionsError(f"Number of partitions must be at least 1, got {partitions}")
        return self.defaults.with_overrides(overrides)

    def create(self, name: str, partitions: int, overrides: Mapping[str, str], internal: bool = False) -> TopicInfo:
        self.check_new(name, partitions, overrides)
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(overrides), internal or name.startswith("__"))
        self._topics[name] = info
        self._by_id[info.topic_id] = info
        self._save()
        log.info("created topic %s with %d partitions %s", name, partitions, dict(overrides) or "")
        return info

    def mirror(self, name: str, topic_id: uuid.UUID | None, partitions: int, overrides: Mapping[str, str]) -> TopicInfo:
        """Cluster mode: record a topic as ZooKeeper has it (created elsewhere, so not validated again)."""
        old = self._topics.get(name)
        if old is not None:
            self._by_id.pop(old.topic_id, None)
        info = TopicInfo(name, topic_id or (old.topic_id if old is not None else uuid.uuid4()), partitions,
                         dict(overrides), name.startswith("__"))
        self._topics[name] = info
        self._by_id[info.topic_id] = info
        self._save()
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self.require(name)
        del self._topics[name]
        self._by_id.pop(info.topic_id, None)
        self._save()
        log.info("deleted topic %s", name)
        return info

    def check_partition_increase(self, name: str, count: int) -> TopicInfo:
        info = self.require(name)
        if count < info.partitions:
            raise InvalidPartitionsError(
                f"Topic '{name}' currently has {info.partitions} partitions, {count} would not be an increase."
            )
        if count == info.partitions:
            raise InvalidPartitionsError(f"Topic '{name}' already has {count} partitions.")
        return info

    def set_partitions(self, name: str, count: int) -> TopicInfo:
        info = self.check_partition_increase(name, count)
        info.partitions = count
        self._save()
        return info

    def set_overrides(self, name: str, overrides: Mapping[str, str]) -> TopicConfig:
        """Replace the topic's overrides (validated first); returns the new effective config."""
        info = self.require(name)
        config = self.defaults.with_overrides(overrides)
        info.overrides = dict(overrides)
        self._save()
        return config

    # -- persistence
    def _load(self) -> None:
        if not self._path.exists():
            return
        try:
            data = json.loads(self._path.read_text())
        except (OSError, ValueError) as e:
            raise RuntimeError(f"cannot read topic metadata {self._path}: {e}") from None
        for t in data.get("topics", []):
            info = TopicInfo(t["name"], uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("config", {})), bool(t.get("internal")))
            self._topics[info.name] = info
            self._by_id[info.topic_id] = info

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "version": 1,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions, "config": t.overrides, "internal": t.internal}
                for t in self._topics.values()
            ],
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
