"""Authorized operations (KIP-430) as Kafka answers them with no authorizer configured.

Metadata (v8+), DescribeCluster and DescribeGroups (v3+) return, when the client asks, a 32-bit
field with bit `code` set for every ACL operation the caller may perform on the resource. Kafka's
AuthHelper.authorizedOperations, without an authorizer, allows every operation the resource type
supports (AclEntry.supportedOperations); Odradek has no authorizer, so it answers the same fields.
When the client does not ask, the field keeps the schema default INT32_MIN ("not requested")."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class AclOperation(IntEnum):
    """org.apache.kafka.common.acl.AclOperation codes."""

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


def to_bit_field(ops: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit `code` set for each operation."""
    field = 0
    for op in ops:
        field |= 1 << op
    return field


_O = AclOperation
NOT_REQUESTED = -(2**31)
TOPIC_OPERATIONS = to_bit_field(
    [_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS])
GROUP_OPERATIONS = to_bit_field([_O.READ, _O.DESCRIBE, _O.DELETE])
CLUSTER_OPERATIONS = to_bit_field(
    [_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER,
     _O.DESCRIBE])


def if_requested(requested: bool, operations: int) -> int:
    return operations if requested else NOT_REQUESTED
