"""Consumer-group scenarios end to end with real clients against a real broker: assignors over
six partitions, a consumer process killed with SIGKILL, an incremental (cooperative-sticky)
rebalance, and committed offsets surviving a broker SIGKILL. Waits are on events (client
callbacks, log lines, subprocess output), each bounded."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.messages import FindCoordinatorRequest, OffsetFetchRequest
from protocol.messages import offset_fetch_request as ofr
from tests.broker_process import FAST_GROUPS, REPO, BrokerProcess
from tests.raw_client import RawConnection

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.structs import OffsetAndMetadata

CONSUMER_SCRIPT = Path(__file__).with_name("group_consumer_proc.py")


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    """librdkafka: fast enough that producing is not what the tests wait for."""
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                                  "queue.buffering.max.messages": 1_000_000})
    for i in range(start, start + per_partition):
        for part in range(partitions):
            while True:
                try:
                    p.produce(topic, f"{part}-{i}".encode(), partition=part)
                    break
                except BufferError:
                    p.poll(0.01)
    assert p.flush(60) == 0


def wait_until(cond: threading.Condition, pred: Callable[[], bool], timeout: float, what: str | Callable[[], str]) -> None:
    with cond:
        if not cond.wait_for(pred, timeout):
            raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")


# -- 1. range and roundrobin over six partitions -----------------------------------------------------

class _PauseUntilGo(ConsumerRebalanceListener):
    """Pauses newly assigned partitions until the whole group is balanced, so that no record is
    fetched by a generation that is about to be replaced (that would be a duplicate)."""

    def __init__(self, consumer: KafkaConsumer, go: threading.Event, on_assign: Callable[[set[int]], None]) -> None:
        self.consumer, self.go, self.on_assign = consumer, go, on_assign

    def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    def on_partitions_assigned(self, assigned: Any) -> None:
        if not self.go.is_set():
            self.consumer.pause(*assigned)
        self.on_assign({tp.partition for tp in assigned})


@pytest.mark.parametrize(("assignor", "expected"), [
    (RangePartitionAssignor, [{0, 1}, {2, 3}, {4, 5}]),
    (RoundRobinPartitionAssignor, [{0, 3}, {1, 4}, {2, 5}]),
])
def test_three_consumers_two_partitions_each_exactly_once(
    gbroker: BrokerProcess, admin: KafkaAdminClient, assignor: Any, expected: list[set[int]],
) -> None:
    total, per_partition = 60_000, 10_000
    group = f"asg-{assignor.name}"
    admin.create_topics([NewTopic("six", 6, 1)])
    produce(gbroker.bootstrap, "six", 6, per_partition)  # everything is there before anyone joins

    cond = threading.Condition()
    go, stop = threading.Event(), threading.Event()
    assignments: dict[int, set[int]] = {}
    seen: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 2: []}
    errors: list[BaseException] = []

    def run(idx: int) -> None:
        c = KafkaConsumer(bootstrap_servers=gbroker.bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, heartbeat_interval_ms=100, session_timeout_ms=10000,
                          partition_assignment_strategy=[assignor])

        def on_assign(parts: set[int]) -> None:
            with cond:
                assignments[idx] = parts
                cond.notify_all()

        try:
            # Subscribe, then fetch metadata before the first poll (see group_consumer_proc.py:
            # metadata fetched before subscribe() leaves kafka-python's subscribed partitions
            # unknown, its leader rejoins once, and 3.0.12 can lose that join's result).
            c.subscribe(["six"], listener=_PauseUntilGo(c, go, on_assign))
            assert "six" in c.topics()
            resumed = False
            while not stop.is_set():
                if go.is_set() and not resumed:
                    c.resume(*c.assignment())
                    resumed = True
                batches = c.poll(timeout_ms=100)
                got = [(r.partition, r.offset) for recs in batches.values() for r in recs]
                if got:
                    c.commit()  # synchronous, before the records count as processed
                    with cond:
                        seen[idx].extend(got)
                        cond.notify_all()
        except BaseException as e:  # surfaced by the main thread
            errors.append(e)
            with cond:
                cond.notify_all()
        finally:
            c.close()

    def balanced() -> bool:
        parts = [assignments.get(i, set()) for i in range(3)]
        return bool(errors) or (all(len(p) == 2 for p in parts) and set().union(*parts) == set(range(6)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_until(cond, balanced, 60, lambda: f"a balanced assignment, have {assignments}; broker log tail:\n"
                   + "\n".join(gbroker.lines[-30:]))
        assert not errors
        with cond:  # closing consumers leave the group at the end: later generations do not count
            balanced_assignment = {i: set(p) for i, p in assignments.items()}
        assert sorted(balanced_assignment.values(), key=min) == expected
        desc = admin.describe_groups([group])[group]
        assert (desc["group_state"], desc["protocol_data"], len(desc["members"])) == ("Stable", assignor.name, 3)
        go.set()
        wait_until(cond, lambda: bool(errors) or sum(len(s) for s in seen.values()) >= total, 120, "all records")
        assert not errors
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors
    everything = sorted(x for s in seen.values() for x in s)
    assert len(everything) == total
    assert everything == sorted((p, o) for p in range(6) for o in range(per_partition))  # each exactly once
    for i in range(3):
        assert {p for p, _ in seen[i]} == balanced_assignment[i]
    committed = admin.list_group_offsets({group: None})[group]
    assert {tp.partition: om.offset for tp, om in committed.items()} == {p: per_partition for p in range(6)}


# -- 2. a consumer process killed with SIGKILL -----------------------------------------------------------

class ConsumerProc:
    """`group_consumer_proc.py` in a subprocess; its stdout lines are parsed as they arrive."""

    def __init__(self, broker: BrokerProcess, topic: str, group: str, client_id: str, cond: threading.Condition,
                 hold_after: int = 0) -> None:
        self.client_id, self.cond = client_id, cond
        self.holding = False
        self.assignment: set[int] = set()
        self.assigned_at = 0.0  # time.monotonic() when the current assignment was reported
        self.records: list[tuple[int, int]] = []
        self.committed: dict[int, int] = {}
        self.failed_commits = 0
        self.proc = subprocess.Popen(
            [sys.executable, str(CONSUMER_SCRIPT), broker.bootstrap, topic, group, client_id, str(hold_after)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            with self.cond:
                if kind == "ASSIGN":
                    self.assignment = {int(p) for p in rest.split(",") if p}
                    self.assigned_at = time.monotonic()
                elif kind == "R":
                    p, o = rest.split()
                    self.records.append((int(p), int(o)))
                elif kind == "C":
                    for item in rest.split():
                        p, o = item.split(":")
                        self.committed[int(p)] = int(o)
                elif kind == "F":
                    self.failed_commits += 1
                elif kind == "HOLD":
                    self.holding = True
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def consumer_procs() -> Iterator[list[ConsumerProc]]:
    procs: list[ConsumerProc] = []
    yield procs
    for p in procs:
        p.stop()


def test_sigkilled_consumer_is_removed_and_survivors_resume_from_its_commits(
    gbroker: BrokerProcess, admin: KafkaAdminClient, consumer_procs: list[ConsumerProc],
) -> None:
    per_partition = 300
    admin.create_topics([NewTopic("kill", 6, 1)])
    cond = threading.Condition()
    for i in range(3):  # kc-0, the victim, stops before committing its batches past 100 records
        consumer_procs.append(ConsumerProc(gbroker, "kill", "kg", f"kc-{i}", cond, hold_after=100 if i == 0 else 0))
    victim, survivors = consumer_procs[0], consumer_procs[1:]

    def balanced() -> bool:
        parts = [p.assignment for p in consumer_procs]
        return not all(p.alive() for p in consumer_procs) or (
            all(len(p) == 2 for p in parts) and set().union(*parts) == set(range(6)))

    wait_until(cond, balanced, 60, "three consumers with two partitions each")
    assert all(p.alive() for p in consumer_procs)
    members = admin.describe_groups(["kg"])["kg"]["members"]
    victim_id = next(m["member_id"] for m in members if m["client_id"] == "kc-0")
    victim_parts = set(victim.assignment)

    produce(gbroker.bootstrap, "kill", 6, per_partition)
    # Kill it mid-stream: some of its records committed, one batch received but not committed,
    # the rest of its partitions still to do.
    wait_until(cond, lambda: victim.holding or not victim.alive(), 60, "the victim to hold uncommitted records")
    assert victim.alive() and victim.committed
    lines_before = len(gbroker.lines)
    victim.proc.kill()
    killed_at = time.monotonic()
    victim.proc.wait(10)
    # Issue 5: the failure log line and the rebalance (the survivors own the victim's partitions)
    # both within session timeout (6 s) + 1 s of the kill.
    bound = 6.0 + 1.0
    gbroker.wait_for_line(f"Member {victim_id} in group kg has failed, removing it from the group", 15, after=lines_before)
    detected = time.monotonic() - killed_at
    assert detected < bound, f"failure detected {detected:.2f}s after the kill (session timeout 6 s)"

    def survivors_own_all() -> bool:
        return sorted(set().union(*(s.assignment for s in survivors))) == list(range(6)) and all(
            len(s.assignment) == 3 for s in survivors)

    wait_until(cond, lambda: survivors_own_all() or not all(s.alive() for s in survivors), 30,
               lambda: f"the survivors to take over, have {[s.assignment for s in survivors]}; broker log tail:\n"
               + "\n".join(gbroker.lines[-30:]))
    assert all(s.alive() for s in survivors)
    with cond:
        rebalanced = max(s.assigned_at for s in survivors) - killed_at
    assert rebalanced < bound, (
        f"survivors owned the victim's partitions {rebalanced:.2f}s after the kill; broker log tail:\n"
        + "\n".join(gbroker.lines[lines_before:]))
    gbroker.wait_for_line("stabilized group", 5, after=lines_before)  # that rebalance, on the broker
    victim.reader.join(5)
    with cond:  # everything the victim printed before it died; its output is complete now
        victim_records, victim_committed = list(victim.records), dict(victim.committed)

    produce(gbroker.bootstrap, "kill", 6, per_partition, start=per_partition)  # more for everyone

    def all_consumed_and_committed() -> bool:
        got = {r for s in survivors for r in s.records} | set(victim_records)
        committed = {p: max(s.committed.get(p, 0) for s in survivors) for p in range(6)}
        return ((len(got) >= 6 * 2 * per_partition and all(o == 2 * per_partition for o in committed.values()))
                or not all(s.alive() for s in survivors))

    wait_until(cond, all_consumed_and_committed, 120, "every record consumed and committed")
    assert all(s.alive() for s in survivors)
    after_kill = [r for s in survivors for r in s.records]
    everything = {r for s in survivors for r in s.records} | set(victim_records)
    assert everything == {(p, o) for p in range(6) for o in range(2 * per_partition)}  # nothing lost
    resumed: dict[int, int] = {}
    duplicates = 0
    for p in victim_parts:
        taken_over = sorted(o for q, o in after_kill if q == p)
        resumed_at = resumed[p] = taken_over[0]
        # The survivor starts at the broker's committed offset: at or after what the victim
        # reported committed (it may have died between committing and printing), never below.
        assert resumed_at >= victim_committed.get(p, 0)
        # Below the resume point the victim processed everything (no gap) ...
        assert {o for q, o in victim_records if q == p} >= set(range(resumed_at))
        # ... and duplicates are only its uncommitted work.
        dups = {o for q, o in victim_records if q == p} & set(taken_over)
        assert all(o >= victim_committed.get(p, 0) for o in dups)
        duplicates += len(dups)
    assert duplicates > 0  # the batch it held uncommitted was delivered again
    for s in survivors:  # a survivor's records beyond the first generation: no duplicates among survivors
        assert len(s.records) == len(set(s.records))
    committed = admin.list_group_offsets({"kg": None})["kg"]
    assert {tp.partition: om.offset for tp, om in committed.items()} == {p: 2 * per_partition for p in range(6)}
    print(f"failure detected after {detected:.2f}s, survivors took over after {rebalanced:.2f}s; "
          f"victim committed {victim_committed}, received {len(victim_records)}, survivors resumed at {resumed}, "
          f"{duplicates} redelivered")


# -- 3. incremental cooperative-sticky rebalance ---------------------------------------------------------

def test_new_member_triggers_incremental_cooperative_rebalance(gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    import confluent_kafka

    admin.create_topics([NewTopic("coop6", 6, 1)])
    cond = threading.Condition()
    assigned: dict[str, set[int]] = {}
    events: list[tuple[str, str, set[int]]] = []

    def make(name: str) -> confluent_kafka.Consumer:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": gbroker.bootstrap, "group.id": "coop6", "client.id": name,
            "partition.assignment.strategy": "cooperative-sticky", "heartbeat.interval.ms": 100,
            "session.timeout.ms": 6000, "enable.auto.commit": False,
        })

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            with cond:
                got = {tp.partition for tp in parts}
                events.append((name, "assign", got))
                assigned[name] = assigned.get(name, set()) | got
                cond.notify_all()

        def on_revoke(consumer: Any, parts: list[Any]) -> None:
            with cond:
                lost = {tp.partition for tp in parts}
                events.append((name, "revoke", lost))
                assigned[name] = assigned.get(name, set()) - lost
                cond.notify_all()

        c.subscribe(["coop6"], on_assign=on_assign, on_revoke=on_revoke)
        return c

    def poll_until(consumers: list[confluent_kafka.Consumer], pred: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:  # callbacks run inside poll(): polling is what delivers the events
            with cond:
                if pred():
                    return
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {assigned} {events}"
            for c in consumers:
                c.poll(0.02)

    def split(names: list[str], sizes: list[int]) -> Callable[[], bool]:
        def pred() -> bool:
            parts = [assigned.get(n, set()) for n in names]
            return sorted(len(p) for p in parts) == sizes and set().union(*parts) == set(range(6))
        return pred

    c1, c2 = make("c1"), make("c2")
    consumers = [c1, c2]
    try:
        poll_until(consumers, split(["c1", "c2"], [3, 3]), 60, "two members with three partitions each")
        with cond:
            before = {n: set(assigned[n]) for n in ("c1", "c2")}
            mark = len(events)
        lines_before = len(gbroker.lines)
        consumers.append(make("c3"))
        poll_until(consumers, split(["c1", "c2", "c3"], [2, 2, 2]), 60, "three members with two partitions each")
        gbroker.wait_for_line("preparing to rebalance group", 5, after=lines_before)
        with cond:
            later = events[mark:]
            after = dict(assigned)
        revoked = {n: set().union(*[p for who, kind, p in later if who == n and kind == "revoke"]) for n in ("c1", "c2")}
        # Incremental: each existing member gives up exactly the one partition that moves, and is
        # never asked to revoke what it keeps.
        for n in ("c1", "c2"):
            assert revoked[n] == before[n] - after[n] and len(revoked[n]) == 1, (n, later)
            assert after[n] <= before[n]
        assert after["c3"] == revoked["c1"] | revoked["c2"]
        assert [p for who, kind, p in later if who == "c3" and kind == "revoke"] == []
        assert admin.describe_groups(["coop6"])["coop6"]["protocol_data"] == "cooperative-sticky"
    finally:
        for c in consumers:
            c.close()


# -- 4. committed offsets survive a broker SIGKILL -----------------------------------------------------

def test_committed_offsets_survive_broker_sigkill(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=FAST_GROUPS).start()
    port = b.port
    try:
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        a.create_topics([NewTopic("durable", 3, 1)])
        a.close()
        produce(b.bootstrap, "durable", 3, 20)
        tps = [TopicPartition("durable", p) for p in range(3)]
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="simple", enable_auto_commit=False)
        c.assign(tps)
        c.commit({tps[0]: OffsetAndMetadata(4, "four", -1), tps[1]: OffsetAndMetadata(7, "seven", -1),
                  tps[2]: OffsetAndMetadata(20, "", -1)})
        c.close()
        # And a managed group that commits through its generation, then overwrites once.
        m = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="managed", enable_auto_commit=False,
                          auto_offset_reset="earliest", heartbeat_interval_ms=100)
        m.subscribe(["durable"])
        got = 0
        for _ in range(300):
            got += sum(len(v) for v in m.poll(timeout_ms=100).values())
            if got >= 60:
                break
        assert got == 60
        m.commit({tps[0]: OffsetAndMetadata(1, "", -1)})
        m.commit()  # every position: 20 each
        b.kill()  # no shutdown, no flush beyond what the commit's acks=all already wrote
        m.close(autocommit=False, timeout_ms=2000)  # the broker is gone: nothing to leave

        b.start()
        assert b.port == port
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            simple = a.list_group_offsets({"simple": None})["simple"]
            assert {tp.partition: (om.offset, om.metadata) for tp, om in simple.items()} == {
                0: (4, "four"), 1: (7, "seven"), 2: (20, "")}
            managed = a.list_group_offsets({"managed": None})["managed"]
            assert {tp.partition: om.offset for tp, om in managed.items()} == {0: 20, 1: 20, 2: 20}
        finally:
            a.close()
        with RawConnection(b.port, "raw-group-test") as raw:
            assert raw.call(10, 3, FindCoordinatorRequest(key="simple", key_type=0)).error_code == 0
            resp = raw.call(9, 7, OffsetFetchRequest(group_id="simple", topics=[
                ofr.OffsetFetchRequestTopic(name="durable", partition_indexes=[0, 1, 2])]))
            assert resp.error_code == 0
            assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                    for p in resp.topics[0].partitions] == [(0, 4, "four", 0), (1, 7, "seven", 0), (2, 20, "", 0)]
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="simple", enable_auto_commit=False)
        c.assign(tps)
        try:
            assert [c.committed(tp) for tp in tps] == [4, 7, 20]
            records: list[tuple[int, int]] = []
            for _ in range(300):  # resumes from the committed offsets: 16 + 13 + 0 records
                records += [(r.partition, r.offset) for rs in c.poll(timeout_ms=100).values() for r in rs]
                if len(records) >= 29:
                    break
            assert sorted(records) == [(0, o) for o in range(4, 20)] + [(1, o) for o in range(7, 20)]
        finally:
            c.close()
    finally:
        b.stop()


def test_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    gbroker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    """KIP-345 with a real client: a static member (group.instance.id) that closes and comes back
    within the session timeout gets the same partitions, and the other member sees no rebalance
    at all (no revoke, no new assignment): the generation did not move."""
    from confluent_kafka import Consumer

    admin.create_topics([NewTopic("static", 4, 1)])
    events: dict[str, list[tuple[str, list[int]]]] = {"a": [], "b": []}

    def make(instance: str) -> Any:
        c = Consumer({
            "bootstrap.servers": gbroker.bootstrap, "group.id": "static-g", "group.instance.id": instance,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, "enable.auto.commit": False,
            "partition.assignment.strategy": "range",
        })
        c.subscribe(
            ["static"],
            on_assign=lambda _c, ps: events[instance].append(("assign", sorted(p.partition for p in ps))),
            on_revoke=lambda _c, ps: events[instance].append(("revoke", sorted(p.partition for p in ps))),
        )
        return c

    def poll_until(consumers: list[Any], done: Callable[[], bool], seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while not done():
            assert time.monotonic() < deadline, events
            for c in consumers:
                c.poll(0.05)

    a, b = make("a"), make("b")
    try:
        poll_until([a, b], lambda: bool(events["a"]) and bool(events["b"])
                   and len(events["a"][-1][1]) + len(events["b"][-1][1]) == 4
                   and events["a"][-1][0] == "assign" and events["b"][-1][0] == "assign")
        a_parts = events["a"][-1][1]
        b_history = list(events["b"])
        a.close()  # a static member does not leave the group on close
        events["a"].clear()
        a = make("a")
        poll_until([a, b], lambda: bool(events["a"]) and events["a"][-1][0] == "assign")
        assert events["a"][-1][1] == a_parts
        for _ in range(20):  # b keeps polling (and heartbeating) through a's restart
            b.poll(0.05)
        assert events["b"] == b_history  # no revoke, no reassignment: no rebalance happened
    finally:
        a.close()
        b.close()
