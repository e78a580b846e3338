"""`odradek topics`: list, describe, create, delete and alter topics (kafka-topics.sh's jobs).

`describe` prints kafka-topics.sh's own layout (a `Topic:` line, then one tab-separated line per
partition with Leader, Replicas and Isr), so scripts and habits written for Kafka carry over.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import click

from clients.client_properties import ClientProperties
from clients.common import admin_client, bootstrap_option, broker_error, parse_pairs, split_names
from clients.progress import Update, progress, progress_interval_option
from clients.reassign import reassign

NO_LEADER = -1
LEADER_POLL_S = 0.2


def _fail_on_errors(results: list[dict[str, Any]], ignore: set[int] = frozenset()) -> None:
    errors = [f"topic '{r['name']}': {broker_error(r['error_code'], r.get('error_message'))}"
              for r in results if r["error_code"] and r["error_code"] not in ignore]
    if errors:
        raise click.ClickException("; ".join(errors))


@click.group()
def topics() -> None:
    """Create, list, describe, alter and delete topics.

    \b
    Examples:
      odradek topics create clicks --partitions 6 --config retention.ms=86400000
      odradek topics describe clicks
      odradek topics alter clicks --partitions 12
      odradek topics delete clicks
    """


@topics.command("list")
@bootstrap_option
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets).")
def list_(bootstrap: str, timeout_s: float, client_config: ClientProperties, exclude_internal: bool) -> None:
    """Print the name of every topic, one per line.

    \b
    Example:
      odradek topics list --exclude-internal
    """
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        described = admin.describe_topics()
    for t in sorted(described, key=lambda t: t["name"]):
        if not (exclude_internal and t.get("is_internal")):
            click.echo(t["name"])


def _topic_configs(admin: Any, names: list[str]) -> dict[str, dict[str, str]]:
    """The non-default (dynamic) configs of each topic, as kafka-topics.sh shows them."""
    from kafka.admin import ConfigResource, ConfigResourceType

    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    return {name: {k: v["value"] for k, v in sorted(cfg.items())}
            for name, cfg in described.get("topic", {}).items()}


def _min_insync_replicas(admin: Any, names: list[str]) -> dict[str, int]:
    """Each topic's effective min.insync.replicas (its override or the broker default)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n, {"min.insync.replicas": None})
                                        for n in names], config_filter="all")
    return {name: int(cfg["min.insync.replicas"]["value"]) for name, cfg in described.get("topic", {}).items()
            if "min.insync.replicas" in cfg}


def kafka_uuid(value: Any) -> str:
    """A topic id as Kafka prints it (Uuid.toString: URL-safe base64 of the 16 bytes, no
    padding), so ids can be compared with kafka-topics.sh output and partition.metadata."""
    if value is None:
        return "null"
    raw = value.bytes if isinstance(value, uuid.UUID) else uuid.UUID(str(value)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@topics.command()
@bootstrap_option
@click.argument("names", nargs=-1)
@click.option("--exclude-internal", is_flag=True, help="With no NAMES: leave out internal topics.")
@click.option("--under-replicated-partitions", "under_replicated", is_flag=True,
              help="Only partitions whose ISR is smaller than their replicas.")
@click.option("--under-min-isr-partitions", "under_min_isr", is_flag=True,
              help="Only partitions whose ISR is smaller than the topic's min.insync.replicas (or without a leader).")
@click.option("--unavailable-partitions", "unavailable", is_flag=True,
              help="Only partitions without a live leader.")
def describe(bootstrap: str, timeout_s: float, client_config: ClientProperties, names: tuple[str, ...], exclude_internal: bool,
             under_replicated: bool, under_min_isr: bool, unavailable: bool) -> None:
    """Show partitions with leader, replicas and ISR (all topics when no NAMES are given). The
    filters are kafka-topics.sh's: with one, only the partitions it selects are printed, without
    the topic lines.

    \b
    Example:
      odradek topics describe clicks page-counts
      odradek topics describe --under-replicated-partitions
    """
    wanted = split_names(names)
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        described = admin.describe_topics(wanted or None)
        missing = [t["name"] for t in described if t["error_code"] == 3]
        if missing:
            raise click.ClickException(
                ", ".join(f"topic '{n}' does not exist" for n in missing))
        _fail_on_errors(described)
        if exclude_internal and not wanted:
            described = [t for t in described if not t.get("is_internal")]
        described.sort(key=lambda t: t["name"])
        configs = _topic_configs(admin, [t["name"] for t in described]) if described else {}
        min_isr = _min_insync_replicas(admin, [t["name"] for t in described]) if described and under_min_isr else {}
        unreachable = admin.unreachable
    filtered = under_replicated or under_min_isr or unavailable
    for t in described:
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        rf = len(parts[0]["replica_nodes"]) if parts else 0
        cfg = ",".join(f"{k}={v}" for k, v in configs.get(t["name"], {}).items())
        if filtered:
            parts = [p for p in parts if (under_replicated and len(p["isr_nodes"]) < len(p["replica_nodes"]))
                     or (under_min_isr and (p["leader_id"] == NO_LEADER  # as TopicCommand's isUnderMinIsr
                                            or len(p["isr_nodes"]) < min_isr.get(t["name"], 1)))
                     or (unavailable and p["leader_id"] == NO_LEADER)]
        else:
            click.echo(f"Topic: {t['name']}\tTopicId: {kafka_uuid(t.get('topic_id'))}"
                       f"\tPartitionCount: {len(parts)}"
                       f"\tReplicationFactor: {rf}\tConfigs: {cfg}")
        for p in parts:
            leader = "none" if p["leader_id"] == NO_LEADER else p["leader_id"]
            click.echo(f"\tTopic: {t['name']}\tPartition: {p['partition_index']}\tLeader: {leader}"
                       f"\tReplicas: {','.join(map(str, p['replica_nodes']))}"
                       f"\tIsr: {','.join(map(str, p['isr_nodes']))}")
    _warn_stale_leaders(described, unreachable)


def _warn_stale_leaders(described: list[dict[str, Any]], unreachable: dict[int, str]) -> None:
    """Name the partitions the metadata says an unreachable broker leads or holds in sync: the
    layout above is Kafka's (the metadata as the brokers have it), and until the controller
    notices (the broker's ZooKeeper session expires) it shows the dead broker as leader."""
    from clients.reachability import warn

    for node, addr in sorted(unreachable.items()):
        led = [f"{t['name']}-{p['partition_index']}" for t in described for p in t["partitions"]
               if p["leader_id"] == node]
        isr = sum(node in p["isr_nodes"] for t in described for p in t["partitions"])
        if led or isr:
            warn(f"broker {node} at {addr} does not answer, but the metadata still lists broker {node} as "
                 f"leader of {', '.join(sorted(led)) or 'no partition'} and in {isr} ISR(s), until the "
                 f"controller notices it is gone")


@topics.command()
@bootstrap_option
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(min=1),
              help="Number of partitions (default: the broker's num.partitions).")
@click.option("--replication-factor", "-r", type=click.IntRange(min=1),
              help="Replicas per partition (default: the broker's default.replication.factor).")
@click.option("--config", "-c", "config", multiple=True, metavar="KEY=VALUE",
              help="Topic config override (repeatable or comma-separated).")
@click.option("--if-not-exists", is_flag=True, help="Succeed quietly when the topic exists.")
@click.option("--validate-only", is_flag=True, help="Ask the broker to check, not create.")
@progress_interval_option
def create(bootstrap: str, timeout_s: float, client_config: ClientProperties, name: str,
           partitions: int | None, replication_factor: int | None, config: tuple[str, ...],
           if_not_exists: bool, validate_only: bool, progress_interval_s: float) -> None:
    """Create topic NAME and wait (up to --timeout) until every partition has a leader in every
    broker's metadata, so the topic can be written through any broker as soon as the command
    returns (CreateTopics answers once the topic is recorded; the leaders are elected after).
    Progress goes to standard error.

    \b
    Examples:
      odradek topics create clicks --partitions 6 --replication-factor 1
      odradek topics create audit -c cleanup.policy=compact -c min.compaction.lag.ms=60000
    """
    spec = {name: {"num_partitions": partitions or -1,
                   "replication_factor": replication_factor or -1,
                   "configs": parse_pairs(config)}}
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        if validate_only:
            result = admin.create_topics(spec, validate_only=True, raise_errors=False)
            _fail_on_errors(result["topics"])
            click.echo(f"Topic creation would succeed for {name}.")
            return
        # the progress covers the request too: a single node answers once every log exists
        with progress(partitions or 0, f"leaders of {name}", progress_interval_s, "partitions") as update:
            result = admin.create_topics(spec, raise_errors=False)
            _fail_on_errors(result["topics"], {36} if if_not_exists else set())  # TOPIC_ALREADY_EXISTS
            if result["topics"][0]["error_code"] != 0:
                return
            total, led = _wait_for_leaders(admin, name, partitions or 0, timeout_s, update)
    click.echo(f"Created topic {name}.")
    if led < total:
        from clients.reachability import warn

        warn(f"{led} of {total} partitions of {name} have a leader after {timeout_s:g} s; the others "
             "are being elected")


def _wait_for_leaders(admin: Any, name: str, total: int, timeout_s: float, update: Update) -> tuple[int, int]:
    """Poll every broker's metadata until each lists all `total` partitions of `name` with a
    leader (or --timeout passes); (partitions, how many have a leader on the broker that knows
    fewest). `total` 0: the broker's num.partitions, learnt from the metadata. Every broker, not
    one: the controller's UpdateMetadata reaches them one after the other, and a broker still
    creating hundreds of logs answers from its old cache meanwhile, so a client asking it right
    after the command would not find the topic (as on Kafka). A broker that does not answer is
    left out: no client gets metadata from it either."""
    deadline = time.monotonic() + timeout_s
    while True:
        views = admin._manager.run(_partitions_on_every_broker, admin, name)
        total = max([total, *(len(parts) for parts in views)])
        led = min((sum(1 for p in parts if p["leader_id"] != NO_LEADER) for parts in views), default=0)
        update(led, total)
        if (total and led >= total) or time.monotonic() > deadline:
            return total, led
        time.sleep(LEADER_POLL_S)


async def _partitions_on_every_broker(admin: Any, name: str) -> list[list[dict[str, Any]]]:
    """The partitions of `name` in each answering broker's Metadata (kafka-python's admin asks
    one broker of its choice: this asks each, on the admin's own connections). The brokers the
    reachability probe found silent are not asked; one that stops answering meanwhile is left
    out of this round."""
    from kafka.errors import KafkaError
    from kafka.protocol.metadata import MetadataRequest

    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                              allow_auto_topic_creation=False)
    views = []
    for node_id in admin.answering_broker_ids():
        try:
            response = await admin._manager.send(request, node_id=node_id)
        except KafkaError:  # connection lost or request timed out
            continue
        views.append([p for t in response.to_dict()["topics"] if t["name"] == name
                      and t["error_code"] in (0, 5) for p in t["partitions"]])  # 5: LEADER_NOT_AVAILABLE
    return views


@topics.command()
@bootstrap_option
@click.argument("names", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed quietly for topics that do not exist.")
def delete(bootstrap: str, timeout_s: float, client_config: ClientProperties, names: tuple[str, ...], if_exists: bool) -> None:
    """Delete the topics NAMES (and all their data).

    \b
    Example:
      odradek topics delete clicks page-counts
    """
    wanted = split_names(names)
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        result = admin.delete_topics(wanted, raise_errors=False)
    rows = result["topics"]
    _fail_on_errors(rows, {3} if if_exists else set())  # UNKNOWN_TOPIC_OR_PARTITION
    for r in rows:
        if r["error_code"] == 0:
            click.echo(f"Deleted topic {r['name']}.")


@topics.command()
@bootstrap_option
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(min=1),
              help="New total number of partitions (can only grow).")
@click.option("--config", "-c", "config", multiple=True, metavar="KEY=VALUE",
              help="Set a topic config (repeatable or comma-separated).")
@click.option("--delete-config", multiple=True, metavar="KEY",
              help="Remove a topic config override, back to the broker default.")
def alter(bootstrap: str, timeout_s: float, client_config: ClientProperties, name: str, partitions: int | None,
          config: tuple[str, ...], delete_config: tuple[str, ...]) -> None:
    """Add partitions to topic NAME or change its configs.

    \b
    Examples:
      odradek topics alter clicks --partitions 12
      odradek topics alter clicks -c retention.ms=3600000 --delete-config segment.bytes
    """
    from clients.configs import alter_resource_configs

    sets = parse_pairs(config)
    deletes = split_names(delete_config)
    if partitions is None and not sets and not deletes:
        raise click.UsageError("nothing to alter: give --partitions, --config or --delete-config")
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        if partitions is not None:
            result = admin.create_partitions({name: partitions}, raise_errors=False)
            _fail_on_errors(result.to_dict()["results"])
            click.echo(f"Topic {name} now has {partitions} partitions.")
        if sets or deletes:
            alter_resource_configs(admin, "topic", name, sets, deletes)
            click.echo(f"Updated configs of topic {name}.")


topics.add_command(reassign)
