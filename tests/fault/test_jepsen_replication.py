"""Jepsen-style replication checker (issue #15's fault tests), after Jepsen's Kafka workload.

A 3-broker ZooKeeper-mode cluster, each broker in its own network namespace (tests/fault/netns.py).
One topic, 3 partitions, replication factor 3, min.insync.replicas=2. Several idempotent
kafka-python producers send with acks=all, every value unique, and one more with acks=1 (whose
losses are allowed, and counted); a live consumer reads along from the start of every partition. Meanwhile a nemesis injects faults one after the other, at random
moments and for random durations (seeded, the seed is printed):

- kill-leader: kill -9 the leader of a random partition, restart it after a while;
- kill-two: kill -9 that leader and another broker, restart both (meanwhile acks=all cannot be
  satisfied: min.insync.replicas=2);
- pause-leader: SIGSTOP the leader for longer than its ZooKeeper session, then SIGCONT (a zombie
  leader must not acknowledge acks=all writes);
- isolate-leader: cut the leader off from the other brokers and ZooKeeper while the clients still
  reach it, longer than the session, then heal;
- isolate-follower: cut a follower off from the other brokers (the ISR shrinks, then expands).

Between two faults the cluster must recover (every partition led, all three replicas in the ISR).
At the end the faults are healed, and two fresh consumers read every partition to its end.

The checker fails on:
- lost: a record acknowledged (acks=all) that the final read does not have;
- moved: a record acknowledged at an offset but read at another;
- duplicated: a value read at two different offsets;
- divergent: two different values at one offset (the two final reads differ, or the live consumer
  saw a value at an offset that later holds another).
Records whose send failed (indeterminate) may or may not be there; they are counted.

`make test` runs one short run (two faults); ODRADEK_FAULT_FULL=1 (`make fault`) runs several
seeds with many faults each and prints the table (also appended to $ODRADEK_FAULT_TABLE if set).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fault.netns import IDS, NetnsCluster, available

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

FULL = os.environ.get("ODRADEK_FAULT_FULL") == "1"
TOPIC = "jepsen"
PARTITIONS = 3
ASSIGNMENT = {p: [IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)}
SESSION_MS = 3000
PRODUCERS = 3
RATE = 300  # records/s per producer: a steady load through every fault of a long run
MAX_RECORDS_PER_PRODUCER = 200_000  # a bound; the run's end normally stops the producers first
RECOVER_S = 45.0
SCENARIOS = ("kill-leader", "kill-two", "pause-leader", "isolate-leader", "isolate-follower")

UNAVAILABLE = available()
needs_netns = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")


@dataclass
class History:
    """What the clients and the nemesis did, with times relative to the run's start."""

    t0: float = field(default_factory=time.monotonic)
    acked: dict[bytes, tuple[int, int, float]] = field(default_factory=dict)  # value -> partition, offset, t
    acked1: dict[bytes, tuple[int, int, float]] = field(default_factory=dict)  # the same, of acks=1 sends
    failed: dict[bytes, str] = field(default_factory=dict)  # value -> error of a send not acknowledged
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)  # live consumer: (partition, offset) -> value
    seen_conflicts: list[tuple[int, int, bytes, bytes, float]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def event(self, text: str) -> None:
        self.events.append((round(self.now(), 2), text))


def produce(cluster: NetnsCluster, k: int, history: History, stop: threading.Event) -> None:
    """Producer k: acks=all, idempotent, unique values p<k>-<seq>, round robin over the partitions,
    at most RATE a second; up to 10 sends in flight, then each is resolved (bounded by
    delivery_timeout_ms). Producer k == PRODUCERS is the acks=1 one (values a<k>-<seq>, no retries:
    a retry without idempotence could write a record twice): its losses are allowed, counted."""
    acks1 = k == PRODUCERS
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks=1 if acks1 else "all",
                             enable_idempotence=not acks1, retries=0 if acks1 else 2**31 - 1,
                             linger_ms=1, request_timeout_ms=4000, delivery_timeout_ms=20_000, max_block_ms=10_000,
                             retry_backoff_ms=100, reconnect_backoff_max_ms=500, metadata_max_age_ms=2000)
    acked = history.acked1 if acks1 else history.acked
    try:
        seq = 0
        start = time.monotonic()
        while not stop.is_set() and seq < MAX_RECORDS_PER_PRODUCER:
            ahead = seq / RATE - (time.monotonic() - start)
            if ahead > 0 and stop.wait(ahead):  # pacing (the stop event ends it early)
                break
            futures = []
            for _ in range(10):
                value = b"%s%d-%06d" % (b"a" if acks1 else b"p", k, seq)
                try:
                    futures.append((value, producer.send(TOPIC, value, partition=seq % PARTITIONS)))
                except Exception as e:  # every failure is an indeterminate send
                    history.failed[value] = repr(e)
                seq += 1
            for value, f in futures:
                try:
                    md = f.get(timeout=30)
                    acked[value] = (md.partition, md.offset, history.now())
                except Exception as e:  # every failure is an indeterminate send
                    history.failed[value] = repr(e)
    finally:
        try:
            producer.close(timeout=10)
        except Exception as e:  # sends still unresolved at close are indeterminate already
            history.event(f"producer {k} close: {e!r}")


def consume_along(cluster: NetnsCluster, history: History, stop: threading.Event) -> None:
    """The live consumer: every partition from the start, remembering each offset's value."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=5000, metadata_max_age_ms=2000,
                             reconnect_backoff_max_ms=500, fetch_max_wait_ms=200)
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while not stop.is_set():
            for records in consumer.poll(timeout_ms=200).values():
                for r in records:
                    old = history.seen.setdefault((r.partition, r.offset), r.value)
                    if old != r.value:
                        history.seen_conflicts.append((r.partition, r.offset, old, r.value, history.now()))
    finally:
        consumer.close()


def read_everything(cluster: NetnsCluster, deadline_s: float = 60.0) -> dict[tuple[int, int], bytes]:
    """A fresh consumer reads every partition to its end offset (as of now), bounded."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=10_000)
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + deadline_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"final read not done in {deadline_s}s: at "
                                     f"{[consumer.position(tp) for tp in tps]} of {ends}")
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    out[(r.partition, r.offset)] = r.value
        return out
    finally:
        consumer.close()


ANOMALIES = ("lost", "moved", "duplicated", "divergent")


def check(history: History, reads: list[dict[tuple[int, int], bytes]]) -> dict[str, Any]:
    """The anomalies (see the module docstring) and the counts."""
    final = reads[0]
    where: dict[bytes, list[tuple[int, int]]] = {}
    for at, v in final.items():
        where.setdefault(v, []).append(at)
    lost = {v: a for v, a in history.acked.items() if v not in where}
    moved = {v: (a[:2], where[v]) for v, a in history.acked.items() if v in where and a[:2] not in where[v]}
    duplicated = {v: at for v, at in where.items() if len(at) > 1}
    divergent = [(at, final.get(at), other.get(at)) for other in reads[1:] for at in set(final) | set(other)
                 if final.get(at) != other.get(at)]
    divergent += [((p, o), old, new) for p, o, old, new, _t in history.seen_conflicts]
    divergent += [(at, v, final.get(at)) for at, v in history.seen.items() if at in final and final[at] != v]
    lost_seen = {v for v in history.failed if v in where}
    return {
        "acked": len(history.acked), "indeterminate": len(history.failed),
        "acks1_acked": len(history.acked1), "acks1_lost": sum(v not in where for v in history.acked1),
        "indeterminate_present": len(lost_seen), "read": len(final), "seen_live": len(history.seen),
        "lost": lost, "moved": moved, "duplicated": duplicated, "divergent": divergent,
    }


def leader_of(view: dict[str, Any], p: int) -> int:
    return view["topics"][TOPIC][2][p][1]


def healthy(view: dict[str, Any]) -> bool:
    parts = view["topics"].get(TOPIC, (0, None, {}))[2]
    return len(parts) == PARTITIONS and all(s[0] == 0 and s[1] in IDS and sorted(s[4]) == list(IDS)
                                            for s in parts.values())


async def inject(cluster: NetnsCluster, history: History, rng: random.Random, name: str, victim: int) -> None:
    """One fault on broker `victim`, held until it took effect (the others saw its session expire,
    or the ISRs shrink) and a random while more, then undone."""
    b = cluster.brokers[victim]
    assert b.proc is not None
    others = [i for i in IDS if i != victim]

    async def expired(gone: tuple[int, ...] = (victim,)) -> None:
        """Until the other brokers no longer list the victims (their ZooKeeper sessions expired):
        the proof that the fault took effect."""
        await cluster.until_all_agree(lambda m: not set(gone) & {x[0] for x in m["brokers"]},
                                      f"broker {gone}'s session expired", among=[i for i in IDS if i not in gone],
                                      timeout=RECOVER_S)
        history.event(f"broker {gone}'s session expired")

    if name == "kill-leader":
        b.kill()
        await asyncio.sleep(rng.uniform(0.2, 3.0))
        # as Kafka's, a broker restarted before its old session expired refuses to start
        # (its /brokers/ids znode still belongs to the old session): wait for the expiry
        await expired()
        history.event(f"restart broker {victim}")
        await asyncio.to_thread(b.start)
    elif name == "kill-two":
        second = rng.choice(others)
        history.event(f"kill broker {second} too")
        b.kill()
        cluster.brokers[second].kill()
        await asyncio.sleep(rng.uniform(0.2, 3.0))
        await expired((victim, second))
        for i in rng.sample([victim, second], 2):
            history.event(f"restart broker {i}")
            await asyncio.to_thread(cluster.brokers[i].start)
    elif name == "pause-leader":
        b.proc.send_signal(signal.SIGSTOP)
        await expired()
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        history.event(f"SIGCONT broker {victim}")
        b.proc.send_signal(signal.SIGCONT)
    elif name == "isolate-leader":
        cluster.cut(victim, peers=True, zookeeper=True)
        await expired()
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        history.event(f"heal broker {victim}")
        cluster.heal(victim)
    else:
        # still in ZooKeeper, the victim keeps leading what it led (with its ISR frozen: the
        # controller is out of its reach, as in Kafka); the partitions it follows drop it
        cluster.cut(victim, peers=True)
        await cluster.until_all_agree(
            lambda m: all(victim not in s[4] for s in m["topics"][TOPIC][2].values() if s[1] != victim),
            f"broker {victim} out of the ISRs of the partitions it follows", among=others, timeout=RECOVER_S)
        history.event(f"broker {victim} out of the ISRs it follows")
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        history.event(f"heal broker {victim}")
        cluster.heal(victim)


async def nemesis(cluster: NetnsCluster, history: History, rng: random.Random, faults: list[str],
                  counts: dict[str, int]) -> None:
    """Inject `faults` in order; before each, wait for a healthy cluster and a random while."""
    for name in faults:
        view = await cluster.until_all_agree(healthy, f"recovered before {name}", timeout=RECOVER_S)
        await asyncio.sleep(rng.uniform(0.5, 2.0))
        p = rng.randrange(PARTITIONS)
        leader = leader_of(view, p)
        # a follower cut from its peers leaves the ISRs through the controller (AlterPartition): when
        # it is the controller itself, no ISR can change (as in Kafka) -- so not the controller
        victim = leader if name != "isolate-follower" else rng.choice(
            [i for i in IDS if i not in (leader, view["controller_id"])])
        history.event(f"{name} broker {victim} (partition {p}, leaders "
                      f"{[leader_of(view, q) for q in range(PARTITIONS)]}, epochs "
                      f"{[view['topics'][TOPIC][2][q][2] for q in range(PARTITIONS)]})")
        await inject(cluster, history, rng, name, victim)
        counts[name] = counts.get(name, 0) + 1
    view = await cluster.until_all_agree(healthy, "recovered after the last fault", timeout=RECOVER_S)
    history.event(f"recovered, leaders {[leader_of(view, q) for q in range(PARTITIONS)]}")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NetnsCluster]:
    c = NetnsCluster(tmp_path, (f"replica.lag.time.max.ms={SESSION_MS // 2}", "min.insync.replicas=2",
                                "auto.leader.rebalance.enable=false"), session_ms=SESSION_MS)
    try:
        await c.open()
        yield c
    finally:
        await c.close()


async def run(cluster: NetnsCluster, tmp_path: Path, seed: int, faults: list[str]) -> dict[str, Any]:
    """One run: the workload under `faults`, then the final reads and the check."""
    rng = random.Random(seed)
    await asyncio.to_thread(cluster.create_topic, TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
    await cluster.until_all_agree(healthy, "the topic created")
    history = History()
    stop = threading.Event()
    threads = [threading.Thread(target=produce, args=(cluster, k, history, stop), daemon=True)
               for k in range(PRODUCERS + 1)]
    threads.append(threading.Thread(target=consume_along, args=(cluster, history, stop), daemon=True))
    for t in threads:
        t.start()
    counts: dict[str, int] = {}
    try:
        await nemesis(cluster, history, rng, faults, counts)
        await asyncio.sleep(1.0)  # the producers write on the recovered cluster too
    except AssertionError as e:
        _dump_logs(cluster, tmp_path)
        raise AssertionError(f"seed {seed}: {e}\nevents: {history.events}\nbroker logs in {tmp_path}") from e
    finally:
        stop.set()
        cluster.heal()
        for t in threads:
            await asyncio.to_thread(t.join, 60)
    assert not any(t.is_alive() for t in threads), "a client thread did not end within its bounds"
    reads = [await asyncio.to_thread(read_everything, cluster) for _ in range(2)]
    result = check(history, reads)
    result["faults"] = counts
    result["seed"] = seed
    result["seconds"] = round(history.now(), 1)
    anomalies = {k: result[k] for k in ANOMALIES if result[k]}
    if anomalies:
        _dump_logs(cluster, tmp_path)
        history.events.sort()
        raise AssertionError(
            f"seed {seed}: anomalies {_short(anomalies)}\ncounts { {k: v for k, v in result.items() if k not in anomalies} }"
            f"\nacked at: { {v: history.acked.get(v) for v in list(result['lost'])[:10]} }"
            f"\nevents: {history.events}\nbroker logs in {tmp_path}")
    return result


def _dump_logs(cluster: NetnsCluster, tmp_path: Path) -> None:
    for i, b in cluster.brokers.items():
        (tmp_path / f"broker-{i}.log").write_text(b.log_text())


def _short(anomalies: dict[str, Any]) -> dict[str, Any]:
    return {k: (len(v), list(v.items())[:10] if isinstance(v, dict) else v[:10]) for k, v in anomalies.items()}


def _report(result: dict[str, Any]) -> None:
    line = (f"seed {result['seed']}: {result['seconds']}s faults {result['faults']} acked {result['acked']} "
            f"indeterminate {result['indeterminate']} (present {result['indeterminate_present']}) "
            f"read {result['read']} lost 0 moved 0 duplicated 0 divergent 0; acks=1: acked "
            f"{result['acks1_acked']} lost {result['acks1_lost']} (allowed)")
    print(line)
    if os.environ.get("ODRADEK_FAULT_TABLE"):
        with open(os.environ["ODRADEK_FAULT_TABLE"], "a") as f:
            f.write(line + "\n")


@needs_netns
async def test_acks_all_survives_leader_kill_and_isolation(cluster, tmp_path):
    """The `make test` subset: one kill -9 of a leader, one leader isolated from the other brokers
    and ZooKeeper (clients still reach it) for longer than its session."""
    _report(await run(cluster, tmp_path, seed=15, faults=["kill-leader", "isolate-leader"]))


@pytest.mark.skipif(not FULL, reason="the long Jepsen-style runs: ODRADEK_FAULT_FULL=1 (make fault)")
@pytest.mark.parametrize("seed", [1, 2, 3])
@needs_netns
async def test_jepsen_run(cluster, tmp_path, seed):
    rng = random.Random(seed * 7919)
    faults = [s for s in SCENARIOS for _ in range(3)]
    rng.shuffle(faults)
    _report(await run(cluster, tmp_path, seed=seed, faults=faults))


def test_checker_finds_each_anomaly():
    """The checker itself (pure logic): each anomaly of a made-up history is reported, and a clean
    history has none."""
    h = History()
    h.acked = {b"a": (0, 0, 0.1), b"b": (0, 1, 0.2), b"c": (0, 2, 0.3), b"d": (1, 0, 0.4)}
    h.failed = {b"e": "KafkaTimeoutError"}
    clean = {(0, 0): b"a", (0, 1): b"b", (0, 2): b"c", (1, 0): b"d"}
    assert {k: v for k, v in check(h, [clean, dict(clean)]).items() if k in ANOMALIES} == {
        "lost": {}, "moved": {}, "duplicated": {}, "divergent": []}
    # b lost, c moved to offset 3 (and duplicated), e (indeterminate) present
    final = {(0, 0): b"a", (0, 1): b"e", (0, 2): b"c", (0, 3): b"c", (1, 0): b"d"}
    h.seen = {(0, 1): b"b"}  # the live consumer saw b at (0, 1), which now holds e
    r = check(h, [final, {**final, (1, 0): b"x"}])
    assert r["lost"] == {b"b": (0, 1, 0.2)}
    assert r["duplicated"] == {b"c": [(0, 2), (0, 3)]}
    assert r["moved"] == {}  # c is also at its acknowledged offset
    assert sorted(r["divergent"]) == [((0, 1), b"b", b"e"), ((1, 0), b"d", b"x")]
    assert r["indeterminate_present"] == 1
    r = check(h, [{(0, 0): b"a", (0, 1): b"b", (0, 3): b"c", (1, 0): b"d"}])
    assert r["moved"] == {b"c": ((0, 2), [(0, 3)])}
