"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions, bindings and their filters.

Pure, and the codes are the wire's (Kafka's `org.apache.kafka.common.acl` and `.resource`). A binding is a
resource pattern (type, name, LITERAL or PREFIXED) and an access control entry (principal, host, operation,
ALLOW or DENY). Filters are what DescribeAcls and DeleteAcls carry: ANY matches every value, a null name,
principal or host every one, and pattern type MATCH every pattern that would apply to the named resource
(the literal name, the literal wildcard `*`, and every prefix of it), exactly as Kafka's
ResourcePatternFilter and AccessControlEntryFilter match.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum(cls: type[IntEnum], code: int) -> IntEnum:
    try:
        return cls(code)
    except ValueError:
        return cls(0)          # UNKNOWN, as Kafka's fromCode


# The operations KIP-430 reports per resource type (Kafka's supportedOperations), in code order.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                         AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                           AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    @classmethod
    def of(cls, resource_type: int, name: str, pattern_type: int) -> "ResourcePattern":
        return cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type))  # type: ignore[arg-type]

    @property
    def unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    @property
    def definite(self) -> bool:
        """A pattern a binding may have (no ANY or MATCH)."""
        return (self.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
                and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED))


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(cls, principal: str, host: str, operation: int, permission: int) -> "AccessControlEntry":
        return cls(principal, host, _enum(AclOperation, operation), _enum(AclPermissionType, permission))  # type: ignore[arg-type]

    @property
    def unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN

    @property
    def definite(self) -> bool:
        return (self.operation not in (AclOperation.ANY, AclOperation.UNKNOWN)
                and self.permission not in (AclPermissionType.ANY, AclPermissionType.UNKNOWN))


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    @property
    def unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        return self.name.startswith(pattern.name)

    @property
    def matches_at_most_one(self) -> bool:
        return (self.name is not None and self.resource_type != ResourceType.ANY
                and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED))


@dataclass(frozen=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @property
    def unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission == AclPermissionType.ANY or self.permission == entry.permission))


@dataclass(frozen=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    @classmethod
    def of(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
           operation: int, permission: int) -> "AclBindingFilter":
        return cls(ResourcePatternFilter(_enum(ResourceType, resource_type), name,  # type: ignore[arg-type]
                                         _enum(PatternType, pattern_type)),  # type: ignore[arg-type]
                   AccessControlEntryFilter(principal, host, _enum(AclOperation, operation),  # type: ignore[arg-type]
                                            _enum(AclPermissionType, permission)))  # type: ignore[arg-type]

    @property
    def unknown(self) -> bool:
        return self.pattern.unknown or self.entry.unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


# Names as Kafka's kafka-acls.sh and ZooKeeper's JSON write them ("Read", "Allow", "Topic").
def operation_name(op: AclOperation) -> str:
    return "".join(part.capitalize() for part in op.name.split("_"))


def permission_name(permission: AclPermissionType) -> str:
    return permission.name.capitalize()


def resource_type_name(resource_type: ResourceType) -> str:
    return "".join(part.capitalize() for part in resource_type.name.split("_"))
