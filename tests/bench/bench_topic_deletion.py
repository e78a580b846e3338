"""Deleting many topics at once in a ZooKeeper-mode cluster (issue #21 §8), Odradek's brokers and
Apache Kafka 3.9's side by side, each on the same real ZooKeeper with the same settings as
bench_cluster (three brokers, session timeout 6 s).

A round is one fresh cluster: TOPICS topics of one partition, replication factor 3, are created
(CreateTopics to the controller, in requests of CREATE_BATCH) and awaited in every broker's
Metadata; then one DeleteTopics names them all, sent to the controller as Kafka's AdminClient
does, and right after it a CreateTopics of one new topic (what a client auto-creating a topic
does while the deletion runs). Timed from the DeleteTopics:

  * its response (Kafka's broker answers once its metadata lacks the topics, or at timeout_ms);
  * until every broker's Metadata lacks every deleted topic (first broker and last);
  * until ZooKeeper holds none of them: no /brokers/topics/<t>, /config/topics/<t> or
    /admin/delete_topics/<t> (polled with getChildren every POLL_S);
  * until the new topic is led in every broker's Metadata (what the user's clients waited for).

    python -m tests.bench.bench_topic_deletion [--rounds 2] [--topics 1000] [--systems odradek,kafka]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from broker.logging_setup import configure_logging
from controller.zk.client import ZooKeeperClient
from protocol.messages import CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest
from protocol.messages import create_topics_request as ct
from protocol.messages import metadata_request as mr
from tests.bench.bench_cluster import (
    BROKERS,
    SESSION_TIMEOUT_MS,
    SYSTEMS,
    WAIT_S,
    BenchClient,
    Cluster,
    Round,
    alternate_rounds,
    cell,
    controller_id,
    log,
    until_all,
)
from tests.broker_process import LoggedProcess
from tests.cluster.control_requests import Client
from tests.compat.jvm import kafka_version
from tests.zookeeper import ZooKeeperServer

POLL_S = 0.1
CREATE_BATCH = 200
FRESH = "fresh"
ZNODE_PARENTS = ("/brokers/topics", "/config/topics", "/admin/delete_topics")


async def topic_leaders(client: Client, topics: Sequence[str]) -> dict[str, int]:
    """topic -> leader of its partition 0 (-1: none), for the topics the broker knows."""
    resp = await client.send(MetadataRequest(topics=[mr.MetadataRequestTopic(name=t) for t in topics],
                                             allow_auto_topic_creation=False), 12)
    return {t.name: next((p.leader_id for p in t.partitions if p.partition_index == 0 and p.error_code == 0), -1)
            for t in resp.topics if t.error_code == 0}


async def until_every_broker(clients: dict[int, Client], topics: Sequence[str],
                             cond: Callable[[dict[str, int]], bool], what: str) -> dict[int, float]:
    """Poll every broker's Metadata of `topics` until `cond` holds on each; when each first held."""

    async def one(bid: int, client: Client) -> float:
        deadline = time.perf_counter() + WAIT_S * 3
        while True:
            seen = await topic_leaders(client, topics)
            t = time.perf_counter()
            if cond(seen):
                return t
            if t > deadline:
                raise TimeoutError(f"broker {bid}: {what} not within {WAIT_S * 3:.0f} s")
            await asyncio.sleep(POLL_S)

    times = await asyncio.gather(*(one(b, c) for b, c in clients.items()))
    return dict(zip(clients, times, strict=True))


async def create_topics(admin: Client, names: Sequence[str]) -> None:
    resp = await admin.send(CreateTopicsRequest(timeout_ms=int(WAIT_S * 1000), topics=[
        ct.CreatableTopic(name=n, num_partitions=1, replication_factor=3) for n in names]))
    errors = {t.name: t.error_code for t in resp.topics if t.error_code}
    if errors:
        raise RuntimeError(f"CreateTopics: errors {dict(list(errors.items())[:5])}")


async def until_znodes_gone(zk: ZooKeeperClient, names: set[str]) -> float:
    deadline = time.perf_counter() + WAIT_S * 3
    while True:
        children = await asyncio.gather(*(zk.get_children(p) for p in ZNODE_PARENTS))
        t = time.perf_counter()
        if not any(names & set(c) for c in children):
            return t
        if t > deadline:
            raise TimeoutError(f"znodes of deleted topics still there after {WAIT_S * 3:.0f} s")
        await asyncio.sleep(POLL_S)


async def run_round(system: str, make: Callable[[Path, str, int], LoggedProcess], zk_server: ZooKeeperServer,
                    work: Path, chroot: str, topics: int, logs: Path | None) -> Round:
    r = Round()
    zk = await ZooKeeperClient(zk_server.connect_string(chroot), session_timeout_ms=30_000,
                               request_timeout_ms=30_000).start(create_chroot=True)
    cluster = Cluster(make, work, zk_server.connect_string(chroot))
    names = [f"doomed-{i:04d}" for i in range(topics)]
    creator: BenchClient | None = None
    try:
        await cluster.start(BROKERS)
        await until_all(cluster.clients, [], lambda v: v.brokers == set(BROKERS) and v.controller_id in BROKERS,
                        "three brokers and a controller")
        ctrl = await controller_id(zk)
        admin = cluster.clients[ctrl]
        # its own connection: a broker answers one connection's requests in order, so on the
        # admin's the CreateTopics would wait for the DeleteTopics' answer
        creator = BenchClient(cluster.brokers[ctrl].port)  # type: ignore[attr-defined]
        log(f"  {system}: creating {topics} topics")
        t0 = time.perf_counter()
        for i in range(0, topics, CREATE_BATCH):
            await create_topics(admin, names[i:i + CREATE_BATCH])
        await until_every_broker(cluster.clients, names, lambda seen: all(seen.get(n, -1) >= 0 for n in names),
                                 "all topics led")
        r.notes["create_s"] = time.perf_counter() - t0

        log(f"  {system}: DeleteTopics of {topics} topics, then CreateTopics {FRESH}")
        t0 = time.perf_counter()
        deleting = asyncio.ensure_future(admin.send(
            DeleteTopicsRequest(topic_names=names, timeout_ms=int(WAIT_S * 1000)), 5))
        # when its answer came, not when this round got to look (after the new topic's steps)
        delete_answered: list[float] = []
        deleting.add_done_callback(lambda _: delete_answered.append(time.perf_counter()))
        gone_zk = asyncio.ensure_future(until_znodes_gone(zk, set(names)))
        gone_md = asyncio.ensure_future(until_every_broker(
            cluster.clients, names, lambda seen: not seen.keys() & set(names), "deleted topics gone"))
        await asyncio.sleep(0)  # the DeleteTopics goes out first
        t_fresh = time.perf_counter()
        await create_topics(creator, [FRESH])
        r.add("fresh_response", time.perf_counter() - t_fresh)
        fresh = await until_every_broker(cluster.clients, [FRESH], lambda seen: seen.get(FRESH, -1) >= 0,
                                         "new topic led")
        r.add("fresh_all", max(fresh.values()) - t_fresh)
        resp = await deleting
        r.add("delete_response", delete_answered[0] - t0)
        errors = {t.name: t.error_code for t in resp.responses if t.error_code}
        r.notes["delete_errors"] = len(errors)
        r.notes["not_reached"] = ""
        try:
            seen = await gone_md
            r.add("delete_md_first", min(seen.values()) - t0)
            r.add("delete_md_all", max(seen.values()) - t0)
        except TimeoutError:
            r.notes["not_reached"] += "Metadata "
        try:
            r.add("delete_zk", await gone_zk - t0)
        except TimeoutError:
            r.notes["not_reached"] += "ZooKeeper"
        log(f"  {system}: " + ", ".join(f"{k} {v[0]:.2f}" for k, v in r.values.items())
            + (f"; not within {WAIT_S * 3:.0f} s: {r.notes['not_reached']}" if r.notes["not_reached"] else ""))
    finally:
        if creator is not None:
            await creator.close()
        await cluster.close(logs, chroot.strip("/"))
        await zk.close()
    return r


ROWS = [
    ("delete_response", "DeleteTopics of {n} topics (1 partition, RF 3): response"),
    ("delete_md_first", "... all gone from the first broker's Metadata"),
    ("delete_md_all", "... all gone from every broker's Metadata"),
    ("delete_zk", "... all gone from ZooKeeper (/brokers/topics, /config/topics, /admin/delete_topics)"),
    ("fresh_response", "CreateTopics of one new topic sent right after the DeleteTopics: response"),
    ("fresh_all", "... new topic led in every broker's Metadata"),
]


def report(results: dict[str, list[Round]], topics: int, rounds: int) -> list[str]:
    systems = list(results)
    out = [f"Three brokers on one ZooKeeper 3.8 (Debian's package), "
           f"`zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}`, {rounds} round(s) per system, each on a "
           f"fresh cluster; seconds as median (min-max). Metadata and ZooKeeper polled every "
           f"{POLL_S * 1000:.0f} ms.", "",
           "| step | " + " | ".join(SYSTEMS[s][0] for s in systems) + " |",
           "|---|" + "---:|" * len(systems)]
    for key, label in ROWS:
        cells = []
        for s in systems:
            vals = [v for r in results[s] for v in r.values.get(key, [])]
            cells.append(cell(vals))
        out.append(f"| {label.format(n=f'{topics:,}')} | " + " | ".join(cells) + " |")
    out += ["", "| per round | " + " | ".join(SYSTEMS[s][0] for s in systems) + " |",
            "|---|" + "---:|" * len(systems)]
    for key, label in (("create_s", f"creating the {topics:,} topics until led everywhere, s"),
                       ("delete_errors", "DeleteTopics rows with an error (timed out)"),
                       ("not_reached", f"deletion not seen within {WAIT_S * 3:.0f} s in"),
                       ("load", "machine load average (1 min) at the round's start and end, mean")):
        cells = []
        for s in systems:
            vals = [r.notes[key] for r in results[s] if key in r.notes]
            cells.append(", ".join(f"{v:.1f}" if isinstance(v, float) else str(v).strip() or "-" for v in vals))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out += ["", NOTES]
    return out


NOTES = """\
How: the topics are created in CreateTopics requests of 200 and awaited with a leader in every
broker's Metadata; then one DeleteTopics (v5) names all of them, sent to the controller, and at
once a CreateTopics of one more topic. A broker counts at the first Metadata response (v12, the
deleted topics named) that lacks every deleted topic; ZooKeeper counts when none of their znodes
is left under /brokers/topics, /config/topics and /admin/delete_topics. Both systems run on the
same two cores, one round of each in turn. Regenerate alone with
`python -m tests.bench.bench_topic_deletion` (`--logs DIR` keeps every broker's log)."""


async def run(systems: list[str], rounds: int, topics: int, base: Path,
              logs: Path | None) -> dict[str, list[Round]]:
    return await alternate_rounds(systems, rounds, base, lambda s, zk_server, work, i: run_round(
        s, SYSTEMS[s][1], zk_server, work, f"/del-{s}-{i}", topics, logs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--systems", default="odradek,kafka")
    ap.add_argument("--logs", type=Path, default=None, help="write every broker's log lines here")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)),
                    help="below 1: one round of a tenth of the topics (a smoke run)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    configure_logging("WARNING")
    rounds, topics = args.rounds, args.topics
    if args.scale < 1:
        rounds, topics = 1, max(10, topics // 10)
    systems = [s for s in args.systems.split(",") if s]
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-deletion-"))
    try:
        results = asyncio.run(run(systems, rounds, topics, base, args.logs))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = report(results, topics, rounds)
    if "kafka" in systems:
        out.append(f"\nKafka {kafka_version()} from build/java/kafka, ZooKeeper mode, -Xmx512m, serial GC.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
