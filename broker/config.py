"""Broker and topic configuration: Kafka's key names, Kafka's defaults, validated at start.

Owns: the table of supported broker settings (`BROKER_DEFAULTS`), parsing `.properties` files and
`--set key=value` overrides into a typed `BrokerConfig`, and the topic-level settings (`TopicConfig`)
that a topic takes from broker defaults plus its own overrides (`retention.ms`, `segment.bytes`, ...).
Never does I/O beyond reading the properties file it is given.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kafka_protocol.errors import InvalidConfigError, InvalidRequestError
from kafka_protocol.properties import parse_assignments, read_properties

LONG_MAX = 9223372036854775807

# Broker settings: name -> (default, parser). `None` means "unset" (Kafka's null default).
_int = int


def _bool(v: str | bool) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def _str(v: Any) -> str:
    return str(v).strip()


def _timestamp_type(v: Any) -> str:
    s = str(v).strip()
    if s not in ("CreateTime", "LogAppendTime"):
        raise ValueError(f"expected CreateTime or LogAppendTime, got {s!r}")
    return s


def _cleanup_policy(v: Any) -> str:
    parts = sorted(p.strip() for p in str(v).split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError(f"expected delete, compact or compact,delete, got {v!r}")
    return ",".join(parts)


COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _compression(v: Any) -> str:
    s = str(v).strip()
    if s not in COMPRESSION_TYPES:
        raise ValueError(f"expected one of {', '.join(COMPRESSION_TYPES)}, got {s!r}")
    return s


BROKER_SETTINGS: dict[str, tuple[Any, Callable[[Any], Any], str]] = {
    # name: (Kafka default, parser, documentation)
    "broker.id": (0, _int, "This broker's id (node.id in KRaft)."),
    "host.name": ("127.0.0.1", _str, "Interface to listen on; --host overrides."),
    "port": (9092, _int, "Port to listen on; --port overrides."),
    "advertised.host.name": (None, _str, "Host name given to clients in Metadata; defaults to host.name."),
    "advertised.port": (None, _int, "Port given to clients in Metadata; defaults to port."),
    "log.dirs": ("/tmp/kafka-logs", _str, "Data directory; --data-dir overrides."),
    "num.partitions": (1, _int, "Partitions of an automatically created topic."),
    "default.replication.factor": (1, _int, "Replication factor of an automatically created topic."),
    "auto.create.topics.enable": (True, _bool, "Create a topic on first Metadata/Produce request for it."),
    "delete.topic.enable": (True, _bool, "Allow DeleteTopics."),
    "message.max.bytes": (1048588, _int, "Largest record batch accepted (topic: max.message.bytes)."),
    "socket.request.max.bytes": (104857600, _int, "Largest request frame accepted."),
    "socket.send.buffer.bytes": (102400, _int, "SO_SNDBUF of client sockets (-1: OS default)."),
    "socket.receive.buffer.bytes": (102400, _int, "SO_RCVBUF of client sockets (-1: OS default)."),
    "connections.max.idle.ms": (600000, _int, "Close connections idle this long."),
    "queued.max.request.bytes": (268435456, _int, "Bytes of large requests being received or queued, broker-wide; "
                                 "a connection waits (not read) when they are in use (-1: no limit, Kafka's default)."),
    "max.connections": (2147483647, _int, "Connections accepted at once; more are closed on arrival."),
    "max.connections.per.ip": (2147483647, _int, "Connections accepted at once from one address."),
    "request.arrival.timeout.ms": (60000, _int, "Close a connection whose request has not arrived whole in this "
                                   "long (pylog's; Kafka has none, so a trickling client holds its buffer)."),
    "max.broker.partitions": (None, _int, "Partitions this broker may hold (KIP-578's name); default: a quarter "
                              "of the open-file limit, so the broker can always reopen its logs."),
    "fetch.max.bytes": (57671680, _int, "Upper bound on bytes returned by one Fetch."),
    "max.incremental.fetch.session.cache.slots": (1000, _int, "Incremental fetch sessions (KIP-227) kept at once."),
    "min.incremental.fetch.session.eviction.ms": (120000, _int, "A full session cache evicts only sessions idle this long."),
    "log.segment.bytes": (1073741824, _int, "Roll a segment at this size (topic: segment.bytes)."),
    "log.roll.ms": (None, _int, "Roll a segment this old (topic: segment.ms)."),
    "log.roll.hours": (168, _int, "Roll a segment this old, if log.roll.ms is unset."),
    "log.roll.jitter.ms": (None, _int, "Random jitter subtracted from segment.ms (topic: segment.jitter.ms)."),
    "log.roll.jitter.hours": (0, _int, "Jitter in hours, if log.roll.jitter.ms is unset."),
    "log.retention.ms": (None, _int, "Delete segments older than this; -1 keeps forever (topic: retention.ms)."),
    "log.retention.minutes": (None, _int, "Retention in minutes, if log.retention.ms is unset."),
    "log.retention.hours": (168, _int, "Retention in hours, if neither of the above is set."),
    "log.retention.bytes": (-1, _int, "Delete old segments above this partition size (topic: retention.bytes)."),
    "log.retention.check.interval.ms": (300000, _int, "How often retention is checked."),
    "log.segment.delete.delay.ms": (60000, _int, "Delay before a deleted segment's files are removed (topic: file.delete.delay.ms)."),
    "log.index.interval.bytes": (4096, _int, "Bytes between offset index entries (topic: index.interval.bytes)."),
    "log.index.size.max.bytes": (10485760, _int, "Largest offset index; a full index rolls the segment (topic: segment.index.bytes)."),
    "log.flush.interval.messages": (LONG_MAX, _int, "fsync after this many messages (topic: flush.messages)."),
    "log.flush.interval.ms": (None, _int, "fsync data older than this (topic: flush.ms)."),
    "log.flush.scheduler.interval.ms": (LONG_MAX, _int, "How often the flusher checks log.flush.interval.ms."),
    "log.flush.offset.checkpoint.interval.ms": (60000, _int, "How often the recovery point is checkpointed."),
    "log.cleanup.policy": ("delete", _cleanup_policy, "delete, compact or compact,delete (topic: cleanup.policy)."),
    "log.cleaner.enable": (True, _bool, "Run the log cleaner for compacted topics."),
    "log.cleaner.delete.retention.ms": (86400000, _int, "How long tombstones are kept (topic: delete.retention.ms)."),
    "log.cleaner.min.cleanable.ratio": (0.5, float, "Dirty ratio that triggers cleaning (topic: min.cleanable.dirty.ratio)."),
    "log.message.timestamp.type": ("CreateTime", _timestamp_type, "CreateTime or LogAppendTime (topic: message.timestamp.type)."),
    "compression.type": ("producer", _compression, "Codec batches are stored in: producer (as sent), uncompressed, gzip, snappy, lz4 or zstd (recompressed on append)."),
    "min.insync.replicas": (1, _int, "Minimum in-sync replicas for acks=all."),
    "num.recovery.threads.per.data.dir": (1, _int, "Threads used for log recovery at start."),
    "producer.id.expiration.ms": (86400000, _int, "Forget idle producers' sequence state after this."),
    "offsets.topic.num.partitions": (50, _int, "Partitions of __consumer_offsets."),
    "offsets.retention.minutes": (10080, _int, "Keep committed offsets of empty groups this long."),
    "offsets.topic.segment.bytes": (104857600, _int, "segment.bytes of __consumer_offsets."),
    "offsets.retention.check.interval.ms": (600000, _int, "How often expired committed offsets are removed."),
    "offset.metadata.max.bytes": (4096, _int, "Largest metadata string an offset commit may carry."),
    "log.cleaner.backoff.ms": (15000, _int, "How often the log cleaner looks for partitions to compact."),
    "group.initial.rebalance.delay.ms": (3000, _int, "Wait for more members before the first rebalance."),
    "group.min.session.timeout.ms": (6000, _int, "Smallest session timeout a member may ask for."),
    "group.max.session.timeout.ms": (1800000, _int, "Largest session timeout a member may ask for."),
    "zookeeper.connect": (None, _str, "ZooKeeper connect string (host:port[,host:port][/chroot]); set, the broker "
                          "joins a cluster (cluster mode); unset runs the embedded single broker."),
    "zookeeper.session.timeout.ms": (18000, _int, "ZooKeeper session timeout: a broker silent this long is dead."),
    "zookeeper.connection.timeout.ms": (None, _int, "Wait this long for a ZooKeeper session at start "
                                        "(default: zookeeper.session.timeout.ms)."),
    "controller.socket.timeout.ms": (30000, _int, "The controller gives up waiting for a broker's answer after this "
                                    "long and sends the request again."),
    "replica.lag.time.max.ms": (30000, _int, "A follower that has not caught up for this long leaves the ISR."),
    "replica.fetch.wait.max.ms": (500, _int, "Longest a follower's fetch waits at the leader for new data."),
    "replica.fetch.max.bytes": (1048576, _int, "Bytes a follower asks for per partition per fetch."),
    "replica.fetch.response.max.bytes": (10485760, _int, "Bytes a follower asks for per fetch."),
    "replica.fetch.backoff.ms": (1000, _int, "Pause of a follower after a failed fetch."),
    "replica.high.watermark.checkpoint.interval.ms": (5000, _int, "How often high watermarks are checkpointed."),
    "offsets.topic.replication.factor": (3, _int, "Replication factor of __consumer_offsets (cluster mode)."),
    "offsets.commit.timeout.ms": (5000, _int, "An offset commit waits this long for every in-sync replica "
                                  "of its __consumer_offsets partition (cluster mode)."),
    "auto.leader.rebalance.enable": (True, _bool, "The controller moves leadership back to preferred replicas."),
    "leader.imbalance.check.interval.seconds": (300, _int, "How often the controller checks preferred leaders."),
    "controlled.shutdown.enable": (True, _bool, "On SIGTERM, move leadership away before stopping (cluster mode)."),
    "controlled.shutdown.timeout.ms": (30000, _int, "Longest a controlled shutdown waits for leadership to move "
                                       "(pylog's; Kafka counts retries)."),
    # Kafka's other topic defaults: accepted and reported as Kafka does; enforced where pylog has the feature
    "log.message.timestamp.before.max.ms": (LONG_MAX, _int, "Reject records this much older than the broker's clock "
                                            "(topic: message.timestamp.before.max.ms)."),
    "log.message.timestamp.after.max.ms": (LONG_MAX, _int, "Reject records this much newer than the broker's clock "
                                           "(topic: message.timestamp.after.max.ms)."),
    "log.message.timestamp.difference.max.ms": (LONG_MAX, _int, "Deprecated bound on both (topic: "
                                                "message.timestamp.difference.max.ms)."),
    "compression.gzip.level": (-1, _int, "gzip level when a topic's compression.type recompresses to gzip."),
    "compression.lz4.level": (9, _int, "lz4 level when a topic's compression.type recompresses to lz4."),
    "compression.zstd.level": (3, _int, "zstd level when a topic's compression.type recompresses to zstd."),
    "log.cleaner.min.compaction.lag.ms": (0, _int, "Accepted; pylog's cleaner compacts only sealed segments "
                                          "(topic: min.compaction.lag.ms)."),
    "log.cleaner.max.compaction.lag.ms": (LONG_MAX, _int, "Accepted (topic: max.compaction.lag.ms)."),
    "unclean.leader.election.enable": (False, _bool, "Elect a replica outside the ISR when no ISR replica is live "
                                       "(acknowledged records may be lost)."),
    "log.preallocate": (False, _bool, "Accepted; segment files are not preallocated (topic: preallocate)."),
    "log.message.downconversion.enable": (True, _bool, "Accepted; pylog serves record batch v2 only."),
    "log.message.format.version": ("3.0-IV1", _str, "Accepted; pylog writes record batch v2 only."),
    "log.local.retention.ms": (-2, _int, "Accepted; no tiered storage (topic: local.retention.ms)."),
    "log.local.retention.bytes": (-2, _int, "Accepted; no tiered storage (topic: local.retention.bytes)."),
}

# Topic-level config name -> the broker setting it defaults from.
TOPIC_TO_BROKER_KEY: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "preallocate": "log.preallocate",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}
# Topic configs with no broker setting behind them: (default, parser); accepted and reported as Kafka
# does (replication throttles and tiered storage do not exist in a one-broker pylog).
TOPIC_ONLY: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "follower.replication.throttled.replicas": ("", _str),
    "leader.replication.throttled.replicas": ("", _str),
    "remote.storage.enable": (False, _bool),
    "remote.log.copy.disable": (False, _bool),
    "remote.log.delete.on.disable": (False, _bool),
}
TOPIC_KEYS: frozenset[str] = frozenset(TOPIC_TO_BROKER_KEY) | frozenset(TOPIC_ONLY)
# TopicConfig fields that topic_defaults() resolves by hand (synonym chains, parsing); the others copy their setting
_DERIVED_TOPIC_FIELDS = frozenset({
    "cleanup_policy", "compression_type", "delete_retention_ms", "file_delete_delay_ms", "flush_messages", "flush_ms",
    "index_interval_bytes", "max_message_bytes", "message_timestamp_type", "min_cleanable_dirty_ratio",
    "min_insync_replicas", "retention_bytes", "retention_ms", "segment_bytes", "segment_index_bytes",
    "segment_jitter_ms", "segment_ms"})


def render_setting(value: Any) -> str | None:
    """A setting's value as Kafka prints it (booleans in lower case; None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


# Broker settings that may change while the broker runs (Kafka's dynamic broker configs, KIP-226): the
# topic defaults (each topic config's primary broker synonym) and the connection limits.
DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset(TOPIC_TO_BROKER_KEY.values()) | {"max.connections",
                                                                                  "max.connections.per.ip"}
# Kafka's synonym chains: a setting and the older ones it falls back to, in order.
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
}
# Kafka's ConfigSource codes, as DescribeConfigs reports them.
SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC, SOURCE_DEFAULT = 2, 3, 4, 5
DYNAMIC_SCOPES = ("broker", "default")     # `<broker.id>` and the cluster-wide default ("")


@dataclass(frozen=True)
class TopicConfig:
    """Effective settings of one topic: broker defaults with the topic's overrides applied. Built from
    `BrokerConfig.topic_defaults()` (or `TopicConfig.default()`), never restating a default."""

    cleanup_policy: str
    compression_type: str
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    index_interval_bytes: int
    max_message_bytes: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_insync_replicas: int
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    message_timestamp_difference_max_ms: int
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    unclean_leader_election_enable: bool
    preallocate: bool
    message_downconversion_enable: bool
    message_format_version: str
    local_retention_ms: int
    local_retention_bytes: int
    follower_replication_throttled_replicas: str
    leader_replication_throttled_replicas: str
    remote_storage_enable: bool
    remote_log_copy_disable: bool
    remote_log_delete_on_disable: bool
    # The topic's explicit overrides, by Kafka name (for DescribeConfigs' "is default" flag).
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def default(cls, **changes: Any) -> "TopicConfig":
        """The settings of a topic on a broker with default settings (BROKER_SETTINGS holds the defaults),
        with `changes` (attribute names) applied: for tests and tools that need a TopicConfig."""
        return dataclasses.replace(BrokerConfig().topic_defaults(), **changes)

    @staticmethod
    def attr(name: str) -> str:
        return name.replace(".", "_")

    def value_of(self, name: str) -> Any:
        return getattr(self, self.attr(name))

    def with_overrides(self, overrides: Mapping[str, str]) -> "TopicConfig":
        """A copy with `overrides` (Kafka topic names) applied; raises InvalidConfigError naming the key."""
        values: dict[str, Any] = {}
        for name, raw in overrides.items():
            if name not in TOPIC_KEYS:
                raise InvalidConfigError(f"Unknown topic config '{name}'")
            values[self.attr(name)] = parse_topic_value(name, raw)
        merged = {**self.overrides, **{k: str(v) for k, v in overrides.items()}}
        return dataclasses.replace(self, overrides=merged, **values)


_TOPIC_PARSERS: dict[str, Callable[[Any], Any]] = {
    "cleanup.policy": _cleanup_policy,
    "compression.type": _compression,
    "message.timestamp.type": _timestamp_type,
    "min.cleanable.dirty.ratio": float,
    "unclean.leader.election.enable": _bool,
    "preallocate": _bool,
    "message.downconversion.enable": _bool,
    "message.format.version": _str,
    **{name: parser for name, (_, parser) in TOPIC_ONLY.items()},
}
_TOPIC_MINIMUMS: dict[str, int] = {
    "segment.bytes": 14,
    "segment.ms": 1,
    "index.interval.bytes": 0,
    "max.message.bytes": 0,
    "flush.messages": 1,
    "flush.ms": 0,
    "segment.index.bytes": 8,
    "retention.ms": -1,
    "retention.bytes": -1,
    "min.insync.replicas": 1,
    "message.timestamp.before.max.ms": 0,
    "message.timestamp.after.max.ms": 0,
    "message.timestamp.difference.max.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "local.retention.ms": -2,
    "local.retention.bytes": -2,
}


def parse_topic_value(name: str, raw: Any) -> Any:
    """Parse and range-check one topic-level value; InvalidConfigError names the key and the problem."""
    parser = _TOPIC_PARSERS.get(name, int)
    try:
        value = parser(raw)
    except (TypeError, ValueError) as e:
        why = "Not a number of type LONG" if parser is int else str(e)    # Kafka's wording
        raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: {why}") from None
    minimum = _TOPIC_MINIMUMS.get(name)
    if minimum is not None and value < minimum:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: must be at least {minimum}")
    return value


class BrokerConfig:
    """Typed broker settings. Read values with `cfg["log.segment.bytes"]` or the properties below."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {k: d for k, (d, _, _) in BROKER_SETTINGS.items()}
        self._explicit: set[str] = set()
        # dynamic settings (KIP-226), by scope; a broker's own win over the cluster-wide default
        self._dynamic: dict[str, dict[str, Any]] = {scope: {} for scope in DYNAMIC_SCOPES}
        for key, raw in (values or {}).items():
            self.set(key, raw)
        self.validate()

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: list[str] | Mapping[str, Any] | None = None) -> "BrokerConfig":
        values: dict[str, Any] = {}
        if path is not None:
            values.update(read_properties(path))
        if isinstance(overrides, Mapping):
            values.update(overrides)
        else:
            values.update(parse_assignments(overrides or [], "--set"))
        return cls(values)

    def set(self, key: str, raw: Any) -> None:
        if key == "log.dir":
            key = "log.dirs"
        if key not in BROKER_SETTINGS:
            raise InvalidConfigError(f"Unknown broker setting '{key}' (see conf/broker.properties for the supported ones)")
        _, parser, _ = BROKER_SETTINGS[key]
        try:
            self._values[key] = parser(raw) if raw is not None else None
        except (TypeError, ValueError) as e:
            raise InvalidConfigError(f"Invalid value {raw!r} for broker setting {key}: {e}") from None
        self._explicit.add(key)

    def __getitem__(self, key: str) -> Any:
        for scope in DYNAMIC_SCOPES:
            if key in self._dynamic[scope]:
                return self._dynamic[scope][key]
        return self._values[key]

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit

    # --- dynamic settings (KIP-226) -------------------------------------------------------------

    def dynamic(self, scope: str) -> dict[str, str | None]:
        """The dynamic settings of `scope` ("broker" or "default"), rendered as strings."""
        return {k: render_setting(v) for k, v in sorted(self._dynamic[scope].items())}

    def set_dynamic(self, scope: str, settings: Mapping[str, str], *, check_only: bool = False) -> None:
        """Replace `scope`'s dynamic settings; InvalidRequestError names any that cannot change at run time."""
        fixed = sorted(k for k in settings if k in BROKER_SETTINGS and k not in DYNAMIC_BROKER_KEYS)
        if fixed:
            raise InvalidRequestError(f"Cannot update these configs dynamically: {', '.join(fixed)}")
        parsed: dict[str, Any] = {}
        for key, raw in settings.items():
            if key not in BROKER_SETTINGS:
                continue                      # Kafka accepts (and ignores) names it does not know
            parser = BROKER_SETTINGS[key][1]
            try:
                parsed[key] = parser(raw)
            except (TypeError, ValueError) as e:
                why = "Not a number of type INT" if parser is _int else str(e)    # Kafka's wording
                raise InvalidRequestError(f"Invalid value {raw} for configuration {key}: {why}") from None
        if not check_only:
            self._dynamic[scope] = parsed

    def sources(self, key: str) -> list[tuple[str, Any, int]]:
        """(name, value, source) of every level that sets `key` or a synonym, strongest first (Kafka's
        synonyms); empty when nothing sets `key` itself (Kafka then reports no value and no synonyms,
        though an older synonym such as log.retention.hours decides the effective value)."""
        out: list[tuple[str, Any, int]] = []
        if BROKER_SETTINGS[key][0] is None and key not in self._explicit \
                and not any(key in self._dynamic[scope] for scope in DYNAMIC_SCOPES):
            return out
        for name in BROKER_SYNONYMS.get(key, (key,)):
            for scope, source in zip(DYNAMIC_SCOPES, (SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT)):
                if name in self._dynamic[scope]:
                    out.append((name, self._dynamic[scope][name], source))
            if name in self._explicit:
                out.append((name, self._values[name], SOURCE_STATIC))
            default = BROKER_SETTINGS[name][0]
            if default is not None:
                out.append((name, default, SOURCE_DEFAULT))
        return out

    def validate(self) -> None:
        v = self._values
        checks = [
            ("port", 0 <= v["port"] <= 65535, "must be between 0 and 65535"),
            ("num.partitions", v["num.partitions"] >= 1, "must be at least 1"),
            ("log.segment.bytes", v["log.segment.bytes"] >= 14, "must be at least 14"),
            ("message.max.bytes", v["message.max.bytes"] >= 0, "must not be negative"),
            ("socket.request.max.bytes", v["socket.request.max.bytes"] >= 1, "must be at least 1"),
            ("log.index.interval.bytes", v["log.index.interval.bytes"] >= 0, "must not be negative"),
            ("log.flush.interval.messages", v["log.flush.interval.messages"] >= 1, "must be at least 1"),
            ("log.retention.check.interval.ms", v["log.retention.check.interval.ms"] >= 1, "must be at least 1"),
        ]
        for key, ok, why in checks:
            if not ok:
                raise InvalidConfigError(f"Invalid value {v[key]!r} for broker setting {key}: {why}")

    # Derived values, resolved the way Kafka resolves them.
    @property
    def retention_ms(self) -> int:
        v = self
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60_000
        return v["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        v = self
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        v = self
        ms = v["log.roll.jitter.ms"]
        return ms if ms is not None else v["log.roll.jitter.hours"] * 3_600_000

    @property
    def flush_ms(self) -> int:
        v = self
        return v["log.flush.interval.ms"] if v["log.flush.interval.ms"] is not None else v["log.flush.scheduler.interval.ms"]

    @property
    def data_dir(self) -> Path:
        return Path(self._values["log.dirs"].split(",")[0])

    @property
    def advertised_host(self) -> str:
        return self._values["advertised.host.name"] or self._values["host.name"]

    @property
    def advertised_port(self) -> int:
        return self._values["advertised.port"] or self._values["port"]

    def topic_defaults(self) -> TopicConfig:
        """The TopicConfig a topic without overrides gets (dynamic defaults included)."""
        v = self
        return TopicConfig(
            cleanup_policy=v["log.cleanup.policy"],
            compression_type=v["compression.type"],
            delete_retention_ms=v["log.cleaner.delete.retention.ms"],
            file_delete_delay_ms=v["log.segment.delete.delay.ms"],
            flush_messages=v["log.flush.interval.messages"],
            flush_ms=self.flush_ms,
            index_interval_bytes=v["log.index.interval.bytes"],
            max_message_bytes=v["message.max.bytes"],
            message_timestamp_type=v["log.message.timestamp.type"],
            min_cleanable_dirty_ratio=v["log.cleaner.min.cleanable.ratio"],
            min_insync_replicas=v["min.insync.replicas"],
            retention_bytes=v["log.retention.bytes"],
            retention_ms=self.retention_ms,
            segment_bytes=v["log.segment.bytes"],
            segment_index_bytes=v["log.index.size.max.bytes"],
            segment_jitter_ms=self.roll_jitter_ms,
            segment_ms=self.roll_ms,
            **{TopicConfig.attr(t): v[b] for t, b in TOPIC_TO_BROKER_KEY.items()
               if TopicConfig.attr(t) not in _DERIVED_TOPIC_FIELDS},
            **{TopicConfig.attr(t): default for t, (default, _) in TOPIC_ONLY.items()},
        )


