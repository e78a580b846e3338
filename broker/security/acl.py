"""ACLs as Kafka's org.apache.kafka.common.acl / resource types: codes, names, patterns, filters.

Why here and pure: the wire (CreateAcls/DescribeAcls/DeleteAcls), the ZooKeeper JSON
(AclEntry.toJsonCompatibleMap) and the authorizer all use the same values; the codes are the wire
codes, the names are what Kafka writes to ZooKeeper and what kafka-acls prints. Filters match as
ResourcePatternFilter.matches / AccessControlEntryFilter.matches do (MATCH and ANY included).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


def _pascal(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: CLUSTER_ACTION -> ClusterAction."""
    return "".join(part.capitalize() for part in name.split("_"))


class _Named(IntEnum):
    @property
    def pascal(self) -> str:
        return _pascal(self.name)

    @classmethod
    def from_string(cls, text: str) -> _Named:
        """Kafka's fromString: case-insensitive, PascalCase or UPPER_SNAKE; UNKNOWN otherwise."""
        key = text.strip().upper()
        for member in cls:
            if key in (member.name, member.name.replace("_", "")):
                return member
        return cls(0)

    @classmethod
    def of(cls, code: int) -> _Named:
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
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


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
# AclEntry.supportedOperations: what an ACL on each resource type may grant (KIP-430 answers
# these, filtered by what the caller is allowed)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
                           _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:  # Kafka's ResourcePattern.toString, which kafka-acls prints
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:  # what kafka-acls prints per ACL
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: MATCH finds the LITERAL name, the `*` wildcard and the
        PREFIXED patterns the name starts with; ANY and an exact type compare names."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def find_indefinite_field(self) -> str | None:
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return f"Resource type is {self.resource_type.name}."
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH, PatternType.UNKNOWN):
            return f"Resource pattern type is {self.pattern_type.name}."
        if self.name is None:
            return "Resource name is NULL."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type))

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown


ANY_FILTER = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                              AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))


def parse_principal(text: str) -> tuple[str, str]:
    """SecurityUtils.parseKafkaPrincipal: "Type:name"; ValueError when there is no type."""
    if not text or ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    kind, name = text.split(":", 1)
    return kind, name


def to_bit_field(ops: list[AclOperation] | tuple[AclOperation, ...]) -> int:
    """Kafka's Utils.to32BitField: bit `code` set for each operation."""
    field = 0
    for op in ops:
        field |= 1 << int(op)
    return field


# -- JSON: AclEntry.toJsonCompatibleMap, as ZooKeeper holds it (and the single node's file) ----------

def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    """AclEntry.toJsonCompatibleMap as Kafka writes it."""
    acls = [{"principal": e.principal, "permissionType": e.permission_type.pascal,
             "operation": e.operation.pascal, "host": e.host} for e in sorted(entries)]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes | None) -> frozenset[AccessControlEntry]:
    """AclEntry.fromBytes; empty or null data is no entries."""
    if not data:
        return frozenset()
    js = json.loads(data)
    return frozenset(
        AccessControlEntry(a["principal"], a["host"], AclOperation.from_string(a["operation"]),
                           AclPermissionType.from_string(a["permissionType"]))
        for a in js.get("acls", []))


def acls_to_json(acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> list[dict[str, Any]]:
    """The metadata file's `acls`: one object per resource, entries as in ZooKeeper."""
    return [{"resource_type": r.resource_type.pascal, "pattern_type": r.pattern_type.name, "name": r.name,
             **json.loads(encode_entries(entries))} for r, entries in sorted(acls.items())]


def acls_from_json(items: list[dict[str, Any]]) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for item in items:
        resource = ResourcePattern(ResourceType.from_string(item["resource_type"]), item["name"],
                                   PatternType.from_string(item["pattern_type"]))
        entries = decode_entries(json.dumps(item).encode())
        if entries:
            out[resource] = entries
    return out
