"""The nemesis the Jepsen-style checkers share (tests/fault/test_jepsen_replication.py and
test_jepsen_transactions.py): seeded faults on a NetnsCluster (tests/fault/netns.py), the wait for a
recovered cluster between two faults, and the log of what was done and when.

Scenarios (each hits one broker, the victim, chosen by the caller from the cluster's view):

- kill-leader: kill -9 the victim, restart it after a while (once its session expired: as Kafka's,
  a broker restarted before that refuses to start);
- kill-two: kill -9 the victim and another broker, restart both (meanwhile acks=all cannot be
  satisfied: min.insync.replicas=2);
- pause-leader: SIGSTOP the victim for longer than its ZooKeeper session, then SIGCONT (a zombie
  leader must not acknowledge acks=all writes);
- isolate-leader: cut the victim off from the other brokers and ZooKeeper while the clients still
  reach it, longer than the session, then heal;
- isolate-follower: cut the victim off from the other brokers (the ISRs it is in shrink, then
  expand);
- rolling-restart: SIGTERM each broker in turn, the victim first (a controlled shutdown: the
  controller moves its leaderships away first), wait for it to exit, restart it, and wait for full
  ISRs before the next;
- torn-log-dir: kill -9 the victim, and while it is down cut 1 byte to 4 KiB off the active
  segment of some of the workload topic's partitions (and maybe append garbage to another's), then
  restart it: it must truncate the torn tail and fetch again from the new leader.

A workload may name more scenarios that do one of these to another victim (the transactional
workload's kill-coordinator is a kill-leader of the broker leading a transactional id's
__transaction_state partition): `ACTIONS` maps them. "Recovered" is every partition of the
watched topics led and all three replicas in its ISR, on every live broker's metadata.
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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fault.netns import IDS, NetnsCluster

SESSION_MS = 3000
RECOVER_S = 45.0
SCENARIOS = ("kill-leader", "kill-two", "pause-leader", "isolate-leader", "isolate-follower", "rolling-restart",
             "torn-log-dir")
TEAR_MAX = 4096  # torn-log-dir cuts 1..TEAR_MAX bytes (never more than the segment holds)
# the overrides every fault cluster runs with: followers leave the ISR fast, and no rebalance moves
# leaders behind the nemesis' back
CLUSTER_OVERRIDES = (f"replica.lag.time.max.ms={SESSION_MS // 2}", "min.insync.replicas=2",
                     "auto.leader.rebalance.enable=false")


@dataclass
class FaultLog:
    """What the nemesis did, with times relative to the run's start."""

    t0: float = field(default_factory=time.monotonic)
    events: list[tuple[float, str]] = field(default_factory=list)
    faults: list[tuple[float, str]] = field(default_factory=list)  # (injected at, scenario)
    healthy_after: list[float] = field(default_factory=list)  # seconds from each fault to full ISRs
    controlled_shutdowns: list[bool] = field(default_factory=list)  # rolling-restart: each one's success
    tears: list[tuple[str, int]] = field(default_factory=list)  # torn-log-dir: ("cut" | "garbage", bytes)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def event(self, text: str) -> None:
        self.events.append((round(self.now(), 2), text))


@dataclass(frozen=True)
class Watched:
    """The topics whose partitions the nemesis watches: `topic` is the workload's (its leaders are
    the victims, its segments are torn), `also` more topics (name -> partition count) that must
    have full ISRs too before the next fault (e.g. __transaction_state)."""

    topic: str
    partitions: int
    also: tuple[tuple[str, int], ...] = ()

    def topics(self) -> tuple[tuple[str, int], ...]:
        return ((self.topic, self.partitions), *self.also)


def leader_of(view: dict[str, Any], topic: str, p: int) -> int:
    return view["topics"][topic][2][p][1]


def healthy(watched: Watched) -> Callable[[dict[str, Any]], bool]:
    """The check of a recovered cluster: every watched partition led, all three replicas in ISR."""
    def check(view: dict[str, Any]) -> bool:
        for topic, n in watched.topics():
            parts = view["topics"].get(topic, (0, None, {}))[2]
            if not (len(parts) == n and all(s[0] == 0 and s[1] in IDS and sorted(s[4]) == list(IDS)
                                            for s in parts.values())):
                return False
        return True
    return check


def tear(log_dir: Path, watched: Watched, log: FaultLog, rng: random.Random) -> None:
    """A crash's torn writes in a stopped broker's log dir: 1..TEAR_MAX bytes (at most the file)
    cut off the active segment (the newest .log) of a random non-empty subset of the workload
    topic's partition directories; half the time also random bytes appended to another's."""
    active = {}
    for q in range(watched.partitions):
        segments = sorted((log_dir / f"{watched.topic}-{q}").glob("*.log"))
        if segments:
            active[q] = segments[-1]
    assert active, f"no {watched.topic} partition directory in {log_dir}"
    torn = rng.sample(sorted(active), rng.randint(1, len(active)))
    for q in torn:
        size = active[q].stat().st_size
        if size == 0:
            log.event(f"{active[q].parent.name}/{active[q].name} is empty: nothing to cut")
            continue
        cut = rng.randint(1, min(size, TEAR_MAX))
        os.truncate(active[q], size - cut)
        log.tears.append(("cut", cut))
        log.event(f"cut {cut} of {size} bytes off {active[q].parent.name}/{active[q].name}")
    if rng.random() < 0.5:
        q = rng.choice([q for q in sorted(active) if q not in torn] or torn)
        garbage = rng.randbytes(rng.randint(1, TEAR_MAX))
        with open(active[q], "ab") as f:
            f.write(garbage)
        log.tears.append(("garbage", len(garbage)))
        log.event(f"appended {len(garbage)} garbage bytes to {active[q].parent.name}/{active[q].name}")


async def inject(cluster: NetnsCluster, watched: Watched, log: FaultLog, rng: random.Random, name: str,
                 victim: int) -> None:
    """One fault (a scenario of SCENARIOS) on broker `victim`, held until it took effect (the
    others saw its session expire, or the ISRs shrink) and a random while more, then undone."""
    b = cluster.brokers[victim]
    assert b.proc is not None
    others = [i for i in IDS if i != victim]
    topic = watched.topic

    async def expired(gone: tuple[int, ...] = (victim,)) -> None:
        """Until the other brokers no longer list the victims (their ZooKeeper sessions expired):
        the proof that the fault took effect."""
        await cluster.until_all_agree(lambda m: not set(gone) & {x[0] for x in m["brokers"]},
                                      f"broker {gone}'s session expired", among=[i for i in IDS if i not in gone],
                                      timeout=RECOVER_S)
        log.event(f"broker {gone}'s session expired")

    if name == "kill-leader":
        b.kill()
        await asyncio.sleep(rng.uniform(0.2, 3.0))
        # as Kafka's, a broker restarted before its old session expired refuses to start
        # (its /brokers/ids znode still belongs to the old session): wait for the expiry
        await expired()
        log.event(f"restart broker {victim}")
        await asyncio.to_thread(b.start)
    elif name == "kill-two":
        second = rng.choice(others)
        log.event(f"kill broker {second} too")
        b.kill()
        cluster.brokers[second].kill()
        await asyncio.sleep(rng.uniform(0.2, 3.0))
        await expired((victim, second))
        for i in rng.sample([victim, second], 2):
            log.event(f"restart broker {i}")
            await asyncio.to_thread(cluster.brokers[i].start)
    elif name == "pause-leader":
        b.proc.send_signal(signal.SIGSTOP)
        await expired()
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        log.event(f"SIGCONT broker {victim}")
        b.proc.send_signal(signal.SIGCONT)
    elif name == "rolling-restart":
        for i in [victim, *rng.sample(others, 2)]:
            broker = cluster.brokers[i]
            mark = len(broker.lines)
            log.event(f"SIGTERM broker {i}")
            code = await asyncio.to_thread(broker.stop, 60)
            controlled = any("Controlled shutdown request returned successfully" in line
                             for line in broker.lines[mark:])
            log.event(f"broker {i} exited {code}, controlled shutdown {'done' if controlled else 'FAILED'}")
            log.controlled_shutdowns.append(controlled)
            assert code == 0, f"broker {i} exited {code} after SIGTERM"
            await asyncio.to_thread(broker.start)
            log.event(f"restarted broker {i}")
            await cluster.until_all_agree(healthy(watched), f"full ISRs after broker {i}'s restart",
                                          timeout=RECOVER_S)
            log.event(f"full ISRs after broker {i}'s restart")
    elif name == "torn-log-dir":
        b.kill()
        await expired()
        tear(b.log_dir, watched, log, rng)
        log.event(f"restart broker {victim}")
        mark = len(b.lines)
        await asyncio.to_thread(b.start)
        # a cut that ends on a batch boundary leaves nothing invalid: counted, not required
        truncated = [line for line in b.lines[mark:] if "invalid bytes at the end of segment" in line
                     and f"/{topic}-" in line]
        log.tears.append(("truncated", len(truncated)))
        log.event(f"broker {victim} recovered: {truncated}")
    elif name == "isolate-leader":
        cluster.cut(victim, peers=True, zookeeper=True)
        await expired()
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        log.event(f"heal broker {victim}")
        cluster.heal(victim)
    elif name == "isolate-follower":
        # still in ZooKeeper, the victim keeps leading what it led (with its ISR frozen: the
        # controller is out of its reach, as in Kafka); the partitions it follows drop it
        cluster.cut(victim, peers=True)
        await cluster.until_all_agree(
            lambda m: all(victim not in s[4] for s in m["topics"][topic][2].values() if s[1] != victim),
            f"broker {victim} out of the ISRs of the partitions it follows", among=others, timeout=RECOVER_S)
        log.event(f"broker {victim} out of the ISRs it follows")
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        log.event(f"heal broker {victim}")
        cluster.heal(victim)
    else:
        raise AssertionError(f"unknown scenario {name}")


# picks the victim of a workload's own scenario: (the cluster's view, the rng) -> broker id
VictimChooser = Callable[[dict[str, Any], random.Random], int]


async def progress_since_last_fault(log: FaultLog, made: Callable[[float], bool], failure: str) -> None:
    """Until `made(since)` holds, `since` the last fault's injection (the run's start before the
    first), polled every 0.1 s: a nemesis `progress` step, so that the workload gets going again
    after a recovery and each fault period tests something. Not within RECOVER_S is a failure
    of its own (liveness): AssertionError(`failure`)."""
    since = log.faults[-1][0] if log.faults else 0.0
    deadline = time.monotonic() + RECOVER_S
    while not made(since):
        assert time.monotonic() < deadline, failure
        await asyncio.sleep(0.1)


async def nemesis(cluster: NetnsCluster, watched: Watched, log: FaultLog, rng: random.Random, faults: list[str],
                  counts: dict[str, int], actions: dict[str, tuple[str, VictimChooser]] | None = None,
                  progress: Callable[[], Awaitable[None]] | None = None) -> None:
    """Inject `faults` in order; before each, wait for a recovered cluster (and, with `progress`,
    for the workload to make progress again: each fault period then has some) and a random while.
    A fault of SCENARIOS hits the leader of a random partition of the workload topic (a follower
    for isolate-follower); one named in `actions` does its scenario to the broker its chooser
    picks."""
    recovered = healthy(watched)
    topic = watched.topic
    for name in faults:
        view = await cluster.until_all_agree(recovered, f"recovered before {name}", timeout=RECOVER_S)
        if log.faults:
            log.healthy_after.append(round(log.now() - log.faults[-1][0], 2))
        if progress is not None:
            await progress()
            view = await cluster.until_all_agree(recovered, f"recovered before {name}", timeout=RECOVER_S)
        await asyncio.sleep(rng.uniform(0.5, 2.0))
        p = rng.randrange(watched.partitions)
        leader = leader_of(view, topic, p)
        scenario = name
        if actions and name in actions:
            scenario, choose = actions[name]
            victim = choose(view, rng)
        elif name == "isolate-follower":
            # a follower cut from its peers leaves the ISRs through the controller (AlterPartition):
            # when it is the controller itself, no ISR can change (as in Kafka) -- so not the controller
            victim = rng.choice([i for i in IDS if i not in (leader, view["controller_id"])])
        else:
            victim = leader
        log.event(f"{name} broker {victim} (partition {p}, leaders "
                  f"{[leader_of(view, topic, q) for q in range(watched.partitions)]}, epochs "
                  f"{[view['topics'][topic][2][q][2] for q in range(watched.partitions)]})")
        log.faults.append((log.now(), name))
        await inject(cluster, watched, log, rng, scenario, victim)
        counts[name] = counts.get(name, 0) + 1
    view = await cluster.until_all_agree(recovered, "recovered after the last fault", timeout=RECOVER_S)
    if log.faults:
        log.healthy_after.append(round(log.now() - log.faults[-1][0], 2))
    log.event(f"recovered, leaders {[leader_of(view, topic, q) for q in range(watched.partitions)]}")


@asynccontextmanager
async def fault_cluster(tmp_path: Path, overrides: tuple[str, ...] = ()) -> AsyncIterator[NetnsCluster]:
    """The checkers' 3-broker cluster (CLUSTER_OVERRIDES and `overrides`), closed on the way out
    whatever happened."""
    c = NetnsCluster(tmp_path, (*CLUSTER_OVERRIDES, *overrides), session_ms=SESSION_MS)
    try:
        await c.open()
        yield c
    finally:
        await c.close()


def dump_logs(cluster: NetnsCluster, tmp_path: Path) -> None:
    """Each broker's log next to the test's data, for the failure message to point at."""
    for i, b in cluster.brokers.items():
        (tmp_path / f"broker-{i}.log").write_text(b.log_text())


def emit(line: str, reporter: Any = None) -> None:
    """Print a line (through pytest's terminal reporter when given: shown without -s) and append
    it to $ODRADEK_FAULT_TABLE if set."""
    if reporter is not None:
        reporter.write_line(line)
    else:
        print(line)
    if os.environ.get("ODRADEK_FAULT_TABLE"):
        with open(os.environ["ODRADEK_FAULT_TABLE"], "a") as f:
            f.write(line + "\n")


def seeded_faults(seed: int, scenarios: tuple[str, ...], per_seed: int) -> list[str]:
    """A seed's faults: every scenario per_seed // len(scenarios) times, the rest drawn without
    repetition, shuffled -- all from the seed."""
    rng = random.Random(seed * 7919)
    faults = [s for s in scenarios for _ in range(per_seed // len(scenarios))]
    faults += rng.sample(scenarios, per_seed - len(faults))
    rng.shuffle(faults)
    return faults


def write_summary(config: Any, seed_lines: list[str], table_lines: list[str]) -> None:
    """At a module's end: its runs' lines again, then its table (emitted), outside pytest's
    capture so that they show without -s."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        if reporter is not None:
            reporter.write_line("")
            for line in seed_lines:
                reporter.write_line(line)
        for line in table_lines:
            emit(line, reporter)


BEFORE = "(before 1st fault)"


class FaultTable:
    """A module's per-scenario table: sums per (fault period, column) over its runs, a fault period
    being a fault's injection to the next one's (BEFORE: the run's start to the first). Each run
    adds its trials (`add_trials`: one per fault, with the seconds to full ISRs) and what the
    workload counts (`add`, attributed with `period`); `report` prints a run's line, and
    `after_module` the lines again and the table built by `lines` under the module's header."""

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self.rows: dict[str, dict[str, float]] = {}
        self.seeds: list[int] = []
        self.seed_lines: list[str] = []

    @staticmethod
    def period(log: FaultLog, t: float | None, unknown: str) -> str:
        """The fault period holding moment t (`unknown` for None)."""
        if t is None:
            return unknown
        i = bisect.bisect_right([s for s, _ in log.faults], t) - 1
        return BEFORE if i < 0 else log.faults[i][1]

    def add(self, name: str, column: str, n: float = 1) -> None:
        self.rows.setdefault(name, dict.fromkeys(self.columns, 0))[column] += n

    def add_trials(self, log: FaultLog, seed: int) -> None:
        for (_, name), seconds in zip(log.faults, log.healthy_after, strict=False):
            self.add(name, "trials")
            self.add(name, "to_healthy_s", seconds)
        self.seeds.append(seed)

    def report(self, line: str) -> None:
        self.seed_lines.append(line)
        emit(line)

    def rows_with_total(self, order: tuple[str, ...]) -> list[tuple[str, dict[str, float], str]]:
        """(name, row, mean seconds to full ISRs) for each period in `order` that has a row, then
        the total."""
        out = []
        total = dict.fromkeys(self.columns, 0.0)
        for name in [n for n in order if n in self.rows] + ["total"]:
            row = total if name == "total" else self.rows[name]
            if name != "total":
                for c in self.columns:
                    total[c] += row[c]
            out.append((name, row, f"{row['to_healthy_s'] / row['trials']:.1f}" if row["trials"] else "-"))
        return out

    def after_module(self, config: Any, lines: Callable[[], list[str]]) -> None:
        """At the module's end: its runs' lines and the table (when it ran any), then empty."""
        if self.rows:
            write_summary(config, self.seed_lines, lines())
        self.rows.clear()
        self.seeds.clear()
        self.seed_lines.clear()
