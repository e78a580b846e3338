"""A 3-broker ZooKeeper-mode cluster whose brokers each run in their own network namespace, so a
fault test can cut one broker off from the other brokers, from ZooKeeper, or from the clients,
separately (issue #15's fault tests).

Topology (one private /24 per cluster, 10.77.<n>.0/24 with n from the pid and the number of clusters the
process opened before, so two test runs on one machine, or two tests of one run, do not collide):

    root namespace: bridge odbr<n>, 10.77.<n>.1 (the clients' source address: the test's
                    producers/consumers) and 10.77.<n>.2 (ZooKeeper listens only there)
    odradek<n>b<i>: veth od<n>b<i>n = 10.77.<n>.1<i>, the other end od<n>b<i>h on the bridge;
                    broker i listens on 10.77.<n>.1<i>:9092 and advertises it

Cuts are nftables rules in the broker's namespace (table `inet fault`, an input and an output
chain), matching addresses and ports: peers by the other brokers' addresses, ZooKeeper by its
address and port, clients by the clients' address and the broker's port. Dropped, not rejected:
a partitioned peer sees silence, as on a real network. `heal()` flushes the table.

Everything is created by `NetnsCluster.open()` and removed by `close()` (namespaces, veths, the
bridge), also when the test failed. The bridge's creation is the claim on a subnet: when its name
exists (another run, or a killed one's leftover), the next n is tried. Needs root and nftables (scripts/install-system-deps installs it); `available()`
says why not when it cannot work, so the tests skip with that reason instead of failing.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clients.zookeeper_server import four_letter_word
from protocol.messages import MetadataRequest
from tests.broker_process import BrokerProcess
from tests.cluster.control_requests import metadata_view
from tests.raw_client import RawConnection
from tests.zookeeper import ZooKeeperServer

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

IDS = (1, 2, 3)
_CLUSTERS = itertools.count()  # clusters opened by this process so far
BROKER_PORT = 9092
CHROOT = "/odradek"


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return proc


def available() -> str | None:
    """None when namespaces, veths and nftables work here; otherwise why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (scripts/install-system-deps installs it)"
    ns = f"odradek-probe-{os.getpid()}"
    try:
        _run("ip", "netns", "add", ns)
        _run("ip", "netns", "exec", ns, "nft", "add", "table", "inet", "probe")
    except RuntimeError as e:
        return f"no network namespace with nftables here: {e}"
    finally:
        _run("ip", "netns", "del", ns, check=False)
    return None


class HostConnection(RawConnection):
    """RawConnection to a broker's namespace address rather than loopback."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = "fault-test"
        self.corr = 0


class NetZooKeeper(ZooKeeperServer):
    """ZooKeeper listening on the bridge's ZooKeeper address instead of loopback."""

    def __init__(self, work_dir: Path, host: str, **kw: Any) -> None:
        super().__init__(work_dir, **kw)
        self.host = host

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        cfg = super()._write_config()
        cfg.write_text(cfg.read_text().replace("clientPortAddress=127.0.0.1", f"clientPortAddress={self.host}"))
        return cfg

    def start(self, timeout: float = 30.0) -> NetZooKeeper:
        from clients.zookeeper_server import READY_MARKER
        self._spawn(self.command(self._write_config()), READY_MARKER, timeout, cwd=self.work_dir)
        if "Mode: standalone" not in four_letter_word(self.host, self.port, "srvr"):
            self.kill()
            raise RuntimeError(f"ZooKeeper on {self.address} does not answer `srvr`")
        return self


class NetnsCluster:
    """ZooKeeper in the root namespace, brokers 1-3 each in its own namespace (see the module)."""

    def __init__(self, root: Path, overrides: tuple[str, ...] = (), session_ms: int = 3000) -> None:
        self.root = root
        self.overrides = overrides
        self.session_ms = session_ms
        # a new subnet for each cluster of a process: a client an earlier test left behind (a
        # librdkafka handle not yet destroyed) must not reach, or auto-create topics on, this one
        self._name(20 + (os.getpid() + 7 * next(_CLUSTERS)) % 200)
        self.brokers: dict[int, BrokerProcess] = {}
        self.cuts: dict[int, set[str]] = {i: set() for i in IDS}
        self._owns_network = False

    # -- names ------------------------------------------------------------------------------
    def _name(self, n: int) -> None:
        self.n = n
        self.bridge = f"odbr{n}"
        self.client_ip = f"10.77.{n}.1"
        self.zk_ip = f"10.77.{n}.2"
        self.zookeeper = NetZooKeeper(self.root / "zookeeper", self.zk_ip, tick_time_ms=200, min_session_timeout_ms=400)

    def ns(self, i: int) -> str:
        return f"odradek{self.n}b{i}"

    def ip(self, i: int) -> str:
        return f"10.77.{self.n}.1{i}"

    def bootstrap(self, among: tuple[int, ...] = IDS) -> list[str]:
        return [f"{self.ip(i)}:{BROKER_PORT}" for i in among]

    # -- setup / teardown ------------------------------------------------------------------
    def _remove_network(self) -> None:
        for i in IDS:
            _run("ip", "netns", "del", self.ns(i), check=False)
            _run("ip", "link", "del", f"od{self.n}b{i}h", check=False)
        _run("ip", "link", "del", self.bridge, check=False)

    def _create_network(self) -> None:
        # the bridge is the lock on a subnet: `ip link add` fails if another run holds that name
        for k in range(200):
            self._name((self.n - 20 + k) % 200 + 20)
            if _run("ip", "link", "add", self.bridge, "type", "bridge", check=False).returncode == 0:
                break
        else:
            raise RuntimeError("no free 10.77.<n>.0/24 subnet: bridges odbr20-odbr219 all exist")
        self._owns_network = True
        for i in IDS:  # a killed earlier run's leftovers with these names
            _run("ip", "netns", "del", self.ns(i), check=False)
            _run("ip", "link", "del", f"od{self.n}b{i}h", check=False)
        _run("ip", "addr", "add", f"{self.client_ip}/24", "dev", self.bridge)
        _run("ip", "addr", "add", f"{self.zk_ip}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i in IDS:
            ns, host, inner = self.ns(i), f"od{self.n}b{i}h", f"od{self.n}b{i}n"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
            _run("ip", "link", "set", inner, "netns", ns)
            _run("ip", "link", "set", host, "master", self.bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.ip(i)}/24", "dev", inner)
            _run("ip", "-n", ns, "link", "set", inner, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            self._nft(i, "add table inet fault")
            self._nft(i, "add chain inet fault input { type filter hook input priority 0 ; }")
            self._nft(i, "add chain inet fault output { type filter hook output priority 0 ; }")

    def _nft(self, i: int, rule: str) -> None:
        _run("ip", "netns", "exec", self.ns(i), "nft", rule)

    def broker(self, i: int) -> BrokerProcess:
        return BrokerProcess(
            self.root / f"broker-{i}", port=BROKER_PORT, host=self.ip(i), prefix=["ip", "netns", "exec", self.ns(i)],
            zookeeper_connect=self.zookeeper.connect_string(CHROOT), broker_id=i,
            overrides=[f"zookeeper.session.timeout.ms={self.session_ms}", "offsets.topic.replication.factor=3",
                       "controlled.shutdown.retry.backoff.ms=500", *self.overrides])

    async def open(self) -> None:
        await asyncio.to_thread(self._create_network)
        await asyncio.to_thread(self.zookeeper.start)
        for i in IDS:
            self.brokers[i] = self.broker(i)
            await asyncio.to_thread(self.brokers[i].start)

    async def close(self) -> None:
        for b in self.brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                b.proc.send_signal(signal.SIGCONT)
            await asyncio.to_thread(b.kill)
        await asyncio.to_thread(self.zookeeper.kill)
        if self._owns_network:
            await asyncio.to_thread(self._remove_network)

    # -- faults -----------------------------------------------------------------------------
    def cut(self, i: int, *, peers: bool = False, zookeeper: bool = False, clients: bool = False) -> None:
        """Drop broker i's packets to and from the other brokers / ZooKeeper / the clients."""
        rules: list[tuple[str, str]] = []
        if peers:
            for j in IDS:
                if j != i:
                    rules += [("input", f"ip saddr {self.ip(j)} drop"), ("output", f"ip daddr {self.ip(j)} drop")]
        if zookeeper:
            port = self.zookeeper.port
            rules += [("input", f"ip saddr {self.zk_ip} tcp sport {port} drop"),
                      ("output", f"ip daddr {self.zk_ip} tcp dport {port} drop")]
        if clients:
            rules += [("input", f"ip saddr {self.client_ip} tcp dport {BROKER_PORT} drop"),
                      ("output", f"ip daddr {self.client_ip} tcp sport {BROKER_PORT} drop")]
        for chain, rule in rules:
            self._nft(i, f"add rule inet fault {chain} {rule}")
        self.cuts[i] |= {k for k, on in (("peers", peers), ("zookeeper", zookeeper), ("clients", clients)) if on}

    def heal(self, i: int | None = None) -> None:
        for j in (IDS if i is None else (i,)):
            if self.cuts[j]:
                self._nft(j, "flush table inet fault")
                self.cuts[j] = set()

    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None]

    # -- views ------------------------------------------------------------------------------
    def metadata(self, i: int) -> dict[str, Any]:
        with HostConnection(self.ip(i), BROKER_PORT) as conn:
            return metadata_view(conn.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)))

    async def until_all_agree(self, check: Callable[[dict[str, Any]], bool], what: str, *,
                              among: list[int] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        """Poll Metadata from each broker in `among` (default: every live one) until all answer the
        same view and `check` holds for it."""
        deadline = time.monotonic() + timeout
        views: list[Any] = []
        while time.monotonic() < deadline:
            try:
                views = await asyncio.to_thread(lambda: [self.metadata(i) for i in (among or self.live())])
            except OSError as e:
                views = [repr(e)]
            else:
                if all(v == views[0] for v in views) and check(views[0]):
                    return views[0]
            await asyncio.sleep(0.1)
        raise AssertionError(f"{what}: brokers did not agree within {timeout}s: {views}")

    def create_topic(self, topic: str, assignment: dict[int, list[int]], configs: dict[str, str]) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap(), request_timeout_ms=20_000)
        try:
            result = admin.create_topics([NewTopic(topic, -1, -1, replica_assignments=assignment,
                                                   topic_configs=configs)])
            assert [t["error_code"] for t in result["topics"]] == [0], result
        finally:
            admin.close()
