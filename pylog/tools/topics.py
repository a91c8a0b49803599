"""`pylog topics`: the kafka-topics equivalent (create, list, describe, delete, alter).

Owns: the `topics` argument tree and the AdminClient calls behind it (CreateTopics, Metadata,
DescribeConfigs, DeleteTopics, CreatePartitions, IncrementalAlterConfigs), and the text output in
kafka-topics' layout. Must never: swallow a broker error; every failure is a one-line CliError.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    TopicMetadata,
)

from pylog.tools.errors import CliError
from pylog.tools.client import (
    add_connection_args,
    admin_client,
    describe_exception,
    fetch_metadata,
    parse_kv,
    result_or_error,
    topic_metadata,
)

REQUEST_TIMEOUT_S = 15.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("topics", help="create, list, describe, delete and alter topics",
                                   description="Manage topics (like kafka-topics).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic")
    add_connection_args(create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=None,
                        help="number of partitions (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=int, default=None,
                        help="replication factor (default: the broker's default)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="topic config, repeatable (e.g. retention.ms=60000)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="succeed quietly if the topic already exists")

    lst = actions.add_parser("list", help="list topic names")
    add_connection_args(lst)
    lst.add_argument("--exclude-internal", action="store_true", help="hide topics starting with __")

    describe = actions.add_parser("describe", help="partitions, leaders, replicas, ISR and configs")
    add_connection_args(describe)
    describe.add_argument("--topic", default=None, help="topic to describe (default: all topics)")
    describe.add_argument("--all-configs", action="store_true",
                          help="show every config the broker returns, not only overrides")
    describe.add_argument("--exclude-internal", action="store_true", help="hide topics starting with __")

    delete = actions.add_parser("delete", help="delete a topic")
    add_connection_args(delete)
    delete.add_argument("--topic", required=True)
    delete.add_argument("--if-exists", action="store_true", help="succeed quietly if the topic is unknown")

    alter = actions.add_parser("alter", help="add partitions, set or delete topic configs")
    add_connection_args(alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, default=None, help="new (larger) partition count")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="config to set, repeatable")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="config override to remove, repeatable")

    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    handlers = {"create": _create, "list": _list, "describe": _describe, "delete": _delete,
                "alter": _alter}
    configs = parse_kv(getattr(args, "config", []) or [], "--config")
    admin = admin_client(args)
    return handlers[args.action](admin, args, configs)


def _create(admin: AdminClient, args: argparse.Namespace, configs: dict[str, str]) -> int:
    if args.partitions is not None and args.partitions < 1:
        raise CliError(f"bad --partitions {args.partitions}: must be at least 1")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise CliError(f"bad --replication-factor {args.replication_factor}: must be at least 1")
    fetch_metadata(admin, args.bootstrap_server)  # fail fast if the broker does not answer
    new = NewTopic(args.topic,
                   num_partitions=args.partitions if args.partitions is not None else -1,
                   replication_factor=args.replication_factor if args.replication_factor is not None else -1,
                   config=configs)
    future = admin.create_topics([new], request_timeout=REQUEST_TIMEOUT_S)[args.topic]
    try:
        future.result()
    except Exception as e:  # noqa: BLE001 - translated below
        message = describe_exception(e, topic=args.topic, bootstrap=args.bootstrap_server,
                                     operation="CreateTopics")
        if args.if_not_exists and message.endswith("already exists"):
            return 0
        raise CliError(message) from None
    print(f"Created topic {args.topic}.")
    return 0


def _list(admin: AdminClient, args: argparse.Namespace, _configs: dict[str, str]) -> int:
    md = fetch_metadata(admin, args.bootstrap_server)
    for name in sorted(md.topics):
        if args.exclude_internal and name.startswith("__"):
            continue
        print(name)
    return 0


def _describe(admin: AdminClient, args: argparse.Namespace, _configs: dict[str, str]) -> int:
    if args.topic is not None:
        topics = [topic_metadata(admin, args.bootstrap_server, args.topic)]
    else:
        md = fetch_metadata(admin, args.bootstrap_server)
        topics = [md.topics[n] for n in sorted(md.topics)
                  if not (args.exclude_internal and n.startswith("__"))]
    configs = _topic_configs(admin, [t.topic for t in topics if t.topic is not None], args.all_configs)
    for tm in topics:
        _print_topic(tm, configs.get(tm.topic or ""))
    return 0


def _topic_configs(admin: AdminClient, names: list[str], show_all: bool) -> dict[str, dict[str, str]]:
    """DescribeConfigs for the topics; on a broker error, warn on stderr and show partitions only."""
    if not names:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    try:
        futures = admin.describe_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        _warn(f"cannot describe configs: {describe_exception(e, operation='DescribeConfigs')}")
        return {}
    out: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        try:
            entries = future.result()
        except Exception as e:  # noqa: BLE001
            _warn("cannot describe configs of topic "
                  f"'{resource.name}': {describe_exception(e, operation='DescribeConfigs')}")
            continue
        out[resource.name] = {
            name: "" if entry.value is None else str(entry.value)
            for name, entry in sorted(entries.items())
            if show_all or _is_override(entry)
        }
    return out


def _is_override(entry: ConfigEntry) -> bool:
    """A topic-level setting, as kafka-topics --describe shows (not a broker or static default)."""
    return (not entry.is_default and not entry.is_sensitive
            and entry.source in (ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
                                 ConfigSource.UNKNOWN_CONFIG.value))


def _print_topic(tm: TopicMetadata, configs: dict[str, str] | None) -> None:
    partitions = [tm.partitions[p] for p in sorted(tm.partitions)]
    rf = len(partitions[0].replicas) if partitions else 0
    config_text = ",".join(f"{k}={v}" for k, v in configs.items()) if configs else ""
    print(f"Topic: {tm.topic}\tPartitionCount: {len(partitions)}\tReplicationFactor: {rf}\t"
          f"Configs: {config_text}")
    for pm in partitions:
        line = (f"\tTopic: {tm.topic}\tPartition: {pm.id}\tLeader: {_node(pm.leader)}\t"
                f"Replicas: {_ids(pm.replicas)}\tIsr: {_ids(pm.isrs)}")
        if pm.error is not None:
            line += f"\tError: {pm.error.name()}"
        print(line)


def _node(node_id: int) -> str:
    return "none" if node_id < 0 else str(node_id)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def _delete(admin: AdminClient, args: argparse.Namespace, _configs: dict[str, str]) -> int:
    try:
        topic_metadata(admin, args.bootstrap_server, args.topic)
    except CliError as e:
        if args.if_exists and str(e).startswith("unknown topic"):
            return 0
        raise
    future = admin.delete_topics([args.topic], request_timeout=REQUEST_TIMEOUT_S)[args.topic]
    result_or_error(future, topic=args.topic, bootstrap=args.bootstrap_server, operation="DeleteTopics")
    print(f"Deleted topic {args.topic}.")
    return 0


def _alter(admin: AdminClient, args: argparse.Namespace, configs: dict[str, str]) -> int:
    if args.partitions is None and not configs and not args.delete_config:
        raise CliError("nothing to alter: give --partitions, --config or --delete-config")
    clash = set(configs) & set(args.delete_config)
    if clash:
        raise CliError(f"config {sorted(clash)[0]!r} is both set and deleted")
    tm = topic_metadata(admin, args.bootstrap_server, args.topic)
    if args.partitions is not None:
        current = len(tm.partitions)
        if args.partitions <= current:
            raise CliError(f"bad --partitions {args.partitions}: topic '{args.topic}' already has "
                           f"{current} partitions (the count can only grow)")
        future = admin.create_partitions([NewPartitions(args.topic, args.partitions)],
                                         request_timeout=REQUEST_TIMEOUT_S)[args.topic]
        result_or_error(future, topic=args.topic, bootstrap=args.bootstrap_server,
                        operation="CreatePartitions")
        print(f"Topic {args.topic} now has {args.partitions} partitions.")
    if configs or args.delete_config:
        _alter_configs(admin, args, configs)
    return 0


def _alter_configs(admin: AdminClient, args: argparse.Namespace, configs: dict[str, str]) -> None:
    entries: list[Any] = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ] + [
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in args.delete_config
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, args.topic, incremental_configs=entries)
    try:
        futures = admin.incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        raise CliError(describe_exception(e, topic=args.topic, operation="IncrementalAlterConfigs")) from None
    for future in futures.values():
        result_or_error(future, topic=args.topic, bootstrap=args.bootstrap_server,
                        operation="IncrementalAlterConfigs")
    changed = [f"{k}={v}" for k, v in configs.items()] + [f"-{k}" for k in args.delete_config]
    print(f"Updated config of topic {args.topic}: {', '.join(changed)}.")


def _warn(message: str) -> None:
    print(f"pylog topics: warning: {message}", file=sys.stderr)
