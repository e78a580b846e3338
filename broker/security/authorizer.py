"""The authorizer: Kafka 3.9's kafka.security.authorizer.AclAuthorizer, its decisions and its cache.

Enabled by `authorizer.class.name=kafka.security.authorizer.AclAuthorizer` (Kafka's key and
class name); without it every request is allowed, as Kafka without an authorizer. Decisions, as
AclAuthorizer.authorizeAction:

* a principal listed in `super.users` ("User:a;User:b") is allowed everything;
* the ACLs that apply to a resource are those on its LITERAL name, on the LITERAL `*` wildcard of
  its type and on every PREFIXED pattern its name starts with;
* none at all: `allow.everyone.if.no.acl.found` decides (default false: denied);
* otherwise a DENY entry for the principal (or `User:*`), the client's host (or `*`) and the
  operation (or ALL) denies; failing that an ALLOW entry allows, where ALLOW of READ, WRITE,
  DELETE or ALTER also allows DESCRIBE and ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS
  (DENY has no implied operations).

`authorize_by_resource_type` is AclAuthorizer.authorizeByResourceType (KIP-679: InitProducerId
without a transactional id is allowed with WRITE on any topic): allowed when some ALLOW of the
operation (or ALL) on a pattern of the type is not dominated by a DENY (a DENY on the `*`
wildcard denies all; with `allow.everyone.if.no.acl.found` anything else is allowed).

The cache maps each ResourcePattern to its entries. It is what the store (ZooKeeper, or the single
node's metadata file: broker.security.acl_store) last had: the store calls `update_cache` after
its own writes and for every change another broker made. Changes (CreateAcls, DeleteAcls) run one
at a time under one lock (AclAuthorizer's `lock synchronized`); decisions read the cache and never
wait. Who may call: the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from broker.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
    to_bit_field,
)
from protocol.errors import ErrorCode

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
_O = AclOperation
_IMPLIED_ALLOW: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
}

Entries = frozenset[AccessControlEntry]

class AclStore(Protocol):
    """Where the ACLs live. `update` applies `change` to the resource's stored entries (the
    store's latest, not the cache's), persists the result, tells the other brokers, and returns
    it; OSError / store errors propagate as exceptions."""

    async def load(self) -> dict[ResourcePattern, Entries]: ...

    async def update(self, resource: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries: ...

@dataclass(frozen=True, slots=True)
class AclError:
    """An error answered for one creation, filter or deleted binding."""

    code: int
    message: str | None

def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by ';' ("User:alice;User:bob")."""
    if not value or not value.strip():
        return frozenset()
    out = set()
    for item in value.split(";"):
        if item.strip():
            kind, name = parse_principal(item.strip())
            out.add(f"{kind}:{name}")
    return frozenset(out)

class AclAuthorizer:
    """See the module docstring."""

    def __init__(self, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 store: AclStore | None = None) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.store = store
        self.cache: dict[ResourcePattern, Entries] = {}
        # the same entries indexed for decisions: (type, name) of LITERAL patterns, and per type
        # the PREFIXED names (a decision makes no ResourcePattern objects: it runs per topic per request)
        self._literal: dict[tuple[int, str], Entries] = {}
        self._prefixed: dict[int, dict[str, Entries]] = {}
        self._prefix_lengths: dict[int, tuple[int, ...]] = {}  # per type: the lengths of its prefixes
        self._lock = asyncio.Lock()

    # -- the cache ------------------------------------------------------------------------------

    def update_cache(self, resource: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        entries = frozenset(entries)
        kind = int(resource.resource_type)
        if resource.pattern_type == PatternType.LITERAL:
            index: dict = self._literal
            key: object = (kind, resource.name)
        elif resource.pattern_type == PatternType.PREFIXED:
            index, key = self._prefixed.setdefault(kind, {}), resource.name
        else:
            index, key = {}, None
        if entries:
            self.cache[resource] = entries
            index[key] = entries
        else:
            self.cache.pop(resource, None)
            index.pop(key, None)
        if resource.pattern_type == PatternType.PREFIXED:
            self._prefix_lengths[kind] = tuple(sorted({len(n) for n in self._prefixed[kind]}))

    async def load(self) -> None:
        """Fill the cache from the store (start-up)."""
        if self.store is not None:
            for resource, entries in (await self.store.load()).items():
                self.update_cache(resource, entries)

    # -- decisions ------------------------------------------------------------------------------

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every entry that applies to the LITERAL resource `name`: on the name, on the `*`
        wildcard and on each PREFIXED pattern it starts with."""
        kind = int(resource_type)
        literal = self._literal
        out: list[AccessControlEntry] = []
        entries = literal.get((kind, WILDCARD_RESOURCE))
        if entries:
            out.extend(entries)
        entries = literal.get((kind, name))
        if entries:
            out.extend(entries)
        prefixed = self._prefixed.get(kind)
        if prefixed:
            for length in self._prefix_lengths[kind]:
                if length > len(name):
                    break
                entries = prefixed.get(name[:length])
                if entries:
                    out.extend(entries)
        return out

    @staticmethod
    def _exists(acls: list[AccessControlEntry], op: AclOperation, principal: str, host: str,
                permission: AclPermissionType) -> bool:
        return any(a.permission_type == permission
                   and (a.principal == principal or a.principal == WILDCARD_PRINCIPAL)
                   and (a.operation == op or a.operation == AclOperation.ALL)
                   and (a.host == host or a.host == WILDCARD_HOST)
                   for a in acls)

    def authorize(self, principal: str, host: str, op: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if self._exists(acls, op, principal, host, AclPermissionType.DENY):
            return False
        return any(self._exists(acls, allowed, principal, host, AclPermissionType.ALLOW)
                   for allowed in _IMPLIED_ALLOW.get(op, (op,)))

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation,
                                   resource_type: ResourceType) -> bool:
        if principal in self.super_users:
            return True
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for resource, entries in self.cache.items():
            if resource.resource_type != resource_type or resource.pattern_type not in allow:
                continue
            for a in entries:
                if ((a.principal == principal or a.principal == WILDCARD_PRINCIPAL)
                        and (a.host == host or a.host == WILDCARD_HOST)
                        and (a.operation == op or a.operation == AclOperation.ALL)):
                    target = deny if a.permission_type == AclPermissionType.DENY else allow
                    target[resource.pattern_type].add(resource.name)
        if WILDCARD_RESOURCE in deny[PatternType.LITERAL]:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = deny[PatternType.PREFIXED]

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefixes for i in range(len(name) + 1))

        if any(not dominated(p) for p in allow[PatternType.PREFIXED]):
            return True
        return any(lit == WILDCARD_RESOURCE or (lit not in deny[PatternType.LITERAL] and not dominated(lit))
                   for lit in allow[PatternType.LITERAL])

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: the supported operations of the type this caller may perform."""
        return to_bit_field([op for op in SUPPORTED_OPERATIONS[resource_type]
                             if self.authorize(principal, host, op, resource_type, name)])

    # -- ACL management -------------------------------------------------------------------------

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [AclBinding(resource, entry)
                for resource, entries in sorted(self.cache.items())
                if flt.pattern_filter.matches(resource)
                for entry in sorted(entries) if flt.entry_filter.matches(entry)]

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclError | None]:
        """AclAuthorizer.createAcls: invalid bindings get INVALID_REQUEST "Failed to create
        ACL"; the valid ones are added per resource, each resource in one store update, which
        fails as a whole (UNKNOWN_SERVER_ERROR for each of its bindings) when a principal is not
        `Type:name` or the store fails."""
        results: list[AclError | None] = [None] * len(bindings)
        by_resource: dict[ResourcePattern, list[int]] = {}
        for i, b in enumerate(bindings):
            problem = validate_binding(b)
            if problem is not None:
                results[i] = AclError(ErrorCode.INVALID_REQUEST, "Failed to create ACL")
            else:
                by_resource.setdefault(b.pattern, []).append(i)
        async with self._lock:
            for resource, indexes in by_resource.items():
                new = frozenset(bindings[i].entry for i in indexes)
                try:
                    for entry in new:  # AclEntry's principal parse: fails the resource's whole update
                        parse_principal(entry.principal)
                    await self._update(resource, lambda current, new=new: current | new)
                except Exception as e:  # the store's failure is this creation's error
                    for i in indexes:
                        results[i] = AclError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or type(e).__name__)
        return results

    async def delete_acls(self, filters: list[AclBindingFilter]
                          ) -> list[list[tuple[AclBinding, AclError | None]]]:
        """AclAuthorizer.deleteAcls: for each filter the bindings it deleted (a binding matched by
        several filters is reported under the first); a filter that names exactly one resource
        reaches it even if this broker's cache does not know it yet."""
        deleted: dict[AclBinding, int] = {}
        errors: dict[AclBinding, AclError] = {}
        async with self._lock:
            resources = set(self.cache)
            for f in filters:
                pf = f.pattern_filter
                if pf.matches_at_most_one():
                    assert pf.name is not None
                    resources.add(ResourcePattern(pf.resource_type, pf.name, pf.pattern_type))
            for resource in sorted(resources):
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(resource)]
                if not matching:
                    continue
                being_deleted: dict[AclBinding, int] = {}

                def remove(current: Entries, resource: ResourcePattern = resource,
                           matching: list[tuple[int, AclBindingFilter]] = matching,
                           being_deleted: dict[AclBinding, int] = being_deleted) -> Entries:
                    gone = set()
                    for entry in current:
                        for i, f in matching:
                            if f.entry_filter.matches(entry):
                                being_deleted.setdefault(AclBinding(resource, entry), i)
                                gone.add(entry)
                    return current - gone

                try:
                    await self._update(resource, remove)
                except Exception as e:  # the store's failure is these bindings' error
                    for b in being_deleted:
                        errors.setdefault(b, AclError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or type(e).__name__))
                for b, i in being_deleted.items():
                    deleted.setdefault(b, i)
        out: list[list[tuple[AclBinding, AclError | None]]] = [[] for _ in filters]
        for b, i in deleted.items():
            out[i].append((b, errors.get(b)))
        return out

    async def _update(self, resource: ResourcePattern, change: Callable[[Entries], Entries]) -> None:
        if self.store is None:
            self.update_cache(resource, change(self.cache.get(resource, frozenset())))
            return
        self.update_cache(resource, await self.store.update(resource, change))

def validate_binding(b: AclBinding) -> str | None:
    """AclAuthorizer.validateAclBinding: why it cannot be stored (INVALID_REQUEST)."""
    if b.pattern.is_unknown or b.entry.is_unknown:
        return "ACL binding contains unknown elements"
    if "/" in b.pattern.name:
        return f"ACL binding contains invalid resource name: {b.pattern.name}"
    return None

NotifyFn = Callable[[ResourcePattern], Awaitable[None]]
