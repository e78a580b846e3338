"""Kafka's own Java client (kafka-clients 3.9) against a real `odradek serve`.

The Java side is the suite's programs in tests/compat/java/src (kafka-clients APIs only), compiled
once per module and run as subprocesses that print JSON lines; the expectations are here:

* RoundTrip: the default producer (idempotent, acks=all) and each compression.type writes 100,000
  keyed records with headers to 6 partitions; every acknowledged record is read back by the Java
  consumer in per-partition order with key, value, headers and timestamp intact, and the default
  partitioner put each key where murmur2 says (the partitioner kafka-python and Odradek's tools use).
* GroupMember: a CooperativeStickyAssignor group with manual commits through a member leaving and
  one joining (incremental revocation only, every record processed exactly once), and static
  members restarting within the session timeout without a rebalance.
* RecordErrors: batches with records the broker refuses (no key on a compacted topic, a
  timestamp past message.timestamp.after.max.ms): the producer fails exactly the records the
  Produce response lists (KIP-467) and the rest of their batch with Kafka 3.9's generic error.
* AdminScenario: one AdminClient call after another, each result compared with the values Kafka
  3.9 answers (the scenario was run against the reference broker to get them; only ids, paths and
  error message texts differ).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import BrokerProcess
from tests.compat.jvm import JAVA_SRC, compile_java, java_command, kafka_version

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2

SOURCES = JAVA_SRC / "src"
CODECS = ["default", "gzip", "snappy", "lz4", "zstd"]
N_PER_CODEC = 100_000
BASE_TS = 1_700_000_000_000  # RoundTrip.BASE_TS


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The suite's Java programs, compiled against Kafka's jars."""
    assert kafka_version().startswith("3.9."), kafka_version()
    return compile_java(sorted(SOURCES.glob("*.java")), tmp_path_factory.mktemp("java-client") / "classes")


def run_java(classes: str, main: str, *args: str, timeout: float) -> list[dict[str, Any]]:
    """Run one of the programs to completion (killed after `timeout`); its JSON lines."""
    proc = subprocess.run(java_command(main, args, classpath=classes), capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{main} {' '.join(args)} exited {proc.returncode}:\n"
                             f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines()]


def create_topic(classes: str, broker: BrokerProcess, name: str, partitions: int) -> None:
    out = run_java(classes, "CreateTopic", broker.bootstrap, name, str(partitions), timeout=60)
    assert out == [{"created": name, "partitions": partitions}]


def murmur2_partition(key: str, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


# ---------------------------------------------------------------------------------------------
# Producer and consumer: every codec


def expected_record(i: int, codec: str) -> tuple[str, str | None, list[list[str | None]]]:
    """Record i as RoundTrip.record builds it: key, value, headers."""
    value = None if i % 1000 == 999 else f"value-{i} Grüße, κόσμε € " + "abcdefghij" * (i % 7)
    headers = [["i", str(i)], ["codec", codec], ["dup", "a"], ["dup", "b"], ["none", None]]
    return f"key-{i % 1000}", value, headers


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(odradek: BrokerProcess, classes: str, codec: str) -> None:
    topic = f"java-{codec}"
    started_ms = int(time.time() * 1000)
    out = run_java(classes, "RoundTrip", odradek.bootstrap, topic, "6", str(N_PER_CODEC), codec, timeout=240)
    finished_ms = int(time.time() * 1000)
    sent = [d for d in out if "sent" in d]
    got = [d for d in out if "got" in d]
    (done,) = [d for d in out if "done" in d]
    assert out[0] == {"created": topic, "partitions": 6}

    # What the producer reports it wrote: record i as built, at a partition murmur2 agrees with.
    assert len(sent) == N_PER_CODEC
    by_offset: dict[tuple[int, int], dict[str, Any]] = {}
    for d in sent:
        i = d["sent"]
        assert [d["k"], d["v"], d["h"]] == list(expected_record(i, codec)), d
        if i % 10:
            assert d["ts"] == BASE_TS + i, d
        else:  # no timestamp given: CreateTime set by the producer at send time
            assert started_ms <= d["ts"] <= finished_ms, d
        assert d["p"] == murmur2_partition(d["k"], 6), d
        by_offset[(d["p"], d["o"])] = d
    assert len(by_offset) == N_PER_CODEC  # no two acknowledgements for one offset
    per_partition = Counter(p for p, _ in by_offset)
    assert sorted(per_partition) == list(range(6))
    for p, count in per_partition.items():  # each partition's offsets are 0..count-1: no gaps
        assert {o for q, o in by_offset if q == p} == set(range(count))
    by_key: dict[str, list[dict[str, Any]]] = {}
    for d in sent:
        by_key.setdefault(d["k"], []).append(d)
    for records in by_key.values():  # one key, one partition, in send order
        assert [r["o"] for r in records] == sorted(r["o"] for r in records)

    # What the consumer read: every record once, in per-partition offset order, as sent.
    assert done["done"] == N_PER_CODEC, f"consumer stopped after {done['done']} records"
    assert done["end"] == [[p, per_partition[p]] for p in range(6)]
    assert len(got) == N_PER_CODEC
    last: dict[int, int] = {}
    for d in got:
        assert d["o"] > last.get(d["p"], -1), f"out of order in partition {d['p']}: {d['o']} after {last[d['p']]}"
        last[d["p"]] = d["o"]
        s = by_offset[(d["p"], d["o"])]
        assert (d["k"], d["v"], d["h"], d["ts"], d["tt"]) == (s["k"], s["v"], s["h"], s["ts"], "CreateTime")
    assert last == {p: per_partition[p] - 1 for p in range(6)}


# ---------------------------------------------------------------------------------------------
# Consumer groups


class Members:
    """GroupMember processes of one group; their JSON events in arrival order, in one list."""

    def __init__(self, classes: str, broker: BrokerProcess, topic: str, group: str, log_dir: Path) -> None:
        self.classes, self.broker, self.topic, self.group, self.log_dir = classes, broker, topic, group, log_dir
        self.events: list[dict[str, Any]] = []
        self.seen: set[tuple[int, int]] = set()  # (partition, offset) of every record processed
        self.last_callback: dict[str, dict[str, Any]] = {}  # member -> its latest rebalance callback
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.cond = threading.Condition()
        self.readers: dict[int, threading.Thread] = {}  # pid -> the thread reading its stdout

    def start(self, name: str, instance_id: str | None = None) -> None:
        args = [self.broker.bootstrap, self.topic, self.group, name] + ([instance_id] if instance_id else [])
        stderr = (self.log_dir / f"{name}.stderr").open("w")
        proc = subprocess.Popen(java_command("GroupMember", args, classpath=self.classes), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
        stderr.close()
        self.procs[name] = proc
        reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        reader.start()
        self.readers[proc.pid] = reader

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            with self.cond:
                self.events.append(event)
                if event["ev"] == "rec":
                    self.seen.add((event["p"], event["o"]))
                elif event["ev"] in ("assigned", "revoked", "lost"):
                    self.last_callback[event["m"]] = event
                self.cond.notify_all()

    def send(self, name: str, command: str) -> None:
        stdin = self.procs[name].stdin
        assert stdin is not None
        stdin.write(command + "\n")
        stdin.flush()

    def wait(self, what: str, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0) -> None:
        """Block (woken by each event) until `predicate(events)` holds, or fail with the latest events."""
        with self.cond:
            if not self.cond.wait_for(lambda: predicate(self.events), timeout):
                tail = [e for e in self.events if e["ev"] not in ("rec", "committed")][-30:]
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; latest events: {tail}")

    def close(self, name: str, timeout: float = 30.0) -> None:
        """`close` on stdin: the consumer closes and the process exits."""
        self.send(name, "close")
        code = self.procs[name].wait(timeout)
        self._release(self.procs[name])
        assert code == 0, (self.log_dir / f"{name}.stderr").read_text()[-4000:]
        self.wait(f"{name} closed", lambda ev: any(e["ev"] == "closed" and e["m"] == name for e in ev))

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None and proc.stdin is not None:
                proc.stdin.close()  # end of input: close and exit
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for proc in self.procs.values():
            self._release(proc)

    def _release(self, proc: subprocess.Popen[str]) -> None:
        """After the process exited: its reader has seen end of file, then the pipes close."""
        self.readers[proc.pid].join(5)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()

    # views of the events
    def of(self, name: str, since: int = 0) -> list[dict[str, Any]]:
        return [e for e in self.events[since:] if e.get("m") == name]

    def assignment(self, name: str) -> list[int] | None:
        """The member's partitions after its latest rebalance callback."""
        e = self.last_callback.get(name)
        if e is None:
            return None
        # revoked is called before the partitions leave the assignment
        return sorted(set(e["now"]) - set(e["parts"])) if e["ev"] in ("revoked", "lost") else e["now"]

    def balanced(self, names: list[str], partitions: int) -> bool:
        got = [self.assignment(n) for n in names]
        if any(a is None for a in got):
            return False
        flat = [p for a in got for p in a]  # type: ignore[union-attr]
        share = partitions // len(names)
        return sorted(flat) == list(range(partitions)) and all(len(a) in (share, share + 1) for a in got)  # type: ignore[arg-type]

    def records(self) -> Counter[tuple[int, int]]:
        return Counter((e["p"], e["o"]) for e in self.events if e["ev"] == "rec")


@pytest.fixture
def members(classes: str, odradek: BrokerProcess, tmp_path: Path) -> Iterator[Callable[[str, str], Members]]:
    made: list[Members] = []

    def make(topic: str, group: str) -> Members:
        m = Members(classes, odradek, topic, group, tmp_path)
        made.append(m)
        return m

    try:
        yield make
    finally:
        for m in made:
            m.stop_all()


def produce(classes: str, broker: BrokerProcess, topic: str, partitions: int, count: int) -> subprocess.Popen[str]:
    """Start the Produce program (value "v-i" to partition i % partitions); `finish()` waits for it."""
    return subprocess.Popen(java_command("Produce", [broker.bootstrap, topic, str(partitions), str(count)],
                                         classpath=classes), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0 and '"produced"' in out, f"producer exited {proc.returncode}:\n{err[-4000:]}"


def all_consumed(group: Members, ends: dict[int, int]) -> Callable[[list[dict[str, Any]]], bool]:
    """A wait predicate: every offset below `ends` processed (checked cheaply on every event)."""
    want = {(p, o) for p, end in ends.items() for o in range(end)}
    return lambda _: len(group.seen) >= len(want) and want <= group.seen


def assert_exactly_once(group: Members, ends: dict[int, int]) -> None:
    counts = group.records()
    dupes = {po: n for po, n in counts.items() if n > 1}
    assert not dupes, f"processed more than once: {sorted(dupes)[:20]} ({len(dupes)} in all)"
    assert set(counts) == {(p, o) for p, end in ends.items() for o in range(end)}


def test_cooperative_group_member_leaves_and_joins_exactly_once(
        odradek: BrokerProcess, classes: str, members: Callable[[str, str], Members]) -> None:
    create_topic(classes, odradek, "coop", 6)
    g = members("coop", "coop-group")
    for name in ("a", "b", "c"):
        g.start(name)
    g.wait("a, b, c sharing 6 partitions", lambda _: g.balanced(["a", "b", "c"], 6))
    before = {n: g.assignment(n) for n in ("a", "b", "c")}

    # b leaves (a dynamic member's close sends LeaveGroup) while records are being produced
    producer = produce(classes, odradek, "coop", 6, 6000)
    mark = len(g.events)
    g.close("b")
    g.wait("a and c taking over b's partitions", lambda _: g.balanced(["a", "c"], 6))
    finish(producer)
    for n in ("a", "c"):
        moves = [e for e in g.of(n, mark) if e["ev"] in ("assigned", "revoked", "lost")]
        assert not [e for e in moves if e["ev"] != "assigned" and e["parts"]], moves  # kept their own
        assert set(before[n]) < set(g.assignment(n) or [])  # type: ignore[arg-type]
    assert sorted(set(g.assignment("a") or []) - set(before["a"]) | set(g.assignment("c") or []) - set(before["c"])) \
        == sorted(before["b"])  # type: ignore[arg-type]

    # d joins while more records are being produced: a and c give up one partition each, only those
    producer = produce(classes, odradek, "coop", 6, 6000)
    mark = len(g.events)
    middle = {n: g.assignment(n) for n in ("a", "c")}
    g.start("d")
    g.wait("a, c, d sharing 6 partitions", lambda _: g.balanced(["a", "c", "d"], 6))
    finish(producer)
    revoked = {n: [p for e in g.of(n, mark) if e["ev"] == "revoked" for p in e["parts"]] for n in ("a", "c")}
    assert not [e for n in ("a", "c") for e in g.of(n, mark) if e["ev"] == "lost"]
    assert sorted(revoked["a"] + revoked["c"]) == g.assignment("d")
    for n in ("a", "c"):
        assert g.assignment(n) == sorted(set(middle[n]) - set(revoked[n]))  # type: ignore[arg-type]

    ends = {p: 2000 for p in range(6)}
    g.wait("every record processed", all_consumed(g, ends), timeout=90)
    for n in ("a", "c", "d"):
        g.close(n)
    assert_exactly_once(g, ends)
    # the last commit of each partition is its end offset
    committed: dict[int, int] = {}
    for e in g.events:
        if e["ev"] == "committed":
            committed.update({p: o for p, o in e["offsets"]})
    assert committed == ends


def test_static_members_restart_without_rebalance(
        odradek: BrokerProcess, classes: str, members: Callable[[str, str], Members]) -> None:
    create_topic(classes, odradek, "static", 6)
    g = members("static", "static-group")
    names = ["a", "b", "c"]
    for name in names:
        g.start(name, f"instance-{name}")
        # one at a time: the first to join is the leader, restarted below
        g.wait(f"{name} assigned", lambda ev, name=name: any(e["ev"] == "assigned" and e["m"] == name for e in ev))
    g.wait("a, b, c sharing 6 partitions", lambda _: g.balanced(names, 6))
    finish(produce(classes, odradek, "static", 6, 600))
    g.wait("first 600 records processed", all_consumed(g, {p: 100 for p in range(6)}))
    generation = [e for e in g.events if e["ev"] == "assigned"][-1]["gen"]
    before = {n: g.assignment(n) for n in names}

    first_log_mark = len(odradek.lines)
    # the line the checks below look for is there for the joins that formed the group
    assert "preparing to rebalance group" in "\n".join(odradek.lines[:first_log_mark])
    for restarted in ("a", "b"):  # the leader, then a follower
        mark, log_mark = len(g.events), len(odradek.lines)
        g.close(restarted)  # a static member's close does not leave the group
        g.start(restarted, f"instance-{restarted}")
        g.wait(f"{restarted} back", lambda _, n=restarted, m=mark: any(e["ev"] == "assigned" for e in g.of(n, m)))
        (back,) = [e for e in g.of(restarted, mark) if e["ev"] == "assigned"]
        assert back["now"] == before[restarted] and back["gen"] == generation, back
        odradek.wait_for_line("static member rejoins with a new member id", after=log_mark)
        assert "preparing to rebalance group" not in "\n".join(odradek.lines[log_mark:])
        others = [n for n in names if n != restarted]
        assert not [e for n in others for e in g.of(n, mark) if e["ev"] in ("assigned", "revoked", "lost")]

    # everyone keeps consuming where the group's commits left off: still exactly once
    finish(produce(classes, odradek, "static", 6, 600))
    ends = {p: 200 for p in range(6)}
    g.wait("all 1200 records processed", all_consumed(g, ends))
    mark = len(g.events)
    for n in names:
        g.send(n, "status")
    g.wait("status of a, b, c", lambda _: all(any(e["ev"] == "status" for e in g.of(n, mark)) for n in names))
    for n in names:
        (status,) = [e for e in g.of(n, mark) if e["ev"] == "status"]
        assert (status["now"], status["gen"]) == (before[n], generation), status
    assert_exactly_once(g, ends)
    assert "preparing to rebalance group" not in "\n".join(odradek.lines[first_log_mark:])


# ---------------------------------------------------------------------------------------------
# AdminClient


def test_admin_client(odradek: BrokerProcess, classes: str) -> None:
    out = run_java(classes, "AdminScenario", odradek.bootstrap, "0", timeout=120)
    assert out[-1] == {"step": "end"}
    steps = {d["step"]: d for d in out[:-1]}
    checked: set[str] = set()

    def ok(step: str) -> Any:
        checked.add(step)
        assert "ok" in steps[step], steps[step]
        return steps[step]["ok"]

    def error(step: str) -> str:
        checked.add(step)
        assert "error" in steps[step], steps[step]
        return steps[step]["error"]

    cluster = ok("describeCluster")
    assert cluster["clusterId"] and cluster["controller"] == 0
    assert cluster["nodes"] == [{"id": 0, "host": "127.0.0.1", "port": odradek.port, "rack": None}]

    # topics
    assert ok("createTopics.validateOnly") == {"partitions": 3, "rf": 1, "cleanup.policy": ["compact", "DYNAMIC_TOPIC_CONFIG"],
                                               "listed": False}
    created = ok("createTopics")
    configs = {"cleanup.policy": ["delete", "DYNAMIC_TOPIC_CONFIG"], "max.message.bytes": ["200000", "DYNAMIC_TOPIC_CONFIG"],
               "retention.ms": ["3600000", "DYNAMIC_TOPIC_CONFIG"], "segment.bytes": ["1073741824", "DEFAULT_CONFIG"]}
    assert (created["partitions"], created["rf"], created["configs"]) == (3, 1, configs)
    assert error("createTopics.exists") == "TopicExistsException"
    assert error("createTopics.zeroPartitions") == "InvalidPartitionsException"
    assert error("createTopics.badConfig") == "InvalidConfigurationException"
    assert error("createTopics.replicationFactor") == "InvalidReplicationFactorException"
    assert ok("listTopics") == ["admin-t"]

    def partitions(n: int) -> list[dict[str, Any]]:
        return [{"partition": p, "leader": 0, "replicas": [0], "isr": [0]} for p in range(n)]

    topic_id = created["topicId"]
    assert ok("describeTopics") == {"name": "admin-t", "internal": False, "topicId": topic_id, "partitions": partitions(3)}
    assert ok("createPartitions") == {"name": "admin-t", "internal": False, "topicId": topic_id, "partitions": partitions(5)}
    assert error("createPartitions.decrease") == "InvalidPartitionsException"
    assert ok("createPartitions.validateOnly") == 5

    # configs
    assert ok("describeConfigs.topic") == configs
    altered = {**configs, "cleanup.policy": ["delete,compact", "DYNAMIC_TOPIC_CONFIG"],
               "max.message.bytes": ["1048588", "DEFAULT_CONFIG"], "retention.ms": ["7200000", "DYNAMIC_TOPIC_CONFIG"]}
    assert ok("incrementalAlterConfigs.topic") == altered
    assert ok("incrementalAlterConfigs.topic.subtract") == {**altered, "cleanup.policy": ["delete", "DYNAMIC_TOPIC_CONFIG"]}
    assert error("incrementalAlterConfigs.topic.badValue") == "InvalidConfigurationException"
    assert error("incrementalAlterConfigs.topic.unknownTopic") == "UnknownTopicOrPartitionException"
    broker = {"log.retention.hours": ["168", "DEFAULT_CONFIG"], "log.retention.ms": ["<null>", "DEFAULT_CONFIG"],
              "message.max.bytes": ["1048588", "DEFAULT_CONFIG"], "num.partitions": ["1", "STATIC_BROKER_CONFIG"]}
    assert ok("describeConfigs.broker") == broker
    assert ok("incrementalAlterConfigs.broker") == {**broker, "log.retention.ms": ["86400000", "DYNAMIC_BROKER_CONFIG"]}
    assert ok("incrementalAlterConfigs.broker.delete") == broker

    # offsets: partition 0 holds ten records in one batch, timestamps BASE + 5000, 1000, 9000, ...
    assert ok("produce") == list(range(10))
    ts = BASE_TS
    assert ok("listOffsets") == {
        "earliest": {"0": [0, -1], "1": [0, -1]},
        "latest": {"0": [10, -1], "1": [0, -1]},
        "ts6500": {"0": [2, ts + 9000]},  # the first offset whose timestamp is >= 6500, not the nearest
        "ts1000": {"0": [0, ts + 5000]},
        "ts9500": {"0": [-1, -1]},
        "max": {"0": [2, ts + 9000], "1": [-1, -1]},
    }
    assert ok("deleteRecords") == {"lowWatermark": 4, "earliest": {"0": [4, -1]}, "latest": {"0": [10, -1]}}
    assert error("deleteRecords.beyondEnd") == "OffsetOutOfRangeException"
    dirs = ok("describeLogDirs")
    assert list(dirs) == [str(odradek.log_dir)]
    d = dirs[str(odradek.log_dir)]
    assert d["error"] is None and 0 < d["usable"] <= d["total"]
    replica = {"offsetLag": 0, "isFuture": False}
    assert {tp: {k: v for k, v in r.items() if k != "size"} for tp, r in d["replicas"].items()} == \
        {f"admin-t-{p}": replica for p in range(5)}
    assert d["replicas"]["admin-t-0"]["size"] > 0
    assert [d["replicas"][f"admin-t-{p}"]["size"] for p in range(1, 5)] == [0, 0, 0, 0]

    # groups: one consumer holding all five partitions, then none
    assert ok("consumer.assignment") == [0, 1, 2, 3, 4]
    assert ok("commitSync") == "done"
    assert ok("listConsumerGroups.active") == [{"groupId": "admin-g", "simple": False, "state": "Stable"}]
    active = ok("describeConsumerGroups.active")
    (member,) = active.pop("members")
    assert active == {"groupId": "admin-g", "simple": False, "state": "Stable", "assignor": "range", "coordinator": 0}
    assert member["memberId"].startswith("admin-c1-")
    assert {k: v for k, v in member.items() if k != "memberId"} == {
        "instanceId": None, "clientId": "admin-c1", "host": "/127.0.0.1", "assignment": [0, 1, 2, 3, 4]}
    assert error("alterConsumerGroupOffsets.active") == "UnknownMemberIdException"
    assert error("deleteConsumerGroupOffsets.active") == "GroupSubscribedToTopicException"
    assert error("deleteConsumerGroups.active") == "GroupNotEmptyException"
    assert ok("describeConsumerGroups.empty") == {"groupId": "admin-g", "simple": False, "state": "Empty", "assignor": "",
                                                  "coordinator": 0, "members": []}
    assert ok("listConsumerGroupOffsets") == {"admin-t-0": [7, "meta-0"], "admin-t-1": [0, ""]}
    assert ok("alterConsumerGroupOffsets") == {"admin-t-0": [9, ""], "admin-t-1": [0, ""], "admin-t-2": [3, "m2"]}
    assert ok("deleteConsumerGroupOffsets") == {"admin-t-0": [9, ""], "admin-t-2": [3, "m2"]}
    assert ok("deleteConsumerGroups") == {
        "listings": [], "offsets": {},
        "describe": {"groupId": "admin-g", "simple": True, "state": "Dead", "assignor": "", "coordinator": 0, "members": []}}
    assert error("deleteConsumerGroups.again") == "GroupIdNotFoundException"

    assert ok("deleteTopics") is False  # no longer listed
    assert error("describeTopics.deleted") == "UnknownTopicOrPartitionException"
    assert error("deleteTopics.missing") == "UnknownTopicOrPartitionException"
    assert checked == set(steps), f"unchecked: {sorted(set(steps) - checked)}"


# ---------------------------------------------------------------------------------------------
# Records the broker refuses (KIP-467)

PART_OF_BAD_BATCH = "Failed to append record because it was part of a batch which had one more more invalid records"
KAFKA_EXCEPTION = "org.apache.kafka.common.KafkaException"
INVALID_RECORD = "org.apache.kafka.common.InvalidRecordException"
INVALID_TIMESTAMP = "org.apache.kafka.common.errors.InvalidTimestampException"


def test_producer_fails_exactly_the_records_the_broker_lists(odradek: BrokerProcess, classes: str) -> None:
    """RecordErrors sends each round as one batch. Kafka 3.9's Sender.failBatch maps the
    response's record_errors to the records: a listed record fails with the partition's
    exception when it is the only one listed (InvalidRecordException, InvalidTimestampException)
    and InvalidRecordException otherwise, with the broker's message; the batch's other records
    fail with a KafkaException saying they were in a batch with invalid records -- they are not
    retried. The producer goes on: later rounds are appended. The same program against Kafka
    3.9.2 printed the same lines (timestamps and the clock in the window aside)."""
    out = run_java(classes, "RecordErrors", odradek.bootstrap, "compacted", "cleanup.policy=compact",
                   "k0:0,-:0,k2:0,-:0,k4:0", "k5:0,k6:0", "-:0", "k7:0", timeout=120)
    no_key = "Compacted topic cannot accept message without key in topic partition compacted-0"
    other = {"error": KAFKA_EXCEPTION, "message": PART_OF_BAD_BATCH}
    keyless = {"error": INVALID_RECORD, "message": no_key}
    assert out == [
        {"round": 0, "i": 0, **other}, {"round": 0, "i": 1, **keyless}, {"round": 0, "i": 2, **other},
        {"round": 0, "i": 3, **keyless}, {"round": 0, "i": 4, **other},
        {"round": 1, "i": 0, "offset": 0}, {"round": 1, "i": 1, "offset": 1},
        {"round": 2, "i": 0, **keyless},
        {"round": 3, "i": 0, "offset": 2},
    ]

    day = 86_400_000
    out = run_java(classes, "RecordErrors", odradek.bootstrap, "bounded", "message.timestamp.after.max.ms=60000",
                   f"a:0,b:{day},c:0", f"a:0,b:{day},c:{day}", "d:0", timeout=120)
    assert [(d["round"], d["i"], d.get("error"), d.get("offset")) for d in out] == [
        (0, 0, KAFKA_EXCEPTION, None), (0, 1, INVALID_TIMESTAMP, None), (0, 2, KAFKA_EXCEPTION, None),
        (1, 0, KAFKA_EXCEPTION, None), (1, 1, INVALID_RECORD, None), (1, 2, INVALID_RECORD, None),
        (2, 0, None, 0),
    ]
    for d in (out[1], out[4], out[5]):
        m = re.fullmatch(r"Timestamp (\d+) of message with offset (\d) is out of range\. The timestamp should be "
                         r"within \[(-\d+), (\d+)\]", d["message"])
        assert m, d
        ts, offset, lo, hi = (int(g) for g in m.groups())
        now = hi - 60_000
        assert offset == d["i"] and lo == now - (2**63 - 1) and abs(now - (ts - day)) < 60_000  # the broker's clock
