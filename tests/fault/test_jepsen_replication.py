"""Jepsen-style replication checker (issue #15's fault tests), after Jepsen's Kafka workload.

A 3-broker ZooKeeper-mode cluster, each broker in its own network namespace (tests/fault/netns.py).
One topic, 3 partitions, replication factor 3, min.insync.replicas=2. Several idempotent
kafka-python producers send with acks=all, every value unique, and one more with acks=1 (whose
losses are allowed, and counted); a live consumer reads along from the start of every partition,
and a consumer-group member reads too, committing (synchronously) what it read after each poll and
reading the group's committed offsets back every half second. Meanwhile a nemesis injects faults
one after the other, at random moments and for random durations (seeded, the seed is printed):

- kill-leader: kill -9 the leader of a random partition, restart it after a while;
- kill-two: kill -9 that leader and another broker, restart both (meanwhile acks=all cannot be
  satisfied: min.insync.replicas=2);
- pause-leader: SIGSTOP the leader for longer than its ZooKeeper session, then SIGCONT (a zombie
  leader must not acknowledge acks=all writes);
- isolate-leader: cut the leader off from the other brokers and ZooKeeper while the clients still
  reach it, longer than the session, then heal;
- isolate-follower: cut a follower off from the other brokers (the ISR shrinks, then expands);
- rolling-restart: SIGTERM each broker in turn (a controlled shutdown: the controller moves its
  leaderships away first), wait for it to exit, restart it, and wait for full ISRs before the next;
- torn-log-dir: kill -9 the leader, and while it is down cut 1 byte to 4 KiB off the active
  segment of some of its jepsen partitions (and maybe append garbage to another's), then restart
  it: it must truncate the torn tail and fetch again from the new leader.

Between two faults the cluster must recover (every partition led, all three replicas in the ISR).
At the end the faults are healed, and two fresh consumers read every partition to its end.

The checker fails on:
- lost: a record acknowledged (acks=all) that the final read does not have;
- moved: a record acknowledged at an offset but read at another;
- duplicated: a value read at two different offsets;
- divergent: two different values at one offset (the two final reads differ, or the live consumer
  saw a value at an offset that later holds another);
- offsets-backwards: the group's committed offset of a partition, read back, is lower than one read
  back or successfully committed before (the member never commits below what it saw: its own
  position may go back after a rejoin, the group's committed offsets must not);
- idle-periods: a fault period (before the first fault, or from one fault's injection to the
  next's) with fewer than MIN_ACKED_PER_PERIOD acks=all acknowledgements: the run tested nothing
  there.
Records whose send failed (indeterminate) may or may not be there; they are counted.

`make test` runs two short runs (two faults each); ODRADEK_FAULT_FULL=1 (`make fault`) runs
FULL_SEEDS seeds of FAULTS_PER_SEED faults (every scenario at least twice a seed, at least 100
trials in all) and prints a line per seed and, at the end, a table per scenario (both also appended
to $ODRADEK_FAULT_TABLE if set). The table attributes each acknowledged record (and each lost or
duplicated one) to the fault whose period -- from its injection to the next fault's -- holds the
moment it was acknowledged.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import os
import random
import signal
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fault.netns import IDS, NetnsCluster, available

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

FULL = os.environ.get("ODRADEK_FAULT_FULL") == "1"
TOPIC = "jepsen"
PARTITIONS = 3
ASSIGNMENT = {p: [IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)}
SESSION_MS = 3000
PRODUCERS = 3
RATE = 300  # records/s per producer: a steady load through every fault of a long run
MAX_RECORDS_PER_PRODUCER = 200_000  # a bound; the run's end normally stops the producers first
RECOVER_S = 45.0
SCENARIOS = ("kill-leader", "kill-two", "pause-leader", "isolate-leader", "isolate-follower", "rolling-restart",
             "torn-log-dir")
FULL_SEEDS = 7
FAULTS_PER_SEED = 15  # each scenario twice and one more: 7 x 15 = 105 trials
GROUP = "jepsen-group"
READ_BACK_S = 0.5  # how often the group member reads its group's committed offsets back
TEAR_MAX = 4096  # torn-log-dir cuts 1..TEAR_MAX bytes (never more than the segment holds)

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
    # the group member, in the order it happened: ("commit" | "read", partition, offset, t); a read
    # of no committed offset is -1
    group_log: list[tuple[str, int, int, float]] = field(default_factory=list)
    group_errors: int = 0  # commits and read-backs that failed (retried on the next poll)
    group_rewinds: int = 0  # polls that gave records below what was committed (re-read after a rejoin)
    faults: list[tuple[float, str]] = field(default_factory=list)  # (injected at, scenario)
    healthy_after: list[float] = field(default_factory=list)  # seconds from each fault to full ISRs
    controlled_shutdowns: list[bool] = field(default_factory=list)  # rolling-restart: each one's success
    tears: list[tuple[str, int]] = field(default_factory=list)  # torn-log-dir: ("cut" | "garbage", bytes)
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


def consume_in_group(cluster: NetnsCluster, history: History, stop: threading.Event) -> None:
    """The consumer-group member: subscribes to the topic in GROUP, commits synchronously what each
    poll gave, and every READ_BACK_S reads the committed offsets back (OffsetFetch). It commits an
    offset only above the highest it saw committed or read back for that partition, so the group's
    committed offsets can only grow unless the cluster loses or regresses them. A read-back after
    one that failed is not recorded: kafka-python hands the next call the request still in flight,
    sent before the commits in between."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), group_id=GROUP, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=1000,
                             request_timeout_ms=5000, metadata_max_age_ms=2000, reconnect_backoff_max_ms=500,
                             retry_backoff_ms=100, fetch_max_wait_ms=200, max_poll_records=2000)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    high = dict.fromkeys(range(PARTITIONS), -1)
    tainted: set[int] = set()
    next_read = 0.0
    try:
        consumer.subscribe([TOPIC])
        while not stop.is_set():
            offsets = {}
            for tp, records in consumer.poll(timeout_ms=200).items():
                if records[0].offset < high[tp.partition]:
                    history.group_rewinds += 1
                if records[-1].offset + 1 > high[tp.partition]:
                    offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
            if offsets:
                try:
                    consumer.commit(offsets, timeout_ms=5000)
                except Exception:  # not committed (or not known to be): the next poll's commit covers it
                    history.group_errors += 1
                else:
                    t = history.now()
                    for tp, om in offsets.items():
                        history.group_log.append(("commit", tp.partition, om.offset, t))
                        high[tp.partition] = max(high[tp.partition], om.offset)
            if time.monotonic() >= next_read:
                next_read = time.monotonic() + READ_BACK_S
                for tp in tps:
                    try:
                        committed = consumer.committed(tp, timeout_ms=3000)
                    except Exception:
                        history.group_errors += 1
                        tainted.add(tp.partition)
                        continue
                    if tp.partition in tainted:  # possibly the answer to an older request
                        tainted.discard(tp.partition)
                        continue
                    offset = -1 if committed is None else committed
                    history.group_log.append(("read", tp.partition, offset, history.now()))
                    high[tp.partition] = max(high[tp.partition], offset)
    finally:
        consumer.close(autocommit=False, timeout_ms=5000)


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


ANOMALIES = ("lost", "moved", "duplicated", "divergent", "offsets-backwards", "idle-periods")
# each fault period must hold at least this many acks=all acknowledgements: a run whose producers
# were stalled (or never started) would otherwise pass with nothing to lose (issue #20 §4)
MIN_ACKED_PER_PERIOD = 10


def offsets_backwards(group_log: list[tuple[str, int, int, float]]) -> list[tuple[int, int, int, float]]:
    """(partition, offset read back, the highest committed or read back before it, t) for each
    read-back below an earlier commit or read-back of its partition."""
    high: dict[int, int] = {}
    out = []
    for kind, p, offset, t in group_log:
        if kind == "read" and offset < high.get(p, -1):
            out.append((p, offset, high[p], t))
        high[p] = max(high.get(p, -1), offset)
    return out


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
    starts = [t for t, _ in history.faults]
    per_period = [0] * (len(starts) + 1)  # [before the 1st fault, after the 1st, ...]
    for _p, _o, t in history.acked.values():
        per_period[bisect.bisect_right(starts, t)] += 1
    names = [BEFORE] + [name for _, name in history.faults]
    idle = [(names[i], n) for i, n in enumerate(per_period) if n < MIN_ACKED_PER_PERIOD]
    return {
        "acked": len(history.acked), "indeterminate": len(history.failed),
        "acks1_acked": len(history.acked1), "acks1_lost": sum(v not in where for v in history.acked1),
        "indeterminate_present": len(lost_seen), "read": len(final), "seen_live": len(history.seen),
        "group_commits": sum(k == "commit" for k, *_ in history.group_log),
        "group_reads": sum(k == "read" for k, *_ in history.group_log),
        "group_errors": history.group_errors, "group_rewinds": history.group_rewinds,
        "lost": lost, "moved": moved, "duplicated": duplicated, "divergent": divergent,
        "offsets-backwards": offsets_backwards(history.group_log), "idle-periods": idle,
    }


def leader_of(view: dict[str, Any], p: int) -> int:
    return view["topics"][TOPIC][2][p][1]


def healthy(view: dict[str, Any]) -> bool:
    parts = view["topics"].get(TOPIC, (0, None, {}))[2]
    return len(parts) == PARTITIONS and all(s[0] == 0 and s[1] in IDS and sorted(s[4]) == list(IDS)
                                            for s in parts.values())


def tear(log_dir: Path, history: History, rng: random.Random) -> None:
    """A crash's torn writes in a stopped broker's log dir: 1..TEAR_MAX bytes (at most the file)
    cut off the active segment (the newest .log) of a random non-empty subset of the jepsen
    partition directories; half the time also random bytes appended to another's."""
    active = {}
    for q in range(PARTITIONS):
        segments = sorted((log_dir / f"{TOPIC}-{q}").glob("*.log"))
        if segments:
            active[q] = segments[-1]
    assert active, f"no {TOPIC} partition directory in {log_dir}"
    torn = rng.sample(sorted(active), rng.randint(1, len(active)))
    for q in torn:
        size = active[q].stat().st_size
        if size == 0:
            history.event(f"{active[q].parent.name}/{active[q].name} is empty: nothing to cut")
            continue
        cut = rng.randint(1, min(size, TEAR_MAX))
        os.truncate(active[q], size - cut)
        history.tears.append(("cut", cut))
        history.event(f"cut {cut} of {size} bytes off {active[q].parent.name}/{active[q].name}")
    if rng.random() < 0.5:
        q = rng.choice([q for q in sorted(active) if q not in torn] or torn)
        garbage = rng.randbytes(rng.randint(1, TEAR_MAX))
        with open(active[q], "ab") as f:
            f.write(garbage)
        history.tears.append(("garbage", len(garbage)))
        history.event(f"appended {len(garbage)} garbage bytes to {active[q].parent.name}/{active[q].name}")


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
    elif name == "rolling-restart":
        for i in [victim, *rng.sample(others, 2)]:
            broker = cluster.brokers[i]
            mark = len(broker.lines)
            history.event(f"SIGTERM broker {i}")
            code = await asyncio.to_thread(broker.stop, 60)
            controlled = any("Controlled shutdown request returned successfully" in line
                             for line in broker.lines[mark:])
            history.event(f"broker {i} exited {code}, controlled shutdown {'done' if controlled else 'FAILED'}")
            history.controlled_shutdowns.append(controlled)
            assert code == 0, f"broker {i} exited {code} after SIGTERM"
            await asyncio.to_thread(broker.start)
            history.event(f"restarted broker {i}")
            await cluster.until_all_agree(healthy, f"full ISRs after broker {i}'s restart", timeout=RECOVER_S)
            history.event(f"full ISRs after broker {i}'s restart")
    elif name == "torn-log-dir":
        b.kill()
        await expired()
        tear(b.log_dir, history, rng)
        history.event(f"restart broker {victim}")
        mark = len(b.lines)
        await asyncio.to_thread(b.start)
        # a cut that ends on a batch boundary leaves nothing invalid: counted, not required
        truncated = [line for line in b.lines[mark:] if "invalid bytes at the end of segment" in line
                     and f"/{TOPIC}-" in line]
        history.tears.append(("truncated", len(truncated)))
        history.event(f"broker {victim} recovered: {truncated}")
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
        if history.faults:
            history.healthy_after.append(round(history.now() - history.faults[-1][0], 2))
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
        history.faults.append((history.now(), name))
        await inject(cluster, history, rng, name, victim)
        counts[name] = counts.get(name, 0) + 1
    view = await cluster.until_all_agree(healthy, "recovered after the last fault", timeout=RECOVER_S)
    if history.faults:
        history.healthy_after.append(round(history.now() - history.faults[-1][0], 2))
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
    threads.append(threading.Thread(target=consume_in_group, args=(cluster, history, stop), daemon=True))
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
    result["controlled_shutdowns"] = (sum(history.controlled_shutdowns), len(history.controlled_shutdowns))
    result["tears"] = {k: (sum(1 for x, _ in history.tears if x == k), sum(n for x, n in history.tears if x == k))
                       for k in ("cut", "garbage", "truncated")}
    anomalies = {k: result[k] for k in ANOMALIES if result[k]}
    _tally(history, result, set(reads[0].values()))
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
    ok, tried = result["controlled_shutdowns"]
    (cuts, cut), (garbages, garbage) = result["tears"]["cut"], result["tears"]["garbage"]
    truncated = result["tears"]["truncated"][1]
    line = (f"seed {result['seed']}: {result['seconds']}s faults {result['faults']} acked {result['acked']} "
            f"indeterminate {result['indeterminate']} (present {result['indeterminate_present']}) "
            f"read {result['read']} lost 0 moved 0 duplicated 0 divergent 0; acks=1: acked "
            f"{result['acks1_acked']} lost {result['acks1_lost']} (allowed); group: {result['group_commits']} "
            f"commits, {result['group_reads']} read-backs, 0 backwards ({result['group_errors']} failed, "
            f"{result['group_rewinds']} re-reads after a rejoin); controlled shutdowns {ok} of {tried}; "
            f"torn: {cuts} segments cut ({cut} bytes), {garbages} garbage appends ({garbage} bytes), "
            f"{truncated} torn tails truncated by recovery")
    _SEED_LINES.append(line)
    _emit(line)


def _emit(line: str, reporter: Any = None) -> None:
    """Print a line (through pytest's terminal reporter when given: shown without -s) and append
    it to $ODRADEK_FAULT_TABLE if set."""
    if reporter is not None:
        reporter.write_line(line)
    else:
        print(line)
    if os.environ.get("ODRADEK_FAULT_TABLE"):
        with open(os.environ["ODRADEK_FAULT_TABLE"], "a") as f:
            f.write(line + "\n")


# the per-scenario table over every run of the session: scenario -> column -> sum
TABLE_COLUMNS = ("trials", "acked", "lost", "duplicated", "acks1_acked", "acks1_lost", "offsets_backwards",
                 "to_healthy_s")
_TABLE: dict[str, dict[str, float]] = {}
_TABLE_SEEDS: list[int] = []
_SEED_LINES: list[str] = []  # the runs' lines, printed again above the table
BEFORE = "(before 1st fault)"


def _tally(history: History, result: dict[str, Any], present: set[bytes]) -> None:
    """Add a run to the table: each record to the fault whose period (its injection to the next
    one's) holds the moment the record was acknowledged (lost, duplicated, backwards likewise)."""
    starts = [t for t, _ in history.faults]

    def period(t: float | None) -> str:
        if t is None:
            return "(not acknowledged)"
        i = bisect.bisect_right(starts, t) - 1
        return BEFORE if i < 0 else history.faults[i][1]

    def add(name: str, column: str, n: float = 1) -> None:
        row = _TABLE.setdefault(name, dict.fromkeys(TABLE_COLUMNS, 0))
        row[column] += n

    for (_, name), seconds in zip(history.faults, history.healthy_after, strict=False):
        add(name, "trials")
        add(name, "to_healthy_s", seconds)
    for v, (_p, _o, t) in history.acked.items():
        add(period(t), "acked")
        if v not in present:
            add(period(t), "lost")
    for v, (_p, _o, t) in history.acked1.items():
        add(period(t), "acks1_acked")
        if v not in present:
            add(period(t), "acks1_lost")
    for v in result["duplicated"]:
        at = history.acked.get(v) or history.acked1.get(v)
        add(period(at[2] if at else None), "duplicated")
    for _p, _o, _high, t in result["offsets-backwards"]:
        add(period(t), "offsets_backwards")
    _TABLE_SEEDS.append(result["seed"])


def _table_lines() -> list[str]:
    names = [n for n in (BEFORE, *SCENARIOS, "(not acknowledged)") if n in _TABLE]
    header = (f"{'scenario':<20}{'trials':>7}{'acks=all acked':>15}{'lost':>6}{'dup':>5}{'acks=1 acked':>13}"
              f"{'acks=1 lost':>12}{'offsets back':>13}{'s to full ISRs':>15}")
    lines = [f"per-scenario table, seeds {sorted(_TABLE_SEEDS)} (records by the fault period they were "
             "acknowledged in; acks=1 losses allowed)", header]
    total = dict.fromkeys(TABLE_COLUMNS, 0.0)
    for n in names:
        row = _TABLE[n]
        for c in TABLE_COLUMNS:
            total[c] += row[c]
        mean = f"{row['to_healthy_s'] / row['trials']:.1f}" if row["trials"] else "-"
        lines.append(f"{n:<20}{row['trials']:>7.0f}{row['acked']:>15.0f}{row['lost']:>6.0f}{row['duplicated']:>5.0f}"
                     f"{row['acks1_acked']:>13.0f}{row['acks1_lost']:>12.0f}{row['offsets_backwards']:>13.0f}"
                     f"{mean:>15}")
    mean = f"{total['to_healthy_s'] / total['trials']:.1f}" if total["trials"] else "-"
    lines.append(f"{'total':<20}{total['trials']:>7.0f}{total['acked']:>15.0f}{total['lost']:>6.0f}"
                 f"{total['duplicated']:>5.0f}{total['acks1_acked']:>13.0f}{total['acks1_lost']:>12.0f}"
                 f"{total['offsets_backwards']:>13.0f}{mean:>15}")
    return lines


@pytest.fixture(scope="module", autouse=True)
def fault_table(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module's runs: the per-scenario table."""
    yield
    if _TABLE:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            if reporter is not None:
                reporter.write_line("")
                for line in _SEED_LINES:
                    reporter.write_line(line)
            for line in _table_lines():
                _emit(line, reporter)
        _TABLE.clear()
        _SEED_LINES.clear()
        _TABLE_SEEDS.clear()


@needs_netns
async def test_acks_all_survives_leader_kill_and_isolation(cluster, tmp_path):
    """The `make test` subset: one kill -9 of a leader, one leader isolated from the other brokers
    and ZooKeeper (clients still reach it) for longer than its session."""
    _report(await run(cluster, tmp_path, seed=15, faults=["kill-leader", "isolate-leader"]))


@needs_netns
async def test_acks_all_survives_rolling_restart_and_torn_log(cluster, tmp_path):
    """The other `make test` run: a rolling restart (SIGTERM, controlled shutdown, restart, full
    ISRs, each broker in turn), then a leader killed whose active segments are torn while down."""
    _report(await run(cluster, tmp_path, seed=16, faults=["rolling-restart", "torn-log-dir"]))


@pytest.mark.skipif(not FULL, reason="the long Jepsen-style runs: ODRADEK_FAULT_FULL=1 (make fault)")
@pytest.mark.parametrize("seed", range(1, FULL_SEEDS + 1))
@needs_netns
async def test_jepsen_run(cluster, tmp_path, seed):
    rng = random.Random(seed * 7919)
    faults = [s for s in SCENARIOS for _ in range(FAULTS_PER_SEED // len(SCENARIOS))]
    faults += rng.sample(SCENARIOS, FAULTS_PER_SEED - len(faults))
    rng.shuffle(faults)
    _report(await run(cluster, tmp_path, seed=seed, faults=faults))


def test_checker_finds_each_anomaly():
    """The checker itself (pure logic): each anomaly of a made-up history is reported, and a clean
    history has none."""
    h = History()
    h.acked = {b"a": (0, 0, 0.1), b"b": (0, 1, 0.2), b"c": (0, 2, 0.3), b"d": (1, 0, 0.4)}
    h.failed = {b"e": "KafkaTimeoutError"}
    clean = {(0, 0): b"a", (0, 1): b"b", (0, 2): b"c", (1, 0): b"d"}
    # the group's committed offsets: read-backs that grow, a commit, another read-back at it
    h.group_log = [("read", 0, -1, 0.1), ("commit", 0, 2, 0.2), ("read", 0, 2, 0.3), ("read", 1, 5, 0.3),
                   ("commit", 1, 6, 0.4), ("read", 1, 6, 0.5)]
    assert {k: v for k, v in check(h, [clean, dict(clean)]).items() if k in ANOMALIES and k != "idle-periods"} == {
        "lost": {}, "moved": {}, "duplicated": {}, "divergent": [], "offsets-backwards": []}
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
    # partition 0 read back below a successful commit, partition 1 below an earlier read-back, and
    # partition 2 read back as never committed after a commit
    h.group_log = [("commit", 0, 4, 1.0), ("read", 0, 3, 1.1), ("read", 1, 8, 1.2), ("commit", 1, 9, 1.3),
                   ("read", 1, 9, 1.4), ("read", 1, 7, 1.5), ("read", 1, 9, 1.6), ("commit", 2, 1, 1.7),
                   ("read", 2, -1, 1.8)]
    assert check(h, [clean])["offsets-backwards"] == [(0, 3, 4, 1.1), (1, 7, 9, 1.5), (2, -1, 1, 1.8)]


def test_checker_requires_acknowledgements_in_every_fault_period():
    """A period (before the first fault, or from a fault to the next) with fewer than
    MIN_ACKED_PER_PERIOD acks=all acknowledgements is reported: it tested nothing."""
    h = History()
    h.acked = {b"x%d" % i: (0, i, 0.1 + i / 100) for i in range(MIN_ACKED_PER_PERIOD)}
    h.acked |= {b"y%d" % i: (1, i, 1.0 + i / 100) for i in range(MIN_ACKED_PER_PERIOD)}
    final = {a[:2]: v for v, a in h.acked.items()}
    h.faults = [(0.5, "kill-leader")]
    assert check(h, [final])["idle-periods"] == []
    h.faults = [(0.5, "kill-leader"), (2.0, "isolate-leader")]  # nothing acknowledged after 2.0
    assert check(h, [final])["idle-periods"] == [("isolate-leader", 0)]
    h.faults = [(0.15, "kill-leader")]  # five before it
    assert check(h, [final])["idle-periods"] == [(BEFORE, 5)]
