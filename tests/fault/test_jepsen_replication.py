"""Jepsen-style replication checker (issue #15's fault tests), after Jepsen's Kafka workload.

A 3-broker ZooKeeper-mode cluster, each broker in its own network namespace (tests/fault/netns.py).
One topic, 3 partitions, replication factor 3, min.insync.replicas=2. Several idempotent
kafka-python producers send with acks=all, every value unique, and one more with acks=1 (whose
losses are allowed, and counted); a live consumer reads along from the start of every partition,
and a consumer-group member reads too, committing (synchronously) what it read after each poll and
reading the group's committed offsets back every half second. Meanwhile a nemesis
(tests/fault/nemesis.py, shared with the transactional checker) injects faults one after the other,
at random moments and for random durations (seeded, the seed is printed), each on the leader of a
random partition (a follower for isolate-follower): kill-leader, kill-two, pause-leader (longer
than the ZooKeeper session: a zombie leader must not acknowledge acks=all writes), isolate-leader
(from the brokers and ZooKeeper, the clients still reach it), isolate-follower, rolling-restart
(SIGTERM: controlled shutdowns) and torn-log-dir (a killed leader's active segments cut or
garbage-extended while it is down); nemesis.py describes each.

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
import os
import random
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fault.nemesis import (
    BEFORE,
    RECOVER_S,
    SCENARIOS,
    FaultLog,
    FaultTable,
    Watched,
    dump_logs,
    fault_cluster,
    healthy,
    nemesis,
    progress_since_last_fault,
    seeded_faults,
)
from tests.fault.netns import IDS, NetnsCluster, available

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

FULL = os.environ.get("ODRADEK_FAULT_FULL") == "1"
TOPIC = "jepsen"
PARTITIONS = 3
ASSIGNMENT = {p: [IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)}
WATCHED = Watched(TOPIC, PARTITIONS)
PRODUCERS = 3
RATE = 300  # records/s per producer: a steady load through every fault of a long run
MAX_RECORDS_PER_PRODUCER = 200_000  # a bound; the run's end normally stops the producers first
FULL_SEEDS = 7
FAULTS_PER_SEED = 15  # each scenario twice and one more: 7 x 15 = 105 trials
GROUP = "jepsen-group"
READ_BACK_S = 0.5  # how often the group member reads its group's committed offsets back

UNAVAILABLE = available()
needs_netns = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")


@dataclass
class History(FaultLog):
    """What the clients and the nemesis did, with times relative to the run's start."""

    acked: dict[bytes, tuple[int, int, float]] = field(default_factory=dict)  # value -> partition, offset, t
    acked1: dict[bytes, tuple[int, int, float]] = field(default_factory=dict)  # the same, of acks=1 sends
    failed: dict[bytes, str] = field(default_factory=dict)  # value -> error of a send not acknowledged
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)  # live consumer: (partition, offset) -> value
    seen_conflicts: list[tuple[int, int, bytes, bytes, float]] = field(default_factory=list)
    # the group member, in the order it happened: ("commit" | "read", partition, offset, t); a read
    # of no committed offset is -1
    group_log: list[tuple[str, int, int, float]] = field(default_factory=list)
    group_errors: int = 0  # commits and read-backs that failed (retried on the next poll)
    group_rewinds: int = 0  # polls that gave records below what was committed (re-read after a rejoin)


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


async def acked_again(history: History) -> None:
    """Until MIN_ACKED_PER_PERIOD acks=all records are acknowledged after the last fault's
    injection (the run's start before the first): the producers must get going again -- and,
    before the first fault, get going at all (bootstrap, InitProducerId) -- before the next
    fault, or the fault period would test nothing (seed 16 once injected its first fault 1.07 s
    in, before any acknowledgement). Not within RECOVER_S is a failure of its own (liveness)."""
    await progress_since_last_fault(
        history, lambda since: sum(1 for _, _, t in list(history.acked.values()) if t > since) >= MIN_ACKED_PER_PERIOD,
        f"fewer than {MIN_ACKED_PER_PERIOD} acknowledgements within {RECOVER_S}s")


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


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NetnsCluster]:
    async with fault_cluster(tmp_path) as c:
        yield c


async def run(cluster: NetnsCluster, tmp_path: Path, seed: int, faults: list[str]) -> dict[str, Any]:
    """One run: the workload under `faults`, then the final reads and the check."""
    rng = random.Random(seed)
    await asyncio.to_thread(cluster.create_topic, TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
    await cluster.until_all_agree(healthy(WATCHED), "the topic created")
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
        await nemesis(cluster, WATCHED, history, rng, faults, counts, progress=lambda: acked_again(history))
        await asyncio.sleep(1.0)  # the producers write on the recovered cluster too
    except AssertionError as e:
        dump_logs(cluster, tmp_path)
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
        dump_logs(cluster, tmp_path)
        history.events.sort()
        raise AssertionError(
            f"seed {seed}: anomalies {_short(anomalies)}\ncounts { {k: v for k, v in result.items() if k not in anomalies} }"
            f"\nacked at: { {v: history.acked.get(v) for v in list(result['lost'])[:10]} }"
            f"\nevents: {history.events}\nbroker logs in {tmp_path}")
    return result


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
    TABLE.report(line)


# the per-scenario table over every run of the session: scenario -> column -> sum
TABLE_COLUMNS = ("trials", "acked", "lost", "duplicated", "acks1_acked", "acks1_lost", "offsets_backwards",
                 "to_healthy_s")
TABLE = FaultTable(TABLE_COLUMNS)


def _tally(history: History, result: dict[str, Any], present: set[bytes]) -> None:
    """Add a run to the table: each record to the fault whose period (its injection to the next
    one's) holds the moment the record was acknowledged (lost, duplicated, backwards likewise)."""
    def period(t: float | None) -> str:
        return TABLE.period(history, t, "(not acknowledged)")

    TABLE.add_trials(history, result["seed"])
    for v, (_p, _o, t) in history.acked.items():
        TABLE.add(period(t), "acked")
        if v not in present:
            TABLE.add(period(t), "lost")
    for v, (_p, _o, t) in history.acked1.items():
        TABLE.add(period(t), "acks1_acked")
        if v not in present:
            TABLE.add(period(t), "acks1_lost")
    for v in result["duplicated"]:
        at = history.acked.get(v) or history.acked1.get(v)
        TABLE.add(period(at[2] if at else None), "duplicated")
    for _p, _o, _high, t in result["offsets-backwards"]:
        TABLE.add(period(t), "offsets_backwards")


def _table_lines() -> list[str]:
    header = (f"{'scenario':<20}{'trials':>7}{'acks=all acked':>15}{'lost':>6}{'dup':>5}{'acks=1 acked':>13}"
              f"{'acks=1 lost':>12}{'offsets back':>13}{'s to full ISRs':>15}")
    lines = [f"per-scenario table, seeds {sorted(TABLE.seeds)} (records by the fault period they were "
             "acknowledged in; acks=1 losses allowed)", header]
    for n, row, mean in TABLE.rows_with_total((BEFORE, *SCENARIOS, "(not acknowledged)")):
        lines.append(f"{n:<20}{row['trials']:>7.0f}{row['acked']:>15.0f}{row['lost']:>6.0f}{row['duplicated']:>5.0f}"
                     f"{row['acks1_acked']:>13.0f}{row['acks1_lost']:>12.0f}{row['offsets_backwards']:>13.0f}"
                     f"{mean:>15}")
    return lines


@pytest.fixture(scope="module", autouse=True)
def fault_table(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module's runs: the per-scenario table."""
    yield
    TABLE.after_module(request.config, _table_lines)


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
    _report(await run(cluster, tmp_path, seed=seed, faults=seeded_faults(seed, SCENARIOS, FAULTS_PER_SEED)))


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
