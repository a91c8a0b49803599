"""`pylog groups`: the kafka-consumer-groups equivalent (list, describe, reset-offsets, delete).

Owns: the `groups` argument tree, the AdminClient calls behind it (ListGroups, DescribeGroups,
OffsetFetch, ListOffsets of the high watermark and of the last stable offset, OffsetCommit with
generation -1, DeleteGroups), the reset-offsets plan
(earliest, latest, offset, datetime, shift, duration; dry run unless --execute; refused while the
group has members) and text output in kafka-consumer-groups' layout.

Must never: commit offsets without --execute, or swallow a broker error (every failure is a CliError).
"""
from __future__ import annotations

import argparse
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any, Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_protocol.timestamps import parse_instant_ms
from pylog.tools.errors import CliError
from pylog.tools.text_table import print_table as _table
from pylog.tools.client import add_connection_args, admin_client, fetch_metadata, result_or_error

REQUEST_TIMEOUT_S = 15.0
EARLIEST: OffsetSpec = OffsetSpec.earliest()   # type: ignore[no-untyped-call]  # untyped in confluent-kafka
LATEST: OffsetSpec = OffsetSpec.latest()       # type: ignore[no-untyped-call]
ACTIVE_STATES = {"stable", "preparingrebalance", "completingrebalance", "preparing_rebalance",
                 "completing_rebalance", "assigning", "reconciling"}
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("groups", help="list, describe, reset offsets of and delete consumer groups",
                                   description="Manage consumer groups (like kafka-consumer-groups).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    lst = actions.add_parser("list", help="list consumer groups")
    add_connection_args(lst)
    lst.add_argument("--state", action="store_true", help="also show each group's state")

    describe = actions.add_parser("describe", help="offsets, lag and members of a group")
    add_connection_args(describe)
    describe.add_argument("--group", required=True)
    describe.add_argument("--members", action="store_true", help="list members and their assignments")
    describe.add_argument("--state", action="store_true", help="show the group's coordinator and state")
    describe.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                          default="read_uncommitted",
                          help="the end LAG is measured to: the high watermark (LOG-END-OFFSET, the default) or "
                               "the last stable offset (LAST-STABLE-OFFSET, where a read_committed consumer stops "
                               "while a transaction is open)")

    reset = actions.add_parser("reset-offsets", help="plan or apply new committed offsets for an inactive group")
    add_connection_args(reset)
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,Q]",
                       help="topic (optionally some partitions) to reset, repeatable")
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    spec = reset.add_mutually_exclusive_group(required=True)
    spec.add_argument("--to-earliest", action="store_true")
    spec.add_argument("--to-latest", action="store_true")
    spec.add_argument("--to-offset", type=int, metavar="N")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[+hh:mm]")
    spec.add_argument("--shift-by", type=int, metavar="N")
    spec.add_argument("--by-duration", metavar="PnDTnHnMnS", help="ISO-8601 duration back from now")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")

    delete = actions.add_parser("delete", help="delete an empty group and its offsets")
    add_connection_args(delete)
    delete.add_argument("--group", action="append", required=True, help="group to delete, repeatable")

    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    handlers = {"list": _list, "describe": _describe, "reset-offsets": _reset, "delete": _delete}
    return handlers[args.action](admin, args)


# ---------------------------------------------------------------- broker calls (also the console's)
def group_description(admin: AdminClient, args: argparse.Namespace, group: str) -> Any:
    futures = admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)
    return result_or_error(futures[group], bootstrap=args.bootstrap_server, operation="DescribeGroups")


def state_name(desc: Any) -> str:
    """Kafka's name of a group's state (Stable, Empty, Dead, ...)."""
    state = getattr(desc, "state", None)
    name = getattr(state, "name", str(state))
    return {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead", "PREPARING_REBALANCE": "PreparingRebalance",
            "COMPLETING_REBALANCE": "CompletingRebalance", "UNKNOWN": "Unknown"}.get(name, name)


def committed_offsets(admin: AdminClient, args: argparse.Namespace, group: str,
                      tps: list[TopicPartition] | None = None) -> dict[tuple[str, int], int]:
    request = [ConsumerGroupTopicPartitions(group, tps)]
    futures = admin.list_consumer_group_offsets(request, request_timeout=REQUEST_TIMEOUT_S)
    result = result_or_error(futures[group], bootstrap=args.bootstrap_server, operation="OffsetFetch")
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []}


def list_offsets(admin: AdminClient, args: argparse.Namespace, specs: Mapping[tuple[str, int], OffsetSpec],
                 isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> dict[tuple[str, int], int]:
    """ListOffsets; for latest: the high watermark, or with READ_COMMITTED the last stable offset."""
    if not specs:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): s for (t, p), s in specs.items()},
                                 isolation_level=isolation_level, request_timeout=REQUEST_TIMEOUT_S)
    return {(tp.topic, tp.partition): result_or_error(f, topic=tp.topic, bootstrap=args.bootstrap_server,
                                                      operation="ListOffsets").offset
            for tp, f in futures.items()}


def commit_offsets(admin: AdminClient, args: argparse.Namespace, group: str,
                   offsets: Mapping[tuple[str, int], int]) -> None:
    """OffsetCommit of an inactive group's new offsets (generation -1, as kafka-consumer-groups)."""
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])]
    futures = admin.alter_consumer_group_offsets(request, request_timeout=REQUEST_TIMEOUT_S)
    result = result_or_error(futures[group], bootstrap=args.bootstrap_server, operation="OffsetCommit")
    for tp in result.topic_partitions or []:
        if tp.error is not None:
            raise CliError(f"OffsetCommit failed for {tp.topic}-{tp.partition}: {tp.error.str()}")


def _partitions_of(admin: AdminClient, args: argparse.Namespace, topic: str) -> list[int]:
    md = fetch_metadata(admin, args.bootstrap_server)
    tm = md.topics.get(topic)
    if tm is None or not tm.partitions:
        raise CliError(f"unknown topic '{topic}'")
    return sorted(tm.partitions)


def check_inactive(group: str, desc: Any) -> None:
    """Offsets are reset only while the group has no members (Kafka's rule)."""
    state = state_name(desc)
    if desc.members or state.lower() in ACTIVE_STATES:
        raise CliError(f"Assignments can only be reset if the group '{group}' is inactive, "
                       f"but the current state is {state}.")


# ---------------------------------------------------------------- lag (pure)
@dataclass(frozen=True)
class PartitionLag:
    """One partition of a group: its committed offset (-1: none), high watermark and last stable offset (-1:
    unknown), and the member that owns it (None: unassigned)."""

    topic: str
    partition: int
    current: int
    end: int
    stable: int
    owner: Any | None

    def lag(self, read_committed: bool = False) -> int | None:
        """How far the committed offset is behind the high watermark (or the last stable offset); None when
        either is unknown."""
        target = self.stable if read_committed else self.end
        return target - self.current if self.current >= 0 and target >= 0 else None


def owners(desc: Any) -> dict[tuple[str, int], Any]:
    """{(topic, partition): member} of a group's current assignment."""
    out: dict[tuple[str, int], Any] = {}
    for m in desc.members:
        for tp in (m.assignment.topic_partitions if m.assignment else []):
            out[(tp.topic, tp.partition)] = m
    return out


def partition_lags(committed: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int],
                   stable: Mapping[tuple[str, int], int], owned: Mapping[tuple[str, int], Any]) -> list[PartitionLag]:
    """Every partition the group has an offset for or owns, in topic-partition order."""
    return [PartitionLag(t, p, committed.get((t, p), -1), ends.get((t, p), -1), stable.get((t, p), -1),
                         owned.get((t, p))) for t, p in sorted(set(committed) | set(owned))]


# ---------------------------------------------------------------- actions
def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    result = result_or_error(admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S),
                             bootstrap=args.bootstrap_server, operation="ListGroups")
    groups = sorted(result.valid, key=lambda g: g.group_id)
    if args.state:
        width = max([len(g.group_id) for g in groups] + [5])
        print(f"{'GROUP':<{width}}  STATE")
        for g in groups:
            print(f"{g.group_id:<{width}}  {state_name(g)}")
    else:
        for g in groups:
            print(g.group_id)
    return 0


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    group = args.group
    desc = group_description(admin, args, group)
    state = state_name(desc)
    if state == "Dead":
        raise CliError(f"consumer group '{group}' does not exist")
    if args.state:
        c = desc.coordinator
        print(f"{'GROUP':<20} {'COORDINATOR (ID)':<30} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<20} #MEMBERS")
        print(f"{group:<20} {f'{c.host}:{c.port} ({c.id})':<30} {desc.partition_assignor or '':<20} {state:<20} "
              f"{len(desc.members)}")
        return 0
    if args.members:
        rows = [[group, m.member_id, m.host, m.client_id,
                 str(len(m.assignment.topic_partitions) if m.assignment else 0)] for m in desc.members]
        _table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"], rows)
        return 0
    owned = owners(desc)
    committed = committed_offsets(admin, args, group)
    keys = sorted(set(committed) | set(owned))
    ends = list_offsets(admin, args, {k: LATEST for k in keys})
    stable = list_offsets(admin, args, {k: LATEST for k in keys}, IsolationLevel.READ_COMMITTED)
    if not desc.members:
        print(f"\nConsumer group '{group}' has no active members.\n")
    rows = []
    for row in partition_lags(committed, ends, stable, owned):
        lag, m = row.lag(args.isolation_level == "read_committed"), row.owner
        rows.append([group, row.topic, str(row.partition), str(row.current) if row.current >= 0 else "-",
                     str(row.end) if row.end >= 0 else "-", str(lag) if lag is not None else "-",
                     str(row.stable) if row.stable >= 0 else "-",
                     m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-"])
    # LAST-STABLE-OFFSET after LAG: the first six columns stay kafka-consumer-groups' own
    _table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAST-STABLE-OFFSET",
            "CONSUMER-ID", "HOST", "CLIENT-ID"], rows)
    return 0


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    futures = admin.delete_consumer_groups(list(args.group), request_timeout=REQUEST_TIMEOUT_S)
    for group, fut in futures.items():
        result_or_error(fut, bootstrap=args.bootstrap_server, operation=f"DeleteGroups of '{group}'")
    names = ", ".join(f"'{g}'" for g in args.group)
    print(f"Deletion of requested consumer groups ({names}) was successful.")
    return 0


# ---------------------------------------------------------------- reset-offsets
def parse_topic_arg(text: str) -> tuple[str, list[int] | None]:
    """'t' -> ('t', None); 't:0,2' -> ('t', [0, 2])."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise CliError(f"bad --topic '{text}': expected TOPIC or TOPIC:P,Q")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise CliError(f"bad --topic '{text}': partitions must be integers") from None


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime formats ('2024-01-31T10:00:00.000', optional zone) to epoch ms (UTC if no zone)."""
    try:
        return parse_instant_ms(text)
    except ValueError as e:
        raise CliError(f"bad --to-datetime: {e}") from None


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration PnDTnHnMnS (as kafka-consumer-groups --by-duration) in milliseconds."""
    m = _DURATION.match(text.strip())
    if not m or not any(m.groups()):
        raise CliError(f"bad --by-duration '{text}': expected an ISO-8601 duration such as PT1H or P1DT30M")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def reset_targets(admin: AdminClient, args: argparse.Namespace,
                  committed: dict[tuple[str, int], int]) -> list[tuple[str, int]]:
    """The partitions a reset names: `args.all_topics` (those with offsets) or each `args.topic` (TOPIC[:P,Q])."""
    if args.all_topics:
        if not committed:
            raise CliError(f"group '{args.group}' has no committed offsets; name topics with --topic")
        return sorted(committed)
    out: list[tuple[str, int]] = []
    for text in args.topic:
        topic, parts = parse_topic_arg(text)
        known = _partitions_of(admin, args, topic)
        for p in parts if parts is not None else known:
            if p not in known:
                raise CliError(f"topic '{topic}' has no partition {p}")
            out.append((topic, p))
    return sorted(set(out))


def plan_offsets(args: argparse.Namespace, targets: list[tuple[str, int]], committed: dict[tuple[str, int], int],
                 low: dict[tuple[str, int], int], high: dict[tuple[str, int], int],
                 by_time: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The new offset of each target partition, clamped to [log start, log end] as Kafka does."""
    plan = {}
    for tp in targets:
        lo, hi = low[tp], high[tp]
        if args.to_earliest:
            new = lo
        elif args.to_latest:
            new = hi
        elif args.to_offset is not None:
            new = args.to_offset
        elif args.shift_by is not None:
            current = committed.get(tp, -1)
            if current < 0:
                raise CliError(f"partition {tp[0]}-{tp[1]} has no committed offset to shift")
            new = current + args.shift_by
        else:
            found = by_time.get(tp, -1)
            new = found if found >= 0 else hi
        plan[tp] = min(max(new, lo), hi)
    return plan


def _reset(admin: AdminClient, args: argparse.Namespace) -> int:
    group = args.group
    check_inactive(group, group_description(admin, args, group))
    committed = committed_offsets(admin, args, group)
    targets = reset_targets(admin, args, committed)
    low = list_offsets(admin, args, {tp: EARLIEST for tp in targets})
    high = list_offsets(admin, args, {tp: LATEST for tp in targets})
    by_time: dict[tuple[str, int], int] = {}
    if args.to_datetime or args.by_duration:
        ts = parse_datetime(args.to_datetime) if args.to_datetime else \
            int(dt.datetime.now().timestamp() * 1000) - parse_duration_ms(args.by_duration)
        by_time = list_offsets(admin, args, {tp: OffsetSpec.for_timestamp(ts) for tp in targets})
    plan = plan_offsets(args, targets, committed, low, high, by_time)
    if args.execute:
        commit_offsets(admin, args, group, plan)
    if not args.execute:
        print(f"Dry run: nothing was changed. The offsets group '{group}' would get (add --execute to apply):")
    _table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
           [[group, t, str(p), str(committed.get((t, p), "-")), str(o)] for (t, p), o in sorted(plan.items())])
    if args.execute:
        print(f"Reset the offsets of group '{group}' for {len(plan)} partition(s).")
    return 0
