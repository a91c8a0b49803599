"""Where the ACLs live: per resource pattern, its set of access control entries, in Kafka's JSON.

Kafka 3.9's ZooKeeper mode keeps each pattern's entries at /kafka-acl/<Type>/<name> (LITERAL) or
/kafka-acl-extended/prefixed/<Type>/<name> (PREFIXED) as {"version":1,"acls":[{"principal":"User:alice",
"permissionType":"Allow","operation":"Read","host":"*"}]}. The embedded broker keeps the same documents in
`acls.json` in its data directory, keyed by that path, written atomically. `create` and `delete` apply
AclAuthorizer's rules: a binding is added to its pattern's set (a duplicate changes nothing), a delete
filter removes every matching entry and reports each binding it removed once, under the first filter that
matched it.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable, Iterator

from broker.log.fileutil import atomic_write
from kafka_protocol.security.acls import (AccessControlEntry, AclBinding, AclBindingFilter, AclOperation,
                                          AclPermissionType, PatternType, ResourcePattern, ResourceType,
                                          operation_name, permission_name, resource_type_name)

FILE_NAME = "acls.json"
_TYPES = {resource_type_name(t): t for t in ResourceType}
_OPS = {operation_name(o): o for o in AclOperation}
_PERMISSIONS = {permission_name(p): p for p in AclPermissionType}


def znode_path(pattern: ResourcePattern) -> str:
    """Kafka's ZooKeeper path of a pattern's ACLs."""
    kind = resource_type_name(pattern.resource_type)
    if pattern.pattern_type == PatternType.LITERAL:
        return f"/kafka-acl/{kind}/{pattern.name}"
    return f"/kafka-acl-extended/prefixed/{kind}/{pattern.name}"


def pattern_of(path: str) -> ResourcePattern:
    if path.startswith("/kafka-acl/"):
        kind, _, name = path[len("/kafka-acl/"):].partition("/")
        return ResourcePattern(_TYPES[kind], name, PatternType.LITERAL)
    kind, _, name = path[len("/kafka-acl-extended/prefixed/"):].partition("/")
    return ResourcePattern(_TYPES[kind], name, PatternType.PREFIXED)


def to_json(entries: frozenset[AccessControlEntry]) -> dict[str, object]:
    return {"version": 1, "acls": [{"principal": e.principal, "permissionType": permission_name(e.permission),
                                    "operation": operation_name(e.operation), "host": e.host}
                                   for e in sorted(entries)]}


def from_json(document: dict) -> frozenset[AccessControlEntry]:  # type: ignore[type-arg]
    return frozenset(AccessControlEntry(a["principal"], a["host"], _OPS[a["operation"]],
                                        _PERMISSIONS[a["permissionType"]]) for a in document.get("acls", []))


# a store's writer elsewhere (cluster mode: ZooKeeper): each changed pattern's entries, empty for none left
Persist = Callable[[dict[ResourcePattern, frozenset[AccessControlEntry]]], None]


class AclStore:
    """Every ACL of the broker; thread-safe; readers see a consistent snapshot. Kept in the data directory, or
    (cluster mode) written through `persist` and updated from ZooKeeper with `set_pattern`."""

    def __init__(self, data_dir: Path | None) -> None:
        self._path = data_dir / FILE_NAME if data_dir is not None else None
        self._lock = threading.Lock()
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self.persist: Persist | None = None
        if self._path is not None and self._path.exists():
            kept = json.loads(self._path.read_text())
            self._acls = {pattern_of(path): from_json(doc) for path, doc in kept.items()}

    def by_pattern(self) -> Iterator[tuple[ResourcePattern, frozenset[AccessControlEntry]]]:
        return iter(list(self._acls.items()))

    def bindings(self) -> Iterator[tuple[ResourcePattern, AccessControlEntry]]:
        return ((p, e) for p, entries in self.by_pattern() for e in entries)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return sorted(AclBinding(p, e) for p, e in self.bindings() if acl_filter.matches(AclBinding(p, e)))

    def create(self, bindings: list[AclBinding]) -> None:
        with self._lock:
            acls = dict(self._acls)
            for b in bindings:
                acls[b.pattern] = acls.get(b.pattern, frozenset()) | {b.entry}
            self._replace(acls)

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (a binding counts for the first filter that matched it)."""
        removed: list[list[AclBinding]] = [[] for _ in filters]
        with self._lock:
            acls = dict(self._acls)
            for pattern, entries in self._acls.items():
                keep = set(entries)
                for entry in sorted(entries):
                    binding = AclBinding(pattern, entry)
                    for i, f in enumerate(filters):
                        if f.matches(binding):
                            removed[i].append(binding)
                            keep.discard(entry)
                            break
                if keep != set(entries):
                    if keep:
                        acls[pattern] = frozenset(keep)
                    else:
                        del acls[pattern]
            self._replace(acls)
        return removed

    def set_pattern(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """A pattern's entries as another broker wrote them (empty: none left)."""
        with self._lock:
            acls = dict(self._acls)
            if entries:
                acls[pattern] = entries
            else:
                acls.pop(pattern, None)
            self._acls = acls

    def _replace(self, acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        if acls == self._acls:
            return
        if self.persist is not None:
            self.persist({p: acls.get(p, frozenset()) for p in set(acls) | set(self._acls)
                          if acls.get(p) != self._acls.get(p)})
        elif self._path is not None:
            atomic_write(self._path, json.dumps({znode_path(p): to_json(e) for p, e in sorted(acls.items())},
                                                indent=1).encode())
        self._acls = acls
