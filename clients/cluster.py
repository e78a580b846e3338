"""`odradek cluster`: a local multi-node cluster on this machine -- a ZooKeeper and N brokers, each
its own process, ports and log dir, their logs in one folder -- and views of it.

`up` writes everything under one directory (default `./odradek-cluster`):

    cluster.json                  what `up` started: pids, ports, the bootstrap string
    zookeeper/zoo.cfg, data/      the ZooKeeper (Debian's package, clients.zookeeper_server)
    broker-<id>/server.properties Kafka-style config: broker.id, listeners, log.dirs,
                                  zookeeper.connect (plus every --override)
    broker-<id>/data/             its log dir
    logs/zookeeper.log, logs/broker-<id>.log

The processes run in their own sessions (they outlive the command), `down` stops the brokers
(SIGTERM: each shuts down cleanly) and then ZooKeeper; the data stays unless `--delete-data`.
`status` prints the processes, and what the brokers answer to Metadata: brokers, controller,
offline and under-replicated partitions; and to DescribeLogDirs: the log dirs an I/O error took
offline (KAFKA_STORAGE_ERROR). `zk-dump` prints Kafka's znodes. `start`, `stop`,
`restart`, `kill` and `add-broker` manage one broker (clients.cluster_brokers); `status` and `down`
find the processes as clients.cluster_procs does, so a broker restarted by hand is one of them.

Waits are bounded polls of a file or a port: these are other programs, not events of ours.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import click
from click.core import ParameterSource

from broker.config import read_properties_file
from clients.client_properties import ClientProperties
from clients.cluster_brokers import add_broker, kill, restart, start, stop
from clients.cluster_procs import (
    BROKER_READY,
    CLUSTER_FILE,
    ClusterProcs,
    dir_option,
    find,
    log_size,
    read_state,
    spawn,
    spawn_broker,
    wait_for,
    write_state,
)
from clients.cluster_procs import stop as stop_process
from clients.common import admin_client, broker_error, command_config_option, parse_pairs
from clients.reachability import unanswered
from clients.watch import watch as run_watch
from clients.watch import watch_options
from clients.zookeeper_server import READY_MARKER, serves, write_config, zookeeper_command


@click.group()
def cluster() -> None:
    """Run a local cluster: ZooKeeper plus N brokers (`up`, `status`, `down`, `zk-dump`), and
    manage one broker of it (`start`, `stop`, `restart`, `kill`, `add-broker`).

    \b
    Examples:
      odradek cluster up --brokers 3
      odradek cluster status
      odradek cluster kill 2
      odradek cluster start 2
      odradek cluster add-broker
      odradek cluster zk-dump
      odradek cluster down
    """


for _command in (start, stop, restart, kill, add_broker):
    cluster.add_command(_command)


@cluster.command()
@click.option("--brokers", "-n", "count", type=click.IntRange(1, 32), default=3, show_default=True)
@dir_option
@click.option("--port", type=click.IntRange(1, 65535), default=9092, show_default=True,
              help="Broker i listens on 127.0.0.1:PORT+i (a restarted cluster keeps its ports unless given).")
@click.option("--zookeeper-port", type=click.IntRange(1, 65535), default=2181, show_default=True)
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker setting for every broker (repeatable), e.g. default.replication.factor=3.")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="Seconds to wait for each process to start.")
@click.pass_context
def up(ctx: click.Context, count: int, directory: Path, port: int, zookeeper_port: int, overrides: tuple[str, ...],
       timeout_s: float) -> None:
    """Start ZooKeeper and N brokers in the background; print the bootstrap string.

    A directory whose processes are gone (a reboot, `kill`) starts again with its data: its
    ZooKeeper and every broker it has (brokers added since included), on their ports.

    \b
    Example:
      odradek cluster up --brokers 3 --override default.replication.factor=3
    """
    extra = parse_pairs(overrides)
    directory.mkdir(parents=True, exist_ok=True)
    directory = directory.resolve()
    found = find(directory, ask_zookeeper=False)
    if found.running:
        raise click.ClickException(
            f"a cluster from {directory} is running ({_running(found)}): `odradek cluster start ID` starts a "
            f"stopped broker, `odradek cluster down --dir {directory}` stops it")

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) is not ParameterSource.DEFAULT

    if found.zk_port is not None and not given("zookeeper_port"):
        zookeeper_port = found.zk_port
    if serves("127.0.0.1", zookeeper_port):
        raise click.ClickException(f"something already serves ZooKeeper on 127.0.0.1:{zookeeper_port}")
    logs = directory / "logs"
    started: list[int] = []
    try:
        zk_dir = directory / "zookeeper"
        zk_dir.mkdir(exist_ok=True)
        try:
            cmd = zookeeper_command(zk_dir, write_config(zk_dir, zookeeper_port))
        except RuntimeError as e:
            raise click.ClickException(str(e)) from None
        zk_log = logs / "zookeeper.log"
        offset = log_size(zk_log)
        zk = spawn(cmd, zk_log, zk_dir)
        started.append(zk.pid)
        wait_for("ZooKeeper", zk_log, READY_MARKER, zk, timeout_s, after=offset)
        connect = f"127.0.0.1:{zookeeper_port}"
        brokers = []
        procs = []
        for i in sorted(set(range(count)) | set(found.brokers)):
            bdir = directory / f"broker-{i}"
            bdir.mkdir(exist_ok=True)
            cfg = bdir / "server.properties"
            props = read_properties_file(cfg) if cfg.is_file() else {}
            if not props or given("port"):
                props["listeners"] = f"PLAINTEXT://127.0.0.1:{port + i}"
            props.setdefault("broker.id", str(i))
            props.setdefault("log.dirs", str(bdir / "data"))
            props.update({"zookeeper.connect": connect, **extra})
            cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            proc, log_path, offset = spawn_broker(directory, i)
            started.append(proc.pid)
            procs.append((i, proc, log_path, offset))
            bport = int(props["listeners"].rsplit(":", 1)[1])
            brokers.append({"id": i, "pid": proc.pid, "port": bport, "log": str(log_path)})
        for i, proc, log_path, offset in procs:
            wait_for(f"broker {i}", log_path, BROKER_READY, proc, timeout_s, after=offset)
    except BaseException:
        for pid in reversed(started):
            stop_process(pid, 10.0)
        raise
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in brokers)
    state = {
        "zookeeper": {"pid": zk.pid, "port": zookeeper_port, "connect": connect, "log": str(zk_log)},
        "brokers": brokers,
        "bootstrap": bootstrap,
    }
    write_state(directory, state)
    click.echo(f"ZooKeeper: {connect} (pid {zk.pid})")
    for b in brokers:
        click.echo(f"broker {b['id']}: 127.0.0.1:{b['port']} (pid {b['pid']})")
    click.echo(f"logs: {logs}")
    click.echo(f"bootstrap: {bootstrap}")


def _running(found: ClusterProcs) -> str:
    """What runs, for a message: `ZooKeeper pid 12, broker 1 pid 34`."""
    parts = [] if found.zk_pid is None else [f"ZooKeeper pid {found.zk_pid}"]
    parts += [f"broker {b.id} pid {b.pid}" for b in found.brokers.values() if b.pid is not None]
    return ", ".join(parts)


def _found(directory: Path, timeout_s: float) -> ClusterProcs:
    """The cluster's processes (cluster_procs.find), or one line when `directory` holds none."""
    found = find(directory, timeout_s=timeout_s)
    if found.state is None and not found.brokers and found.zk_port is None:
        raise click.ClickException(f"no cluster in {directory} (no {CLUSTER_FILE}, no broker-<id>/server.properties)")
    return found


@cluster.command()
@dir_option
@click.option("--timeout", "timeout_s", type=float, default=10.0, show_default=True)
@command_config_option
@watch_options
def status(directory: Path, timeout_s: float, client_config: ClientProperties, watch: bool,
           interval_s: float) -> None:
    """Processes, brokers, controller, offline and under-replicated partitions, offline log dirs.

    Brokers are found by their configs in the directory, their registration in the cluster's
    ZooKeeper and the process holding each log dir's lock: a broker restarted by hand counts.
    With --watch the view is refreshed until Ctrl-C. The brokers are asked on their first
    listener, with --command-config's security settings when that listener is SSL or SASL.

    \b
    Examples:
      odradek cluster status --dir odradek-cluster
      odradek cluster status --watch --interval 5
      odradek cluster status --command-config admin.properties
    """
    if not watch:
        for line in _status_lines(directory, timeout_s, client_config):
            click.echo(line)
        return
    from rich.text import Text

    _found(directory, min(timeout_s, 5.0))  # no cluster there: one error line, not a watch of errors

    def snapshot() -> Text:
        lines: list[str] = []
        try:
            lines.extend(_status_lines(directory, timeout_s, client_config))
        except click.ClickException as e:  # what was learnt before it stays on the screen
            lines.append(f"Error: {e.format_message()}")
        return Text("\n".join(lines))

    run_watch(snapshot, interval_s)


def _status_lines(directory: Path, timeout_s: float, client: ClientProperties) -> Iterator[str]:
    """`cluster status`'s report, line by line as it is learnt (what the processes say comes
    before what the brokers answer, which may fail)."""
    found = _found(directory, min(timeout_s, 5.0))
    zk_state = f"running (pid {found.zk_pid})" if found.zk_pid is not None else "NOT RUNNING"
    yield f"ZooKeeper {found.zk_connect}: {zk_state}"
    running = [b for b in found.brokers.values() if b.pid is not None and b.port is not None]
    # a broker that does not answer is down now, whatever ZooKeeper still says (issue #21)
    silent = unanswered((("127.0.0.1", b.port) for b in running), timeout_s, client)
    for b in found.brokers.values():
        where = f"127.0.0.1:{b.port}" if b.port is not None else "(not on this machine)"
        why = silent.get(("127.0.0.1", b.port)) if b.port is not None else None
        if b.pid is None:
            what = "NOT RUNNING"
        elif why is not None:
            what = f"NOT ANSWERING: {why} (pid {b.pid})"
        else:
            what = f"running (pid {b.pid})"
        if b.registered and b.pid is None:  # killed: its session lasts zookeeper.session.timeout.ms
            what += " (still registered: its ZooKeeper session has not expired yet)" if b.config else \
                " (registered, but its process is not on this machine)"
        elif b.pid is not None and b.registered is False:
            what += ", not registered"
        if b.config is None:
            what += f", started outside {directory}"
        yield f"broker {b.id} {where}: {what}"
    live = [b for b in running if ("127.0.0.1", b.port) not in silent]
    if not live:
        return
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in live)
    with admin_client(bootstrap, timeout_s, client) as admin:
        described = admin.describe_topics()
        info = admin.describe_cluster()
        log_dirs = admin.describe_log_dirs(brokers=[b.id for b in live])  # the silent ones cannot answer
    registered = sorted(b["broker_id"] for b in info["brokers"])
    yield f"cluster {info['cluster_id']}: brokers {registered}; controller: {info['controller_id']}"
    offline, under = [], []
    for t in described:
        for p in t["partitions"]:
            tp = f"{t['name']}-{p['partition_index']}"
            if p["leader_id"] < 0:
                offline.append(tp)
            elif len(p["isr_nodes"]) < len(p["replica_nodes"]):
                under.append(tp)
    total = sum(len(t["partitions"]) for t in described)
    yield f"partitions: {total}; offline: {len(offline)}; under-replicated: {len(under)}"
    for tp in offline:
        yield f"  offline: {tp}"
    for tp in under:
        yield f"  under-replicated: {tp}"
    dirs = [(b["broker"], d) for b in sorted(log_dirs, key=lambda b: b["broker"]) for d in b["log_dirs"]]
    failed = [(broker, d) for broker, d in dirs if d["error_code"] != 0]
    yield f"log dirs: {len(dirs)}; offline: {len(failed)}"
    for broker, d in failed:
        yield f"  offline log dir: broker {broker} {d['log_dir']} ({broker_error(d['error_code']).split(':')[0]})"


@cluster.command()
@dir_option
@click.option("--delete-data", is_flag=True, help="Also remove the directory (configs, data, logs).")
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True,
              help="Seconds each process gets to stop before it is killed.")
def down(directory: Path, delete_data: bool, timeout_s: float) -> None:
    """Stop the brokers (cleanly, SIGTERM), then ZooKeeper.

    Every broker of the cluster is stopped, one restarted by hand included (found as `status`
    finds it).

    \b
    Example:
      odradek cluster down --delete-data
    """
    found = _found(directory, 5.0)
    for b in found.brokers.values():
        if b.pid is None:
            if b.registered:
                click.echo(f"broker {b.id}: registered, but its process is not on this machine: left running")
            continue
        clean = stop_process(b.pid, timeout_s)
        click.echo(f"broker {b.id} stopped (pid {b.pid})" if clean else
                   f"broker {b.id} killed (pid {b.pid}): it did not stop within {timeout_s:g} s")
    if found.zk_pid is not None:
        stop_process(found.zk_pid, timeout_s)
        click.echo(f"ZooKeeper stopped (pid {found.zk_pid})")
    (directory / CLUSTER_FILE).unlink(missing_ok=True)
    if delete_data:
        shutil.rmtree(directory, ignore_errors=True)


@cluster.command("zk-dump")
@dir_option
@click.option("--zookeeper", "connect", help="host:port[/chroot] (default: the cluster's in --dir).")
@click.option("--path", "root", default="/", show_default=True, help="The subtree to print.")
def zk_dump(directory: Path, connect: str | None, root: str) -> None:
    """Print Kafka's znodes (brokers, controller, topics, partition states, configs) as JSON.

    \b
    Example:
      odradek cluster zk-dump --path /brokers
    """
    if connect is None:
        state = read_state(directory)
        if state is None:
            raise click.ClickException(f"no cluster in {directory}: give --zookeeper HOST:PORT")
        connect = state["zookeeper"]["connect"]
    import logging

    from controller.zk.client import ZooKeeperClient
    from controller.zk.dump import dump, render

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its retries would print per attempt

    async def run() -> str:
        zk = ZooKeeperClient(connect, session_timeout_ms=10_000, connection_timeout_ms=10_000,
                             request_timeout_ms=10_000)
        try:
            await zk.start()
            return render(await dump(zk, root))
        finally:
            await zk.close()

    try:
        click.echo(asyncio.run(run()))
    except Exception as e:  # the ZooKeeper cannot be reached: one line, no traceback
        raise click.ClickException(f"ZooKeeper at {connect}: {e}") from None
