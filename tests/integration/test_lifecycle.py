"""The `odradek serve` lifecycle (issue #12, §3): a start that cannot succeed says why in one
line, exits 1 and leaves the log dirs as they were; a second signal forces a shutdown; a full
disk under an append halts the broker, as Kafka halts when its last log dir fails (issue #20
§1b), in one line and keeping what it acknowledged.

The read-only-dir case runs the broker in its own mount namespace (`unshare -m`, plus a user
namespace `-r` when not root) over a tmpfs mounted on its log dir: the mount dies with the
process. The full-disk cases mount a small tmpfs themselves (root), unmounted at the end: the
restart after the halt must find the files."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.framing import encode_request_frame
from protocol.messages import (
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.messages import fetch_request as fr
from protocol.messages import metadata_request as mr
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch, decode_records, iter_batches
from tests.broker_process import REPO, BrokerProcess, free_port
from tests.full_disk import UNSHARE, fill, mounted_tmpfs
from tests.raw_client import RawConnection

SERVE = [sys.executable, "-m", "clients.cli", "serve"]
# root needs no user namespace for a private mount one (and some hosts forbid unprivileged ones)


def serve(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`odradek serve ARGS` expected to exit on its own (a refused start)."""
    return subprocess.run([*SERVE, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def assert_refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 1, no traceback, and exactly one error line, which names the problem."""
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines()
              if line.startswith("Error:") or "level='critical'" in line or "level='error'" in line]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def dir_state(d: Path) -> dict[str, bytes]:
    """Every file under d with its bytes (the clean-shutdown marker included)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def stopped_dir(tmp_path: Path) -> Path:
    """A log dir left by a clean stop of broker 0, with one topic."""
    b = BrokerProcess(tmp_path / "data", overrides=["num.partitions=1", "offsets.topic.num.partitions=1"]).start()
    try:
        with RawConnection(b.port) as c:
            c.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True))
    finally:
        assert b.stop() == 0
    assert (b.log_dir / ".kafka_cleanshutdown").exists()
    return b.log_dir


class NamespacedBroker(BrokerProcess):
    """A broker whose log dir is a fresh tmpfs of `size` (or read-only with `read_only`), in a
    private mount namespace. `unshare` and `sh` exec (no fork), so signals reach the broker
    itself; the mount disappears with the process."""

    def __init__(self, log_dir: Path, size: str = "4m", read_only: bool = False, **kw: object) -> None:
        super().__init__(log_dir, **kw)  # type: ignore[arg-type]
        self.options = f"size={size}" + (",ro" if read_only else "")

    def command(self) -> list[str]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        cmd = [*UNSHARE, "sh", "-c", f'mount -t tmpfs -o {self.options} tmpfs "$0" && exec "$@"',
               str(self.log_dir), *SERVE, "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}",
               "--log-dirs", str(self.log_dir)]
        for o in self.overrides:
            cmd += ["--override", o]
        return cmd

    def start(self, timeout: float = 30.0) -> NamespacedBroker:
        self._spawn(self.command(), "event='broker started'", timeout, cwd=REPO,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return self

    def inside(self, name: str) -> Path:
        """`name` under the log dir as the broker sees it (its tmpfs), reached from outside its
        mount namespace through /proc/PID/root."""
        assert self.proc is not None and self.proc.poll() is None
        return Path(f"/proc/{self.proc.pid}/root") / self.log_dir.relative_to("/") / name


@pytest.fixture(scope="module")
def can_unshare() -> None:
    """The namespaced tests need `unshare` and tmpfs mounts; missing, they fail loudly."""
    assert shutil.which("unshare"), "unshare (util-linux) is required by the full-disk tests"
    probe = subprocess.run([*UNSHARE, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True, timeout=30)
    assert probe.returncode == 0, f"user+mount namespaces are required by the full-disk tests: {probe.stderr}"


# -- (a) refused starts ---------------------------------------------------------------------------


def test_busy_port_one_line_exit_1_and_log_dir_untouched(stopped_dir: Path) -> None:
    before = dir_state(stopped_dir)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = serve("--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", str(stopped_dir))
    assert_refused(proc, str(port), "bind")
    assert dir_state(stopped_dir) == before  # the clean-shutdown marker included
    b = BrokerProcess(stopped_dir).start()
    try:
        assert "(clean shutdown)" in b.log_text() and "UNCLEAN" not in b.log_text()
    finally:
        assert b.stop() == 0


def test_locked_log_dir_one_line_exit_1(stopped_dir: Path) -> None:
    b = BrokerProcess(stopped_dir).start()
    try:
        proc = serve("--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}", "--log-dirs", str(stopped_dir))
        assert_refused(proc, str(stopped_dir), "lock")
        with RawConnection(b.port) as c:  # the running broker is unharmed
            assert c.call(3, 12, MetadataRequest(topics=None)).topics
    finally:
        assert b.stop() == 0
    again = BrokerProcess(stopped_dir).start()  # the refused start did not spoil the next one
    try:
        assert "UNCLEAN" not in again.log_text()
    finally:
        assert again.stop() == 0


def test_node_id_mismatch_one_line_exit_1_and_log_dir_untouched(stopped_dir: Path) -> None:
    before = dir_state(stopped_dir)
    proc = serve("--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}", "--log-dirs", str(stopped_dir),
                 "--broker-id", "5")
    assert_refused(proc, "meta.properties", "5")
    assert dir_state(stopped_dir) == before


def test_log_dir_under_a_regular_file_one_line_exit_1(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a dir")
    proc = serve("--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}", "--log-dirs", str(tmp_path / "file" / "data"))
    assert_refused(proc, str(tmp_path / "file" / "data"))


def test_read_only_log_dir_one_line_exit_1(tmp_path: Path, can_unshare: None) -> None:
    b = NamespacedBroker(tmp_path / "data", read_only=True)
    proc = subprocess.run(b.command(), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert_refused(proc, str(b.log_dir), "Read-only")


def test_second_log_dir_locked_writes_nothing_to_the_first(tmp_path: Path) -> None:
    """Every dir is locked and checked before anything is written to any of them."""
    locked = BrokerProcess(tmp_path / "locked").start()
    try:
        fresh = tmp_path / "fresh"
        proc = serve("--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}",
                     "--log-dirs", f"{fresh},{locked.log_dir}")
        assert_refused(proc, "lock")
        assert not (fresh / "meta.properties").exists()
        assert sorted(p.name for p in fresh.iterdir()) in ([], [".lock"])
    finally:
        assert locked.stop() == 0


@pytest.mark.parametrize("args, needles", [
    (["--log-level", "LOUD"], ["LOUD", "log level"]),
    (["--listeners", "PLAINTEXT://127.0.0.1:99999"], ["99999"]),
    # an SSL listener needs a keystore: the message names the key to set
    (["--listeners", "SSL://127.0.0.1:9093"], ["Missing required configuration ssl.keystore.location", "SSL"]),
    # Kafka's default sasl.enabled.mechanisms is GSSAPI, which is not built
    (["--listeners", "SASL_PLAINTEXT://127.0.0.1:9093"], ["SASL_PLAINTEXT", "GSSAPI", "sasl.enabled.mechanisms"]),
    (["--override", "process.roles=broker,controller"], ["process.roles", "ZooKeeper mode"]),
    (["--override", "controller.quorum.voters=1@localhost:9093"], ["controller.quorum.voters", "ZooKeeper mode"]),
    (["--override", "node.id=1", "--broker-id", "2"], ["node.id", "broker.id"]),
    (["--override", "zookeeper.connect=localhost:2181"], ["zookeeper.connect"]),
], ids=["log-level", "port-99999", "ssl", "sasl", "process.roles", "quorum.voters", "node.id-mismatch", "zookeeper"])
def test_bad_settings_refused_before_the_log_dir_exists(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    d = tmp_path / "data"
    proc = serve("--log-dirs", str(d), *(args if "--listeners" in args else
                                          ["--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}", *args]))
    assert_refused(proc, *needles)
    assert not d.exists()


@pytest.mark.parametrize("content", [b"", b"# nothing set\n", bytes(range(256)) * 8])
def test_empty_or_binary_config_file_refused(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "server.properties"
    f.write_bytes(content)
    proc = serve("--config", str(f), "--log-dirs", str(tmp_path / "data"))
    assert_refused(proc, str(f))
    assert not (tmp_path / "data").exists()


def test_new_empty_log_dir_is_not_an_unclean_shutdown(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        assert "UNCLEAN" not in b.log_text()
        assert "new log dir" in b.log_text()
    finally:
        assert b.stop() == 0


def test_node_id_is_accepted_as_broker_id(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=["node.id=3"]).start()
    try:
        line = b.wait_for_line("event='broker started'", timeout=5)
        assert "broker_id=3" in line
        assert "node.id" not in "".join(x for x in b.lines if "Unknown configuration" in x)
    finally:
        assert b.stop() == 0
    assert "broker.id=3" in (b.log_dir / "meta.properties").read_text()  # v0 (ZooKeeper mode) names it so


# -- (b) shutdown -----------------------------------------------------------------------------------


def produce(c: RawConnection, topic: str, partitions: list[int], value: bytes) -> dict[int, int]:
    batch = build_batch([Record(0, 0, 0, b"k", value, [])], base_timestamp=1)
    r = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pr.TopicProduceData(
        name=topic, partition_data=[pr.PartitionProduceData(index=p, records=batch) for p in partitions])]))
    return {p.index: p.error_code for t in r.responses for p in t.partition_responses}


def fetch_partition(c: RawConnection, topic: str, partition: int, offset: int) -> list[bytes]:
    r = c.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 22, session_epoch=-1,
        topics=[fr.FetchTopic(topic=topic, partitions=[
            fr.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 22)])]))
    p = r.responses[0].partitions[0]
    assert p.error_code == 0, p
    data = bytes(p.records or b"")
    return [rec.value for pos, size in iter_batches(data) for rec in decode_records(data[pos:pos + size])[1]]


def read_back(port: int, topic: str, partition: int, count: int) -> list[bytes]:
    got: list[bytes] = []
    with RawConnection(port) as c:
        for _ in range(count + 1):  # bounded: every fetch returns at least one record until the end
            more = fetch_partition(c, topic, partition, len(got))
            got += more
            if not more:
                break
    return got


@pytest.mark.parametrize("index_interval", ["4096", "0"], ids=["log-write", "index-entry-every-append"])
def test_full_disk_halts_the_broker_with_one_line_and_keeps_what_it_acknowledged(
    tmp_path: Path, index_interval: str,
) -> None:
    """Kafka's rule for a broker whose only log dir fails (LogManager.handleLogDirFailure): the
    first I/O error -- the full disk under an append, whether the batch's write or (every
    append adding index entries) an index page's -- takes the dir offline and, no log dir left,
    the broker halts: exit 1 (never SIGBUS), one error line naming the dir and what failed, one
    line saying why it stops, no traceback, no retry loop. After a restart on the freed disk
    every record it acknowledged reads back, in order, and nothing else. (Before issue #20 §1b
    a single node answered KAFKA_STORAGE_ERROR and lived on.) The tmpfs is mounted by the test
    (root): the restart must find the files."""
    with mounted_tmpfs(tmp_path / "data", "4m") as d:
        overrides = ["num.partitions=2", "offsets.topic.num.partitions=1", f"log.index.interval.bytes={index_interval}"]
        b = BrokerProcess(d, overrides=overrides).start()
        acked: dict[int, list[bytes]] = {0: [], 1: []}
        try:
            with RawConnection(b.port) as c:
                c.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True))
                for i in range(5):
                    value = b"before-%d" % i
                    assert produce(c, "t", [0, 1], value) == {0: 0, 1: 0}
                    acked[0].append(value)
                    acked[1].append(value)
                fill(d / "filler")
                refused = False
                for i in range(100):  # the first append that needs a new page fails
                    value = b"full-%d-" % i + b"x" * 3000
                    try:
                        codes = produce(c, "t", [0, 1], value)
                    except (ConnectionError, EOFError, OSError):  # halted before it answered
                        refused = True
                        break
                    for p, code in codes.items():
                        if code == 0:
                            acked[p].append(value)
                        else:
                            assert code == ErrorCode.KAFKA_STORAGE_ERROR, codes
                            refused = True
                    if refused:
                        break
                assert refused, "the full disk never refused an append"
            assert b.proc is not None
            assert b.proc.wait(timeout=20) == 1, b.log_text()[-3000:]
            b.wait_for_line("Shutdown broker because all log dirs in", timeout=5)
            loud = [line for line in b.lines if "level='error'" in line or "level='critical'" in line]
            assert len(loud) == 2, "\n".join(loud)
            assert f"Log directory {d} is offline" in loud[0] and "No space left on device" in loud[0], loud[0]
            assert f"Shutdown broker because all log dirs in {d} have failed" in loud[1], loud[1]
            assert "Traceback" not in b.log_text(), b.log_text()[-3000:]
        finally:
            b.kill()
        (d / "filler").unlink()
        again = BrokerProcess(d, overrides=overrides).start()
        try:
            assert "UNCLEAN" in again.log_text()
            for p in (0, 1):
                assert read_back(again.port, "t", p, len(acked[p]) + 5) == acked[p]
        finally:
            assert again.stop() == 0, again.log_text()[-3000:]


def park_a_fetch(b: BrokerProcess) -> socket.socket:
    """A connection whose long-poll fetch holds a graceful shutdown in its drain phase."""
    with RawConnection(b.port) as c:
        c.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="idle")], allow_auto_topic_creation=True))
    s = socket.create_connection(("127.0.0.1", b.port), timeout=30)
    s.sendall(encode_request_frame(1, 12, 1, "parked", FetchRequest(
        replica_id=-1, max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
        topics=[fr.FetchTopic(topic="idle", partitions=[
            fr.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])))
    return s


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_second_signal_forces_exit(tmp_path: Path, sig: signal.Signals) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    s = park_a_fetch(b)
    try:
        assert b.proc is not None
        mark = len(b.lines)
        b.proc.send_signal(sig)
        b.wait_for_line("shutting down", timeout=10, after=mark)
        t0 = time.monotonic()
        b.proc.send_signal(sig)
        rc = b.proc.wait(timeout=8)  # the drain alone would take 10 s
        assert time.monotonic() - t0 < 5
        assert rc == -sig
        assert "shut down cleanly" not in b.log_text()
    finally:
        s.close()
        b.kill()


def test_shutdown_closes_connections_and_awaits_listeners_closed(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
            assert b.proc is not None
            b.proc.send_signal(signal.SIGTERM)
            assert s.recv(1) == b""  # closed by the broker before it exits
            assert b.proc.wait(timeout=30) == 0
        events = [m.group(1) for line in b.lines if (m := re.search(r"event='([^']*)'", line))]
        assert events.index("listeners closed") < events.index("shut down cleanly")
    finally:
        b.kill()
