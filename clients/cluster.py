"""`odradek cluster`: a local multi-node cluster on this machine -- a ZooKeeper and N brokers, each
its own process, ports and log dir, their logs in one folder -- and views of it.

`up` writes everything under one directory (default `./odradek-cluster`):

    cluster.json                  what runs: pids, ports, the bootstrap string
    zookeeper/zoo.cfg, data/      the ZooKeeper (Debian's package, clients.zookeeper_server)
    broker-<id>/server.properties Kafka-style config: broker.id, listeners, log.dirs,
                                  zookeeper.connect (plus every --override)
    broker-<id>/data/             its log dir
    logs/zookeeper.log, logs/broker-<id>.log

The processes run in their own sessions (they outlive the command), `down` stops the brokers
(SIGTERM: each shuts down cleanly) and then ZooKeeper; the data stays unless `--delete-data`.
`status` prints the processes, and what the brokers answer to Metadata: brokers, controller,
offline and under-replicated partitions. `zk-dump` prints Kafka's znodes.

Waits are bounded polls of a file or a port: these are other programs, not events of ours.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from clients.common import admin_client, parse_pairs
from clients.reachability import unanswered
from clients.zookeeper_server import READY_MARKER, serves, write_config, zookeeper_command

CLUSTER_FILE = "cluster.json"
BROKER_READY = "event='broker started'"
dir_option = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("odradek-cluster"),
    show_default=True, help="Where the cluster's configs, data and logs live.",
)


@click.group()
def cluster() -> None:
    """Run a local cluster: ZooKeeper plus N brokers (`up`, `status`, `down`, `zk-dump`).

    \b
    Examples:
      odradek cluster up --brokers 3
      odradek cluster status
      odradek cluster zk-dump
      odradek cluster down
    """


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def _read_state(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / CLUSTER_FILE).read_text())
    except FileNotFoundError:
        return None


def _spawn(cmd: list[str], log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)


def _wait_for(what: str, log_path: Path, marker: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until `marker` is in the log (bounded), or fail with the log's last lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker in log_path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
    raise click.ClickException(f"{what} did not start (see {log_path}):\n{tail}")


def _stop(pid: int, timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout`."""
    if not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@cluster.command()
@click.option("--brokers", "-n", "count", type=click.IntRange(1, 32), default=3, show_default=True)
@dir_option
@click.option("--port", type=click.IntRange(1, 65535), default=9092, show_default=True,
              help="Broker i listens on 127.0.0.1:PORT+i.")
@click.option("--zookeeper-port", type=click.IntRange(1, 65535), default=2181, show_default=True)
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker setting for every broker (repeatable), e.g. default.replication.factor=3.")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="Seconds to wait for each process to start.")
def up(count: int, directory: Path, port: int, zookeeper_port: int, overrides: tuple[str, ...],
       timeout_s: float) -> None:
    """Start ZooKeeper and N brokers in the background; print the bootstrap string.

    \b
    Example:
      odradek cluster up --brokers 3 --override default.replication.factor=3
    """
    state = _read_state(directory)
    if state is not None and any(_alive(p["pid"]) for p in [state["zookeeper"], *state["brokers"]]):
        raise click.ClickException(f"a cluster from {directory} is running: `odradek cluster down --dir {directory}` first")
    if serves("127.0.0.1", zookeeper_port):
        raise click.ClickException(f"something already serves ZooKeeper on 127.0.0.1:{zookeeper_port}")
    extra = parse_pairs(overrides)
    directory.mkdir(parents=True, exist_ok=True)
    directory = directory.resolve()
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
        zk = _spawn(cmd, zk_log, zk_dir)
        started.append(zk.pid)
        _wait_for("ZooKeeper", zk_log, READY_MARKER, zk, timeout_s)
        connect = f"127.0.0.1:{zookeeper_port}"
        brokers = []
        procs = []
        for i in range(count):
            bdir = directory / f"broker-{i}"
            bdir.mkdir(exist_ok=True)
            props = {
                "broker.id": str(i),
                "listeners": f"PLAINTEXT://127.0.0.1:{port + i}",
                "log.dirs": str(bdir / "data"),
                "zookeeper.connect": connect,
                **extra,
            }
            cfg = bdir / "server.properties"
            cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            log_path = logs / f"broker-{i}.log"
            proc = _spawn([sys.executable, "-m", "clients.cli", "serve", "--config", str(cfg)], log_path, bdir)
            started.append(proc.pid)
            procs.append((i, proc, log_path))
            brokers.append({"id": i, "pid": proc.pid, "port": port + i, "log": str(log_path)})
        for i, proc, log_path in procs:
            _wait_for(f"broker {i}", log_path, BROKER_READY, proc, timeout_s)
    except BaseException:
        for pid in reversed(started):
            _stop(pid, 10.0)
        raise
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in brokers)
    state = {
        "zookeeper": {"pid": zk.pid, "port": zookeeper_port, "connect": connect, "log": str(zk_log)},
        "brokers": brokers,
        "bootstrap": bootstrap,
    }
    (directory / CLUSTER_FILE).write_text(json.dumps(state, indent=1) + "\n")
    click.echo(f"ZooKeeper: {connect} (pid {zk.pid})")
    for b in brokers:
        click.echo(f"broker {b['id']}: 127.0.0.1:{b['port']} (pid {b['pid']})")
    click.echo(f"logs: {logs}")
    click.echo(f"bootstrap: {bootstrap}")


@cluster.command()
@dir_option
@click.option("--timeout", "timeout_s", type=float, default=10.0, show_default=True)
def status(directory: Path, timeout_s: float) -> None:
    """Processes, brokers, controller, offline and under-replicated partitions.

    \b
    Example:
      odradek cluster status --dir odradek-cluster
    """
    state = _read_state(directory)
    if state is None:
        raise click.ClickException(f"no cluster in {directory} (no {CLUSTER_FILE})")
    zk = state["zookeeper"]
    click.echo(f"ZooKeeper {zk['connect']}: {'running' if _alive(zk['pid']) else 'NOT RUNNING'} (pid {zk['pid']})")
    running = [b for b in state["brokers"] if _alive(b["pid"])]
    # a broker that does not answer is down now, whatever ZooKeeper still says (issue #21)
    silent = unanswered((("127.0.0.1", b["port"]) for b in running), timeout_s)
    live = [b for b in running if ("127.0.0.1", b["port"]) not in silent]
    for b in state["brokers"]:
        why = silent.get(("127.0.0.1", b["port"]))
        shown = "running" if b in live else f"NOT ANSWERING: {why}" if b in running else "NOT RUNNING"
        click.echo(f"broker {b['id']} 127.0.0.1:{b['port']}: {shown} (pid {b['pid']})")
    if not live:
        return
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in live)
    with admin_client(bootstrap, timeout_s) as admin:
        described = admin.describe_topics()
        info = admin.describe_cluster()
    registered = sorted(b["broker_id"] for b in info["brokers"])
    click.echo(f"cluster {info['cluster_id']}: brokers {registered}; controller: {info['controller_id']}")
    offline, under = [], []
    for t in described:
        for p in t["partitions"]:
            tp = f"{t['name']}-{p['partition_index']}"
            if p["leader_id"] < 0:
                offline.append(tp)
            elif len(p["isr_nodes"]) < len(p["replica_nodes"]):
                under.append(tp)
    total = sum(len(t["partitions"]) for t in described)
    click.echo(f"partitions: {total}; offline: {len(offline)}; under-replicated: {len(under)}")
    for tp in offline:
        click.echo(f"  offline: {tp}")
    for tp in under:
        click.echo(f"  under-replicated: {tp}")


@cluster.command()
@dir_option
@click.option("--delete-data", is_flag=True, help="Also remove the directory (configs, data, logs).")
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True,
              help="Seconds each process gets to stop before it is killed.")
def down(directory: Path, delete_data: bool, timeout_s: float) -> None:
    """Stop the brokers (cleanly, SIGTERM), then ZooKeeper.

    \b
    Example:
      odradek cluster down --delete-data
    """
    state = _read_state(directory)
    if state is None:
        raise click.ClickException(f"no cluster in {directory} (no {CLUSTER_FILE})")
    for b in state["brokers"]:
        _stop(b["pid"], timeout_s)
        click.echo(f"broker {b['id']} stopped")
    _stop(state["zookeeper"]["pid"], timeout_s)
    click.echo("ZooKeeper stopped")
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
        state = _read_state(directory)
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
