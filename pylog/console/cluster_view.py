"""What the console's pages read from the cluster, through the Kafka protocol only (so it works against Apache
Kafka as well as pylog's broker).

Owns: one AdminClient for the console's lifetime (confluent-kafka's handles are thread-safe; each page first checks
that a bootstrap broker accepts TCP, so a broker that is down is a page in milliseconds, not a timeout), the reads
behind each page as plain records (topics with their partitions' leaders, replicas, ISR, log start, high watermark
and size; brokers and the controller; groups with state, members, assignment and lag per partition; a page of
records), and the translation of every client failure into a ConsoleError.
The calls are pylog.tools' own (client.py's connection settings and metadata, groups.py's offsets and lag,
wire_admin.py's DescribeLogDirs for sizes, which confluent-kafka lacks).
Must never: write anything to the cluster (offset_reset.py owns the one write), or auto-create a topic by
asking for its metadata.
"""
from __future__ import annotations

import argparse
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from pylog.console.errors import BrokerError, BrokerUnavailable, NotFound
from pylog.console.messages import Record
from pylog.tools.client import (
    base_config,
    check_reachable,
    client_security,
    command_config,
    fetch_metadata,
    parse_kv,
    result_or_error,
    topic_metadata,
)
from pylog.tools.errors import CliError
from pylog.tools.groups import (
    EARLIEST,
    LATEST,
    REQUEST_TIMEOUT_S,
    PartitionLag,
    committed_offsets,
    group_description,
    list_offsets,
    owners,
    partition_lags,
    state_name,
)
from pylog.tools.wire_admin import WireAdmin

READ_TIMEOUT_S = 10.0
CLIENT_ID = "pylog-console"

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start: int
    high_watermark: int
    size: int | None                # bytes on the leader's disks; None when the broker did not say

    @property
    def messages(self) -> int:
        return max(0, self.high_watermark - self.log_start)

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: tuple[PartitionRow, ...]

    @property
    def internal(self) -> bool:
        return self.name.startswith("__")

    @property
    def messages(self) -> int:
        return sum(p.messages for p in self.partitions)

    @property
    def size(self) -> int | None:
        sizes = [p.size for p in self.partitions]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


@dataclass(frozen=True)
class Topics:
    rows: tuple[TopicRow, ...]
    sizes_note: str | None          # why sizes are missing, when they are


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int
    leaders: int                    # partitions it leads
    replicas: int                   # replicas it holds
    rack: str | None = None         # broker.rack (DescribeCluster), None when it has none or is unknown


@dataclass(frozen=True)
class Cluster:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[Broker, ...]


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TP, ...]


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    state: str
    members: tuple[Member, ...]
    lags: tuple[PartitionLag, ...]

    @property
    def total_lag(self) -> int | None:
        known = [lag for lag in (row.lag() for row in self.lags) if lag is not None]
        return sum(known) if known else None

    @property
    def topics(self) -> list[str]:
        return sorted({row.topic for row in self.lags})


@contextmanager
def translated() -> Iterator[None]:
    """pylog.tools' CliError as the ConsoleError a page shows."""
    try:
        yield
    except CliError as e:
        message = str(e)
        if message.startswith(("broker unreachable", "lost the connection")):
            raise BrokerUnavailable(f"{message}: start the broker, or point --bootstrap-server at a running "
                                    f"one") from None
        if message.startswith("unknown topic"):
            raise NotFound(f"{message}: the topics page lists the topics the cluster has") from None
        raise BrokerError(message) from None


class ClusterView:
    """The cluster reached through `args` (the console's --bootstrap-server, --property, --command-config)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.bootstrap: str = args.bootstrap_server
        self.client_conf = {**command_config(args), **parse_kv(args.properties, "--property")}
        self.security = client_security(args)
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()

    def admin(self) -> AdminClient:
        with translated():
            check_reachable(self.bootstrap)
        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(base_config(self.bootstrap, {"client.id": CLIENT_ID, **self.client_conf}))
            return self._admin

    # ------------------------------------------------------------ topics
    def topics(self) -> Topics:
        admin = self.admin()
        with translated():
            md = fetch_metadata(admin, self.bootstrap)
            partitions = {name: sorted(tm.partitions) for name, tm in md.topics.items()}
            return self._topics(admin, md.topics, partitions, None)

    def topic(self, name: str) -> Topics:
        admin = self.admin()
        with translated():
            tm = topic_metadata(admin, self.bootstrap, name)
            return self._topics(admin, {name: tm}, {name: sorted(tm.partitions)}, {name: sorted(tm.partitions)})

    def _topics(self, admin: AdminClient, metadata: Mapping[str, Any], partitions: dict[str, list[int]],
                asked: dict[str, list[int]] | None) -> Topics:
        tps = [(t, p) for t in sorted(partitions) for p in partitions[t]]
        low = list_offsets(admin, self.args, {tp: EARLIEST for tp in tps})
        high = list_offsets(admin, self.args, {tp: LATEST for tp in tps})
        sizes, note = self._replica_sizes(asked)
        rows = []
        for name in sorted(partitions):
            parts = []
            for p in partitions[name]:
                pm = metadata[name].partitions[p]
                size = sizes.get((pm.leader, name, p)) if note is None else None
                parts.append(PartitionRow(p, pm.leader, tuple(pm.replicas), tuple(pm.isrs), low.get((name, p), -1),
                                          high.get((name, p), -1), size))
            rows.append(TopicRow(name, tuple(parts)))
        return Topics(tuple(rows), note)

    def _replica_sizes(self, partitions: dict[str, list[int]] | None) -> tuple[dict[tuple[int, str, int], int], str | None]:
        """Sizes from DescribeLogDirs; a broker that refuses it leaves the sizes out, with the reason."""
        try:
            with WireAdmin(self.bootstrap, CLIENT_ID, REQUEST_TIMEOUT_S, self.security) as wire:
                return wire.replica_sizes(partitions), None
        except CliError as e:
            log.debug("no partition sizes: %s", e)
            return {}, f"sizes unknown: {e}"

    # ------------------------------------------------------------ brokers
    def cluster(self) -> Cluster:
        admin = self.admin()
        with translated():
            md = fetch_metadata(admin, self.bootstrap)
        leaders: dict[int, int] = {}
        replicas: dict[int, int] = {}
        for tm in md.topics.values():
            for pm in tm.partitions.values():
                leaders[pm.leader] = leaders.get(pm.leader, 0) + 1
                for r in pm.replicas:
                    replicas[r] = replicas.get(r, 0) + 1
        racks = self._racks(admin)
        brokers = tuple(Broker(b.id, b.host or "", b.port, leaders.get(b.id, 0), replicas.get(b.id, 0),
                               racks.get(b.id)) for b in sorted(md.brokers.values(), key=lambda b: b.id))
        return Cluster(md.cluster_id, md.controller_id, brokers)

    @staticmethod
    def _racks(admin: Any) -> dict[int, str | None]:
        """Each broker's rack from DescribeCluster ({} when the broker does not answer it: racks left blank)."""
        try:
            described = admin.describe_cluster(request_timeout=REQUEST_TIMEOUT_S).result(REQUEST_TIMEOUT_S + 5)
        except Exception as e:  # noqa: BLE001 - the page shows the brokers without racks
            log.debug("no racks: %s", e)
            return {}
        return {int(n.id): n.rack for n in described.nodes}

    # ------------------------------------------------------------ groups
    def groups(self) -> list[GroupRow]:
        admin = self.admin()
        with translated():
            listed = result_or_error(admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S),
                                     bootstrap=self.bootstrap, operation="ListGroups")
            return self._groups(admin, sorted(g.group_id for g in listed.valid))

    def group(self, group_id: str) -> GroupRow:
        admin = self.admin()
        with translated():
            (row,) = self._groups(admin, [group_id])
        if row.state == "Dead" or (row.state == "Empty" and not row.lags and not row.members):
            raise NotFound(f"consumer group '{group_id}' does not exist: the groups page lists the groups the "
                           f"cluster has")
        return row

    def lag_sample(self) -> dict[str, int | None]:
        """{group: total lag} of every group: one sample of the lag chart."""
        return {g.group_id: g.total_lag for g in self.groups()}

    def _groups(self, admin: AdminClient, ids: list[str]) -> list[GroupRow]:
        descs = {g: group_description(admin, self.args, g) for g in ids}
        committed = {g: committed_offsets(admin, self.args, g) for g in ids}
        owned = {g: owners(descs[g]) for g in ids}
        every = sorted({tp for g in ids for tp in [*committed[g], *owned[g]]})
        ends = list_offsets(admin, self.args, {tp: LATEST for tp in every})
        rows = []
        for g in ids:
            members = tuple(Member(m.member_id, m.client_id, m.host, tuple(sorted(
                (tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else []))))
                for m in descs[g].members)
            rows.append(GroupRow(g, state_name(descs[g]), members,
                                 tuple(partition_lags(committed[g], ends, {}, owned[g]))))
        return rows

    # ------------------------------------------------------------ offsets and records
    def partition_count(self, topic: str) -> int:
        admin = self.admin()
        with translated():
            return len(topic_metadata(admin, self.bootstrap, topic).partitions)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, high watermark) of one partition."""
        admin = self.admin()
        with translated():
            low = list_offsets(admin, self.args, {(topic, partition): EARLIEST})
            high = list_offsets(admin, self.args, {(topic, partition): LATEST})
        return low[(topic, partition)], high[(topic, partition)]

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """The first offset whose timestamp is at or after `timestamp_ms`; -1 when there is none."""
        admin = self.admin()
        with translated():
            found = list_offsets(admin, self.args, {(topic, partition): OffsetSpec.for_timestamp(timestamp_ms)})
        return found[(topic, partition)]

    def end_offsets(self, tps: list[TP]) -> dict[TP, int]:
        admin = self.admin()
        with translated():
            return list_offsets(admin, self.args, {tp: LATEST for tp in tps})

    def read(self, topic: str, partition: int, start: int, limit: int, end: int) -> list[Record]:
        """Up to `limit` records of one partition from `start`, stopping at `end` (the high watermark)."""
        if start >= end:
            return []
        with translated():
            check_reachable(self.bootstrap)
        consumer = Consumer(base_config(self.bootstrap, {
            "group.id": CLIENT_ID, "client.id": CLIENT_ID, "enable.auto.commit": False,
            "enable.partition.eof": True, "isolation.level": "read_uncommitted", "fetch.wait.max.ms": 100,
            **self.client_conf}))
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            return _read_loop(consumer, topic, partition, limit, end)
        finally:
            consumer.close()


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _record(m: Message, partition: int) -> Record:
    kind, ts = m.timestamp()
    offset = m.offset()
    headers = m.headers() or []
    pairs = list(headers.items()) if isinstance(headers, dict) else headers
    return Record(partition, offset if offset is not None else -1, ts, kind, _bytes(m.key()), _bytes(m.value()),
                  tuple((name, _bytes(value)) for name, value in pairs))


def _read_loop(consumer: Consumer, topic: str, partition: int, limit: int, end: int) -> list[Record]:
    out: list[Record] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(out) < limit and time.monotonic() < deadline:
        for m in consumer.consume(limit - len(out), 0.2):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return out
                raise BrokerError(f"reading {topic}-{partition} failed: {err.name()}: {err.str()}")
            out.append(_record(m, partition))
            if out[-1].offset >= end - 1 or len(out) >= limit:
                return out
    if not out:
        raise BrokerError(f"no records of {topic}-{partition} arrived within {READ_TIMEOUT_S:.0f} s: "
                          f"reload the page, or check the broker's log")
    return out
