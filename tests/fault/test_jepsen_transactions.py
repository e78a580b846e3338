"""Jepsen-style transactions checker (issue #22 §3): transactional producers, random aborts, and
the nemesis of tests/fault/nemesis.py, which also targets the transaction coordinator.

A 3-broker ZooKeeper-mode cluster, each broker in its own network namespace, with
__transaction_state in TXN_STATE_PARTITIONS partitions (replication factor 3, min ISR 2) and the
coordinator's timed-out-transaction check every ABORT_CHECK_MS. One topic, 3 partitions,
replication factor 3, min.insync.replicas=2. PRODUCERS confluent-kafka (librdkafka) transactional
producers, each with its own transactional.id and transaction.timeout.ms=TXN_TIMEOUT_MS, run one
transaction after the other: 2-5 unique values over at least two partitions, then a seeded choice
of commit (COMMIT_P) or abort. Each transaction ends:

- committed: commit_transaction returned (possibly after retrying a retriable error, as
  librdkafka's contract says);
- aborted: abort_transaction returned (chosen, or after an error that required it);
- indeterminate: anything else (a fatal error, a retry that never succeeded, or, for HURRY_P of
  the transactions, an end given only a few milliseconds that did not return in them): the
  producer is dropped and a new one with the same transactional.id fences it (init_transactions); such a
  transaction may be either, but all or nothing.

A read_committed consumer reads along from the start of every partition. The nemesis injects the
faults of tests/fault/nemesis.py against the workload topic's leaders, and kill-coordinator /
pause-coordinator / isolate-coordinator: kill -9, SIGSTOP, or cut off from the brokers and
ZooKeeper the broker leading a random producer's __transaction_state partition. After the faults
heal, the producers finish their transaction and are dropped; half of them (seeded) first begin one
more transaction, write its values and drop the producer with it open ("abandoned": only the
coordinator's timeout can abort it, nobody fences it). Then every partition's last stable offset must reach its high watermark
within HANG_S, and a fresh read_committed consumer and a read_uncommitted one read every partition
to its end.

The checker fails on:
- lost: a committed transaction's value missing from the final read_committed read;
- duplicated: a value at two offsets (read_committed or read_uncommitted);
- aborted-visible: an aborted or abandoned transaction's value read by read_committed (final or
  live);
- partial: an indeterminate transaction with some values visible to read_committed and others not;
- uncommitted-read: the live read_committed consumer got a value that the final read_committed
  read does not have (a transaction that later aborted, or never ended: it read past the last
  stable offset);
- divergent: two different values at one offset (read_committed against read_uncommitted, or the
  live consumer against the final reads);
- hanging: a partition whose last stable offset did not reach its high watermark within HANG_S
  after every producer stopped (a transaction nobody completes);
- idle-periods: a fault period with fewer than MIN_COMMITTED_PER_PERIOD committed transactions.

`make test` runs only the checker's own tests (pure logic); ODRADEK_FAULT_FULL=1 (`make fault`)
runs FULL_SEEDS seeds of FAULTS_PER_SEED faults (a trial is one fault) and prints a line per seed
and a table per scenario (appended to $ODRADEK_FAULT_TABLE if set), transactions attributed to the
fault period in which they ended.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from broker.coordinator.partitioner import partition_for
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
    leader_of,
    nemesis,
    progress_since_last_fault,
    seeded_faults,
)
from tests.fault.netns import BROKER_PORT, IDS, HostConnection, NetnsCluster, available
from tests.txn_requests import end_offsets, read_records

FULL = os.environ.get("ODRADEK_FAULT_FULL") == "1"
TOPIC = "jepsen-txn"
PARTITIONS = 3
ASSIGNMENT = {p: [IDS[(p + i) % 3] for i in range(3)] for p in range(PARTITIONS)}
TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 3  # few, so that the 3 producers' ids land on different ones (0, 1, 2)
WATCHED = Watched(TOPIC, PARTITIONS, also=((TXN_STATE, TXN_STATE_PARTITIONS),))
PRODUCERS = 3
TXN_IDS = tuple(f"jepsen-txn-{k}" for k in range(PRODUCERS))
TXN_TIMEOUT_MS = 8000  # a transaction hung by a fault is aborted by its coordinator within the run
ABORT_CHECK_MS = 1000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
HANG_S = TXN_TIMEOUT_MS / 1000 + ABORT_CHECK_MS / 1000 + 30  # the timeout, one check, markers' margin
OP_TIMEOUT_S = 15.0  # init/commit/abort_transaction's timeout
RETRIES = 3  # retries of a retriable commit/abort error before the transaction is indeterminate
COMMIT_P = 0.7
# the chance that a transaction's end is given a few milliseconds and, if that is not enough, its
# producer dropped with EndTxn possibly in flight: an indeterminate transaction that the next
# producer's init_transactions settles (waiting for a commit under way, aborting an open one)
HURRY_P = 0.05
ABANDON_P = 0.5  # the chance that a producer's last transaction is left open when the run stops
TXN_PAUSE_S = 0.05  # between two transactions of a producer
MAX_TXNS_PER_PRODUCER = 20_000  # a bound; the run's end normally stops the producers first
COORDINATOR_SCENARIOS = {"kill-coordinator": "kill-leader", "pause-coordinator": "pause-leader",
                         "isolate-coordinator": "isolate-leader"}
TXN_SCENARIOS = (*SCENARIOS, *COORDINATOR_SCENARIOS)
FULL_SEEDS = 7
FAULTS_PER_SEED = 15  # each of the 10 scenarios once, 5 more: 7 x 15 = 105 trials
MIN_COMMITTED_PER_PERIOD = 1  # the nemesis waits for one (committed_again) before the next fault

# librdkafka's log (its connection errors through every fault) goes to Python logging: pytest shows
# it with a failure instead of flooding `make fault`'s output
CLIENT_LOG = logging.getLogger("jepsen-txn.librdkafka")

UNAVAILABLE = available()
needs_netns = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")


@dataclass
class Txn:
    """One transaction: its values (in send order) and partitions, and how it ended."""

    values: list[bytes]
    # "committed" | "aborted" | "indeterminate" | "abandoned" (left open at the end) | "open" (until it ends)
    outcome: str = "open"
    t: float | None = None  # when it ended
    error: str = ""


@dataclass
class History(FaultLog):
    """What the producers, the live consumer and the nemesis did."""

    txns: dict[str, Txn] = field(default_factory=dict)  # "t<k>-<n>" -> its transaction
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)  # live read_committed: (p, o) -> value
    seen_conflicts: list[tuple[int, int, bytes, bytes]] = field(default_factory=list)
    restarts: int = 0  # producers dropped and replaced (fatal or unresolved errors)
    hanging: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, LSO, HW) still apart
    stable_after: float = 0.0  # seconds from the producers' stop to LSO == HW everywhere


def txn_of(value: bytes) -> str:
    """The transaction a value belongs to: its name is the value without the last '-<i>'."""
    return value.rsplit(b"-", 1)[0].decode()


def _producer(cluster: NetnsCluster, tid: str) -> Producer:
    return Producer({"logger": CLIENT_LOG, "bootstrap.servers": ",".join(cluster.bootstrap()), "transactional.id": tid,
                     "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": TXN_TIMEOUT_MS,
                     "socket.timeout.ms": 4000, "linger.ms": 5, "retry.backoff.ms": 100,
                     "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 2000})


def _end(producer: Producer, commit: bool, timeout: float = OP_TIMEOUT_S) -> None:
    if commit:
        producer.commit_transaction(timeout)
    else:
        producer.abort_transaction(timeout)


def _resolve(producer: Producer, error: KafkaError, commit: bool) -> str:
    """After an error in a transaction, librdkafka's contract: a fatal error leaves the outcome
    open (the producer must go); one that requires an abort is settled by abort_transaction; a
    retriable one by retrying the same end. The outcome, or "indeterminate"."""
    for _ in range(RETRIES):
        if error.fatal():
            return "indeterminate"
        try:
            if error.txn_requires_abort():
                producer.abort_transaction(OP_TIMEOUT_S)
                return "aborted"
            if not error.retriable():
                return "indeterminate"
            _end(producer, commit)
            return "committed" if commit else "aborted"
        except KafkaException as e:
            error = e.args[0]
    return "indeterminate"


def transact(cluster: NetnsCluster, k: int, seed: int, history: History, stop: threading.Event) -> None:
    """Producer k: transactions "t<k>-<n>" of 2-5 values "t<k>-<n>-<i>" over at least two
    partitions, committed or aborted by a seeded choice, until `stop`. A producer whose
    transaction ended indeterminate is dropped (not closed: close() would abort its transaction)
    and replaced by a new one with the same transactional.id, whose init_transactions fences it."""
    rng = random.Random(seed * 1009 + k)
    producer: Producer | None = None
    n = 0
    while not stop.is_set() and n < MAX_TXNS_PER_PRODUCER:
        if producer is None:
            producer = _producer(cluster, TXN_IDS[k])
            try:
                producer.init_transactions(OP_TIMEOUT_S)
            except KafkaException as e:
                history.event(f"producer {k} init_transactions: {e.args[0]}")
                producer = None
                stop.wait(0.5)
                continue
        try:
            producer.begin_transaction()
        except KafkaException as e:  # nothing sent: no transaction to record
            history.event(f"producer {k} begin_transaction: {e.args[0]}")
            history.restarts += 1
            producer = None
            continue
        name = f"t{k}-{n:05d}"
        n += 1
        count = rng.randint(2, 5)
        partitions = rng.sample(range(PARTITIONS), 2) + [rng.randrange(PARTITIONS) for _ in range(count - 2)]
        commit = rng.random() < COMMIT_P
        hurry = rng.random() < HURRY_P
        txn = history.txns[name] = Txn([b"%s-%d" % (name.encode(), i) for i in range(count)])
        try:
            for value, p in zip(txn.values, partitions, strict=True):
                producer.produce(TOPIC, value, partition=p)
            # sent before the end: librdkafka's abort drops what is still queued, and an aborted
            # transaction that wrote nothing would test nothing (what flush leaves, the end settles)
            producer.flush(OP_TIMEOUT_S)
            _end(producer, commit, rng.uniform(0.001, 0.05) if hurry else OP_TIMEOUT_S)
            txn.outcome = "committed" if commit else "aborted"
        except KafkaException as e:
            txn.error = str(e.args[0])
            txn.outcome = "indeterminate" if hurry else _resolve(producer, e.args[0], commit)
        except BufferError as e:  # the local queue is full: nothing more can be sent in this one
            txn.error = repr(e)
            txn.outcome = _resolve(producer, KafkaError(KafkaError._STATE, "queue full", txn_requires_abort=True),
                                   commit)
        txn.t = history.now()
        if txn.outcome == "indeterminate":
            history.event(f"producer {k} {name} indeterminate: {txn.error}")
            history.restarts += 1
            producer = None  # dropped: its transaction is left to the coordinator (fenced or timed out)
        stop.wait(TXN_PAUSE_S)
    if producer is not None and rng.random() < ABANDON_P:
        abandon(producer, f"t{k}-{n:05d}", rng, history)
    elif producer is not None:
        producer.flush(5)


def abandon(producer: Producer, name: str, rng: random.Random, history: History) -> None:
    """A last transaction left open: its values written, and the producer dropped without an end.
    Nobody fences it, so only the coordinator's timeout can abort it (the hanging check waits for
    that); it must never become visible."""
    try:
        producer.begin_transaction()
    except KafkaException as e:
        history.event(f"{name} not begun: {e.args[0]}")
        return
    txn = history.txns[name] = Txn([b"%s-%d" % (name.encode(), i) for i in range(2)], "abandoned", history.now())
    for value, p in zip(txn.values, rng.sample(range(PARTITIONS), 2), strict=True):
        producer.produce(TOPIC, value, partition=p)
    left = producer.flush(OP_TIMEOUT_S)
    history.event(f"{name} abandoned open ({left} values unsent)")


def consume_along(cluster: NetnsCluster, history: History, stop: threading.Event) -> None:
    """The live read_committed consumer: every partition from the start, each offset's value."""
    consumer = Consumer({"logger": CLIENT_LOG, "bootstrap.servers": ",".join(cluster.bootstrap()),
                         "group.id": "jepsen-txn-live",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "topic.metadata.refresh.interval.ms": 2000, "reconnect.backoff.max.ms": 500,
                         "fetch.wait.max.ms": 200})
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not stop.is_set():
            m = consumer.poll(0.2)
            if m is None or m.error():
                continue
            at, value = (m.partition(), m.offset()), m.value()
            old = history.seen.setdefault(at, value)
            if old != value:
                history.seen_conflicts.append((*at, old, value))
    finally:
        consumer.close()


def read_everything(cluster: NetnsCluster, isolation: str) -> dict[tuple[int, int], bytes]:
    """A fresh consumer reads every partition to its end for `isolation` (the last stable offset
    for read_committed), bounded."""
    return read_records(",".join(cluster.bootstrap()), TOPIC, PARTITIONS, isolation, 60.0, logger=CLIENT_LOG)


async def until_stable(cluster: NetnsCluster, history: History) -> None:
    """Until every partition's last stable offset (ListOffsets READ_COMMITTED at its leader) equals
    its high watermark, at most HANG_S; what is still apart then is recorded as hanging."""
    start = time.monotonic()
    apart: list[tuple[int, int, int]] = []
    while time.monotonic() - start < HANG_S:
        view = await cluster.until_all_agree(healthy(WATCHED), "recovered for the stability check")
        apart = []
        try:
            for p in range(PARTITIONS):
                with HostConnection(cluster.ip(leader_of(view, TOPIC, p)), BROKER_PORT) as conn:
                    (hw,) = end_offsets(conn, TOPIC, [p], 0)
                    (lso,) = end_offsets(conn, TOPIC, [p], 1)
                if lso != hw or hw < 0:
                    apart.append((p, lso, hw))
        except OSError as e:
            apart = [(-1, -1, -1)]
            history.event(f"stability check: {e!r}")
        if not apart:
            history.stable_after = round(time.monotonic() - start, 2)
            return
        await asyncio.sleep(0.2)
    history.hanging = apart
    history.event(f"last stable offsets still below the high watermarks after {HANG_S}s: {apart}")


async def committed_again(history: History) -> None:
    """Until a transaction commits after the last fault's injection (the run's start before the
    first): after a recovery the producers must get going again before the next fault, or the
    fault period would test nothing. Not within RECOVER_S is a failure of its own (liveness)."""
    await progress_since_last_fault(
        history, lambda since: any(t.outcome == "committed" and (t.t or 0.0) > since for t in list(history.txns.values())),
        f"no transaction committed within {RECOVER_S}s of the recovery")


ANOMALIES = ("lost", "duplicated", "aborted-visible", "partial", "uncommitted-read", "divergent", "hanging",
             "idle-periods")


def check(history: History, committed_read: dict[tuple[int, int], bytes],
          uncommitted_read: dict[tuple[int, int], bytes]) -> dict[str, Any]:
    """The anomalies (see the module docstring) and the counts."""
    visible: dict[bytes, list[tuple[int, int]]] = {}
    for at, v in committed_read.items():
        visible.setdefault(v, []).append(at)
    written: dict[bytes, list[tuple[int, int]]] = {}
    for at, v in uncommitted_read.items():
        written.setdefault(v, []).append(at)
    by_outcome: dict[str, list[str]] = {}
    for name, txn in history.txns.items():
        by_outcome.setdefault(txn.outcome, []).append(name)
    txns = history.txns
    lost = {v: name for name in by_outcome.get("committed", []) for v in txns[name].values if v not in visible}
    duplicated = {v: at for where in (visible, written) for v, at in where.items() if len(at) > 1}
    live = {v for v in history.seen.values()}
    aborted_visible = {v: name for name in by_outcome.get("aborted", []) + by_outcome.get("abandoned", [])
                       for v in txns[name].values if v in visible or v in live}
    partial = {name: [v in visible for v in txns[name].values] for name in by_outcome.get("indeterminate", [])
               if 0 < sum(v in visible for v in txns[name].values) < len(txns[name].values)}
    uncommitted = {at: v for at, v in history.seen.items() if v not in visible}
    divergent = [(at, v, uncommitted_read.get(at)) for at, v in committed_read.items() if uncommitted_read.get(at) != v]
    divergent += [(at, v, uncommitted_read.get(at)) for at, v in history.seen.items()
                  if at in uncommitted_read and uncommitted_read[at] != v]
    divergent += [((p, o), old, new) for p, o, old, new in history.seen_conflicts]
    starts = [t for t, _ in history.faults]
    per_period = [0] * (len(starts) + 1)  # committed transactions: [before the 1st fault, after the 1st, ...]
    for name in by_outcome.get("committed", []):
        per_period[bisect.bisect_right(starts, txns[name].t or 0.0)] += 1
    names = [BEFORE] + [name for _, name in history.faults]
    idle = [(names[i], n) for i, n in enumerate(per_period) if n < MIN_COMMITTED_PER_PERIOD]
    indeterminate = by_outcome.get("indeterminate", [])
    return {
        "committed": len(by_outcome.get("committed", [])), "aborted": len(by_outcome.get("aborted", [])),
        "indeterminate": len(indeterminate), "abandoned": len(by_outcome.get("abandoned", [])),
        "indeterminate_visible": sum(all(v in visible for v in txns[n].values) for n in indeterminate),
        "read_committed": len(committed_read), "read_uncommitted": len(uncommitted_read),
        "seen_live": len(history.seen), "restarts": history.restarts, "stable_after": history.stable_after,
        "lost": lost, "duplicated": duplicated, "aborted-visible": aborted_visible, "partial": partial,
        "uncommitted-read": uncommitted, "divergent": divergent, "hanging": list(history.hanging),
        "idle-periods": idle,
    }


def coordinator_of(view: dict[str, Any], rng: random.Random) -> int:
    """The broker leading a random producer's __transaction_state partition: its coordinator."""
    return leader_of(view, TXN_STATE, partition_for(rng.choice(TXN_IDS), TXN_STATE_PARTITIONS))


ACTIONS = {name: (scenario, coordinator_of) for name, scenario in COORDINATOR_SCENARIOS.items()}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NetnsCluster]:
    async with fault_cluster(tmp_path, (f"transaction.state.log.num.partitions={TXN_STATE_PARTITIONS}",
                                        f"transaction.abort.timed.out.transaction.cleanup.interval.ms={ABORT_CHECK_MS}"),
                             ) as c:
        yield c


async def run(cluster: NetnsCluster, tmp_path: Path, seed: int, faults: list[str]) -> dict[str, Any]:
    """One run: the workload under `faults`, the wait for stable offsets, the final reads, the check."""
    rng = random.Random(seed)
    threads_before = _threads()
    await asyncio.to_thread(cluster.create_topic, TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
    history = History()
    stop, stop_reading = threading.Event(), threading.Event()
    producers = [threading.Thread(target=transact, args=(cluster, k, seed, history, stop), daemon=True)
                 for k in range(PRODUCERS)]
    reader = threading.Thread(target=consume_along, args=(cluster, history, stop_reading), daemon=True)
    for t in (*producers, reader):
        t.start()
    counts: dict[str, int] = {}
    try:
        # the producers' FindCoordinator creates __transaction_state
        await cluster.until_all_agree(healthy(WATCHED), "the topics created", timeout=60)
        await nemesis(cluster, WATCHED, history, rng, faults, counts, ACTIONS, progress=lambda: committed_again(history))
        await asyncio.sleep(1.0)  # transactions on the recovered cluster too
    except AssertionError as e:
        dump_logs(cluster, tmp_path)
        raise AssertionError(f"seed {seed}: {e}\nevents: {history.events}\nbroker logs in {tmp_path}") from e
    finally:
        stop.set()
        cluster.heal()
        for t in producers:
            await asyncio.to_thread(t.join, 3 * OP_TIMEOUT_S * RETRIES)
        history.event("producers stopped")
        try:
            await until_stable(cluster, history)
        finally:
            stop_reading.set()
            await asyncio.to_thread(reader.join, 30)
    assert not any(t.is_alive() for t in (*producers, reader)), "a client thread did not end within its bounds"
    committed_read = await asyncio.to_thread(read_everything, cluster, "read_committed")
    uncommitted_read = await asyncio.to_thread(read_everything, cluster, "read_uncommitted")
    result = check(history, committed_read, uncommitted_read)
    result["faults"] = counts
    result["seed"] = seed
    result["seconds"] = round(history.now(), 1)
    result["threads_left"] = _threads() - threads_before
    anomalies = {k: result[k] for k in ANOMALIES if result[k]}
    _tally(history, result)
    if anomalies:
        dump_logs(cluster, tmp_path)
        history.events.sort()
        raise AssertionError(
            f"seed {seed}: anomalies {_short(anomalies)}\ncounts { {k: v for k, v in result.items() if k not in ANOMALIES} }"
            f"\ntransactions: { {n: history.txns[n] for n in _named_txns(anomalies)} }"
            f"\nevents: {history.events}\nbroker logs in {tmp_path}")
    return result


def _threads() -> int:
    """This process's threads, librdkafka's included: a client not destroyed shows here."""
    return len(os.listdir("/proc/self/task"))


def _named_txns(anomalies: dict[str, Any]) -> list[str]:
    """Up to 10 transactions that the anomalies name, to print."""
    names: list[str] = []
    for k in ("lost", "aborted-visible"):
        names += list(anomalies.get(k, {}).values())[:5]
    names += list(anomalies.get("partial", {}))[:5]
    names += [txn_of(v) for v in list(anomalies.get("uncommitted-read", {}).values())[:5]]
    return sorted(set(names))[:10]


def _short(anomalies: dict[str, Any]) -> dict[str, Any]:
    return {k: (len(v), list(v.items())[:10] if isinstance(v, dict) else v[:10]) for k, v in anomalies.items()}


def _report(result: dict[str, Any]) -> None:
    line = (f"seed {result['seed']}: {result['seconds']}s faults {result['faults']} transactions: committed "
            f"{result['committed']} aborted {result['aborted']} indeterminate {result['indeterminate']} "
            f"(visible {result['indeterminate_visible']}) abandoned {result['abandoned']}; producers replaced {result['restarts']}; read_committed "
            f"{result['read_committed']} of {result['read_uncommitted']} records, live {result['seen_live']}; "
            f"lost 0 dup 0 aborted-visible 0 partial 0 uncommitted-read 0 divergent 0 hanging 0 "
            f"(LSO = HW {result['stable_after']}s after the producers stopped); "
            f"{result['threads_left']} client threads left")
    TABLE.report(line)


# the per-scenario table over every run of the module: scenario -> column -> sum
TABLE_COLUMNS = ("trials", "committed", "aborted", "indeterminate", "lost", "duplicated", "aborted_visible",
                 "partial", "uncommitted_read", "hanging", "to_healthy_s")
TABLE = FaultTable(TABLE_COLUMNS)


def _tally(history: History, result: dict[str, Any]) -> None:
    """Add a run to the table: each transaction (and each anomaly) to the fault whose period (its
    injection to the next one's) holds the moment the transaction ended; hanging to the last."""
    def period(name: str | None) -> str:
        txn = history.txns.get(name) if name is not None else None
        return TABLE.period(history, txn.t if txn is not None else None, "(never ended)")

    TABLE.add_trials(history, result["seed"])
    for name, txn in history.txns.items():
        if txn.outcome in ("committed", "aborted", "indeterminate"):
            TABLE.add(period(name), txn.outcome)
    for column, key in (("lost", "lost"), ("aborted_visible", "aborted-visible")):
        for name in result[key].values():
            TABLE.add(period(name), column)
    for name in result["partial"]:
        TABLE.add(period(name), "partial")
    for v in result["duplicated"]:
        TABLE.add(period(txn_of(v)), "duplicated")
    for v in result["uncommitted-read"].values():
        TABLE.add(period(txn_of(v)), "uncommitted_read")
    if result["hanging"]:
        TABLE.add(TABLE.period(history, history.now(), ""), "hanging", len(result["hanging"]))


def _table_lines() -> list[str]:
    header = (f"{'scenario':<20}{'trials':>7}{'committed':>10}{'aborted':>8}{'indeterm.':>10}{'lost':>5}{'dup':>4}"
              f"{'aborted visible':>16}{'partial':>8}{'uncommitted read':>17}{'hanging':>8}{'s to full ISRs':>15}")
    lines = [f"per-scenario table, seeds {sorted(TABLE.seeds)} (transactions by the fault period they ended in)",
             header]
    for n, row, mean in TABLE.rows_with_total((BEFORE, *TXN_SCENARIOS, "(never ended)")):
        lines.append(f"{n:<20}{row['trials']:>7.0f}{row['committed']:>10.0f}{row['aborted']:>8.0f}"
                     f"{row['indeterminate']:>10.0f}{row['lost']:>5.0f}{row['duplicated']:>4.0f}"
                     f"{row['aborted_visible']:>16.0f}{row['partial']:>8.0f}{row['uncommitted_read']:>17.0f}"
                     f"{row['hanging']:>8.0f}{mean:>15}")
    return lines


@pytest.fixture(scope="module", autouse=True)
def fault_table(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module's runs: the per-scenario table."""
    yield
    TABLE.after_module(request.config, _table_lines)


@pytest.mark.skipif(not FULL, reason="the long Jepsen-style runs: ODRADEK_FAULT_FULL=1 (make fault)")
@pytest.mark.parametrize("seed", range(1, FULL_SEEDS + 1))
@needs_netns
async def test_jepsen_transactions(cluster, tmp_path, seed):
    _report(await run(cluster, tmp_path, seed=seed, faults=seeded_faults(seed, TXN_SCENARIOS, FAULTS_PER_SEED)))


def _history(**txns: tuple[str, int]) -> History:
    """A made-up history: name -> (outcome, number of values), ended at t=1.0."""
    h = History()
    h.txns = {n: Txn([b"%s-%d" % (n.encode(), i) for i in range(c)], o, 1.0) for n, (o, c) in txns.items()}
    return h


def test_checker_finds_each_anomaly():
    """The checker itself (pure logic): each anomaly of a made-up history is reported, and a clean
    history has none."""
    h = _history(**{"t0-00000": ("committed", 2), "t0-00001": ("aborted", 2), "t1-00000": ("indeterminate", 2),
                    "t1-00001": ("indeterminate", 2)})
    uncommitted = {(0, 0): b"t0-00000-0", (1, 0): b"t0-00000-1", (0, 1): b"t0-00001-0", (1, 1): b"t0-00001-1",
                   (0, 2): b"t1-00000-0", (1, 2): b"t1-00000-1", (0, 3): b"t1-00001-0"}
    committed = {(0, 0): b"t0-00000-0", (1, 0): b"t0-00000-1"}  # t1-00000 aborted, t1-00001 too
    h.seen = dict(committed)
    clean = check(h, committed, uncommitted)
    checked = [k for k in ANOMALIES if k != "idle-periods"]  # one committed transaction: its own test
    assert {k: clean[k] for k in checked if clean[k]} == {}
    assert (clean["committed"], clean["aborted"], clean["indeterminate"], clean["indeterminate_visible"]) == (1, 1, 2, 0)
    # t1-00000 committed after all: visible whole, fine
    both = {**committed, (0, 2): b"t1-00000-0", (1, 2): b"t1-00000-1"}
    assert {k for k in checked if check(h, both, uncommitted)[k]} == set()
    assert check(h, both, uncommitted)["indeterminate_visible"] == 1
    # a committed value lost; an aborted one visible; an indeterminate one half visible
    bad = {(0, 0): b"t0-00000-0", (0, 1): b"t0-00001-0", (0, 2): b"t1-00000-0"}
    r = check(h, bad, uncommitted)
    assert r["lost"] == {b"t0-00000-1": "t0-00000"}
    assert r["aborted-visible"] == {b"t0-00001-0": "t0-00001"}
    assert r["partial"] == {"t1-00000": [True, False]}
    assert r["uncommitted-read"] == {(1, 0): b"t0-00000-1"}  # the live consumer saw what is gone
    # the live consumer saw an aborted value (read past the LSO), at an offset that holds it
    h.seen = {**committed, (0, 1): b"t0-00001-0"}
    r = check(h, committed, uncommitted)
    assert r["uncommitted-read"] == {(0, 1): b"t0-00001-0"}
    assert r["aborted-visible"] == {b"t0-00001-0": "t0-00001"}
    # a value twice; a read_committed value at an offset holding another; a live conflict
    h.seen = dict(committed)
    h.seen_conflicts = [(0, 0, b"t0-00000-0", b"x-0")]
    r = check(h, {**committed, (1, 5): b"t0-00000-1"}, {**uncommitted, (1, 5): b"t0-00000-0"})
    assert r["duplicated"] == {b"t0-00000-1": [(1, 0), (1, 5)], b"t0-00000-0": [(0, 0), (1, 5)]}
    assert r["divergent"] == [((1, 5), b"t0-00000-1", b"t0-00000-0"), ((0, 0), b"t0-00000-0", b"x-0")]
    # a partition still unstable after the producers stopped
    h.seen_conflicts = []
    h.hanging = [(2, 10, 14)]
    assert check(h, committed, uncommitted)["hanging"] == [(2, 10, 14)]


def test_checker_requires_commits_in_every_fault_period():
    """A fault period with fewer than MIN_COMMITTED_PER_PERIOD committed transactions is reported:
    it tested nothing."""
    h = _history(**{f"t0-{i:05d}": ("committed", 2) for i in range(MIN_COMMITTED_PER_PERIOD)})
    committed = {(0, i * 2 + j): v for i, t in enumerate(h.txns.values()) for j, v in enumerate(t.values)}
    h.faults = [(0.5, "kill-coordinator")]  # every commit at t=1.0
    assert check(h, committed, committed)["idle-periods"] == [(BEFORE, 0)]
    h.faults = []
    assert check(h, committed, committed)["idle-periods"] == []
