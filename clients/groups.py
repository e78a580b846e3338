"""`odradek groups`: list, describe, delete consumer groups and reset their offsets
(kafka-consumer-groups.sh's jobs, with the same column names so runbooks carry over).

Lag is `log end offset - committed offset` per partition, from ListOffsets(latest) and
OffsetFetch; a partition assigned but never committed shows `-` as Kafka's tool does.
`reset-offsets` only previews unless `--execute` is given, and refuses to touch a group that
still has members (their next commit would overwrite the reset).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import click

from clients.client_properties import ClientProperties
from clients.common import (
    admin_client,
    bootstrap_option,
    console,
    named_error,
    split_names,
    table,
)
from clients.watch import watch as run_watch
from clients.watch import watch_options

INACTIVE = {"Empty", "Dead"}


def _describe(admin: Any, group: str) -> dict[str, Any]:
    info = admin.describe_groups([group])[group]
    if info.get("error"):
        raise click.ClickException(f"group '{group}': {info['error']}")
    if info["group_state"] == "Dead":
        raise click.ClickException(f"consumer group '{group}' does not exist")
    return info


def _assignments(info: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """(topic, partition) -> the member that owns it."""
    owned: dict[tuple[str, int], dict[str, Any]] = {}
    for m in info["members"]:
        assignment = m.get("member_assignment") or {}
        if not isinstance(assignment, dict):
            continue
        for tp in assignment.get("assigned_partitions") or []:
            for p in tp["partitions"]:
                owned[(tp["topic"], p)] = m
    return owned


def _offsets(admin: Any, tps: Iterable[Any], spec: Any) -> dict[tuple[str, int], int]:
    from kafka.admin import OffsetSpec

    tps = list(tps)
    if not tps:
        return {}
    spec = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST}.get(spec, spec)
    found = admin.list_partition_offsets({tp: spec for tp in tps})
    return {(tp.topic, tp.partition): r.offset for tp, r in found.items()}


def _committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    got = admin.list_group_offsets(group).get(group, {})
    return {(tp.topic, tp.partition): om.offset for tp, om in got.items() if om.offset >= 0}


@click.group()
def groups() -> None:
    """List, describe and delete consumer groups; reset their committed offsets.

    \b
    Examples:
      odradek groups list
      odradek groups describe my-app
      odradek groups reset-offsets my-app --topic clicks --to-earliest --execute
      odradek groups delete my-app
    """


# `--state` given without a value: every group, with its state (kafka-consumer-groups.sh
# --list --state).
ANY_STATE = "\0any"


@groups.command("list")
@bootstrap_option
@click.option("--state", "states", multiple=True, is_flag=False, flag_value=ANY_STATE,
              help="Print each group's state; with a value, only groups in that state "
                   "(Stable, Empty, PreparingRebalance, ...).")
def list_(bootstrap: str, timeout_s: float, client_config: ClientProperties, states: tuple[str, ...]) -> None:
    """Print every consumer group's name (with --state: name and state).

    \b
    Examples:
      odradek groups list
      odradek groups list --state
      odradek groups list --state Stable --state Empty
    """
    with_state = bool(states)
    wanted = split_names(s for s in states if s != ANY_STATE)
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        found = admin.list_groups(states_filter=wanted or None)
    found.sort(key=lambda g: g["group_id"])
    if not with_state:
        for g in found:
            click.echo(g["group_id"])
        return
    t = table("GROUP", "STATE")
    for g in found:
        t.add_row(g["group_id"], g.get("group_state") or "")
    console().print(t)


def all_groups_option(f: Any) -> Any:
    return click.option("--all-groups", is_flag=True,
                        help="Every consumer group instead of NAMES.")(f)


def _chosen_groups(admin: Any, names: tuple[str, ...], all_groups: bool) -> list[str]:
    """NAMES, or with --all-groups every group ListGroups reports (kafka-consumer-groups.sh's
    --all-groups); exactly one of the two."""
    wanted = split_names(names)
    if bool(wanted) == all_groups:
        raise click.UsageError("give group names or --all-groups")
    if not all_groups:
        return wanted
    return sorted(g["group_id"] for g in admin.list_groups())


@groups.command()
@bootstrap_option
@click.argument("names", nargs=-1)
@all_groups_option
@click.option("--members", "view", flag_value="members", help="One row per member.")
@click.option("--state", "view", flag_value="state", help="The group's state and coordinator.")
@click.option("--offsets", "view", flag_value="offsets", default=True,
              help="Per-partition offsets and lag (the default).")
@watch_options
def describe(bootstrap: str, timeout_s: float, client_config: ClientProperties, names: tuple[str, ...],
             all_groups: bool, view: str, watch: bool, interval_s: float) -> None:
    """Show a group's partitions with current offset, log end offset and lag.

    \b
    Examples:
      odradek groups describe my-app
      odradek groups describe my-app --members
      odradek groups describe my-app --state
      odradek groups describe --all-groups
      odradek groups describe my-app --watch --interval 5
    """
    from rich.console import Group

    if bool(split_names(names)) == all_groups:  # before the first snapshot: a usage error, not a frame
        raise click.UsageError("give group names or --all-groups")

    def snapshot() -> Group:
        with admin_client(bootstrap, timeout_s, client_config) as admin:
            return Group(*(part for group in _chosen_groups(admin, names, all_groups)
                           for part in _describe_view(admin, group, view)))

    if watch:
        run_watch(snapshot, interval_s)
    else:
        console().print(snapshot())


def _describe_view(admin: Any, group: str, view: str) -> list[Any]:
    """What `groups describe` shows of one group in `view` (state, members or offsets): rich
    renderables, printed once or redrawn by --watch."""
    from kafka import TopicPartition
    from rich.text import Text

    info = _describe(admin, group)
    if view == "state":
        coordinator = admin._manager.run(admin._find_coordinator_id, group)
        broker = admin._manager.cluster.broker_metadata(coordinator)
        where = f"{broker.host}:{broker.port} ({coordinator})" if broker else str(coordinator)
        t = table("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
        t.add_row(group, where, info.get("protocol_data") or "", info["group_state"],
                  str(len(info["members"])))
        return [t]
    parts: list[Any] = []
    if not info["members"] and info["group_state"] in INACTIVE:
        parts.append(Text(f"Consumer group '{group}' has no active members."))
    owned = _assignments(info)
    if view == "members":
        t = table("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        for m in info["members"]:
            n = sum(1 for owner in owned.values() if owner is m)
            t.add_row(group, m["member_id"], m.get("group_instance_id") or "-",
                      m["client_host"], m["client_id"], str(n))
        return [*parts, t]
    committed = _committed(admin, group)
    keys = sorted(set(committed) | set(owned))
    ends = _offsets(admin, (TopicPartition(t, p) for t, p in keys), "latest")
    t = table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")
    for key in keys:
        cur, end, m = committed.get(key), ends.get(key), owned.get(key)
        lag = "-" if cur is None or end is None else str(max(end - cur, 0))
        t.add_row(group, key[0], str(key[1]), "-" if cur is None else str(cur),
                  "-" if end is None else str(end), lag,
                  m["member_id"] if m else "-", m["client_host"] if m else "-",
                  m["client_id"] if m else "-")
    return [*parts, t]


@groups.command()
@bootstrap_option
@click.argument("names", nargs=-1)
@all_groups_option
def delete(bootstrap: str, timeout_s: float, client_config: ClientProperties, names: tuple[str, ...], all_groups: bool) -> None:
    """Delete consumer groups (they must have no active members) and their offsets.

    \b
    Examples:
      odradek groups delete my-app old-app
      odradek groups delete --all-groups
    """
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        wanted = _chosen_groups(admin, names, all_groups)
        if not wanted:
            click.echo("There are no consumer groups to delete.")
            return
        results = admin.delete_groups(wanted)
    failed = {g: r for g, r in results.items() if r != "OK"}
    ok = [g for g in wanted if results.get(g) == "OK"]
    if ok:
        click.echo("Deletion of requested consumer groups ("
                   + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
    if failed:
        raise click.ClickException("; ".join(f"group '{g}': {named_error(r)}"
                                             for g, r in failed.items()))



@groups.command("delete-offsets")
@bootstrap_option
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, metavar="TOPIC[:P,P]",
              help="Topic whose committed offsets to delete, optionally only some partitions "
                   "(repeatable).")
def delete_offsets(bootstrap: str, timeout_s: float, client_config: ClientProperties, group: str, topics: tuple[str, ...]) -> None:
    """Delete GROUP's committed offsets of some topics or partitions (OffsetDelete), as
    kafka-consumer-groups.sh --delete-offsets. A group still subscribed to a topic keeps its
    offsets (GROUP_SUBSCRIBED_TO_TOPIC); an Empty group left without offsets is removed.

    \b
    Examples:
      odradek groups delete-offsets my-app --topic clicks
      odradek groups delete-offsets my-app --topic clicks:0,1 --topic views
    """
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        _describe(admin, group)  # a group that does not exist is one clear line
        tps = _partitions_of(admin, topics)
        results = admin.delete_group_offsets(group, tps)  # a group-level error raises
    ordered = sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
    failed = [(tp, err.message) for tp, err in ordered if getattr(err, "errno", 0)]
    if len(failed) < len(ordered):
        click.echo(f"Request succeed for deleting offsets from group {group}.")
    t = table("TOPIC", "PARTITION", "STATUS")
    for tp, err in ordered:
        t.add_row(tp.topic, str(tp.partition),
                  f"Error: {err.message}" if getattr(err, "errno", 0) else "Successful")
    console().print(t)
    if failed:
        raise click.ClickException("offsets were not deleted for " + ", ".join(
            f"{tp.topic}-{tp.partition}: {named_error(name)}" for tp, name in failed))


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch for kafka-consumer-groups.sh's `--to-datetime` values
    (`YYYY-MM-DDTHH:mm:SS[.sss][zone]`); no zone means the local time zone, as in Kafka."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a date-time like 2026-01-31T12:00:00.000 (optionally +01:00 or Z)"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def plan_reset(strategy: str, value: Any, current: dict[tuple[str, int], int],
               earliest: dict[tuple[str, int], int], latest: dict[tuple[str, int], int],
               by_time: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """New offsets per partition, clamped to [earliest, latest] as Kafka's tool clamps them.

    `current` holds committed offsets; a partition without one resets from the log start for
    `--shift-by` and stays at the log end for `--to-current`.
    """
    plan: dict[tuple[str, int], int] = {}
    for key in sorted(earliest):
        lo, hi = earliest[key], latest[key]
        if strategy == "to-earliest":
            target = lo
        elif strategy == "to-latest":
            target = hi
        elif strategy == "to-current":
            target = current.get(key, hi)
        elif strategy == "to-offset":
            target = value
        elif strategy == "shift-by":
            target = current.get(key, lo) + value
        elif strategy == "to-datetime":
            found = by_time.get(key, -1)
            target = hi if found < 0 else found
        else:
            raise ValueError(strategy)
        plan[key] = min(max(target, lo), hi)
    return plan


@groups.command("reset-offsets")
@bootstrap_option
@click.argument("names", nargs=-1, metavar="[GROUP]...")
@all_groups_option
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P]",
              help="Topic to reset, optionally only some partitions (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", "strategy", flag_value="to-earliest", help="Log start offset.")
@click.option("--to-latest", "strategy", flag_value="to-latest", help="Log end offset.")
@click.option("--to-current", "strategy", flag_value="to-current", help="Committed offset.")
@click.option("--to-offset", type=int, help="This offset.")
@click.option("--shift-by", type=int, help="Committed offset plus N (may be negative).")
@click.option("--to-datetime", help="First offset at or after YYYY-MM-DDTHH:mm:SS[.sss][zone].")
@click.option("--dry-run/--execute", default=True, show_default=True,
              help="Preview (default) or commit the new offsets.")
def reset_offsets(bootstrap: str, timeout_s: float, client_config: ClientProperties, names: tuple[str, ...], all_groups: bool,
                  topics: tuple[str, ...], all_topics: bool, strategy: str | None,
                  to_offset: int | None, shift_by: int | None, to_datetime: str | None,
                  dry_run: bool) -> None:
    """Move the committed offsets of GROUP (or of every group with --all-groups). Shows the plan
    unless --execute is given.

    \b
    Examples:
      odradek groups reset-offsets my-app --topic clicks --to-earliest
      odradek groups reset-offsets my-app --topic clicks:0,1 --shift-by -100 --execute
      odradek groups reset-offsets my-app --all-topics --to-datetime 2026-11-01T00:00:00 --execute
      odradek groups reset-offsets --all-groups --all-topics --to-latest
    """
    chosen = [(name, v) for name, v in (("to-offset", to_offset), ("shift-by", shift_by),
                                        ("to-datetime", to_datetime)) if v is not None]
    if strategy:
        chosen.append((strategy, None))
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-current, "
                               "--to-offset, --shift-by, --to-datetime")
    strategy, value = chosen[0]
    if strategy == "to-datetime":
        value = parse_datetime(value)
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")

    t = table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        for group in _chosen_groups(admin, names, all_groups):
            plan = _reset_group(admin, group, topics, all_topics, strategy, value, to_datetime,
                                dry_run)
            for (topic, p), offset in plan.items():
                t.add_row(group, topic, str(p), str(offset))
    console().print(t)
    if dry_run:
        click.echo("(dry run: nothing was changed; add --execute to commit these offsets)",
                   err=True)


def _reset_group(admin: Any, group: str, topics: tuple[str, ...], all_topics: bool,
                 strategy: str, value: Any, to_datetime: str | None,
                 dry_run: bool) -> dict[tuple[str, int], int]:
    """Plan (and unless `dry_run`, commit) one group's reset; the plan."""
    from kafka import TopicPartition

    info = admin.describe_groups([group])[group]
    state = info["group_state"]
    if state not in INACTIVE:
        raise click.ClickException(
            f"assignments can only be reset if the group '{group}' is inactive, "
            f"but the current state is {state}")
    current = _committed(admin, group)
    if all_topics:
        tps = [TopicPartition(t, p) for t, p in sorted(current)]
    else:
        tps = _partitions_of(admin, topics)
    if not tps:
        raise click.ClickException(f"group '{group}' has no committed offsets to reset")
    earliest = _offsets(admin, tps, "earliest")
    latest = _offsets(admin, tps, "latest")
    by_time = _offsets(admin, tps, value) if strategy == "to-datetime" else {}
    plan = plan_reset(strategy, value, current, earliest, latest, by_time)
    for topic, p in sorted(k for k in plan if by_time and by_time.get(k, -1) < 0):
        # Kafka's tool says "Partition P from topic T is empty. Falling back to latest
        # known offset."; the partition need not be empty, only nothing in it is that late
        click.echo(f"Warn: no record in {topic}-{p} at or after {to_datetime}: using its "
                   f"log end offset {plan[(topic, p)]}.", err=True)
    if not dry_run:
        from kafka.structs import OffsetAndMetadata

        result = admin.alter_group_offsets(group, {
            TopicPartition(t, p): OffsetAndMetadata(o, "", None) for (t, p), o in plan.items()})
        errors = [f"{tp.topic}-{tp.partition}: {err.__name__}" for tp, err in result.items()
                  if getattr(err, "errno", 0)]
        if errors:
            raise click.ClickException(f"group '{group}': reset failed for " + ", ".join(errors))
    return plan


def _partitions_of(admin: Any, specs: Iterable[str]) -> list[Any]:
    """TopicPartitions for `topic` or `topic:0,2` specs, checked against the cluster."""
    from kafka import TopicPartition

    wanted: dict[str, list[int] | None] = {}
    for spec in specs:
        name, _, parts = spec.partition(":")
        try:
            wanted[name] = [int(p) for p in parts.split(",") if p] if parts else None
        except ValueError:
            raise click.BadParameter(f"{spec!r}: partitions must be numbers, like topic:0,1") from None
    described = {t["name"]: t for t in admin.describe_topics(list(wanted))}
    tps = []
    for name, parts in wanted.items():
        t = described.get(name)
        if t is None or t["error_code"] == 3:
            raise click.ClickException(f"topic '{name}' does not exist")
        have = sorted(p["partition_index"] for p in t["partitions"])
        for p in parts if parts is not None else have:
            if p not in have:
                raise click.ClickException(f"topic '{name}' has no partition {p}")
            tps.append(TopicPartition(name, p))
    return tps
