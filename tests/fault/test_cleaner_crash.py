"""Crash trials of the log cleaner (issue #13): kill -9 while it cleans, then check the log.

Each test is a chain of trials on one data dir, through a real `odradek serve` subprocess and raw
Kafka requests over TCP. A producer thread keeps writing batches of keyed puts and tombstones
(random codec, acks=all, one request at a time, paced) to a compacted topic with small segments,
a low min.cleanable.dirty.ratio and a short delete.retention.ms, so the cleaner runs back to back
(a cleaning every ~0.1-0.3 s, each rewriting several groups) and tombstones get removed. Every
record carries a sequence number in a header; the model is the last acknowledged sequence of
each key. A trial:

1. waits for a cleaning to be under way, then for a random moment:
   "in-group" / "kill-worker": 0-20 ms after a ``Swapped in cleaned segment`` line (the worker is
   writing the next group, or the broker swapping it); "near-start": 0-80 ms after a ``cleaned
   log`` line (the next cleaning builds its offset map or writes its first group); "mid-swap":
   0-300 ms after a ``Swapped in`` line of a broker whose swap renames each pause 30 ms (see
   SLOW_SWAP_SITECUSTOMIZE), so that the kill mostly lands between two renames of a swap;
2. "kill": freezes the cleaner's worker process (SIGSTOP), kill -9s the broker, notes what the
   crash left (``.cleaned`` / ``.swap`` / ``.deleted`` files, cleaner-offset-checkpoint), lets the
   worker go on (SIGCONT) and checks that it exits by itself (its parent is gone) within 10 s and
   leaves no partly written segment: a ``.log.cleaned`` left must be whole valid batches with its
   index (a group it had finished), index files without it only where the broker was renaming
   them to ``.swap``. "kill-worker": kill -9s only the worker: the broker must log it, remove the
   ``.cleaned`` files and keep acknowledging produce requests; then it is stopped (SIGTERM) or
   kill -9'd (one or the other at random);
3. starts the broker again: no ``.cleaned`` or ``.swap`` file from before the start may be left
   once it serves, and the partition read from offset 0 to the high watermark must be valid:
   offsets and sequence numbers strictly increasing, every record what was produced with its
   sequence number, the last record of every key its latest acknowledged write (a key whose latest
   write is a tombstone: that tombstone or nothing). The batch in flight at the kill counts if
   any of its records is there (batches are all or nothing);
4. produces again until a cleaning of the partition completes after the restart, and checks that
   it started where the cleaner-offset-checkpoint of the crash said.

A last clean stop and start reads everything back once more. `make test` runs one chain of 3
trials (in-group, mid-swap, kill-worker); ODRADEK_FAULT_FULL=1 (`make fault`) runs 4 chains of 7
(28 trials) and writes the table of what each kill hit to $ODRADEK_CLEANER_CRASH_TABLE if set.
4 full runs of 28: 9-11 kills between two renames of a swap completed at load and 1-2 rolled
back, 5-9 while a group was being written, no record lost.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import select
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from protocol.messages import CreateTopicsRequest, FetchRequest, ProduceRequest
from protocol.messages import create_topics_request as ct
from protocol.messages import fetch_request as fr
from protocol.messages import produce_request as pr
from protocol.records import (
    HEADER_STRUCT,
    Record,
    build_batch,
    decode_records,
    iter_batches,
    verify_crc,
)
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection

FULL = os.environ.get("ODRADEK_FAULT_FULL") == "1"
TOPIC = "compacted"
KEYS = 300
RECORDS_PER_BATCH = 10
VALUE_SIZE = 80
TOMBSTONE_RATE = 0.12
BATCHES_PER_S = 150
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "segment.bytes": "8192",
    "index.interval.bytes": "512",
    "delete.retention.ms": "1000",
}
OVERRIDES = ["num.partitions=1", "auto.create.topics.enable=false", "log.cleaner.backoff.ms=100"]
SWAPPED = "Swapped in cleaned segment"
CLEANED = f"cleaned log {TOPIC}-0 "
# trial kinds: what the kill waits for, how long it may wait after it, and what it kills
TRIGGERS = {"in-group": (SWAPPED, 0.02), "near-start": (CLEANED, 0.08), "mid-swap": (SWAPPED, 0.3),
            "kill-worker": (SWAPPED, 0.02)}
# (seed, trial kinds) of each chain
CHAINS = (
    [(s, ["in-group", "mid-swap", "near-start", "mid-swap", "kill-worker", "in-group", "mid-swap"]) for s in range(4)]
    if FULL
    else [(0, ["in-group", "mid-swap", "kill-worker"])]
)
# "mid-swap" trials run the broker with every rename of a swap (.cleaned -> .swap, old segment ->
# .deleted, .swap -> final name) followed by a pause, so that a kill at a random moment after a
# group was swapped in lands between two renames of the next swap most of the time -- the crash
# states a real crash produces (a rename is atomic), just more often. The pause is injected by a
# sitecustomize module on the broker's PYTHONPATH; nothing else in the broker changes.
SLOW_RENAME_S = 0.03
SLOW_SWAP_SITECUSTOMIZE = f"""
import os, time
_replace, _rename = os.replace, os.rename
def _slow(f):
    def g(src, dst, *a, **k):
        f(src, dst, *a, **k)
        if any(s in os.fspath(p) for p in (src, dst) for s in (".cleaned", ".swap", ".deleted")):
            time.sleep({SLOW_RENAME_S})
    return g
os.replace, os.rename = _slow(_replace), _slow(_rename)
"""
RESULTS: list[dict[str, Any]] = []

# -- the model and the producer -----------------------------------------------------------------


@dataclass
class Model:
    """What was produced (sequence -> key, value) and the latest appended sequence of each key;
    ``in_flight``: the sequences of a batch sent but never answered (the broker died)."""

    produced: dict[int, tuple[bytes, bytes | None]] = field(default_factory=dict)
    latest: dict[bytes, int] = field(default_factory=dict)
    next_seq: int = 0
    in_flight: list[int] | None = None

    def new_batch(self, rng: random.Random) -> list[int]:
        seqs = []
        for _ in range(RECORDS_PER_BATCH):
            seq = self.next_seq
            self.next_seq += 1
            key = b"key-%03d" % rng.randrange(KEYS)
            value = None if rng.random() < TOMBSTONE_RATE else (b"v%d|" % seq).ljust(VALUE_SIZE, b".")
            self.produced[seq] = (key, value)
            seqs.append(seq)
        return seqs

    def apply(self, seqs: list[int]) -> None:
        for seq in seqs:
            self.latest[self.produced[seq][0]] = seq


def produce(conn: RawConnection, batch: bytes) -> int:
    resp = conn.call(0, 9, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name=TOPIC, partition_data=[pr.PartitionProduceData(index=0, records=batch)])]))
    return resp.responses[0].partition_responses[0].error_code


class Producer(threading.Thread):
    """Batches of RECORDS_PER_BATCH keyed records, BATCHES_PER_S a second, until stopped or the
    connection breaks (the batch then stays ``in_flight``). An answered error stops it too."""

    def __init__(self, port: int, model: Model, rng: random.Random) -> None:
        super().__init__(daemon=True, name="keyed-producer")
        self.port, self.model, self.rng = port, model, rng
        self.halt = threading.Event()
        self.errors: list[int] = []
        self.acked_here = 0
        self._acked = threading.Condition()
        self.ended = False

    def run(self) -> None:
        try:
            with RawConnection(self.port, timeout=20) as conn:
                self._produce(conn)
        except OSError:
            pass  # the broker is gone: the batch in flight may or may not be in the log
        finally:
            with self._acked:
                self.ended = True
                self._acked.notify_all()

    def _produce(self, conn: RawConnection) -> None:
        m = self.model
        next_at = time.monotonic()
        while not self.halt.is_set():
            seqs = m.new_batch(self.rng)
            records = [Record(0, i, i, *m.produced[s], [("s", b"%d" % s)]) for i, s in enumerate(seqs)]
            codec = self.rng.choice((0, 0, 1, 2, 3, 4))
            batch = build_batch(records, base_timestamp=int(time.time() * 1000), compression=codec)
            m.in_flight = seqs
            err = produce(conn, batch)
            if err:
                self.errors.append(err)
                return
            m.apply(seqs)
            m.in_flight = None
            with self._acked:
                self.acked_here += 1
                self._acked.notify_all()
            next_at += 1 / BATCHES_PER_S
            delay = next_at - time.monotonic()
            if delay > 0:
                self.halt.wait(delay)
            else:
                next_at = time.monotonic()

    def wait_acked(self, n: int, timeout: float) -> bool:
        """Whether ``n`` batches were acknowledged on this connection within ``timeout``."""
        with self._acked:
            self._acked.wait_for(lambda: self.acked_here >= n or self.ended, timeout)
            return self.acked_here >= n

    def stop(self) -> None:
        self.halt.set()
        self.join(30)
        assert not self.is_alive(), "the producer did not stop within 30 s"


# -- reading the partition back and checking it -------------------------------------------------


@dataclass(frozen=True)
class Rec:
    offset: int
    seq: int
    key: bytes | None
    value: bytes | None


def fetch(conn: RawConnection, offset: int) -> Any:
    resp = conn.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=4 << 20,
        session_epoch=-1, topics=[fr.FetchTopic(topic=TOPIC, partitions=[
            fr.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=4 << 20)])]))
    return resp.responses[0].partitions[0]


def read_back(port: int, deadline_s: float = 60.0) -> list[Rec]:
    """Every record from offset 0 to the high watermark (bounded in steps and time)."""
    out: list[Rec] = []
    offset = 0
    deadline = time.monotonic() + deadline_s
    with RawConnection(port) as conn:
        for _ in range(100_000):
            assert time.monotonic() < deadline, f"reading back did not finish; at offset {offset}"
            p = fetch(conn, offset)
            assert p.error_code == 0, f"fetch at {offset}: error {p.error_code}"
            if offset >= p.high_watermark:
                return out
            data = p.records or b""
            moved = offset
            for pos, size in iter_batches(data):
                _h, records = decode_records(data[pos : pos + size])
                for r in records:
                    assert r.offset is not None
                    if r.offset >= offset:
                        seq = int(dict(r.headers)["s"] or b"-1")
                        out.append(Rec(r.offset, seq, r.key, r.value))
                h = HEADER_STRUCT.unpack_from(data, pos)
                moved = max(moved, h[0] + h[6] + 1)
            assert moved > offset, f"no progress reading at offset {offset} (high watermark {p.high_watermark})"
            offset = moved
    raise AssertionError("reading back took too many steps")


def check_log(records: list[Rec], model: Model) -> dict[str, int]:
    """Resolve the batch in flight at the kill, then fail on any difference from the model; the
    counts of the check."""
    in_flight = model.in_flight
    landed = False
    if in_flight is not None:
        seen = {r.seq for r in records}
        landed = any(s in seen for s in in_flight)
        if landed:
            model.apply(in_flight)
        model.in_flight = None
    offsets = [r.offset for r in records]
    seqs = [r.seq for r in records]
    assert all(a < b for a, b in itertools.pairwise(offsets)), "offsets do not strictly increase"
    assert all(a < b for a, b in itertools.pairwise(seqs)), "records out of production order"
    wrong = [r for r in records if model.produced.get(r.seq) != (r.key, r.value)]
    assert not wrong, f"records not as produced: {wrong[:5]}"
    last: dict[bytes | None, int] = {}
    for r in records:
        last[r.key] = r.seq
    lost, resurrected = [], []
    for key, seq in model.latest.items():
        got = last.get(key)
        if model.produced[seq][1] is None:
            if got is not None and got != seq:
                resurrected.append((key, seq, got))
        elif got != seq:
            lost.append((key, seq, got))
    assert not lost, f"{len(lost)} keys' latest acknowledged value missing (key, seq, last in log): {lost[:10]}"
    assert not resurrected, f"{len(resurrected)} deleted keys show an older record: {resurrected[:10]}"
    tombstones = sum(1 for r in records if r.value is None)
    return {"records": len(records), "keys": len(last), "tombstones": tombstones, "in_flight_landed": int(landed)}


# -- processes and files ------------------------------------------------------------------------


def child_pids(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (the broker's cleaner workers)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d.name))
    return out


def wait_exit(pidfd: int, timeout: float) -> bool:
    """Whether the process of ``pidfd`` ended within ``timeout`` (the fd becomes readable)."""
    ready, _, _ = select.select([pidfd], [], [], timeout)
    return bool(ready)


def temp_files(part: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {".cleaned": [], ".swap": [], ".deleted": []}
    for p in part.iterdir():
        for suffix, names in out.items():
            if p.name.endswith(suffix):
                names.append(p.name)
    return {k: sorted(v) for k, v in out.items()}


def cleaner_checkpoint(data: Path) -> int | None:
    p = data / "cleaner-offset-checkpoint"
    if not p.exists():
        return None
    for line in p.read_text().splitlines()[2:]:
        topic, partition, offset = line.split()
        if (topic, partition) == (TOPIC, "0"):
            return int(offset)
    return None


def whole_cleaned_segment(part: Path, log_name: str) -> bool:
    """A ``.log.cleaned`` the worker finished: whole CRC-valid batches, and its offset index."""
    data = (part / log_name).read_bytes()
    end = 0
    for pos, size in iter_batches(data):
        if not verify_crc(data, pos):
            return False
        end = pos + size
    return end == len(data) and (part / log_name.replace(".log.cleaned", ".index.cleaned")).exists()


def leftovers_after_start(part: Path, started_ns: int) -> list[str]:
    """``.cleaned`` / ``.swap`` files whose inode changed last before the broker started (the
    new broker's own cleaner may have made newer ones)."""
    out = []
    for p in part.iterdir():
        if p.name.endswith((".cleaned", ".swap")):
            try:
                if p.stat().st_ctime_ns < started_ns:
                    out.append(p.name)
            except FileNotFoundError:
                pass
    return out


# -- the trials ---------------------------------------------------------------------------------


class Chain:
    def __init__(self, data: Path, seed: int) -> None:
        self.data = data
        self.part = data / f"{TOPIC}-0"
        self.rng = random.Random(seed)
        self.model = Model()
        self.brokers: list[BrokerProcess] = []
        self.broker: BrokerProcess | None = None
        self.producer: Producer | None = None

    def start(self, slow_swaps: bool = False) -> BrokerProcess:
        env = {}
        if slow_swaps:
            site = self.data.parent / "slow-swap-site"
            site.mkdir(exist_ok=True)
            (site / "sitecustomize.py").write_text(SLOW_SWAP_SITECUSTOMIZE)
            env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
        started_ns = time.time_ns()
        b = BrokerProcess(self.data, overrides=OVERRIDES, env=env)
        self.brokers.append(b)
        b.start(timeout=60)
        self.broker = b
        left = leftovers_after_start(self.part, started_ns) if self.part.exists() else []
        assert not left, f"left after loading: {left}"
        return b

    def create_topic(self) -> None:
        assert self.broker is not None
        with RawConnection(self.broker.port) as conn:
            resp = conn.call(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[ct.CreatableTopic(
                name=TOPIC, num_partitions=1, replication_factor=1,
                configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in TOPIC_CONFIGS.items()])]))
        assert resp.topics[0].error_code == 0, resp

    def produce_in_background(self) -> Producer:
        assert self.broker is not None
        self.producer = Producer(self.broker.port, self.model, random.Random(self.rng.random()))
        self.producer.start()
        return self.producer

    def wait_cleaning(self, after: int, timeout: float = 60.0) -> str:
        assert self.broker is not None
        return self.broker.wait_for_line(CLEANED, timeout=timeout, after=after)

    def verify(self) -> dict[str, int]:
        assert self.broker is not None
        return check_log(read_back(self.broker.port), self.model)

    def crash_broker(self) -> dict[str, Any]:
        """Freeze the worker, kill -9 the broker, note the files, let the worker go on; it must
        exit by itself and leave no partly written segment."""
        b = self.broker
        assert b is not None and b.proc is not None
        workers = child_pids(b.proc.pid)
        fds = []
        for w in workers:
            try:
                fd = os.pidfd_open(w)
            except ProcessLookupError:
                continue
            signal.pidfd_send_signal(fd, signal.SIGSTOP)
            fds.append(fd)
        lines_at_kill = len(b.lines)
        try:
            b.proc.kill()
            b.proc.wait(30)
            files = temp_files(self.part)
            checkpoint = cleaner_checkpoint(self.data)
        finally:
            for fd in fds:
                signal.pidfd_send_signal(fd, signal.SIGCONT)
        t0 = time.monotonic()
        exited = [wait_exit(fd, max(0.0, t0 + 10.0 - time.monotonic())) for fd in fds]
        exit_s = time.monotonic() - t0
        for fd, gone in zip(fds, exited, strict=True):
            if not gone:  # do not leave it behind when the assertion fails
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        assert all(exited), f"a cleaner worker did not exit within 10 s of its broker's kill -9 ({workers})"
        b.kill()  # the stderr reader ends now that the worker closed its copy of the pipe
        left = temp_files(self.part)[".cleaned"]
        partial = [n for n in left if n.endswith(".log.cleaned") and not whole_cleaned_segment(self.part, n)]
        assert not partial, f"the worker left partly written segments: {partial} ({left})"
        # index files without their .log.cleaned: only where the broker was renaming them to .swap
        swapping = {n.split(".")[0] for n in files[".swap"]}
        orphans = [n for n in left if n.split(".")[0] + ".log.cleaned" not in left and n.split(".")[0] not in swapping]
        assert not orphans, f"index files of no cleaned segment: {orphans} ({left})"
        last_lines = b.lines[:lines_at_kill]
        since = next((i for i in range(len(last_lines) - 1, -1, -1) if CLEANED in last_lines[i]), -1)
        groups_since = sum(SWAPPED in line for line in last_lines[since + 1 :])
        if files[".swap"]:
            swapping = {n.split(".")[0] for n in files[".swap"]}
            back = any(n.split(".")[0] in swapping for n in files[".cleaned"])
            hit = "mid-swap, " + ("rolled back at load" if back else "completed at load")
        elif files[".cleaned"]:
            hit = "group written"
        elif groups_since:
            hit = "between groups"
        else:
            hit = "map/idle"
        traceback = any("Traceback" in line for line in b.lines[lines_at_kill:])
        return {"hit": hit, "files": files, "checkpoint": checkpoint, "workers": len(workers),
                "worker_exit_s": round(exit_s, 3), "worker_left": len(left), "worker_traceback": traceback}

    def kill_worker(self) -> dict[str, Any]:
        """kill -9 the worker: the broker logs it, removes the .cleaned files, keeps serving."""
        b = self.broker
        assert b is not None and b.proc is not None
        workers = child_pids(b.proc.pid)
        assert workers, "no cleaner worker process"
        mark = len(b.lines)
        for w in workers:
            os.kill(w, signal.SIGKILL)
        b.wait_for_line("worker process died while cleaning", timeout=30, after=mark)
        # the thread removes the .cleaned files right after that line (bounded look)
        deadline = time.monotonic() + 10
        while temp_files(self.part)[".cleaned"]:
            assert time.monotonic() < deadline, f"left by the killed worker: {temp_files(self.part)}"
            time.sleep(0.01)
        assert b.proc.poll() is None, "the broker died with its worker"
        return {"hit": "worker killed", "workers": len(workers)}


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    started: list[BrokerProcess] = []
    yield started
    for b in started:
        b.kill()


@pytest.mark.parametrize(("seed", "kinds"), CHAINS, ids=[f"chain{s}-{len(k)}trials" for s, k in CHAINS])
def test_cleaner_crash_trials(tmp_path: Path, brokers: list[BrokerProcess], seed: int, kinds: list[str]) -> None:
    chain = Chain(tmp_path / "data", seed)
    chain.brokers = brokers
    chain.start(slow_swaps=kinds[0] == "mid-swap")
    chain.create_topic()
    chain.produce_in_background()
    chain.wait_cleaning(0)
    for trial, kind in enumerate(kinds):
        b, p = chain.broker, chain.producer
        assert b is not None and p is not None
        row: dict[str, Any] = {"chain": seed, "trial": trial, "kind": kind}
        trigger, spread = TRIGGERS[kind]
        b.wait_for_line(trigger, timeout=60, after=len(b.lines))
        time.sleep(chain.rng.uniform(0, spread))  # the random moment
        if kind == "kill-worker":
            row.update(chain.kill_worker())
            # the broker keeps serving
            assert p.wait_acked(p.acked_here + 5, timeout=10), f"produce stopped after the worker kill: {p.errors}"
            if chain.rng.random() < 0.5:
                p.stop()
                assert b.stop() == 0
                row["broker"] = "stopped"
            else:
                row.update({k: v for k, v in chain.crash_broker().items() if k != "hit"})
                row["broker"] = "kill -9"
        else:
            row.update(chain.crash_broker())
        p.join(30)
        assert not p.is_alive()
        assert not p.errors, f"produce answered errors: {p.errors}"
        checkpoint = cleaner_checkpoint(chain.data)
        following = kinds[trial + 1] if trial + 1 < len(kinds) else None
        b2 = chain.start(slow_swaps=following == "mid-swap")
        row["swaps_completed_at_load"] = sum("from interrupted swap operation" in line for line in b2.lines)
        row.update(chain.verify())
        mark = len(b2.lines)
        chain.produce_in_background()
        line = chain.wait_cleaning(mark)
        first_dirty = int(re.search(r"dirty section = \[(\d+),", line).group(1))  # type: ignore[union-attr]
        assert first_dirty == (checkpoint or 0), (line, checkpoint)
        row["resumed_from"] = first_dirty
        RESULTS.append(row)
        _write_table()

    # last: a clean stop and start, everything read back once more
    assert chain.producer is not None and chain.broker is not None
    chain.producer.stop()
    assert not chain.producer.errors
    assert chain.broker.stop() == 0
    chain.start()
    final = chain.verify()
    assert final["records"] < len(chain.model.produced) // 2, ("hardly compacted", final, len(chain.model.produced))
    assert chain.broker.stop() == 0
    RESULTS.append({"chain": seed, "trial": "final", "kind": "clean restart", **final,
                    "produced": len(chain.model.produced)})
    _write_table()


def _write_table() -> None:
    cols = ["chain", "trial", "kind", "hit", "files", "workers", "worker_exit_s", "worker_left", "worker_traceback",
            "broker", "swaps_completed_at_load", "records", "keys", "tombstones", "in_flight_landed", "resumed_from", "produced"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in RESULTS:
        files = r.get("files")
        r = {**r, "files": " ".join(f"{k}:{len(v)}" for k, v in files.items() if v) if files else ""}
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    text = "\n".join(lines) + "\n"
    path = os.environ.get("ODRADEK_CLEANER_CRASH_TABLE")
    if path:
        Path(path).write_text(text)
