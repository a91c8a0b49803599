"""Kafka 3.9's AclAuthorizer (ZooKeeper mode), turned on by `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`.

A request is allowed when its principal is a super user (`super.users=User:admin;User:ops`), or when no DENY
ACL matches and an ALLOW ACL does; with no ACL at all on the resource, `allow.everyone.if.no.acl.found`
decides. An ACL matches a resource through its literal name, the literal wildcard `*`, or a prefix of the
name (PREFIXED); a principal through its own name or `User:*`; a host through the client's address or `*`;
an operation through itself or ALL. READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS. `authorize_any` is Kafka's authorizeByResourceType (InitProducerId's "may it write some
topic"). Pure decisions over an `AclStore`; KIP-430's authorized-operations bit fields come from here.
"""
from __future__ import annotations

import logging
from pathlib import Path

from broker.config import BrokerConfig
from broker.security.acl_store import AclStore
from kafka_protocol.security.acls import (WILDCARD, WILDCARD_PRINCIPAL, SUPPORTED_OPERATIONS, AccessControlEntry,
                                          AclOperation, AclPermissionType, PatternType, ResourcePattern,
                                          ResourceType)
from kafka_protocol.errors import InvalidConfigError
from kafka_protocol.security.principal import KafkaPrincipal

AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
audit = logging.getLogger("kafka.authorizer.logger")

_IMPLIED = {AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                    AclOperation.ALTER),
            AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)}


def parse_super_users(text: str | None) -> frozenset[KafkaPrincipal]:
    return frozenset(KafkaPrincipal.parse(p.strip()) for p in (text or "").split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, store: AclStore, super_users: frozenset[KafkaPrincipal], allow_if_no_acl: bool) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str, log_if_denied: bool = True) -> bool:
        if principal in self.super_users:
            return True
        entries = self._matching(resource_type, name)
        if not entries:
            allowed = self.allow_if_no_acl
        else:
            who = str(principal)
            allowed = (not any(self._applies(e, who, host, operation, AclPermissionType.DENY) for e in entries)
                       and any(self._applies(e, who, host, op, AclPermissionType.ALLOW)
                               for op in _IMPLIED.get(operation, (operation,)) for e in entries))
        if not allowed and log_if_denied:
            audit.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                       principal, operation.name, host, resource_type.name, name)
        return allowed

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Is `operation` allowed on some resource of `resource_type` (Kafka's authorizeByResourceType)?"""
        if principal in self.super_users:
            return True
        who = str(principal)
        deny = [(p, e) for p, e in self.store.bindings() if p.resource_type == resource_type
                and self._applies(e, who, host, operation, AclPermissionType.DENY)]
        if any(p.pattern_type == PatternType.LITERAL and p.name == WILDCARD for p, _ in deny):
            return False
        if self.allow_if_no_acl:
            return True
        allow = [p for p, e in self.store.bindings() if p.resource_type == resource_type
                 and self._applies(e, who, host, operation, AclPermissionType.ALLOW)]
        deny_literals = {p.name for p, _ in deny if p.pattern_type == PatternType.LITERAL}
        deny_prefixes = {p.name for p, _ in deny if p.pattern_type == PatternType.PREFIXED}

        def dominated(name: str) -> bool:
            return any(name[:n] in deny_prefixes for n in range(len(name) + 1))
        for p in allow:
            if p.pattern_type == PatternType.PREFIXED and not dominated(p.name):
                return True
            if p.pattern_type == PatternType.LITERAL and (p.name == WILDCARD or (
                    p.name not in deny_literals and not dominated(p.name))):
                return True
        return False

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """KIP-430's bit field: a bit per supported operation the principal may perform on the resource."""
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
                   if self.authorize(principal, host, op, resource_type, name, log_if_denied=False))

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        out: list[AccessControlEntry] = []
        for pattern, entries in self.store.by_pattern():
            if pattern.resource_type != resource_type:
                continue
            if pattern.pattern_type == PatternType.LITERAL:
                if pattern.name in (name, WILDCARD):
                    out.extend(entries)
            elif pattern.pattern_type == PatternType.PREFIXED and name.startswith(pattern.name):
                out.extend(entries)
        return out

    @staticmethod
    def _applies(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation,
                 permission: AclPermissionType) -> bool:
        return (entry.permission == permission and entry.principal in (principal, WILDCARD_PRINCIPAL)
                and entry.operation in (operation, AclOperation.ALL) and entry.host in (WILDCARD, host))


def resource(resource_type: ResourceType, name: str) -> ResourcePattern:
    return ResourcePattern(resource_type, name, PatternType.LITERAL)


def make_authorizer(cfg: BrokerConfig, data_dir: Path | None) -> AclAuthorizer | None:
    """The authorizer `authorizer.class.name` names (None when empty), or InvalidConfigError."""
    name = (cfg["authorizer.class.name"] or "").strip()
    if not name:
        return None
    if name not in (AUTHORIZER_CLASS, "kafka.security.auth.SimpleAclAuthorizer"):
        raise InvalidConfigError(f"authorizer.class.name={name}: pylog has Kafka's {AUTHORIZER_CLASS} only")
    try:
        super_users = parse_super_users(cfg["super.users"])
    except ValueError as e:
        raise InvalidConfigError(f"super.users: {e}") from None
    return AclAuthorizer(AclStore(data_dir), super_users, cfg["allow.everyone.if.no.acl.found"])
