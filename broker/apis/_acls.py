"""What the ACL handlers share: the wire's creations and filters as broker.security.acl values.

As Kafka's CreateAclsRequest / DescribeAclsRequest / DeleteAclsRequest constructors, an element
whose code is UNKNOWN (0, or a code Kafka does not know) cannot be parsed: the request is
invalid and the connection is closed (SocketServer closes a connection whose request does not
parse), raised here as InvalidAclRequest.
"""

from __future__ import annotations

from typing import Any

from broker.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured."


class InvalidAclRequest(ValueError):
    """The request holds an element Kafka cannot parse (its connection is closed)."""


def binding_of(c: Any) -> AclBinding:
    """CreateAclsRequest.aclBinding of one creation."""
    binding = AclBinding(
        ResourcePattern(ResourceType.of(c.resource_type), c.resource_name,  # type: ignore[arg-type]
                        PatternType.of(c.resource_pattern_type)),  # type: ignore[arg-type]
        AccessControlEntry(c.principal, c.host, AclOperation.of(c.operation),  # type: ignore[arg-type]
                           AclPermissionType.of(c.permission_type)))  # type: ignore[arg-type]
    if binding.pattern.is_unknown or binding.entry.is_unknown:
        raise InvalidAclRequest("CreatableAcls contain unrecognized elements")
    return binding


def filter_of(f: Any) -> AclBindingFilter:
    """DescribeAclsRequest.filter / DeleteAclsRequest's filters (the same field names)."""
    flt = AclBindingFilter(
        ResourcePatternFilter(ResourceType.of(f.resource_type_filter), f.resource_name_filter,  # type: ignore[arg-type]
                              PatternType.of(f.pattern_type_filter)),  # type: ignore[arg-type]
        AccessControlEntryFilter(f.principal_filter, f.host_filter, AclOperation.of(f.operation),  # type: ignore[arg-type]
                                 AclPermissionType.of(f.permission_type)))  # type: ignore[arg-type]
    if flt.is_unknown:
        raise InvalidAclRequest("Filter contain UNKNOWN elements")
    return flt


def create_problem(binding: AclBinding) -> str | None:
    """Why AclApis.handleCreateAcls refuses a binding before the authorizer sees it, or None;
    and the refusals of the ResourcePattern / AccessControlEntry constructors (ANY/MATCH)."""
    p, e = binding.pattern, binding.entry
    if p.resource_type == ResourceType.ANY:
        return "resourceType must not be ANY"
    if p.pattern_type in (PatternType.ANY, PatternType.MATCH):
        return f"patternType must not be {p.pattern_type.name}"
    if e.operation == AclOperation.ANY:
        return "operation must not be ANY"
    if e.permission_type == AclPermissionType.ANY:
        return "permissionType must not be ANY"
    if p.resource_type == ResourceType.CLUSTER and p.name != "kafka-cluster":
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if not p.name:
        return "Invalid empty resource name"
    return None
