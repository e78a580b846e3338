"""`odradek topics reassign`: move partitions' replicas (kafka-reassign-partitions.sh --execute,
then waiting as its --verify would be run until it says completed).

The plan is Kafka's reassignment JSON (`{"version": 1, "partitions": [{"topic": ..., "partition":
..., "replicas": [...]}]}`, `log_dirs` ignored: any dir), submitted with
AlterPartitionReassignments; ListPartitionReassignments then says which are still moving, and the
progress (clients/progress.py) counts the partitions whose move is complete. `--throttle B/s` is
the tool's KIP-73 throttle: `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` on every broker involved, the topics'
`leader.replication.throttled.replicas` (the current replicas) and
`follower.replication.throttled.replicas` (the new ones); they are removed once every move is
complete, as --verify does. With `--no-wait` the command returns once the controller accepted the
plan (and the throttles stay until `odradek configs alter --delete-config` removes them).
Ctrl-C stops the waiting, not the reassignment.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from clients.client_properties import ClientProperties
from clients.common import admin_client, bootstrap_option
from clients.configs import alter_resource_configs
from clients.progress import progress, progress_interval_option

POLL_S = 0.5
BROKER_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def read_plan(path: Path) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> target replicas, from Kafka's reassignment JSON."""
    try:
        doc = json.loads(path.read_text())
        plan = {(p["topic"], int(p["partition"])): [int(r) for r in p["replicas"]] for p in doc["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise click.ClickException(f"{path}: not a reassignment plan ({type(e).__name__}: {e})") from None
    if not plan:
        raise click.ClickException(f"{path}: the plan moves no partition")
    empty = [f"{t}-{p}" for (t, p), replicas in plan.items() if not replicas]
    if empty:
        raise click.ClickException(f"{path}: no replicas given for {', '.join(empty)}")
    return plan


def throttled_replicas(parts: dict[int, list[int]]) -> str:
    """`partition:broker,...`, the value of a *.replication.throttled.replicas config."""
    return ",".join(f"{p}:{b}" for p, brokers in sorted(parts.items()) for b in brokers)


@click.command()
@bootstrap_option
@click.option("--reassignment-json-file", "plan_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Kafka's reassignment JSON (kafka-reassign-partitions.sh --generate writes one).")
@click.option("--throttle", type=click.IntRange(min=1), metavar="B/S",
              help="Bound the replication of the moving replicas (bytes/s per broker) until the move ends.")
@click.option("--no-wait", is_flag=True, help="Return once the controller accepted the plan.")
@progress_interval_option
def reassign(bootstrap: str, timeout_s: float, client_config: ClientProperties, plan_file: Path,
             throttle: int | None, no_wait: bool, progress_interval_s: float) -> None:
    """Move partitions' replicas as the plan says, and wait until every move is complete.

    \b
    Examples:
      odradek topics reassign --reassignment-json-file plan.json
      odradek topics reassign --reassignment-json-file plan.json --throttle 10000000
      odradek topics reassign --reassignment-json-file plan.json --no-wait
    """
    from kafka import TopicPartition

    plan = read_plan(plan_file)
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        current = _current_replicas(admin, plan)
        if throttle is not None:
            _set_throttles(admin, plan, current, throttle)
        started = time.monotonic()
        errors = admin.alter_partition_reassignments(
            {TopicPartition(t, p): replicas for (t, p), replicas in plan.items()})
        refused = [f"{tp.topic}-{tp.partition}: {err.__name__ if isinstance(err, type) else err}"
                   for tp, err in errors.items() if err is not None]
        if refused:
            raise click.ClickException("reassignment refused for " + "; ".join(refused))
        click.echo(f"Started the reassignment of {len(plan)} partition(s).")
        if no_wait:
            return
        tps = [TopicPartition(t, p) for t, p in plan]
        with progress(len(plan), "reassignment", progress_interval_s, "partitions") as update:
            while True:
                moving = admin.list_partition_reassignments(tps)
                update(len(plan) - len(moving))
                if not moving:
                    break
                time.sleep(POLL_S)
        if throttle is not None:
            _clear_throttles(admin, plan, current)
    click.echo(f"Reassignment of {len(plan)} partition(s) completed in {time.monotonic() - started:.1f} s.")


def _current_replicas(admin: Any, plan: dict[tuple[str, int], list[int]]) -> dict[tuple[str, int], list[int]]:
    topics = sorted({t for t, _ in plan})
    found: dict[tuple[str, int], list[int]] = {}
    for t in admin.describe_topics(topics):
        for p in t["partitions"]:
            found[(t["name"], p["partition_index"])] = list(p["replica_nodes"])
    missing = [f"{t}-{p}" for t, p in plan if (t, p) not in found]
    if missing:
        raise click.ClickException(f"no such partition: {', '.join(missing)}")
    return found


def _brokers(plan: dict[tuple[str, int], list[int]], current: dict[tuple[str, int], list[int]]) -> list[int]:
    return sorted({b for key, target in plan.items() for b in (*target, *current[key])})


def _set_throttles(admin: Any, plan: dict[tuple[str, int], list[int]], current: dict[tuple[str, int], list[int]],
                   rate: int) -> None:
    for broker in _brokers(plan, current):
        alter_resource_configs(admin, "broker", str(broker), dict.fromkeys(BROKER_RATES, str(rate)), [])
    for topic in sorted({t for t, _ in plan}):
        leaders = {p: current[(t, p)] for t, p in plan if t == topic}
        followers = {p: [b for b in plan[(t, p)] if b not in current[(t, p)]] for t, p in plan if t == topic}
        alter_resource_configs(admin, "topic", topic, {TOPIC_REPLICAS[0]: throttled_replicas(leaders),
                                                       TOPIC_REPLICAS[1]: throttled_replicas(followers)}, [])
    click.echo(f"The inter-broker throttle limit was set to {rate} B/s.")


def _clear_throttles(admin: Any, plan: dict[tuple[str, int], list[int]],
                     current: dict[tuple[str, int], list[int]]) -> None:
    for broker in _brokers(plan, current):
        alter_resource_configs(admin, "broker", str(broker), {}, list(BROKER_RATES))
    for topic in sorted({t for t, _ in plan}):
        alter_resource_configs(admin, "topic", topic, {}, list(TOPIC_REPLICAS))
    click.echo("Cleared the replication throttles.")
