"""`odradek configs`: describe and alter topic and broker configs (kafka-configs.sh's jobs).

Changes go through IncrementalAlterConfigs, so setting one key never resets the others (the
legacy AlterConfigs replaces a resource's whole dynamic config).
"""

from __future__ import annotations

from typing import Any

import click

from clients.client_properties import ClientProperties
from clients.common import admin_client, bootstrap_option, console, parse_pairs, split_names, table


def _resource(kind: str, name: str) -> Any:
    from kafka.admin import ConfigResource, ConfigResourceType

    rtype = ConfigResourceType.TOPIC if kind == "topic" else ConfigResourceType.BROKER
    return ConfigResource(rtype, name)


def _require_topic(admin: Any, name: str) -> None:
    """DescribeConfigs of a missing topic comes back empty through kafka-python; say so."""
    if any(t["error_code"] == 3 for t in admin.describe_topics([name])):
        raise click.ClickException(f"topic '{name}' does not exist")


def alter_resource_configs(admin: Any, kind: str, name: str, sets: dict[str, str],
                           deletes: list[str]) -> None:
    """Set and delete keys of one resource; a broker-side refusal becomes a clean error."""
    res = _resource(kind, name)
    res.configs = {**dict(sets), **{k: ("DELETE", None) for k in deletes}}
    result = admin.alter_configs([res], raise_on_unknown=False, incremental=True)
    outcome = next(iter(result.get(kind, {}).values()), "OK")
    if outcome != "OK":
        text = str(outcome)
        raise click.ClickException(text.split("] ", 1)[-1] if text.startswith("[Error") else text)


def _target(topic: str | None, broker: str | None) -> tuple[str, str]:
    if bool(topic) == bool(broker is not None):
        raise click.UsageError("give exactly one of --topic or --broker")
    return ("topic", topic) if topic else ("broker", str(broker))


@click.group()
def configs() -> None:
    """Describe and alter topic and broker configs.

    \b
    Examples:
      odradek configs describe --topic clicks
      odradek configs describe --broker 0 --all
      odradek configs alter --topic clicks --add-config retention.ms=3600000,cleanup.policy=compact
      odradek configs alter --broker 0 --delete-config log.retention.ms
    """


@configs.command()
@bootstrap_option
@click.option("--topic", "-t", help="Topic whose configs to show.")
@click.option("--broker", help="Broker id whose configs to show.")
@click.option("--all", "show_all", is_flag=True,
              help="Show every config, defaults included (default: only overrides).")
def describe(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str | None, broker: str | None,
             show_all: bool) -> None:
    """Show a topic's or a broker's configs: name, value, where it comes from.

    \b
    Examples:
      odradek configs describe --topic clicks
      odradek configs describe --broker 0 --all
    """
    kind, name = _target(topic, broker)
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        if kind == "topic":
            _require_topic(admin, name)
        described = admin.describe_configs([_resource(kind, name)],
                                           config_filter="all" if show_all else "modified")
    entries = described.get(kind, {}).get(name, {})
    scope = "All" if show_all else "Dynamic"
    click.echo(f"{scope} configs for {kind} {name} are:")
    t = table("NAME", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE")
    for key in sorted(entries):
        e = entries[key]
        value = "(sensitive)" if e.get("is_sensitive") else e.get("value")
        t.add_row(key, "null" if value is None else str(value), str(e.get("config_source")),
                  str(e.get("read_only")).lower(), str(e.get("is_sensitive")).lower())
    if entries:
        console().print(t)


@configs.command()
@bootstrap_option
@click.option("--topic", "-t", help="Topic to change.")
@click.option("--broker", help="Broker id to change.")
@click.option("--add-config", multiple=True, metavar="K=V[,K=V]", help="Keys to set.")
@click.option("--delete-config", multiple=True, metavar="K[,K]", help="Keys to reset to default.")
def alter(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str | None, broker: str | None,
          add_config: tuple[str, ...], delete_config: tuple[str, ...]) -> None:
    """Set or remove config overrides of a topic or a broker.

    \b
    Examples:
      odradek configs alter --topic clicks --add-config retention.ms=3600000
      odradek configs alter --broker 0 --add-config log.retention.ms=600000
    """
    kind, name = _target(topic, broker)
    sets = parse_pairs(add_config)
    deletes = split_names(delete_config)
    if not sets and not deletes:
        raise click.UsageError("nothing to alter: give --add-config or --delete-config")
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        alter_resource_configs(admin, kind, name, sets, deletes)
    click.echo(f"Completed updating config for {kind} {name}.")
