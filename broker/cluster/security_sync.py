"""Cluster mode: SCRAM users and ACLs in ZooKeeper, where Kafka 3.9's ZooKeeper mode keeps them, followed
by every broker.

Users: /config/users/<sanitized name> = {"version":1,"config":{"SCRAM-SHA-512":"salt=...,..."}} and a
change notification /config/changes/config_change_<seq> = {"version":2,"entity_path":"users/<name>"}
(Kafka's AdminZkClient.changeConfigs). ACLs: /kafka-acl/<Type>/<name> (LITERAL) and
/kafka-acl-extended/prefixed/<Type>/<name> (PREFIXED), each {"version":1,"acls":[...]}, with Kafka's change
notifications under /kafka-acl-changes and /kafka-acl-extended-changes. The stores write through this
(`write_users`, `write_acls`, called with the store's lock held: the store updates itself after); every
broker follows the znodes with kazoo watches, so a change holds on every broker within a ZooKeeper round trip. Names are sanitized as Kafka's Sanitizer
does (URL encoding, `*` as %2A).
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable
from urllib.parse import quote, unquote

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.cluster.zk_client import ZkClient
from broker.security.acl_store import AclStore, from_json, pattern_of, to_json, znode_path
from broker.security.credentials import CredentialStore
from kafka_protocol.security.acls import AccessControlEntry, PatternType, ResourcePattern, resource_type_name

log = logging.getLogger(__name__)

USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
ACL_ROOTS = ("/kafka-acl", "/kafka-acl-extended/prefixed")
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")


def sanitize(name: str) -> str:
    return quote(name, safe="").replace("~", "%7E")


class SecuritySync:
    def __init__(self, zk: ZkClient, credentials: CredentialStore, acls: AclStore | None) -> None:
        self.zk = zk
        self.credentials = credentials
        self.acls = acls
        self._watched: set[str] = set()

    def start(self) -> None:
        kazoo = self.zk.kazoo
        for path in (USERS, CONFIG_CHANGES, ACL_CHANGES, ACL_EXTENDED_CHANGES,
                     *(f"{root}/{t}" for root in ACL_ROOTS for t in RESOURCE_TYPES)):
            kazoo.ensure_path(path, acl=self.zk.acl_for(path))
        self.credentials.persist = self.write_users
        ChildrenWatch(kazoo, USERS, lambda children: self._follow(USERS, children, self._on_user))
        if self.acls is not None:
            self.acls.persist = self.write_acls
            for root in ACL_ROOTS:
                for kind in RESOURCE_TYPES:
                    parent = f"{root}/{kind}"
                    ChildrenWatch(kazoo, parent, lambda children, parent=parent:
                                  self._follow(parent, children, self._on_acl))

    # --- following ---------------------------------------------------------------------------------

    def _follow(self, parent: str, children: list[str], handler: Callable[[str, bytes | None], None]) -> bool:
        for child in children:
            path = f"{parent}/{child}"
            if path not in self._watched:
                self._watched.add(path)
                DataWatch(self.zk.kazoo, path, self._data_watch(path, handler))
        return True

    def _data_watch(self, path: str, handler: Callable[[str, bytes | None], None]) -> Callable[..., bool]:
        def on_data(data: bytes | None, _stat: Any) -> bool:
            try:
                handler(path, data)
            except (ValueError, KeyError) as e:
                log.warning("ignoring ZooKeeper node %s: %s", path, e)
            if data is None:
                self._watched.discard(path)
                return False          # deleted: stop watching (a new node gets a new watch)
            return True
        return on_data

    def _on_user(self, path: str, data: bytes | None) -> None:
        user = unquote(path.rsplit("/", 1)[1])
        config = json.loads(data).get("config", {}) if data else {}
        self.credentials.set_user(user, {k: v for k, v in config.items() if k.startswith("SCRAM-")})

    def _on_acl(self, path: str, data: bytes | None) -> None:
        assert self.acls is not None
        prefix, _, sanitized = path.rpartition("/")
        pattern = pattern_of(f"{prefix}/{unquote(sanitized)}")
        entries = from_json(json.loads(data)) if data else frozenset()
        self.acls.set_pattern(pattern, entries)

    # --- writing -----------------------------------------------------------------------------------

    def write_users(self, changed: dict[str, dict[str, str]]) -> None:
        kazoo = self.zk.kazoo
        for user, credentials in changed.items():
            path = f"{USERS}/{sanitize(user)}"
            try:
                current = json.loads(kazoo.get(path)[0] or b"{}").get("config", {})
            except NoNodeError:
                current = {}
            config = {k: v for k, v in current.items() if not k.startswith("SCRAM-")} | credentials
            self._put(path, json.dumps({"version": 1, "config": config}).encode())
            kazoo.create(f"{CONFIG_CHANGES}/config_change_", json.dumps(
                {"version": 2, "entity_path": f"users/{sanitize(user)}"}).encode(), sequence=True)

    def write_acls(self, changed: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        kazoo = self.zk.kazoo
        for pattern, entries in changed.items():
            path = znode_path(ResourcePattern(pattern.resource_type, sanitize(pattern.name), pattern.pattern_type))
            if entries:
                self._put(path, json.dumps(to_json(entries)).encode())
            else:
                try:
                    kazoo.delete(path)
                except NoNodeError:
                    pass
            kind = resource_type_name(pattern.resource_type)
            if pattern.pattern_type == PatternType.LITERAL:
                kazoo.create(f"{ACL_CHANGES}/acl_changes_", f"{kind}:{pattern.name}".encode(), sequence=True)
            else:
                kazoo.create(f"{ACL_EXTENDED_CHANGES}/acl_changes_", json.dumps(
                    {"version": 1, "resourceType": kind, "name": pattern.name, "patternType": "Prefixed"}).encode(),
                    sequence=True)

    def _put(self, path: str, data: bytes) -> None:
        kazoo = self.zk.kazoo
        try:
            kazoo.set(path, data)
        except NoNodeError:
            try:
                kazoo.create(path, data, acl=self.zk.acl_for(path), makepath=True)
            except NodeExistsError:
                kazoo.set(path, data)
