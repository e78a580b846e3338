"""`odradek cluster start|stop|restart|kill BROKER_ID` and `cluster add-broker`: one broker of a
local cluster (issue #21 §3), found as clients.cluster_procs finds it, so a broker started by
hand from the cluster's config is the same broker. `kill` is SIGKILL, for trying failures;
`add-broker` writes a config like the others' with a new id and port and starts it: once it is
registered it is ready for a reassignment (kafka-reassign-partitions.sh)."""

from __future__ import annotations

from pathlib import Path

import click

from broker.config import read_properties_file
from clients.cluster_procs import (
    BrokerProc,
    ClusterProcs,
    dir_option,
    find,
    port_free,
    start_broker,
)
from clients.cluster_procs import kill as kill_process
from clients.cluster_procs import stop as stop_process

broker_id_arg = click.argument("broker_id", type=click.IntRange(0, 2**31 - 1), metavar="BROKER_ID")
start_timeout = click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
                             help="Seconds to wait for the broker to start.")
stop_timeout = click.option("--stop-timeout", "stop_timeout_s", type=float, default=30.0, show_default=True,
                            help="Seconds the broker gets to stop (SIGTERM) before it is killed.")


def _cluster(directory: Path, ask_zookeeper: bool = False) -> ClusterProcs:
    found = find(directory.resolve(), ask_zookeeper=ask_zookeeper)
    if found.state is None and not found.brokers:
        raise click.ClickException(f"no cluster in {directory} (start one with `odradek cluster up --dir {directory}`)")
    return found


def _broker(found: ClusterProcs, broker_id: int) -> BrokerProc:
    b = found.brokers.get(broker_id)
    if b is None or b.config is None:
        known = ", ".join(str(i) for i, b in found.brokers.items() if b.config is not None) or "none"
        raise click.ClickException(f"no broker {broker_id} in {found.directory} (brokers: {known})")
    return b


def _start(found: ClusterProcs, broker_id: int, timeout_s: float) -> None:
    if found.zk_pid is None:
        raise click.ClickException(
            f"ZooKeeper of {found.directory} is not running: `odradek cluster up --dir {found.directory}` first")
    pid = start_broker(found.directory, broker_id, timeout_s)
    port = found.brokers[broker_id].port if broker_id in found.brokers else None
    click.echo(f"broker {broker_id} started: 127.0.0.1:{port} (pid {pid})")


def _stop(b: BrokerProc, stop_timeout_s: float) -> None:
    assert b.pid is not None
    if stop_process(b.pid, stop_timeout_s):
        click.echo(f"broker {b.id} stopped (pid {b.pid})")
    else:
        click.echo(f"broker {b.id} killed (pid {b.pid}): it did not stop within {stop_timeout_s:g} s")


@click.command()
@broker_id_arg
@dir_option
@start_timeout
def start(broker_id: int, directory: Path, timeout_s: float) -> None:
    """Start a stopped broker of the cluster with its config and data.

    \b
    Example:
      odradek cluster start 2
    """
    found = _cluster(directory)
    b = _broker(found, broker_id)
    if b.pid is not None:
        raise click.ClickException(f"broker {broker_id} is running (pid {b.pid})")
    _start(found, broker_id, timeout_s)


@click.command()
@broker_id_arg
@dir_option
@stop_timeout
def stop(broker_id: int, directory: Path, stop_timeout_s: float) -> None:
    """Stop a broker cleanly (SIGTERM: a controlled shutdown first).

    \b
    Example:
      odradek cluster stop 2
    """
    b = _broker(_cluster(directory), broker_id)
    if b.pid is None:
        raise click.ClickException(f"broker {broker_id} is not running")
    _stop(b, stop_timeout_s)


@click.command()
@broker_id_arg
@dir_option
@stop_timeout
@start_timeout
def restart(broker_id: int, directory: Path, stop_timeout_s: float, timeout_s: float) -> None:
    """Stop a broker cleanly if it runs, then start it again.

    \b
    Example:
      odradek cluster restart 2
    """
    found = _cluster(directory)
    b = _broker(found, broker_id)
    if b.pid is not None:
        _stop(b, stop_timeout_s)
    _start(found, broker_id, timeout_s)


@click.command()
@broker_id_arg
@dir_option
def kill(broker_id: int, directory: Path) -> None:
    """Kill a broker (SIGKILL: no controlled shutdown, no clean-shutdown marker), to try failures.

    \b
    Example:
      odradek cluster kill 2
    """
    b = _broker(_cluster(directory), broker_id)
    if b.pid is None:
        raise click.ClickException(f"broker {broker_id} is not running")
    kill_process(b.pid)
    click.echo(f"broker {broker_id} killed (SIGKILL, pid {b.pid})")


# keys each broker has of its own; add-broker copies every other key from an existing broker
OWN_KEYS = ("broker.id", "listeners", "advertised.listeners", "log.dirs", "log.dir")


@click.command("add-broker")
@dir_option
@click.option("--id", "broker_id", type=click.IntRange(0, 2**31 - 1), help="Default: one above the highest id.")
@click.option("--port", type=click.IntRange(1, 65535), help="Default: one above the highest broker port.")
@start_timeout
def add_broker(directory: Path, broker_id: int | None, port: int | None, timeout_s: float) -> None:
    """Add a broker: a new id with the other brokers' settings, started and registered, ready
    to take partitions by a reassignment (kafka-reassign-partitions.sh --execute).

    \b
    Examples:
      odradek cluster add-broker
      odradek cluster add-broker --id 10 --port 9200
    """
    found = _cluster(directory, ask_zookeeper=True)
    configured = {i: b for i, b in found.brokers.items() if b.config is not None}
    if not configured:
        raise click.ClickException(f"no broker config in {found.directory} to take the settings from")
    if broker_id is None:
        broker_id = max(found.brokers) + 1
    elif broker_id in found.brokers:
        raise click.ClickException(f"broker {broker_id} already exists in {found.directory}")
    if port is None:
        port = max(b.port or 0 for b in found.brokers.values()) + 1
    if not port_free(port):
        raise click.ClickException(f"port {port} is in use: give --port")
    template = read_properties_file(next(iter(configured.values())).config)  # type: ignore[arg-type]
    bdir = found.directory / f"broker-{broker_id}"
    bdir.mkdir(exist_ok=True)  # left by an add-broker that could not start: its config went
    props = {"broker.id": str(broker_id), "listeners": f"PLAINTEXT://127.0.0.1:{port}",
             "log.dirs": str(bdir / "data"),
             **{k: v for k, v in template.items() if k not in OWN_KEYS}}
    (bdir / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    found.brokers[broker_id] = BrokerProc(broker_id, bdir / "server.properties", port)
    try:
        _start(found, broker_id, timeout_s)
    except BaseException:
        (bdir / "server.properties").unlink()  # not a broker of the cluster: a retry may add it
        raise
    click.echo(f"broker {broker_id} registered: move partitions to it with kafka-reassign-partitions.sh "
               f"(broker list {','.join(str(i) for i in sorted(found.brokers))})")

