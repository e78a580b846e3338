"""Authorized operations (KIP-430): the fields' "not requested" value and the full sets.

Metadata (v8+), DescribeCluster and DescribeGroups (v3+) return, when the client asks, a 32-bit
field with bit `code` set for every ACL operation the caller may perform on the resource
(RequestContext.authorized_operations, from the ACLs; every operation the type supports,
AclEntry.supportedOperations, without an authorizer). When the client does not ask, the field
keeps the schema default INT32_MIN ("not requested")."""

from __future__ import annotations

from broker.security.acl import SUPPORTED_OPERATIONS, ResourceType, to_bit_field

NOT_REQUESTED = -(2**31)
TOPIC_OPERATIONS = to_bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
GROUP_OPERATIONS = to_bit_field(SUPPORTED_OPERATIONS[ResourceType.GROUP])
CLUSTER_OPERATIONS = to_bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])


def if_requested(requested: bool, operations: int) -> int:
    return operations if requested else NOT_REQUESTED
