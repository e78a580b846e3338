"""The processes of a local cluster (`odradek cluster`), found from what is there rather than only
from what `up` recorded in cluster.json (issue #21 §3: a broker restarted by hand was invisible to
`status`, blocked nothing and outlived `down`).

A broker of the cluster is a `broker-<id>/server.properties` in the cluster's directory, or a
registration in `/brokers/ids` of the cluster's ZooKeeper. Its process is the one holding the
flock on its log dir's `.lock` (every broker takes it at start, Kafka's LogManager lock; the
kernel lists its holder in /proc/locks and drops it when the process dies, so a stale pid never
names another program), or, for a registered broker whose log dir is not in the cluster's
directory, the process listening on its registered local port. ZooKeeper's process is the one
listening on its client port (or the one `up` started, while it is not listening).

Waits are bounded polls of a file or a port: these are other programs, not events of ours.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from broker.config import read_properties_file

CLUSTER_FILE = "cluster.json"
BROKER_READY = "event='broker started'"
LOCK_FILE = ".lock"  # storage.log_manager.LOCK_FILE (not imported: the CLI stays light)
_BROKER_DIR = re.compile(r"^broker-(\d+)$")
_LISTENER_PORT = re.compile(r"://[^:,]*:(\d+)")
dir_option = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("odradek-cluster"),
    show_default=True, help="Where the cluster's configs, data and logs live.",
)


@dataclass
class BrokerProc:
    """One broker of the cluster as found: its config (None: registered from elsewhere), port,
    process (None: not running) and whether ZooKeeper lists it (None: ZooKeeper not reachable)."""

    id: int
    config: Path | None
    port: int | None
    pid: int | None = None
    registered: bool | None = None
    log_dirs: list[Path] = field(default_factory=list)


@dataclass
class ClusterProcs:
    """ZooKeeper (connect string, port, pid or None) and every broker found, by id."""

    directory: Path
    state: dict[str, Any] | None
    zk_connect: str | None
    zk_port: int | None
    zk_pid: int | None
    brokers: dict[int, BrokerProc]

    @property
    def running(self) -> bool:
        return self.zk_pid is not None or any(b.pid is not None for b in self.brokers.values())


def alive(pid: int) -> bool:
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


def read_state(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / CLUSTER_FILE).read_text())
    except FileNotFoundError:
        return None


def write_state(directory: Path, state: dict[str, Any]) -> None:
    (directory / CLUSTER_FILE).write_text(json.dumps(state, indent=1) + "\n")


def spawn(cmd: list[str], log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Start `cmd` in its own session (it outlives the command), output appended to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)


def log_size(log_path: Path) -> int:
    """Where a process started now begins writing in its (appended) log."""
    try:
        return log_path.stat().st_size
    except FileNotFoundError:
        return 0


def wait_for(what: str, log_path: Path, marker: str, proc: subprocess.Popen[bytes], timeout: float,
             after: int = 0) -> None:
    """Until `marker` is in the log past byte `after` (an earlier run's lines do not count;
    bounded), or fail with the log's last lines."""
    deadline = time.monotonic() + timeout

    def text() -> str:
        with open(log_path, "rb") as f:
            f.seek(after)
            return f.read().decode(errors="replace")

    while time.monotonic() < deadline:
        if marker in text():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = "\n".join(text().splitlines()[-20:])
    raise click.ClickException(f"{what} did not start (see {log_path}):\n{tail}")


def stop(pid: int, timeout: float) -> bool:
    """SIGTERM, then SIGKILL after `timeout`; False when it had to be killed."""
    if not alive(pid):
        return True
    with _gone_ok():
        os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, timeout):
        return True
    with _gone_ok():
        os.kill(pid, signal.SIGKILL)
    wait_gone(pid, 10.0)
    return False


def kill(pid: int) -> None:
    """SIGKILL and wait (bounded) until the process is gone (its lock released)."""
    with _gone_ok():
        os.kill(pid, signal.SIGKILL)
    wait_gone(pid, 10.0)


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


class _gone_ok:
    """A process that ended between the check and the signal is fine."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        return exc_type is ProcessLookupError


# --- finding processes ---------------------------------------------------------------------------

def lock_holder(lock_file: Path) -> int | None:
    """The pid holding a flock on `lock_file` (/proc/locks: `N: FLOCK ADVISORY WRITE pid
    maj:min:inode start end`), None when nobody does or the file is missing."""
    try:
        st = lock_file.stat()
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":  # "N: -> FLOCK ...": a process waiting for it
            continue
        try:
            pid = int(parts[4])
            major, minor, inode = parts[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if key == want and alive(pid):
            return pid
    return None


def listener_pid(port: int) -> int | None:
    """The pid of a process of this user listening on TCP `port` (/proc/net/tcp{,6}, then the
    socket's inode among /proc/<pid>/fd), None when there is none or it is not ours."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in targets:
                    return int(proc.name)
        except OSError:
            continue
    return None


def port_free(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:port now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def broker_config(path: Path) -> tuple[int | None, list[Path]]:
    """A broker config's first listener port and its log dirs (relative to the config's dir)."""
    props = read_properties_file(path)
    m = _LISTENER_PORT.search(props.get("listeners", ""))
    dirs = props.get("log.dirs") or props.get("log.dir") or ""
    return (int(m.group(1)) if m else None), [path.parent / d.strip() for d in dirs.split(",") if d.strip()]


def broker_pid(log_dirs: list[Path]) -> int | None:
    """The process holding the lock of any of these log dirs."""
    for d in log_dirs:
        pid = lock_holder(d / LOCK_FILE)
        if pid is not None:
            return pid
    return None


def zookeeper_port(directory: Path, state: dict[str, Any] | None) -> int | None:
    if state is not None:
        return int(state["zookeeper"]["port"])
    try:
        return int(read_properties_file(directory / "zookeeper" / "zoo.cfg")["clientPort"])
    except (OSError, KeyError, ValueError):
        return None


def registrations(connect: str, timeout_s: float) -> dict[int, int | None] | None:
    """/brokers/ids of the ZooKeeper at `connect`: broker id -> its first endpoint's port when
    that endpoint is on this machine (else None); None when ZooKeeper cannot be read in time."""
    from controller.zk.client import ZooKeeperClient
    from controller.zk.kafka_zk_client import KafkaZkClient

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its retries would print per attempt
    timeout_ms = int(timeout_s * 1000)

    async def read() -> dict[int, int | None]:
        zk = ZooKeeperClient(connect, session_timeout_ms=max(timeout_ms, 6000), connection_timeout_ms=timeout_ms,
                             request_timeout_ms=timeout_ms)
        try:
            await zk.start()
            brokers = await asyncio.wait_for(KafkaZkClient(zk).get_all_brokers_in_cluster(), timeout_s)
        finally:
            await zk.close(timeout=1.0)
        local = ("127.0.0.1", "localhost", "::1", "", None)
        return {b.id: next((e.port for e in b.endpoints if e.host in local), None) for b in brokers}

    try:
        return asyncio.run(read())
    except Exception:  # not reachable or not answering: the caller says so
        return None


def find(directory: Path, *, ask_zookeeper: bool = True, timeout_s: float = 5.0) -> ClusterProcs:
    """Every process of the cluster in `directory` (see the module's docstring)."""
    state = read_state(directory)
    port = zookeeper_port(directory, state)
    connect = state["zookeeper"]["connect"] if state is not None else (f"127.0.0.1:{port}" if port else None)
    zk_pid = None if port is None else listener_pid(port)
    if zk_pid is None and state is not None and _is_zookeeper(state["zookeeper"]["pid"]):
        zk_pid = state["zookeeper"]["pid"]  # started, not listening (yet, or any more)
    brokers: dict[int, BrokerProc] = {}
    if directory.is_dir():
        for d in sorted(directory.iterdir()):
            m = _BROKER_DIR.match(d.name)
            if m and (d / "server.properties").is_file():
                bport, log_dirs = broker_config(d / "server.properties")
                brokers[int(m.group(1))] = BrokerProc(int(m.group(1)), d / "server.properties", bport,
                                                      broker_pid(log_dirs), log_dirs=log_dirs)
    registered = registrations(connect, timeout_s) if ask_zookeeper and connect and zk_pid else None
    if registered is not None:
        for b in brokers.values():
            b.registered = b.id in registered
        for bid, bport in registered.items():
            if bid not in brokers:  # started from elsewhere, registered in this cluster
                brokers[bid] = BrokerProc(bid, None, bport, None if bport is None else listener_pid(bport), True)
    return ClusterProcs(directory, state, connect, port, zk_pid, dict(sorted(brokers.items())))


def _is_zookeeper(pid: int) -> bool:
    """Whether `pid` runs ZooKeeper (not a process that got a dead ZooKeeper's pid)."""
    try:
        return alive(pid) and b"QuorumPeerMain" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def serve_command(config: Path) -> list[str]:
    return [sys.executable, "-m", "clients.cli", "serve", "--config", str(config)]


def spawn_broker(directory: Path, broker_id: int) -> tuple[subprocess.Popen[bytes], Path, int]:
    """Start broker `broker_id` from `broker-<id>/server.properties`: the process, its log and
    where in the log this run's lines begin (for `wait_for`)."""
    bdir = directory / f"broker-{broker_id}"
    log_path = directory / "logs" / f"broker-{broker_id}.log"
    offset = log_size(log_path)
    return spawn(serve_command(bdir / "server.properties"), log_path, bdir), log_path, offset


def start_broker(directory: Path, broker_id: int, timeout_s: float) -> int:
    """Start one broker and wait (bounded) until it serves; its pid, recorded in cluster.json."""
    proc, log_path, offset = spawn_broker(directory, broker_id)
    try:
        wait_for(f"broker {broker_id}", log_path, BROKER_READY, proc, timeout_s, after=offset)
    except BaseException:
        stop(proc.pid, 10.0)
        raise
    port, _ = broker_config(directory / f"broker-{broker_id}" / "server.properties")
    record_broker(directory, broker_id, proc.pid, port)
    return proc.pid


def record_broker(directory: Path, broker_id: int, pid: int, port: int | None) -> None:
    """Keep cluster.json's list (what `up` started) in step with a broker started since."""
    state = read_state(directory)
    if state is None:
        return
    entry = {"id": broker_id, "pid": pid, "port": port, "log": str(directory / "logs" / f"broker-{broker_id}.log")}
    state["brokers"] = sorted([b for b in state["brokers"] if b["id"] != broker_id] + [entry], key=lambda b: b["id"])
    state["bootstrap"] = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])
    write_state(directory, state)

