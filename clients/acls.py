"""`odradek acls`: list, add and remove ACLs (kafka-acls.sh's jobs, printed in its layout so
runbooks and scripts that read its output carry over).

The resource is named as kafka-acls names it (--topic, --group, --cluster, --transactional-id,
with --resource-pattern-type literal|prefixed, and any|match for list/remove); entries by
--allow-principal / --deny-principal, --operation (Read, Write, ..., All) and --allow-host /
--deny-host (default `*`). Like kafka-acls, `add` and `remove` print what they changed / nothing
and `list` prints, per resource, `Current ACLs for resource `ResourcePattern(...)`:` and one
tab-indented `(principal=..., host=..., operation=..., permissionType=...)` line per entry. They
speak the Kafka protocol only (CreateAcls, DescribeAcls, DeleteAcls), so they work against
Apache Kafka too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from clients.client_properties import ClientProperties
from clients.common import admin_client, bootstrap_option, broker_error

OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
              "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens")


def _upper(name: str) -> str:
    """kafka-acls' operation names (PascalCase) as the enum's (READ, CLUSTER_ACTION)."""
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name))
    return out.upper()


def _resources(topic: tuple[str, ...], group: tuple[str, ...], cluster: bool,
               transactional_id: tuple[str, ...]) -> list[tuple[str, str]]:
    out = [("TOPIC", t) for t in topic] + [("GROUP", g) for g in group]
    out += [("TRANSACTIONAL_ID", x) for x in transactional_id]
    if cluster:
        out.append(("CLUSTER", "kafka-cluster"))
    return out


def _pattern_text(p: Any) -> str:
    return (f"ResourcePattern(resourceType={p.resource_type.name}, name={p.resource_name}, "
            f"patternType={p.pattern_type.name})")


def _entry_text(a: Any) -> str:
    return (f"(principal={a.principal}, host={a.host}, operation={a.operation.name}, "
            f"permissionType={a.permission_type.name})")


def _print_blocks(verb: str, acls: Iterable[Any]) -> None:
    """kafka-acls' layout: per resource a header line and one line per entry, a blank line after."""
    by_resource: dict[tuple[int, str, int], list[Any]] = {}
    patterns: dict[tuple[int, str, int], Any] = {}
    for a in acls:
        p = a.resource_pattern
        key = (int(p.resource_type), p.resource_name, int(p.pattern_type))
        by_resource.setdefault(key, []).append(a)
        patterns[key] = p
    for key in sorted(by_resource):
        entries = sorted(by_resource[key], key=_entry_text)
        click.echo(f"{verb} resource `{_pattern_text(patterns[key])}`: ")
        click.echo("\n".join(f" \t{_entry_text(a)} " for a in entries))
        click.echo("")


def _options(*decorators: Any) -> Any:
    """One decorator applying `decorators` in the order written (the options' order in --help)."""
    def apply(f: Any) -> Any:
        for decorator in reversed(decorators):
            f = decorator(f)
        return f
    return apply


resource_options = _options(
    click.option("--topic", multiple=True, help="Topic (repeatable; '*' for all)."),
    click.option("--group", multiple=True, help="Consumer group (repeatable; '*' for all)."),
    click.option("--cluster", is_flag=True, help="The cluster resource."),
    click.option("--transactional-id", multiple=True, help="Transactional id (repeatable)."),
)


@click.group()
def acls() -> None:
    """List, add and remove ACLs, in kafka-acls.sh's output layout.

    \b
    Examples:
      odradek acls add --allow-principal User:alice --operation Read --topic clicks
      odradek acls add --deny-principal User:bob --operation Write --topic tmp- --resource-pattern-type prefixed
      odradek acls list --topic clicks
      odradek acls remove --topic clicks
    """


@acls.command("list")
@bootstrap_option
@resource_options
@click.option("--resource-pattern-type", default="any", show_default=True,
              type=click.Choice(["any", "match", "literal", "prefixed"], case_sensitive=False))
@click.option("--principal", default=None, help="Only the ACLs of this principal.")
def list_(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: tuple[str, ...], group: tuple[str, ...], cluster: bool,
          transactional_id: tuple[str, ...], resource_pattern_type: str, principal: str | None) -> None:
    """Show the ACLs of the named resources (all of them when none is named).

    \b
    Examples:
      odradek acls list
      odradek acls list --topic clicks
      odradek acls list --topic tmp-x --resource-pattern-type match
    """
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.admin import ACLResourcePatternType as Pattern

    pattern = Pattern[resource_pattern_type.upper()]
    named = _resources(topic, group, cluster, transactional_id)
    filters = [ResourcePatternFilter(ResourceType[k], n, pattern) for k, n in named] or [
        ResourcePatternFilter(ResourceType.ANY, None, Pattern.ANY)]
    found: list[Any] = []
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        for rf in filters:
            result, error = admin.describe_acls(ACLFilter(principal, None, ACLOperation.ANY, ACLPermissionType.ANY, rf))
            if error is not None and getattr(error, "errno", 0):
                raise click.ClickException(broker_error(error.errno))
            found.extend(result)
    _print_blocks("Current ACLs for", found)


def _entries(allow_principal: tuple[str, ...], deny_principal: tuple[str, ...], allow_host: tuple[str, ...],
             deny_host: tuple[str, ...], operation: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    """(principal, host, OPERATION, ALLOW|DENY) for every combination, as kafka-acls builds them."""
    ops = [_upper(o) for o in (operation or ("All",))]
    out = []
    for perm, principals, hosts in (("ALLOW", allow_principal, allow_host), ("DENY", deny_principal, deny_host)):
        for p in principals:
            for h in hosts or ("*",):
                out.extend((p, h, op, perm) for op in ops)
    return out


entry_options = _options(
    click.option("--allow-principal", multiple=True, help="Principal to allow (User:name)."),
    click.option("--deny-principal", multiple=True, help="Principal to deny (User:name)."),
    click.option("--allow-host", multiple=True, help="Host the allow applies to (default *)."),
    click.option("--deny-host", multiple=True, help="Host the deny applies to (default *)."),
    click.option("--operation", multiple=True, type=click.Choice(OPERATIONS, case_sensitive=False),
                 help="Operation (repeatable; default All)."),
)


@acls.command()
@bootstrap_option
@resource_options
@entry_options
@click.option("--resource-pattern-type", default="literal", show_default=True,
              type=click.Choice(["literal", "prefixed"], case_sensitive=False))
def add(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: tuple[str, ...], group: tuple[str, ...], cluster: bool,
        transactional_id: tuple[str, ...], allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
        allow_host: tuple[str, ...], deny_host: tuple[str, ...], operation: tuple[str, ...],
        resource_pattern_type: str) -> None:
    """Add ACLs: each principal x host x operation on each named resource.

    \b
    Examples:
      odradek acls add --allow-principal User:alice --operation Read --operation Describe --topic clicks
      odradek acls add --allow-principal User:alice --operation Read --group billing
      odradek acls add --deny-principal User:bob --operation Write --topic tmp- --resource-pattern-type prefixed
    """
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
    from kafka.admin import ACLResourcePatternType as Pattern

    named = _resources(topic, group, cluster, transactional_id)
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host, operation)
    if not named or not entries:
        raise click.UsageError("name a resource (--topic/--group/--cluster/--transactional-id) and a principal")
    pattern = Pattern[resource_pattern_type.upper()]
    wanted = [ACL(p, h, ACLOperation[op], ACLPermissionType[perm], ResourcePattern(ResourceType[k], n, pattern))
              for k, n in named for p, h, op, perm in entries]
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        result = admin.create_acls(wanted)
    for acl, error in result.get("failed", []):
        raise click.ClickException(f"{_entry_text(acl)} on {_pattern_text(acl.resource_pattern)}: "
                                   f"{broker_error(error.errno) if hasattr(error, 'errno') else error}")
    _print_blocks("Adding ACLs for", wanted)


@acls.command()
@bootstrap_option
@resource_options
@entry_options
@click.option("--resource-pattern-type", default="literal", show_default=True,
              type=click.Choice(["any", "match", "literal", "prefixed"], case_sensitive=False))
def remove(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: tuple[str, ...], group: tuple[str, ...], cluster: bool,
           transactional_id: tuple[str, ...], allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
           allow_host: tuple[str, ...], deny_host: tuple[str, ...], operation: tuple[str, ...],
           resource_pattern_type: str) -> None:
    """Remove the named resources' ACLs: those of the given principals/operations, or all.

    \b
    Examples:
      odradek acls remove --topic clicks --allow-principal User:alice --operation Read
      odradek acls remove --topic tmp- --resource-pattern-type prefixed
    """
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.admin import ACLResourcePatternType as Pattern

    named = _resources(topic, group, cluster, transactional_id)
    if not named:
        raise click.UsageError("name a resource (--topic/--group/--cluster/--transactional-id)")
    pattern = Pattern[resource_pattern_type.upper()]
    if allow_principal or deny_principal:
        specs = [(p, h, ACLOperation[op], ACLPermissionType[perm])
                 for p, h, op, perm in _entries(allow_principal, deny_principal, allow_host, deny_host, operation)]
    else:
        specs = [(None, None, ACLOperation.ANY, ACLPermissionType.ANY)]
    filters = [ACLFilter(p, h, op, perm, ResourcePatternFilter(ResourceType[k], n, pattern))
               for k, n in named for p, h, op, perm in specs]
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        results = admin.delete_acls(filters)
    for _flt, _deleted, error in results:
        if error is not None and getattr(error, "errno", 0):
            raise click.ClickException(broker_error(error.errno))
