"""The `odradek serve` lifecycle (issue #12, §3): a start that cannot succeed says why in one
line, exits 1 and leaves the log dirs as they were; a shutdown does what it can, even on a full
disk, and a second signal forces it.

Full-disk and read-only-dir cases run the broker in its own mount namespace (`unshare -m`, plus
a user namespace `-r` when not root) over a small tmpfs mounted on its log dir: the mount dies
with the process, so nothing is left mounted whatever happens to the test."""

from __future__ import annotations

import errno
import json
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
    CreateTopicsRequest,
    DeleteRecordsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.messages import create_topics_request as ct
from protocol.messages import delete_records_request as drr
from protocol.messages import fetch_request as fr
from protocol.messages import metadata_request as mr
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch, decode_records, iter_batches
from tests.broker_process import REPO, BrokerProcess, free_port
from tests.raw_client import RawConnection

SERVE = [sys.executable, "-m", "clients.cli", "serve"]
# root needs no user namespace for a private mount one (and some hosts forbid unprivileged ones)
UNSHARE = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]


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
    (["--listeners", "SSL://127.0.0.1:9093"], ["SSL", "PLAINTEXT"]),
    (["--listeners", "SASL_PLAINTEXT://127.0.0.1:9093"], ["SASL_PLAINTEXT"]),
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


def test_full_disk_storage_error_warned_once_per_partition_and_sigterm_exits_0(
    tmp_path: Path, can_unshare: None,
) -> None:
    b = NamespacedBroker(tmp_path / "data", size="3m",
                         overrides=["num.partitions=2", "offsets.topic.num.partitions=1"]).start()
    try:
        with RawConnection(b.port) as c:
            c.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True))
            full_at = None
            for i in range(200):  # 3 MiB / (2 x 60 KB) is well under 200 rounds
                codes = produce(c, "t", [0, 1], os.urandom(60_000))
                if codes == {0: ErrorCode.KAFKA_STORAGE_ERROR, 1: ErrorCode.KAFKA_STORAGE_ERROR}:
                    full_at = i
                    break
                assert set(codes.values()) <= {0, ErrorCode.KAFKA_STORAGE_ERROR}, codes
            assert full_at is not None, "the 3 MiB tmpfs never filled up"
            for p in (0, 1):  # the warnings may reach the log reader thread after the answer
                b.wait_for_line(f"partition={p} error=", timeout=10)
            mark = len(b.lines)
            for _ in range(20):  # many more failing requests: still one warning per partition
                assert produce(c, "t", [0, 1], os.urandom(60_000)) == {
                    0: ErrorCode.KAFKA_STORAGE_ERROR, 1: ErrorCode.KAFKA_STORAGE_ERROR}
            # nothing more is warned or logged as an error per request
            repeated = [line for line in b.lines[mark:] if "level='warning'" in line or "level='error'" in line]
            assert repeated == [], repeated
        warnings = [line for line in b.lines if "level='warning'" in line and "storage error" in line]
        assert sorted("partition=0" in w for w in warnings) == [False, True], warnings
        assert all("topic='t'" in w for w in warnings), warnings
        t0 = time.monotonic()
        assert b.stop() == 0, b.log_text()[-3000:]
        assert time.monotonic() - t0 < 15
        assert "Traceback" not in b.log_text(), b.log_text()[-3000:]
        assert "shut down" in b.lines[-1], b.lines[-5:]
    finally:
        b.kill()


def fill(path: Path) -> None:
    """Write zeros to `path` until the file system has no block left."""
    with open(path, "ab", buffering=0) as f:
        for chunk in (1 << 16, 4096, 1):
            try:
                while True:
                    f.write(bytes(chunk))
            except OSError as e:
                assert e.errno == errno.ENOSPC, e


def produce_one(c: RawConnection, value: bytes, timestamp: int, topic: str = "t") -> tuple[int, int]:
    """One single-record batch to partition 0 with acks=1: (error code, base offset)."""
    batch = build_batch([Record(0, 0, 0, None, value, [])], base_timestamp=timestamp)
    r = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pr.TopicProduceData(
        name=topic, partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def fetch_values(c: RawConnection, offset: int, topic: str = "t") -> list[bytes]:
    r = c.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
        topics=[fr.FetchTopic(topic=topic, partitions=[
            fr.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]))
    p = r.responses[0].partitions[0]
    assert p.error_code == 0, p
    data = bytes(p.records or b"")
    return [rec.value for pos, size in iter_batches(data) for rec in decode_records(data[pos:pos + size])[1]]


APPENDS = 2500  # more than one reserved chunk of each index (2,048 offset / 1,365 time entries)


def test_full_disk_index_pages_answer_storage_error_not_sigbus(tmp_path: Path, can_unshare: None) -> None:
    """The indexes are sparse, memory-mapped files: writing an entry into a page the full
    tmpfs has no block for used to kill the broker with SIGBUS (exit -7) at the first index
    entry after the disk filled. Here every append adds an entry to both indexes
    (index.interval.bytes=0, rising timestamps) on a disk kept full: after each failed append
    one page is freed, so every page an index or the .log needs is won by a failure first.
    Every failure answers KAFKA_STORAGE_ERROR on the same connection, the broker lives on, and
    once the space is freed all acknowledged records -- and nothing else -- read back in order."""
    b = NamespacedBroker(tmp_path / "data", size="4m", overrides=[
        "num.partitions=1", "log.index.interval.bytes=0"]).start()
    try:
        with RawConnection(b.port) as c:
            c.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True))
            filler = b.inside("filler")
            fill(filler)
            acked: list[bytes] = []
            failed = 0
            for i in range(APPENDS):
                value = b"v%d" % i
                err, base = produce_one(c, value, 1000 + i)
                if err == 0:
                    assert base == len(acked)
                    acked.append(value)
                    continue
                assert err == ErrorCode.KAFKA_STORAGE_ERROR, (i, err)
                failed += 1
                os.truncate(filler, max(0, filler.stat().st_size - 4096))  # one page back
            assert b.proc is not None and b.proc.poll() is None
            assert failed > 0 and len(acked) > 2048, (failed, len(acked))
            filler.unlink()
            for i in range(3):  # space again: appends succeed
                value = b"after%d" % i
                assert produce_one(c, value, 10_000 + i) == (0, len(acked))
                acked.append(value)
            got: list[bytes] = []
            for _ in range(len(acked)):  # bounded: every fetch returns at least one record
                more = fetch_values(c, len(got))
                got += more
                if not more or len(got) >= len(acked):
                    break
            assert got == acked
        assert "Traceback" not in b.log_text(), b.log_text()[-3000:]
        assert b.stop() == 0, b.log_text()[-3000:]
    finally:
        b.kill()


def fetch_all(c: RawConnection, topic: str, start: int, count: int) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(count):  # bounded: every fetch returns at least one record
        more = fetch_values(c, start + len(got), topic)
        got += more
        if not more or len(got) >= count:
            break
    return got


def delete_records(c: RawConnection, topic: str, offset: int) -> tuple[int, int]:
    r = c.call(21, 2, DeleteRecordsRequest(timeout_ms=5000, topics=[drr.DeleteRecordsTopic(
        name=topic, partitions=[drr.DeleteRecordsPartition(partition_index=0, offset=offset)])]))
    p = r.topics[0].partitions[0]
    return p.error_code, p.low_watermark


def create_topic(c: RawConnection, name: str, **configs: str) -> int:
    r = c.call(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[ct.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])]))
    return r.topics[0].error_code


def test_full_disk_roll_checkpoints_and_new_logs_answer_storage_error(tmp_path: Path, can_unshare: None) -> None:
    """On a full disk the writes after or around an append -- the roll's last time-index entry
    and producer snapshot, DeleteRecords' leader-epoch checkpoint, the metadata file and
    partition.metadata of a new topic -- used to raise out of the handler and close the
    connection. Each is now answered KAFKA_STORAGE_ERROR for its partition or topic on the same
    connection; a produce to a partition whose log could not be created answers it too. Once
    space is freed every retry succeeds, the acknowledged records read back exactly once (no
    failed append left anything behind) and the new topic's partition opens and takes appends."""
    b = NamespacedBroker(tmp_path / "data", size="4m", overrides=["num.partitions=1"]).start()
    try:
        with RawConnection(b.port) as c:
            assert create_topic(c, "t", **{"segment.bytes": "2048"}) == 0
            acked: list[bytes] = []
            for i in range(4):
                value = b"v%d" % i + b"x" * 300
                assert produce_one(c, value, 1000 + i) == (0, len(acked))
                acked.append(value)
            filler = b.inside("filler")
            fill(filler)
            failed_produce = None
            for i in range(10):  # a 2 KiB segment: a roll is due within 7 more batches
                value = b"w%d" % i + b"x" * 300
                err, base = produce_one(c, value, 2000 + i)
                if err:
                    failed_produce = value
                    break
                assert base == len(acked)
                acked.append(value)
            assert failed_produce is not None, "the disk never refused an append"
            assert err == ErrorCode.KAFKA_STORAGE_ERROR
            assert delete_records(c, "t", 2) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
            assert create_topic(c, "u") == ErrorCode.KAFKA_STORAGE_ERROR
            r = c.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="v")], allow_auto_topic_creation=True))
            assert [(t.name, t.error_code) for t in r.topics] == [("v", ErrorCode.KAFKA_STORAGE_ERROR)]
            assert produce_one(c, b"u0", 3000, "u")[0] == ErrorCode.KAFKA_STORAGE_ERROR

            filler.unlink()
            # `u` and `v` exist, not yet written down: the next request that waits for the
            # metadata writes it again
            assert create_topic(c, "u") == ErrorCode.TOPIC_ALREADY_EXISTS
            saved = json.loads(b.inside("__odradek_metadata.json").read_text())
            assert sorted(t["name"] for t in saved["topics"]) == ["t", "u", "v"]
            assert produce_one(c, failed_produce, 2100) == (0, len(acked))  # the same batch, retried
            acked.append(failed_produce)
            assert delete_records(c, "t", 2) == (0, 2)
            assert fetch_all(c, "t", 2, len(acked) - 2) == acked[2:]
            for _ in range(50):  # the partition of `u` opens again in the background
                err, base = produce_one(c, b"u0", 3000, "u")
                if err != ErrorCode.KAFKA_STORAGE_ERROR:
                    break
                b.wait_for_line("log opened after a storage error", timeout=10)
            assert (err, base) == (0, 0)
            assert fetch_all(c, "u", 0, 1) == [b"u0"]
        assert "Traceback" not in b.log_text(), b.log_text()[-3000:]
        assert not [line for line in b.lines if "request handler failed" in line]
        assert b.stop() == 0, b.log_text()[-3000:]
    finally:
        b.kill()


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
