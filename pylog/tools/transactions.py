"""`pylog transactions`: the kafka-transactions equivalent (list, describe, describe-producers, abort,
find-hanging).

Owns: the `transactions` argument tree (Kafka 3.9's subcommands and options, `--bootstrap-server`
accepted before or after the subcommand), find-hanging's search (Kafka's: open transactions whose
producer last wrote longer than `--max-transaction-timeout` ago and whose coordinator does not list the
partition in the producer's transaction), abort's look-up of the producer whose open transaction starts
at `--start-offset`, and the tables in kafka-transactions' columns. The requests are
`pylog.tools.wire_admin`'s.

Must never: write a marker except for `abort`, or abort anything but the one transaction identified.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

from pylog.tools.client import DEFAULT_BOOTSTRAP, add_command_config_arg, check_reachable, client_security, parse_kv
from pylog.tools.errors import CliError
from pylog.tools.text_table import print_table
from pylog.tools.wire_admin import PartitionInfo, ProducerState, TxnDescription, WireAdmin

STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
          "PrepareEpochFence")
DEFAULT_TIMEOUT_MS = 15_000
SETTINGS = ("client.id", "request.timeout.ms", "socket.timeout.ms")


def _state(value: str) -> str:
    for s in STATES:
        if s.lower() == value.strip().lower():
            return s
    raise argparse.ArgumentTypeError(f"{value!r} is not a transaction state: choose one of {', '.join(STATES)}")


def _connection_args(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """`--bootstrap-server` and `-X` before the subcommand (kafka-transactions' place) and after it (the
    other pylog tools'); SUPPRESS keeps a subcommand from resetting what was given before it."""
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP if top else argparse.SUPPRESS,
                        metavar="HOST:PORT", help="broker(s) to connect to, comma separated "
                                                  f"(default {DEFAULT_BOOTSTRAP}; before or after the subcommand)")
    parser.add_argument("--property", "-X", dest="properties" if top else "more_properties", action="append",
                        default=[], metavar="KEY=VALUE",
                        help=f"client setting, repeatable: {', '.join(SETTINGS[:2])}")
    add_command_config_arg(parser, None if top else argparse.SUPPRESS)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transactions", help="list and describe transactions, find and abort hanging ones",
        description="Analyze the transactional state of producers (like kafka-transactions): detect and "
                    "recover from hanging transactions.")
    _connection_args(parser, top=True)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    lst = actions.add_parser("list", help="list transactions (every broker's coordinator)")
    _connection_args(lst)
    lst.add_argument("--state", dest="states", action="append", type=_state, default=[], metavar="STATE",
                     help=f"only transactions in this state, repeatable ({', '.join(STATES)})")
    lst.add_argument("--producer-id", dest="producer_ids", action="append", type=int, default=[], metavar="ID",
                     help="only the transactions of this producer id, repeatable")
    lst.add_argument("--duration-filter", type=int, default=None, metavar="MS",
                     help="only transactions open longer than MS milliseconds (KIP-994)")

    describe = actions.add_parser("describe", help="the state of one transactional id")
    _connection_args(describe)
    describe.add_argument("--transactional-id", required=True)

    producers = actions.add_parser("describe-producers", help="the active producers of a topic partition")
    _connection_args(producers)
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    producers.add_argument("--broker-id", type=int, default=None,
                           help="ask this replica instead of the partition's leader")

    abort = actions.add_parser(
        "abort", help="abort a hanging transaction (writes an abort marker to the partition)",
        description="Abort the open transaction of one producer in one partition: name it by the offset it "
                    "starts at (--start-offset, see describe-producers or find-hanging), or by --producer-id, "
                    "--producer-epoch and --coordinator-epoch.")
    _connection_args(abort)
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, default=None, help="start offset of the transaction to abort")
    abort.add_argument("--producer-id", type=int, default=None)
    abort.add_argument("--producer-epoch", type=int, default=None)
    abort.add_argument("--coordinator-epoch", type=int, default=None)

    hanging = actions.add_parser(
        "find-hanging", help="find hanging transactions",
        description="Open transactions whose producer last wrote longer than --max-transaction-timeout ago and "
                    "that their coordinator does not track in that partition: nothing will ever end them, and "
                    "they hold back the last stable offset (read_committed consumers stop there). Abort them "
                    "with `abort`.")
    _connection_args(hanging)
    hanging.add_argument("--broker-id", type=int, default=None, help="search the partitions this broker holds")
    hanging.add_argument("--topic", default=None, help="search this topic")
    hanging.add_argument("--partition", type=int, default=None, help="only this partition (needs --topic)")
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                         help="only transactions whose producer last wrote to the partition longer ago than this "
                              "(default 15, the broker's default transaction.max.timeout.ms; 0: any age)")

    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = parse_kv([*args.properties, *getattr(args, "more_properties", [])], "--property")
    client_id, timeout_s = _settings(settings)
    check_reachable(args.bootstrap_server)
    handlers = {"list": _list, "describe": _describe, "describe-producers": _describe_producers,
                "abort": _abort, "find-hanging": _find_hanging}
    with WireAdmin(args.bootstrap_server, client_id, timeout_s, client_security(args)) as admin:
        return handlers[args.action](admin, args)


def _settings(settings: dict[str, str]) -> tuple[str, float]:
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise CliError(f"unsupported setting {unknown[0]!r} for pylog transactions: it takes only "
                       f"{', '.join(SETTINGS)}")
    timeout = settings.get("request.timeout.ms", settings.get("socket.timeout.ms", str(DEFAULT_TIMEOUT_MS)))
    if not timeout.isdigit() or int(timeout) <= 0:
        raise CliError(f"bad request.timeout.ms={timeout!r}: expected a positive number of milliseconds")
    return settings.get("client.id", "pylog-transactions"), int(timeout) / 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- list, describe
def _list(admin: WireAdmin, args: argparse.Namespace) -> int:
    if args.duration_filter is not None and args.duration_filter < 0:
        raise CliError(f"bad --duration-filter {args.duration_filter}: must not be negative")
    listings = admin.list_transactions(args.states, args.producer_ids,
                                       -1 if args.duration_filter is None else args.duration_filter)
    rows = [[t.transactional_id, str(t.coordinator), str(t.producer_id), t.state]
            for t in sorted(listings, key=lambda t: (t.coordinator, t.transactional_id))]
    table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)
    return 0


def _describe(admin: WireAdmin, args: argparse.Namespace) -> int:
    txn_id = args.transactional_id
    found = admin.describe_transaction(txn_id)
    if found is None:
        raise CliError(f"transactional id '{txn_id}' is not known to its coordinator; "
                       "`pylog transactions list` shows the ids it knows")
    table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
           "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
          [describe_row(found, _now_ms())])
    return 0


def describe_row(d: TxnDescription, now_ms: int) -> list[str]:
    started = d.start_ms >= 0
    return [str(d.coordinator), d.transactional_id, str(d.producer_id), str(d.producer_epoch), d.state,
            str(d.timeout_ms), str(d.start_ms) if started else "None",
            str(max(0, now_ms - d.start_ms)) if started else "None",
            ",".join(f"{t}-{p}" for t, p in sorted(d.partitions))]


# ---------------------------------------------------------------- describe-producers
def _describe_producers(admin: WireAdmin, args: argparse.Namespace) -> int:
    info = admin.partition(args.topic, args.partition)
    if args.broker_id is not None and args.broker_id not in info.replicas:
        raise CliError(f"broker {args.broker_id} holds no replica of {args.topic}-{args.partition} "
                       f"(replicas: {','.join(map(str, info.replicas))})")
    states = admin.describe_producers([info], args.broker_id).get((info.topic, info.partition), [])
    rows = [[str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch), str(s.last_sequence),
             str(s.last_timestamp), str(s.txn_start_offset) if s.txn_start_offset >= 0 else "None"]
            for s in sorted(states, key=lambda s: s.producer_id)]
    table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
           "CurrentTransactionStartOffset"], rows)
    return 0


# ---------------------------------------------------------------- abort
def _abort(admin: WireAdmin, args: argparse.Namespace) -> int:
    where = f"{args.topic}-{args.partition}"
    explicit = [args.producer_id, args.producer_epoch, args.coordinator_epoch]
    if args.start_offset is None and args.producer_id is None:
        raise CliError("name the transaction to abort: --start-offset N, or --producer-id, --producer-epoch and "
                       "--coordinator-epoch")
    if args.start_offset is not None and any(v is not None for v in explicit):
        raise CliError("give either --start-offset or --producer-id/--producer-epoch/--coordinator-epoch, not both")
    info = admin.partition(args.topic, args.partition)
    if args.start_offset is not None:
        producer = _open_at(admin, info, args.start_offset)
        pid, epoch, coordinator_epoch = producer.producer_id, producer.producer_epoch, producer.coordinator_epoch
        started = f" that started at offset {args.start_offset}"
    else:
        for flag, value in (("--producer-epoch", args.producer_epoch), ("--coordinator-epoch", args.coordinator_epoch)):
            if value is None:
                raise CliError(f"missing {flag} (with --producer-id, give --producer-epoch and --coordinator-epoch)")
        pid, epoch, coordinator_epoch, started = args.producer_id, args.producer_epoch, args.coordinator_epoch, ""
    # A transaction opened by a producer id that never had a marker shows coordinator epoch -1: Kafka's
    # tool then sends 0, which is not older than any epoch the partition can hold.
    coordinator_epoch = max(coordinator_epoch, 0)
    admin.abort(info, pid, epoch, coordinator_epoch)
    print(f"Aborted the transaction of producer {pid} (epoch {epoch}, coordinator epoch {coordinator_epoch}) "
          f"in {where}{started}.")
    return 0


def _open_at(admin: WireAdmin, info: PartitionInfo, start_offset: int) -> ProducerState:
    states = admin.describe_producers([info]).get((info.topic, info.partition), [])
    for s in states:
        if s.txn_start_offset == start_offset:
            return s
    starts = sorted(s.txn_start_offset for s in states if s.txn_start_offset >= 0)
    known = (f"open transactions there start at {', '.join(map(str, starts))}" if starts
             else "it has no open transaction")
    raise CliError(f"no open transaction starts at offset {start_offset} in {info.topic}-{info.partition} "
                   f"({known})")


# ---------------------------------------------------------------- find-hanging
def _find_hanging(admin: WireAdmin, args: argparse.Namespace) -> int:
    if args.topic is None and args.broker_id is None:
        raise CliError("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None and args.topic is None:
        raise CliError("--partition needs --topic")
    if args.max_transaction_timeout < 0:
        raise CliError(f"bad --max-transaction-timeout {args.max_transaction_timeout}: must not be negative")
    partitions = _search_scope(admin, args)
    max_ms = args.max_transaction_timeout * 60_000
    now = _now_ms()
    candidates = [(tp, s) for tp, states in sorted(admin.describe_producers(partitions, args.broker_id).items())
                  for s in states if s.txn_start_offset >= 0 and now - s.last_timestamp > max_ms]
    hanging = find_hanging(admin, candidates) if candidates else []
    rows = [[t, str(p), str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch),
             str(s.txn_start_offset), str(s.last_timestamp), str(max(0, now - s.last_timestamp) // 60_000)]
            for (t, p), s in hanging]
    table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
           "LastTimestamp", "Duration(min)"], rows)
    return 0


def _search_scope(admin: WireAdmin, args: argparse.Namespace) -> list[PartitionInfo]:
    if args.topic is not None and args.partition is not None:
        found = [admin.partition(args.topic, args.partition)]
    else:
        found = [p for parts in admin.metadata(None if args.topic is None else [args.topic]).values() for p in parts]
    if args.broker_id is not None:
        if args.broker_id not in admin.nodes:
            known = ", ".join(str(n) for n in sorted(admin.nodes)) or "none"
            raise CliError(f"broker {args.broker_id} is not in the cluster (brokers: {known})")
        found = [p for p in found if args.broker_id in p.replicas]
    return found


def find_hanging(admin: WireAdmin, candidates: list[tuple[tuple[str, int], ProducerState]]
                 ) -> list[tuple[tuple[str, int], ProducerState]]:
    """Kafka's rule: an open transaction is hanging when no coordinator lists its producer id, or the
    producer's transactional id is unknown, or its transaction does not hold that partition (the
    partitions of an Ongoing transaction and those of a PrepareCommit/PrepareAbort one still waiting for
    their markers)."""
    pids = sorted({s.producer_id for _, s in candidates})
    ids = {t.producer_id: t.transactional_id for t in admin.list_transactions(producer_ids=pids)
           if t.producer_id in pids}
    descriptions: dict[str, Any] = {txn_id: admin.describe_transaction(txn_id) for txn_id in sorted(set(ids.values()))}
    out = []
    for tp, s in candidates:
        txn_id = ids.get(s.producer_id)
        d = descriptions.get(txn_id) if txn_id is not None else None
        if d is None or tp not in d.partitions:
            out.append((tp, s))
    return out


def table(header: list[str], rows: list[list[str]]) -> None:
    """Two spaces apart: kafka-transactions' layout, without tabs."""
    print_table(header, rows, gap="  ")
