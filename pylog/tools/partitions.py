"""`pylog partitions reassign`: move partitions' replicas between brokers, as kafka-reassign-partitions does.

Owns: the `partitions` argument tree; Kafka's JSON files (`--topics-to-move-json-file`
{"version":1,"topics":[{"topic":"t"}]} and the reassignment file {"version":1,"partitions":[{"topic":"t",
"partition":0,"replicas":[1,2]}]}, "log_dirs" accepted as "any" only); the plan of `--generate` (Kafka's replica
assignment over `--broker-list`, rack-aware when every broker has a rack, unless --disable-rack-aware); and
kafka-reassign-partitions' output: `--generate` prints the current and the proposed assignment, `--execute` the
current one (to keep for a rollback) before it asks the controller (AlterPartitionReassignments, KIP-455),
`--verify` whether each move completed (ListPartitionReassignments, Metadata), `--cancel` stops moves in progress
and `--list` shows them. The broker does the moving (broker/cluster/controller.py). `pylog cluster decommission`
and `pylog cluster add-broker` (registered by pylog/tools/cluster_cmd.py, run here) plan the moves that empty a
leaving broker or fill a joining one (pylog/tools/replica_plan.py), print them, and with --execute start them
and wait for them.

Must never: start a move it did not print the rollback of first, or report a move done that is still in progress.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from broker.cluster.assignment import assign_replicas
from kafka_protocol.errors import ErrorCode, KafkaError
from pylog.tools.client import DEFAULT_BOOTSTRAP, add_command_config_arg, check_reachable, client_security
from pylog.tools.errors import CliError
from pylog.tools.replica_plan import add_broker_plan, decommission_plan
from pylog.tools.wire_admin import WireAdmin, error_name

TP = tuple[str, int]


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser("partitions", help="move partition replicas between brokers (reassign)",
                                   description="Partition operations of a cluster.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    r = actions.add_parser("reassign", help="generate, execute, verify, cancel or list replica moves "
                                            "(like kafka-reassign-partitions)",
                           description="Move partition replicas between brokers, with Kafka's JSON files.")
    r.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP})")
    add_command_config_arg(r)
    mode = r.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generate", action="store_true", help="propose an assignment of --topics-to-move-json-file "
                                                               "over --broker-list")
    mode.add_argument("--execute", action="store_true", help="start the moves of --reassignment-json-file")
    mode.add_argument("--verify", action="store_true", help="tell whether the moves of --reassignment-json-file "
                                                             "completed")
    mode.add_argument("--cancel", action="store_true", help="cancel the moves of --reassignment-json-file in progress")
    mode.add_argument("--list", action="store_true", help="list the moves in progress")
    r.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE")
    r.add_argument("--broker-list", metavar="ID,ID,...", help="brokers the generated assignment may use")
    r.add_argument("--reassignment-json-file", type=Path, metavar="FILE")
    r.add_argument("--disable-rack-aware", action="store_true", help="generate without rack awareness")
    r.add_argument("--timeout", type=int, default=60_000, metavar="MS", help="the controller's deadline (default 60000)")
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_reachable(args.bootstrap_server)
    with WireAdmin(args.bootstrap_server, "pylog-partitions", 30.0, client_security(args)) as admin:
        if args.generate:
            return _generate(admin, args)
        if args.list:
            return _list(admin)
        wanted = read_reassignment(_required(args.reassignment_json_file, "--reassignment-json-file"))
        if args.execute:
            return _execute(admin, wanted, args.timeout)
        if args.verify:
            return _verify(admin, wanted)
        return _cancel(admin, wanted, args.timeout)


def _required(value: Any, flag: str) -> Any:
    if value is None:
        raise CliError(f"this mode needs {flag}")
    return value


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise CliError(f"{path} is not JSON: {e}") from None


def read_reassignment(path: Path) -> dict[TP, list[int]]:
    """A reassignment file's target replicas per partition; CliError naming the file and the problem."""
    doc = _json_file(path)
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list) or not parts:
        raise CliError(f"{path}: expected {{\"version\":1,\"partitions\":[{{\"topic\":...,\"partition\":...,"
                       "\"replicas\":[...]}]}")
    out: dict[TP, list[int]] = {}
    for i, p in enumerate(parts):
        try:
            tp = (str(p["topic"]), int(p["partition"]))
            replicas = [int(r) for r in p["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise CliError(f"{path}: partitions[{i}] needs topic, partition and replicas (broker ids)") from None
        if any(d != "any" for d in p.get("log_dirs") or []):
            raise CliError(f"{path}: partitions[{i}]: log_dirs other than \"any\" are not supported (one data "
                           "directory per broker)")
        if tp in out:
            raise CliError(f"{path}: partition {tp[0]}-{tp[1]} appears more than once")
        out[tp] = replicas
    return out


def _document(assignment: dict[TP, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _current(admin: WireAdmin, topics: list[str] | None) -> dict[TP, list[int]]:
    """Each partition's replicas, of `topics` (None: every topic)."""
    return {(i.topic, i.partition): list(i.replicas) for parts in admin.metadata(topics).values() for i in parts}


def _generate(admin: WireAdmin, args: argparse.Namespace) -> int:
    doc = _json_file(_required(args.topics_to_move_json_file, "--topics-to-move-json-file"))
    try:
        topics = [str(t["topic"]) for t in doc["topics"]]
    except (KeyError, TypeError):
        raise CliError(f"{args.topics_to_move_json_file}: expected {{\"version\":1,\"topics\":[{{\"topic\":...}}]}}") \
            from None
    try:
        brokers = [int(b) for b in _required(args.broker_list, "--broker-list").split(",") if b.strip()]
    except ValueError:
        raise CliError(f"--broker-list must be broker ids separated by commas, got {args.broker_list!r}") from None
    current = _current(admin, topics)
    unknown = sorted(set(brokers) - set(admin.nodes))
    if unknown:
        raise CliError(f"--broker-list names brokers the cluster does not have: {unknown} (it has "
                       f"{sorted(admin.nodes)})")
    racks = {b: None if args.disable_rack_aware else admin.nodes[b].rack for b in brokers}
    proposed: dict[TP, list[int]] = {}
    for topic in topics:
        ps = sorted(p for t, p in current if t == topic)
        try:
            plan = assign_replicas(racks, len(ps), len(current[(topic, ps[0])]), rng=random.Random())
        except KafkaError as e:
            raise CliError(f"topic {topic}: {e}") from None
        proposed.update({(topic, p): plan[i] for i, p in enumerate(ps)})
    print("Current partition replica assignment")
    print(_document(current))
    print()
    print("Proposed partition reassignment configuration")
    print(_document(proposed))
    return 0


def _execute(admin: WireAdmin, wanted: dict[TP, list[int]], timeout_ms: int) -> int:
    current = _current(admin, sorted({t for t, _ in wanted}))
    missing = sorted(tp for tp in wanted if tp not in current)
    if missing:
        raise CliError(f"unknown partitions: {', '.join(f'{t}-{p}' for t, p in missing)}")
    print("Current partition replica assignment")
    print()
    print(_document({tp: current[tp] for tp in wanted}))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    outcomes = admin.alter_reassignments(dict(wanted), timeout_ms)
    _raise_failures(outcomes, "start")
    print("Successfully started partition reassignment" + ("s" if len(wanted) > 1 else "") + " for "
          + ",".join(f"{t}-{p}" for t, p in sorted(wanted)))
    return 0


def _raise_failures(outcomes: dict[TP, tuple[int, str | None]], what: str) -> None:
    failed = {tp: o for tp, o in outcomes.items() if o[0] != ErrorCode.none}
    if failed:
        raise CliError(f"could not {what} the reassignment of " + "; ".join(
            f"{t}-{p}: {error_name(code)}" + (f": {message}" if message else "")
            for (t, p), (code, message) in sorted(failed.items())))


def _verify(admin: WireAdmin, wanted: dict[TP, list[int]]) -> int:
    moving = admin.list_reassignments()
    current = _current(admin, sorted({t for t, _ in wanted}))
    print("Status of partition reassignment:")
    failed = 0
    for (t, p), target in sorted(wanted.items()):
        if (t, p) in moving:
            print(f"Reassignment of partition {t}-{p} is still in progress.")
        elif current.get((t, p)) == target:
            print(f"Reassignment of partition {t}-{p} is completed.")
        else:
            failed += 1
            print(f"There is no active reassignment of partition {t}-{p}, but replica set is "
                  f"{current.get((t, p))} rather than {target}.")
    return 1 if failed else 0


def _cancel(admin: WireAdmin, wanted: dict[TP, list[int]], timeout_ms: int) -> int:
    outcomes = admin.alter_reassignments({tp: None for tp in wanted}, timeout_ms)
    cancelled = sorted(tp for tp, (code, _) in outcomes.items() if code == ErrorCode.none)
    _raise_failures({tp: o for tp, o in outcomes.items() if o[0] != ErrorCode.no_reassignment_in_progress}, "cancel")
    print("Successfully cancelled partition reassignments for: " + ",".join(f"{t}-{p}" for t, p in cancelled))
    return 0


def add_membership_args(parser: argparse.ArgumentParser) -> None:
    """The arguments of `pylog cluster decommission` and `pylog cluster add-broker`."""
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP})")
    add_command_config_arg(parser)
    parser.add_argument("--broker", type=_broker_ids, required=True, metavar="ID[,ID...]",
                        help="the broker(s) leaving (decommission) or joining (add-broker), e.g. 3 or 3,4")
    parser.add_argument("--execute", action="store_true", help="start the moves (else only print the plan)")
    parser.add_argument("--wait", type=float, default=600.0, metavar="SECONDS",
                        help="with --execute, how long to wait for the moves to complete (default 600)")


def _broker_ids(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a broker id or a comma-separated list of them "
                                         "(e.g. 3 or 3,4)") from None
    if len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"{text!r} names a broker twice")
    return ids


def run_membership(args: argparse.Namespace) -> int:
    """`pylog cluster decommission|add-broker`: plan, print, and with --execute run and wait for the moves."""
    check_reachable(args.bootstrap_server)
    with WireAdmin(args.bootstrap_server, "pylog-cluster", 30.0, client_security(args)) as admin:
        current = _current(admin, None)
        missing = [b for b in args.broker if b not in admin.nodes]
        if missing:
            raise CliError(f"broker {','.join(map(str, missing))} is not a live broker of the cluster "
                           f"(brokers: {sorted(admin.nodes)})")
        brokers = sorted(admin.nodes)
        if args.cluster_command == "decommission":
            try:
                plan = decommission_plan(current, brokers, {b: n.rack for b, n in admin.nodes.items()}, args.broker)
            except ValueError as e:
                raise CliError(str(e)) from None
        else:
            plan = add_broker_plan(current, brokers, args.broker)
        print("Proposed partition reassignment configuration")
        print(_document(plan))
        if not plan:
            one = len(args.broker) == 1
            named = f"broker {args.broker[0]}" if one else f"brokers {','.join(map(str, args.broker))}"
            state = ("holds no replicas" if one else "hold no replicas") if args.cluster_command == "decommission" \
                else ("holds its share already" if one else "hold their shares already")
            print(f"nothing to move: {named} {state}")
            return 0
        if not args.execute:
            print("(a plan only: run again with --execute to move them)")
            return 0
        _raise_failures(admin.alter_reassignments(plan), "start")
        print(f"Started {len(plan)} partition move(s); waiting for them (at most {args.wait:.0f} s)")
        return _wait_moves(admin, plan, args.wait)


def _wait_moves(admin: WireAdmin, plan: dict[TP, list[int]], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        moving = set(admin.list_reassignments()) & set(plan)
        if not moving:
            print(f"All {len(plan)} move(s) completed")
            return 0
        if time.monotonic() > deadline:
            raise CliError(f"{len(moving)} move(s) still in progress after {timeout_s:.0f} s (pylog partitions "
                           "reassign --list shows them; they go on in the brokers)")
        time.sleep(0.5)


def _list(admin: WireAdmin) -> int:
    moving = admin.list_reassignments()
    if not moving:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (t, p), (replicas, adding, removing) in sorted(moving.items()):
        print(f"{t}-{p}: replicas: {','.join(map(str, replicas))}. adding: {','.join(map(str, adding))}. "
              f"removing: {','.join(map(str, removing))}.")
    return 0
