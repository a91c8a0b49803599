"""`pylog acls`: the kafka-acls equivalent (add, list, remove), over CreateAcls, DescribeAcls and DeleteAcls.

Owns: the `acls` argument tree in kafka-acls' words (--allow-principal/--deny-principal, --operation,
--topic/--group/--cluster/--transactional-id, --resource-pattern-type, --allow-host/--deny-host), the
confluent-kafka AdminClient calls behind it, and kafka-acls' listing layout. Needs a broker with
`authorizer.class.name` set (the broker answers SECURITY_DISABLED otherwise, which this reports).

Must never: remove ACLs without a resource named (or --all), or report success for a binding the broker refused.
"""
from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from pylog.tools.client import add_connection_args, admin_client, result_or_error
from pylog.tools.errors import CliError

OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite")
PATTERNS = ("literal", "prefixed", "match", "any")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("acls", help="add, list and remove ACLs", description="Manage ACLs (like kafka-acls).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, helptext in (("add", "add ALLOW or DENY bindings"), ("list", "list the bindings that match"),
                           ("remove", "remove the bindings that match")):
        p = actions.add_parser(name, help=helptext)
        add_connection_args(p)
        p.add_argument("--topic", action="append", default=[], help="a topic (repeatable); '*' is every topic")
        p.add_argument("--group", action="append", default=[], help="a consumer group (repeatable)")
        p.add_argument("--transactional-id", action="append", default=[], help="a transactional id (repeatable)")
        p.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
        p.add_argument("--resource-pattern-type", choices=PATTERNS, default="literal" if name == "add" else "any",
                       help="literal or prefixed (list and remove also take match and any)")
        p.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
        p.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
        p.add_argument("--allow-host", action="append", default=[], help="default * (add)")
        p.add_argument("--deny-host", action="append", default=[], help="default * (add)")
        p.add_argument("--operation", action="append", default=[], type=_operation, metavar="OP",
                       help=f"repeatable: {', '.join(OPERATIONS)} (add: default All)")
        if name == "remove":
            p.add_argument("--all", action="store_true", help="with no resource named: remove every binding")
    parser.set_defaults(func=run)


def _operation(text: str) -> str:
    for op in OPERATIONS:
        if op.lower() == text.strip().lower().replace("_", ""):
            return op
    raise argparse.ArgumentTypeError(f"{text!r} is not an ACL operation: choose one of {', '.join(OPERATIONS)}")


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, Any]]:
    out: list[tuple[ResourceType, Any]] = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.BROKER, "kafka-cluster"))
    return out


def _op(name: str) -> AclOperation:
    return AclOperation[{"ClusterAction": "CLUSTER_ACTION", "DescribeConfigs": "DESCRIBE_CONFIGS",
                         "AlterConfigs": "ALTER_CONFIGS", "IdempotentWrite": "IDEMPOTENT_WRITE"}.get(name, name.upper())]


def _entries(args: argparse.Namespace, adding: bool) -> list[tuple[Any, Any, AclOperation, AclPermissionType]]:
    """(principal, host, operation, permission) for the flags given; None matches any (list, remove)."""
    ops = [_op(o) for o in args.operation] or [AclOperation.ALL if adding else AclOperation.ANY]
    out: list[tuple[Any, Any, AclOperation, AclPermissionType]] = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise CliError(f"bad principal {principal!r}: expected Type:name, such as User:alice")
            for host in hosts or ["*"]:
                out += [(principal, host, op, permission) for op in ops]
    if not out and not adding:
        out = [(None, None, op, AclPermissionType.ANY) for op in ops]
    return out


def _describe(binding: Any) -> str:
    return (f"(principal={binding.principal}, host={binding.host}, operation={binding.operation.name}, "
            f"permissionType={binding.permission_type.name})")


def _require_authorizer(admin: Any) -> None:
    """librdkafka drops DescribeAcls' SECURITY_DISABLED (an empty list comes back): ask the broker's
    authorizer.class.name first, so that "no ACLs" is never said of a broker that has none."""
    from confluent_kafka.admin import ConfigResource
    try:
        brokers = admin.list_topics(timeout=10).brokers
        resource = ConfigResource(ConfigResource.Type.BROKER, str(min(brokers)))
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
    except Exception:  # noqa: BLE001 - not allowed to describe configs: the ACL calls answer for themselves
        return
    entry = configs.get("authorizer.class.name")
    if entry is not None and not (entry.value or "").strip():
        raise CliError("SECURITY_DISABLED: the broker has no authorizer; set "
                       "authorizer.class.name=kafka.security.authorizer.AclAuthorizer in its settings")


def run(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    where = {"bootstrap": args.bootstrap_server}
    _require_authorizer(admin)
    resources = _resources(args)
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    if args.action == "add":
        if not resources:
            raise CliError("name a resource: --topic, --group, --transactional-id or --cluster")
        entries = _entries(args, adding=True)
        if not entries:
            raise CliError("name a principal: --allow-principal User:NAME or --deny-principal User:NAME")
        if pattern not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
            raise CliError("--resource-pattern-type must be literal or prefixed to add")
        bindings = [AclBinding(rt, name, pattern, p, h, op, perm) for rt, name in resources for p, h, op, perm in entries]
        binding: Any
        for binding, future in admin.create_acls(bindings).items():
            result_or_error(future, **where)
            print(f"Added ACL {_describe(binding)} on {binding.restype.name}:{binding.resource_pattern_type.name}:"
                  f"{binding.name}")
        return 0
    if args.action == "remove" and not resources and not args.all:
        raise CliError("name the resource whose ACLs to remove (or --all for every binding)")
    filters = [AclBindingFilter(rt, name, pattern, p, h, op, perm)
               for rt, name in (resources or [(ResourceType.ANY, None)]) for p, h, op, perm in _entries(args, False)]
    if args.action == "list":
        found: dict[tuple[str, str, str], list[Any]] = {}
        for f in filters:
            for b in result_or_error(admin.describe_acls(f), **where):
                found.setdefault((b.restype.name, b.resource_pattern_type.name, b.name), []).append(b)
        for (rtype, ptype, name), bindings in sorted(found.items()):
            print(f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, name={name}, patternType={ptype})`:")
            for b in sorted(bindings, key=_describe):
                print(f" \t{_describe(b)}")
        if not found:
            print("no ACLs match")
        return 0
    removed = 0
    for f, future in admin.delete_acls(filters).items():
        for b in result_or_error(future, **where):
            removed += 1
            print(f"Removed ACL {_describe(b)} on {b.restype.name}:{b.resource_pattern_type.name}:{b.name}")
    if not removed:
        print("no ACLs match")
    return 0
